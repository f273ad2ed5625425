"""What a job asks of each node, portably: :class:`Resources`, the ``resources`` part of a JobSpec.

GPUs per node (with an optional type), CPUs per process, memory per node and exclusive nodes. Every adapter
maps it to its scheduler's own words (Slurm ``--gpus-per-node``, Kubernetes ``resourcesPerNode``, Grid Engine
consumable complexes, the local adapter ``CUDA_VISIBLE_DEVICES``); a request no node of the cluster can ever
satisfy is refused at submission against the cluster's :class:`dispatch.accelerators.Inventory`.

Memory is kept in MiB (binary units, as Slurm and Kubernetes' ``Mi`` count): ``"64G"``, ``"64Gi"``, ``"64GiB"``
and ``65536`` (a bare number is MiB) are the same request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dispatch.errors import SpecError

MAX_GPUS_PER_NODE = 1024
MAX_CPUS_PER_PROC = 4096
MAX_MEM_MIB = 1 << 40
GPU_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")
"""A GPU type: a word of letters, digits and ``_.+-`` (``a100``, ``h100-80gb``); no colon, no space."""
_MEM = re.compile(r"([0-9]{1,16})\s*([A-Za-z]*)")
_UNITS = {"K": -1, "M": 0, "G": 1, "T": 2}
_KEYS = ("gpusPerNode", "gpuType", "cpusPerProc", "memPerNode", "exclusive")


def parse_memory(value: object, path: str) -> int:
    """MiB from ``value``: an integer (MiB) or a string ``<n><unit>`` with unit K, M, G or T (binary; ``Gi``,
    ``GiB`` and ``GB`` mean the same). SpecError naming ``path`` for anything else, or a size that is not a
    whole number of MiB."""
    if isinstance(value, bool):
        raise SpecError(path, f"must be a memory size such as 64G or 512M, got {value!r}")
    if isinstance(value, int):
        mib = value
    elif isinstance(value, str):
        m = _MEM.fullmatch(value.strip())
        if m is None:
            raise SpecError(path, f"must be a memory size such as 64G or 512M, got {value!r}")
        number, unit = int(m.group(1)), m.group(2)
        if not unit:
            mib = number
        else:
            key = unit[0].upper()
            rest = unit[1:]
            if key not in _UNITS or rest not in ("", "i", "iB", "B"):
                raise SpecError(path, f"unknown unit {unit!r} in {value!r} (use K, M, G or T, e.g. 64G)")
            power = _UNITS[key]
            if power < 0:
                if number % 1024:
                    raise SpecError(path, f"{value!r} is not a whole number of MiB")
                mib = number // 1024
            else:
                mib = number * 1024**power
    else:
        raise SpecError(path, f"must be a memory size such as 64G or 512M, got {type(value).__name__}")
    if not 1 <= mib <= MAX_MEM_MIB:
        raise SpecError(path, f"must be between 1M and {MAX_MEM_MIB >> 20}T, got {value!r}")
    return mib


def format_memory(mib: int) -> str:
    """The shortest exact form of ``mib`` MiB: ``64G``, ``1536M``, ``2T``."""
    for unit, power in (("T", 2), ("G", 1)):
        if mib % 1024**power == 0:
            return f"{mib // 1024**power}{unit}"
    return f"{mib}M"


def parse_gpus(text: str, path: str = "gpusPerNode") -> tuple[int, str | None]:
    """``[TYPE:]N`` (``4``, ``a100:4``) as (count, type); SpecError naming ``path`` otherwise."""
    kind, sep, count = text.rpartition(":")
    if not count.isdigit():
        raise SpecError(path, f"must be [TYPE:]N such as 4 or a100:4, got {text!r}")
    return int(count), (kind if sep else None)


@dataclass(frozen=True)
class Resources:
    """What each node of the job needs. The default asks for nothing beyond the scheduler's defaults.

    Fields:
        gpus_per_node: GPUs on each node (0: none asked).
        gpu_type: the GPU type (``a100``), or None for any; only with ``gpus_per_node`` > 0.
        cpus_per_proc: CPUs for each process (rank), or None for the scheduler's default.
        mem_per_node: memory on each node in MiB (a string with a unit is accepted and converted), or None.
        exclusive: no other job shares the job's nodes.
    """

    gpus_per_node: int = 0
    gpu_type: str | None = None
    cpus_per_proc: int | None = None
    mem_per_node: int | None = None
    exclusive: bool = False

    def __post_init__(self) -> None:
        g = self.gpus_per_node
        if isinstance(g, bool) or not isinstance(g, int) or not 0 <= g <= MAX_GPUS_PER_NODE:
            raise SpecError("resources.gpusPerNode", f"must be an integer from 0 to {MAX_GPUS_PER_NODE}, got {g!r}")
        if self.gpu_type is not None:
            if not isinstance(self.gpu_type, str) or not GPU_TYPE.fullmatch(self.gpu_type):
                raise SpecError("resources.gpuType", f"must be a word such as a100 or h100-80gb, got {self.gpu_type!r}")
            if g == 0:
                raise SpecError("resources.gpuType", "names the type of GPUs asked for: give gpusPerNode too")
        c = self.cpus_per_proc
        if c is not None and (isinstance(c, bool) or not isinstance(c, int) or not 1 <= c <= MAX_CPUS_PER_PROC):
            raise SpecError("resources.cpusPerProc", f"must be an integer from 1 to {MAX_CPUS_PER_PROC}, got {c!r}")
        if self.mem_per_node is not None:
            object.__setattr__(self, "mem_per_node", parse_memory(self.mem_per_node, "resources.memPerNode"))
        if not isinstance(self.exclusive, bool):
            raise SpecError("resources.exclusive", f"must be true or false, got {self.exclusive!r}")

    @property
    def empty(self) -> bool:
        """Nothing is asked (the JSON form leaves ``resources`` out)."""
        return self == Resources()

    @property
    def gpus(self) -> str:
        """The GPU request as ``[TYPE:]N`` (empty when none)."""
        if not self.gpus_per_node:
            return ""
        return f"{self.gpu_type}:{self.gpus_per_node}" if self.gpu_type else str(self.gpus_per_node)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.gpus_per_node:
            out["gpusPerNode"] = self.gpus_per_node
        if self.gpu_type is not None:
            out["gpuType"] = self.gpu_type
        if self.cpus_per_proc is not None:
            out["cpusPerProc"] = self.cpus_per_proc
        if self.mem_per_node is not None:
            out["memPerNode"] = format_memory(self.mem_per_node)
        if self.exclusive:
            out["exclusive"] = True
        return out

    @classmethod
    def from_json(cls, data: object) -> Resources:
        if not isinstance(data, Mapping):
            raise SpecError("resources", f"must be an object, got {type(data).__name__}")
        for key in data:
            if key not in _KEYS:
                raise SpecError(f"resources.{key}", f"unknown field (known: {', '.join(_KEYS)})")
        return cls(
            gpus_per_node=data.get("gpusPerNode", 0),
            gpu_type=data.get("gpuType"),
            cpus_per_proc=data.get("cpusPerProc"),
            mem_per_node=data.get("memPerNode"),
            exclusive=data.get("exclusive", False),
        )

    def describe(self) -> str:
        """One line for people: ``4 GPUs (a100), 8 CPUs per process, 64G, exclusive`` (``nothing`` when empty)."""
        parts = []
        if self.gpus_per_node:
            parts.append(
                f"{self.gpus_per_node} GPU(s) per node" + (f" of type {self.gpu_type}" if self.gpu_type else "")
            )
        if self.cpus_per_proc is not None:
            parts.append(f"{self.cpus_per_proc} CPU(s) per process")
        if self.mem_per_node is not None:
            parts.append(f"{format_memory(self.mem_per_node)} memory per node")
        if self.exclusive:
            parts.append("exclusive nodes")
        return ", ".join(parts) or "nothing beyond the defaults"
