"""The supervisor's output archive: rank 0's log of each execution it sees end, copied into the records.

On a backend whose output goes with the execution (it implements :class:`~dispatch.spi.ExecutionOutput`:
Kubeflow, where a pod's log goes with the pod), the supervisor copies rank 0's stdout of every execution it sees
end into the record store's archive (:mod:`dispatch.records.archive`), in the same cycle as the fold that
recorded the end and before any step of that job, so before the resubmit, hold, readmission or stop that lets
the execution's pods go. The contract:

* **Bounded in size**: at most ``max_bytes`` are kept, the log's tail; the entry records the log's full size
  and that it was truncated.
* **Bounded in time**: one read waits at most the backend's CallBound (10 s for a backend that declares none),
  and the archive work of one cycle at most that long in all. A read that does not finish in time, or fails, is
  recorded as ``failed`` with the reason (and retried in later cycles, at most :data:`MAX_ATTEMPTS` times in
  all); executions left over when the cycle's time is spent are read in the next cycle. The job's own steps
  are never held back longer than that bound, and an archive failure never touches the job's record. Reads run
  on one worker thread per archiver: a read that overruns keeps it until the read ends on its own (the
  backend's request timeout), and meanwhile later reads wait for it within the cycle's budget and otherwise stay
  queued, untried and with no attempt counted, so overruns never pile up threads.
* **Idempotent**: one entry per (job, execution); a ``kept`` or ``gone`` entry is final (a supervisor that
  takes a job over reads the archive once and skips what is there).
* **Off the hot path**: nothing is read or queried for a job whose fold recorded no ending; a supervisor asks
  the archive once per job it has not seen before (start, takeover), and only for jobs with ended executions.

Retention (:class:`Pruner`, with ``ArchiveSettings(keep=...)``): entries are deleted ``keep`` seconds after they
were archived, once their job is closed (:meth:`~dispatch.records.archive.OutputArchive.prune_outputs`); by
default nothing is deleted.

What it cannot do: keep a log the cluster deleted before the supervisor saw the execution end (Kueue's
eviction deletes the pods: they stay Terminating for their grace period, and past it the entry says ``gone``),
unless the backend keeps it: a backend that is an :class:`~dispatch.spi.OutputKeeper` is asked to when the
archiver is built (Kubeflow keeps rank 0's log of an execution its deadline ends, whose pods go at once).
The Kubeflow adapter's ``supervised`` setting turns its ``OutputRetained`` answer to yes (docs/adapters/kubeflow.md
says why it is a setting).
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from dispatch.clock import Clock
from dispatch.errors import ConfigError, DispatchError, NotFound, Unavailable
from dispatch.records.archive import ArchivedOutput, ArchiveStatus
from dispatch.records.model import JobRecord
from dispatch.spi import Backend, ExecutionOutput, OutputKeeper

DEFAULT_MAX_BYTES = 1 << 20
"""The default cap of one archived log: 1 MiB (its tail)."""
DEFAULT_READ_BOUND = 10.0
"""The time bound of reads for a backend that declares no CallBound."""
MAX_ATTEMPTS = 3
"""How many times one execution's log is tried in all before its ``failed`` entry stays."""
PRUNE_EVERY = 3600.0
"""Seconds (of the supervisor's clock) between two prunes of the archive, unless the last deleted a full batch."""
PRUNE_LIMIT = 1000
"""The most entries one prune deletes (one short transaction)."""


@dataclass(frozen=True)
class ArchiveSettings:
    """How much of each log the supervisor keeps: ``max_bytes`` of its tail (0: archive nothing); and for how
    long: ``keep`` seconds after an entry was archived, once its job is closed (None or 0: forever)."""

    max_bytes: int = DEFAULT_MAX_BYTES
    keep: float | None = None

    def __post_init__(self) -> None:
        if self.max_bytes < 0:
            raise ConfigError("archiveMaxBytes", "must be 0 (off) or a positive number of bytes")
        if self.keep is not None and not (math.isfinite(self.keep) and self.keep >= 0):
            raise ConfigError("archiveKeep", "must be 0 or None (keep forever) or a positive number of seconds")


