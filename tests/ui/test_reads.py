"""The dashboard's output reads in rounds: one call per round for every viewer, the same ask read once, a full
round refused with Busy, errors handed to every ask of the round."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import pytest

from dispatch.errors import DispatchError, NotFound, Unavailable
from dispatch.spi import OutputPiece, OutputSlice
from dispatch.ui.reads import Busy, Rounds


class Reader:
    """Answers every slice with its own description; records each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[OutputSlice]]] = []
        self.fail: DispatchError | None = None

    def __call__(self, cluster: str, slices: Sequence[OutputSlice]) -> list[OutputPiece | DispatchError]:
        self.calls.append((cluster, list(slices)))
        if self.fail is not None:
            raise self.fail
        return [
            NotFound("gone") if s.scheduler_id == "gone" else OutputPiece(s.scheduler_id.encode(), s.offset, 99)
            for s in slices
        ]


class Held:
    """A clock that stands still and a sleep that waits until the test lets the round go: the rounds' timing is
    the test's, not the machine's (a loaded machine cannot make an ask miss its round)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.go = threading.Event()
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        assert self.go.wait(120), "the test never let the round go"
        self.now += seconds


def until(what: str, check: Callable[[], bool]) -> None:
    """Wait for ``check()`` (a state another thread reaches), up to a generous bound."""
    deadline = time.monotonic() + 120
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within 120 s"
        time.sleep(0.01)


def test_every_viewer_of_a_round_is_served_by_one_call() -> None:
    reader, held = Reader(), Held()
    rounds = Rounds(reader, interval=0.5, clock=held.clock, sleep=held.sleep)
    assert rounds.read("c", OutputSlice("first")).data == b"first"  # the first round starts at once
    asks = [OutputSlice("a", offset=10), OutputSlice("b"), OutputSlice("a", offset=10), OutputSlice("gone")]
    got: dict[int, object] = {}

    def view(k: int) -> None:
        try:
            got[k] = rounds.read("c", asks[k])
        except DispatchError as exc:
            got[k] = exc

    threads = [threading.Thread(target=view, args=(k,)) for k in range(len(asks))]
    for t in threads:
        t.start()
    until("the four asks wait for the round", lambda: rounds.waiting("c") == len(asks))
    held.go.set()
    for t in threads:
        t.join(120)
    assert len(reader.calls) == 2 and rounds.calls == 2 and held.slept == [0.5]  # the four asks: one round
    assert sorted(map(repr, reader.calls[1][1])) == sorted(map(repr, [asks[0], asks[1], asks[3]]))  # read once
    assert got[0] == got[2] == OutputPiece(b"a", 10, 99) and got[1] == OutputPiece(b"b", 0, 99)
    assert isinstance(got[3], NotFound)


def test_rounds_are_an_interval_apart_per_cluster() -> None:
    now = [100.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    rounds = Rounds(Reader(), interval=1.0, clock=lambda: now[0], sleep=sleep)
    rounds.read("c", OutputSlice("x"))
    now[0] += 0.25
    rounds.read("c", OutputSlice("x", offset=1))
    rounds.read("d", OutputSlice("x"))  # another cluster has its own rounds
    assert slept == [0.75]


def test_a_full_round_says_busy_and_an_error_reaches_every_ask() -> None:
    reader, held = Reader(), Held()
    rounds = Rounds(reader, interval=0.3, per_round=1, clock=held.clock, sleep=held.sleep)
    rounds.read("c", OutputSlice("warm"))
    first = threading.Thread(target=rounds.read, args=("c", OutputSlice("one")))
    first.start()
    until("the first ask holds the round's one place", lambda: rounds.waiting("c") == 1)
    with pytest.raises(Busy) as busy:
        rounds.read("c", OutputSlice("two"))
    assert busy.value.retry_after == pytest.approx(0.6)  # the round is due in 0.3 s, the next 0.3 s after it
    held.go.set()
    first.join(120)
    assert [c[1] for c in reader.calls] == [[OutputSlice("warm")], [OutputSlice("one")]]
    reader.fail = Unavailable("the login node did not answer")
    with pytest.raises(Unavailable):
        rounds.read("c", OutputSlice("three"))
