"""The unknown clock counts readings: when a reading after a gap nobody read starts it afresh.

A submission whose evidence turns ``unknown`` (or whose object goes unanswered) is not ended: the fold starts a
clock (``Submission.unknown_since``) and nothing is decided until it has run the backend's NodeLossWindow
(``grace``). The clock stands for "read unknown all that time". Readings are samples, though, and two of them
say nothing of the time between if nobody read the object meanwhile: a ``dispatch status`` that finds it
unanswered, every supervisor down while it answers again, a supervisor back that finds it unanswered again for
a moment. Counting the clock from the first of those would take two short spells for one long one and decide
on a running job.

So the record keeps the time of the last unknown (or unanswered) reading written, ``unknown_seen_at``, and:

* a reading more than ``grace`` after it restarts the clock at the reading (:func:`restarts`): the time
  before it counts for nothing, at the cost of waiting one more window;
* a reading at least ``grace / 2`` after it is written even when nothing else changes (:func:`due`), so that
  readings that follow each other (a supervisor's poll, however irregular, is far shorter than half the
  window) never look like a gap: the last written reading is then always less than ``grace`` old.

A record written before ``unknown_seen_at`` existed counts from its clock start. A ``grace`` of 0 (a caller
that gives none) or an unbounded one leaves the clock as it starts: nothing to wait, or no end to wait for.
"""

from __future__ import annotations

import math

from dispatch.records.model import Submission


def _last_reading(sub: Submission) -> float | None:
    if sub.unknown_since is None:
        return None
    return sub.unknown_seen_at if sub.unknown_seen_at is not None else sub.unknown_since


def _bounded(grace: float) -> bool:
    return 0 < grace < math.inf


def restarts(sub: Submission, at: float, grace: float) -> bool:
    """Whether an unknown or unanswered reading of ``sub`` at ``at`` restarts its running clock: the last one
    written is more than ``grace`` old."""
    last = _last_reading(sub)
    return _bounded(grace) and last is not None and at - last > grace


def due(sub: Submission, at: float, grace: float) -> bool:
    """Whether an unknown or unanswered reading of ``sub`` at ``at`` is to be written to keep the last reading
    fresh (or to restart the clock): the last one written is at least ``grace / 2`` old."""
    last = _last_reading(sub)
    return _bounded(grace) and last is not None and at - last >= grace / 2


def read_unknown(sub: Submission, at: float, grace: float) -> bool:
    """Record an unknown or unanswered reading of ``sub`` at ``at`` on its clock: start the clock if it is not
    running (or restart it after a gap) and keep the reading's time. Returns whether the clock (re)started."""
    started = sub.unknown_since is None or restarts(sub, at, grace)
    if started:
        sub.unknown_since = at
    if sub.unknown_seen_at is None or at > sub.unknown_seen_at:
        sub.unknown_seen_at = at
    return started


def stop(sub: Submission) -> None:
    """The evidence is known again (or ended): no clock runs."""
    sub.unknown_since = None
    sub.unknown_seen_at = None
