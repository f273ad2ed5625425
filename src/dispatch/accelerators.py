"""Which GPUs a cluster has: :class:`Inventory`, the data behind the ``Accelerators`` capability.

Each adapter probes its scheduler's own view (Slurm: ``sinfo``'s Gres per partition; Kubernetes: the nodes'
allocatable GPU resource per node pool; Grid Engine: the GPU complex per queue; the local adapter: this host's
``nvidia-smi``) and hands the result out through :class:`dispatch.spi.AcceleratorInventory`. The core refuses
at submission, before anything is recorded, a job whose ``resources`` no pool can ever satisfy
(:func:`check_request`), naming what exists.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dispatch.capabilities import CapabilityAnswer, Provenance, no, yes
from dispatch.errors import Unsupported
from dispatch.resources import Resources


@dataclass(frozen=True)
class GpuPool:
    """``nodes`` nodes of pool ``pool`` (a partition, queue or node pool) with ``per_node`` GPUs of ``gpu_type``
    each (None: the scheduler does not name a type)."""

    pool: str
    gpu_type: str | None
    per_node: int
    nodes: int

    def to_json(self) -> dict[str, Any]:
        return {"pool": self.pool, "gpuType": self.gpu_type, "perNode": self.per_node, "nodes": self.nodes}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GpuPool:
        kind = data.get("gpuType")
        return cls(str(data["pool"]), None if kind is None else str(kind), int(data["perNode"]), int(data["nodes"]))

    def describe(self) -> str:
        kind = f" {self.gpu_type}" if self.gpu_type else ""
        return f"{self.pool}: {self.nodes} node(s) with {self.per_node}{kind} GPU(s)"


@dataclass(frozen=True)
class Inventory:
    """The GPUs of one cluster, pool by pool, and the ``source`` they were read from (``sinfo``, ``nvidia-smi``).

    ``shared_host``: every node of a job runs on the one host of the inventory (the local adapter), so a job
    needs ``nodes x gpus_per_node`` GPUs of it, not ``gpus_per_node`` on each of ``nodes`` hosts.
    ``note``: why the inventory is what it is, when that is worth saying (``nvidia-smi not found``)."""

    pools: tuple[GpuPool, ...]
    source: str
    shared_host: bool = False
    note: str = ""

    @classmethod
    def of(cls, pools: Iterable[GpuPool], source: str, *, shared_host: bool = False, note: str = "") -> Inventory:
        """An inventory of the pools that have GPUs, merged: nodes of the same pool, type and count add up."""
        merged: dict[tuple[str, str | None, int], int] = {}
        for p in pools:
            if p.per_node > 0 and p.nodes > 0:
                key = (p.pool, p.gpu_type, p.per_node)
                merged[key] = merged.get(key, 0) + p.nodes
        ordered = sorted(merged.items(), key=lambda kv: (kv[0][0], kv[0][1] or "", -kv[0][2]))
        return cls(tuple(GpuPool(k[0], k[1], k[2], n) for k, n in ordered), source, shared_host, note)

    @property
    def total(self) -> int:
        return sum(p.per_node * p.nodes for p in self.pools)

    def describe(self) -> str:
        """``gpu: 2 node(s) with 4 a100 GPU(s); debug: 1 node(s) with 1 GPU(s) (sinfo)``, or that there are none."""
        if not self.pools:
            return f"no GPUs ({self.note or self.source})"
        text = "; ".join(p.describe() for p in self.pools)
        return f"{text} ({self.source}{', ' + self.note if self.note else ''})"

    def answer(self, provenance: Provenance = Provenance.PROBED) -> CapabilityAnswer:
        """The ``Accelerators`` answer: yes naming the GPUs, or no when there are none."""
        if self.pools:
            return yes(self.describe(), provenance)
        return no(self.describe(), provenance)

    def fits(self, resources: Resources, nodes: int) -> bool:
        """Whether some pool can ever give ``nodes`` nodes ``resources.gpus_per_node`` GPUs each (of its type,
        when one is asked: the same word without case, or its first words, so ``a100`` matches
        ``a100-sxm4-40gb``)."""
        want = resources.gpus_per_node
        if want == 0:
            return True
        kind = resources.gpu_type.lower() if resources.gpu_type else None
        per_pool: dict[str, int] = {}
        for p in self.pools:
            if kind is not None and not _same_type(p.gpu_type, kind):
                continue
            if self.shared_host:
                if want * nodes <= p.per_node:
                    return True
            elif p.per_node >= want:
                per_pool[p.pool] = per_pool.get(p.pool, 0) + p.nodes
        return any(n >= nodes for n in per_pool.values())

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "pools": [p.to_json() for p in self.pools]}
        if self.shared_host:
            out["sharedHost"] = True
        if self.note:
            out["note"] = self.note
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Inventory:
        return cls(
            tuple(GpuPool.from_json(p) for p in data.get("pools", [])),
            str(data.get("source", "")),
            bool(data.get("sharedHost", False)),
            str(data.get("note", "")),
        )


def _same_type(have: str | None, want: str) -> bool:
    name = (have or "").lower()
    return name == want or name.startswith(want + "-")


def check_request(inventory: Inventory | None, resources: Resources, nodes: int, cluster: str) -> None:
    """Raise :class:`Unsupported` naming the inventory when no pool of ``inventory`` can ever run ``nodes``
    nodes of ``resources``; nothing when it can, when nothing is asked, or when the inventory is unknown."""
    if inventory is None or resources.gpus_per_node == 0 or inventory.fits(resources, nodes):
        return
    asked = f"{nodes} node(s) with {resources.gpus_per_node}" + (f" {resources.gpu_type}" if resources.gpu_type else "")
    if inventory.shared_host:
        asked += f" GPU(s) each, {nodes * resources.gpus_per_node} in all on this host"
    else:
        asked += " GPU(s) each"
    raise Unsupported(f"{cluster} can never run {asked}: it has {inventory.describe()}")
