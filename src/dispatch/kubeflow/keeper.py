"""Keeping rank 0's log of an execution that a deadline will end, from the moment its container runs.

At ``activeDeadlineSeconds`` the Trainer deletes the TrainJob's JobSet, and with it every pod: each gets SIGTERM
and goes, with its log, as soon as its containers have stopped. For a program that exits on SIGTERM that is
before any watch event could tell a reader to copy the log, so no read that starts after the end can be sure to
find it. A read that is already open when the end comes can: ``follow=true`` serves the log from its start and
then what is written, and ends when the container does.

So while a supervisor archives the backend's output (:meth:`~dispatch.kubeflow.backend.KubeflowBackend.keep_output`),
the adapter follows rank 0's log of each execution of a TrainJob with a deadline as soon as the watch shows its
container started, and keeps what it read (the last :data:`CAP` bytes):

* a follow that ends while the pod is ending or gone (its container ended, or the pod's deletion cut the stream)
  is **done**: nothing more can be written, and what it read is the whole log (up to the cut);
* a follow that ends or breaks while the pod still runs (a proxy closed it, a network error) is opened again,
  which reads from the start again; what the earlier one read is kept until the new one has read as much;
* the pod gone before any follow could open (a deadline shorter than the time from the container's start to
  the watch showing it and the request reaching the API server) leaves nothing: that log is lost, as before.

``execution_output`` serves a done log first, waits a moment for a follow whose pod is ending, and serves what a
follow read when the pod has gone. At most :data:`KEEP` logs are held (the oldest done ones go first) and at
most :data:`FOLLOWS` follows run at once.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from dispatch.errors import NotFound

LOG = logging.getLogger(__name__)

CAP = 1 << 20
"""The bytes of each log kept (its tail), as the supervisor's archive keeps by default."""
KEEP = 256
"""The most logs held at once (running follows and done ones)."""
FOLLOWS = 128
"""The most follows running at once; past it, rank 0's log is read by the archive as before (it may be gone)."""
RETRY = (0.2, 5.0)
"""The first and the longest pause before a follow that ended while its pod runs is opened again."""

Key = tuple[str, tuple[int, int, int]]
"""A TrainJob's name and its execution's (attempt, A, J)."""


class PodState(StrEnum):
    """What the watch shows of a followed pod."""

    RUNNING = "running"
    ENDING = "ending"
    """Deleted (Terminating) or its container terminated: nothing more will be written."""
    GONE = "gone"
    """Deleted, or replaced by a pod of the same name with another uid."""


@dataclass
class Followed:
    """One followed log. ``data`` is the tail of the longest read so far (``size`` bytes in all)."""

    pod: str
    uid: str
    data: bytes = b""
    size: int = 0
    done: bool = False
    how: str = "being followed"
    reading: bytearray = field(default_factory=bytearray, repr=False)
    """The tail of the read running now (the keeper's own bookkeeping)."""
    reading_size: int = 0


class LogKeeper:
    """Follows the logs :meth:`follow` is given, one daemon thread each, and holds what they read.

    ``read(pod)`` follows the pod's log (raises :class:`~dispatch.errors.NotFound` once the pod is gone);
    ``state(pod, uid)`` says what the watch shows of it now."""

    def __init__(
        self,
        read: Callable[[str], Iterable[bytes]],
        state: Callable[[str, str], PodState],
        *,
        cap: int = CAP,
        keep: int = KEEP,
        follows: int = FOLLOWS,
    ) -> None:
        self._read = read
        self._state = state
        self._cap = cap
        self._keep = keep
        self._follows = follows
        self._lock = threading.Condition()
        self._logs: OrderedDict[Key, Followed] = OrderedDict()
        self._closed = threading.Event()

    def follow(self, key: Key, pod: str, uid: str) -> bool:
        """Start following ``pod`` (uid ``uid``) as the log of ``key``, unless that log is followed or kept
        already; True when a follow started."""
        with self._lock:
            if self._closed.is_set() or key in self._logs or self.following() >= self._follows:
                return False
            rec = self._logs[key] = Followed(pod, uid)
            self._evict()
        name = f"dispatch-kubeflow-keep-{pod}"[:60]
        threading.Thread(target=self._run, args=(rec,), name=name, daemon=True).start()
        return True

    def _evict(self) -> None:
        while len(self._logs) > self._keep:
            done = next((k for k, r in self._logs.items() if r.done), None)
            if done is None:
                return
            del self._logs[done]

    def following(self) -> int:
        """How many follows run now."""
        with self._lock:
            return sum(1 for r in self._logs.values() if not r.done)

    def kept(self, key: Key, wait: float = 0.0) -> Followed | None:
        """A copy of the log of ``key`` (None when it was never followed); a follow still running is waited for
        up to ``wait`` seconds (its stream ends a moment after the container does)."""
        with self._lock:
            self._lock.wait_for(lambda: key not in self._logs or self._logs[key].done, wait)
            rec = self._logs.get(key)
            if rec is None:
                return None
            data, size = self._longest(rec)
            return Followed(rec.pod, rec.uid, data, size, rec.done, rec.how)

    def close(self) -> None:
        """Stop: no follow starts again (one blocked reading ends with its stream)."""
        self._closed.set()
        with self._lock:
            self._lock.notify_all()

    # ---- one follow ------------------------------------------------------------------------------------------

    def _run(self, rec: Followed) -> None:
        pause = RETRY[0]
        while not self._closed.is_set():
            cut = ""
            try:
                for chunk in self._read(rec.pod):
                    self._took(rec, chunk)
                    if self._closed.is_set():
                        return
            except NotFound:
                cut = "gone"
            except Exception as exc:  # a broken stream: its pod's state says whether to open it again
                cut = f"{type(exc).__name__}: {exc}"
                LOG.debug("following the log of pod %s broke: %s", rec.pod, exc)
            state = PodState.GONE if cut == "gone" else self._state(rec.pod, rec.uid)
            with self._lock:
                rec.data, rec.size = self._longest(rec)
                rec.reading, rec.reading_size = bytearray(), 0
                if state is not PodState.RUNNING:
                    rec.done = True
                    rec.how = "followed to its container's end" if not cut else "followed until its pod went"
                    self._lock.notify_all()
                    return
            self._closed.wait(pause)
            pause = min(RETRY[1], pause * 2)

    def _took(self, rec: Followed, chunk: bytes) -> None:
        with self._lock:
            rec.reading += chunk
            rec.reading_size += len(chunk)
            if len(rec.reading) > 2 * self._cap:
                del rec.reading[: len(rec.reading) - self._cap]

    def _longest(self, rec: Followed) -> tuple[bytes, int]:
        """The tail and size of the longest read of ``rec``: the one running now once it has read as much as
        the longest before it (the log only grows: it then holds all that one held)."""
        if rec.reading_size >= rec.size and rec.reading_size > 0:
            buf = rec.reading
            return (bytes(buf[-self._cap :]) if len(buf) > self._cap else bytes(buf)), rec.reading_size
        return rec.data, rec.size
