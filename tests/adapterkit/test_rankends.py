"""Combining ranks' ends: the first failure in time wins, success only when every rank exited 0."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dispatch.adapterkit.outcomes import ranks_outcome
from dispatch.adapterkit.rankends import RankEnd, RanksEnd, combine, first_failure
from dispatch.outcome import Cause, Evidence, State

EV = Evidence("test", 0.0)


@st.composite
def rank_end(draw: st.DrawFn, rank: int) -> RankEnd:
    at = draw(st.floats(min_value=0, max_value=100, allow_nan=False))
    kind = draw(st.sampled_from(["ok", "exit", "signal", "launch"]))
    if kind == "ok":
        return RankEnd(rank, at, exit_code=0)
    if kind == "exit":
        return RankEnd(rank, at, exit_code=draw(st.integers(1, 255)))
    if kind == "signal":
        sig = draw(st.integers(1, 31))
        return RankEnd(rank, at, exit_code=draw(st.sampled_from([None, 128 + sig])), signal=sig)
    return RankEnd(rank, at, exit_code=draw(st.sampled_from([None, 127])), launch_error="no such program")


@st.composite
def world(draw: st.DrawFn) -> tuple[int, list[RankEnd]]:
    """A world size and the ends of some of its ranks (each at most once), in any order."""
    size = draw(st.integers(1, 8))
    ranks = draw(st.lists(st.integers(0, size - 1), unique=True, max_size=size))
    return size, [draw(rank_end(r)) for r in ranks]


@given(world())
def test_the_first_failure_in_time_decides_whatever_the_order(case: tuple[int, list[RankEnd]]) -> None:
    size, ends = case
    verdict = combine(ends, size)
    failures = [e for e in ends if e.failed]
    if not failures:
        return
    first = min(failures, key=lambda e: (e.ended_at, e.rank))
    assert verdict is not None and verdict.state == "failed"
    assert (verdict.rank, verdict.exit_code) == (first.rank, first.exit_code)
    assert verdict.signal == (first.signal or None)
    assert verdict.cause == ("not-launchable" if first.launch_error is not None else "exit")
    assert combine(list(reversed(ends)), size) == verdict  # the order the adapter saw them in does not matter
    assert first_failure(ends) == first


@given(world())
def test_success_only_when_every_rank_exited_zero(case: tuple[int, list[RankEnd]]) -> None:
    size, ends = case
    verdict = combine(ends, size)
    every_rank_zero = len(ends) == size and all(e.exit_code == 0 and not e.signal for e in ends)
    assert (verdict is not None and verdict.state == "succeeded") == every_rank_zero
    if verdict is None:  # not ended: no failure yet, and a rank has not reported
        assert len(ends) < size and not any(e.failed for e in ends)


@given(world())
def test_the_outcome_is_a_valid_one_with_the_verdicts_cause(case: tuple[int, list[RankEnd]]) -> None:
    size, ends = case
    verdict = combine(ends, size)
    if verdict is None:
        return
    out = ranks_outcome(verdict, EV)
    assert (out.state.value, out.cause and out.cause.value) == (verdict.state, verdict.cause)
    assert out.state is not State.SUCCEEDED or (out.exit_code == 0 and out.signal is None)


def test_a_signal_is_told_apart_from_an_exit_and_a_launch_failure() -> None:
    killed = combine([RankEnd(0, 1.0, exit_code=0), RankEnd(1, 2.0, signal=9)], 2)
    assert killed == RanksEnd("failed", "exit", None, 9, 1, "rank 1 was killed by SIGKILL")
    launch = combine([RankEnd(1, 1.0, exit_code=127, launch_error="cannot start 'x'")], 2)
    assert launch is not None and (launch.cause, launch.rank) == ("not-launchable", 1)
    assert ranks_outcome(launch, EV).cause is Cause.NOT_LAUNCHABLE
    exited = combine([RankEnd(0, 3.0, exit_code=3), RankEnd(1, 2.0, exit_code=143, signal=15)], 2)
    assert exited is not None and exited.rank == 1 and exited.detail == "rank 1 was killed by SIGTERM"


def test_the_ranks_ended_after_the_first_failure_are_its_consequences() -> None:
    # rank 2 exits 7 first; the adapter then ends ranks 0 and 1 (SIGTERM): rank 2's code is the execution's
    ends = [RankEnd(0, 5.1, signal=15), RankEnd(2, 5.0, exit_code=7), RankEnd(1, 5.1, signal=15)]
    verdict = combine(ends, 3)
    assert verdict is not None and (verdict.rank, verdict.exit_code, verdict.signal) == (2, 7, None)
    assert ranks_outcome(verdict, EV).exit_code == 7


def test_bookkeeping_errors_are_refused() -> None:
    with pytest.raises(ValueError, match="not in a world of 2"):
        combine([RankEnd(2, 0.0, exit_code=0)], 2)
    with pytest.raises(ValueError, match="ended twice"):
        combine([RankEnd(0, 0.0, exit_code=0), RankEnd(0, 1.0, exit_code=1)], 2)
    with pytest.raises(ValueError, match="neither"):
        RankEnd(0, 0.0)
    with pytest.raises(ValueError, match="at least one rank"):
        combine([], 0)
