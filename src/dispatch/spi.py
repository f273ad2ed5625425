"""The backend SPI: what an adapter implements, and the optional interfaces found with ``isinstance``.

A :class:`Backend` talks to one cluster. It knows nothing of records, rules or supervisors: it creates
scheduler objects behind a closed start gate, opens gates, reports evidence, finds objects by marker and stops
them. Everything it returns is *evidence* with a source and a time; everything it cannot know it says it does
not know (``Cause.UNKNOWN``, :class:`~dispatch.errors.OutcomeUnknown`).

Contract for every method: it raises only :mod:`dispatch.errors` classes for scheduler answers (anything else
is a bug), :class:`~dispatch.errors.ReadOnly` before doing anything on a read-only backend, and
:class:`~dispatch.errors.Unavailable` when the cluster could not be reached and nothing was done.

Optional interfaces (``Holder``, ``Requeuer``, ``Readmitter``, ``NativePolicyCompiler``, ``Watcher``,
``CessationSignal``, ``IdentityWeakener``, ``MultiFinder``, ``ProgressScope``, ``BatchStarter``, ``OutputReader``,
``OutputSlices``, ``ExecutionOutput``, ``AcceleratorInventory``, ``NodeInventory``, ``ShapeCheck``) are
``runtime_checkable`` protocols: code asks ``isinstance(backend, Holder)``.
:func:`restrict` hands out a backend without some of them.

This module is an adapter author's one import (its ``__all__``): what it defines (the protocols, the evidence an
adapter returns, :class:`OpenOptions` its factory receives, the views), and, from the modules that define them,
what an adapter declares and registers with: :class:`~dispatch.declarations.Declarations`,
:class:`~dispatch.declarations.PolledLoss`, :data:`~dispatch.declarations.UNBOUNDED`,
:class:`~dispatch.errors.DeclarationError`, :class:`~dispatch.extensions.Extension`,
:class:`~dispatch.extensions.ExtensionPolicy`, :func:`~dispatch.extensions.register_extension`,
:func:`~dispatch.registry.register` and :func:`~dispatch.cluster.new_backend`. The last two live in modules that
import this one, so they are imported on first use (module ``__getattr__``, as the ``dispatch`` package does).
What a user calls (``JobSpec``, ``Outcome``, ``State``, ``Capabilities``, the errors, ...) an adapter takes from
``dispatch``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from dispatch.capabilities import Capabilities
from dispatch.clock import SYSTEM_CLOCK, Clock
from dispatch.declarations import UNBOUNDED, Declarations, PolledLoss
from dispatch.errors import DeclarationError, DispatchError
from dispatch.extensions import Extension, ExtensionPolicy, register_extension
from dispatch.outcome import Outcome
from dispatch.spec import JobSpec

if TYPE_CHECKING:
    from dispatch.accelerators import Inventory


@dataclass(frozen=True)
class OpenOptions:
    """How a backend is opened (what an adapter's factory receives with its settings): read-only (no writes, no
    probes) and the clock to read time from."""

    read_only: bool = False
    clock: Clock = SYSTEM_CLOCK


@dataclass(frozen=True, slots=True)
class StartRequest:
    """One submission to create: the ``submission``-th scheduler object of dispatch job ``job_id``.

    ``marker`` is unique to this submission and written to the record before :meth:`Backend.start` is
    called; the backend must store it on the object so :meth:`Backend.find` can find it by marker.

    ``exclude``: nodes the object must never run on (a resubmission avoiding blamed or suspect nodes). It is
    non-empty only where the cluster's NodeExclusion is yes; such a backend keeps every execution of the object
    off these nodes.
    """

    job_id: str
    submission: int
    marker: str
    spec: JobSpec
    exclude: tuple[str, ...] = ()


class Gate(StrEnum):
    """dispatch's own start gate on a scheduler object."""

    CLOSED = "closed"
    OPEN = "open"


