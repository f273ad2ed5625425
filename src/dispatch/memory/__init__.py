"""The memory adapter: a clock-driven simulator of a Slurm-shaped or Kubeflow-shaped cluster.

It is the backend the conformance suite is proven against and the one the simulator runs. Open it like any
adapter (``dispatch.open("memory", adapter={"shape": "kubeflow"}, records=...)``) or build one directly::

    sched = MemoryScheduler(FakeClock(), "slurm", nodes=4, gpus_per_node=4, gpu_nodes=2)
    backend = dispatch.memory.backend(sched)
    sched.control.preempt(job_id)

Opened through the registry, backends with the same ``cluster`` setting share one scheduler in the process
(``scheduler_for(name)`` returns it, for its control surface).

Nodes may hold GPUs, CPUs and memory (settings ``gpusPerNode``, ``gpuType``, ``gpuNodes``, ``cpusPerNode``,
``memoryPerNode``): a job that asks for them in its ``resources`` runs only where they are free
(:mod:`dispatch.memory.capacity`), and the GPUs are the cluster's Accelerators inventory.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from dispatch.clock import Clock
from dispatch.memory.backend import NAME, KubeflowShapedBackend, Runtime, SlurmShapedBackend
from dispatch.memory.scheduler import Control, Crashed, MemoryScheduler, Shape, TruthExecution, TruthJob
from dispatch.registry import OpenOptions
from dispatch.registry import register as _register
from dispatch.resources import GPU_TYPE, MAX_GPUS_PER_NODE, MAX_MEM_MIB
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

    gpus_per_node: int = field(default=0, metadata={"doc": "GPUs on each node with GPUs (0: no GPUs)"})
    gpu_type: str = field(default="", metadata={"doc": "the type of those GPUs (empty: not named)"})
    gpu_nodes: int = field(default=0, metadata={"doc": "how many nodes (the first ones) have GPUs (0: all)"})
    cpus_per_node: int = field(default=0, metadata={"doc": "CPUs on each node (0: not counted)"})
    memory_per_node: int = field(default=0, metadata={"doc": "memory on each node in MiB (0: not counted)"})

    def __post_init__(self) -> None:
        if not 1 <= self.nodes <= 100_000:
            raise ValueError("nodes must be between 1 and 100000")
        for key, value, top in (
            ("gpusPerNode", self.gpus_per_node, MAX_GPUS_PER_NODE),
            ("gpuNodes", self.gpu_nodes, self.nodes),
            ("cpusPerNode", self.cpus_per_node, 1 << 20),
            ("memoryPerNode", self.memory_per_node, MAX_MEM_MIB),
        ):
            if not 0 <= value <= top:
                raise ValueError(f"{key} must be between 0 and {top}, got {value}")
        if self.gpu_type and not GPU_TYPE.fullmatch(self.gpu_type):
            raise ValueError(f"gpuType must be a word such as a100 or h100-80gb, got {self.gpu_type!r}")
        if self.gpu_type and not self.gpus_per_node:
            raise ValueError("gpuType names the type of the nodes' GPUs: give gpusPerNode too")
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
                gpus_per_node=s.gpus_per_node,
                gpu_type=s.gpu_type or None,
                gpu_nodes=s.gpu_nodes,
                cpus_per_node=s.cpus_per_node,
                memory_per_node=s.memory_per_node,
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
