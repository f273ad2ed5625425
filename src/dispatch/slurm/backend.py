"""SlurmBackend: the dispatch Backend over Slurm's commands, one script per operation.

Implements Backend, Holder, Requeuer, MultiFinder, CessationSignal and OutputReader (not Watcher: it is
polled). Errors follow :mod:`dispatch.slurm.errors`; a transport failure is Unavailable when the script never
started and, for writes, OutcomeUnknown once it may have run.
"""

from __future__ import annotations

import base64
import posixpath
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from dispatch.capabilities import Capabilities, Capability
from dispatch.clock import Clock, SystemClock
from dispatch.declarations import Declarations
from dispatch.errors import NotFound, OutcomeUnknown, ReadOnly, Rejected, Unavailable
from dispatch.extensions import CessationWarning, ExtensionPolicy, Output, SharedCheckpoint
from dispatch.outcome import Evidence
from dispatch.slurm import errors as slurm_errors
from dispatch.slurm import preflight, submit
from dispatch.slurm.extensions import Placement, Resources
from dispatch.slurm.holds import decode_hold, encode_hold
from dispatch.slurm.mapping import outcome_of
from dispatch.slurm.parse import (
    SACCT_TEXT_FIELDS,
    ParseError,
    SlurmJob,
    config_seconds,
    dialect_of,
    filter_jobs,
    parse_sacct,
    parse_sacct_text,
    parse_sbatch_id,
    parse_squeue,
)
from dispatch.slurm.scripts import CallOutput, Script, ScriptOutput, parse_output
from dispatch.slurm.settings import SlurmSettings
from dispatch.slurm.transport.base import Executor, TransportFailure
from dispatch.spi import Cessation, ExecutionEvidence, Found, Gate, JobEvidence, StartRequest

NAME = "slurm"
ACCEPTED = frozenset({Placement.kind, Resources.kind, Output.kind, SharedCheckpoint.kind, CessationWarning.kind})


@dataclass(frozen=True)
class _Observed:
    """squeue's view of a job (None when gone) and sacct's executions (oldest first)."""

    live: SlurmJob | None
    history: tuple[SlurmJob, ...]


