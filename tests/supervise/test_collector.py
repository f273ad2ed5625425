"""The supervisor service's garbage-collector policy (dispatch.supervise.collector)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from dispatch.supervise.collector import Collector


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()
    gc.enable()


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle_garbage() -> weakref.ref[_Node]:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_after_a_cycle_the_survivors_are_frozen_and_young_cyclic_garbage_is_gone() -> None:
    col = Collector(full_every=10)
    col.start()
    kept = [_Node() for _ in range(100)]
    garbage = _cycle_garbage()
    col.after_cycle()
    assert garbage() is None
    assert gc.get_freeze_count() >= len(kept)


def test_cyclic_garbage_frozen_by_a_cycle_is_reclaimed_by_the_periodic_full_collection() -> None:
    col = Collector(full_every=3)
    col.start()
    holder = [_Node()]
    holder[0].other = _Node()
    holder[0].other.other = holder[0]
    ref = weakref.ref(holder[0])
    col.after_cycle()  # frozen while still referenced
    holder.clear()  # now cyclic garbage inside the frozen generation
    col.after_cycle()
    assert ref() is not None  # a young collection does not look at frozen objects
    col.after_cycle()  # the third cycle: unfreeze and collect everything
    assert ref() is None and col.cycles == 3


def test_nothing_is_collected_during_a_cycle_and_stop_gives_the_collector_back() -> None:
    col = Collector(full_every=10)
    col.start()
    assert not gc.isenabled()
    garbage = [_cycle_garbage() for _ in range(5000)]  # far past the young generation's threshold
    assert all(ref() is not None for ref in garbage)  # still there: no automatic collection mid-cycle
    col.after_cycle()
    assert all(ref() is None for ref in garbage)
    col.stop()
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_stop_leaves_a_collector_that_was_off_off() -> None:
    gc.disable()
    col = Collector()
    col.start()
    col.stop()
    assert not gc.isenabled()


def test_a_period_below_one_cycle_is_refused() -> None:
    with pytest.raises(ValueError, match="full_every"):
        Collector(full_every=0)


def test_serve_runs_the_policy_and_leaves_the_process_unfrozen() -> None:
    import io

    from dispatch.supervise.service import Emitter, serve

    class Sup:
        poll = 0.0
        frozen: list[int] = []

        def cycle(self) -> object:
            Sup.frozen.append(gc.get_freeze_count())

            class Report:
                def to_json(self) -> dict[str, int]:
                    return {}

            return Report()

    col = Collector(full_every=100)
    assert serve(Sup(), Emitter(io.StringIO(), "t"), once=True, collector=col) == 0
    assert col.cycles == 1 and Sup.frozen[0] > 0  # start() froze start-up before the first cycle
    assert gc.get_freeze_count() == 0 and gc.isenabled()
