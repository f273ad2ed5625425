"""Whether a cluster can ever run a job's shape: its nodes, and each node's CPUs and memory.

An adapter describes what it knows of its cluster as :class:`Pool` s (a Slurm partition, a Grid Engine queue, a
Kubernetes cluster, this host): its nodes by kind (CPUs and memory each, where known), in every state (a node
down or drained now may come back, so it counts), and the most nodes one job may have there. :func:`refusal`
says why a :class:`Shape` can never run in a pool, or None when it can or when the pool does not tell; an
adapter's :class:`dispatch.spi.ShapeCheck` answers with it, and the core refuses such a job before anything is
recorded or submitted (:func:`dispatch.cluster.check_spec`).

Sound, not complete: only what no node of the pool could ever give is refused. What narrows the nodes further
(a constraint, exclusions, other jobs, an account's limits) is left to the scheduler.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dispatch.resources import format_memory
from dispatch.spec import JobSpec


@dataclass(frozen=True)
class NodeKind:
    """``count`` nodes alike: ``cpus`` CPUs and ``mem_mib`` MiB of memory each (None: not known)."""

    count: int
    cpus: int | None = None
    mem_mib: int | None = None


@dataclass(frozen=True)
class Pool:
    """Where a job may run: ``what`` names it for a user (``partition normal``, ``this host``), ``kinds`` are its
    nodes (every node, whatever its state), ``max_nodes`` the most nodes one job may have there and
    ``max_nodes_why`` the setting that says so (None: no limit beyond the nodes)."""

    what: str
    kinds: tuple[NodeKind, ...]
    max_nodes: int | None = None
    max_nodes_why: str = ""

    @property
    def nodes(self) -> int:
        return sum(k.count for k in self.kinds)


@dataclass(frozen=True)
class Shape:
    """What a job asks: ``nodes`` nodes, each with ``ranks`` processes of ``cpus_per_rank`` CPUs and ``mem_mib``
    MiB of memory (None: the scheduler's default)."""

    nodes: int
    ranks: int = 1
    cpus_per_rank: int = 1
    mem_mib: int | None = None

    @classmethod
    def of(cls, spec: JobSpec, cpus_per_rank: int | None = None, mem_mib: int | None = None) -> Shape:
        """The spec's shape; ``cpus_per_rank`` and ``mem_mib`` override its portable ``resources`` (an
        adapter's own extension may ask them instead)."""
        r = spec.resources
        return cls(
            spec.nodes,
            spec.procs_per_node,
            cpus_per_rank or r.cpus_per_proc or 1,
            mem_mib if mem_mib is not None else r.mem_per_node,
        )

    @property
    def cpus(self) -> int:
        return self.ranks * self.cpus_per_rank

    def fits(self, kind: NodeKind) -> bool:
        """Whether one node of ``kind`` could ever hold one node of this shape (unknown figures fit)."""
        cpu_ok = kind.cpus is None or kind.cpus >= self.cpus
        mem_ok = self.mem_mib is None or kind.mem_mib is None or kind.mem_mib >= self.mem_mib
        return cpu_ok and mem_ok

    def describe_node(self) -> str:
        cpus = f"{self.ranks} rank(s) x {self.cpus_per_rank} CPU(s) = {self.cpus} CPU(s)"
        mem = f" and {format_memory(self.mem_mib)} of memory" if self.mem_mib is not None else ""
        return cpus + mem


def refusal(pool: Pool, shape: Shape) -> str | None:
    """Why ``shape`` can never run in ``pool`` (one line naming what is asked and what the pool has), or None."""
    total = pool.nodes
    if total and shape.nodes > total:
        return f"{shape.nodes} nodes asked, {pool.what} has {total}"
    if pool.max_nodes is not None and shape.nodes > pool.max_nodes:
        why = f" ({pool.max_nodes_why})" if pool.max_nodes_why else ""
        return f"{shape.nodes} nodes asked, {pool.what} allows {pool.max_nodes} per job{why}"
    if not total:
        return None
    fit = sum(k.count for k in pool.kinds if shape.fits(k))
    if fit >= shape.nodes:
        return None
    cpus = [k.cpus for k in pool.kinds if k.cpus is not None]
    mems = [k.mem_mib for k in pool.kinds if k.mem_mib is not None]
    if cpus and shape.cpus > max(cpus):
        return (
            f"{shape.ranks} rank(s) x {shape.cpus_per_rank} CPU(s) per node asked, the nodes of {pool.what} have at"
            f" most {max(cpus)} CPU(s)"
        )
    if shape.mem_mib is not None and mems and shape.mem_mib > max(mems):
        return (
            f"{format_memory(shape.mem_mib)} of memory per node asked, the nodes of {pool.what} have at most"
            f" {format_memory(max(mems))}"
        )
    return f"{shape.nodes} node(s) with {shape.describe_node()} each asked, {pool.what} has {fit} such node(s)"


def first_refusal(pools: Iterable[Pool], shape: Shape) -> str | None:
    """Why ``shape`` can run in none of ``pools`` (the job may go to any of them: a Slurm partition list), or
    None when one of them may run it or there are none."""
    reasons = []
    for pool in pools:
        why = refusal(pool, shape)
        if why is None:
            return None
        reasons.append(why)
    return "; ".join(reasons) or None
