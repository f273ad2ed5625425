"""The memory backends: the SPI over a :class:`~dispatch.memory.scheduler.MemoryScheduler`, in two shapes.

* :class:`SlurmShapedBackend`: Holder (waiting jobs only), Requeuer (two steps), MultiFinder, BatchStarter (job
  arrays: :meth:`~SlurmShapedBackend.start_many`), CessationSignal, NativePolicyCompiler; polled, with
  PolledLoss = MinJobAge for state, cause and exit code, and execution history UNBOUNDED with accounting (0
  without).
* :class:`KubeflowShapedBackend`: Holder (a hold ends a running execution with cause held), Readmitter (a
  preempted object runs again only when readmitted), Watcher, CessationSignal, IdentityWeakener,
  NativePolicyCompiler, ExecutionOutput (rank 0's log of an execution, which lasts, as pods do, until a later
  execution of the object starts or the object is deleted); no PolledLoss; requires ``dispatch.Image``.

Both are NodeInventory (every node of the memory cluster), ShapeCheck (a job no node could ever hold is refused
at submission) and AcceleratorInventory (the GPUs its settings give
the nodes), and keep a submission off its excluded nodes.
Together they implement every optional interface but OutputReader. Every call advances the scheduler to the
clock's time first; nothing runs in the background.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from dispatch.accelerators import GpuPool, Inventory
from dispatch.capabilities import Capabilities, Capability, CapabilityAnswer, Provenance, no, unknown, yes
from dispatch.declarations import UNBOUNDED, Declarations, PolledLoss
from dispatch.errors import DispatchError, NotFound, OutcomeUnknown, ReadOnly, Rejected, Unavailable
from dispatch.extensions import Extension, ExtensionPolicy, register_extension
from dispatch.identity import AttemptId, RestartId
from dispatch.memory.scheduler import REPORT_EVERY, MemoryScheduler, Shape, TruthExecution, TruthJob, last_report
from dispatch.outcome import Cause, Evidence, Outcome, State
from dispatch.shapes import NodeKind, Pool, refusal
from dispatch.shapes import Shape as ShapeOf
from dispatch.spec import JobSpec
from dispatch.spi import (
    Cessation,
    ExecutionEvidence,
    Found,
    Gate,
    JobEvidence,
    NativePolicy,
    RankProgress,
    StartRequest,
    Unanswered,
    WatchBatch,
)

NAME = "memory"
POOL = "nodes"
"""The name of the memory cluster's one pool of nodes in its GPU inventory."""


@register_extension
@dataclass(frozen=True)
class Runtime(Extension):
    """Memory (Kubeflow shape) runtime options: ``allow_rank_restart`` makes the object's identity weak."""

    kind: ClassVar[str] = "memory.Runtime"
    allow_rank_restart: bool = False


