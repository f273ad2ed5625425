"""The memory scheduler: one simulated cluster's ground truth, advanced from a clock inside calls.

Nothing here runs by itself: every backend call and every control call first *advances* the scheduler to the
clock's current time (jobs start when their gate is open and nodes are free, end when their program ends or
their time limit passes, lost nodes end their jobs after the NodeLossWindow, ended jobs are purged after
MinJobAge). A fake clock therefore drives all timed behaviour, deterministically.

A job's argv is read as a tiny program, so specs are portable between this scheduler and real ones:

* ``("sleep", "S")``: run S seconds, exit 0.
* ``("exit", "C")`` or ``("sleep", "S", "exit", "C")``: run (S seconds, default 1) and exit with code C.
* ``("oom", "S")``: run S seconds, then exceed memory (cause out-of-memory).
* ``("hang", "S")``: report progress (every ``REPORT_EVERY`` seconds) for S seconds, then hang: no report, no
  end, until something ends it.
* any of the above followed by ``"report"``: the same, reporting progress every ``REPORT_EVERY`` seconds.
* ``("missing", ...)``: a program that does not exist: the execution ends a second after it starts (as a batch
  script's launch checks find it), ``not-launchable`` (the job's own request), exit code 125.
* anything else: run ``default_runtime`` seconds and exit 0.

:meth:`Control.suspend` and :meth:`Control.resume` stop a running execution's processes and let them go on
(``scontrol suspend``): it keeps its nodes, reads ``running`` / ``suspended``, reports no progress, and its
program's end and time limit move later by the time it spent suspended.

The Slurm shape also makes job arrays (:meth:`MemoryScheduler.create_array`): one array job id, each task its
own object ``<array>_<task>`` with its own marker, gate, holds, executions and purge, created with its gate
closed; anything addressed to one task id (open, hold, release, stop, requeue, an admin's action) touches that
task alone, as Slurm does once a task is named by its own id.

The :class:`Control` surface lets tests make the scheduler do what real ones do on their own (preempt, lose a
node, admin-hold, admin-requeue or admin-cancel, cease nodes, purge, delete) and inject faults into the next
call of a backend method. The :meth:`MemoryScheduler.truth` view is what invariant checkers compare records
against.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from dispatch.clock import Clock
from dispatch.errors import NotFound, OutcomeUnknown, Rejected, Unavailable
from dispatch.memory.capacity import Allocation, Demand, layout
from dispatch.outcome import Cause, State
from dispatch.spec import JobSpec


class Shape(StrEnum):
    SLURM = "slurm"
    """Polled; requeue in two steps; holds only on waiting jobs; purge after MinJobAge; optional accounting."""
    KUBEFLOW = "kubeflow"
    """Watched; a hold on a running execution ends it (cause held) and readmission is a new attempt; a
    preempted object waits at the readmission gate until dispatch readmits it; no accounting (a deleted object
    is gone)."""


class Crashed(OutcomeUnknown):
    """The caller crashed between the requeue's steps, leaving the requeue flag set (outcome unknown)."""


@dataclass(slots=True)
class TruthExecution:
    restart: int
    attempt: int
    started_at: float | None = None
    ended_at: float | None = None
    state: State = State.PENDING
    cause: Cause | None = None
    exit_code: int | None = None
    nodes: tuple[str, ...] = ()
    detail: str = ""
    suspended_at: float | None = None
    """Since when the execution is suspended (None: it is not)."""
    suspensions: list[tuple[float, float]] = field(default_factory=list)
    """The suspensions that ended: (suspended at, resumed at), oldest first."""

    @property
    def live(self) -> bool:
        return self.started_at is not None and self.ended_at is None

    def pauses(self, until: float) -> list[tuple[float, float]]:
        """Every suspension up to ``until``, the current one ending at ``until``."""
        out = [(a, min(b, until)) for a, b in self.suspensions if a <= until]
        if self.suspended_at is not None and self.suspended_at <= until:
            out.append((self.suspended_at, until))
        return out

    def suspended_for(self, until: float) -> float:
        """Seconds spent suspended up to ``until``."""
        return sum(b - a for a, b in self.pauses(until))


