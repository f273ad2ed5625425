"""The unknown clock counts readings: a gap nobody read restarts it, continuous reading never does."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from dispatch.outcome import Cause, Evidence, Outcome, State
from dispatch.records.model import GateState, JobRecord, Submission
from dispatch.spec import JobSpec
from dispatch.spi import ExecutionEvidence, Gate, JobEvidence, Unanswered
from dispatch.supervise import fold
from dispatch.supervise.unknown_clock import reading_bound

T0 = 1_800_000_000.0
GRACE = 60.0
"""The backend's NodeLossWindow, as the supervisor passes it to the fold; with a 10 s poll it is also the
reading bound (:func:`~dispatch.supervise.unknown_clock.reading_bound`)."""


def job() -> JobRecord:
    return JobRecord(
        id="j1",
        cluster="memory",
        spec=JobSpec(command=("true",)),
        created_at=T0,
        submissions=[Submission(1, "dsp-j1-1", T0, scheduler_id="101", gate=GateState.OPEN)],
    )


def reading(at: float, state: State = State.RUNNING) -> JobEvidence:
    out = Outcome(state, Cause.UNKNOWN if state is State.UNKNOWN else None, Evidence("memory:queue", at))
    return JobEvidence("101", "dsp-j1-1", out, Gate.OPEN, executions=(ExecutionEvidence("1.101.0", 0, out, T0),))


def unanswered(at: float) -> Unanswered:
    return Unanswered("101", "accounting lag", at)


def read(rec: JobRecord, ev: JobEvidence | Unanswered, *, grace: float = GRACE, gap: float = GRACE) -> JobRecord:
    """``rec`` with a reading folded in as the supervisor folds it (the reading's time is its own)."""
    at = ev.observed_at if isinstance(ev, Unanswered) else ev.outcome.evidence.observed_at
    new, _ = fold(rec, ev, at, observed_at=at, unanswered_grace=grace, reading_gap=gap)
    return new


def running_job() -> JobRecord:
    return read(job(), reading(T0 + 5))


def test_an_unanswered_reading_after_a_gap_nobody_read_restarts_the_clock() -> None:
    """A status read finds the object unanswered; every supervisor is down while it answers again; the first
    reading after the gap finds it unanswered again, for a moment. That is not one long unanswered spell: the
    clock starts again at the later reading, and the last evidence stays."""
    first = read(running_job(), unanswered(T0 + 10))
    after, events = fold(first, unanswered(T0 + 112), T0 + 112, unanswered_grace=GRACE, reading_gap=GRACE)
    sub = after.current
    assert sub is not None and sub.outcome is not None
    assert sub.unknown_since == T0 + 112
    assert sub.outcome.state is State.RUNNING and sub.outcome.evidence.observed_at == T0 + 5
    assert [e.kind for e in events] == ["unanswered"]


def test_unknown_evidence_after_a_gap_nobody_read_restarts_the_clock() -> None:
    first = read(running_job(), reading(T0 + 10, State.UNKNOWN))
    assert first.current is not None and first.current.unknown_since == T0 + 10
    after = read(first, reading(T0 + 112, State.UNKNOWN))
    sub = after.current
    assert sub is not None and sub.outcome is not None
    assert sub.outcome.state is State.UNKNOWN and sub.unknown_since == T0 + 112


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=0.5, max_value=GRACE / 2), min_size=1, max_size=40), st.booleans())
def test_readings_at_most_half_the_window_apart_never_restart_the_clock(gaps: list[float], answerless: bool) -> None:
    """However irregular, readings no further apart than half the NodeLossWindow keep the clock where it
    started, so that an unknown that lasts is an ending no later than the window after it began."""
    at = T0 + 10
    rec = read(running_job(), unanswered(at) if answerless else reading(at, State.UNKNOWN))
    for gap in gaps:
        at += gap
        rec = read(rec, unanswered(at) if answerless else reading(at, State.UNKNOWN))
        sub = rec.current
        assert sub is not None and sub.unknown_since == T0 + 10
        assert sub.outcome is not None
        assert (sub.outcome.state is State.UNKNOWN) == (not answerless or at - (T0 + 10) >= GRACE)


def test_a_known_reading_stops_the_clock_and_forgets_its_last_reading() -> None:
    first = read(running_job(), unanswered(T0 + 10))
    back = read(first, reading(T0 + 20))
    sub = back.current
    assert sub is not None and sub.unknown_since is None and sub.unknown_seen_at is None


def test_the_last_unknown_reading_survives_the_store() -> None:
    first = read(running_job(), unanswered(T0 + 10))
    again = JobRecord.from_json(first.to_json())
    assert again.current is not None and again.current.unknown_seen_at == T0 + 10


def test_a_record_written_before_the_last_reading_was_kept_counts_from_the_clock_start() -> None:
    """A record from before ``unknownSeenAt`` existed: its clock start is the only reading it knows of."""
    first = read(running_job(), unanswered(T0 + 10))
    doc = first.to_json()
    del doc["submissions"][0]["unknownSeenAt"]
    old = JobRecord.from_json(doc)
    kept = read(old, unanswered(T0 + 65))
    assert kept.current is not None and kept.current.unknown_since == T0 + 10
    late = read(old, unanswered(T0 + 75))
    assert late.current is not None and late.current.unknown_since == T0 + 75


def test_a_window_shorter_than_the_poll_still_ends_an_unknown() -> None:
    """The local adapter's NodeLossWindow is 1 s and its supervisor polls every 30 s: the reading bound spans
    polls, so consecutive readings are continuous and the unknown ends at the second."""
    gap = reading_bound(1.0, 30.0)
    assert gap == 120.0
    rec = read(running_job(), unanswered(T0 + 10), grace=1.0, gap=gap)
    for k in range(1, 4):
        rec = read(rec, unanswered(T0 + 10 + 30 * k), grace=1.0, gap=gap)
        sub = rec.current
        assert sub is not None and sub.outcome is not None
        assert sub.unknown_since == T0 + 10 and sub.outcome.state is State.UNKNOWN


def test_a_read_command_without_a_bound_starts_the_clock_and_never_restarts_it() -> None:
    first = read(running_job(), unanswered(T0 + 10), gap=0.0)
    assert first.current is not None and first.current.unknown_seen_at == T0 + 10
    after = read(first, unanswered(T0 + 500), gap=0.0)
    assert after.current is not None and after.current.unknown_since == T0 + 10


def test_an_unbounded_window_has_no_reading_bound() -> None:
    assert reading_bound(math.inf, 10.0) == 0.0
    assert reading_bound(60.0, 10.0) == 60.0