@dataclass(frozen=True, slots=True)
class RankProgress:
    """The last progress one rank reported (:func:`dispatch.job.progress`): its ``step``, the ``total`` it ends
    at where known, ``metrics`` as (name, value) pairs (a value is None where the job recorded a NaN or an
    infinity), and ``at``, when the rank wrote it (epoch seconds, on the supervisor's time scale: the adapter
    corrects the cluster's offset as for every other time it reports). ``first_step`` and ``first_at`` are the
    rank's first report of this execution (the base of its rate: a resumed run starts from its checkpoint's
    step), where the report carries them."""

    rank: int
    step: int
    at: float
    total: int | None = None
    metrics: tuple[tuple[str, float | None], ...] = ()
    first_step: int | None = None
    first_at: float | None = None


@dataclass(frozen=True, slots=True)
class ExecutionEvidence:
    """One execution (one run in place) of a submission, as the scheduler shows it.

    ``identity`` is its text form (see :mod:`dispatch.identity`); ``restart`` orders executions; ``nodes`` are
    the nodes it ran on, where known. ``progress`` is the last report of every rank that reported progress, by
    rank, read in the same batched call as the state (empty where no rank reported, and on a cluster whose
    ProgressReporting is not yes); only a running execution's is read.
    """

    identity: str
    restart: int
    outcome: Outcome
    started_at: float | None = None
    ended_at: float | None = None
    nodes: tuple[str, ...] = ()
    progress: tuple[RankProgress, ...] = ()


@dataclass(frozen=True, slots=True)
class JobEvidence:
    """Everything a backend can tell about one scheduler object, read at one time.

    * ``outcome``: the object's current state and cause (of its latest execution, or why it waits).
    * ``gate``: dispatch's start gate. ``foreign_holds``: gates or holds placed by someone else (an admin);
      non-empty means the job is admin-held, and dispatch must never lift them.
    * ``holds``: the instances of dispatch holds currently on the object.
    * ``executions``: every execution the scheduler still shows, oldest first (possibly fewer than ran, when
      history was purged).
    """

    scheduler_id: str
    marker: str | None
    outcome: Outcome
    gate: Gate
    holds: tuple[str, ...] = ()
    foreign_holds: tuple[str, ...] = ()
    executions: tuple[ExecutionEvidence, ...] = ()

    @property
    def current(self) -> ExecutionEvidence | None:
        return self.executions[-1] if self.executions else None


@dataclass(frozen=True, slots=True)
class Unanswered:
    """:meth:`Backend.inspect_many`'s answer for an object the scheduler has not answered for *yet*.

    For a scheduler whose reads lag (Grid Engine's accounting shows a job about 15 s after it leaves ``qstat``):
    the object exists, or existed a moment ago, but neither the queue nor the accounting shows it now. It is not
    "gone" (leave the id out for that) and not a failed batch (raise Unavailable for that). The supervisor keeps
    the submission's last evidence and starts the same clock as for an ``unknown`` reading
    (``Submission.unknown_since``): an object still unanswered after the backend's NodeLossWindow is folded as
    unknown evidence is. ``reason`` says why (it goes into the record's detail); ``observed_at`` is when the
    question was asked.
    """

    scheduler_id: str
    reason: str
    observed_at: float


@dataclass(frozen=True, slots=True)
class Found:
    """A scheduler object found by its marker."""

    scheduler_id: str
    marker: str
    created_at: float | None = None


