"""Keeping rank 0's log of an execution that a deadline will end, before its pods go.

A TrainJob's ``activeDeadlineSeconds`` ends it on the cluster's own clock: its pods are deleted, each with its
grace period, and a pod goes (and its log with it) as soon as its containers have stopped, which for a program
that exits on SIGTERM is at once. No watch event comes early enough to read the log after the end and before
the pod goes. So the adapter reads it as it is written: from :data:`MARGIN` seconds before the deadline it
follows rank 0's log of the current execution (``follow=true``, which serves the log from its start and ends
when the container does), keeping its last :data:`CAP` bytes, and serves them once the pod is gone.

Erring early is harmless (the follow just runs longer); a follow that fails is dropped and started again while
the pod is there. Only a stream that ended on its own (the container ended) is kept. At most :data:`KEEP`
logs are held (the oldest go first); the supervisor archives each within a cycle of the end.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

LOG = logging.getLogger(__name__)

MARGIN = 15.0
"""Seconds before a TrainJob's deadline from which rank 0's log is followed."""
CAP = 1 << 20
"""The bytes of each log kept (its tail), as the supervisor's archive keeps by default."""
KEEP = 256
"""The most logs held at once."""


@dataclass(frozen=True)
class Due:
    """A log to follow: TrainJob ``scheduler_id``'s execution ``key`` (attempt, A, J), rank 0's pod ``pod``."""

    scheduler_id: str
    key: tuple[int, int, int]
    pod: str


def tail(chunks: Iterable[bytes], cap: int) -> bytes:
    """The last ``cap`` bytes of ``chunks`` (memory stays below about twice ``cap``)."""
    buf = bytearray()
    for chunk in chunks:
        buf += chunk
        if len(buf) > 2 * cap:
            del buf[: len(buf) - cap]
    return bytes(buf[-cap:]) if len(buf) > cap else bytes(buf)


class Keeper:
    """Follows the logs :meth:`follow` is given, one daemon thread each, and holds what they read."""

    def __init__(self, read: Callable[[str], Iterator[bytes]], cap: int = CAP, keep: int = KEEP) -> None:
        self._read = read
        self._cap = cap
        self._keep = keep
        self._lock = threading.Lock()
        self._kept: OrderedDict[tuple[str, tuple[int, int, int]], bytes] = OrderedDict()
        self._running: set[tuple[str, tuple[int, int, int]]] = set()

    def follow(self, due: Due) -> bool:
        """Start following ``due`` unless it is followed or kept already; True when a follow started."""
        ident = (due.scheduler_id, due.key)
        with self._lock:
            if ident in self._running or ident in self._kept:
                return False
            self._running.add(ident)
        threading.Thread(target=self._run, args=(due,), name=f"keep-log-{due.pod}", daemon=True).start()
        return True

    def _run(self, due: Due) -> None:
        ident = (due.scheduler_id, due.key)
        try:
            data = tail(self._read(due.pod), self._cap)
        except Exception as exc:  # dropped: started again while the pod is there
            LOG.debug("following the log of %s failed: %s", due.pod, exc)
            data = None
        with self._lock:
            self._running.discard(ident)
            if data is not None:
                self._kept[ident] = data
                while len(self._kept) > self._keep:
                    self._kept.popitem(last=False)

    def kept(self, scheduler_id: str, key: tuple[int, int, int]) -> bytes | None:
        """The log followed to its end for that execution, or None."""
        with self._lock:
            return self._kept.get((scheduler_id, key))

    def following(self) -> int:
        """How many follows run now."""
        with self._lock:
            return len(self._running)
