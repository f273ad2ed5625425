"""An in-memory :class:`~dispatch.records.base.Records` store (tests, the simulator, read-only tools).

Thread-safe. Records are stored as JSON documents, so a record that cannot round-trip fails here as it would
in a durable store. Beside them, like the SQL stores' columns, it keeps the head (version, lease owner and
expiry) of each job that needs supervision, so :meth:`MemoryRecords.to_supervise` never touches closed jobs.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from dispatch.errors import Conflict, NotFound
from dispatch.records.archive import ArchivedOutput, ArchiveStatus
from dispatch.records.base import check_fence
from dispatch.records.browse import Count, JobQuery, LeaseRow, Page, matches
from dispatch.records.model import Event, JobHead, JobRecord, JobSummary, Peers, needs_supervision


class MemoryRecords:
    def __init__(self) -> None:
        self._docs: dict[str, str] = {}
        self._events: list[Event] = []
        self._live: dict[str, tuple[str, float, JobHead]] = {}  # id -> (cluster, created_at, head)
        self._alive: dict[tuple[str, str], float] = {}  # (cluster, owner) -> until
        self._outputs: dict[tuple[str, str], ArchivedOutput] = {}  # (job, execution) -> archived output
        self._lock = threading.Lock()
        self.writes = 0

    def _index(self, job: JobRecord) -> None:
        if needs_supervision(job):
            lease = job.lease
            head = JobHead(job.id, job.version, lease.owner if lease else None, lease.expires_at if lease else None)
            self._live[job.id] = (job.cluster, job.created_at, head)
        else:
            self._live.pop(job.id, None)

    def _load(self, doc: str) -> JobRecord:
        data: dict[str, Any] = json.loads(doc)
        return JobRecord.from_json(data)

    def _append(self, events: Sequence[Event]) -> None:
        for e in events:
            self._events.append(
                Event(
                    job_id=e.job_id,
                    at=e.at,
                    kind=e.kind,
                    data=json.loads(json.dumps(e.data)),
                    seq=len(self._events) + 1,
                )
            )

    def create(self, job: JobRecord, events: Sequence[Event] = ()) -> JobRecord:
        with self._lock:
            if job.id in self._docs:
                raise Conflict(f"job {job.id} already exists")
            stored = job.copy()
            stored.version = 1
            self._docs[job.id] = json.dumps(stored.to_json())
            self._index(stored)
            self._append(events)
            self.writes += 1
            return self._load(self._docs[job.id])

    def get(self, job_id: str) -> JobRecord:
        with self._lock:
            doc = self._docs.get(job_id)
        if doc is None:
            raise NotFound(f"no job {job_id!r} in the records")
        return self._load(doc)

    def update(self, job: JobRecord, events: Sequence[Event] = (), *, fence: int | None = None) -> JobRecord:
        with self._lock:
            doc = self._docs.get(job.id)
            if doc is None:
                raise NotFound(f"no job {job.id!r} in the records")
            stored = self._load(doc)
            if stored.version != job.version:
                raise Conflict(f"job {job.id}: written at version {job.version}, the record is at {stored.version}")
            check_fence(stored, fence)
            new = job.copy()
            new.version = job.version + 1
            text = json.dumps(new.to_json())
            self._docs[job.id] = text
            self._index(new)
            self._append(events)
            self.writes += 1
            return self._load(text)

    def jobs(self, *, active_only: bool = True, cluster: str | None = None) -> list[JobRecord]:
        with self._lock:
            docs = list(self._docs.values())
        out = [self._load(d) for d in docs]
        out = [j for j in out if not (active_only and j.closed) and (cluster is None or j.cluster == cluster)]
        return sorted(out, key=lambda j: (j.created_at, j.id))

    def to_supervise(self, *, cluster: str, owner: str, now: float) -> list[JobHead]:
        with self._lock:
            rows = [(c, h) for c, _, h in sorted(self._live.values(), key=lambda v: (v[1], v[2].id)) if c == cluster]
        return [h for _, h in rows if h.takeable(owner, now)]

    def get_many(self, job_ids: Sequence[str]) -> list[JobRecord]:
        with self._lock:
            docs = [d for d in (self._docs.get(i) for i in job_ids) if d is not None]
        return [self._load(d) for d in docs]

    def renew(self, *, cluster: str, owner: str, now: float, expires_at: float) -> dict[str, int]:
        with self._lock:
            renewed: dict[str, int] = {}
            for job_id, (c, created, h) in list(self._live.items()):
                if c != cluster or h.lease_owner != owner or (h.lease_expires or 0.0) <= now:
                    continue
                data = json.loads(self._docs[job_id])
                data["version"] += 1
                data["lease"]["expiresAt"] = expires_at
                self._docs[job_id] = json.dumps(data)
                self._live[job_id] = (c, created, JobHead(job_id, data["version"], owner, expires_at))
                renewed[job_id] = data["version"]
            self.writes += 1
            return renewed

    def peers(self, *, cluster: str, owner: str, now: float, expires_at: float) -> Peers:
        with self._lock:
            self._alive[(cluster, owner)] = expires_at
            self.writes += 1
            owners = tuple(sorted(o for (c, o), until in self._alive.items() if c == cluster and until > now))
            jobs = sum(1 for c, _, _ in self._live.values() if c == cluster)
        return Peers(owners, jobs)

    def summaries(
        self, *, active_only: bool = False, cluster: str | None = None, limit: int | None = None
    ) -> list[JobSummary]:
        rows = [JobSummary.of(j) for j in self.jobs(active_only=active_only, cluster=cluster)]
        rows.sort(key=lambda s: (s.created_at, s.id), reverse=True)
        return rows[:limit] if limit is not None else rows

    def events(self, job_id: str, after: int = 0) -> list[Event]:
        with self._lock:
            return [e for e in self._events if e.job_id == job_id and e.seq > after]

    def find(self, query: JobQuery) -> Page:
        rows = [s for s in self.summaries() if matches(s, query)]
        return Page(rows[query.offset : query.offset + query.limit], len(rows))

    def tally(self, since: float) -> list[Count]:
        found: dict[tuple[int, str, str | None], int] = {}
        for s in self.summaries():
            if s.created_at >= since:
                key = (int((s.created_at - since) // 3600), s.state.value, s.cause.value if s.cause else None)
                found[key] = found.get(key, 0) + 1
        return [Count(h, st, c, n) for (h, st, c), n in sorted(found.items(), key=lambda kv: kv[0][0])]

    def leases(self) -> list[LeaseRow]:
        rows = [
            LeaseRow(j.id, j.cluster, j.lease.owner, j.lease.token, j.lease.expires_at)
            for j in self.jobs(active_only=True)
            if j.lease is not None
        ]
        return sorted(rows, key=lambda r: (r.owner, r.job_id))

    def clusters(self) -> list[str]:
        return sorted({s.cluster for s in self.summaries()})

    # ----- the output archive (see dispatch.records.archive) ------------------------------------------------

    def put_output(self, entry: ArchivedOutput) -> ArchivedOutput:
        key = (entry.job_id, entry.execution)
        with self._lock:
            stored = self._outputs.get(key)
            if stored is None:
                self._outputs[key] = entry
            elif stored.status is ArchiveStatus.FAILED:
                self._outputs[key] = replace(entry, attempts=stored.attempts + 1)
            return self._outputs[key].without_data()

    def get_output(self, job_id: str, execution: str) -> ArchivedOutput | None:
        with self._lock:
            return self._outputs.get((job_id, execution))

    def outputs(self, job_ids: Sequence[str]) -> list[ArchivedOutput]:
        wanted = set(job_ids)
        with self._lock:
            found = [e.without_data() for (job, _), e in self._outputs.items() if job in wanted]
        return sorted(found, key=lambda e: (e.job_id, e.submission, e.archived_at))

    def close(self) -> None:
        pass