@runtime_checkable
class Backend(Protocol):
    """What every adapter implements for one cluster."""

    @property
    def name(self) -> str:
        """The adapter's registered name (``slurm``, ``kubeflow``, ``memory``, ``local``)."""
        ...

    @property
    def read_only(self) -> bool: ...

    def capabilities(self) -> Capabilities:
        """This cluster's answers (cheap: computed at open by preflight, not per call)."""
        ...

    def declarations(self) -> Declarations: ...

    def extension_policy(self) -> ExtensionPolicy: ...

    def start(self, request: StartRequest) -> str:
        """Create the submission's scheduler object with the start gate CLOSED, carrying ``request.marker``.

        Returns the scheduler id. Nothing may run until :meth:`open`. Raises OutcomeUnknown when the object
        may or may not exist (find it by marker after the CallBound), Unsupported for a spec this cluster
        cannot run, Rejected when the scheduler refuses it.
        """
        ...

    def open(self, scheduler_id: str) -> None:
        """Open dispatch's start gate. Idempotent: opening an open gate is not an error. Never lifts a gate
        or hold placed by someone else (raises Rejected naming it instead). NotFound if the object is gone."""
        ...

    def inspect(self, scheduler_id: str) -> JobEvidence:
        """Read one object. NotFound when the scheduler has no trace of it (never a guessed outcome);
        Unavailable when it has not answered for it yet (where :meth:`inspect_many` says :class:`Unanswered`)."""
        ...

    def inspect_many(self, scheduler_ids: Sequence[str]) -> Mapping[str, JobEvidence | Unanswered]:
        """Read many objects in one batched call. Ids with no trace are absent from the result; an id the
        scheduler has not answered for yet maps to :class:`Unanswered` (never block the batch waiting for it,
        and never fail the whole batch for it)."""
        ...

    def find(self, marker: str, since: float) -> list[Found]:
        """Objects carrying ``marker`` created at or after ``since`` (the horizon)."""
        ...

    def stop_job(self, scheduler_id: str) -> float:
        """Ask the scheduler to end the object (graceful first where it can). Returns the bound in seconds
        after which the job has certainly ended. Idempotent; NotFound if gone."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class Holder(Protocol):
    """Places and lifts holds by instance, so a late or stale call can be told apart and only the owner lifts
    its hold. Allowed only with a non-zero CallBound."""

    def hold(self, scheduler_id: str, instance: str) -> None:
        """Hold a waiting object under ``instance`` (idempotent for the same instance). Rejected if it runs
        and the backend cannot hold a running execution."""
        ...

    def release(self, scheduler_id: str, instance: str) -> None:
        """Lift the hold ``instance`` only. Rejected if the object carries another instance; a no-op if it
        carries none."""
        ...


@runtime_checkable
class Requeuer(Protocol):
    """Puts an object back in its queue as a new execution (restart + 1) of the same submission.

    May be several scheduler steps; a crash between them raises OutcomeUnknown, which a later observation
    resolves (the restart count moved or it did not). Allowed only with a non-zero CallBound.

    A Requeuer whose scheduler cannot requeue an execution that has already ended (Slurm, for the
    ``--no-requeue`` jobs dispatch submits) also defines ``requeue_after_end() -> CapabilityAnswer`` saying so,
    with the Reason: the supervisor decides on ended executions only, so a requeue rule is then refused at load
    (:func:`dispatch.rules.action_availability`) instead of failing every time it matches. Without the method,
    an ended execution is taken to be requeueable; the core conformance check ``requeue_rule`` holds the
    backend to it."""

    def requeue(self, scheduler_id: str) -> None: ...


@runtime_checkable
class Readmitter(Protocol):
    """Authorises the readmission of an object its queue evicted (preempted, ...) and keeps waiting at the
    readmission gate (ReadmissionGate yes): the same submission runs again, as a new execution, without a new
    submission. Allowed only with a non-zero CallBound.

    ``readmit`` is idempotent per eviction: readmitting an object already readmitted and not evicted since
    changes nothing (so a retry after an unknown outcome never authorises a second run). Rejected when the
    object has ended for good (stopped, completed, failed by itself: nothing waits to be readmitted).
    Offered only where the cluster has a readmission gate that dispatch opens; a backend mode without one
    (Kubeflow without Kueue) does not implement it."""

    def readmit(self, scheduler_id: str) -> None: ...


@dataclass(frozen=True, slots=True)
class NativePolicy:
    """What a NativePolicyCompiler made of some rules: ``native`` the scheduler enforces by itself (as
    scheduler options), ``residual`` the supervisor must still apply."""

    native: tuple[Mapping[str, Any], ...]
    residual: tuple[Mapping[str, Any], ...]
    options: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class NativePolicyCompiler(Protocol):
    """Compiles recovery rules into the scheduler's own failure handling, where it has some."""

    def compile_policy(self, rules: Sequence[Mapping[str, Any]]) -> NativePolicy: ...


@dataclass(frozen=True, slots=True)
class WatchBatch:
    """Changes since a cursor: the ids whose evidence changed, and the cursor to resume from.

    ``reset`` is True when the backend lost its place (a 410 Gone and re-list): the consumer must then treat
    every object as changed.
    """

    cursor: str
    changed: tuple[str, ...]
    reset: bool = False


