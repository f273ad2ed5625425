"""Time as an injected dependency.

All times in dispatch are float seconds since the epoch, and all durations are float seconds. Nothing in the
core reads the wall clock directly: it asks a :class:`Clock`, so tests, the conformance suite and the simulator
drive every timed behaviour with a :class:`FakeClock`.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """A source of time. ``now`` never goes backwards."""

    def now(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The machine's clock."""

    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class FakeClock:
    """A clock that moves only when told to. ``sleep`` advances it at once (nothing waits)."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        """Move time forward by ``seconds`` (>= 0) and return the new time."""
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        with self._lock:
            self._now += seconds
            return self._now

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.advance(seconds)


class SkewedClock:
    """``base`` read ``offset`` seconds off: a machine whose clock is wrong by a constant (a fault the tests and
    the simulator inject; ``dispatch supervise --test-clock-offset``). Sleeping is ``base``'s."""

    def __init__(self, base: Clock, offset: float) -> None:
        self.base = base
        self.offset = float(offset)

    def now(self) -> float:
        return self.base.now() + self.offset

    def sleep(self, seconds: float) -> None:
        self.base.sleep(seconds)


class StoreTime:
    """``local`` (this process's clock) carried onto ``store``'s time line (the record store's clock, which
    judges leases): :meth:`sync` reads ``local`` and then ``store`` and keeps their difference, so
    :meth:`now` is ``local`` plus that difference.

    Contract: after a sync, ``now()`` is never behind the store's clock at the same instant (it may be ahead by
    up to the time the store took to answer, the read's round trip), provided the two clocks run at the same
    rate; whatever constant offset ``local`` has (minutes, hours) drops out. So a lease expiry the store wrote
    is never thought unexpired here after the store has passed it. ``now`` never goes backwards (a later sync
    with a shorter round trip does not move it back). Sleeping is ``local``'s.
    """

    def __init__(self, local: Clock, store: Callable[[], float]) -> None:
        self.local = local
        self.store = store
        self._offset: float | None = None
        self._last = -math.inf
        self._lock = threading.Lock()

    def sync(self) -> float:
        """Read both clocks (``local`` first) and keep their difference; returns the store's reading, a time the
        store has already passed (what a takeover may be judged by)."""
        before = self.local.now()
        at = self.store()
        with self._lock:
            self._offset = at - before
        return at

    @property
    def offset(self) -> float | None:
        """The store's clock minus the local one as last synced (None before the first sync)."""
        return self._offset

    def now(self) -> float:
        if self._offset is None:
            self.sync()
        with self._lock:
            assert self._offset is not None
            self._last = max(self._last, self.local.now() + self._offset)
            return self._last

    def sleep(self, seconds: float) -> None:
        self.local.sleep(seconds)


SYSTEM_CLOCK = SystemClock()