class _Base(ABC):
    """What both shapes share."""

    shape: ClassVar[Shape]

    def __init__(self, scheduler: MemoryScheduler, *, read_only: bool = False, call_bound: float = 30.0) -> None:
        if scheduler.shape is not self.shape:
            raise ValueError(f"a {type(self).__name__} needs a {self.shape.value}-shaped scheduler")
        self.scheduler = scheduler
        self._read_only = read_only
        self._call_bound = call_bound
        self.closed = False
        self._identities: dict[tuple[str, int, int], str] = {}
        """Each execution's identity text, made once (an identity never changes; building it validates it)."""

    # ----- identity of the backend -----------------------------------------------------------------------

    @property
    def name(self) -> str:
        return NAME

    @property
    def read_only(self) -> bool:
        return self._read_only

    def _write(self, what: str) -> None:
        if self._read_only:
            raise ReadOnly(f"memory backend opened read-only: {what} refused")

    # ----- evidence --------------------------------------------------------------------------------------

    @abstractmethod
    def _identity(self, job: TruthJob, ex: TruthExecution) -> str:
        """The execution's identity in this shape's form."""

    def _identity_of(self, job: TruthJob, ex: TruthExecution) -> str:
        key = (job.sid, ex.attempt, ex.restart)
        text = self._identities.get(key)
        if text is None:
            text = self._identities[key] = self._identity(job, ex)
        return text

    def _waiting_outcome(self, job: TruthJob, ev: Evidence) -> Outcome:
        if job.admin_held:
            return Outcome(State.HELD, Cause.ADMIN_HELD, ev, detail="JobHeldAdmin")
        if job.holds:
            return Outcome(State.HELD, Cause.HELD, ev, detail="held by dispatch")
        if not job.gate_open:
            return Outcome(State.PENDING, Cause.GATED, ev, detail="start gate closed")
        if job.spec.nodes > self.scheduler.nodes_that_fit(job.spec):
            return Outcome(State.PENDING, Cause.NO_CAPACITY, ev, detail="Resources")
        return Outcome(State.PENDING, Cause.QUEUED, ev, detail="Priority")

    def _evidence(self, job: TruthJob, now: float, shared: dict[Any, Any] | None = None) -> JobEvidence:
        """What the scheduler shows of ``job`` at ``now``. ``shared`` holds the (immutable) Evidence and Outcome
        values of one read, made once and shared by every job that shows the same: a batch read builds per job
        only what differs between jobs."""
        memo: dict[Any, Any] = {} if shared is None else shared
        blank = now < job.blank_until and not job.ended
        source = "memory:accounting" if job.purged or blank else "memory:queue"
        ev = memo.get(source)
        if ev is None:
            ev = memo[source] = Evidence(source, now)

        executions = []
        for ex in job.executions:
            if ex.started_at is None and ex.ended_at is None:
                continue
            if job.purged or blank:
                why = "purged: accounting keeps executions only"
                out = _shared_outcome(memo, ev, State.UNKNOWN, Cause.UNKNOWN, None, why)
            elif ex.ended_at is not None:
                assert ex.cause is not None
                out = _shared_outcome(memo, ev, ex.state, ex.cause, ex.exit_code, ex.detail)
            elif ex.suspended_at is not None:
                out = _shared_outcome(memo, ev, State.RUNNING, Cause.SUSPENDED, None, "SUSPENDED")
            else:
                out = _shared_outcome(memo, ev, State.RUNNING, None, None, "RUNNING")
            progress: tuple[RankProgress, ...] = ()
            if out.state is State.RUNNING and ex.started_at is not None:
                last = last_report(self.scheduler.program(job), ex.started_at, now, ex.pauses(now))
                if last is not None:
                    step = round((last - ex.started_at) / REPORT_EVERY)
                    progress = tuple(RankProgress(r, step, last) for r in range(job.spec.nodes))
            executions.append(
                ExecutionEvidence(
                    self._identity_of(job, ex), ex.restart, out, ex.started_at, ex.ended_at, ex.nodes, progress
                )
            )
        cur = job.current
        if job.purged or blank:
            outcome = _shared_outcome(memo, ev, State.UNKNOWN, Cause.UNKNOWN, None, "left the queue")
        elif cur.started_at is None and cur.ended_at is None:
            outcome = self._waiting_outcome(job, ev)
        else:
            outcome = executions[-1].outcome
        return JobEvidence(
            scheduler_id=job.sid,
            marker=job.marker,
            outcome=outcome,
            gate=Gate.OPEN if job.gate_open else Gate.CLOSED,
            holds=tuple(job.holds),
            foreign_holds=("admin",) if job.admin_held else (),
            executions=tuple(executions),
        )

    # ----- the Backend protocol -----------------------------------------------------------------------------

    def start(self, request: StartRequest) -> str:
        self._write("start")
        self.extension_policy().check(request.spec.extensions, NAME)
        s = self.scheduler
        return str(
            s.call(
                "start",
                None,
                {"marker": request.marker, "exclude": list(request.exclude)},
                lambda: s.create(
                    request.job_id, request.submission, request.marker, request.spec, exclude=request.exclude
                ),
            )
        )

    def never_runs(self, spec: JobSpec) -> str | None:
        """ShapeCheck: why no node of the memory cluster (lost ones too: they may come back) could ever run
        ``spec`` (its settings' ``nodes``, and each node's ``cpusPerNode`` and ``memPerNode`` where counted)."""
        s = self.scheduler
        kinds = tuple(NodeKind(1, s.capacity[n].cpus or None, s.capacity[n].memory or None) for n in s.node_names)
        return refusal(Pool("the memory cluster", kinds), ShapeOf.of(spec))

    def schedulable_nodes(self, spec: JobSpec) -> frozenset[str] | None:
        """Every node of the memory cluster (a lost node may come back)."""
        return self.scheduler.node_set

    def open(self, scheduler_id: str) -> None:
        self._write("open")
        s = self.scheduler

        def apply() -> None:
            job = s.live_job(scheduler_id)
            if job.admin_held and not job.gate_open:
                # the gate is ours and is opened; the admin's hold stays and is reported as foreign
                pass
            s.open_gate(scheduler_id)

        s.call("open", scheduler_id, {}, apply)

    def inspect(self, scheduler_id: str) -> JobEvidence:
        s = self.scheduler
        with s._lock:
            now = s.advance()
            job = s.job(scheduler_id)
            if s.unanswered(job, now):
                from dispatch.errors import Unavailable

                raise Unavailable(f"memory: no answer for job {scheduler_id} yet (accounting lag)")
            return self._evidence(job, now)

    def inspect_many(self, scheduler_ids: Sequence[str]) -> Mapping[str, JobEvidence | Unanswered]:
        s = self.scheduler
        out: dict[str, JobEvidence | Unanswered] = {}
        shared: dict[Any, Any] = {}
        with s._lock:
            now = s.advance()
            fault = s._fault("inspect_many")
            if fault is not None and fault.kind != "unanswered":
                from dispatch.errors import Unavailable

                raise Unavailable("memory: injected: the status query failed")
            for sid in scheduler_ids:
                try:
                    job = s.job(sid)
                except NotFound:
                    continue
                if fault is not None:
                    out[sid] = Unanswered(sid, "memory: injected: no answer for it yet", now)
                elif s.unanswered(job, now):
                    out[sid] = Unanswered(sid, "accounting lag: neither the queue nor accounting shows it yet", now)
                else:
                    out[sid] = self._evidence(job, now, shared)
        return out

    def find(self, marker: str, since: float) -> list[Found]:
        s = self.scheduler
        with s._lock:
            s.advance()
            _unavailable(s, "find")
            return [Found(j.sid, j.marker, j.created_at) for j in s.find(marker, since)]

    def stop_job(self, scheduler_id: str) -> float:
        self._write("stop")
        s = self.scheduler
        return float(s.call("stop_job", scheduler_id, {}, lambda: s.stop(scheduler_id)))

    def close(self) -> None:
        self.closed = True

    # ----- shared optional interfaces ----------------------------------------------------------------------

    def hold(self, scheduler_id: str, instance: str) -> None:
        self._write("hold")
        s = self.scheduler
        s.call("hold", scheduler_id, {"instance": instance}, lambda: s.hold(scheduler_id, instance))

    def release(self, scheduler_id: str, instance: str) -> None:
        self._write("release")
        s = self.scheduler
        s.call("release", scheduler_id, {"instance": instance}, lambda: s.release(scheduler_id, instance))

    def cessation(self, scheduler_ids: Sequence[str]) -> Mapping[str, Cessation]:
        s = self.scheduler
        out: dict[str, Cessation] = {}
        with s._lock:
            s.advance()
            for sid in scheduler_ids:
                job = s.jobs.get(sid)
                if job is None:
                    continue
                nodes = [n for ex in job.executions for n in ex.nodes if n in s.ceasing]
                if nodes:
                    reason, since = s.ceasing[nodes[0]]
                    out[sid] = Cessation(reason, since, tuple(dict.fromkeys(nodes)))
        return out

    def compile_policy(self, rules: Sequence[Mapping[str, Any]]) -> NativePolicy:
        native = tuple(r for r in rules if r.get("action") == "restart" and self.scheduler.native_restart)
        residual = tuple(r for r in rules if r not in native)
        return NativePolicy(native, residual, {"restart": bool(native)})

    # ----- capabilities ------------------------------------------------------------------------------------

    def _common_capabilities(self) -> dict[Capability, CapabilityAnswer]:
        nr = (
            yes("the memory scheduler restarts in place when configured with native_restart")
            if self.scheduler.native_restart
            else no("native restart is off in this memory scheduler")
        )
        return {
            Capability.SHARED_STORAGE: no("the simulator runs no program, so it has no storage to share with one"),
            Capability.NATIVE_REQUEUE: no("the memory scheduler never requeues by itself"),
            Capability.NATIVE_RESTART: nr,
            Capability.PRE_TERMINATION_SIGNAL: yes("simulated: a stop is graceful, then forced after KillWait"),
            Capability.ATTEMPT_INJECTION: yes("the execution identity is known before each execution starts"),
            Capability.WORKING_DIRECTORY: yes("simulated: any absolute directory is accepted"),
            Capability.PROCS_PER_NODE: yes("simulated: any number of processes per node"),
            Capability.OUTPUT_PATH: no("the memory adapter produces no output files"),
            Capability.OUTPUT_READ: no("the memory adapter does not implement OutputReader"),
            Capability.OUTPUT_FOLLOW: no("the memory adapter does not implement OutputReader"),
            Capability.OUTPUT_RETAINED: no(
                "the memory adapter keeps no output files (the Kubeflow shape's rank 0 log goes with the execution)"
            ),
            Capability.ACCELERATORS: self.accelerators().answer(Provenance.DECLARED),
        }

    def accelerators(self) -> Inventory:
        """The GPUs of the simulated nodes (settings ``gpusPerNode``, ``gpuType``, ``gpuNodes``), as one pool."""
        caps = self.scheduler.capacity.values()
        pools = [GpuPool(POOL, c.gpu_type, c.gpus, 1) for c in caps if c.gpus]
        return Inventory.of(pools, "memory settings", note="" if pools else "setting gpusPerNode is 0")

    @abstractmethod
    def extension_policy(self) -> ExtensionPolicy:
        """Defined by each shape."""

    @abstractmethod
    def capabilities(self) -> Capabilities:
        """Defined by each shape."""

    @abstractmethod
    def declarations(self) -> Declarations:
        """Defined by each shape."""


