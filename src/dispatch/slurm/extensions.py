"""The Slurm adapter's own JobSpec extensions: ``slurm.Placement`` and ``slurm.Resources``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from dispatch.errors import SpecError
from dispatch.extensions import Extension, register_extension

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:+-]*")
_MEM = re.compile(r"[0-9]+[KMGT]?")


def _name(value: str | None, path: str) -> None:
    if value is not None and not _NAME.fullmatch(value):
        raise SpecError(path, f"{value!r} is not a valid Slurm name")


@register_extension
@dataclass(frozen=True)
class Placement(Extension):
    """Where the job runs: partition, account, QOS, reservation, node feature constraint, node exclusions."""

    kind: ClassVar[str] = "slurm.Placement"
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    reservation: str | None = None
    constraint: str | None = None
    exclude: str | None = None
    nodelist: str | None = None

    def __post_init__(self) -> None:
        for f in ("partition", "account", "qos", "reservation"):
            _name(getattr(self, f), f)
        for f in ("constraint", "exclude", "nodelist"):
            v = getattr(self, f)
            if v is not None and (not v or any(c.isspace() or c in "\x00'\"" for c in v) or v.startswith("-")):
                raise SpecError(f, "must be non-empty, without spaces or quotes, not starting with -")


@register_extension
@dataclass(frozen=True)
class Resources(Extension):
    """Deprecated: ask GPUs, CPUs, memory and exclusive nodes in the spec's portable ``resources``. Kept so that
    specs and records that carry it still read and run; ``memPerCpu`` is Slurm's alone. A spec may not ask the
    same thing in both (SpecError)."""

    kind: ClassVar[str] = "slurm.Resources"
    gpus_per_node: int | None = None
    gpu_type: str | None = None
    cpus_per_task: int | None = None
    mem_per_node: str | None = None
    mem_per_cpu: str | None = None
    exclusive: bool = False

    def __post_init__(self) -> None:
        for f in ("gpus_per_node", "cpus_per_task"):
            v = getattr(self, f)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise SpecError(f, "must be a positive integer")
        _name(self.gpu_type, "gpuType")
        if self.gpu_type is not None and self.gpus_per_node is None:
            raise SpecError("gpusPerNode", "is required with gpuType")
        for f, key in (("mem_per_node", "memPerNode"), ("mem_per_cpu", "memPerCpu")):
            v = getattr(self, f)
            if v is not None and not _MEM.fullmatch(v):
                raise SpecError(key, "must be a Slurm memory size such as 4000, 16G")
        if self.mem_per_node is not None and self.mem_per_cpu is not None:
            raise SpecError("memPerCpu", "give memPerNode or memPerCpu, not both")
