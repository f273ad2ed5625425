"""The local backend: a job's ranks as processes on this machine, with state in files that outlive dispatch.

Every method works from the job's directory (see :mod:`dispatch.local.layout`); changes happen under the job's
``flock``. Nothing polls: a detached launcher per execution (see :mod:`dispatch.local.launcher`) waits for the
ranks and writes their exits, so any process that inspects later reads the truth. GPUs are shared out by the
state directory's ledger (:mod:`dispatch.local.ledger`): the launcher takes free devices when it starts, so two
jobs running at once never get the same one; CPUs and memory are checked against the host's totals only.

Errors: an id with no directory is NotFound; holding a running or ended job, requeueing a job that never ran or
was stopped, and releasing another instance's hold are Rejected; a launcher that cannot start is Unavailable
(nothing ran); every write on a read-only backend is ReadOnly before anything happens.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from dispatch.accelerators import Inventory, check_request
from dispatch.adapterkit.guards import check_hold, check_release
from dispatch.capabilities import Capabilities, Capability, Provenance, no, yes
from dispatch.clock import Clock
from dispatch.declarations import UNBOUNDED, Declarations, PolledLoss
from dispatch.errors import DispatchError, NotFound, ReadOnly, Rejected, Unsupported
from dispatch.extensions import CessationWarning, ExtensionPolicy, SharedCheckpoint
from dispatch.local import output
from dispatch.local.gpus import HostGpus
from dispatch.local.gpus import probe as probe_gpus
from dispatch.local.layout import ExecutionFiles, JobFiles, files, job_lock, read_json, write_json
from dispatch.local.limits import Limits
from dispatch.local.mapping import job_evidence, waiting_for
from dispatch.local.plan import build_plan, render_plan
from dispatch.local.process import kill_groups, signal_pid, spawn_launcher
from dispatch.resources import format_memory
from dispatch.spec import JobSpec
from dispatch.spi import Found, JobEvidence, OutputPiece, OutputSlice, StartRequest, StoragePaths

NAME = "local"
CALL_BOUND = 2.0
"""Every call has taken effect when it returns, except a stop or requeue of a running execution, which the
launcher carries out at once on SIGTERM; 2 s covers a loaded machine."""
NODE_LOSS_WINDOW = 1.0
"""The only "node" is this machine; a launcher that died is seen at the next inspect."""

_SID = re.compile(r"[a-z0-9]{4,32}")


def _host_memory_mib() -> int | None:
    """MemTotal of /proc/meminfo in MiB (None where there is no such file)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