class SlurmShapedBackend(_Base):
    """The memory adapter in the shape of the Slurm adapter (polled, requeue, far-future-start holds)."""

    shape = Shape.SLURM

    def _identity(self, job: TruthJob, ex: TruthExecution) -> str:
        return str(RestartId(job.submission, job.sid, ex.restart))

    def extension_policy(self) -> ExtensionPolicy:
        return ExtensionPolicy(accepted=frozenset({"dispatch.Output", "dispatch.SharedCheckpoint"}))

    def capabilities(self) -> Capabilities:
        caps = self._common_capabilities()
        acct = self.scheduler.accounting
        caps.update(
            {
                Capability.CONTAINER_IMAGE: no("the Slurm shape runs no container images"),
                Capability.HOLD: yes("holds on waiting jobs, by instance", Provenance.PROBED),
                Capability.ACCOUNTING_HISTORY: (
                    yes("accounting keeps executions after MinJobAge", Provenance.PROBED)
                    if acct
                    else no("this memory scheduler has no accounting", Provenance.PROBED)
                ),
                Capability.READMISSION_GATE: no("a requeued Slurm-shaped job starts again without dispatch"),
                Capability.NODE_EXCLUSION: yes("a submission's excluded nodes never run it"),
                Capability.PROGRESS_REPORTING: yes("a running program that reports (``... report``, ``hang S``) does"),
                Capability.BATCH_THROTTLE: yes("an array's throttle keeps its other tasks queued, as Slurm's %K"),
            }
        )
        answers = Capabilities(caps)
        return answers.lowered_for_read_only() if self._read_only else answers

    def declarations(self) -> Declarations:
        s = self.scheduler
        window = s.min_job_age
        return Declarations(
            node_loss_window=s.node_loss_window,
            call_bound=self._call_bound,
            polled_loss=PolledLoss(window, window, window, UNBOUNDED if s.accounting else 0.0),
        )

    def start_many(
        self, requests: Sequence[StartRequest], *, max_running: int | None = None
    ) -> list[str | DispatchError]:
        """Requests that can share a job array (:func:`array_key`: the same spec apart from command, name and
        environment, and the same excluded nodes) become one array per group, created in this one scheduler
        call, its tasks' gates closed; a request alone in its group is a plain job. One answer per request, in
        order: its id (``<array>_<task>`` for a task), or its own error. A fault injected for ``start_many``
        is the whole call's: Unavailable (nothing created) or OutcomeUnknown (created or not, as injected) is
        every request's answer, as one failed ``sbatch --array`` is every task's.

        ``max_running``: the requests go as one array throttled at that many running tasks (as Slurm's ``%K``);
        requests that would make more than one group are each Rejected, nothing created (as on Slurm)."""
        self._write("start_many")
        s = self.scheduler
        policy = self.extension_policy()
        answers: list[str | DispatchError | None] = [None] * len(requests)
        groups: dict[tuple[Any, ...], list[int]] = {}
        for i, request in enumerate(requests):
            try:
                policy.check(request.spec.extensions, NAME)
            except DispatchError as exc:
                answers[i] = exc
                continue
            groups.setdefault(array_key(request), []).append(i)
        if max_running is not None and len(groups) > 1:
            why = (
                f"max_running={max_running} is an array throttle, and these jobs need {len(groups)} arrays"
                " (different shapes or excluded nodes): nothing was submitted"
            )
            return [a if a is not None else Rejected(why) for a in answers]

        def apply() -> list[list[str]]:
            made = []
            for members in groups.values():
                if len(members) == 1:
                    r = requests[members[0]]
                    made.append([s.create(r.job_id, r.submission, r.marker, r.spec, exclude=r.exclude)])
                else:
                    items = [requests[i] for i in members]
                    made.append(
                        s.create_array(
                            [(r.job_id, r.submission, r.marker, r.spec, r.exclude) for r in items], max_running
                        )
                    )
            return made

        if groups:
            markers = [requests[i].marker for members in groups.values() for i in members]
            try:
                made = s.call("start_many", None, {"markers": markers}, apply)
            except (Unavailable, OutcomeUnknown) as exc:
                for members in groups.values():
                    for i in members:
                        answers[i] = copy.copy(exc)
            else:
                for members, sids in zip(groups.values(), made, strict=True):
                    for i, sid in zip(members, sids, strict=True):
                        answers[i] = sid
        return [a if a is not None else Unavailable("memory: not submitted") for a in answers]

    def open_many(self, scheduler_ids: Sequence[str]) -> list[DispatchError | None]:
        """Open every object's gate in this one scheduler call (``scontrol release`` of the ids named: a task
        of an array by its own id, its siblings untouched); one answer per id, in order: None, or the error
        :meth:`open` would raise for it. A fault injected for ``open_many`` is the whole call's answer for every
        id (OutcomeUnknown after opening them all when injected as landed)."""
        self._write("open_many")
        s = self.scheduler

        def apply() -> list[DispatchError | None]:
            out: list[DispatchError | None] = []
            for sid in scheduler_ids:
                try:
                    s.open_gate(sid)
                    out.append(None)
                except DispatchError as exc:
                    out.append(exc)
            return out

        if not scheduler_ids:
            return []
        try:
            answers: list[DispatchError | None] = s.call("open_many", None, {"ids": list(scheduler_ids)}, apply)
        except (Unavailable, OutcomeUnknown) as exc:
            return [copy.copy(exc) for _ in scheduler_ids]
        return answers

    def requeue(self, scheduler_id: str) -> None:
        self._write("requeue")
        s = self.scheduler
        s.call("requeue", scheduler_id, {}, lambda: s.requeue(scheduler_id))

    def find_many(self, markers: Sequence[str], since: float) -> Mapping[str, list[Found]]:
        s = self.scheduler
        wanted = set(markers)
        out: dict[str, list[Found]] = {m: [] for m in markers}
        with s._lock:
            s.advance()
            _unavailable(s, "find_many")
            for j in s.jobs.values():
                if j.marker in wanted and j.created_at >= since and not j.deleted and (s.accounting or not j.purged):
                    out[j.marker].append(Found(j.sid, j.marker, j.created_at))
        return out


