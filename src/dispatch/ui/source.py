"""What the dashboard reads, and nothing it could write with.

A :class:`Source` holds a record store opened read-only (it also answers the browsing queries of
:mod:`dispatch.records.browse`) and opens clusters read-only, once each, on first use. Whatever builds it decides
where the records are: ``dispatch ui`` builds it from the CLI's configuration, the same way every other command
finds its records.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from dispatch.cluster import Cluster
from dispatch.errors import DispatchError, NotFound
from dispatch.records.base import Records
from dispatch.records.browse import Browse
from dispatch.records.model import JobRecord


@dataclass
class Source:
    records: Any
    """A read-only store implementing both :class:`~dispatch.records.base.Records` and
    :class:`~dispatch.records.browse.Browse` (checked on construction)."""
    open_cluster: Callable[[str], Cluster]
    """Opens cluster ``name`` read-only (no record store)."""
    where: str = ""
    """Where the records are, for the page footer."""
    _clusters: dict[str, Cluster] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if not (isinstance(self.records, Records) and isinstance(self.records, Browse)):
            raise TypeError(f"{type(self.records).__name__} cannot be browsed")
        if getattr(self.records, "read_only", False) is not True:
            raise ValueError("the dashboard reads records opened read-only")

    def job(self, job_id: str) -> JobRecord:
        return self.records.get(job_id)  # type: ignore[no-any-return]

    def cluster(self, name: str) -> Cluster:
        """The cluster ``name``, opened read-only (raises the opener's error: not configured, unreachable)."""
        with self._lock:
            found = self._clusters.get(name)
            if found is None:
                found = self.open_cluster(name)
                if not found.read_only:
                    found.close()
                    raise ValueError(f"cluster {name} was opened writable; the dashboard opens clusters read-only")
                self._clusters[name] = found
            return found

    def output(self, job: JobRecord, submission: int, execution: int | None, rank: int, stream: str) -> Iterator[bytes]:
        """The output of one rank of one execution, as the cluster's adapter reads it (never following); when the
        cluster has it no more (Kubernetes: the pods are gone), rank 0's stdout as the supervisor archived it."""
        try:
            return iter([b"".join(self._live(job, submission, execution, rank, stream))])
        except DispatchError:
            kept = self._archived(job, submission, execution, rank, stream)
            if kept is None:
                raise
            return iter([kept])

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

    def _live(self, job: JobRecord, submission: int, execution: int | None, rank: int, stream: str) -> Iterator[bytes]:
        sub = job.submission(submission)
        if sub.scheduler_id is None:
            raise NotFound(f"submission {submission} of job {job.id} was never created on its cluster")
        cluster = self.cluster(job.cluster)
        backend: Any = getattr(cluster.backend, "unrestricted", cluster.backend)
        lines = getattr(backend, "lines", None)
        if callable(lines):
            return (chunk for _, chunk in lines(sub.scheduler_id, stream, execution=execution, ranks=[rank]))
        read = getattr(backend, stream, None)
        if callable(read) and job.spec.world_size == 1:
            return iter(read(sub.scheduler_id, execution, False))
        raise DispatchError(f"the {cluster.backend.name} adapter cannot read output per rank")

    def close(self) -> None:
        with self._lock:
            for c in self._clusters.values():
                with contextlib.suppress(Exception):  # closing is best effort
                    c.close()
            self._clusters.clear()
        self.records.close()
