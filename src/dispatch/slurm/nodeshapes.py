"""The partitions' nodes as ``sinfo`` declares them, for :class:`dispatch.spi.ShapeCheck` (:mod:`dispatch.shapes`).

:data:`SINFO_SHAPES` is read by the environment script at every open (no call per submission). It prints one
line per partition and kind of node, ``<partition>|<node count>|<CPUs>|<RealMemory MB>|<job size in nodes>``
(``--exact``: nodes of another size are another line, never a minimum with ``+``); the default partition carries
a ``*``; every node is listed whatever its state (a node down or drained may come back). The job size is
``<min>-<max>`` with ``infinite`` for no limit (the partition's MinNodes and MaxNodes).

What Slurm does with such a job, seen on 22.05, 24.11 and 26.05 with the hold dispatch submits behind: more
nodes than the partition has stays pending ``PartitionConfig`` (releasing it fails), more ranks per node than a
node's CPUs or more ``--mem`` than its RealMemory stays pending ``BadConstraints``; never an error at sbatch.
"""

from __future__ import annotations

from dataclasses import dataclass

from dispatch.errors import SpecError
from dispatch.resources import parse_memory
from dispatch.shapes import NodeKind, Pool, Shape
from dispatch.slurm.extensions import Resources
from dispatch.spec import JobSpec

SINFO_SHAPES = ("sinfo", "--noheader", "--exact", "--format=%P|%D|%c|%m|%s")


@dataclass(frozen=True)
class Partitions:
    """Every partition sinfo listed, by name, and the default's name (None: none is marked)."""

    pools: dict[str, Pool]
    default: str | None


def _int(text: str) -> int | None:
    text = text.strip().rstrip("+")
    return int(text) if text.isdigit() else None


def parse_shapes(text: str) -> Partitions | None:
    """The partitions of :data:`SINFO_SHAPES`' output; lines it cannot read are skipped (None: none read)."""
    kinds: dict[str, list[NodeKind]] = {}
    limits: dict[str, int | None] = {}
    default = None
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 5:
            continue
        name, count = parts[0].strip(), _int(parts[1])
        if not name or count is None:
            continue
        if name.endswith("*"):
            name = name[:-1]
            default = name
        mem = _int(parts[3])
        kinds.setdefault(name, []).append(NodeKind(count, _int(parts[2]), mem if mem and mem > 1 else None))
        top = parts[4].strip().rpartition("-")[2]
        limits[name] = _int(top)
    if not kinds:
        return None
    pools = {
        name: Pool(f"partition {name}", tuple(k), limits.get(name), "the partition's MaxNodes")
        for name, k in kinds.items()
    }
    return Partitions(pools, default)


def slurm_shape(spec: JobSpec) -> Shape:
    """The spec's shape as sbatch gets it: the portable ``resources``, or the deprecated ``slurm.Resources``'
    ``cpusPerTask``, ``memPerNode`` and ``memPerCpu`` (x the node's CPUs asked) where it asks them instead."""
    res = spec.extension(Resources) or Resources()
    shape = Shape.of(spec, cpus_per_rank=res.cpus_per_task)
    if shape.mem_mib is not None:
        return shape
    try:
        if res.mem_per_node:
            return Shape(shape.nodes, shape.ranks, shape.cpus_per_rank, parse_memory(res.mem_per_node, "memPerNode"))
        if res.mem_per_cpu:
            per_cpu = parse_memory(res.mem_per_cpu, "memPerCpu")
            return Shape(shape.nodes, shape.ranks, shape.cpus_per_rank, per_cpu * shape.cpus)
    except SpecError:
        pass  # a size only Slurm reads: it decides
    return shape