def keep_tail(chunks: Iterable[bytes], cap: int) -> tuple[bytes, int]:
    """The last ``cap`` bytes of ``chunks`` and the number of bytes they held in all (memory stays below
    about twice ``cap`` whatever the log's size)."""
    buf = bytearray()
    total = 0
    for chunk in chunks:
        total += len(chunk)
        buf += chunk
        if len(buf) > 2 * cap:
            del buf[: len(buf) - cap]
    if len(buf) > cap:
        del buf[: len(buf) - cap]
    return bytes(buf), total


@dataclass(frozen=True)
class _Item:
    job_id: str
    submission: int
    scheduler_id: str
    identity: str
    restart: int
    running: bool = False
    """Read while it still runs, just before the supervisor's own stop or hold ends it."""


def ended(job: JobRecord) -> list[_Item]:
    """Every execution of ``job`` whose outcome has ended, with its submission's scheduler id."""
    return [
        _Item(job.id, s.n, s.scheduler_id, e.identity, e.restart)
        for s in job.submissions
        if s.scheduler_id is not None
        for e in s.executions
        if e.outcome.ended
    ]


class Archiver:
    """Archives the logs of the executions a supervisor sees end (see the module docstring).

    Build it with :meth:`for_backend`, which answers None when there is nothing to archive (the backend keeps
    its output, the store has no archive, or ``max_bytes`` is 0).
    """

    def __init__(self, backend: ExecutionOutput, records: Any, clock: Clock, settings: ArchiveSettings, bound: float):
        self.backend = backend
        self.records = records
        self.clock = clock
        self.settings = settings
        self.bound = bound
        self._pending: dict[str, dict[str, _Item]] = {}  # job id -> identity -> item
        self._spent_until = 0.0
        self._reader: Reader = _Reader()
        self._timer: Callable[[], float] = time.monotonic

    def run_inline(self, timer: Callable[[], float]) -> None:
        """Read in the calling thread, each read to its end, and measure the cycle's budget on ``timer``: for a
        caller that must be deterministic (the simulator, whose backend answers at once on a fake clock). By
        default reads run on a worker thread, each bounded in wall-clock time."""
        self._reader = InlineReader()
        self._timer = timer

    @classmethod
    def for_backend(
        cls, backend: Backend, records: Any, clock: Clock, settings: ArchiveSettings | None = None
    ) -> Archiver | None:
        settings = settings or ArchiveSettings()
        if settings.max_bytes == 0 or not isinstance(backend, ExecutionOutput):
            return None
        # checked by attribute, not isinstance: record stores are often wrapped (metrics, fault hooks)
        if not all(callable(getattr(records, m, None)) for m in ("put_output", "outputs")):
            return None
        bound = backend.declarations().call_bound or DEFAULT_READ_BOUND
        if isinstance(backend, OutputKeeper):  # what the cluster deletes before a cycle could read it
            backend.keep_output()
        return cls(backend, records, clock, settings, bound)

    # ----- what to archive ---------------------------------------------------------------------------------

    def begin_cycle(self, owned: Sequence[JobRecord]) -> None:
        """Start the cycle's time budget (one CallBound for all of the cycle's reads), and drop what is queued
        for jobs this supervisor no longer holds (their next holder catches up from the archive)."""
        self._spent_until = self._timer() + self.bound
        if self._pending:
            held = {j.id for j in owned}
            for job_id in [k for k in self._pending if k not in held]:
                del self._pending[job_id]

    def catch_up(self, jobs: Sequence[JobRecord]) -> None:
        """Queue the ended executions of jobs this supervisor has not seen before that the archive lacks (or
        holds as ``failed`` with attempts left). One query, and only when some of them have ended executions."""
        items = {j.id: ended(j) for j in jobs}
        items = {k: v for k, v in items.items() if v}
        if not items:
            return
        try:
            stored = {(e.job_id, e.execution): e for e in self.records.outputs(sorted(items))}
        except DispatchError:
            stored = {}
        for job_id, found in items.items():
            for item in found:
                entry = stored.get((job_id, item.identity))
                if entry is not None and (entry.status is not ArchiveStatus.FAILED or entry.attempts >= MAX_ATTEMPTS):
                    continue
                self._pending.setdefault(job_id, {})[item.identity] = item

    def note(self, before: JobRecord, after: JobRecord) -> None:
        """Queue the executions that ended between ``before`` and ``after`` (two versions of one job)."""
        if after is before:
            return
        done = {i.identity for i in ended(before)}
        for item in ended(after):
            if item.identity not in done:
                self._pending.setdefault(after.id, {})[item.identity] = item

    def before_stopping(self, job: JobRecord, submission: int) -> list[ArchivedOutput]:
        """Archive the running execution of ``submission`` now, before the supervisor's stop or hold ends it
        (on Kubernetes the pods go with it): the log as it is at this moment. Returns the entries written."""
        sub = next((s for s in job.submissions if s.n == submission), None)
        if sub is None or sub.scheduler_id is None or not sub.executions or sub.executions[-1].outcome.ended:
            return []
        last = sub.executions[-1]
        item = _Item(job.id, sub.n, sub.scheduler_id, last.identity, last.restart, running=True)
        self._pending.setdefault(job.id, {})[item.identity] = item
        return self.run(job.id)

    def pending(self, job_id: str) -> list[str]:
        """The identities queued for ``job_id``."""
        return list(self._pending.get(job_id, {}))

    # ----- archiving ------------------------------------------------------------------------------------------

    def run(self, job_id: str) -> list[ArchivedOutput]:
        """Archive what is queued for ``job_id``, within what is left of the cycle's budget; returns the entries
        written (as stored)."""
        queued = self._pending.get(job_id)
        if not queued:
            return []
        written = []
        for identity, item in list(queued.items()):
            left = self._spent_until - self._timer()
            if left <= 0:
                break  # the cycle's time is spent: read in the next cycle
            read = self._read(item, min(self.bound, left))
            if read is None:
                break  # an earlier read still holds the reader: tried in a later cycle, no attempt counted
            entry, retry = read
            try:
                stored = self.records.put_output(entry)
            except DispatchError:
                continue  # the store did not take it: still queued
            written.append(stored)
            if not (retry and stored.status is ArchiveStatus.FAILED and stored.attempts < MAX_ATTEMPTS):
                del queued[identity]
        if not queued:
            self._pending.pop(job_id, None)
        return written

    def _read(self, item: _Item, timeout: float) -> tuple[ArchivedOutput, bool] | None:
        """The entry for ``item`` and whether a failure may be retried; None when the reader is still held by an
        earlier read that overran (nothing was tried)."""
        cap = self.settings.max_bytes
        done, result = self._reader.run(
            lambda: keep_tail(self.backend.execution_output(item.scheduler_id, item.identity), cap), timeout
        )
        if result is BUSY:
            return None
        base = ArchivedOutput(
            job_id=item.job_id,
            execution=item.identity,
            submission=item.submission,
            restart=item.restart,
            status=ArchiveStatus.FAILED,
            archived_at=self.clock.now(),
        )
        if not done:
            return _with(base, reason=f"rank 0's log was not read within {round(timeout, 1):g}s"), True
        error = result if isinstance(result, BaseException) else None
        if isinstance(error, NotFound):
            return _with(base, status=ArchiveStatus.GONE, reason=str(error)), False
        if error is not None:
            return _with(base, reason=f"{type(error).__name__}: {error}"), isinstance(error, Unavailable)
        data, size = result
        truncated = size > len(data)
        notes = [f"the last {len(data)} of {size} bytes (cap {cap})"] if truncated else []
        if item.running:
            notes.append("read just before the supervisor stopped it: what it wrote after is not kept")
        reason = "; ".join(notes)
        return _with(base, status=ArchiveStatus.KEPT, data=data, size=size, truncated=truncated, reason=reason), False


