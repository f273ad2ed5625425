"""Node blames: which node an ending blamed, kept across jobs so a node blamed again and again becomes a suspect.

The supervisor writes one blame per (cluster, node, job, execution) when it sees an execution end with a
blaming cause (:mod:`dispatch.supervise.blame`); writing the same blame again changes nothing, so a supervisor
that takes a job over writes its blames again safely. Which nodes are suspects is computed from the blames
(:func:`dispatch.supervise.blame.suspects`); ``dispatch nodes clear NODE`` deletes a node's blames, which ends
its suspicion early. The table lives beside the job records (``node_blames``).
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
