"""Folding evidence into a job's record: a pure function from (record, evidence, time) to (record, events).

What :func:`fold` guarantees:

* Evidence older than what the record already holds is ignored (a slow observer never rewinds a record).
* A failed poll is not folded at all: the caller does not call :func:`fold` when the backend raised
  :class:`~dispatch.errors.Unavailable`, so the state stays as last known and its evidence age grows.
* ``evidence=None`` means the backend has no trace of the object (NotFound). The submission is marked ``gone``;
  an execution that had already ended with evidence keeps that evidence; anything else becomes
  ``unknown`` / cause ``unknown``. Nothing becomes ``succeeded`` without the scheduler saying so.
* An :class:`~dispatch.spi.Unanswered` reading (the scheduler has not answered for the object yet) keeps the
  last evidence and starts the clock an ``unknown`` reading starts (``Submission.unknown_since``); once it has
  lasted ``unanswered_grace`` (the supervisor passes the backend's NodeLossWindow) the submission is folded as
  unknown evidence is: ``unknown`` / cause ``unknown``, an end already seen kept. It resolves no intent.
* The unknown clock runs under one supervisor lease: a supervisor's reading under another lease than the clock's
  restarts it, nobody having watched the object throughout (:mod:`dispatch.supervise.unknown_clock`).
* A foreign hold (someone else's gate or hold) on a waiting object makes it ``held`` / ``admin-held``.
* A :class:`~dispatch.spi.Cessation` covering an execution that ended node-lost turns its cause into
  ``cessation`` (planned, not a failure of the job).
* Open intents whose deadline has passed are resolved by what the evidence shows (never by acting again):
  ``open`` by the gate, ``hold``/``release`` by the hold instances present, ``stop`` by the object having
  ended, ``requeue`` by whether the restart count moved, ``readmit`` by whether the object waits or runs
  again (or shows an execution after the one readmitted). ``start`` is resolved by ``found``, the result of
  finding the submission's marker after the deadline: one object is recorded, more than one keeps the
  earliest and lists the others as strays (they are gated and will be stopped), none means the start did not
  land (``failed``: it may be made again with the same marker).

The fold is in parts, one file each, this module composing them and keeping their public names:

* :mod:`~dispatch.supervise.fold_guards`: whether a reading changes anything (and :class:`Settled`, the same
  answer for the supervisor's steady path);
* :mod:`~dispatch.supervise.fold_evidence`: an ``inspect`` reading of the object (and :func:`shown`);
* :mod:`~dispatch.supervise.fold_absent`: an unanswered reading, and an object the scheduler has no trace of;
* :mod:`~dispatch.supervise.fold_intents`: resolving open intents by what was seen, including ``start`` by
  ``found`` and a stray's ``stop`` (:func:`fold_stray`).
"""

from __future__ import annotations

from collections.abc import Sequence

from dispatch.outcome import State
from dispatch.records.model import Event, JobRecord, Submission
from dispatch.spi import Cessation, Found, JobEvidence, Unanswered
from dispatch.supervise.fold_absent import fold_unanswered, fold_vanished
from dispatch.supervise.fold_evidence import fold_evidence, shown
from dispatch.supervise.fold_guards import Settled, unanswered_changes, worth_folding
from dispatch.supervise.fold_intents import fold_stray, readmitted, resolve_found, start_intent
from dispatch.supervise.unknown_clock import read_unknown, restarts, stop

__all__ = [
    "DEFAULT_REFRESH",
    "Settled",
    "fold",
    "fold_found",
    "fold_stray",
    "readmitted",
    "shown",
    "start_intent",
]

DEFAULT_REFRESH = 60.0
"""How stale a record's evidence time may get before an unchanged observation is written anyway."""


