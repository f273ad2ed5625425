"""Container logs: lines appended by the test (through the control surface), read by pods/log.

A container's log ends (a follow stream closes) when the test marks it finished, when the pod
reaches a terminal phase (Succeeded/Failed), or when the pod is removed (a Terminating pod keeps its log
until then). Lines are timestamped
with the injected clock at append time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .clock import format_time
from .store import Store

LogKey = tuple[str, str, str]  # namespace, pod, container


@dataclass
class ContainerLog:
    lines: list[tuple[str, str]] = field(default_factory=list)  # (timestamp, text)
    finished: bool = False


class LogBook:
    """Per-container log buffers, sharing the store's lock and change condition."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._logs: dict[LogKey, ContainerLog] = {}

    def append(self, namespace: str, pod: str, container: str, *lines: str) -> None:
        with self._store.lock:
            log = self._logs.setdefault((namespace, pod, container), ContainerLog())
            # pods/log timestamps are RFC 3339 with nanoseconds
            stamp = format_time(self._store.clock.now()).replace("Z", ".000000000Z")
            for text in lines:
                for piece in text.splitlines() or [""]:
                    log.lines.append((stamp, piece))
            self._store.changed.notify_all()

    def finish(self, namespace: str, pod: str, container: str) -> None:
        with self._store.lock:
            self._logs.setdefault((namespace, pod, container), ContainerLog()).finished = True
            self._store.changed.notify_all()

    def read(self, namespace: str, pod: str, container: str, start: int = 0) -> tuple[list[tuple[str, str]], bool]:
        """Lines from index ``start`` and whether the container's log is finished."""
        with self._store.lock:
            log = self._logs.get((namespace, pod, container))
            if log is None:
                return [], False
            return list(log.lines[start:]), log.finished

    def drop_pod(self, namespace: str, pod: str) -> None:
        with self._store.lock:
            for key in [k for k in self._logs if k[:2] == (namespace, pod)]:
                del self._logs[key]
