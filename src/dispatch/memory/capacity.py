"""What each node of a memory cluster holds and what each job takes of it: GPUs (with a type), CPUs, memory.

A node's :class:`NodeCapacity` counts only what the cluster's settings give it (0: not counted, so not
limited). A job's :class:`Demand` per node comes from its spec's ``resources``: ``gpus_per_node`` GPUs of its
type, ``cpus_per_proc`` (1 when not asked) times ``procs_per_node`` CPUs, ``mem_per_node`` MiB. A job that asks
for nothing, asks ``exclusive``, or runs on a cluster that counts nothing takes whole nodes (the memory
scheduler's behaviour before it counted anything); any other job shares a node with jobs like it while their
demands add up to no more than what the node holds. :class:`Allocation` is one pass's view of what live jobs use,
so a job that needs GPUs waits until enough nodes have enough of them free.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dispatch.spec import JobSpec


@dataclass(frozen=True, slots=True)
class NodeCapacity:
    """What one node holds: ``gpus`` of ``gpu_type`` (None: the type is not named), ``cpus``, ``memory`` MiB.
    A count of 0 is not counted (CPUs and memory) or means none (GPUs)."""

    gpus: int = 0
    gpu_type: str | None = None
    cpus: int = 0
    memory: int = 0

    @property
    def counted(self) -> bool:
        """Whether the node counts anything (else every job takes it whole)."""
        return bool(self.gpus or self.cpus or self.memory)


@dataclass(frozen=True, slots=True)
class Demand:
    """What a job takes of each of its nodes; ``whole``: the node and nothing else."""

    gpus: int = 0
    gpu_type: str | None = None
    cpus: int = 0
    memory: int = 0
    whole: bool = True

    @classmethod
    def of(cls, spec: JobSpec, counted: bool) -> Demand:
        """The demand of ``spec`` on a cluster that counts something (``counted``) or nothing."""
        r = spec.resources
        return cls(
            gpus=r.gpus_per_node,
            gpu_type=r.gpu_type.lower() if r.gpu_type else None,
            cpus=(r.cpus_per_proc or 1) * spec.procs_per_node,
            memory=r.mem_per_node or 0,
            whole=r.exclusive or r.empty or not counted,
        )

    def ever_fits(self, cap: NodeCapacity) -> bool:
        """Whether an empty node of ``cap`` can run the job: enough GPUs of the type (the same word without case,
        or its first words: ``a100`` is an ``a100-sxm4-40gb``), CPUs and memory where the node counts them."""
        if self.gpus:
            if cap.gpus < self.gpus:
                return False
            if self.gpu_type is not None:
                have = (cap.gpu_type or "").lower()
                if have != self.gpu_type and not have.startswith(self.gpu_type + "-"):
                    return False
        return (not cap.cpus or self.cpus <= cap.cpus) and (not cap.memory or self.memory <= cap.memory)


@dataclass(slots=True)
class _Use:
    jobs: int = 0
    whole: bool = False
    gpus: int = 0
    cpus: int = 0
    memory: int = 0


class Allocation:
    """What the live jobs use of each node, for one scheduling pass: :meth:`place` finds nodes for a job and
    takes them."""

    def __init__(self, capacity: dict[str, NodeCapacity], live: Iterable[tuple[Sequence[str], Demand]]) -> None:
        self._capacity = capacity
        self._use: dict[str, _Use] = {}
        for nodes, demand in live:
            self._take(nodes, demand)

    def _take(self, nodes: Sequence[str], demand: Demand) -> None:
        for n in nodes:
            use = self._use.setdefault(n, _Use())
            use.jobs += 1
            use.whole = use.whole or demand.whole
            use.gpus += demand.gpus
            use.cpus += demand.cpus
            use.memory += demand.memory

    def _fits_now(self, node: str, demand: Demand) -> bool:
        cap = self._capacity[node]
        if not demand.ever_fits(cap):
            return False
        use = self._use.get(node)
        if use is None:
            return True
        if demand.whole or use.whole:
            return False
        return (
            use.gpus + demand.gpus <= cap.gpus
            and (not cap.cpus or use.cpus + demand.cpus <= cap.cpus)
            and (not cap.memory or use.memory + demand.memory <= cap.memory)
        )

    def place(self, candidates: Iterable[str], count: int, demand: Demand) -> tuple[str, ...] | None:
        """The first ``count`` of ``candidates`` (in order) that can run ``demand`` now, taken; None (nothing
        taken) when fewer can."""
        chosen: list[str] = []
        for n in candidates:
            if self._fits_now(n, demand):
                chosen.append(n)
                if len(chosen) == count:
                    self._take(chosen, demand)
                    return tuple(chosen)
        return None


def layout(
    names: Sequence[str],
    *,
    gpus: int = 0,
    gpu_type: str | None = None,
    gpu_nodes: int = 0,
    cpus: int = 0,
    memory: int = 0,
) -> dict[str, NodeCapacity]:
    """Each node's capacity: every node has ``cpus`` and ``memory``; the first ``gpu_nodes`` (0: all) have
    ``gpus`` GPUs of ``gpu_type`` too."""
    with_gpus = len(names) if gpu_nodes == 0 else min(gpu_nodes, len(names))
    gpu_cap = NodeCapacity(gpus, gpu_type if gpus else None, cpus, memory)
    plain = NodeCapacity(0, None, cpus, memory)
    return {n: (gpu_cap if i < with_gpus else plain) for i, n in enumerate(names)}
