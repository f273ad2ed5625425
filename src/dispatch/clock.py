"""Time as an injected dependency.

All times in dispatch are float seconds since the epoch, and all durations are float seconds. Nothing in the
core reads the wall clock directly: it asks a :class:`Clock`, so tests, the conformance suite and the simulator
drive every timed behaviour with a :class:`FakeClock`.
"""

from __future__ import annotations

import threading
import time
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


SYSTEM_CLOCK = SystemClock()
