"""What one supervisor cycle did (:class:`CycleReport`): the counts the metrics, the logs and the benchmarks read."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class CycleReport:
    """What one cycle did. ``backend_calls`` counts observation calls plus the calls actions made."""

    at: float
    cluster: str = ""
    """The cluster whose jobs the cycle went over."""
    jobs: int = 0
    owned: int = 0
    observed: int = 0
    observation_calls: int = 0
    actions: int = 0
    writes: int = 0
    conflicts: int = 0
    lost: int = 0
    unavailable: bool = False
    takeovers: int = 0
    """Leases taken from another supervisor whose lease had expired."""
    released: int = 0
    """Leases given up because this supervisor held more than its share."""
    supervisors: int = 0
    """The supervisors of the cluster alive in this cycle (this one included)."""
    steps: Counter[str] = field(default_factory=Counter)
    decisions: Counter[tuple[str, str]] = field(default_factory=Counter)
    """Decisions recorded in this cycle, by (action, rule)."""
    carried_out: Counter[tuple[str, str]] = field(default_factory=Counter)
    """Decisions whose carrying out this cycle's writes completed, by (action, rule)
    (:mod:`dispatch.supervise.carried`): a decision is counted in the cycle that carries it out, not before."""
    escalations: Counter[str] = field(default_factory=Counter)
    """Escalations recorded in this cycle, by cause."""
    resubmissions: Counter[str] = field(default_factory=Counter)
    """The ``resubmit`` decisions among ``carried_out``, by the cause decided on (``preempted``, ``stalled``, ...)."""
    stalled: int = 0
    """Executions this cycle's writes recorded as stalled (:func:`dispatch.supervise.stall.mark`): each is counted
    once, by the write that marks it."""
    states: Counter[tuple[str, str]] = field(default_factory=Counter)
    """The jobs this supervisor owns after the cycle, by (state, cause)."""
    archive: Counter[str] = field(default_factory=Counter)
    """Output archive entries written in this cycle, by status (see :mod:`dispatch.supervise.archive`)."""
    archive_pruned: int = 0
    """Output archive entries deleted by retention in this cycle (:class:`~dispatch.supervise.archive.Pruner`)."""
    archive_prune_errors: int = 0
    """Retention calls that failed in this cycle (the store's error; the cycle went on, and the next call is
    due an hour later)."""

    @property
    def backend_calls(self) -> int:
        return self.observation_calls + self.actions

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "jobs": self.jobs,
            "owned": self.owned,
            "observed": self.observed,
            "backendCalls": self.backend_calls,
            "observationCalls": self.observation_calls,
            "actions": self.actions,
            "writes": self.writes,
            "conflicts": self.conflicts,
            "lost": self.lost,
            "unavailable": self.unavailable,
            "takeovers": self.takeovers,
            "released": self.released,
            "supervisors": self.supervisors,
            "steps": dict(self.steps),
            "decisions": [{"action": a, "rule": r, "count": n} for (a, r), n in sorted(self.decisions.items())],
            "carriedOut": [{"action": a, "rule": r, "count": n} for (a, r), n in sorted(self.carried_out.items())],
            "escalations": dict(self.escalations),
            "resubmissions": dict(self.resubmissions),
            "stalled": self.stalled,
            "archive": dict(self.archive),
            "archivePruned": self.archive_pruned,
            "archivePruneErrors": self.archive_prune_errors,
        }


__all__ = ["CycleReport"]
