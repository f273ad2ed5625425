"""The output archive: rank 0's log of each execution, kept in the records after the scheduler lets it go.

On a cluster whose output goes with the job (Kubernetes: a pod's log goes with the pod), the supervisor copies
rank 0's stdout of each execution it sees end into the record store, so ``dispatch logs JOB --execution E`` can
still show it after the pods are gone (:mod:`dispatch.supervise.archive` does the copying). The archive lives
in the same database as the job records, in a table of its own (``outputs``): on PostgreSQL several supervisors
on several hosts share it with nothing more to configure, and each entry is bounded by the supervisor's cap, so
one row per execution is enough (no chunking).

One entry per (job, execution identity). :meth:`OutputArchive.put_output` is idempotent: an entry whose status
is ``kept`` or ``gone`` is final and never replaced; a ``failed`` one is replaced by a later attempt (its
``attempts`` counted). :meth:`OutputArchive.prune_outputs` deletes old entries of jobs no supervisor looks at any
more (retention: the supervisor's ``--archive-keep``, ``dispatch prune-outputs``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable


class ArchiveStatus(StrEnum):
    KEPT = "kept"
    """The log was read to its end (``truncated``: only its last ``cap`` bytes are kept)."""
    GONE = "gone"
    """The scheduler had no log of that execution any more when it was asked (its pods were already gone)."""
    FAILED = "failed"
    """The read failed or did not finish within its time bound; ``reason`` says why. A later attempt may
    replace it."""


@dataclass(frozen=True)
class ArchivedOutput:
    """One execution's archived output: rank 0's stdout, its last ``len(data)`` bytes of ``size`` read.

    ``data`` is empty in listings (:meth:`OutputArchive.outputs`); ``size`` is the number of bytes the log had
    when it was read, ``truncated`` whether its head was dropped to keep the cap.
    """

    job_id: str
    execution: str
    submission: int
    restart: int
    status: ArchiveStatus
    archived_at: float
    data: bytes = b""
    size: int = 0
    truncated: bool = False
    reason: str = ""
    attempts: int = 1
    rank: int = 0
    stream: str = "stdout"

    def without_data(self) -> ArchivedOutput:
        return replace(self, data=b"")

    def to_json(self) -> dict[str, Any]:
        """Everything but the data (for listings and ``--json``)."""
        return {
            "jobId": self.job_id,
            "execution": self.execution,
            "submission": self.submission,
            "restart": self.restart,
            "status": self.status.value,
            "archivedAt": self.archived_at,
            "size": self.size,
            "kept": len(self.data),
            "truncated": self.truncated,
            "reason": self.reason,
            "attempts": self.attempts,
            "rank": self.rank,
            "stream": self.stream,
        }


@runtime_checkable
class OutputArchive(Protocol):
    """What a record store offers for archived output (the SQLite, PostgreSQL and memory stores do)."""

    def put_output(self, entry: ArchivedOutput) -> ArchivedOutput:
        """Store ``entry`` unless a final entry (``kept`` or ``gone``) exists for its (job, execution); returns
        the entry as stored now, without its data. ReadOnly on a read-only store."""
        ...

    def get_output(self, job_id: str, execution: str) -> ArchivedOutput | None:
        """The entry of that execution, with its data, or None."""
        ...

    def outputs(self, job_ids: Sequence[str]) -> list[ArchivedOutput]:
        """The entries of these jobs, without their data, ordered by job, submission, then archive time."""
        ...

    def prune_outputs(self, before: float, *, limit: int | None = None, dry_run: bool = False) -> int:
        """Delete the entries archived before ``before`` (``archived_at < before``) of closed jobs; returns how
        many were deleted.

        * **Closed jobs only**: an entry is deleted only when its job is closed and no longer needs a supervisor
          (:func:`~dispatch.records.model.needs_supervision` is false: no open intent, no stray or stop still
          followed), or is not in the records at all. A job still open keeps its entries whatever their age.
        * ``limit`` (None or at least 1; ValueError otherwise) bounds one call's deletions, oldest first, so a
          caller keeps each call (one transaction) short and calls again while a call deletes ``limit``.
        * **Idempotent and concurrent**: a second call with the same ``before`` deletes nothing more; on
          PostgreSQL several supervisors may call it at once (each skips the rows another is deleting, and none
          waits for another).
        * ``dry_run``: delete nothing; return how many entries the same call would delete (a read, so it works
          on a read-only store too). Without ``dry_run``, ReadOnly on a read-only store.

        The SQL stores find the candidates through an index on ``archived_at`` and look each one's job up by
        its key, so a call never scans the whole archive."""
        ...


def check_limit(limit: int | None) -> None:
    """ValueError unless ``limit`` is None or a positive number of entries (:meth:`OutputArchive.prune_outputs`)."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be None or a positive number of entries, not {limit!r}")


COLUMNS = "job_id, execution, submission, restart, status, archived_at, size, truncated, reason, attempts, rank, stream"
"""The metadata columns of the ``outputs`` table, in :func:`from_row` order (``data`` is read separately)."""


def values(entry: ArchivedOutput) -> tuple[Any, ...]:
    """The row of ``entry``: :data:`COLUMNS` then ``data``."""
    return (
        entry.job_id,
        entry.execution,
        entry.submission,
        entry.restart,
        entry.status.value,
        entry.archived_at,
        entry.size,
        entry.truncated,
        entry.reason,
        entry.attempts,
        entry.rank,
        entry.stream,
        bytes(entry.data),
    )


def from_row(row: Sequence[Any], data: bytes | memoryview | None = None) -> ArchivedOutput:
    """An entry from a row of :data:`COLUMNS` (and optionally its data)."""
    return ArchivedOutput(
        job_id=row[0],
        execution=row[1],
        submission=int(row[2]),
        restart=int(row[3]),
        status=ArchiveStatus(row[4]),
        archived_at=float(row[5]),
        size=int(row[6]),
        truncated=bool(row[7]),
        reason=row[8],
        attempts=int(row[9]),
        rank=int(row[10]),
        stream=row[11],
        data=bytes(data) if data is not None else b"",
    )


UPSERT = (
    "INSERT INTO {table} AS o (" + COLUMNS + ", data) VALUES ({marks})"
    " ON CONFLICT (job_id, execution) DO UPDATE SET submission = excluded.submission, restart = excluded.restart,"
    " status = excluded.status, archived_at = excluded.archived_at, size = excluded.size,"
    " truncated = excluded.truncated, reason = excluded.reason, attempts = o.attempts + 1,"
    " rank = excluded.rank, stream = excluded.stream, data = excluded.data"
    " WHERE o.status = 'failed'"
)
"""The idempotent write, shared by the SQL stores (``{table}`` and ``{marks}`` filled by each)."""

PRUNABLE = "o.archived_at < {mark} AND NOT EXISTS (SELECT 1 FROM {jobs} AS j WHERE j.id = o.job_id AND j.supervised)"
"""The entries :meth:`OutputArchive.prune_outputs` may delete, for a query over the ``outputs`` table as ``o``,
shared by the SQL stores (``{jobs}`` and ``{mark}`` filled by each): archived before the cutoff, and no job
needing supervision holds them. The ``supervised`` column is true for every open job (and for a closed one
still followed)."""
