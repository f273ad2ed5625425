"""The memory adapter: a clock-driven simulator of a Slurm-shaped or Kubeflow-shaped cluster.

It is the backend the conformance suite is proven against and the one the simulator runs. Open it like any
adapter (``dispatch.open("memory", adapter={"shape": "kubeflow"}, records=...)``) or build one directly::

    sched = MemoryScheduler(FakeClock(), "slurm", nodes=4)
    backend = dispatch.memory.backend(sched)
    sched.control.preempt(job_id)

Opened through the registry, backends with the same ``cluster`` setting share one scheduler in the process
(``scheduler_for(name)`` returns it, for its control surface).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from dispatch.clock import Clock
from dispatch.memory.backend import NAME, KubeflowShapedBackend, Runtime, SlurmShapedBackend
from dispatch.memory.scheduler import Control, Crashed, MemoryScheduler, Shape, TruthExecution, TruthJob
from dispatch.registry import OpenOptions
from dispatch.registry import register as _register
from dispatch.spi import Backend

_SCHEDULERS: dict[str, MemoryScheduler] = {}
_LOCK = threading.Lock()


@dataclass(frozen=True)
class MemorySettings:
    """Settings of the memory adapter."""

    shape: Shape = field(default=Shape.SLURM, metadata={"doc": "which scheduler it behaves like: slurm or kubeflow"})
    cluster: str = field(default="default", metadata={"doc": "opens with the same name share one scheduler"})
    nodes: int = field(default=4, metadata={"doc": "number of simulated nodes (1 to 100000)"})
    min_job_age: float = field(
        default=300.0, metadata={"duration": True, "doc": "how long an ended job's state stays visible"}
    )
    node_loss_window: float = field(
        default=120.0, metadata={"duration": True, "doc": "how long a lost node takes to be declared lost"}
    )
    call_bound: float = field(
        default=30.0, metadata={"duration": True, "doc": "the declared CallBound (0: no Holder, no Requeuer)"}
    )
    kill_wait: float = field(default=30.0, metadata={"duration": True, "doc": "stop: graceful, forced after this"})
    default_runtime: float = field(
        default=60.0, metadata={"duration": True, "doc": "how long a job runs unless told otherwise"}
    )
    accounting: bool = field(default=True, metadata={"doc": "keep ended jobs' history (slurm shape only)"})
    native_restart: bool = field(default=False, metadata={"doc": "the scheduler restarts a run in place"})
    accounting_lag: float = field(
        default=0.0,
        metadata={"duration": True, "doc": "how long after a job ends reads have no answer for it (Unanswered)"},
    )

    def __post_init__(self) -> None:
        if not 1 <= self.nodes <= 100_000:
            raise ValueError("nodes must be between 1 and 100000")
        if self.accounting_lag < 0:
            raise ValueError("accountingLag must not be negative")


def backend(scheduler: MemoryScheduler, *, read_only: bool = False, call_bound: float = 30.0) -> Backend:
    """A backend of the scheduler's shape over ``scheduler``."""
    cls = SlurmShapedBackend if scheduler.shape is Shape.SLURM else KubeflowShapedBackend
    b: Backend = cls(scheduler, read_only=read_only, call_bound=call_bound)
    return b


def scheduler_for(cluster: str, clock: Clock | None = None, settings: MemorySettings | None = None) -> MemoryScheduler:
    """The process-wide scheduler named ``cluster``, made on first use from ``settings`` and ``clock``."""
    with _LOCK:
        sched = _SCHEDULERS.get(cluster)
        if sched is None:
            if clock is None:
                raise KeyError(f"no memory cluster named {cluster!r} yet")
            s = settings or MemorySettings(cluster=cluster)
            sched = MemoryScheduler(
                clock,
                s.shape,
                nodes=s.nodes,
                min_job_age=s.min_job_age,
                node_loss_window=s.node_loss_window,
                accounting=s.accounting,
                default_runtime=s.default_runtime,
                kill_wait=s.kill_wait,
                native_restart=s.native_restart,
                accounting_lag=s.accounting_lag,
            )
            _SCHEDULERS[cluster] = sched
        return sched


def forget(cluster: str) -> None:
    """Drop a process-wide scheduler (tests)."""
    with _LOCK:
        _SCHEDULERS.pop(cluster, None)


def _factory(settings: MemorySettings, options: OpenOptions) -> Backend:
    sched = scheduler_for(settings.cluster, options.clock, settings)
    if sched.shape is not settings.shape:
        from dispatch.errors import ConfigError

        raise ConfigError("shape", f"memory cluster {settings.cluster!r} already exists as {sched.shape.value}")
    return backend(sched, read_only=options.read_only, call_bound=settings.call_bound)


def register() -> None:
    """Register the memory adapter (done on import; also the entry point's hook)."""
    _register(NAME, _factory, settings=MemorySettings, description="a clock-driven simulated cluster", replace=True)


register()

__all__ = [
    "NAME",
    "Control",
    "Crashed",
    "KubeflowShapedBackend",
    "MemoryScheduler",
    "MemorySettings",
    "Runtime",
    "Shape",
    "SlurmShapedBackend",
    "TruthExecution",
    "TruthJob",
    "backend",
    "forget",
    "register",
    "scheduler_for",
]
