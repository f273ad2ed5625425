"""The unknown clock counts readings: when a reading after a gap nobody read starts it afresh.

A submission whose evidence turns ``unknown`` (or whose object goes unanswered) is not ended: the fold starts a
clock (``Submission.unknown_since``) and nothing is decided until it has run the backend's NodeLossWindow
(``grace``). The clock stands for "read unknown all that time". Readings are samples, though, and two of them
say nothing of the time between if nobody read the object meanwhile: a ``dispatch status`` that finds it
unanswered, every supervisor down while it answers again, a supervisor back that finds it unanswered again for
a moment. Counting the clock from the first of those would take two short spells for one long one and decide
on a running job.

So the record keeps the time of the last unknown (or unanswered) reading written, ``unknown_seen_at``, and,
for a reader that reads at least every ``bound / 2`` (:func:`reading_bound`):

* a reading more than ``bound`` after it restarts the clock at the reading (:func:`restarts`): the time
  before it counts for nothing, at the cost of waiting one more window;
* a reading at least ``bound / 2`` after it is written even when nothing else changes (:func:`due`), so that
  such a reader's readings never look like a gap: a reading not written was less than ``bound / 2`` after
  the last one written, and the next comes at most ``bound / 2`` later.

The supervisor passes :func:`reading_bound` of its NodeLossWindow and poll interval. The read commands pass
no bound (0): they read when a user asks, so their readings prove no continuity and their gaps prove no
absence; they start a clock and keep it running, and leave restarts to the supervisor. A record written
before ``unknown_seen_at`` existed counts from its clock start.
"""

from __future__ import annotations

import math

from dispatch.records.model import Submission


def _last_reading(sub: Submission) -> float | None:
    if sub.unknown_since is None:
        return None
    return sub.unknown_seen_at if sub.unknown_seen_at is not None else sub.unknown_since


READS_PER_BOUND = 4
"""A supervisor reads a submission on an unknown clock every poll; the bound spans this many polls at least,
so that a cycle slower than its poll (a loaded host, a slow scheduler) is not taken for a gap."""


def reading_bound(grace: float, poll: float) -> float:
    """The longest gap between two readings that still counts as continuous, for a reader that reads every
    ``poll`` seconds: the NodeLossWindow ``grace`` (a longer gap may hide a whole answered spell), but never
    less than :data:`READS_PER_BOUND` polls (a window shorter than the poll, as the local adapter's, would
    otherwise restart the clock at every reading and no unknown would ever end). Unbounded ``grace``: no
    bound (0), nothing to restart."""
    if not math.isfinite(grace):
        return 0.0
    return max(grace, READS_PER_BOUND * poll)


def _bounded(bound: float) -> bool:
    return 0 < bound < math.inf


def restarts(sub: Submission, at: float, bound: float) -> bool:
    """Whether an unknown or unanswered reading of ``sub`` at ``at`` restarts its running clock: the last one
    written is more than ``bound`` old."""
    last = _last_reading(sub)
    return _bounded(bound) and last is not None and at - last > bound


def due(sub: Submission, at: float, bound: float) -> bool:
    """Whether an unknown or unanswered reading of ``sub`` at ``at`` is to be written to keep the last reading
    fresh (or to restart the clock): the last one written is at least ``bound / 2`` old."""
    last = _last_reading(sub)
    return _bounded(bound) and last is not None and at - last >= bound / 2


def read_unknown(sub: Submission, at: float, bound: float) -> bool:
    """Record an unknown or unanswered reading of ``sub`` at ``at`` on its clock: start the clock if it is not
    running (or restart it after a gap longer than ``bound``) and keep the reading's time. Returns whether the
    clock (re)started."""
    started = sub.unknown_since is None or restarts(sub, at, bound)
    if started:
        sub.unknown_since = at
    if sub.unknown_seen_at is None or at > sub.unknown_seen_at:
        sub.unknown_seen_at = at
    return started


def stop(sub: Submission) -> None:
    """The evidence is known again (or ended): no clock runs."""
    sub.unknown_since = None
    sub.unknown_seen_at = None