def fold(
    job: JobRecord,
    evidence: JobEvidence | Unanswered | None,
    now: float,
    *,
    submission: int | None = None,
    found: Sequence[Found] | None = None,
    cessation: Cessation | None = None,
    refresh: float = DEFAULT_REFRESH,
    observed_at: float | None = None,
    unanswered_grace: float = 0.0,
    reading_lease: int | None = None,
) -> tuple[JobRecord, list[Event]]:
    """Fold one observation of a submission (default: the current one) into ``job``.

    An intent is resolved only by an observation made at or after its deadline: the evidence's own time, or
    ``observed_at`` (default ``now``) for a NotFound and for ``found``. An observation made earlier (a slow
    supervisor folding what it read before the deadline) says nothing about the call.

    ``evidence`` is what ``inspect`` showed (None: the scheduler has no trace of the object; pass nothing for
    a submission that was not observed, see :func:`fold_found`). ``found`` is what finding the submission's
    marker showed (only used to resolve an open ``start`` past its deadline). ``unanswered_grace`` is how long
    an :class:`~dispatch.spi.Unanswered` reading keeps the last evidence (see the module's docstring).
    ``reading_lease`` is the fencing token of the supervisor lease the reading was made under (None, the
    default: a reader without one, which never restarts an unknown clock; see
    :mod:`~dispatch.supervise.unknown_clock`). Returns
    the new record (``job`` itself, unchanged, when the observation changes nothing worth writing) and the
    events to append.
    """
    sub = _target(job, submission)
    if sub is None:
        return job, []
    at = now if observed_at is None else observed_at
    if isinstance(evidence, Unanswered):
        if found is None and not unanswered_changes(sub, evidence, unanswered_grace, reading_lease):
            return job, []
    elif (
        found is None
        and not worth_folding(job, sub, evidence, now, cessation, refresh)
        and not _unknown_reading_due(sub, evidence, reading_lease)
    ):
        return job, []
    new = job.copy()
    nsub = new.submission(sub.n)
    events: list[Event] = []
    if found is not None:
        events += resolve_found(new, nsub, found, now, at)
    if isinstance(evidence, Unanswered):
        if nsub.scheduler_id is not None and unanswered_changes(nsub, evidence, unanswered_grace, reading_lease):
            events += fold_unanswered(new, nsub, evidence, now, unanswered_grace, reading_lease)
        return new, events
    if nsub.scheduler_id is not None:
        if evidence is None:
            events += fold_vanished(new, nsub, now, at)
        elif evidence.scheduler_id == nsub.scheduler_id:
            events += fold_evidence(new, nsub, evidence, now, cessation)
    _mark_unknown(sub, nsub, at, reading_lease)
    return new, events


def _unknown_reading_due(sub: Submission, evidence: JobEvidence | None, lease: int | None) -> bool:
    """Whether an ``unknown`` reading of ``sub``'s object (or a NotFound: no end seen, the clock runs) is to be
    written for the unknown clock's sake alone: it restarts the clock (:mod:`dispatch.supervise.unknown_clock`)."""
    if evidence is not None and (
        evidence.scheduler_id != sub.scheduler_id or evidence.outcome.state is not State.UNKNOWN
    ):
        return False
    return restarts(sub, lease)


def _mark_unknown(old: Submission, new: Submission, at: float, lease: int | None) -> None:
    """Start (or end) the clock on an unknown: a submission not seen to end whose evidence turns ``unknown``
    gets ``unknown_since``; evidence that is known again clears it. An object shown again after it was marked
    gone starts the clock afresh: the scheduler had it all along (the reader that missed it may have had a
    narrower view), so the time it was missing says nothing of how long its unknown has lasted. A supervisor's
    reading under another lease than the clock's restarts it too (:mod:`dispatch.supervise.unknown_clock`)."""
    out = new.outcome
    shown_again = old.gone and not new.gone
    was_unknown = old.outcome is not None and old.outcome.state is State.UNKNOWN
    if out is None or out.state is not State.UNKNOWN:
        stop(new)
    elif shown_again:
        stop(new)
        read_unknown(new, at, lease)
    elif new.unknown_since is not None or not was_unknown:
        read_unknown(new, at, lease)


def fold_found(
    job: JobRecord,
    found: Sequence[Found],
    now: float,
    *,
    submission: int | None = None,
    observed_at: float | None = None,
) -> tuple[JobRecord, list[Event]]:
    """Fold only the result of a find-by-marker (no inspect evidence) into ``job``."""
    sub = _target(job, submission)
    if sub is None:
        return job, []
    new = job.copy()
    events = resolve_found(new, new.submission(sub.n), found, now, now if observed_at is None else observed_at)
    return (new, events) if events else (job, [])


def _target(job: JobRecord, submission: int | None) -> Submission | None:
    if submission is None:
        return job.current
    try:
        return job.submission(submission)
    except KeyError:
        return None