class Pruner:
    """The archive's retention: deletes the entries archived more than ``keep`` seconds ago of closed jobs
    (:meth:`~dispatch.records.archive.OutputArchive.prune_outputs`), at most ``limit`` per call so one call stays
    short. A call is due every ``every`` seconds of the clock (the first at once); while calls delete a full
    ``limit`` (a backlog, when retention is first turned on) one is due every cycle until it is worked off.

    Build it with :meth:`for_settings`, which answers None when entries are kept forever. On PostgreSQL every
    supervisor of a store may prune at once (the store makes that safe); the archive is the store's, not one
    cluster's, so the supervisors of one store should share one ``keep``.
    """

    def __init__(self, records: Any, keep: float, *, limit: int = PRUNE_LIMIT, every: float = PRUNE_EVERY) -> None:
        self.records = records
        self.keep = keep
        self.limit = limit
        self.every = every
        self._last: float | None = None
        self._backlog = False

    @classmethod
    def for_settings(cls, records: Any, settings: ArchiveSettings | None) -> Pruner | None:
        if settings is None or not settings.keep:
            return None
        # checked by attribute, not isinstance: record stores are often wrapped (metrics, fault hooks)
        if not callable(getattr(records, "prune_outputs", None)):
            raise ConfigError("archiveKeep", "this record store keeps no output archive to prune")
        return cls(records, settings.keep)

    def due(self, now: float) -> bool:
        """Whether a call is due at ``now`` (on the supervisor's clock)."""
        return self._last is None or self._backlog or now - self._last >= self.every

    def prune(self, now: float) -> int:
        """Delete at most ``limit`` entries archived before ``now - keep``; returns how many. A store error is
        raised, and the next call is due ``every`` seconds later as after any other."""
        self._last, self._backlog = now, False
        deleted = int(self.records.prune_outputs(now - self.keep, limit=self.limit))
        self._backlog = deleted >= self.limit
        return deleted


