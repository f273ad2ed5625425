"""What the dashboard reads, and nothing it could write with.

A :class:`Source` holds a record store opened read-only (it also answers the browsing queries of
:mod:`dispatch.records.browse`), opens clusters read-only, once each, on first use, and reads output in rounds
(:mod:`dispatch.ui.reads`). Whatever builds it decides where the records are: ``dispatch ui`` builds it from the
CLI's configuration, the same way every other command finds its records.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dispatch.cluster import Cluster
from dispatch.errors import DispatchError, NotFound, Unsupported
from dispatch.records.base import Records
from dispatch.records.browse import Browse
from dispatch.records.model import JobRecord
from dispatch.records.nodes import NodeBlames, Suspect, SuspectPolicy, current_suspects
from dispatch.spi import (
    SLICE_LIMIT,
    JobEvidence,
    OutputPiece,
    OutputReader,
    OutputSlice,
    OutputSlices,
    RankProgress,
    Unanswered,
)
from dispatch.ui.observed import ProgressReads
from dispatch.ui.reads import Rounds

RETRY_OPEN = 30.0
"""Seconds before a cluster that could not be opened is tried again."""


def _slice(data: bytes, offset: int, limit: int) -> OutputPiece:
    """``limit`` bytes of ``data`` from ``offset`` (negative: from the end)."""
    start = max(0, len(data) + offset) if offset < 0 else offset
    return OutputPiece(data[start : start + limit], start, len(data))


@dataclass
class Source:
    records: Any
    """A read-only store implementing both :class:`~dispatch.records.base.Records` and
    :class:`~dispatch.records.browse.Browse` (checked on construction)."""
    open_cluster: Callable[[str], Cluster]
    """Opens cluster ``name`` read-only (no record store)."""
    where: str = ""
    """Where the records are, for the page footer."""
    policy_of: Callable[[str], SuspectPolicy] = field(default=lambda name: SuspectPolicy())
    """The suspect policy of cluster ``name`` (``dispatch ui``: the config file's, as ``dispatch nodes`` reads it)."""
    rounds: Rounds = field(init=False)
    """Every output read goes through these rounds (one per instance: the rate limit is per dashboard)."""
    readings: ProgressReads = field(init=False)
    """Every progress read goes through these (one per instance, like the rounds)."""
    _clusters: dict[str, Cluster] = field(default_factory=dict)
    _failed: dict[str, tuple[float, DispatchError]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _calls: dict[str, threading.Lock] = field(default_factory=dict)
    """One lock per cluster: the dashboard makes one read call at a time to a cluster (output rounds and
    progress readings take turns; a backend need not be safe for concurrent calls)."""

    def __post_init__(self) -> None:
        self.rounds = Rounds(self._read_many)
        self.readings = ProgressReads(self._inspect_many)
        if not (isinstance(self.records, Records) and isinstance(self.records, Browse)):
            raise TypeError(f"{type(self.records).__name__} cannot be browsed")
        if getattr(self.records, "read_only", False) is not True:
            raise ValueError("the dashboard reads records opened read-only")

    def job(self, job_id: str) -> JobRecord:
        return self.records.get(job_id)  # type: ignore[no-any-return]

    def cluster(self, name: str) -> Cluster:
        """The cluster ``name``, opened read-only (raises the opener's error: not configured, unreachable; a
        failed open is not tried again for :data:`RETRY_OPEN` seconds, its error raised again meanwhile)."""
        with self._lock:
            found = self._clusters.get(name)
            failed = self._failed.get(name)
            if found is None and failed is not None and time.monotonic() - failed[0] < RETRY_OPEN:
                raise failed[1]
            if found is None:
                try:
                    found = self.open_cluster(name)
                except DispatchError as exc:
                    self._failed[name] = (time.monotonic(), exc)
                    raise
                if not found.read_only:
                    found.close()
                    raise ValueError(f"cluster {name} was opened writable; the dashboard opens clusters read-only")
                self._clusters[name] = found
            return found

    def per_rank(self, name: str) -> bool:
        """Whether cluster ``name`` keeps output per rank (the local adapter) rather than per execution (Slurm:
        one file for every rank; Kubernetes: rank 0's container log). False when the cluster cannot be opened."""
        try:
            backend = self._backend(name)
        except DispatchError:
            return False
        return isinstance(backend, OutputSlices) and backend.output_per_rank()

    def progress(self, jobs: Sequence[JobRecord]) -> dict[str, tuple[RankProgress, ...]]:
        """The progress of the ``jobs`` that are active, by job id, for those whose current execution reported
        some: one :class:`~dispatch.ui.observed.ProgressReads` ask per cluster (its readings are rate-limited
        and shared by every viewer)."""
        by_cluster: dict[str, dict[str, str]] = {}
        for job in jobs:
            sub = job.current
            if job.closed or job.state.ended or sub is None or sub.scheduler_id is None or sub.gone:
                continue
            by_cluster.setdefault(job.cluster, {})[sub.scheduler_id] = job.id
        out: dict[str, tuple[RankProgress, ...]] = {}
        for cluster, ids in by_cluster.items():
            for sid, reports in self.readings.progress(cluster, list(ids)).items():
                out[ids[sid]] = reports
        return out

    def suspects(self, name: str, now: float) -> list[Suspect]:
        """The suspect nodes of cluster ``name`` at ``now``, by its policy: what ``dispatch nodes`` lists."""
        if not isinstance(self.records, NodeBlames):
            return []
        return current_suspects(self.records, name, self.policy_of(name), now)

    def output(
        self, job: JobRecord, submission: int, execution: int | None, rank: int | None, stream: str, offset: int
    ) -> OutputPiece:
        """At most :data:`~dispatch.spi.SLICE_LIMIT` bytes of one execution's output from byte ``offset``
        (negative: from the end), as the cluster's adapter reads it, in the next round of reads
        (:mod:`dispatch.ui.reads`: Busy when that round is full). When the cluster has it no more (Kubernetes:
        the pods are gone), rank 0's stdout as the supervisor archived it."""
        sub = job.submission(submission)
        try:
            if sub.scheduler_id is None:
                raise NotFound(f"submission {submission} of job {job.id} was never created on its cluster")
            ask = OutputSlice(sub.scheduler_id, stream, execution, rank, offset)
            return self.rounds.read(job.cluster, ask)
        except DispatchError:
            kept = self._archived(job, submission, execution, 0 if rank is None else rank, stream)
            if kept is None:
                raise
            return _slice(kept, offset, SLICE_LIMIT)

    def _archived(self, job: JobRecord, submission: int, execution: int | None, rank: int, stream: str) -> bytes | None:
        """The archived output of that execution (the latest of the submission with that restart number)."""
        get = getattr(self.records, "get_output", None)
        sub = job.submission(submission)
        ex = next((e for e in reversed(sub.executions) if execution is None or e.restart == execution), None)
        if ex is None or not callable(get):
            return None
        entry = get(job.id, ex.identity)
        if entry is None or entry.status.value != "kept" or (entry.rank, entry.stream) != (rank, stream):
            return None
        data: bytes = entry.data
        return data

    def _backend(self, name: str) -> Any:
        cluster = self.cluster(name)
        return getattr(cluster.backend, "unrestricted", cluster.backend)

    def _read_many(self, name: str, asks: Sequence[OutputSlice]) -> Sequence[OutputPiece | DispatchError]:
        """One round's reads on cluster ``name``: one ``read_slices`` call where the adapter has it, else each
        through its ``stdout``/``stderr`` from the offset (Kubernetes reads a pod's log from its start)."""
        backend: Any = self._backend(name)
        with self._turn(name):
            return self._read_each(backend, asks)

    def _read_each(self, backend: Any, asks: Sequence[OutputSlice]) -> Sequence[OutputPiece | DispatchError]:
        """The asks read through ``backend``, in the cluster's turn."""
        adapter = str(backend.name)
        if isinstance(backend, OutputSlices):
            return backend.read_slices(asks)
        if not isinstance(backend, OutputReader):
            raise Unsupported(f"the {adapter} adapter cannot read output (capability OutputRead)")
        answers: list[OutputPiece | DispatchError] = []
        for ask in asks:
            try:
                if ask.rank not in (None, 0):
                    raise Unsupported(f"the {adapter} adapter reads rank 0's output only")
                read = backend.stderr if ask.stream == "stderr" else backend.stdout
                data = b"".join(read(ask.scheduler_id, ask.execution, False, offset=max(0, ask.offset)))
                if ask.offset < 0:
                    answers.append(_slice(data, ask.offset, ask.limit))
                else:
                    answers.append(OutputPiece(data[: ask.limit], ask.offset, ask.offset + len(data)))
            except DispatchError as exc:
                answers.append(exc)
        return answers

    def _inspect_many(self, name: str, scheduler_ids: Sequence[str]) -> Mapping[str, JobEvidence | Unanswered]:
        """One progress reading on cluster ``name``: the adapter's batched read of the jobs' state, which
        carries each running execution's progress."""
        backend = self.cluster(name).backend
        with self._turn(name):
            return backend.inspect_many(scheduler_ids)

    def _turn(self, name: str) -> threading.Lock:
        with self._lock:
            return self._calls.setdefault(name, threading.Lock())

    def close(self) -> None:
        with self._lock:
            for c in self._clusters.values():
                with contextlib.suppress(Exception):  # closing is best effort
                    c.close()
            self._clusters.clear()
        self.records.close()
