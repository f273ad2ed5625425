"""GridEngineBackend: the dispatch Backend over Son of Grid Engine's commands (qsub, qstat, qacct, qalter,
qrls, qhold, qdel), built on :mod:`dispatch.adapterkit`.

Implements Backend, Holder, MultiFinder, NodeInventory and ShapeCheck (polled; not Requeuer, OutputReader or
CessationSignal). A running job's progress reports (:mod:`dispatch.gridengine.progress`) come with its state.
A command that cannot be run or times out is Unavailable for reads; for writes OutcomeUnknown once it may have
acted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path

from dispatch.accelerators import Inventory
from dispatch.adapterkit import CommandResult, CommandRunner, InstanceBook, check_hold, check_open, check_release
from dispatch.adapterkit.holds import decode_instance, encode_instance, matches
from dispatch.adapterkit.identity import execution_identity, submission_of
from dispatch.adapterkit.private import private_dir
from dispatch.adapterkit.programs import program
from dispatch.adapterkit.storage import storage_answer, storage_paths
from dispatch.capabilities import Capabilities, Capability, CapabilityAnswer, Provenance, no, yes
from dispatch.capabilities import unknown as unknown_answer
from dispatch.clock import Clock
from dispatch.declarations import UNBOUNDED, Declarations, PolledLoss
from dispatch.errors import NotFound, OutcomeUnknown, ReadOnly, Rejected, Unavailable
from dispatch.extensions import ExtensionPolicy, SharedCheckpoint
from dispatch.gridengine import progress, submit
from dispatch.gridengine.gpus import parse_qhost, qhost_argv
from dispatch.gridengine.mapping import (
    ACCOUNTING_LAG,
    GATE_CONTEXT,
    HOLD_CONTEXT,
    awaiting_accounting,
    ended_outcome,
    live_reading,
)
from dispatch.gridengine.parse import (
    AccountingRecord,
    JobDetail,
    LiveJob,
    ParseError,
    parse_detail,
    parse_duration,
    parse_qacct,
    parse_qstat,
)
from dispatch.gridengine.settings import GridEngineSettings
from dispatch.outcome import Cause, Evidence, Outcome, State
from dispatch.spec import JobSpec
from dispatch.spi import ExecutionEvidence, Found, Gate, JobEvidence, StartRequest, StoragePaths, Unanswered

NAME = "gridengine"
HOLD_DATE = "203712312359"
"""The earliest start time a dispatch hold sets (2037-12-31 23:59, within Grid Engine's 32-bit times)."""
_QACCT_LOOP = program("dispatch.gridengine", "qacct-jobs.sh")
"""``programs/qacct-jobs.sh``: ``@@job <id>`` and then ``qacct -j <id>``'s output, for each job id ``$1...``."""
_QACCT_MARKERS = program("dispatch.gridengine", "qacct-markers.sh")
"""``programs/qacct-markers.sh``: ``qacct -j <name>``'s stdout for each job name ``$1...``."""


class GridEngineBackend:
    """One Grid Engine cell, reached with its commands on this host."""

    def __init__(self, settings: GridEngineSettings, clock: Clock, *, read_only: bool = False) -> None:
        self.settings = settings
        self.clock = clock
        self._read_only = read_only
        env = dict(os.environ)
        env.update(SGE_ROOT=settings.sge_root, SGE_CELL=settings.sge_cell, LC_ALL="C")  # times: local, as parsed
        self.runner = CommandRunner(timeout=settings.call_timeout, env=env)
        base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
        self.state_dir = Path(settings.state_dir or os.path.join(base, "dispatch", "gridengine"))
        self.book = InstanceBook(self.state_dir / "holds.json")
        self.output_dir = settings.output_dir or os.path.join(os.path.expanduser("~"), "dispatch-output")
        self.config = self._global_config()
        self.version = self._version()
        self.gpus = self._probe_gpus()
        self.container = self._probe_container(env.get("PATH"))
        self._exclusion: CapabilityAnswer | None = None
        """NodeExclusion, probed at the first capabilities() (:meth:`_exclusion_answer`)."""
        self._in_qstat: dict[str, float] = {}
        """When this backend last saw each job in qstat: one missing from qstat and qacct since is Unanswered."""

    # ----- plumbing ---------------------------------------------------------------------------------------------

    def _read(self, argv: Sequence[str], what: str) -> CommandResult:
        r = self.runner.read(argv)
        if not r.ok:
            raise Unavailable(f"{what}: {(r.stderr or r.stdout).strip()[:300]}")
        return r

    def _write(self, argv: Sequence[str], what: str, *, stdin: str | None = None) -> CommandResult:
        r = self.runner.write(argv, stdin=stdin)
        if not r.ok:
            text = (r.stderr or r.stdout).strip()
            if re.search(r"does not exist|denied: job .* does not exist", text):
                raise NotFound(f"{what}: {text[:300]}")
            raise Rejected(f"{what}: {text[:300]}")
        return r

    def _writable(self) -> None:
        if self._read_only:
            raise ReadOnly("this Grid Engine backend was opened read-only")

    def _global_config(self) -> dict[str, str]:
        text = self._read(["qconf", "-sconf", "global"], "qconf -sconf").stdout
        out: dict[str, str] = {}
        key = ""
        for line in text.splitlines():
            if line.startswith((" ", "\t")) and key:
                out[key] += " " + line.strip().rstrip("\\").strip()
                continue
            parts = line.split(None, 1)
            if parts:
                key = parts[0]
                out[key] = parts[1].rstrip("\\").strip() if len(parts) > 1 else ""
        return out

    def _probe_gpus(self) -> Inventory | None:
        """The hosts' GPU complex values (None when qhost could not be read, or the cell has no GPU complex)."""
        names = self.settings.complexes
        if names.gpu is None:
            return None
        r = self.runner.read(qhost_argv(names.gpu, names.gpu_type))
        if not r.ok:
            return None
        return parse_qhost(r.stdout, names.gpu, names.gpu_type, self.settings.queue or "cell")

    def accelerators(self) -> Inventory | None:
        return self.gpus

    @staticmethod
    def _probe_container(path: str | None) -> CapabilityAnswer:
        """ContainerImage: no either way, naming what is missing. Apptainer is looked up in this host's PATH (where
        the cell's commands run); where it is found, the adapter still starts no rank through it (no cell with
        Apptainer has tested that)."""
        found = shutil.which("apptainer", path=path)
        if found is None:
            return no("apptainer is not found in PATH on the submit host", Provenance.PROBED)
        return no(
            f"apptainer is at {found}, but the Grid Engine adapter starts no rank through it (images run on Slurm"
            " and Kubeflow)",
            Provenance.PROBED,
        )

    def _exclusion_answer(self) -> CapabilityAnswer:
        """NodeExclusion, probed once: ``qsub -w v`` (the scheduler verifies the job as if the cell were empty and
        submits nothing) of a job excluding a host that cannot exist must find a queue; a cell that refuses the
        Boolean host expression, or finds no queue for it, answers no."""
        if self._exclusion is None:
            probe = "dispatch-probe.invalid"
            argv = ["qsub", "-w", "v", *(["-q", self.settings.queue] if self.settings.queue else [])]
            argv += ["-b", "y", *submit.exclusion_options((probe,)), "true"]
            r = self.runner.read(argv)
            text = (r.stdout + r.stderr).strip()
            if "found suitable queue" in text:
                self._exclusion = yes(
                    "qsub -l hostname=!(host|...): a Boolean host expression (probed: qsub -w v)", Provenance.PROBED
                )
            else:
                self._exclusion = no(
                    f"the cell did not verify a job with -l hostname=!({probe}): {text[:200]}", Provenance.PROBED
                )
        return self._exclusion

    def never_runs(self, spec: JobSpec) -> str | None:
        """ShapeCheck: only what this adapter can never submit (several nodes or processes: no parallel
        environment). CPUs and memory per host are not judged: a cell's slots and memory complexes, not the
        hosts' NCPU and MEMTOT, decide what a queue gives, so the scheduler decides."""
        return submit.never_runs(spec)

    def schedulable_nodes(self, spec: JobSpec) -> frozenset[str] | None:
        """NodeInventory: the hosts of the adapter's queue (every queue's without one), in every state, from the
        queue instances ``qselect`` lists (``queue@host``). A read; None when it lists none."""
        r = self.runner.read(["qselect", *(["-q", self.settings.queue] if self.settings.queue else [])])
        hosts = {line.strip().split("@", 1)[1] for line in r.stdout.splitlines() if "@" in line} if r.ok else set()
        return frozenset(hosts) or None

    def _version(self) -> str:
        r = self.runner.read(["qstat", "-help"])
        return (r.stdout.splitlines() or ["unknown"])[0].strip()

    # ----- identity ---------------------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return NAME

    @property
    def read_only(self) -> bool:
        return self._read_only

    def capabilities(self) -> Capabilities:
        caps = Capabilities(
            {
                Capability.CONTAINER_IMAGE: self.container,
                Capability.NATIVE_REQUEUE: no("jobs are submitted not rerunnable (qsub -r n)"),
                Capability.NATIVE_RESTART: no("Grid Engine restarts no job in place unless it is rerunnable"),
                Capability.HOLD: yes("a dispatch hold is a far-future start time (qalter -a) named in the job context"),
                Capability.PRE_TERMINATION_SIGNAL: no("a stop is qdel: SIGKILL without notice (no qsub -notify)"),
                Capability.ACCOUNTING_HISTORY: yes("qacct reads ended jobs from the cell's accounting file"),
                Capability.ATTEMPT_INJECTION: yes("DISPATCH_EXECUTION=<N>.<job id>.0 is exported by the job script"),
                Capability.WORKING_DIRECTORY: yes("qsub -wd"),
                Capability.PROCS_PER_NODE: no("one slot per job: no parallel environment is used"),
                Capability.OUTPUT_PATH: no("output goes to the adapter's output directory"),
                Capability.OUTPUT_READ: no("the adapter does not read output back"),
                Capability.OUTPUT_FOLLOW: no("the adapter does not read output back"),
                Capability.OUTPUT_RETAINED: yes("output files stay in the output directory"),
                Capability.READMISSION_GATE: no("nothing readmits a Grid Engine job"),
                Capability.NODE_EXCLUSION: self._exclusion_answer(),
                Capability.ACCELERATORS: (
                    self.gpus.answer()
                    if self.gpus is not None
                    else unknown_answer(
                        "qhost -F could not be read, or the setting complexes.gpu is unset", Provenance.PROBED
                    )
                ),
                Capability.SHARED_STORAGE: storage_answer(self.settings.shared_storage),
                Capability.PROGRESS_REPORTING: yes(
                    "the rank writes <output dir>/<marker>.<job id>.progress/rank-<r>.json beside its output (the "
                    "output directory this host and the execution hosts share); read with qstat's listing"
                ),
                Capability.BATCH_THROTTLE: no("a batch is submitted as jobs of their own, not as one array with -tc"),
            }
        )
        return caps.lowered_for_read_only() if self._read_only else caps

    def shared_storage(self) -> StoragePaths:
        return storage_paths(self.settings.shared_storage, NAME)

    def declarations(self) -> Declarations:
        unknown = parse_duration(self.config.get("reschedule_unknown", "0")) or 0.0
        unheard = parse_duration(self.config.get("max_unheard", "00:05:00")) or 300.0
        window = UNBOUNDED if unknown == 0 else unheard + unknown + 60.0
        return Declarations(
            node_loss_window=window,
            call_bound=self.settings.call_timeout + 10.0,
            polled_loss=PolledLoss(state=UNBOUNDED, cause=UNBOUNDED, exit_code=UNBOUNDED, execution=UNBOUNDED),
        )

    def extension_policy(self) -> ExtensionPolicy:
        return ExtensionPolicy(accepted=frozenset({SharedCheckpoint.kind}))

    # ----- writes -----------------------------------------------------------------------------------------------

    def render(self, request: StartRequest) -> str:
        """The qsub command and job script :meth:`start` would submit (nothing runs)."""
        import shlex

        job = self._build(request)
        return f"{shlex.join(job.argv)} <<'EOF'\n{job.script}EOF\n"

    def _build(self, request: StartRequest) -> submit.QsubJob:
        self.extension_policy().check(request.spec.extensions, NAME)
        return submit.build(request, self.settings, self.output_dir)

    def start(self, request: StartRequest) -> str:
        self._writable()
        job = self._build(request)
        private_dir(job.output_dir, "outputDir")
        r = self.runner.write(job.argv, stdin=job.script)
        if not r.ok:
            raise Rejected(f"qsub: {(r.stderr or r.stdout).strip()[:300]}")
        jid = r.stdout.strip().split(".")[0]
        if not jid.isdigit():
            raise OutcomeUnknown(f"qsub answered {r.stdout.strip()[:100]!r}, not a job id")
        return jid

    def open(self, scheduler_id: str) -> None:
        self._writable()
        ev = self.inspect(scheduler_id)
        if not check_open(ev):
            return
        jid = ev.scheduler_id
        # lift the gate first, then record it opened: a cut in between reads as open (no user hold left)
        self._write(["qrls", "-h", "u", jid], f"qrls {jid}")
        self.runner.write(["qalter", "-ac", f"{GATE_CONTEXT}=open", jid])  # a job that already left qstat: fine

    def hold(self, scheduler_id: str, instance: str) -> None:
        self._writable()
        ev = self.inspect(scheduler_id)
        waiting = ev.outcome.state.waiting
        if not check_hold(
            ev.scheduler_id, ev.holds, instance, waiting=waiting, state=ev.outcome.state.value, matches=matches
        ):
            return
        code = decode_instance(self.book.remember(instance))
        self._write(
            ["qalter", "-a", HOLD_DATE, "-ac", f"{HOLD_CONTEXT}={code}", ev.scheduler_id], f"hold {ev.scheduler_id}"
        )

    def release(self, scheduler_id: str, instance: str) -> None:
        self._writable()
        ev = self.inspect(scheduler_id)
        if not check_release(ev.scheduler_id, ev.holds, instance, matches=matches):
            return
        now = datetime.fromtimestamp(time.time()).strftime("%Y%m%d%H%M.%S")
        self._write(["qalter", "-a", now, "-dc", HOLD_CONTEXT, ev.scheduler_id], f"release {ev.scheduler_id}")

    def stop_job(self, scheduler_id: str) -> float:
        self._writable()
        ev = self.inspect(scheduler_id)
        if ev.outcome.state.ended:
            return 0.0
        stops = self.state_dir / "stops"
        stops.mkdir(parents=True, exist_ok=True, mode=0o700)
        # before qdel: Grid Engine records neither who deleted a job nor, for one deleted while waiting, the job
        (stops / ev.scheduler_id).write_text(
            json.dumps({"name": ev.marker, "ran": ev.current is not None and ev.current.started_at is not None})
        )
        r = self.runner.write(["qdel", ev.scheduler_id])
        if not r.ok and "does not exist" not in (r.stderr + r.stdout):
            raise Rejected(f"qdel {ev.scheduler_id}: {(r.stderr or r.stdout).strip()[:300]}")
        return self.settings.call_timeout + 10.0

    def _stopped(self, jid: str) -> bool:
        return (self.state_dir / "stops" / jid).exists()

    def _stopped_at(self, jid: str) -> float | None:
        try:
            return (self.state_dir / "stops" / jid).stat().st_mtime
        except OSError:
            return None

    def _stopped_unrecorded(self, jid: str, now: float) -> JobEvidence | None:
        """A job this adapter deleted while it waited: qacct keeps no record of it, the stop file does. None
        for a job that was running when stopped (its qacct record is still to come)."""
        try:
            note = json.loads((self.state_dir / "stops" / jid).read_text() or "{}")
        except (OSError, ValueError):
            note = {}
        if not isinstance(note, dict) or note.get("ran"):
            return None
        name = note.get("name")
        detail = "deleted by dispatch while waiting (Grid Engine keeps no record of such a job)"
        outcome = Outcome(State.CANCELLED, Cause.CANCELLED, Evidence("dispatch stop record", now), detail=detail)
        n = submission_of(name)
        execution = ExecutionEvidence(execution_identity(n, jid, 0), 0, outcome)
        return JobEvidence(jid, name, outcome, Gate.OPEN, (), (), (execution,))

    # ----- reads ------------------------------------------------------------------------------------------------

    def _live(self) -> list[LiveJob]:
        try:
            return parse_qstat(self._read(["qstat", "-xml", "-u", "*"], "qstat").stdout)
        except ParseError as exc:
            raise Unavailable(str(exc)) from None

    def _held(self, kind: str) -> set[str]:
        try:
            return {j.job_id for j in parse_qstat(self._read(["qstat", "-xml", "-u", "*", "-s", kind], "qstat").stdout)}
        except ParseError as exc:
            raise Unavailable(str(exc)) from None

    def _details(self, jids: Sequence[str]) -> dict[str, JobDetail]:
        if not jids:
            return {}
        r = self.runner.read(["qstat", "-xml", "-j", ",".join(jids)])
        try:
            return parse_detail(r.stdout) if r.stdout.strip().startswith("<") else {}
        except ParseError as exc:
            raise Unavailable(str(exc)) from None

    def _accounting(self, jids: Sequence[str]) -> dict[str, list[AccountingRecord]]:
        if not jids:
            return {}
        r = self.runner.read(["bash", "-c", _QACCT_LOOP, "_", *jids])
        out: dict[str, list[AccountingRecord]] = {}
        try:
            for part in r.stdout.split("@@job ")[1:]:
                jid, _, body = part.partition("\n")
                recs = parse_qacct(body)
                if recs:
                    out[jid.strip()] = sorted(recs, key=lambda x: x.end or 0.0)
        except ParseError as exc:
            raise Unavailable(str(exc)) from None
        return out

    def inspect(self, scheduler_id: str) -> JobEvidence:
        jid = _job_id(scheduler_id)
        ev = self.inspect_many([jid]).get(jid)
        if isinstance(ev, Unanswered):  # one job: worth a second's wait for qacct to record it
            self.clock.sleep(1.0)
            ev = self.inspect_many([jid]).get(jid)
        if isinstance(ev, Unanswered):
            raise Unavailable(f"Grid Engine job {jid}: {ev.reason}")
        if ev is None:
            raise NotFound(f"Grid Engine job {jid} is neither in qstat nor in qacct")
        return ev

    def inspect_many(self, scheduler_ids: Sequence[str]) -> Mapping[str, JobEvidence | Unanswered]:
        jids = [_job_id(i) for i in scheduler_ids]
        if not jids:
            return {}
        now = self.clock.now()
        live = {j.job_id: j for j in self._live() if j.job_id in set(jids)}
        held = any("h" in j.state for j in live.values())
        user = self._held("hu") if held else set()
        other = {k: self._held(k) for k in ("ho", "hs")} if held else {"ho": set(), "hs": set()}
        details = self._details(sorted(live))
        self._in_qstat = {j: t for j, t in self._in_qstat.items() if now - t <= ACCOUNTING_LAG}
        self._in_qstat.update(dict.fromkeys(live, now))
        gone = [j for j in jids if j not in live]
        acct = self._accounting(gone)
        missing = [j for j in gone if j not in acct]
        unseen = [j for j in missing if j not in self._in_qstat and not self._stopped(j)]
        if unseen:  # never seen in qstat by this process: it may have left it a moment ago, ask qacct once more
            self.clock.sleep(1.0)
            acct.update(self._accounting(unseen))
            missing = [j for j in missing if j not in acct]
        out: dict[str, JobEvidence | Unanswered] = {}
        for jid, job in live.items():
            d = details.get(jid, JobDetail(jid))
            names = tuple(n for k, n in (("ho", "operator hold"), ("hs", "system hold")) if jid in other[k])
            reading = live_reading(job, jid in user, names, d.context, d.execution_time, Evidence("qstat", now))
            n = submission_of(job.name)
            started = job.start if reading.outcome.state.value == "running" else None
            identity = execution_identity(n, jid, 0)
            reports = (
                progress.reports_of(progress.read_raw(progress.directory(self.output_dir, job.name, jid)), identity)
                if reading.outcome.state is State.RUNNING and job.name
                else ()
            )  # plain reads of the shared output directory: no command per job
            execution = ExecutionEvidence(
                identity, 0, reading.outcome, started, None, (job.host,) if job.host else (), progress=reports
            )
            hold = self.book.name(encode_instance(reading.hold)) if reading.hold else None
            out[jid] = JobEvidence(
                jid,
                job.name or None,
                reading.outcome,
                Gate.CLOSED if reading.gate_closed else Gate.OPEN,
                (hold,) if hold else (),
                (reading.foreign_hold,) if reading.foreign_hold else (),
                (execution,),
            )
        for jid in missing:
            stopped = self._stopped(jid)
            unrecorded = self._stopped_unrecorded(jid, now) if stopped else None
            if unrecorded is not None:
                out[jid] = unrecorded
                continue
            reason = awaiting_accounting(self._in_qstat.get(jid), self._stopped_at(jid) if stopped else None, now)
            if reason is not None:  # answered as not yet, without holding up the other jobs of the batch
                out[jid] = Unanswered(jid, reason, now)
        for jid, recs in acct.items():
            self._in_qstat.pop(jid, None)
            rec = recs[-1]
            outcome = ended_outcome(rec, self._stopped(jid), Evidence("qacct", now))
            n = submission_of(rec.name)
            ran = rec.start is not None and rec.start > 0
            execution = ExecutionEvidence(
                execution_identity(n, jid, 0), 0, outcome, rec.start if ran else None, rec.end, (rec.host,)
            )
            out[jid] = JobEvidence(jid, rec.name or None, outcome, Gate.OPEN, (), (), (execution,))
        return out

    def find(self, marker: str, since: float) -> list[Found]:
        return self.find_many([marker], since).get(marker, [])

    def find_many(self, markers: Sequence[str], since: float) -> Mapping[str, list[Found]]:
        wanted = list(dict.fromkeys(markers))
        found: dict[str, dict[str, Found]] = {m: {} for m in wanted}
        for j in self._live():
            if j.name in found and (j.submitted is None or j.submitted >= since - 1):
                found[j.name][j.job_id] = Found(j.job_id, j.name, j.submitted)
        if wanted:
            r = self.runner.read(["bash", "-c", _QACCT_MARKERS, "_", *wanted])
            try:
                for rec in parse_qacct(r.stdout):
                    if rec.name in found and (rec.submitted is None or rec.submitted >= since - 1):
                        found[rec.name].setdefault(rec.job_id, Found(rec.job_id, rec.name, rec.submitted))
            except ParseError as exc:
                raise Unavailable(str(exc)) from None
        return {m: sorted(v.values(), key=lambda f: int(f.scheduler_id)) for m, v in found.items()}

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"GridEngineBackend({self.settings.sge_root}/{self.settings.sge_cell}, {self.version})"


def _job_id(scheduler_id: str) -> str:
    jid = str(scheduler_id).strip()
    if not jid.isdigit():
        raise NotFound(f"{scheduler_id!r} is not a Grid Engine job id")
    return jid
