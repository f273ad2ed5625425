"""Folding a backend's evidence into job records: what ``status``, ``show`` and ``run`` do when no supervisor
owns a job.

``refresh`` reads every job of a cluster that needs it (:func:`~dispatch.supervise.next.needs_observation`, the
supervisor's own test) in ONE batched ``inspect_many`` and folds what it shows through the supervisor's one fold
(:func:`dispatch.supervise.fold.fold`, with the backend's NodeLossWindow as the bound on an unanswered reading):
so a read command writes exactly the record a supervisor would write from the same evidence, with the same
safeguards (older evidence ignored, an end seen kept, a foreign hold read as admin-held, the unknown clock).
Beyond the fold it does one thing the supervisor leaves to rules: a job WITHOUT rules whose current submission
is final (an end seen, or an unknown that has outlasted the bound) is ``closed``, since nothing more will
happen to it. Jobs a supervisor holds a live lease on, or with an open intent, are left to a supervisor (shown,
not written: see :func:`left_to_supervisor`). Each
write is a compare-and-set; a lost race is skipped (the next refresh reads again).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from dispatch.errors import Conflict, NotFound
from dispatch.outcome import State
from dispatch.records.base import Records
from dispatch.records.model import Event, JobRecord, final
from dispatch.spi import Backend, JobEvidence, RankProgress, Unanswered
from dispatch.supervise.fold import fold as one_fold
from dispatch.supervise.next import needs_observation
from dispatch.supervise.step import unknown_grace

Fold = Callable[..., tuple[JobRecord, list[Event]]]
"""The signature of :func:`dispatch.supervise.fold.fold` (the simulator passes a planted variant)."""


def owned_by_supervisor(job: JobRecord, now: float) -> bool:
    return job.lease is not None and job.lease.expires_at > now


def left_to_supervisor(job: JobRecord, now: float) -> bool:
    """A job a read command shows but does not write: one a supervisor holds a live lease on, or one with an
    open intent (resolving an intent is the supervisor's: it finds a start by its marker, and it reads with the
    full view, where a reader's missing object may be only its narrower view)."""
    return owned_by_supervisor(job, now) or any(i.open for i in job.intents)


def reader_writes(job: JobRecord, evidence: JobEvidence | Unanswered | None, now: float) -> bool:
    """Whether a read command writes what it folded of ``job`` (else it only shows it): not a job left to a
    supervisor (:func:`left_to_supervisor`), and not the absence of a job with rules. An object missing from a
    reader's view is no evidence that it is gone: the view may be narrower than the supervisor's (another user's
    credentials, Slurm's PrivateData), and a reader that recorded the absence would start the unknown clock a
    supervisor then decides on by a rule (a running job resubmitted or escalated as unknown). The absence of a
    job with rules is recorded by the supervisor's own reads; a job without rules is only closed by it."""
    return not ((evidence is None and job.rules is not None) or left_to_supervisor(job, now))


Writes = Callable[[JobRecord, "JobEvidence | Unanswered | None", float], bool]
"""The signature of :func:`reader_writes` (the simulator passes a planted variant)."""


def observe(
    job: JobRecord,
    evidence: JobEvidence | Unanswered | None,
    now: float,
    *,
    grace: float,
    fold: Fold = one_fold,
) -> tuple[JobRecord, list[Event]]:
    """Fold one reading of the job's current object into ``job`` as a read command does: the one fold, exactly
    as a supervisor (with its default refresh: an unchanged reading is not written) calls it for an object it
    inspected at ``now``, then :func:`close_if_over`. Returns the new
    record (``job`` itself when nothing changed) and the events to append."""
    new, events = fold(job, evidence, now, observed_at=now, unanswered_grace=grace, refresh=math.inf)
    closed = close_if_over(new, now, grace)
    if closed:
        new = new.copy() if new is job else new
        new.closed = True
        events = [*events, closed]
    return new, events


def close_if_over(job: JobRecord, now: float, grace: float) -> Event | None:
    """The ``closed`` event for a job without rules whose current submission is over: an end seen, or an unknown
    that has lasted ``grace`` (the NodeLossWindow: before it, unknown is not an ending). None otherwise."""
    sub = job.current
    if job.closed or job.rules is not None or sub is None or sub.scheduler_id is None or not final(sub):
        return None
    out = sub.outcome
    if out is not None and out.state is State.UNKNOWN and now - (sub.unknown_since or now) < grace:
        return None
    reason = "ended, and the job has no rules" if out is None or out.ended else "unknown past the bound, no rules"
    return Event(job.id, now, "closed", {"reason": reason})


def refresh(
    records: Records,
    backend: Backend,
    jobs: Iterable[JobRecord],
    now: float,
    *,
    fold: Fold = one_fold,
    writes: Writes = reader_writes,
    progress: dict[str, tuple[RankProgress, ...]] | None = None,
) -> list[JobRecord]:
    """Observe the ``jobs`` that need it in one batched call and return all of them as observed, in order.

    Changes are written (compare-and-set) for jobs no supervisor owns. A job under a live supervisor lease is
    observed too but NOT written: the returned copy shows what the scheduler says now, and the record stays
    the supervisor's to write. So a reader always sees the truth, even when the process that owned the job has
    died and its lease has not expired yet; nor is the absence of a job with rules (:func:`reader_writes`).
    ``fold`` is the one fold and ``writes`` that rule; only the simulator passes others.
    ``progress``, when given, receives the progress the same read showed, by job id, for the jobs whose current
    execution runs and reported (records keep no progress: it changes every few seconds).
    """
    jobs = list(jobs)
    todo = [j for j in jobs if needs_observation(j, now)]
    if not todo:
        return jobs
    grace = unknown_grace(backend.declarations())
    evidence = backend.inspect_many([j.current.scheduler_id for j in todo if j.current and j.current.scheduler_id])
    out: dict[str, JobRecord] = {j.id: j for j in jobs}
    for job in todo:
        assert job.current is not None and job.current.scheduler_id is not None
        ev = evidence.get(job.current.scheduler_id)
        if progress is not None and isinstance(ev, JobEvidence) and ev.current is not None and ev.current.progress:
            progress[job.id] = ev.current.progress
        new, events = observe(job, ev, now, grace=grace, fold=fold)
        if new is job:
            continue  # nothing changed: no write (status stays cheap)
        new.updated_at = now
        if not writes(job, ev, now):
            out[job.id] = new  # shown, not written
            continue
        try:
            out[job.id] = records.update(new, events)
        except (Conflict, NotFound):
            continue
    return [out[j.id] for j in jobs]