class KubeflowShapedBackend(_Base):
    """The memory adapter in the shape of the Kubeflow adapter (watched, holds by deactivation)."""

    shape = Shape.KUBEFLOW

    def _identity(self, job: TruthJob, ex: TruthExecution) -> str:
        return str(AttemptId(job.job_id, job.submission, ex.attempt, ex.restart, 0))

    def extension_policy(self) -> ExtensionPolicy:
        return ExtensionPolicy(
            required=frozenset({"dispatch.Image"}),
            accepted=frozenset({"dispatch.Image", "dispatch.SharedCheckpoint", "memory.Runtime"}),
        )

    def capabilities(self) -> Capabilities:
        caps = self._common_capabilities()
        hold = (
            unknown("read-only open: the gate could not be proven")
            if self._read_only
            else yes("holds deactivate the object; a running execution ends with cause held", Provenance.PROBED)
        )
        caps.update(
            {
                Capability.CONTAINER_IMAGE: yes("the Kubeflow shape runs container images"),
                Capability.HOLD: hold,
                Capability.ACCOUNTING_HISTORY: no("a deleted object is gone"),
                Capability.READMISSION_GATE: yes("a held or evicted object is readmitted only when dispatch allows"),
                Capability.NODE_EXCLUSION: yes("a submission's excluded nodes never run it"),
                Capability.PROGRESS_REPORTING: no(
                    "a watched backend reads only the objects its watch reports changed, and a report is no change"
                ),
                Capability.BATCH_THROTTLE: no("the Kubeflow shape has no job arrays"),
            }
        )
        return Capabilities(caps)

    def declarations(self) -> Declarations:
        return Declarations(
            node_loss_window=self.scheduler.node_loss_window, call_bound=self._call_bound, polled_loss=None
        )

    def readmit(self, scheduler_id: str) -> None:
        self._write("readmit")
        s = self.scheduler
        s.call("readmit", scheduler_id, {}, lambda: s.readmit(scheduler_id))

    def watch(self, cursor: str | None, timeout: float) -> WatchBatch:
        s = self.scheduler
        with s._lock:
            s.advance()
            _unavailable(s, "watch")
            if cursor is None:
                seq, _, _ = s.changes_since(s._change_seq)
                return WatchBatch(str(seq), (), reset=True)
            try:
                position = int(cursor)
            except ValueError:
                return WatchBatch(str(s._change_seq), (), reset=True)
            seq, sids, reset = s.changes_since(position)
            return WatchBatch(str(seq), tuple(sids), reset)

    def execution_output(self, scheduler_id: str, identity: str) -> Iterator[bytes]:
        """Rank 0's log of execution ``identity``: a first line naming it, then what :meth:`Control.write`
        wrote. NotFound once a later execution has started (its pods replaced these) or the object is gone."""
        s = self.scheduler
        with s._lock:
            s.advance()
            _unavailable(s, "execution_output")
            job = s.job(scheduler_id)
            index = next((i for i, ex in enumerate(job.executions) if self._identity(job, ex) == identity), None)
            if index is None or job.executions[index].started_at is None:
                raise NotFound(f"memory: {scheduler_id} has no execution {identity} that ran")
            if any(ex.started_at is not None for ex in job.executions[index + 1 :]):
                raise NotFound(f"memory: the pods of execution {identity} were replaced by a later execution's")
            lines = [f"rank 0 of execution {identity}\n", *s.outputs.get((scheduler_id, index), [])]
        return iter([line.encode() for line in lines])

    def weakened(self, scheduler_id: str) -> str | None:
        job = self.scheduler.job(scheduler_id)
        runtime = job.spec.extension(Runtime)
        if runtime is not None and runtime.allow_rank_restart:
            return "the runtime lets a rank restart inside an execution (allow_rank_restart)"
        return None


