"""An injectable clock: every timestamp the fake server and its reactors write comes from one.

Tests advance it explicitly; nothing in the kit reads wall time for object state (only the HTTP
layer uses real time for watch timeouts and bookmark intervals, which are about connections).
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)


class FakeClock:
    """A thread-safe, manually advanced UTC clock.

    ``now()`` never moves unless ``advance()`` or ``set()`` is called.
    """

    def __init__(self, start: datetime = DEFAULT_START) -> None:
        if start.tzinfo is None:
            raise ValueError("start must be timezone-aware")
        self._now = start.astimezone(UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> datetime:
        """Move time forward by ``seconds`` (must be >= 0) and return the new time."""
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        with self._lock:
            self._now += timedelta(seconds=seconds)
            return self._now

    def set(self, when: datetime) -> None:
        """Jump to ``when``; it must not be earlier than the current time."""
        with self._lock:
            if when.astimezone(UTC) < self._now:
                raise ValueError("the clock only moves forward")
            self._now = when.astimezone(UTC)

    def rfc3339(self) -> str:
        """The current time as Kubernetes writes ``metav1.Time`` (second precision, ``Z``)."""
        return format_time(self.now())


def format_time(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
