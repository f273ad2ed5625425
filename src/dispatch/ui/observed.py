"""Running jobs' progress for the dashboard: read from the clusters at a bounded cost, shared by every viewer.

Records keep no progress (it changes every few seconds): the adapter reads it in the same batched call that
reads the jobs' state (``inspect_many``: on Slurm one script on the login node, for every job asked). A page
asks for the progress of the running jobs it shows; :class:`ProgressReads` answers from its last reading of
that cluster and reads again, for every job asked recently, at most once every ``interval`` seconds per
cluster. So however many viewers there are, the dashboard costs a cluster at most one ``inspect_many`` per
``interval``, of at most ``most`` jobs. A page that asks while another request reads is answered from the
previous reading (it never waits for someone else's read); a job not read yet shows nothing until the next
reading, which its page's next poll starts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from dispatch.errors import DispatchError
from dispatch.spi import JobEvidence, RankProgress, Unanswered

INTERVAL = 5.0
"""Seconds between two progress readings of one cluster (jobs write progress at most every 5 s by default)."""
MOST = 200
"""Jobs one reading asks for at most (the most recently asked first)."""
KEEP = 60.0
"""A job no page asked for in this many seconds is read no more."""

Inspect = Callable[[str, Sequence[str]], Mapping[str, JobEvidence | Unanswered]]
"""Reads jobs of one cluster in one batched call: ``inspect(cluster, scheduler_ids)``."""


@dataclass
class _Cluster:
    read_at: float = float("-inf")
    reading: bool = False
    asked: dict[str, float] = field(default_factory=dict)
    """Scheduler id -> when a page last asked for it."""
    known: dict[str, tuple[RankProgress, ...]] = field(default_factory=dict)
    """The last reading: scheduler id -> its current execution's progress (empty: it reported none)."""
    error: str | None = None
    """Why the last reading failed (None: it did not)."""


class ProgressReads:
    """Progress by scheduler id, per cluster, from readings at most ``interval`` seconds apart (thread-safe)."""

    def __init__(
        self,
        inspect: Inspect,
        *,
        interval: float = INTERVAL,
        most: int = MOST,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._inspect = inspect
        self.interval = interval
        self.most = most
        self._clock = clock
        self._lock = threading.Lock()
        self._clusters: dict[str, _Cluster] = {}
        self.calls = 0
        """Readings made so far (one ``inspect`` call each)."""

    def progress(self, cluster: str, scheduler_ids: Sequence[str]) -> dict[str, tuple[RankProgress, ...]]:
        """The progress of those of ``scheduler_ids`` whose current execution reported some, as last read. Reads
        the cluster first when its last reading is ``interval`` old and no other request is reading it; a
        failed reading leaves the previous answers in place (:meth:`error` says why)."""
        with self._lock:
            c = self._clusters.setdefault(cluster, _Cluster())
            now = self._clock()
            for sid in scheduler_ids:
                c.asked[sid] = now
            for sid in [s for s, at in c.asked.items() if now - at > KEEP]:
                del c.asked[sid]
                c.known.pop(sid, None)
            due = bool(scheduler_ids) and not c.reading and now - c.read_at >= self.interval
            if due:
                c.reading = True
                first = list(dict.fromkeys(scheduler_ids))
                rest = sorted((s for s in c.asked if s not in set(first)), key=lambda s: -c.asked[s])
                ids = (first + rest)[: self.most]
        if due:
            self._read(cluster, c, ids)
        with self._lock:
            return {sid: c.known[sid] for sid in scheduler_ids if c.known.get(sid)}

    def error(self, cluster: str) -> str | None:
        """Why the last progress reading of ``cluster`` failed; None when it did not (or none was made)."""
        with self._lock:
            c = self._clusters.get(cluster)
            return None if c is None else c.error

    def _read(self, cluster: str, c: _Cluster, ids: list[str]) -> None:
        found: Mapping[str, JobEvidence | Unanswered] | None = None
        error = None
        try:
            self.calls += 1
            found = self._inspect(cluster, ids)
        except DispatchError as exc:
            error = str(exc)
        finally:
            with self._lock:
                c.reading = False
                c.read_at = self._clock()
                c.error = error
                if found is not None:
                    for sid in ids:
                        c.known[sid] = _progress_of(found.get(sid))


def _progress_of(evidence: JobEvidence | Unanswered | None) -> tuple[RankProgress, ...]:
    if isinstance(evidence, JobEvidence) and evidence.current is not None:
        return tuple(evidence.current.progress)
    return ()