_Task = tuple[Callable[[], Any], list[Any], threading.Event]


class Reader(Protocol):
    """Runs one read with a timeout: ``(True, result or exception)``, ``(False, None)`` when it did not finish
    in time, ``(False, BUSY)`` when it was not tried."""

    def run(self, fn: Callable[[], Any], timeout: float) -> tuple[bool, Any]: ...


class InlineReader:
    """Runs each read in the calling thread, to its end (the timeout is not applied)."""

    def run(self, fn: Callable[[], Any], timeout: float) -> tuple[bool, Any]:
        try:
            return True, fn()
        except Exception as exc:  # handed back and recorded, as the worker thread does
            return True, exc


class _Reader:
    """Runs reads on one worker thread, each waited for at most a timeout. A read that overruns is left to end on
    its own (when the backend's own request timeout fires) and its result is dropped; the worker is never
    replaced while it is stuck, so overruns cannot pile up threads: until it is free again every read answers
    :data:`BUSY` without being tried."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Task] | None = None
        self._idle = threading.Event()
        self._idle.set()

    def _worker(self, jobs: queue.SimpleQueue[_Task]) -> None:
        while True:
            fn, out, finished = jobs.get()
            try:
                out.append(fn())
            except Exception as exc:  # handed back and recorded: an archive failure never reaches the cycle
                out.append(exc)
            finished.set()
            self._idle.set()

    @property
    def threads(self) -> int:
        """How many worker threads this reader has started (at most one, ever)."""
        return 0 if self._jobs is None else 1

    def run(self, fn: Callable[[], Any], timeout: float) -> tuple[bool, Any]:
        """``(True, result or exception)``; ``(False, None)`` when ``fn`` did not finish within ``timeout``;
        ``(False, BUSY)`` when an earlier read still holds the worker after ``timeout`` (``fn`` was not called)."""
        deadline = time.monotonic() + timeout
        if not self._idle.wait(timeout):
            return False, BUSY
        if self._jobs is None:
            self._jobs = queue.SimpleQueue()
            threading.Thread(target=self._worker, args=(self._jobs,), name="archive-reader", daemon=True).start()
        out: list[Any] = []
        finished = threading.Event()
        self._idle.clear()
        self._jobs.put((fn, out, finished))
        if not finished.wait(max(0.0, deadline - time.monotonic())):
            return False, None
        return True, out[0]


BUSY = object()
"""What :meth:`_Reader.run` answers while an earlier, overrun read still holds the worker."""


def _with(entry: ArchivedOutput, **changes: Any) -> ArchivedOutput:
    return replace(entry, **changes)


__all__ = [
    "DEFAULT_MAX_BYTES",
    "MAX_ATTEMPTS",
    "PRUNE_EVERY",
    "PRUNE_LIMIT",
    "ArchiveSettings",
    "Archiver",
    "Pruner",
    "keep_tail",
]