@runtime_checkable
class Watcher(Protocol):
    """Pushes changes instead of being polled. A Watcher declares no PolledLoss."""

    def watch(self, cursor: str | None, timeout: float) -> WatchBatch:
        """Changes after ``cursor`` (None: from now, with ``reset``), waiting up to ``timeout`` seconds."""
        ...


@dataclass(frozen=True, slots=True)
class Cessation:
    """A planned end of the nodes or site a job runs on (drain, maintenance): ``reason`` and since when."""

    reason: str
    since: float
    nodes: tuple[str, ...] = ()


@runtime_checkable
class CessationSignal(Protocol):
    """Tells which jobs' nodes are ceasing on purpose, so their end is ``cessation``, not a failure."""

    def cessation(self, scheduler_ids: Sequence[str]) -> Mapping[str, Cessation]: ...


@runtime_checkable
class IdentityWeakener(Protocol):
    """Says which objects may restart a rank without a new execution identity (their identity is weaker)."""

    def weakened(self, scheduler_id: str) -> str | None:
        """The reason the object's execution identity is weak, or None if it is strong."""
        ...


@runtime_checkable
class NodeInventory(Protocol):
    """Names the nodes that could run a job, so a resubmission whose exclusions leave too few of them is
    escalated instead of submitted to wait forever."""

    def schedulable_nodes(self, spec: JobSpec) -> frozenset[str] | None:
        """Every node that could run ``spec`` on this cluster, whatever its state now (a node down now may come
        back); None when the backend cannot tell."""
        ...


@runtime_checkable
class ProgressScope(Protocol):
    """A backend whose progress read is worth narrowing (on Slurm, file operations on shared storage per job
    that reports): its :meth:`inspect_many` takes ``progress_of``, the objects whose progress the caller needs
    (None: all, the default). The others' running executions may come without progress; everything else in
    the answer is the same. Without it, every running execution's progress is read."""

    def scopes_progress(self) -> bool:
        """True: ``inspect_many(ids, progress_of=...)`` is accepted."""
        ...

    def inspect_many(
        self, scheduler_ids: Sequence[str], *, progress_of: Collection[str] | None = None
    ) -> Mapping[str, JobEvidence | Unanswered]: ...


@runtime_checkable
class ShapeCheck(Protocol):
    """Says, from what the adapter already knows of its cluster (read at open, not per call), when a spec's
    shape can never run there: more nodes than the pool (partition, queue, cluster) has or lets one job have, more
    CPUs (ranks x CPUs per rank) or memory per node than any of its nodes has. The core refuses such a spec before
    anything is recorded or submitted (:func:`dispatch.cluster.check_spec`); :mod:`dispatch.shapes` does the
    arithmetic."""

    def never_runs(self, spec: JobSpec) -> str | None:
        """One line saying why ``spec`` can never run on this cluster (``5 nodes asked, partition normal has
        2``), or None when it may, or when the adapter cannot tell. A node down or drained now may come back:
        it counts. Makes no scheduler call."""
        ...


@runtime_checkable
class MultiFinder(Protocol):
    """Finds many markers in one call."""

    def find_many(self, markers: Sequence[str], since: float) -> Mapping[str, list[Found]]: ...


@runtime_checkable
class BatchStarter(Protocol):
    """Creates and opens many submissions in one call each (one script, one request), with the contract of
    :meth:`Backend.start` and :meth:`Backend.open` per item. Without it the core calls them one by one."""

    def start_many(
        self, requests: Sequence[StartRequest], *, max_running: int | None = None
    ) -> list[str | DispatchError]:
        """Create every request's object behind its closed gate. One answer per request, in order: the
        scheduler id, or the error that request's own ``start`` would have raised (OutcomeUnknown when its
        object may exist, Unavailable when it certainly was not created, Rejected ...). Never raises for one
        item; raises only when nothing was attempted (e.g. ReadOnly).

        ``max_running`` (given only by a backend answering the BatchThrottle capability yes, and only below the
        number of requests): at most that many of these objects may run at once, the scheduler keeping the
        others queued; a backend that cannot keep it for these requests answers Rejected for each, saying why,
        and creates nothing."""
        ...

    def open_many(self, scheduler_ids: Sequence[str]) -> list[DispatchError | None]:
        """Open every object's gate; one answer per id, in order: None, or the error ``open`` would raise."""
        ...