@dataclass(slots=True)
class TruthJob:
    sid: str
    marker: str
    job_id: str
    submission: int
    spec: JobSpec
    created_at: float
    gate_open: bool = False
    holds: list[str] = field(default_factory=list)
    admin_held: bool = False
    executions: list[TruthExecution] = field(default_factory=list)
    requeue_flag: bool = False
    purged: bool = False
    blank_until: float = 0.0
    """Until then the queue does not show the job although it lives (a spurious unknown, see Control.blank)."""
    unanswered_until: float = 0.0
    """Until then reads have no answer for the job yet (an accounting lag, see Control.lag)."""
    deleted: bool = False
    ended_at: float | None = None
    stop_requested_at: float | None = None
    lost_at: float | None = None
    attempts: int = 0
    object_restarts: int = 0
    readmissions: int = 0
    """Readmissions that took effect (an evicted object authorised to run again; see MemoryScheduler.readmit)."""
    stopped: bool = False
    exclude: frozenset[str] = frozenset()
    """Nodes none of the job's executions may run on (StartRequest.exclude)."""
    array: str | None = None
    """The array job id when the object is a task of a job array (its sid is then ``<array>_<task>``)."""
    admin_cancelled: bool = False
    """An admin cancelled this object by its own id (Control.cancel)."""
    admin_requeues: int = 0
    """Requeues an admin made of this object by its own id (Control.requeue)."""

    @property
    def current(self) -> TruthExecution:
        return self.executions[-1]

    @property
    def ended(self) -> bool:
        return self.ended_at is not None

    @property
    def waiting(self) -> bool:
        return not self.ended and self.current.started_at is None


def order_key(sid: str) -> tuple[int, int]:
    """The creation order of scheduler ids: ``1005`` and ``tj-1005`` as (1005, -1), task ``1005_2`` of an
    array as (1005, 2)."""
    number, _, task = sid.rpartition("-")[2].partition("_")
    return int(number), int(task) if task else -1


@dataclass(frozen=True, slots=True)
class Program:
    runtime: float
    exit_code: int = 0
    oom: bool = False
    reports: bool = False
    """Every rank reports progress every :data:`REPORT_EVERY` seconds from its start."""
    hang_after: float | None = None
    """Seconds after its start at which the program hangs: it reports no more and runs until it is ended."""
    missing: bool = False
    """The program does not exist: the execution ends ``runtime`` (a second) after it starts, ``not-launchable``."""


REPORT_EVERY = 5.0
"""Seconds between two progress reports of a program that reports (``... report`` or ``hang S``)."""


def last_report(
    program: Program, started: float, until: float, pauses: Sequence[tuple[float, float]] = ()
) -> float | None:
    """When a program started at ``started`` last reported progress by ``until`` (None: it never reports, or
    not yet): reports come every ``REPORT_EVERY`` seconds of its running time (wall time less the ``pauses``,
    its suspensions: (from, to), oldest first), from its start, and stop when it hangs."""
    if not program.reports or until < started:
        return None
    ran = (until - started) - sum(b - a for a, b in pauses if a < until)
    if program.hang_after is not None:
        ran = min(ran, program.hang_after)
    ran = math.floor(ran / REPORT_EVERY) * REPORT_EVERY
    at = started + ran  # back to wall time: every pause that began before the report delays it
    for a, b in pauses:
        if a <= at:
            at += b - a
    return at


def read_program(spec: JobSpec, default_runtime: float) -> Program:
    """What a job's argv means to the memory scheduler (see the module docstring)."""
    argv = list(spec.command)
    runtime, code, oom = default_runtime, 0, False
    try:
        if argv[0] == "missing":
            return Program(1.0, 125, missing=True)
        if argv[0] == "hang" and len(argv) >= 2:
            return Program(HANG_RUNTIME, reports=True, hang_after=max(0.0, float(argv[1])))
        if argv[-1] == "report":
            prog = read_program(replace(spec, command=tuple(argv[:-1])), default_runtime)
            return Program(prog.runtime, prog.exit_code, prog.oom, reports=True)
        if argv[0] == "sleep" and len(argv) >= 2:
            runtime = float(argv[1])
            argv = argv[2:]
        elif argv[0] in ("exit", "oom"):
            runtime = 1.0
        if argv and argv[0] == "exit" and len(argv) >= 2:
            code = int(argv[1]) % 256
        elif argv and argv[0] == "oom":
            oom = True
            runtime = float(argv[1]) if len(argv) >= 2 else 1.0
    except ValueError:
        runtime, code, oom = default_runtime, 0, False
    return Program(max(runtime, 0.0), code, oom)


HANG_RUNTIME = 100_000.0
"""How long a hung program runs when nothing ends it."""

_End = tuple[float, State, Cause, int | None, str]
"""When an execution ends, its state, cause, exit code and the scheduler's word for it."""


@dataclass(slots=True)
class Fault:
    """A fault for the next call of ``method``: ``kind`` is ``unknown``, ``unavailable`` or ``unanswered``
    (``inspect_many`` answers Unanswered for every object); ``landed`` says
    whether an ``unknown`` call took effect before the error."""

    method: str
    kind: str
    landed: bool = False


@dataclass(slots=True)
class CallLog:
    at: float
    method: str
    sid: str | None
    args: dict[str, Any]
    applied: bool
    error: str = ""


