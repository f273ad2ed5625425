"""The :class:`Records` protocol: durable job records under optimistic concurrency, with fencing.

Contract for every store:

* :meth:`Records.create` writes a new job at version 1 (Conflict if the id exists).
* :meth:`Records.update` writes ``job`` only if the stored version still equals ``job.version`` (the
  version it was read at); the stored version becomes ``job.version + 1``. Of two writers that read the same
  version exactly one wins; the other gets :class:`~dispatch.errors.Conflict`. With ``fence`` set, the write
  also requires the stored lease's token to equal ``fence`` (a supervisor that lost its lease cannot write).
* Events passed with a write are appended in the same transaction: a write and its events land together or
  not at all. The history is append-only.
* Reads return copies: mutating a returned record changes nothing until it is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from dispatch.errors import Conflict
from dispatch.records.model import Event, JobRecord, JobSummary


@runtime_checkable
class Records(Protocol):
    def create(self, job: JobRecord, events: Sequence[Event] = ()) -> JobRecord:
        """Write a new job; returns it at version 1."""
        ...

    def get(self, job_id: str) -> JobRecord:
        """The job, or NotFound."""
        ...

    def update(self, job: JobRecord, events: Sequence[Event] = (), *, fence: int | None = None) -> JobRecord:
        """Compare-and-set on ``job.version`` (and the lease token when ``fence`` is given)."""
        ...

    def jobs(self, *, active_only: bool = True, cluster: str | None = None) -> list[JobRecord]:
        """Full records, oldest first; ``active_only`` leaves out closed jobs."""
        ...

    def summaries(
        self, *, active_only: bool = False, cluster: str | None = None, limit: int | None = None
    ) -> list[JobSummary]:
        """Status-table rows, newest first, without decoding whole records where the store can."""
        ...

    def events(self, job_id: str, after: int = 0) -> list[Event]:
        """The job's history after event ``after``, oldest first."""
        ...

    def close(self) -> None: ...


def check_fence(stored: JobRecord, fence: int | None) -> None:
    """Raise Conflict when ``fence`` is given and the stored lease does not carry that token."""
    if fence is None:
        return
    if stored.lease is None or stored.lease.token != fence:
        holder = f"token {stored.lease.token} of {stored.lease.owner}" if stored.lease else "no lease"
        raise Conflict(f"job {stored.id}: fencing token {fence} is stale (the record holds {holder})")