@runtime_checkable
class OutputReader(Protocol):
    """Reads a job's output. ``execution`` is a restart number (None: the current one); ``offset`` skips that
    many bytes of it first (read from there, not read and dropped, where the scheduler lets the adapter)."""

    def stdout(
        self, scheduler_id: str, execution: int | None = None, follow: bool = False, offset: int = 0
    ) -> Iterator[bytes]: ...

    def stderr(
        self, scheduler_id: str, execution: int | None = None, follow: bool = False, offset: int = 0
    ) -> Iterator[bytes]: ...


SLICE_LIMIT = 256 * 1024
"""The most bytes one :class:`OutputSlice` asks for by default."""


@dataclass(frozen=True, slots=True)
class OutputSlice:
    """Part of one execution's output: ``limit`` bytes from byte ``offset`` of ``stream`` ("stdout" or
    "stderr"); a negative ``offset`` is counted from the end (``-100``: the last 100 bytes, or all when there
    are fewer). ``execution`` is a restart number (None: the current one); ``rank`` a rank (None: the
    execution's output as the scheduler keeps it, every rank in one file)."""

    scheduler_id: str
    stream: str = "stdout"
    execution: int | None = None
    rank: int | None = None
    offset: int = 0
    limit: int = SLICE_LIMIT


@dataclass(frozen=True, slots=True)
class OutputPiece:
    """What one :class:`OutputSlice` read: ``data`` starts at byte ``start`` of the output, whose size was
    ``size`` when read (``start + len(data)`` is where to read on). A file not written yet reads as empty."""

    data: bytes
    start: int
    size: int


@runtime_checkable
class OutputSlices(Protocol):
    """Reads many slices of output at once, each from its offset (one round trip where the transport has
    them), so that following output costs the bytes that are new, not the whole file each time."""

    def output_per_rank(self) -> bool:
        """True when the scheduler keeps one file per rank (a slice may name a rank); False when it keeps one
        per execution (a slice naming a rank is answered with Unsupported)."""
        ...

    def read_slices(self, slices: Sequence[OutputSlice]) -> list[OutputPiece | DispatchError]:
        """One answer per slice, in order: the piece, or the error reading it alone would have raised
        (NotFound, Unsupported, Unavailable ...). Never raises for one slice; raises only when nothing was
        read (e.g. Unavailable: the cluster did not answer)."""
        ...


@runtime_checkable
class ExecutionOutput(Protocol):
    """Reads rank 0's stdout of one execution named by its identity, for a backend whose output goes with the
    execution (Kubernetes: a pod's log goes with the pod). The supervisor archives it into the records when it
    sees the execution end (:mod:`dispatch.supervise.archive`); a backend whose scheduler keeps output files
    does not implement it."""

    def execution_output(self, scheduler_id: str, identity: str) -> Iterator[bytes]:
        """The whole log as it is now (never followed). NotFound when that execution's output is gone (or was
        never there); Unsupported when this cluster does not let the adapter read it."""
        ...


@runtime_checkable
class OutputKeeper(Protocol):
    """A backend whose cluster may delete an execution's output at a moment dispatch does not choose, before a
    reader that starts after the end could copy it (Kubernetes: at a TrainJob's deadline its pods, and their
    logs, go at once). The supervisor's archive calls :meth:`keep_output` once, when it is built; from then on
    the backend keeps such output as it is written, and ``execution_output`` serves it after it went."""

    def keep_output(self) -> None:
        """Start keeping (idempotent; cheap when there is nothing to keep)."""
        ...


@runtime_checkable
class AcceleratorInventory(Protocol):
    """The cluster's GPUs (:class:`dispatch.accelerators.Inventory`), probed at open and cached like the
    capabilities; None when they could not be read (a read-only open without a fresh cache)."""

    def accelerators(self) -> Inventory | None: ...


