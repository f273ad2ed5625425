"""The dashboard's output reads: served in rounds per cluster, each round one batched call, at a bounded cost.

A viewer following output asks for the bytes after those it has (an :class:`~dispatch.spi.OutputSlice`). Asks
are served in rounds, one cluster at a time: a round starts at most once every ``interval`` seconds, takes every
ask that arrived meanwhile (the same ask from two viewers is read once) and reads them all with one call (the
adapter's ``read_slices``: on Slurm one script, one round trip to the login node). A round takes at most
``per_round`` different asks; one more is refused with :class:`Busy` (the dashboard answers 429 and the viewer
asks again later). So however many viewers there are, the dashboard costs a cluster at most one read call per
``interval``, of at most ``per_round`` slices of at most ``limit`` bytes each.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from dispatch.errors import DispatchError, Unavailable
from dispatch.spi import OutputPiece, OutputSlice

INTERVAL = 1.0
"""Seconds between two rounds of reads on one cluster."""
PER_ROUND = 32
"""Different slices one round reads at most."""
WAIT = 120.0
"""How long an ask waits for its round's answer before it gives up (the round's own call has its timeouts)."""

ReadMany = Callable[[str, Sequence[OutputSlice]], Sequence[OutputPiece | DispatchError]]
"""Reads slices of one cluster's output in one call: ``read(cluster, slices)``, one answer per slice."""


class Busy(Exception):
    """This round of reads is full: ask again after ``retry_after`` seconds."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"too many output reads at once: ask again in {retry_after:.1f} s")
        self.retry_after = retry_after


@dataclass
class _Round:
    at: float
    slices: list[OutputSlice] = field(default_factory=list)
    index: dict[OutputSlice, int] = field(default_factory=dict)
    asks: int = 0
    """Asks waiting for this round, the same ask from two viewers counted twice."""
    done: threading.Event = field(default_factory=threading.Event)
    answers: Sequence[OutputPiece | DispatchError] = ()
    error: DispatchError | None = None


class Rounds:
    """Serves :meth:`read` from threads (the web server's pool): the first ask of a round waits until the
    round is due, reads for everyone, and hands each ask its answer."""

    def __init__(
        self,
        read: ReadMany,
        *,
        interval: float = INTERVAL,
        per_round: int = PER_ROUND,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._read = read
        self.interval = interval
        self.per_round = per_round
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._open: dict[str, _Round] = {}
        self._last: dict[str, float] = {}
        self.calls = 0
        """Read calls made so far (one per round)."""

    def read(self, cluster: str, ask: OutputSlice) -> OutputPiece:
        """The piece ``ask`` reads on ``cluster``, in the next round. Raises what reading it raised
        (DispatchError), or Busy when the round is full."""
        with self._lock:
            now = self._clock()
            r = self._open.get(cluster)
            lead = r is None
            if r is None:
                r = _Round(max(now, self._last.get(cluster, float("-inf")) + self.interval))
                self._open[cluster] = r
                self._last[cluster] = r.at
            i = r.index.get(ask)
            if i is None:
                if len(r.slices) >= self.per_round:
                    raise Busy(max(0.0, r.at - now) + self.interval)
                i = r.index[ask] = len(r.slices)
                r.slices.append(ask)
            r.asks += 1
        if lead:
            self._lead(cluster, r)
        elif not r.done.wait(WAIT):
            raise Unavailable(f"no answer from cluster {cluster} within {WAIT:.0f} s")
        if r.error is not None:
            raise r.error
        answer = r.answers[i]
        if isinstance(answer, DispatchError):
            raise answer
        return answer

    def waiting(self, cluster: str) -> int:
        """How many asks wait for the open round of ``cluster`` (0 when none is open)."""
        with self._lock:
            r = self._open.get(cluster)
            return 0 if r is None else r.asks

    def _lead(self, cluster: str, r: _Round) -> None:
        delay = r.at - self._clock()
        if delay > 0:
            self._sleep(delay)
        with self._lock:
            del self._open[cluster]  # closed: asks from now on go to the next round
            slices = list(r.slices)
        try:
            self.calls += 1
            answers = self._read(cluster, slices)
            if len(answers) != len(slices):
                raise Unavailable(f"cluster {cluster} answered {len(answers)} of {len(slices)} output reads")
            r.answers = answers
        except DispatchError as exc:
            r.error = exc
        except Exception as exc:  # a bug in a reader must not leave the other asks waiting: each gets it
            r.error = DispatchError(f"reading output failed: {type(exc).__name__}: {exc}")
            raise
        finally:
            r.done.set()
