"""Outcomes every adapter builds the same way: an ended program's, the ranks' combined end, and why a waiting
object waits.

* :func:`end_outcome`: how a program's end reads, whatever reported it (a rank's exit, a batch script's, an
  accounting record): ``launch-failed`` when it could not be started, ``failed`` / ``exit`` with the signal
  that killed it, ``succeeded`` / ``exit`` only for exit code 0, else ``failed`` / ``exit`` with its code.
* :func:`ranks_outcome`: the outcome of :func:`dispatch.adapterkit.rankends.combine`'s verdict (first failure
  in time wins; success only when every rank exited 0).
* :func:`waiting_outcome`: one cause for an object that has not started, when several reasons hold at once,
  by the order :data:`WAITING_ORDER`: stopped > admin-held > held > gated > queued. A stop is final, someone
  else's hold is the one dispatch cannot lift (so it is the one a human must hear of), dispatch's own hold
  outlasts the opening of its gate, and only an object with nothing else keeping it waits its turn in the queue.
"""

from __future__ import annotations

from collections.abc import Sequence

from dispatch.adapterkit.rankends import LAUNCH_FAILED, RanksEnd
from dispatch.outcome import Cause, Evidence, Outcome, State

WAITING_ORDER = (Cause.CANCELLED, Cause.ADMIN_HELD, Cause.HELD, Cause.GATED, Cause.QUEUED)
"""The causes :func:`waiting_outcome` gives, first match first (``cancelled``: stopped before it ran; the
queued cause may be ``no-capacity`` where the scheduler tells the two apart)."""


def end_outcome(
    evidence: Evidence,
    exit_code: int | None,
    signal: int | None = None,
    *,
    launch_failed: bool = False,
    own: bool = False,
    detail: str = "",
) -> Outcome:
    """The outcome of a program that ended with ``exit_code`` (None: not known) or was killed by ``signal``, or
    (``launch_failed``) could not be started: ``not-launchable`` when that was the job's own request (``own``:
    its program, working directory or image does not exist), else ``launch-failed``. Success needs exit code 0
    and no signal; the code and signal are kept as given (an adapter whose scheduler reports ``128 + signal``
    keeps that)."""
    if launch_failed:
        cause = Cause.NOT_LAUNCHABLE if own else Cause.LAUNCH_FAILED
        return Outcome(State.FAILED, cause, evidence, exit_code=exit_code, signal=signal, detail=detail)
    if not signal and exit_code == 0:
        return Outcome(State.SUCCEEDED, Cause.EXIT, evidence, exit_code=0, detail=detail)
    return Outcome(State.FAILED, Cause.EXIT, evidence, exit_code=exit_code, signal=signal or None, detail=detail)


def ranks_outcome(end: RanksEnd, evidence: Evidence) -> Outcome:
    """The outcome of ranks' combined end (:func:`dispatch.adapterkit.rankends.combine`). A rank that could not
    be started (its program or working directory missing, not executable) is ``not-launchable``: the job's own
    request."""
    launch = end.cause == LAUNCH_FAILED  # the verdict's word for it is already not-launchable
    return end_outcome(evidence, end.exit_code, end.signal, launch_failed=launch, own=launch, detail=end.detail)


def waiting_outcome(
    evidence: Evidence,
    *,
    stopped: bool = False,
    foreign_holds: Sequence[str] = (),
    holds: Sequence[str] = (),
    gate_closed: bool = False,
    queued: Cause = Cause.QUEUED,
    detail: str = "",
) -> Outcome:
    """Why an object that has not started waits, by :data:`WAITING_ORDER`: ``cancelled`` when it was stopped,
    ``held`` / ``admin-held`` for someone else's hold (``foreign_holds`` names them), ``held`` / ``held`` for
    dispatch's (``holds``: their instances), ``pending`` / ``gated`` behind dispatch's closed start gate, else
    ``pending`` / ``queued`` (the scheduler's ``queued`` cause: ``no-capacity`` or ``unrunnable`` where it says
    so). ``detail``, the scheduler's own words, follows the kit's."""
    if queued not in (Cause.QUEUED, Cause.NO_CAPACITY, Cause.UNRUNNABLE):
        raise ValueError(f"a queued object's cause is queued, no-capacity or unrunnable, not {queued.value}")
    if stopped:
        state, cause, said = State.CANCELLED, Cause.CANCELLED, "stopped before it ran"
    elif foreign_holds:
        state, cause, said = State.HELD, Cause.ADMIN_HELD, "held by someone else: " + ", ".join(foreign_holds)
    elif holds:
        state, cause, said = State.HELD, Cause.HELD, "held by dispatch: " + ", ".join(holds)
    elif gate_closed:
        state, cause, said = State.PENDING, Cause.GATED, "start gate closed"
    else:
        state, cause, said = State.PENDING, queued, ""
    return Outcome(state, cause, evidence, detail="; ".join(x for x in (said, detail) if x))
