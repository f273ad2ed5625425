"""The clocks a supervisor may run on: a skewed one (a fault) and its time carried onto the store's."""

from __future__ import annotations

from dispatch.clock import FakeClock, SkewedClock, StoreTime


def test_a_skewed_clock_reads_its_base_off_by_a_constant_and_sleeps_on_it() -> None:
    base = FakeClock(1000.0)
    skewed = SkewedClock(base, -120.0)
    assert skewed.now() == 880.0
    skewed.sleep(5.0)
    assert base.now() == 1005.0 and skewed.now() == 885.0


def test_store_time_drops_the_local_offset_and_is_never_behind_the_store() -> None:
    store = FakeClock(5000.0)
    local = SkewedClock(store, +120.0)  # this host's clock is two minutes ahead of the store's
    seen: list[float] = []

    def read_store() -> float:
        store.advance(0.25)  # the store answers a quarter of a second later (the round trip)
        seen.append(store.now())
        return store.now()

    t = StoreTime(local, read_store)
    assert t.sync() == seen[-1] == 5000.25
    assert t.offset == -120.0 + 0.25  # the store's minus the local reading taken before it
    assert t.now() >= store.now()  # never behind the store: a lease it expired is expired here
    assert t.now() - store.now() <= 0.25  # ahead by at most the round trip
    store.advance(10.0)
    assert store.now() <= t.now() <= store.now() + 0.25


def test_store_time_never_goes_back_when_a_later_round_trip_is_shorter() -> None:
    store = FakeClock(100.0)
    trips = iter([1.0, 0.0])

    def read_store() -> float:
        return store.advance(next(trips))

    t = StoreTime(store, read_store)
    t.sync()
    first = t.now()  # one second ahead
    t.sync()  # now exact
    assert t.now() == first
    store.advance(2.0)
    assert t.now() == store.now()
