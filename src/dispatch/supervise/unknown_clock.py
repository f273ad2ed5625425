"""The unknown clock runs under one lease: a reading after a gap in supervision starts it afresh.

A submission whose evidence turns ``unknown`` (or whose object goes unanswered) is not ended: the fold starts a
clock (``Submission.unknown_since``) and nothing is decided until it has run the backend's NodeLossWindow. The
clock stands for "watched, and unknown, all that time". Two readings say nothing of the time between them if
nobody watched the object meanwhile: a ``dispatch status`` that finds it unanswered, every supervisor down while
it answers again, a supervisor back that finds it unanswered again for a moment; or a supervisor that reads it
unknown and dies, and its successor that reads it unknown a window later. Counting from the first reading takes
two short spells for one long one and decides on a running job.

Who watches a job continuously is the supervisor holding its lease: it reads the job every cycle (or follows the
scheduler's watch) for as long as the lease lasts, and a lease taken again gets a new fencing token. So the
record keeps the token of the lease under which the clock's readings were made (``Submission.unknown_seen_by``):

* a supervisor's reading under another token (a successor after a crash or an outage, a lease retaken after
  it expired, a clock a read command started) restarts the clock at the reading: the time before it counts
  for nothing, at the cost of waiting one more window;
* readings under the same token keep it running: its holder never stopped watching.

A read command reads when a user asks and holds no lease (``lease=None``): it starts a clock, with no token, and
never restarts one. A record written before ``unknown_seen_by`` existed has no token either, so a supervisor's
first reading restarts its clock once.
"""

from __future__ import annotations

from dispatch.records.model import Submission


def restarts(sub: Submission, lease: int | None) -> bool:
    """Whether an unknown or unanswered reading of ``sub`` made under ``lease`` (a supervisor's fencing token;
    None: a reader without one) restarts its running clock: it was started, or last read, under another."""
    return lease is not None and sub.unknown_since is not None and sub.unknown_seen_by != lease


def read_unknown(sub: Submission, at: float, lease: int | None) -> bool:
    """Record an unknown or unanswered reading of ``sub`` at ``at`` under ``lease`` on its clock: start the
    clock if it is not running, or restart it (see :func:`restarts`). Returns whether the clock (re)started."""
    started = sub.unknown_since is None or restarts(sub, lease)
    if started:
        sub.unknown_since = at
        sub.unknown_seen_by = lease
    return started


def stop(sub: Submission) -> None:
    """The evidence is known again (or ended): no clock runs."""
    sub.unknown_since = None
    sub.unknown_seen_by = None
