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
* :meth:`Records.to_supervise` answers "which jobs must this supervisor look at" from columns kept beside the
  documents (whether the job needs supervision, its lease's owner and expiry): it decodes nothing, and its
  cost follows the active jobs, never the closed history.
* :meth:`Records.renew` extends all of one supervisor's unexpired leases in one transaction (each renewed job's
  version moves on, so a writer holding an older copy gets Conflict as for any other write).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from dispatch.errors import Conflict, NotFound
from dispatch.records.model import Event, JobHead, JobRecord, JobSummary, Peers, row_values


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

    def to_supervise(self, *, cluster: str, owner: str, now: float) -> list[JobHead]:
        """The jobs of ``cluster`` that need supervision (:func:`~dispatch.records.model.needs_supervision`)
        and whose lease ``owner`` holds or may take (free, or expired at ``now``), oldest first."""
        ...

    def get_many(self, job_ids: Sequence[str]) -> list[JobRecord]:
        """The jobs with these ids (ids not in the records are left out), in no particular order."""
        ...

    def renew(self, *, cluster: str, owner: str, now: float, expires_at: float) -> dict[str, int]:
        """Move to ``expires_at`` every lease ``owner`` holds on a job of ``cluster`` needing supervision that
        is unexpired at ``now`` (an expired lease is never renewed in place), in one transaction; returns each
        renewed job's new version."""
        ...

    def peers(self, *, cluster: str, owner: str, now: float, expires_at: float) -> Peers:
        """Record that supervisor ``owner`` of ``cluster`` is alive until ``expires_at`` (one write), and return
        the supervisors alive at ``now`` (``owner`` included) and how many jobs of the cluster need supervision,
        so supervisors can divide the work."""
        ...

    def events(self, job_id: str, after: int = 0) -> list[Event]:
        """The job's history after event ``after``, oldest first."""
        ...

    def close(self) -> None: ...


Written = tuple[JobRecord, Sequence[Event]]
"""A job to write and the events to append with it."""


@runtime_checkable
class BatchWrites(Protocol):
    """Many writes in one transaction (:meth:`~dispatch.cluster.Operator.submit_many` records a thousand jobs per
    phase with one commit, and one sync to disk, instead of one per job). A store offers it beside
    :class:`Records`; :func:`batch_writes` says whether one does.

    Contract, for both methods:

    * Each item is checked as its one-job counterpart checks it (``create``: the id is free; ``update``: the
      version, and the lease token with ``fence``) and gets that method's answer: the job as written, or the
      :class:`~dispatch.errors.Conflict` / :class:`~dispatch.errors.NotFound` it would have raised (nothing of
      that item is written). Items are taken in order, so a second item for one job id conflicts with the first.
    * Every item that passed is written, with its events, in **one** transaction: all of them or none (an error
      of the store itself raises and writes nothing). A batch carrying an intent is durable when the call
      returns, as an intent's single write is.
    * The items are handed over, not copied (a thousand decoded copies would cost more than the writes): each
      item written is its own answer, its ``version`` set to the stored one once the transaction committed; an
      item refused, or any item of a batch that raised, is left as it was.
    """

    def create_many(self, items: Sequence[Written]) -> list[JobRecord | Conflict]:
        """Write new jobs at version 1."""
        ...

    def update_many(
        self, items: Sequence[Written], *, fence: int | None = None
    ) -> list[JobRecord | Conflict | NotFound]:
        """Compare-and-set each job on its version (and the lease token when ``fence`` is given)."""
        ...


_A = TypeVar("_A")


def handed_over(answers: list[_A], versions: dict[int, int]) -> list[_A]:
    """A committed batch's answers (:class:`BatchWrites`), each job written given its stored version, looked up
    by the job object's ``id()`` in ``versions``."""
    for answer in answers:
        if isinstance(answer, JobRecord):
            answer.version = versions[id(answer)]
    return answers


def planned_updates(
    items: Sequence[Written], heads: dict[str, tuple[int, Any, Any]], fence: int | None
) -> tuple[list[JobRecord | Conflict | NotFound], dict[int, int], list[tuple[Any, ...]], list[Event]]:
    """An SQL store's ``update_many`` without its SQL: each job compared with its stored head (version, lease
    token, lease owner; ``heads`` by id, updated in place so a job named twice is compared with its first write)
    as its own ``update`` would be. Answers the answers, the new versions by the job object's ``id()``, the rows to
    write (:func:`row_values` then the id) and the events to append."""
    answers: list[JobRecord | Conflict | NotFound] = []
    versions: dict[int, int] = {}
    rows: list[tuple[Any, ...]] = []
    events: list[Event] = []
    for job, evs in items:
        head = heads.get(job.id)
        if head is None:
            answers.append(NotFound(f"no job {job.id!r} in the records"))
            continue
        if head[0] != job.version:
            answers.append(Conflict(f"job {job.id}: written at version {job.version}, the record is at {head[0]}"))
            continue
        try:
            check_token(job.id, head[1], head[2], fence)
        except Conflict as exc:
            answers.append(exc)
            continue
        values = row_values(job, version=job.version + 1)
        heads[job.id] = (job.version + 1, job.lease.token if job.lease else None, values[-2])
        versions[id(job)] = job.version + 1
        rows.append((*values, job.id))
        events.extend(evs)
        answers.append(job)
    return answers, versions, rows, events


def batch_writes(records: object) -> BatchWrites | None:
    """``records`` as a :class:`BatchWrites` when its class implements both methods itself; None otherwise. A
    wrapper that forwards unknown attributes to another store (``__getattr__``) is not taken for one: its own
    ``create`` and ``update`` (a fault injected, a pause) must see every write."""
    kind = type(records)
    if callable(getattr(kind, "create_many", None)) and callable(getattr(kind, "update_many", None)):
        return records  # type: ignore[return-value]
    return None


@runtime_checkable
class StoreClock(Protocol):
    """A store that tells its own time: the clock every lease it holds is judged by. PostgreSQL answers
    ``clock_timestamp()`` (the server's clock, whichever machine a supervisor runs on); SQLite, a file on one
    host, answers that host's clock. A supervisor given it (:func:`store_clock`) takes, renews and gives up
    leases by it, and carries its own time onto it (:class:`~dispatch.clock.StoreTime`), so a supervisor whose
    clock is minutes off neither takes a lease before the store says it expired nor acts on one after."""

    def now(self) -> float:
        """The store's clock: seconds since the epoch."""
        ...


def store_clock(records: object) -> Callable[[], float] | None:
    """``records``' own clock (:class:`StoreClock`) when its class tells one; None otherwise (a store in memory
    lives on its caller's clock)."""
    kind = type(records)
    if callable(getattr(kind, "now", None)):
        return records.now  # type: ignore[attr-defined,no-any-return]
    inner = getattr(records, "inner", None) or getattr(records, "_inner", None)
    return None if inner is None or inner is records else store_clock(inner)


def check_fence(stored: JobRecord, fence: int | None) -> None:
    """Raise Conflict when ``fence`` is given and the stored lease does not carry that token."""
    lease = stored.lease
    check_token(stored.id, lease.token if lease else None, lease.owner if lease else None, fence)


def check_token(job_id: str, token: int | None, owner: str | None, fence: int | None) -> None:
    """:func:`check_fence` on the stored lease's token and owner (read without decoding the document)."""
    if fence is None:
        return
    if token is None or token != fence:
        holder = f"token {token} of {owner}" if token is not None else "no lease"
        raise Conflict(f"job {job_id}: fencing token {fence} is stale (the record holds {holder})")
