"""One program end's outcome, and one cause for a waiting object: stopped > admin-held > held > gated > queued."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dispatch.adapterkit.outcomes import WAITING_ORDER, end_outcome, waiting_outcome
from dispatch.outcome import Cause, Evidence, State

EV = Evidence("test", 0.0)


@given(
    stopped=st.booleans(),
    foreign=st.lists(st.sampled_from(["JobHeldAdmin", "operator hold"]), max_size=2),
    holds=st.lists(st.sampled_from(["h00000001", "h00000002"]), max_size=2),
    gate_closed=st.booleans(),
    queued=st.sampled_from([Cause.QUEUED, Cause.NO_CAPACITY, Cause.UNRUNNABLE]),
)
def test_the_first_reason_in_the_order_is_the_cause(
    stopped: bool, foreign: list[str], holds: list[str], gate_closed: bool, queued: Cause
) -> None:
    out = waiting_outcome(
        EV, stopped=stopped, foreign_holds=foreign, holds=holds, gate_closed=gate_closed, queued=queued
    )
    present = [stopped, bool(foreign), bool(holds), gate_closed, True]
    expected = [*WAITING_ORDER[:4], queued][present.index(True)]
    assert out.cause is expected
    assert out.state is {
        Cause.CANCELLED: State.CANCELLED,
        Cause.ADMIN_HELD: State.HELD,
        Cause.HELD: State.HELD,
    }.get(expected, State.PENDING)
    for name in foreign if expected is Cause.ADMIN_HELD else holds if expected is Cause.HELD else ():
        assert name in out.detail


def test_the_schedulers_words_follow_the_kits() -> None:
    out = waiting_outcome(EV, holds=("h0000002a",), gate_closed=True, detail="qstat state hqw")
    assert (out.state, out.cause) == (State.HELD, Cause.HELD)
    assert out.detail == "held by dispatch: h0000002a; qstat state hqw"
    with pytest.raises(ValueError, match="queued, no-capacity or unrunnable"):
        waiting_outcome(EV, queued=Cause.HELD)


@given(code=st.one_of(st.none(), st.integers(0, 255)), sig=st.one_of(st.none(), st.integers(0, 31)))
def test_success_only_for_exit_zero_without_a_signal(code: int | None, sig: int | None) -> None:
    out = end_outcome(EV, code, sig)
    assert (out.state is State.SUCCEEDED) == (code == 0 and not sig)
    assert out.cause is Cause.EXIT
    assert out.signal == (sig or None)
    launch = end_outcome(EV, code, sig, launch_failed=True)
    assert (launch.state, launch.cause) == (State.FAILED, Cause.LAUNCH_FAILED)