class MemoryScheduler:
    """Ground truth of one simulated cluster. Thread-safe; all state changes happen inside calls."""

    def __init__(
        self,
        clock: Clock,
        shape: Shape | str = Shape.SLURM,
        *,
        nodes: int = 4,
        min_job_age: float = 300.0,
        node_loss_window: float = 120.0,
        accounting: bool = True,
        default_runtime: float = 60.0,
        kill_wait: float = 30.0,
        native_restart: bool = False,
        watch_window: int = 10_000,
        accounting_lag: float = 0.0,
        gpus_per_node: int = 0,
        gpu_type: str | None = None,
        gpu_nodes: int = 0,
        cpus_per_node: int = 0,
        memory_per_node: int = 0,
    ) -> None:
        self.clock = clock
        self.shape = Shape(shape)
        self.node_names = [f"node{i + 1}" for i in range(nodes)]
        self.node_set = frozenset(self.node_names)
        self.capacity = layout(
            self.node_names,
            gpus=gpus_per_node,
            gpu_type=gpu_type,
            gpu_nodes=gpu_nodes,
            cpus=cpus_per_node,
            memory=memory_per_node,
        )
        """What each node holds (see :mod:`dispatch.memory.capacity`): the first ``gpu_nodes`` (0: all) have
        ``gpus_per_node`` GPUs of ``gpu_type``; every node ``cpus_per_node`` CPUs and ``memory_per_node`` MiB (0:
        not counted)."""
        self.counted = any(c.counted for c in self.capacity.values())
        """Whether any node counts anything; when none does, every job takes whole nodes, any nodes."""
        self.min_job_age = min_job_age
        self.node_loss_window = node_loss_window
        self.accounting = accounting and self.shape is Shape.SLURM
        self.default_runtime = default_runtime
        self.kill_wait = kill_wait
        self.native_restart = native_restart
        self.accounting_lag = accounting_lag
        """Seconds after a job ends during which reads have no answer for it (Grid Engine: between leaving
        qstat and reaching qacct): ``inspect_many`` says Unanswered, ``inspect`` raises Unavailable."""
        self.lagging: set[str] = set()
        self.jobs: dict[str, TruthJob] = {}
        self.arrays: dict[str, list[str]] = {}
        self.throttles: dict[str, int] = {}
        """Each throttled array's cap: at most that many of its tasks run at once (Slurm's ``%K``)."""
        """Each job array's task ids, by array job id."""
        self.lost_nodes: dict[str, float] = {}
        self.ceasing: dict[str, tuple[str, float]] = {}
        self.blanked: set[str] = set()
        self.faults: deque[Fault] = deque()
        self.calls: list[CallLog] = []
        self.crash_requeue = 0
        self._next_id = 1000
        self._lock = threading.RLock()
        self._changes: list[tuple[int, str]] = []
        self._change_seq = 0
        self._watch_window = watch_window
        self._watch_dropped = False
        self._program_ends: dict[tuple[str, int, float], _End] = {}
        """When and how each started execution's program ends by itself (see :meth:`_program_end`)."""
        self.outputs: dict[tuple[str, int], list[str]] = {}
        """Lines rank 0 wrote, by (object, execution index): see :meth:`Control.write`."""
        self.control = Control(self)

    # ----- time ------------------------------------------------------------------------------------------

    def advance(self) -> float:
        """Bring the cluster to the clock's time. Returns that time."""
        with self._lock:
            now = self.clock.now()
            self._end_due(now)
            self._start_due(now)
            self._purge_due(now)
            for sid in [sid for sid in self.blanked if now >= self.jobs[sid].blank_until]:
                self.blanked.discard(sid)
                self._changed(sid)  # the queue shows it again: a watch reports the change
            for sid in [sid for sid in self.lagging if now >= self.jobs[sid].unanswered_until]:
                self.lagging.discard(sid)
                self._changed(sid)  # the answer arrives: a watch reports the change
            return now

    def unanswered(self, job: TruthJob, now: float) -> bool:
        """Whether reads have no answer for ``job`` at ``now`` (see ``accounting_lag`` and Control.lag)."""
        return now < job.unanswered_until

    def _changed(self, sid: str) -> None:
        self._change_seq += 1
        self._changes.append((self._change_seq, sid))
        if len(self._changes) > self._watch_window:
            del self._changes[: len(self._changes) - self._watch_window]

    def _end(
        self, job: TruthJob, at: float, state: State, cause: Cause, *, code: int | None = None, detail: str = ""
    ) -> None:
        ex = job.current
        if ex.started_at is None and state is not State.CANCELLED and cause is not Cause.HELD:
            ex.started_at = at
        if ex.suspended_at is not None:  # ended while suspended (a stop, a lost node)
            ex.suspensions.append((ex.suspended_at, max(at, ex.suspended_at)))
            ex.suspended_at = None
        ex.ended_at = at
        ex.state, ex.cause, ex.exit_code, ex.detail = state, cause, code, detail
        job.ended_at = at
        if self.accounting_lag > 0:
            job.unanswered_until = max(job.unanswered_until, at + self.accounting_lag)
            self.lagging.add(job.sid)
        self._changed(job.sid)

    def _end_due(self, now: float) -> None:
        lost_nodes = self.lost_nodes
        for job in self.jobs.values():
            if job.ended_at is not None or job.deleted:
                continue
            ex = job.executions[-1]
            started = ex.started_at
            if started is None:
                continue
            end = self._program_end(job, ex, started)
            if ex.suspended_at is not None:
                end = (math.inf, *end[1:])  # a suspended program does not end by itself
            elif ex.suspensions:
                end = (end[0] + ex.suspended_for(now), *end[1:])
            if job.stop_requested_at is not None or job.spec.time_limit is not None or lost_nodes:
                end = self._earliest_end(job, ex, started, end)
            if end[0] <= now:
                self._end(job, end[0], end[1], end[2], code=end[3], detail=end[4])

    def _program_end(self, job: TruthJob, ex: TruthExecution, started: float) -> _End:
        """When and how the execution's program ends by itself (made once per execution: its start is fixed)."""
        key = (job.sid, ex.restart, started)
        end = self._program_ends.get(key)
        if end is None:
            prog = self.program(job)
            if prog.missing:
                what = "dispatch: launch failed: the program missing does not exist"
                end = (started + prog.runtime, State.FAILED, Cause.NOT_LAUNCHABLE, prog.exit_code, what)
            elif prog.oom:
                end = (started + prog.runtime, State.FAILED, Cause.OUT_OF_MEMORY, None, "OUT_OF_MEMORY")
            else:
                state = State.SUCCEEDED if prog.exit_code == 0 else State.FAILED
                end = (started + prog.runtime, state, Cause.EXIT, prog.exit_code, "COMPLETED")
            self._program_ends[key] = end
        return end

    def program(self, job: TruthJob) -> Program:
        """What ``job``'s argv means (see the module docstring)."""
        return read_program(job.spec, self.default_runtime)

    def _earliest_end(self, job: TruthJob, ex: TruthExecution, started: float, program: _End) -> _End:
        """The earliest of the ways the execution can end: a stop, its program, its time limit, a lost node (on
        a tie, the first in that order)."""
        ends: list[_End] = []
        if job.stop_requested_at is not None:
            ends.append((job.stop_requested_at, State.CANCELLED, Cause.CANCELLED, None, "CANCELLED"))
        ends.append(program)
        if job.spec.time_limit is not None and ex.suspended_at is None:
            limit = started + job.spec.time_limit + ex.suspended_for(self.clock.now())
            ends.append((limit, State.FAILED, Cause.TIMEOUT, None, "TIMEOUT"))
        for node in ex.nodes:
            lost = self.lost_nodes.get(node)
            if lost is not None:
                ends.append(
                    (max(lost, started) + self.node_loss_window, State.FAILED, Cause.NODE_LOST, None, "NODE_FAIL")
                )
        return min(ends, key=lambda e: e[0])

    def _free_nodes(self) -> list[str]:
        busy = {
            n for j in self.jobs.values() if not j.ended and not j.deleted for n in j.current.nodes if j.current.live
        }
        return [n for n in self.node_names if n not in busy and n not in self.lost_nodes and n not in self.ceasing]

    def _startable(self, job: TruthJob) -> bool:
        return (
            job.gate_open
            and not job.holds
            and not job.admin_held
            and not job.ended
            and not job.deleted
            and job.current.started_at is None
        )

    def _start_due(self, now: float) -> None:
        startable = [j for j in self.jobs.values() if self._startable(j)]
        if not startable:
            return
        room = self._array_room()
        if self.counted:
            self._start_by_capacity(now, startable, room)
            return
        free = self._free_nodes()  # computed once per pass (not per job): linear in the number of jobs
        for job in sorted(startable, key=lambda j: order_key(j.sid)):
            usable = [n for n in free if n not in job.exclude] if job.exclude else free
            if len(usable) < job.spec.nodes or not _take_room(room, job):
                continue
            job.current.started_at = now
            job.current.state = State.RUNNING
            job.current.nodes = tuple(usable[: job.spec.nodes])
            free = [n for n in free if n not in job.current.nodes]
            self._changed(job.sid)

    def _array_room(self) -> dict[str, int]:
        """How many more tasks each throttled array may run now (its cap less its tasks running)."""
        if not self.throttles:
            return {}
        room = dict(self.throttles)
        for job in self.jobs.values():
            if job.array in room and not job.ended and not job.deleted and job.current.live:
                room[job.array] -= 1
        return room

    def _start_by_capacity(self, now: float, startable: list[TruthJob], room: dict[str, int]) -> None:
        """Start, in submission order, each job for which enough nodes have what it needs free now."""
        live = [
            (j.current.nodes, Demand.of(j.spec, True))
            for j in self.jobs.values()
            if not j.ended and not j.deleted and j.current.live
        ]
        alloc = Allocation(self.capacity, live)
        up = [n for n in self.node_names if n not in self.lost_nodes and n not in self.ceasing]
        for job in sorted(startable, key=lambda j: order_key(j.sid)):
            usable = [n for n in up if n not in job.exclude] if job.exclude else up
            if job.array in room and room[job.array] <= 0:
                continue
            nodes = alloc.place(usable, job.spec.nodes, Demand.of(job.spec, True))
            if nodes is None or not _take_room(room, job):
                continue
            job.current.started_at = now
            job.current.state = State.RUNNING
            job.current.nodes = nodes
            self._changed(job.sid)

    def nodes_that_fit(self, spec: JobSpec) -> int:
        """How many nodes not lost could run ``spec`` when empty (every node not lost, when none counts)."""
        if not self.counted or spec.resources.empty:
            return len(self.node_names) - len(self.lost_nodes.keys() & self.node_set)
        demand = Demand.of(spec, True)
        return sum(1 for n, c in self.capacity.items() if n not in self.lost_nodes and demand.ever_fits(c))

    def _purge_due(self, now: float) -> None:
        if self.shape is not Shape.SLURM:
            return
        for job in self.jobs.values():
            if job.ended and not job.purged and job.ended_at is not None and now >= job.ended_at + self.min_job_age:
                job.purged = True
                self._changed(job.sid)

    # ----- faults and the call log -----------------------------------------------------------------------

    def _fault(self, method: str) -> Fault | None:
        for f in list(self.faults):
            if f.method == method:
                self.faults.remove(f)
                return f
        return None

    def call(self, method: str, sid: str | None, args: dict[str, Any], apply: Any) -> Any:
        """Run ``apply()`` as backend call ``method``, with any injected fault, and log it."""
        with self._lock:
            now = self.advance()
            fault = self._fault(method)
            if fault is not None and fault.kind == "unavailable":
                self.calls.append(CallLog(now, method, sid, args, False, "Unavailable"))
                raise Unavailable(f"memory: injected: the cluster could not be reached for {method}")
            if fault is not None and not fault.landed:
                self.calls.append(CallLog(now, method, sid, args, False, "OutcomeUnknown"))
                raise OutcomeUnknown(f"memory: injected: {method} lost before it landed")
            try:
                result = apply()
            except Exception as exc:
                self.calls.append(CallLog(now, method, sid, args, False, type(exc).__name__))
                raise
            logged = sid if sid is not None else result if isinstance(result, str) else None
            self.calls.append(CallLog(now, method, logged, args, True))
            if fault is not None:
                raise OutcomeUnknown(f"memory: injected: {method} landed but its answer was lost")
            return result

    # ----- operations the backend uses --------------------------------------------------------------------

    def job(self, sid: str) -> TruthJob:
        job = self.jobs.get(sid)
        if job is None or job.deleted or (job.purged and not self.accounting):
            raise NotFound(f"memory: no job {sid}")
        return job

    def live_job(self, sid: str) -> TruthJob:
        job = self.job(sid)
        if job.purged:
            raise NotFound(f"memory: job {sid} left the queue")
        return job

    def create(self, job_id: str, submission: int, marker: str, spec: JobSpec, *, exclude: Sequence[str] = ()) -> str:
        now = self.clock.now()
        self._next_id += 1
        sid = str(self._next_id) if self.shape is Shape.SLURM else f"tj-{self._next_id}"
        job = TruthJob(sid, marker, job_id, submission, spec, now, exclude=frozenset(exclude))
        job.executions.append(TruthExecution(restart=0, attempt=0))
        self.jobs[sid] = job
        self._changed(sid)
        return sid

    def create_array(
        self, items: Sequence[tuple[str, int, str, JobSpec, Sequence[str]]], throttle: int | None = None
    ) -> list[str]:
        """Slurm shape: one job array of ``items`` (job id, submission, marker, spec, excluded nodes), every task
        an object of its own with its gate closed (``sbatch --array --hold``), at most ``throttle`` of them
        running at once (``%K``). Returns the tasks' ids ``<array>_<task>``, in order."""
        if self.shape is not Shape.SLURM:
            raise Rejected("memory: a Kubeflow-shaped cluster has no job arrays")
        now = self.clock.now()
        self._next_id += 1
        array = str(self._next_id)
        sids = []
        for task, (job_id, submission, marker, spec, exclude) in enumerate(items):
            sid = f"{array}_{task}"
            job = TruthJob(sid, marker, job_id, submission, spec, now, exclude=frozenset(exclude), array=array)
            job.executions.append(TruthExecution(restart=0, attempt=0))
            self.jobs[sid] = job
            self._changed(sid)
            sids.append(sid)
        self.arrays[array] = sids
        if throttle is not None:
            self.throttles[array] = throttle
        return sids

    def siblings(self, sid: str) -> list[str]:
        """The other tasks of the array ``sid`` is a task of (none for a plain job)."""
        job = self.jobs.get(sid)
        if job is None or job.array is None:
            return []
        return [t for t in self.arrays.get(job.array, ()) if t != sid]

    def open_gate(self, sid: str) -> None:
        job = self.live_job(sid)
        if job.gate_open:
            return
        if job.ended:
            return
        job.gate_open = True
        if self.shape is Shape.KUBEFLOW:
            job.attempts = max(job.attempts, 1)
            job.current.attempt = job.attempts
        self._changed(sid)
        self._start_due(self.clock.now())

    def hold(self, sid: str, instance: str) -> None:
        job = self.live_job(sid)
        if instance in job.holds:
            return
        if job.ended:
            raise Rejected(f"memory: job {sid} has ended; nothing to hold")
        if job.current.live:
            if self.shape is Shape.SLURM:
                raise Rejected(f"memory: job {sid} is running; only a waiting job can be held")
            now = self.clock.now()
            ex = job.current
            ex.ended_at, ex.state, ex.cause, ex.detail = now, State.CANCELLED, Cause.HELD, "Deactivated"
            job.executions.append(TruthExecution(restart=ex.restart, attempt=ex.attempt))
        job.holds.append(instance)
        self._changed(sid)

    def release(self, sid: str, instance: str) -> None:
        job = self.live_job(sid)
        if instance in job.holds:
            job.holds.remove(instance)
            ended_by_hold = len(job.executions) > 1 and job.executions[-2].cause is Cause.HELD
            if (
                self.shape is Shape.KUBEFLOW
                and not job.holds
                and ended_by_hold
                and job.current.started_at is None
                and job.current.ended_at is None  # an execution that already ended keeps its identity
            ):
                job.attempts += 1
                job.current.attempt = job.attempts
            self._changed(sid)
            self._start_due(self.clock.now())
            return
        if job.holds:
            raise Rejected(f"memory: job {sid} is held under another instance ({', '.join(job.holds)})")

    def requeue(self, sid: str) -> None:
        job = self.live_job(sid)
        if self.shape is not Shape.SLURM:
            raise Rejected("memory: a Kubeflow-shaped cluster has no requeue")
        job.requeue_flag = True
        if self.crash_requeue > 0:
            self.crash_requeue -= 1
            self._changed(sid)
            raise Crashed("memory: the caller crashed between the requeue's steps (Requeue=1 left set)")
        now = self.clock.now()
        if job.current.live:
            self._end(job, now, State.CANCELLED, Cause.CANCELLED, detail="REQUEUED")
        if job.current.started_at is None and not job.ended:
            raise Rejected(f"memory: job {sid} has not run; nothing to requeue")
        prev = job.current
        job.executions.append(TruthExecution(restart=prev.restart + 1, attempt=0))
        job.ended_at = None
        job.stop_requested_at = None
        self._changed(sid)
        self._start_due(now)

    def readmit(self, sid: str) -> None:
        """Kubeflow shape: authorise the readmission of an object its queue evicted (Control.preempt). The
        same object runs again as a new execution (the next attempt), as Kueue re-creates the pods. Idempotent
        per eviction: an object waiting or running again (or never evicted) is left as it is. Rejected when the
        object was stopped or ended for good (any end but a preemption)."""
        job = self.live_job(sid)
        if self.shape is not Shape.KUBEFLOW:
            raise Rejected("memory: a Slurm-shaped cluster has no readmission gate")
        if job.stopped:
            raise Rejected(f"memory: job {sid} was stopped; nothing to readmit")
        if not job.ended:
            return
        if job.current.cause is not Cause.PREEMPTED:
            raise Rejected(f"memory: job {sid} has ended ({job.current.cause}); only an evicted job is readmitted")
        job.attempts = max(job.attempts, job.current.attempt) + 1
        job.executions.append(TruthExecution(restart=job.current.restart, attempt=job.attempts))
        job.ended_at = None
        job.readmissions += 1
        self._changed(sid)
        self._start_due(self.clock.now())

    def stop(self, sid: str) -> float:
        job = self.live_job(sid)
        job.stopped = True
        if job.ended:
            return 0.0
        now = self.clock.now()
        if job.current.started_at is None:
            self._end(job, now, State.CANCELLED, Cause.CANCELLED, detail="CANCELLED")
            return 0.0
        job.stop_requested_at = now
        self._changed(sid)
        return self.kill_wait

    def find(self, marker: str, since: float) -> list[TruthJob]:
        return [
            j
            for j in self.jobs.values()
            if j.marker == marker and j.created_at >= since and not j.deleted and (self.accounting or not j.purged)
        ]

    def changes_since(self, cursor: int) -> tuple[int, list[str], bool]:
        """Watch support: (new cursor, changed sids, reset)."""
        if self._watch_dropped:
            self._watch_dropped = False
            return self._change_seq, [], True
        oldest = self._changes[0][0] if self._changes else self._change_seq + 1
        if cursor + 1 < oldest and cursor < self._change_seq:
            return self._change_seq, [], True
        sids = list(dict.fromkeys(sid for seq, sid in self._changes if seq > cursor))
        return self._change_seq, sids, False

    # ----- ground truth -----------------------------------------------------------------------------------

    def truth(self) -> list[TruthJob]:
        """Every object ever created, in creation order (including purged and deleted ones)."""
        with self._lock:
            self.advance()
            return list(self.jobs.values())