@dataclass(frozen=True)
class StoragePaths:
    """One directory of storage the caller and the jobs share, as each sees it: ``local`` where this process
    reads and writes it, ``remote`` where a job's ranks do (the same path when both run on one file system)."""

    local: str
    remote: str


@runtime_checkable
class SharedStorer(Protocol):
    """Names the storage this process shares with the cluster's jobs (the ``SharedStorage`` capability), where
    :class:`dispatch.Executor` puts a call's pickled function and the job puts its result."""

    def shared_storage(self) -> StoragePaths:
        """The shared directory. Unsupported (with the capability's Reason) when this cluster has none."""
        ...


CORE_METHODS: tuple[str, ...] = (
    "capabilities",
    "declarations",
    "extension_policy",
    "start",
    "open",
    "inspect",
    "inspect_many",
    "find",
    "stop_job",
    "close",
)
"""The methods of :class:`Backend` that views of a backend forward."""

OPTIONAL_INTERFACES: tuple[type, ...] = (
    Holder,
    Requeuer,
    Readmitter,
    NativePolicyCompiler,
    Watcher,
    CessationSignal,
    IdentityWeakener,
    MultiFinder,
    ProgressScope,
    BatchStarter,
    OutputReader,
    OutputSlices,
    ExecutionOutput,
    NodeInventory,
    OutputKeeper,
    AcceleratorInventory,
    SharedStorer,
    ShapeCheck,
)

OPTIONAL_METHODS: dict[type, tuple[str, ...]] = {
    Holder: ("hold", "release"),
    Requeuer: ("requeue", "requeue_after_end"),
    Readmitter: ("readmit",),
    NativePolicyCompiler: ("compile_policy",),
    Watcher: ("watch",),
    CessationSignal: ("cessation",),
    IdentityWeakener: ("weakened",),
    MultiFinder: ("find_many",),
    ProgressScope: ("scopes_progress",),
    BatchStarter: ("start_many", "open_many"),
    OutputReader: ("stdout", "stderr"),
    OutputSlices: ("read_slices", "output_per_rank"),
    ExecutionOutput: ("execution_output",),
    NodeInventory: ("schedulable_nodes",),
    OutputKeeper: ("keep_output",),
    AcceleratorInventory: ("accelerators",),
    SharedStorer: ("shared_storage",),
    ShapeCheck: ("never_runs",),
}


ZERO_BOUND_FORBIDS: tuple[type, ...] = (Holder, Requeuer, Readmitter)
"""The interfaces a backend with a zero CallBound may not offer: a late call could land after the supervisor
resolved it by observation."""


def interfaces_of(backend: object) -> list[str]:
    """Names of the optional interfaces ``backend`` implements."""
    return [i.__name__ for i in OPTIONAL_INTERFACES if isinstance(backend, i)]


Call = Callable[[str, Callable[..., Any], tuple[Any, ...], dict[str, Any]], Any]
"""How a view makes a forwarded call: ``call(name, method, args, kwargs)``; it must call ``method`` (or raise)."""