def array_key(request: StartRequest) -> tuple[Any, ...]:
    """What requests that share a job array have in common (as sbatch's options for them are the same): the
    spec but for its command, name and environment (each task's own, in the array's script), and the excluded
    nodes."""
    spec = request.spec
    return (
        spec.nodes,
        spec.procs_per_node,
        spec.working_dir,
        spec.time_limit,
        spec.extensions,
        spec.resources,
        tuple(sorted(request.exclude)),
    )


def _shared_outcome(
    memo: dict[Any, Any], ev: Evidence, state: State, cause: Cause | None, code: int | None, detail: str
) -> Outcome:
    """The Outcome of these values read with ``ev``, made once per read (``memo``) and shared: it is immutable."""
    key = (ev.source, state, cause, code, detail)
    out = memo.get(key)
    if out is None:
        out = memo[key] = Outcome(state, cause, ev, exit_code=code, detail=detail)
    return out


def _unavailable(s: MemoryScheduler, method: str) -> None:
    """Raise Unavailable if a fault was injected for the next ``method`` read (any kind: a read has no effect)."""
    if s._fault(method) is not None:
        from dispatch.errors import Unavailable

        raise Unavailable(f"memory: injected: {method} could not reach the cluster")


def events_of(backend: object) -> Iterator[str]:
    """Names of the scheduler calls a backend made (for tests that count calls)."""
    if isinstance(backend, _Base):
        yield from (c.method for c in backend.scheduler.calls)