class SlurmBackend:
    """One Slurm cluster. Built by :func:`dispatch.slurm.new`, which runs preflight."""

    def __init__(
        self, settings: SlurmSettings, executor: Executor, clock: Clock | None = None, *, read_only: bool = False
    ) -> None:
        self.settings = settings
        self._executor = executor
        self._clock = clock or SystemClock()
        self._read_only = read_only
        self._offset = 0.0
        self._uncertainty = 0.0
        self.scripts_run = 0
        self._instances: dict[str, str] = {}
        self._made_dirs: set[str] = (
            set()
        )  # output directories this backend already created  # hold code -> the instance string this backend placed
        self.facts = preflight.run_preflight(settings, self._run, self._clock, read_only=read_only)
        self._offset = self.facts.offset
        self._uncertainty = self.facts.uncertainty
        self._caps = preflight.capabilities_of(self.facts)
        self._decl = preflight.declarations_of(settings, self.facts)
        self.slurm_release = self.facts.version
        self.dialect = dialect_of(self.facts.version)
        self.default_output_dir = posixpath.join(self.facts.home or "/tmp", "dispatch-output")

    # ---------------------------------------------------------------- plumbing
    def _script(self) -> Script:
        s = Script(call_timeout=self.settings.timeouts.call, env=self.settings.env)
        s.deadline = self._clock.now() + self._offset + self.settings.timeouts.script
        return s

    def _run(self, script: Script, write: bool) -> ScriptOutput:
        """Run one script. Transport failures: Unavailable if it never started (or it only read), else
        OutcomeUnknown."""
        self.scripts_run += 1
        try:
            result = self._executor.run(script.render(), self.settings.timeouts.script + 10)
        except TransportFailure as exc:
            out = parse_output(script.nonce, exc.result.stdout)
            if write and out.started:
                raise OutcomeUnknown(f"the connection failed after the script started: {exc}") from None
            raise Unavailable(f"the cluster could not be reached: {exc}") from None
        out = parse_output(script.nonce, result.stdout)
        if not out.started:
            raise Unavailable(f"the script did not start (exit {result.returncode}): {result.stderr.strip()[:300]}")
        return out

    def _need(self, out: ScriptOutput, index: int, what: str, *, write: bool) -> CallOutput:
        """The call's output when it succeeded; otherwise the error its answer maps to."""
        call = out.call(index)
        if call is None or call.status is None:
            if call is not None and call.not_run:
                raise Unavailable(f"{what}: the script's deadline passed before the call ran")
            if write:
                raise OutcomeUnknown(f"{what}: the script was cut before the call reported")
            raise Unavailable(f"{what}: no answer")
        if call.status != 0:
            raise slurm_errors.error_for(what, call.stderr or call.stdout, write=write, status=call.status)
        return call

    def _writable(self) -> None:
        if self._read_only:
            raise ReadOnly("this Slurm backend was opened read-only")

    def _evidence(self, source: str) -> Evidence:
        return Evidence(source, self._clock.now())

    # ---------------------------------------------------------------- Backend
    @property
    def name(self) -> str:
        return NAME

    @property
    def read_only(self) -> bool:
        return self._read_only

    def capabilities(self) -> Capabilities:
        return self._caps

    def declarations(self) -> Declarations:
        return self._decl

    def extension_policy(self) -> ExtensionPolicy:
        return ExtensionPolicy(accepted=ACCEPTED)

    def build(self, request: StartRequest) -> submit.SbatchJob:
        self.extension_policy().check(request.spec.extensions, NAME)
        return submit.build(request, self.settings, self.slurm_release, self.default_output_dir)

    def render(self, request: StartRequest) -> str:
        """The exact sbatch command and batch script :meth:`start` would submit (a dry run; nothing runs)."""
        job = self.build(request)
        words = " ".join(shlex.quote(a) for a in ("sbatch", *job.argv))
        return f"{words} <<'EOF'\n{job.batch}EOF\n"

    dry_run = render

    def start(self, request: StartRequest) -> str:
        self._writable()
        job = self.build(request)
        s = self._script()
        index = 0
        if job.output_dir not in self._made_dirs:
            s.call(["mkdir", "-p", job.output_dir])
            index = 1
        s.call(["sbatch", *job.argv], stdin=job.batch)
        out = self._run(s, True)
        call = self._need(out, index, "sbatch", write=True)
        self._made_dirs.add(job.output_dir)
        try:
            return parse_sbatch_id(call.stdout)
        except ParseError as exc:
            raise OutcomeUnknown(str(exc)) from None

    def open(self, scheduler_id: str) -> None:
        self._writable()
        jid = _job_id(scheduler_id)
        s = self._script()
        s.shell(
            'r=$(squeue -h -t all -j "$1" -o %r 2>&1) || { printf "%s\\n" "$r" >&2; exit 1; }\n'
            'case "$r" in\n'
            '  JobHeldAdmin) echo "JobHeldAdmin" >&2; exit 3;;\n'
            '  JobHeldUser) scontrol release "$1";;\n'
            '  *) echo "not gated: $r";;\n'
            "esac",
            jid,
        )
        out = self._run(s, True)
        call = out.call(0)
        if call is not None and call.status == 3:
            raise Rejected(f"job {jid} is held by an administrator (JobHeldAdmin); dispatch never releases it")
        self._need(out, 0, f"open {jid}", write=True)

    def _observe(self, ids: Sequence[str]) -> dict[str, _Observed]:
        try:
            return self._observe_parsed(ids)
        except ParseError as exc:  # unusable output: the read had no effect and tells nothing (never a crash)
            raise Unavailable(f"squeue/sacct: unusable output: {str(exc)[:300]}") from None

    def _observe_parsed(self, ids: Sequence[str]) -> dict[str, _Observed]:
        jids = [_job_id(i) for i in ids]
        if not jids:
            return {}
        s = self._script()
        if self.dialect == "v0.0.38":
            s.call(["squeue", "--json"])  # ignores filters: filtered here
        else:
            s.call(["squeue", "--json", "-t", "all", "-j", ",".join(jids)])
        out = self._run(s, False)
        call = out.call(0)
        live: dict[str, SlurmJob] = {}
        if call is not None and call.status == 0:
            _, jobs = parse_squeue(call.stdout)
            live = {j.job_id: j for j in filter_jobs(jobs, ids=jids)}
        elif call is None or "Invalid job id" not in call.stderr:
            # one purged id makes squeue fail with "Invalid job id" (no JSON): that alone means "not live"
            stderr = call.stderr if call else ""
            raise slurm_errors.error_for("squeue", stderr, write=False, status=call.status if call else None)
        need_history = [j for j in jids if j not in live or (live[j].restart_cnt or 0) > 0 or live[j].state == "FAILED"]
        history = self._history(need_history) if need_history and self._caps[Capability.ACCOUNTING_HISTORY].yes else {}
        return {j: _Observed(live.get(j), tuple(history.get(j, ()))) for j in jids if j in live or history.get(j)}

    def _history(self, jids: Sequence[str]) -> dict[str, list[SlurmJob]]:
        s = self._script()
        if self.dialect == "v0.0.38":
            s.shell('SLURM_TIME_FORMAT=%s sacct -D -P -n -o "$2" -j "$1"', ",".join(jids), SACCT_TEXT_FIELDS)
        else:
            s.call(["sacct", "--json", "-D", "-j", ",".join(jids)])
        out = self._run(s, False)
        call = self._need(out, 0, "sacct", write=False)
        if self.dialect == "v0.0.38":
            jobs = parse_sacct_text(call.stdout, self.slurm_release)
        else:
            _, jobs = parse_sacct(call.stdout)
        by: dict[str, list[SlurmJob]] = {}
        for j in jobs:
            by.setdefault(j.job_id, []).append(j)
        for lst in by.values():
            lst.sort(key=lambda j: (j.restart_cnt or 0, j.submit_time or 0))
        return by

    def _evidence_of(self, jid: str, obs: _Observed) -> JobEvidence:
        now = self._clock.now()
        marker_job = obs.live or obs.history[-1]
        submission = _submission_of(marker_job.name)
        executions: list[ExecutionEvidence] = []
        seen: set[int] = set()
        for rec in obs.history:
            r = rec.restart_cnt or 0
            if obs.live is not None and r >= (obs.live.restart_cnt or 0):
                continue
            seen.add(r)
            executions.append(self._execution(jid, submission, rec, r, Evidence("sacct", now)))
        current = obs.live or obs.history[-1]
        r = current.restart_cnt or 0
        same = [h for h in obs.history if (h.restart_cnt or 0) == r]
        if obs.live is not None and same and same[-1].step_states:
            current = replace(current, step_states=same[-1].step_states)
        source = "squeue" if obs.live is not None else "sacct"
        reading = outcome_of(current, Evidence(source, now))
        if r not in seen:
            executions.append(self._execution(jid, submission, current, r, Evidence(source, now)))
        executions.sort(key=lambda e: e.restart)
        return JobEvidence(
            scheduler_id=jid,
            marker=marker_job.name or None,
            outcome=reading.outcome,
            gate=Gate.CLOSED if reading.gate_closed else Gate.OPEN,
            holds=(self._instances.get(reading.hold, reading.hold),) if reading.hold else (),
            foreign_holds=(reading.foreign_hold,) if reading.foreign_hold else (),
            executions=tuple(executions),
        )

    def _execution(self, jid: str, n: int, rec: SlurmJob, restart: int, ev: Evidence) -> ExecutionEvidence:
        off = self._offset
        # Slurm fills start_time with an estimate while pending, and with the cancel time for a job cancelled
        # before it ran: only a job that left PENDING with nodes allocated has started.
        ran = rec.state not in ("PENDING", "") and bool(rec.nodes)
        if not ran:
            return ExecutionEvidence(f"{n}.{jid}.{restart}", restart, outcome_of(rec, ev).outcome)
        return ExecutionEvidence(
            identity=f"{n}.{jid}.{restart}",
            restart=restart,
            outcome=outcome_of(rec, ev).outcome,
            started_at=rec.start_time - off if rec.start_time and rec.start_time < 4e9 else None,
            ended_at=rec.end_time - off if rec.end_time and rec.end_time < 4e9 else None,
            nodes=tuple(x for x in [rec.nodes] if x),
        )

    def inspect(self, scheduler_id: str) -> JobEvidence:
        got = self.inspect_many([scheduler_id])
        jid = _job_id(scheduler_id)
        if jid not in got:
            raise NotFound(
                f"Slurm job {jid} is not in squeue"
                + ("" if self._caps[Capability.ACCOUNTING_HISTORY].yes else " and there is no accounting to ask")
            )
        return got[jid]

    def inspect_many(self, scheduler_ids: Sequence[str]) -> Mapping[str, JobEvidence]:
        return {j: self._evidence_of(j, o) for j, o in self._observe(scheduler_ids).items()}

    def find(self, marker: str, since: float) -> list[Found]:
        return self.find_many([marker], since).get(marker, [])

    def find_many(self, markers: Sequence[str], since: float) -> Mapping[str, list[Found]]:
        try:
            return self._find_many_parsed(markers, since)
        except ParseError as exc:
            raise Unavailable(f"squeue/sacct: unusable output: {str(exc)[:300]}") from None

    def _find_many_parsed(self, markers: Sequence[str], since: float) -> Mapping[str, list[Found]]:
        wanted = list(dict.fromkeys(markers))
        if not wanted:
            return {}
        s = self._script()
        if self.dialect == "v0.0.38":
            s.call(["squeue", "--json"])
        else:
            s.call(["squeue", "--json", "-t", "all", "--name=" + ",".join(wanted)])
        acct = self._caps[Capability.ACCOUNTING_HISTORY].yes
        if acct:
            s.shell(
                "SLURM_TIME_FORMAT=%s sacct -X -D -P -n -o JobIDRaw,JobName,Submit "
                '-S "$(date -d @"$1" +%Y-%m-%dT%H:%M:%S)" -E now --name="$2"',
                str(int(since + self._offset) - 1),
                ",".join(wanted),
            )
        out = self._run(s, False)
        found: dict[str, dict[str, Found]] = {m: {} for m in wanted}
        sq = self._need(out, 0, "squeue", write=False)
        _, jobs = parse_squeue(sq.stdout)
        for j in filter_jobs(jobs, names=wanted):
            created = (j.submit_time - self._offset) if j.submit_time else None
            if created is None or created >= since - self._uncertainty - 1:
                found[j.name].setdefault(j.job_id, Found(j.job_id, j.name, created))
        if acct:
            sa = self._need(out, 1, "sacct", write=False)
            for line in sa.stdout.splitlines():
                parts = line.split("|")
                if len(parts) >= 3 and parts[1] in found:
                    created = float(parts[2]) - self._offset if parts[2].isdigit() else None
                    found[parts[1]].setdefault(parts[0], Found(parts[0], parts[1], created))
        return {m: sorted(v.values(), key=lambda f: int(f.scheduler_id)) for m, v in found.items()}

    def stop_job(self, scheduler_id: str) -> float:
        self._writable()
        jid = _job_id(scheduler_id)
        s = self._script()
        s.shell('r=$(squeue -h -t all -j "$1" -o %T 2>&1) || { printf "%s\\n" "$r" >&2; exit 1; }; scancel "$1"', jid)
        out = self._run(s, True)
        call = out.call(0)
        if call is not None and call.status not in (0, None) and "Invalid job id" in call.stderr:
            if self._caps[Capability.ACCOUNTING_HISTORY].yes and self._history([jid]).get(jid):
                return 0.0  # already ended and purged: nothing left to stop
            raise NotFound(f"Slurm job {jid} is gone")
        self._need(out, 0, f"scancel {jid}", write=True)
        kill_wait = config_seconds(self.facts.config, "KillWait", 30.0)
        return kill_wait + config_seconds(self.facts.config, "MessageTimeout", 10.0) + 5.0

    def close(self) -> None:
        self._executor.close()

    # ---------------------------------------------------------------- Holder
    def hold(self, scheduler_id: str, instance: str) -> None:
        self._writable()
        ev = self.inspect(scheduler_id)
        code = decode_hold(encode_hold(instance))
        assert code is not None
        if ev.holds and ev.holds[0] not in (instance, code):
            raise Rejected(f"job {ev.scheduler_id} already carries hold {ev.holds[0]}")
        self._instances[code] = instance
        if not ev.outcome.state.waiting:
            raise Rejected(f"job {ev.scheduler_id} is {ev.outcome.state.value}: the job is no longer pending")
        s = self._script()
        s.call(["scontrol", "update", f"JobId={ev.scheduler_id}", f"StartTime=uts{encode_hold(instance)}"])
        self._need(self._run(s, True), 0, f"hold {ev.scheduler_id}", write=True)

    def release(self, scheduler_id: str, instance: str) -> None:
        self._writable()
        ev = self.inspect(scheduler_id)
        mine = decode_hold(encode_hold(instance))
        if not ev.holds:
            return
        if ev.holds[0] not in (instance, mine):
            raise Rejected(f"job {ev.scheduler_id} carries hold {ev.holds[0]}, not {instance}")
        s = self._script()
        s.call(["scontrol", "update", f"JobId={ev.scheduler_id}", "StartTime=now"])
        self._need(self._run(s, True), 0, f"release {ev.scheduler_id}", write=True)

    # ---------------------------------------------------------------- Requeuer
    def requeue(self, scheduler_id: str) -> None:
        """Two steps in one script: enable requeue (``Requeue=1``), then ``scontrol requeue``; then disable it
        again for the next execution. A cut between the steps raises OutcomeUnknown: the restart count either
        moved or it did not, and a later requeue repeats both steps safely."""
        self._writable()
        jid = _job_id(scheduler_id)
        s = self._script()
        s.call(["scontrol", "update", f"JobId={jid}", "Requeue=1"])
        s.call(["scontrol", "requeue", jid])
        s.call(["scontrol", "update", f"JobId={jid}", "Requeue=0"])
        out = self._run(s, True)
        self._need(out, 0, f"enable requeue of {jid}", write=True)
        self._need(out, 1, f"requeue {jid}", write=True)

    # ---------------------------------------------------------------- CessationSignal
    def cessation(self, scheduler_ids: Sequence[str]) -> Mapping[str, Cessation]:
        """Runs the site's ``cessation.command`` with the job ids as arguments. Contract: exit 0 and print one
        line per ceasing job, ``<job id> <since epoch seconds> <reason...>``; jobs not printed are not ceasing.
        Without a command configured, no job is reported ceasing."""
        cmd = self.settings.cessation.command
        if not cmd or not scheduler_ids:
            return {}
        jids = [_job_id(i) for i in scheduler_ids]
        s = self._script()
        s.call([*cmd, *jids])
        call = self._need(self._run(s, False), 0, "cessation command", write=False)
        out: dict[str, Cessation] = {}
        for line in call.stdout.splitlines():
            parts = line.split(None, 2)
            if len(parts) >= 2 and parts[0] in jids:
                try:
                    since = float(parts[1]) - self._offset
                except ValueError:
                    continue
                out[parts[0]] = Cessation(parts[2] if len(parts) > 2 else "cessation", since)
        return out

    # ---------------------------------------------------------------- OutputReader
    def _output_path(self, scheduler_id: str, execution: int | None, stream: str) -> tuple[str, bool]:
        ev_obs = self._observe([scheduler_id]).get(_job_id(scheduler_id))
        if ev_obs is None:
            raise NotFound(f"Slurm job {scheduler_id} is gone")
        rec = ev_obs.live or ev_obs.history[-1]
        current = rec.restart_cnt or 0
        r = current if execution is None else execution
        if r < 0 or r > current:
            raise NotFound(f"job {rec.job_id} has no execution {r}")
        pattern = rec.stdout or (ev_obs.history[-1].stdout if ev_obs.history else "")
        out_dir = (
            posixpath.dirname(pattern)
            if pattern.startswith("/")
            else (self.settings.output.dir or self.default_output_dir)
        )
        out_path, err_path = submit.output_paths(out_dir, rec.name, rec.job_id, r)
        ended = outcome_of(rec, self._evidence("squeue")).outcome.state.ended or r < current
        return (out_path if stream == "stdout" else err_path), ended

    def _read(self, scheduler_id: str, execution: int | None, follow: bool, stream: str) -> Iterator[bytes]:
        path, ended = self._output_path(scheduler_id, execution, stream)
        offset = 0
        while True:
            s = self._script()
            s.shell(
                'if [ -e "$1" ]; then tail -c +"$2" -- "$1" | base64 -w0; else echo MISSING; fi', path, str(offset + 1)
            )
            call = self._need(self._run(s, False), 0, f"read {path}", write=False)
            text = call.stdout.strip()
            if text != "MISSING" and text:
                data = base64.b64decode(text)
                offset += len(data)
                yield data
            if not follow or ended:
                return
            self._clock.sleep(1.0)
            path, ended = self._output_path(scheduler_id, execution, stream)

    def stdout(self, scheduler_id: str, execution: int | None = None, follow: bool = False) -> Iterator[bytes]:
        return self._read(scheduler_id, execution, follow, "stdout")

    def stderr(self, scheduler_id: str, execution: int | None = None, follow: bool = False) -> Iterator[bytes]:
        return self._read(scheduler_id, execution, follow, "stderr")

    def __repr__(self) -> str:
        return f"SlurmBackend({self.facts.cluster_name} {self.slurm_release}, transport={self.settings.transport})"


def _job_id(scheduler_id: str) -> str:
    jid = str(scheduler_id).strip()
    if not jid.isdigit():
        raise NotFound(f"{scheduler_id!r} is not a Slurm job id")
    return jid


def _submission_of(marker: str) -> int:
    tail = marker.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() and int(tail) >= 1 else 1