def view(
    backend: Backend,
    kind: str,
    *,
    without: Iterable[type] = (),
    call: Call | None = None,
    others: bool = False,
    label: str | None = None,
) -> Backend:
    """A view of ``backend``: an object with the core methods and exactly the optional methods ``backend``
    implements, less the interfaces in ``without``, each forwarded to ``backend`` (through ``call`` when given),
    so ``isinstance`` checks see what remains. ``name``, ``read_only`` and ``unrestricted`` (the backend
    itself) are read through; with ``others``, every attribute that is not a backend method is too. The class
    is named ``kind`` + the backend's class name (an empty ``kind`` keeps the backend's name), its repr
    ``label(backend)``. The one way to wrap a backend: a wrapper that listed methods by hand lost the
    interfaces added after it was written."""
    without = set(without)
    hidden = {m for iface in without for m in OPTIONAL_METHODS.get(iface, ())}
    keep = {m for iface in OPTIONAL_INTERFACES if iface not in without for m in OPTIONAL_METHODS[iface]}
    names = [*CORE_METHODS, *sorted(m for m in keep - hidden if callable(getattr(backend, m, None)))]

    def forward(name: str) -> Any:
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            target = getattr(self._inner, name)
            return target(*args, **kwargs) if call is None else call(name, target, args, kwargs)

        method.__name__ = name
        return method

    attrs: dict[str, Any] = {n: forward(n) for n in names}
    attrs["name"] = property(lambda self: self._inner.name)
    attrs["read_only"] = property(lambda self: self._inner.read_only)
    attrs["unrestricted"] = property(lambda self: self._inner)
    attrs["__init__"] = lambda self, inner: setattr(self, "_inner", inner)
    attrs["__repr__"] = lambda self: f"{label or kind.lower()}({self._inner!r})"
    if others:
        methods = {*CORE_METHODS, *(m for ms in OPTIONAL_METHODS.values() for m in ms)}

        def other(self: Any, attr: str) -> Any:
            if attr == "_inner" or attr in methods:
                raise AttributeError(attr)  # an interface the backend lacks stays absent, for isinstance()
            return getattr(self._inner, attr)

        attrs["__getattr__"] = other
    cls = type(f"{kind}{type(backend).__name__}", (), attrs)
    out: Backend = cls(backend)
    lost = [
        i.__name__
        for i in OPTIONAL_INTERFACES
        if i not in without and isinstance(backend, i) and not isinstance(out, i)
    ]
    if lost:
        raise AssertionError(f"the {kind} view lost {lost}: OPTIONAL_METHODS is out of step with the interfaces")
    return out


def restrict(backend: Backend, without: Iterable[type]) -> Backend:
    """A view of ``backend`` that does not implement the optional interfaces in ``without``.

    Used to hand out a backend with a zero CallBound without Holder, Requeuer and Readmitter. The view forwards every
    other attribute to ``backend``, so ``isinstance`` checks see exactly what remains.
    """
    return view(backend, "Restricted", without=without)


def check_backend(backend: object, declarations: Declarations) -> None:
    """Enforce the rules between a backend's declarations and its optional interfaces.

    Raises :class:`DeclarationError` when a zero CallBound travels with Holder, Requeuer or Readmitter, when a
    backend that is not a Watcher declares no PolledLoss, or when a Watcher declares one.
    """
    if declarations.call_bound == 0:
        for iface in ZERO_BOUND_FORBIDS:
            if isinstance(backend, iface):
                raise DeclarationError(
                    f"{type(backend).__name__} declares a zero CallBound but implements {iface.__name__}; "
                    "hand out its reduced backend (dispatch.spi.restrict) instead"
                )
    watcher = isinstance(backend, Watcher)
    if not watcher and declarations.polled_loss is None:
        raise DeclarationError(f"{type(backend).__name__} is polled but declares no PolledLoss")
    if watcher and declarations.polled_loss is not None:
        raise DeclarationError(f"{type(backend).__name__} is a Watcher and must not declare PolledLoss")


_LAZY = {
    "register": "dispatch.registry",
    "new_backend": "dispatch.cluster",
}
"""Names of modules above this one (they import it), imported on first use."""

__all__ = [
    "SLICE_LIMIT",
    "UNBOUNDED",
    "AcceleratorInventory",
    "Backend",
    "BatchStarter",
    "Cessation",
    "CessationSignal",
    "DeclarationError",
    "Declarations",
    "ExecutionEvidence",
    "ExecutionOutput",
    "Extension",
    "ExtensionPolicy",
    "Found",
    "Gate",
    "Holder",
    "IdentityWeakener",
    "JobEvidence",
    "MultiFinder",
    "NativePolicy",
    "NativePolicyCompiler",
    "NodeInventory",
    "OpenOptions",
    "OutputKeeper",
    "OutputPiece",
    "OutputReader",
    "OutputSlice",
    "OutputSlices",
    "PolledLoss",
    "ProgressScope",
    "RankProgress",
    "Readmitter",
    "Requeuer",
    "ShapeCheck",
    "SharedStorer",
    "StartRequest",
    "StoragePaths",
    "Unanswered",
    "WatchBatch",
    "Watcher",
    "check_backend",
    "interfaces_of",
    "new_backend",  # noqa: F822 (in _LAZY: its module imports this one)
    "register",  # noqa: F822 (in _LAZY)
    "register_extension",
    "restrict",
    "view",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dispatch.spi' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
