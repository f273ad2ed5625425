"""Browsing the records without decoding them: filtered, paginated status rows, counts, and leases.

Dashboards and status tools read thousands of jobs per request; these queries touch only the summary columns
(and, for leases, one JSON path of active jobs) so their cost does not grow with the size of the documents.
Every store implements :class:`Browse`; :func:`where` builds the filter for the SQL stores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from dispatch.records.model import JobSummary

NO_CAUSE = "-"
"""The cause filter value that selects jobs without a cause."""


@dataclass(frozen=True)
class JobQuery:
    """Which status rows: each given filter must hold. ``name`` matches a substring of the name or a prefix of
    the id (case-insensitive); ``cause`` :data:`NO_CAUSE` matches jobs with no cause. Rows come newest first,
    ``limit`` of them after ``offset``."""

    state: str | None = None
    cause: str | None = None
    cluster: str | None = None
    name: str | None = None
    offset: int = 0
    limit: int = 50


@dataclass(frozen=True)
class Page:
    rows: list[JobSummary]
    total: int
    """How many jobs match the filters (all pages)."""


@dataclass(frozen=True)
class Count:
    """Jobs created in hour ``hour`` (0 = the first hour of the window) in ``state`` with ``cause``."""

    hour: int
    state: str
    cause: str | None
    count: int


@dataclass(frozen=True)
class LeaseRow:
    """A supervisor's lease on an active job."""

    job_id: str
    cluster: str
    owner: str
    token: int
    expires_at: float


@runtime_checkable
class Browse(Protocol):
    def find(self, query: JobQuery) -> Page:
        """One page of status rows matching ``query``, and how many match in all."""
        ...

    def tally(self, since: float) -> list[Count]:
        """Jobs created at or after ``since`` counted by hour, state and cause."""
        ...

    def leases(self) -> list[LeaseRow]:
        """The leases held on jobs that are not closed, by owner then job."""
        ...

    def clusters(self) -> list[str]:
        """The cluster names the records mention, sorted."""
        ...


def where(query: JobQuery, mark: str, position: str) -> tuple[str, list[Any]]:
    """The SQL condition (after ``WHERE``) for ``query``'s filters, with ``mark`` as the placeholder and
    ``position`` the dialect's 1-based substring search ``f(haystack, needle)`` (SQLite ``instr``, PostgreSQL
    ``strpos``)."""
    parts = ["1=1"]
    args: list[Any] = []
    if query.state:
        parts.append(f"state = {mark}")
        args.append(query.state)
    if query.cause == NO_CAUSE:
        parts.append("cause IS NULL")
    elif query.cause:
        parts.append(f"cause = {mark}")
        args.append(query.cause)
    if query.cluster:
        parts.append(f"cluster = {mark}")
        args.append(query.cluster)
    if query.name:
        # substring, without LIKE's wildcards: what the user typed is matched literally
        parts.append(f"({position}(lower(coalesce(name, '')), lower({mark})) > 0 OR {position}(id, lower({mark})) = 1)")
        args += [query.name, query.name]
    return " AND ".join(parts), args


def matches(s: JobSummary, query: JobQuery) -> bool:
    """``where`` for stores without SQL."""
    if query.state and s.state.value != query.state:
        return False
    if query.cause == NO_CAUSE and s.cause is not None:
        return False
    if query.cause and query.cause != NO_CAUSE and (s.cause is None or s.cause.value != query.cause):
        return False
    if query.cluster and s.cluster != query.cluster:
        return False
    if query.name:
        needle = query.name.lower()
        if needle not in (s.name or "").lower() and not s.id.startswith(needle):
            return False
    return True


def counts(rows: Sequence[Sequence[Any]]) -> list[Count]:
    return [Count(int(r[0]), r[1], r[2], int(r[3])) for r in rows]
