"""Node blames: which node an ending blamed, kept across jobs so a node blamed by several jobs becomes a suspect.

The supervisor writes one blame per (cluster, node, job, execution) when it sees an execution end with a blaming
cause (never for a cause that is the job's own, such as ``not-launchable``) (:mod:`dispatch.supervise.blame`);
writing the same blame again changes nothing, so a supervisor that takes a job over writes its blames again safely.
Which nodes are suspects is computed from the blames (:func:`suspects`, by the cluster's :class:`SuspectPolicy`);
``dispatch nodes clear NODE`` deletes a node's blames, which ends its suspicion early. The table lives beside the
job records (``node_blames``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from dispatch.outcome import Cause


@dataclass(frozen=True, slots=True)
class NodeBlame:
    """Execution ``execution`` of job ``job_id`` ended at ``at`` with ``cause``, blaming ``node`` of
    ``cluster``."""

    cluster: str
    node: str
    job_id: str
    execution: str
    cause: Cause
    at: float

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "node": self.node,
            "jobId": self.job_id,
            "execution": self.execution,
            "cause": self.cause.value,
            "at": self.at,
        }


@runtime_checkable
class NodeBlames(Protocol):
    """What a record store offers for node blames (the SQLite, PostgreSQL and memory stores do)."""

    def add_node_blames(self, blames: Sequence[NodeBlame]) -> int:
        """Store ``blames`` in one transaction; a blame already stored (same cluster, node, job and execution) is
        left as it is. Returns how many were new. ReadOnly on a read-only store."""
        ...

    def node_blames(self, cluster: str, since: float) -> list[NodeBlame]:
        """The blames of ``cluster`` at or after ``since``, oldest first."""
        ...

    def clear_node_blames(self, cluster: str, node: str) -> int:
        """Delete every blame of ``node`` on ``cluster`` (a human says the node is fine); returns how many were
        deleted. ReadOnly on a read-only store."""
        ...

    def prune_node_blames(self, cluster: str, before: float) -> int:
        """Delete the blames of ``cluster`` older than ``before`` (``at < before``: past every window and time to
        live that could still count them); returns how many were deleted. ReadOnly on a read-only store."""
        ...


@dataclass(frozen=True, slots=True)
class SuspectPolicy:
    """When a node becomes a suspect of a cluster: blamed by ``after`` distinct jobs (at least :data:`MIN_JOBS`)
    within ``window`` seconds; it stays one for ``ttl`` seconds after the blame that made it one. ``after = 0``
    turns suspects off."""

    after: int = 3
    window: float = 86400.0
    ttl: float = 86400.0

    def __post_init__(self) -> None:
        if self.after < 0 or self.window < 0 or self.ttl < 0:
            raise ValueError("a suspect policy's count, window and time to live are >= 0")


@dataclass(frozen=True, slots=True)
class Suspect:
    """A node excluded from every resubmission on its cluster until ``until``: ``blames`` are the blames that
    count (within the window and time to live, after the last clear), oldest first."""

    node: str
    until: float
    blames: tuple[NodeBlame, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "node": self.node,
            "until": self.until,
            "count": len(self.blames),
            "blames": [b.to_json() for b in self.blames],
        }


SUSPECT_CAUSES: frozenset[Cause] = frozenset({Cause.NODE_LOST, Cause.LAUNCH_FAILED})
"""The blames that count towards a suspect: the scheduler's own evidence against a node (it lost the node, or the
node could not launch what other nodes launch). A ``stalled`` blame is judged by one job's own bound (its rules'
``stalledAfter``): it makes the job's own resubmissions avoid the node (``excludeBlamedNodes``) but never a
suspect every job avoids, for the jobs of one sweep that go quiet alike (a long evaluation, their own deadlock)
are one program's behaviour, not the node's."""
MIN_JOBS = 2
"""The fewest distinct jobs whose blames make a node a suspect, whatever the policy's count: one job's
executions, however many, never make a suspect (a job that fails the same way again and again says more about
the job than about the node)."""


def suspects(
    blames: Sequence[NodeBlame],
    policy: SuspectPolicy,
    now: float,
    *,
    distinct_jobs: bool = True,
    causes: frozenset[Cause] = SUSPECT_CAUSES,
) -> list[Suspect]:
    """The suspects at ``now`` among ``blames`` (pure): a node blamed by ``max(policy.after, MIN_JOBS)``
    distinct jobs within ``policy.window`` (the window ending at one of its blames), the latest such window
    ending less than ``policy.ttl`` before ``now``; only blames with one of ``causes`` count
    (:data:`SUSPECT_CAUSES`). ``distinct_jobs=False`` counts blames instead of jobs, and wider ``causes``
    count more (the simulator's planted bugs; never the product's)."""
    if policy.after <= 0:
        return []
    need = max(policy.after, MIN_JOBS) if distinct_jobs else policy.after
    by_node: dict[str, list[NodeBlame]] = {}
    for b in blames:
        if b.at <= now and b.cause in causes:
            by_node.setdefault(b.node, []).append(b)
    out: list[Suspect] = []
    for node, items in sorted(by_node.items()):
        items.sort(key=lambda b: (b.at, b.job_id, b.execution))
        for last in range(len(items) - 1, -1, -1):
            end = items[last].at
            inside = [b for b in items[: last + 1] if b.at >= end - policy.window]
            count = len({b.job_id for b in inside}) if distinct_jobs else len(inside)
            if count >= need:
                until = end + policy.ttl
                if now < until:
                    counted = tuple(b for b in items if b.at >= end - policy.window)
                    out.append(Suspect(node, until, counted))
                break
    return out


def current_suspects(records: NodeBlames, cluster: str, policy: SuspectPolicy, now: float) -> list[Suspect]:
    """The suspects of ``cluster`` at ``now`` by ``policy``, from the blames ``records`` keep (one query: the
    blames recent enough to count). What ``dispatch nodes`` lists and the dashboard shows."""
    if policy.after <= 0:
        return []
    return suspects(records.node_blames(cluster, now - policy.window - policy.ttl), policy, now)


COLUMNS = "cluster, node, job_id, execution, cause, at"
"""The columns of the ``node_blames`` table, in :func:`from_row` order."""

CREATE = (
    "CREATE TABLE IF NOT EXISTS {table} (cluster TEXT NOT NULL, node TEXT NOT NULL, job_id TEXT NOT NULL,"
    " execution TEXT NOT NULL, cause TEXT NOT NULL, at {real} NOT NULL,"
    " PRIMARY KEY (cluster, node, job_id, execution))"
)
"""The table (``{real}``: the store's floating-point type)."""

INDEX = "CREATE INDEX IF NOT EXISTS node_blames_at ON {table} (cluster, at)"
""":meth:`NodeBlames.node_blames` reads one cluster's recent blames through this index."""


def values(b: NodeBlame) -> tuple[Any, ...]:
    return (b.cluster, b.node, b.job_id, b.execution, b.cause.value, b.at)


def from_row(row: Sequence[Any]) -> NodeBlame:
    return NodeBlame(str(row[0]), str(row[1]), str(row[2]), str(row[3]), Cause(row[4]), float(row[5]))