class Control:
    """What tests make the scheduler do. Each call advances the scheduler first."""

    def __init__(self, sched: MemoryScheduler) -> None:
        self._s = sched

    def _running(self, sid: str) -> TruthJob:
        job = self._s.jobs[sid]
        if not job.current.live:
            raise ValueError(f"job {sid} is not running")
        return job

    def write(self, sid: str, text: str) -> None:
        """Rank 0 of the running execution writes a line to its log (what the Kubeflow shape's
        ``execution_output`` reads back)."""
        with self._s._lock:
            self._s.advance()
            job = self._running(sid)
            line = text if text.endswith("\n") else text + "\n"
            self._s.outputs.setdefault((sid, len(job.executions) - 1), []).append(line)

    def preempt(self, sid: str) -> None:
        """End the running execution with cause preempted."""
        with self._s._lock:
            now = self._s.advance()
            self._s._end(self._running(sid), now, State.FAILED, Cause.PREEMPTED, detail="PREEMPTED")

    def out_of_memory(self, sid: str) -> None:
        with self._s._lock:
            now = self._s.advance()
            self._s._end(self._running(sid), now, State.FAILED, Cause.OUT_OF_MEMORY, detail="OUT_OF_MEMORY")

    def suspend(self, sid: str) -> None:
        """Suspend the running execution (``scontrol suspend``): it keeps its nodes and stops until resumed."""
        with self._s._lock:
            now = self._s.advance()
            ex = self._running(sid).current
            if ex.suspended_at is None:
                ex.suspended_at = now
                self._s._changed(sid)

    def resume(self, sid: str) -> None:
        """Resume a suspended execution (``scontrol resume``)."""
        with self._s._lock:
            now = self._s.advance()
            ex = self._running(sid).current
            if ex.suspended_at is not None:
                ex.suspensions.append((ex.suspended_at, now))
                ex.suspended_at = None
                self._s._changed(sid)

    def time_out(self, sid: str) -> None:
        with self._s._lock:
            now = self._s.advance()
            self._s._end(self._running(sid), now, State.FAILED, Cause.TIMEOUT, detail="TIMEOUT")

    def finish(self, sid: str, exit_code: int = 0) -> None:
        """End the running execution as the application exiting with ``exit_code``."""
        with self._s._lock:
            now = self._s.advance()
            state = State.SUCCEEDED if exit_code == 0 else State.FAILED
            self._s._end(self._running(sid), now, state, Cause.EXIT, code=exit_code, detail="COMPLETED")

    def lose_node(self, node: str) -> None:
        """The node stops answering; its jobs end with node-lost after the NodeLossWindow."""
        with self._s._lock:
            now = self._s.advance()
            self._s.lost_nodes.setdefault(node, now)

    def restore_node(self, node: str) -> None:
        with self._s._lock:
            self._s.advance()
            self._s.lost_nodes.pop(node, None)

    def cease(self, nodes: list[str], reason: str = "maintenance") -> None:
        """Announce a planned cessation of ``nodes``; their running jobs end now (as the scheduler shows it:
        node failure), and CessationSignal reports them."""
        with self._s._lock:
            now = self._s.advance()
            for n in nodes:
                self._s.ceasing[n] = (reason, now)
            for job in self._s.jobs.values():
                if job.current.live and set(job.current.nodes) & set(nodes):
                    self._s._end(job, now, State.FAILED, Cause.NODE_LOST, detail="NODE_FAIL")

    def end_cessation(self, nodes: list[str]) -> None:
        with self._s._lock:
            for n in nodes:
                self._s.ceasing.pop(n, None)

    def admin_hold(self, sid: str) -> None:
        with self._s._lock:
            self._s.advance()
            self._s.jobs[sid].admin_held = True
            self._s._changed(sid)

    def admin_release(self, sid: str) -> None:
        with self._s._lock:
            self._s.advance()
            self._s.jobs[sid].admin_held = False
            self._s._changed(sid)
            self._s._start_due(self._s.clock.now())

    def requeue(self, sid: str) -> None:
        """An admin requeues the running object by its own id (``scontrol update Requeue=1``, then ``scontrol
        requeue <array>_<task>``): its execution ends (cancelled, ``REQUEUED``) and a new one waits. Slurm shape
        only, and a running object only (ValueError otherwise): Slurm refuses both commands for an ended job
        submitted ``--no-requeue``, as dispatch submits every job ("Job has already finished"). A task of an
        array alone, its siblings untouched."""
        with self._s._lock:
            now = self._s.advance()
            job = self._s.jobs[sid]
            if self._s.shape is not Shape.SLURM or job.deleted or job.purged or not job.current.live:
                raise ValueError(f"job {sid} cannot be requeued (not running, gone, or not the Slurm shape)")
            self._s._end(job, now, State.CANCELLED, Cause.CANCELLED, detail="REQUEUED")
            job.executions.append(TruthExecution(restart=job.current.restart + 1, attempt=0))
            job.ended_at = None
            job.stop_requested_at = None
            job.admin_requeues += 1
            self._s._changed(sid)
            self._s._start_due(now)

    def cancel(self, sid: str) -> None:
        """An admin cancels the object by its own id (``scancel <array>_<task>``): at once, with no grace; a task
        of an array alone, its siblings untouched."""
        with self._s._lock:
            now = self._s.advance()
            job = self._s.jobs[sid]
            if job.ended or job.deleted:
                raise ValueError(f"job {sid} has ended")
            job.admin_cancelled = True
            self._s._end(job, now, State.CANCELLED, Cause.CANCELLED, detail="CANCELLED")

    def purge(self, sid: str) -> None:
        """Drop the job from the live queue now (as MinJobAge would)."""
        with self._s._lock:
            self._s.advance()
            job = self._s.jobs[sid]
            if not job.ended:
                raise ValueError(f"job {sid} has not ended")
            job.purged = True
            self._s._changed(sid)

    def blank(self, sid: str, seconds: float) -> None:
        """For ``seconds``, reads show the live job as having left the queue with no accounting record (state
        ``unknown``), as a transiently purged queue or an accounting gap would; the job itself runs on."""
        with self._s._lock:
            now = self._s.advance()
            job = self._s.jobs[sid]
            if job.ended or job.deleted:
                raise ValueError(f"job {sid} has ended")
            job.blank_until = now + seconds
            self._s.blanked.add(sid)
            self._s._changed(sid)

    def lag(self, sid: str, seconds: float) -> None:
        """For ``seconds``, reads have no answer for the job (``inspect_many`` says Unanswered, ``inspect``
        raises Unavailable), as a scheduler whose accounting lags behind its queue; the job itself goes on."""
        with self._s._lock:
            now = self._s.advance()
            job = self._s.jobs[sid]
            job.unanswered_until = max(job.unanswered_until, now + seconds)
            self._s.lagging.add(sid)
            self._s._changed(sid)

    def delete(self, sid: str) -> None:
        """Someone deleted the object: its evidence is gone."""
        with self._s._lock:
            self._s.advance()
            job = self._s.jobs[sid]
            if job.current.live:
                self._s._end(job, self._s.clock.now(), State.CANCELLED, Cause.CANCELLED, detail="deleted")
            job.deleted = True
            self._s._changed(sid)

    def native_restart(self, sid: str) -> None:
        """The scheduler restarts the object in place by its own policy (NativeRestart): a new execution."""
        with self._s._lock:
            now = self._s.advance()
            job = self._s.jobs[sid]
            if job.current.live:
                self._s._end(job, now, State.FAILED, Cause.EXIT, code=1, detail="restarted")
            job.object_restarts += 1
            job.executions.append(TruthExecution(restart=job.current.restart + 1, attempt=job.current.attempt))
            job.ended_at = None
            self._s._changed(sid)
            self._s._start_due(now)

    def inject(self, method: str, kind: str = "unknown", *, landed: bool = False) -> None:
        """Fail the next call of backend ``method``: ``unknown`` (OutcomeUnknown, after the effect if
        ``landed``), ``unavailable`` (nothing done), or for ``inspect_many`` only ``unanswered`` (every object
        it would show is answered :class:`~dispatch.spi.Unanswered`)."""
        if kind not in ("unknown", "unavailable", "unanswered"):
            raise ValueError("kind is unknown, unavailable or unanswered")
        if kind == "unanswered" and (method != "inspect_many" or landed):
            raise ValueError("an unanswered fault is for inspect_many only, and never landed")
        self._s.faults.append(Fault(method, kind, landed))

    def crash_next_requeue(self) -> None:
        """The next requeue stops after its first step (Requeue=1 set) and raises :class:`Crashed`."""
        self._s.crash_requeue += 1

    def drop_watch(self) -> None:
        """The next watch call loses its place (as after a 410 Gone): the consumer must re-list."""
        self._s._watch_dropped = True

    def running(self) -> list[str]:
        with self._s._lock:
            self._s.advance()
            return [j.sid for j in self._s.jobs.values() if j.current.live and not j.deleted]


def _take_room(room: dict[str, int], job: TruthJob) -> bool:
    """Whether ``job`` may start under its array's throttle (taking one of the array's places if so)."""
    if job.array is None or job.array not in room:
        return True
    if room[job.array] <= 0:
        return False
    room[job.array] -= 1
    return True