class LocalBackend:
    """Runs jobs as local process groups; holds, requeue, output reading and following, finding by marker."""

    def __init__(
        self,
        state_dir: str | os.PathLike[str],
        clock: Clock,
        *,
        grace: float = 5.0,
        python: str | None = None,
        read_only: bool = False,
        gpus: Sequence[str] | None = None,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.jobs_dir = self.state_dir / "jobs"
        self.clock = clock
        self.grace = grace
        self.python = python
        self._read_only = read_only
        self._gpu_setting = None if gpus is None else tuple(gpus)
        self._host_gpus: HostGpus | None = None
        if not read_only:
            self.jobs_dir.mkdir(parents=True, exist_ok=True, mode=0o700)

    # ----- identity -----------------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return NAME

    @property
    def read_only(self) -> bool:
        return self._read_only

    def capabilities(self) -> Capabilities:
        g = f"{self.grace:g}s"
        return Capabilities(
            {
                Capability.CONTAINER_IMAGE: no("ranks run as plain processes on this machine; no container runtime"),
                Capability.NATIVE_REQUEUE: no("nothing requeues a local job by itself; dispatch's Requeuer does"),
                Capability.NATIVE_RESTART: no("there is no scheduler policy to restart a local job in place"),
                Capability.HOLD: yes(
                    "holds are files in the job's state directory, by instance; a held job is not launched"
                ),
                Capability.PRE_TERMINATION_SIGNAL: yes(
                    f"stop, requeue and the time limit send SIGTERM to every rank's process group, then SIGKILL "
                    f"after {g}; with dispatch.CessationWarning its signal goes first, its seconds before SIGTERM"
                ),
                Capability.ACCOUNTING_HISTORY: yes("state directories are kept until deleted"),
                Capability.ATTEMPT_INJECTION: yes(
                    "each rank gets DISPATCH_EXECUTION (<N>.<id>.<R>) and DISPATCH_RESTART"
                ),
                Capability.WORKING_DIRECTORY: yes(
                    "ranks start in the spec's working directory (default: the submitting process's)"
                ),
                Capability.PROCS_PER_NODE: yes("procs_per_node ranks per node process group"),
                Capability.OUTPUT_PATH: no("output files always go to the execution's state directory"),
                Capability.OUTPUT_READ: yes("one stdout and one stderr file per rank and execution"),
                Capability.OUTPUT_FOLLOW: yes("output files are followed until the execution ends"),
                Capability.OUTPUT_RETAINED: yes("output files are kept after the job ends, per execution"),
                Capability.READMISSION_GATE: no(
                    "nothing evicts a local job; a requeued execution starts at once unless held"
                ),
                Capability.NODE_EXCLUSION: no("one host: there is no other node to run a job on"),
                Capability.ACCELERATORS: self.host_gpus().inventory.answer(
                    Provenance.DECLARED if self._gpu_setting is not None else Provenance.PROBED
                ),
                Capability.SHARED_STORAGE: yes(f"the ranks run on this machine: {self.calls_dir} is shared"),
                Capability.PROGRESS_REPORTING: yes(
                    "each rank writes executions/<R>/progress/rank-<r>.json in the job's state directory; read "
                    "with the job's state"
                ),
                Capability.BATCH_THROTTLE: no(
                    "the local adapter starts every job of a batch at once (it queues none for a later start)"
                ),
            }
        )

    def host_gpus(self) -> HostGpus:
        """This host's GPUs (the ``gpus`` setting, else ``nvidia-smi``), probed once per backend."""
        if self._host_gpus is None:
            self._host_gpus = probe_gpus(self._gpu_setting)
        return self._host_gpus

    def accelerators(self) -> Inventory:
        return self.host_gpus().inventory

    def never_runs(self, spec: JobSpec) -> str | None:
        """ShapeCheck: why this host can never run ``spec`` (every node of a job is this host, so its ranks share
        its CPUs and its nodes share its memory), or None. Exclusive nodes cannot be given at all."""
        res = spec.resources
        if res.exclusive:
            return "the local adapter cannot keep other processes off this host: drop resources.exclusive"
        cpus = os.cpu_count() or 1
        if res.cpus_per_proc is not None and res.cpus_per_proc * spec.world_size > cpus:
            return f"{spec.world_size} rank(s) x {res.cpus_per_proc} CPU(s) asked, this host has {cpus} CPU(s)"
        if res.mem_per_node is not None:
            total = _host_memory_mib()
            if total is not None and res.mem_per_node * spec.nodes > total:
                return (
                    f"{spec.nodes} node(s) x {format_memory(res.mem_per_node)} of memory asked, this host has "
                    f"{format_memory(total)}"
                )
        return None

    def _check_resources(self, spec: JobSpec) -> list[str]:
        """Refuse (Unsupported) what this host can never give the job; the host's GPU devices when it asks for
        some (the pool its launcher takes free ones from: :mod:`dispatch.local.ledger`).

        CPUs and memory are checked against the host's totals only: they are neither counted across jobs nor
        reserved (docs/adapters/local.md says why)."""
        res = spec.resources
        why = self.never_runs(spec)
        if why:
            raise Unsupported(why)
        if res.gpus_per_node == 0:
            return []
        host = self.host_gpus()
        check_request(host.inventory, res, spec.nodes, "the local adapter")
        return list(host.devices)

    def declarations(self) -> Declarations:
        return Declarations(
            node_loss_window=NODE_LOSS_WINDOW,
            call_bound=CALL_BOUND,
            polled_loss=PolledLoss(state=UNBOUNDED, cause=UNBOUNDED, exit_code=UNBOUNDED, execution=UNBOUNDED),
        )

    def extension_policy(self) -> ExtensionPolicy:
        return ExtensionPolicy(accepted=frozenset({Limits.kind, SharedCheckpoint.kind, CessationWarning.kind}))

    # ----- paths ------------------------------------------------------------------------------------------------

    @property
    def calls_dir(self) -> Path:
        """Where :class:`dispatch.Executor` passes functions and results (``<state dir>/calls``)."""
        return self.state_dir / "calls"

    def shared_storage(self) -> StoragePaths:
        return StoragePaths(local=str(self.calls_dir), remote=str(self.calls_dir))

    def job_dir(self, scheduler_id: str) -> str:
        if not _SID.fullmatch(scheduler_id):
            raise NotFound(f"no local job {scheduler_id!r}")
        return str(self.jobs_dir / scheduler_id)

    def _read(self, scheduler_id: str) -> JobFiles:
        job = JobFiles.read(self.job_dir(scheduler_id))
        if job is None:
            raise NotFound(f"no local job {scheduler_id!r} in {self.jobs_dir}")
        return job

    def _writable(self) -> None:
        if self._read_only:
            raise ReadOnly("the local backend was opened read-only")

    # ----- writes -----------------------------------------------------------------------------------------------

    def start(self, request: StartRequest) -> str:
        self._writable()
        self.extension_policy().check(request.spec.extensions, NAME)
        devices = self._check_resources(request.spec)
        now = self.clock.now()
        sid = secrets.token_hex(6)
        job_dir = self.jobs_dir / sid
        job_dir.mkdir(mode=0o700)
        manifest = {
            "schedulerId": sid,
            "jobId": request.job_id,
            "submission": request.submission,
            "marker": request.marker,
            "createdAt": now,
            "cwd": os.getcwd(),
            "spec": request.spec.to_json(),
        }
        if devices:
            manifest["gpuPool"] = devices
        (job_dir / files.EXECUTIONS / "0").mkdir(parents=True, mode=0o700)
        write_json(
            os.path.join(files.execution_dir(str(job_dir), 0), files.PLAN),
            build_plan(manifest, str(job_dir), 0, self.grace),
        )
        write_json(str(job_dir / files.MANIFEST), manifest)  # last: a directory without it is not a job yet
        return sid

    def open(self, scheduler_id: str) -> None:
        self._writable()
        job_dir = self.job_dir(scheduler_id)
        self._read(scheduler_id)
        with job_lock(job_dir):
            path = os.path.join(job_dir, files.GATE_OPEN)
            if not os.path.exists(path):
                write_json(path, {"at": self.clock.now()})
            self._launch_ready(job_dir)

    def hold(self, scheduler_id: str, instance: str) -> None:
        self._writable()
        job_dir = self.job_dir(scheduler_id)
        self._read(scheduler_id)
        with job_lock(job_dir):
            job = self._read(scheduler_id)
            cur = job.current
            # a launcher waiting for GPUs has started no rank: the job waits, and the launcher backs off at its
            # next try when it finds a hold (dispatch.local.launcher)
            gpu_wait = cur is not None and cur.running and bool(waiting_for(cur))
            if cur is not None and cur.running and not gpu_wait:
                state = "running (a hold only keeps a waiting job from launching)"
            elif job.stopped is not None:
                state = "stopped"
            elif cur is not None and job.queued is None and not gpu_wait:
                state = "ended"
            else:
                state = "waiting"
            # several instances may hold one local job: each is a key in holds.json
            if not check_hold(
                f"local job {scheduler_id}",
                tuple(job.holds),
                instance,
                waiting=state == "waiting",
                state=state,
                single=False,
            ):
                return
            write_json(os.path.join(job_dir, files.HOLDS), {**job.holds, instance: self.clock.now()})

    def release(self, scheduler_id: str, instance: str) -> None:
        self._writable()
        job_dir = self.job_dir(scheduler_id)
        self._read(scheduler_id)
        with job_lock(job_dir):
            job = self._read(scheduler_id)
            if not check_release(f"local job {scheduler_id}", tuple(job.holds), instance):
                return
            rest = {k: v for k, v in job.holds.items() if k != instance}
            write_json(os.path.join(job_dir, files.HOLDS), rest)
            self._launch_ready(job_dir)

    def requeue(self, scheduler_id: str) -> None:
        self._writable()
        job_dir = self.job_dir(scheduler_id)
        self._read(scheduler_id)
        with job_lock(job_dir):
            job = self._read(scheduler_id)
            if job.stopped is not None:
                raise Rejected(f"local job {scheduler_id} was stopped; it cannot be requeued")
            cur = job.current
            if cur is None:
                raise Rejected(f"local job {scheduler_id} has not run yet; there is nothing to requeue")
            if job.queued is not None:
                return  # already requeued: the next execution is planned
            nxt = cur.restart + 1
            os.makedirs(files.execution_dir(job_dir, nxt), mode=0o700, exist_ok=True)
            write_json(
                os.path.join(files.execution_dir(job_dir, nxt), files.PLAN),
                build_plan(job.manifest, job_dir, nxt, self.grace),
            )
            if cur.running:
                self._end(job_dir, cur, "requeue")  # its launcher starts the next one when it has ended
            else:
                self._launch_ready(job_dir)

    def stop_job(self, scheduler_id: str) -> float:
        self._writable()
        job_dir = self.job_dir(scheduler_id)
        self._read(scheduler_id)
        with job_lock(job_dir):
            job = self._read(scheduler_id)
            if job.stopped is None:
                write_json(os.path.join(job_dir, files.STOPPED), {"at": self.clock.now()})
            cur = job.current
            if cur is not None and cur.running:
                self._end(job_dir, cur, "stop")
                warning = JobSpec.from_json(job.manifest["spec"]).extension(CessationWarning)
                return self.grace + CALL_BOUND + (warning.seconds if warning else 0.0)
        return 0.0

    def _end(self, job_dir: str, e: ExecutionFiles, reason: str) -> None:
        """Ask a running execution's launcher to end it (SIGTERM, then SIGKILL after the grace period). Under the
        lock. If the launcher is gone, its ranks' process groups are killed directly."""
        path = os.path.join(e.dir, files.END_REQUEST)
        if read_json(path) is None:
            write_json(path, {"reason": reason, "at": self.clock.now()})
        pid = (e.launcher or {}).get("pid")
        if e.launcher_alive and isinstance(pid, int) and signal_pid(pid, signal.SIGTERM):
            return
        pgids = [p for p in (e.launcher or {}).get("pgids", []) if isinstance(p, int)]
        kill_groups(pgids)

    def _launch_ready(self, job_dir: str) -> None:
        """Start the execution that may start now, if any. Under the lock."""
        restart = files.next_to_launch(job_dir)
        if restart is None:
            return
        exec_dir = files.execution_dir(job_dir, restart)
        nonce = secrets.token_hex(8)
        write_json(os.path.join(exec_dir, files.SPAWNED), {"at": self.clock.now(), "by": os.getpid(), "nonce": nonce})
        try:
            spawn_launcher(job_dir, restart, nonce, self.python)
        except BaseException:
            # the marker goes only when this launcher provably never runs: otherwise a second one could start
            if files.abandoned(exec_dir, nonce):
                os.unlink(os.path.join(exec_dir, files.SPAWNED))
            raise

    # ----- reads ------------------------------------------------------------------------------------------------

    def inspect(self, scheduler_id: str) -> JobEvidence:
        return job_evidence(self._read(scheduler_id), self.clock.now())

    def inspect_many(self, scheduler_ids: Sequence[str]) -> Mapping[str, JobEvidence]:
        now = self.clock.now()
        out: dict[str, JobEvidence] = {}
        for sid in scheduler_ids:
            try:
                job = self._read(sid)
            except NotFound:
                continue
            out[sid] = job_evidence(job, now)
        return out

    def _manifests(self) -> Iterator[dict[str, Any]]:
        try:
            names = os.listdir(self.jobs_dir)
        except FileNotFoundError:
            return
        for name in names:
            m = read_json(str(self.jobs_dir / name / files.MANIFEST))
            if isinstance(m, dict):
                yield m

    def find(self, marker: str, since: float) -> list[Found]:
        return self.find_many([marker], since).get(marker, [])

    def find_many(self, markers: Sequence[str], since: float) -> Mapping[str, list[Found]]:
        wanted = set(markers)
        out: dict[str, list[Found]] = {m: [] for m in markers}
        for m in self._manifests():
            marker = m.get("marker")
            created = float(m.get("createdAt", 0.0))
            if marker in wanted and created >= since:
                out[str(marker)].append(Found(str(m["schedulerId"]), str(marker), created))
        for found in out.values():
            found.sort(key=lambda f: (f.created_at or 0.0, f.scheduler_id))
        return out

    def close(self) -> None:
        pass

    # ----- output -----------------------------------------------------------------------------------------------

    def _execution(self, scheduler_id: str, execution: int | None) -> ExecutionFiles:
        job = self._read(scheduler_id)
        if execution is None:
            cur = job.current or job.queued
            if cur is None:
                raise NotFound(f"local job {scheduler_id} has no execution")
            return cur
        for e in job.executions:
            if e.restart == execution:
                return e
        raise NotFound(f"local job {scheduler_id} has no execution {execution}")

    def lines(
        self,
        scheduler_id: str,
        stream: str = "stdout",
        execution: int | None = None,
        ranks: Sequence[int] | None = None,
        follow: bool = False,
        poll: float = 0.1,
        offset: int = 0,
    ) -> Iterator[tuple[int, bytes]]:
        """``(rank, chunk)`` pairs of one execution's ``stream`` ("stdout" or "stderr"), for ``ranks`` (all by
        default). Without follow: each rank's whole file in rank order, less its first ``offset`` bytes. With
        follow: whole lines as they are written (from byte ``offset`` of each file), until the execution has
        ended and every file is drained."""
        paths = self._paths(scheduler_id, stream, execution, ranks)
        job_dir = self.job_dir(scheduler_id)
        e = self._execution(scheduler_id, execution)
        if not follow:
            yield from output.read_whole(paths, offset)
            return

        def ended() -> bool:
            now = ExecutionFiles.read(job_dir, e.restart)
            if now.result is not None:
                return True
            if now.spawned is None:
                job = JobFiles.read(job_dir)
                return job is None or job.stopped is not None
            return now.launcher is not None and not now.launcher_alive

        yield from output.follow(paths, ended, self.clock, poll, offset)

    def _paths(
        self, scheduler_id: str, stream: str, execution: int | None, ranks: Sequence[int] | None
    ) -> list[tuple[int, str]]:
        """``(rank, path)`` of the chosen ranks' ``stream`` files of one execution."""
        if stream not in ("stdout", "stderr"):
            raise Unsupported(f"the local adapter has no stream {stream!r}")
        e = self._execution(scheduler_id, execution)
        plan = e.plan or {}
        all_ranks = plan.get("ranks", [])
        chosen = [r for r in all_ranks if ranks is None or r["rank"] in ranks]
        if ranks is not None and len(chosen) != len(set(ranks)):
            known = len(all_ranks)
            raise NotFound(f"local job {scheduler_id} has ranks 0 to {known - 1}, not {sorted(set(ranks))}")
        return [(int(r["rank"]), str(r[stream])) for r in chosen]

    def stdout(
        self,
        scheduler_id: str,
        execution: int | None = None,
        follow: bool = False,
        offset: int = 0,
        rank: int | None = None,
    ) -> Iterator[bytes]:
        """All ranks' stdout (or one ``rank``'s) of an execution (None: the current one), from byte ``offset``."""
        return self._stream(scheduler_id, "stdout", execution, follow, offset, rank)

    def stderr(
        self,
        scheduler_id: str,
        execution: int | None = None,
        follow: bool = False,
        offset: int = 0,
        rank: int | None = None,
    ) -> Iterator[bytes]:
        return self._stream(scheduler_id, "stderr", execution, follow, offset, rank)

    def _stream(
        self, scheduler_id: str, stream: str, execution: int | None, follow: bool, offset: int, rank: int | None
    ) -> Iterator[bytes]:
        ranks = None if rank is None else [rank]
        for _, chunk in self.lines(scheduler_id, stream, execution, ranks, follow, offset=offset):
            yield chunk

    def output_per_rank(self) -> bool:
        """Yes: every rank writes its own files."""
        return True

    def read_slices(self, slices: Sequence[OutputSlice]) -> list[OutputPiece | DispatchError]:
        """Each slice from its rank's file (a slice without a rank: rank 0 of a one-rank execution), seeking to
        its offset."""
        out: list[OutputPiece | DispatchError] = []
        for sl in slices:
            try:
                paths = self._paths(sl.scheduler_id, sl.stream, sl.execution, None if sl.rank is None else [sl.rank])
                if len(paths) != 1:
                    raise Unsupported(f"local job {sl.scheduler_id} keeps one file per rank: name a rank")
                data, start, size = output.read_slice(paths[0][1], sl.offset, sl.limit)
                out.append(OutputPiece(data, start, size))
            except DispatchError as exc:
                out.append(exc)
        return out

    # ----- dry run and preflight ---------------------------------------------------------------------------------

    def render(self, request: StartRequest) -> str:
        """The launch plan :meth:`start` would write for ``request``, as shell-quoted commands (nothing runs)."""
        self.extension_policy().check(request.spec.extensions, NAME)
        devices = self._check_resources(request.spec)
        manifest: dict[str, Any] = {
            "schedulerId": "dryrun",
            "jobId": request.job_id,
            "submission": request.submission,
            "marker": request.marker,
            "cwd": os.getcwd(),
            "spec": request.spec.to_json(),
        }
        if devices:
            manifest["gpuPool"] = devices
        job_dir = str(self.jobs_dir / "<scheduler id>")
        return render_plan(build_plan(manifest, job_dir, 0, self.grace), str(self.state_dir))

    def preflight(self) -> list[tuple[str, bool, str]]:
        """Checks of this machine: (what, ok, detail)."""
        checks: list[tuple[str, bool, str]] = []
        proc_ok = Path("/proc/self/statm").exists()
        checks.append(("/proc is readable", proc_ok, "needed for liveness and the memory limit"))
        writable = os.access(self.jobs_dir, os.W_OK) if self.jobs_dir.exists() else False
        checks.append(("state directory is writable", writable, str(self.jobs_dir)))
        python = self.python or sys.executable
        checks.append(("launcher interpreter exists", os.access(python, os.X_OK), python))
        return checks

    def ended_at(self, scheduler_id: str) -> float | None:
        e = self._execution(scheduler_id, None)
        return float(e.result["endedAt"]) if e.result and "endedAt" in e.result else None

    def wait_ended(self, scheduler_id: str, timeout: float, poll: float = 0.1) -> JobEvidence:
        """Inspect until the job has ended or ``timeout`` seconds passed (a convenience for tests and tools)."""
        deadline = time.monotonic() + timeout
        while True:
            ev = self.inspect(scheduler_id)
            if ev.outcome.state.ended or time.monotonic() >= deadline:
                return ev
            self.clock.sleep(poll)
