"""Folding a reading that shows no object: an unanswered read, and an object the scheduler has no trace of.

Neither ever makes anything ``succeeded``: what is not seen becomes ``unknown`` / cause ``unknown``, and an end
already seen with evidence is kept.

* :func:`fold_unanswered`: the scheduler has not answered for the object yet. The last evidence stays, and the
  clock an ``unknown`` reading starts (``Submission.unknown_since``) starts; once it has lasted ``grace`` the
  submission is folded as unknown evidence is. It resolves no intent.
* :func:`fold_vanished`: NotFound. The submission is marked ``gone``, and open intents past their deadline are
  resolved (a ``stop`` done, anything else failed).
"""

from __future__ import annotations

from dispatch.outcome import Cause, Evidence, Outcome, State
from dispatch.records.model import Event, JobRecord, Submission
from dispatch.spi import Unanswered
from dispatch.supervise.fold_intents import resolve_vanished
from dispatch.supervise.unknown_clock import read_unknown


def fold_unanswered(
    job: JobRecord, sub: Submission, unanswered: Unanswered, now: float, grace: float, lease: int | None
) -> list[Event]:
    """Fold an Unanswered reading of ``sub``'s object (the caller checked it changes something), made under the
    supervisor lease ``lease`` (or None: :mod:`dispatch.supervise.unknown_clock`)."""
    at = unanswered.observed_at
    events: list[Event] = []
    if read_unknown(sub, at, lease):
        events.append(Event(job.id, now, "unanswered", {"submission": sub.n, "reason": unanswered.reason}))
    since = at if sub.unknown_since is None else sub.unknown_since  # set by read_unknown
    out = sub.outcome
    if (out is None or not (out.ended or out.state is State.UNKNOWN)) and at - since >= grace:
        ev = Evidence("unanswered", at)
        detail = f"the scheduler has not answered for it for {at - since:.0f}s: {unanswered.reason}"
        for ex in sub.executions:
            if not ex.outcome.ended:
                ex.outcome = Outcome(State.UNKNOWN, Cause.UNKNOWN, ev, detail=detail)
        sub.outcome = Outcome(State.UNKNOWN, Cause.UNKNOWN, ev, detail=detail)
        events.append(
            Event(
                job.id,
                now,
                "observed",
                {"submission": sub.n, "state": "unknown", "cause": "unknown", "exitCode": None, "source": ev.source},
            )
        )
    return events


def fold_vanished(job: JobRecord, sub: Submission, now: float, at: float) -> list[Event]:
    """Fold a NotFound of ``sub``'s object, observed at ``at``."""
    events: list[Event] = []
    ev = Evidence("not-found", now)
    settled = sub.outcome is not None and (sub.outcome.ended or sub.outcome.state is State.UNKNOWN)
    if not sub.gone or not settled:
        sub.gone = True
        for ex in sub.executions:
            if not ex.outcome.ended:
                ex.outcome = Outcome(State.UNKNOWN, Cause.UNKNOWN, ev, detail="the scheduler has no trace of it")
        if sub.outcome is None or not sub.outcome.ended:
            sub.outcome = Outcome(State.UNKNOWN, Cause.UNKNOWN, ev, detail="the scheduler has no trace of it")
        events.append(Event(job.id, now, "vanished", {"submission": sub.n, "state": sub.outcome.state.value}))
    return events + resolve_vanished(job, sub, now, at)
