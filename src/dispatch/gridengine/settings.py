"""The Grid Engine adapter's settings (camelCase in config files, durations in seconds)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from dispatch.adapterkit.storage import SharedStorageSettings


@dataclass(frozen=True)
class Complexes:
    """The names of the cell's complexes that carry a job's ``resources`` (a site's own choice; None: the cell
    has none, and a spec asking for that is refused)."""

    gpu: str | None = field(default="gpu", metadata={"doc": "consumable complex counting GPUs per slot"})
    gpu_type: str | None = field(default=None, metadata={"doc": "complex naming a host's GPU type (resources.gpuType)"})
    memory: str | None = field(
        default="mem_free",
        metadata={"doc": "resident-memory request per slot (resources.memPerNode): where the scheduler places it"},
    )
    memory_limit: str | None = field(
        default="h_rss",
        metadata={"doc": "resident-memory limit per slot, the same figure (empty: none); never h_vmem for GPU jobs"},
    )
    exclusive: str | None = field(default="exclusive", metadata={"doc": "boolean exclusive-host complex"})
    cpu_pe: str | None = field(
        default=None, metadata={"doc": "parallel environment of slots on one host (resources.cpusPerProc > 1)"}
    )


@dataclass(frozen=True)
class GridEngineSettings:
    """Settings of the gridengine adapter: which cell, which queue, where output and adapter state go."""

    sge_root: str = field(default="/var/lib/gridengine", metadata={"doc": "SGE_ROOT of the cell"})
    sge_cell: str = field(default="default", metadata={"doc": "SGE_CELL of the cell"})
    queue: str | None = field(default=None, metadata={"doc": "queue to submit to (qsub -q; default: any)"})
    output_dir: str | None = field(
        default=None, metadata={"doc": "directory of the jobs' stdout and stderr (default ~/dispatch-output)"}
    )
    state_dir: str | None = field(
        default=None,
        metadata={"doc": "adapter state: its stops and hold names (default $XDG_STATE_HOME/dispatch/gridengine)"},
    )
    call_timeout: float = field(
        default=30.0, metadata={"duration": True, "doc": "deadline of each Grid Engine command"}
    )
    complexes: Complexes = field(
        default_factory=Complexes, metadata={"doc": "the complexes that carry resources (GPUs, memory, exclusive)"}
    )
    shared_storage: SharedStorageSettings | None = field(
        default=None, metadata={"doc": "a directory this machine and every node share (dispatch.Executor)"}
    )

    def __post_init__(self) -> None:
        for name in ("sge_root", "output_dir", "state_dir"):
            value = getattr(self, name)
            if value is not None and not os.path.isabs(value):
                raise ValueError(f"{name} must be an absolute path")
        if not self.call_timeout > 0:
            raise ValueError("callTimeout must be positive")
