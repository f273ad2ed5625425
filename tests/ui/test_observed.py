"""Progress readings for the dashboard (:class:`dispatch.ui.observed.ProgressReads`): one batched read per cluster
per interval whatever the number of viewers, never a wait on another viewer's read, a failed read keeps the
last answers. Driven by a counting reader and a hand-moved clock: nothing here depends on the machine's speed."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

import pytest

from dispatch.errors import Unavailable
from dispatch.outcome import Evidence, Outcome, State
from dispatch.spi import ExecutionEvidence, Gate, JobEvidence, RankProgress, Unanswered
from dispatch.ui.observed import KEEP, ProgressReads


class Cluster:
    """A reader that answers every id with one rank at ``step`` and records each call's ids."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.step = 10
        self.fail: Exception | None = None

    def __call__(self, cluster: str, ids: Sequence[str]) -> Mapping[str, JobEvidence | Unanswered]:
        self.calls.append(list(ids))
        if self.fail is not None:
            raise self.fail
        return {sid: evidence(sid, self.step) for sid in ids if sid != "silent"}


def evidence(sid: str, step: int) -> JobEvidence:
    running = Outcome(State.RUNNING, None, Evidence("test", 0.0))
    ex = ExecutionEvidence(f"{sid}.0", 0, running, progress=(RankProgress(0, step, 100.0, total=1000),))
    return JobEvidence(sid, None, running, Gate.OPEN, executions=(ex,))


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_many_viewers_within_an_interval_cost_one_read() -> None:
    read, clock = Cluster(), Clock()
    reads = ProgressReads(read, interval=5.0, clock=clock)
    first = reads.progress("c", ["1", "2"])
    assert first["1"][0].step == 10 and set(first) == {"1", "2"}
    for _ in range(50):  # fifty page polls, from any number of viewers, within the interval
        clock.t += 0.09
        assert reads.progress("c", ["1", "2"])["2"][0].step == 10
    assert read.calls == [["1", "2"]] and reads.calls == 1
    # a job first asked for meanwhile shows nothing until the next reading, which reads it with the others
    assert reads.progress("c", ["3"]) == {}
    clock.t += 1.0
    read.step = 20
    got = reads.progress("c", ["3"])
    assert got["3"][0].step == 20 and read.calls[-1][0] == "3" and set(read.calls[-1]) == {"1", "2", "3"}
    assert reads.progress("c", ["1"])["1"][0].step == 20
    # another cluster has its own interval
    assert reads.progress("d", ["1"])["1"][0].step == 20 and len(read.calls) == 3


def test_a_job_that_reported_nothing_or_that_no_page_asks_for_any_more() -> None:
    read, clock = Cluster(), Clock()
    reads = ProgressReads(read, interval=5.0, clock=clock)
    assert reads.progress("c", ["silent", "1"]).keys() == {"1"}
    clock.t += KEEP + 1  # no page asked for "silent" or "1" since: they are read no more
    reads.progress("c", ["2"])
    assert read.calls[-1] == ["2"]
    assert reads.progress("c", []) == {}  # nothing asked: nothing read
    assert len(read.calls) == 2


def test_a_reading_is_capped_at_the_most_recently_asked() -> None:
    read, clock = Cluster(), Clock()
    reads = ProgressReads(read, interval=5.0, most=3, clock=clock)
    for sid in ["a", "b", "c", "d"]:
        clock.t += 10
        reads.progress("c", [sid])
    clock.t += 10
    reads.progress("c", ["e"])
    assert read.calls[-1] == ["e", "d", "c"]


def test_a_failed_reading_keeps_the_last_answers_and_says_why() -> None:
    read, clock = Cluster(), Clock()
    reads = ProgressReads(read, interval=5.0, clock=clock)
    assert reads.progress("c", ["1"])["1"][0].step == 10 and reads.error("c") is None
    clock.t += 5
    read.fail = Unavailable("login node unreachable")
    assert reads.progress("c", ["1"])["1"][0].step == 10
    assert reads.error("c") == "login node unreachable"
    assert reads.progress("c", ["1"]) and len(read.calls) == 2  # not tried again before the interval
    clock.t += 5
    read.fail = None
    reads.progress("c", ["1"])
    assert reads.error("c") is None and len(read.calls) == 3


def test_a_bug_in_the_reader_is_raised_and_the_next_reading_still_happens() -> None:
    read, clock = Cluster(), Clock()
    reads = ProgressReads(read, interval=5.0, clock=clock)
    read.fail = RuntimeError("a bug")
    with pytest.raises(RuntimeError):
        reads.progress("c", ["1"])
    clock.t += 5
    read.fail = None
    assert reads.progress("c", ["1"])["1"][0].step == 10


def test_a_viewer_never_waits_for_another_viewer_s_reading() -> None:
    entered, release = threading.Event(), threading.Event()
    clock = Clock()
    calls: list[list[str]] = []

    def slow(cluster: str, ids: Sequence[str]) -> Mapping[str, JobEvidence | Unanswered]:
        calls.append(list(ids))
        entered.set()
        assert release.wait(120), "the test never released the reading"
        return {sid: evidence(sid, 7) for sid in ids}

    reads = ProgressReads(slow, interval=5.0, clock=clock)
    answers: list[object] = []
    first = threading.Thread(target=lambda: answers.append(reads.progress("c", ["1"])))
    first.start()
    try:
        assert entered.wait(120), "the first reading did not start"
        clock.t += 60  # even past the interval: one reading at a time per cluster
        assert reads.progress("c", ["1"]) == {}  # answered at once from the (empty) last reading
    finally:
        release.set()
        first.join(120)
    assert answers == [{"1": (RankProgress(0, 7, 100.0, total=1000),)}] and len(calls) == 1
