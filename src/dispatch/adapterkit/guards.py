"""The pre-checks of ``open``, ``hold`` and ``release``, the same on every scheduler.

Each takes what the adapter read of the object just before acting, and either raises
:class:`~dispatch.errors.Rejected` naming why, or says whether the adapter must act (False: the call is a
no-op that already holds). The adapter then does the scheduler's part. Reading and acting are two calls on
most schedulers; the contract allows that, because a hold instance makes a late or repeated call recognisable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dispatch.errors import Rejected
from dispatch.spi import Gate, JobEvidence


def check_open(ev: JobEvidence) -> bool:
    """Before opening dispatch's start gate: Rejected when someone else's hold is on the object (dispatch
    never lifts it); False when the gate is already open (opening is idempotent); True otherwise."""
    if ev.foreign_holds:
        raise Rejected(
            f"{ev.scheduler_id} is held by someone else ({', '.join(ev.foreign_holds)}); dispatch never lifts it"
        )
    return ev.gate is Gate.CLOSED


def _same(instance: str, held: str, matches: Callable[[str, str], bool] | None) -> bool:
    return held == instance or (matches is not None and matches(instance, held))


def check_hold(
    scheduler_id: str,
    holds: Sequence[str],
    instance: str,
    *,
    waiting: bool,
    state: str = "not waiting",
    single: bool = True,
    matches: Callable[[str, str], bool] | None = None,
) -> bool:
    """Before holding under ``instance``: False when that instance already holds the object (idempotent);
    Rejected when another instance does and the scheduler can carry only one (``single``); Rejected when the
    object is not waiting (``state`` says what it is instead); True otherwise.

    ``matches(instance, held)`` tells whether a hold read back (``held``) is ``instance`` in the scheduler's
    encoding (see :mod:`dispatch.adapterkit.holds`), for schedulers that cannot store the instance verbatim.
    """
    if any(_same(instance, h, matches) for h in holds):
        return False
    if single and holds:
        raise Rejected(f"{scheduler_id} already carries hold {holds[0]}; release it first")
    if not waiting:
        raise Rejected(f"{scheduler_id} is {state}: only a waiting object can be held")
    return True


def check_release(
    scheduler_id: str,
    holds: Sequence[str],
    instance: str,
    *,
    matches: Callable[[str, str], bool] | None = None,
) -> bool:
    """Before lifting the hold ``instance``: False when the object carries no hold (a no-op); Rejected when
    it carries only other instances' holds (only the owner lifts a hold); True otherwise."""
    if not holds:
        return False
    if not any(_same(instance, h, matches) for h in holds):
        raise Rejected(f"{scheduler_id} carries hold(s) {', '.join(sorted(holds))}, not {instance!r}")
    return True
