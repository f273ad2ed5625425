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
from dispatch.records.archive import ArchivedOutput, ArchiveStatus, check_limit
from dispatch.records.base import Written, check_fence, handed_over
from dispatch.records.browse import Count, JobQuery, LeaseRow, Page, matches
from dispatch.records.model import Event, JobHead, JobRecord, JobSummary, Peers, needs_supervision
from dispatch.records.nodes import NodeBlame


class MemoryRecords:
    def __init__(self) -> None:
        self._docs: dict[str, str] = {}
        self._events: list[Event] = []
        self._live: dict[str, dict[str, JobHead]] = {}  # cluster -> id -> head, of the jobs needing supervision
        self._order: dict[str, list[str] | None] = {}  # cluster -> its live ids by (created_at, id); None: to sort
        self._created: dict[str, float] = {}  # id -> created_at, of the live jobs
        self._alive: dict[tuple[str, str], float] = {}  # (cluster, owner) -> until
        self._outputs: dict[tuple[str, str], ArchivedOutput] = {}  # (job, execution) -> archived output
        self._blames: dict[tuple[str, str, str, str], NodeBlame] = {}  # (cluster, node, job, execution) -> blame
        self._lock = threading.Lock()
        self.writes = 0

    def _index(self, job: JobRecord) -> None:
        self._index_head(job, job.version)

    def _index_head(self, job: JobRecord, version: int) -> None:
        """Index ``job`` as stored at ``version``."""
        live = self._live.setdefault(job.cluster, {})
        if needs_supervision(job):
            lease = job.lease
            head = JobHead(job.id, version, lease.owner if lease else None, lease.expires_at if lease else None)
            if job.id not in live:
                self._order[job.cluster] = None
                self._created[job.id] = job.created_at
            live[job.id] = head
        elif live.pop(job.id, None) is not None:
            self._order[job.cluster] = None
            del self._created[job.id]

    def _ordered(self, cluster: str) -> list[str]:
        """The ids of ``cluster``'s live jobs by (created_at, id), sorted again only after one came or went."""
        order = self._order.get(cluster)
        if order is None:
            created = self._created
            order = self._order[cluster] = sorted(self._live.get(cluster, {}), key=lambda i: (created[i], i))
        return order

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

    def create_many(self, items: Sequence[Written]) -> list[JobRecord | Conflict]:
        """:class:`~dispatch.records.base.BatchWrites`: under one hold of the lock, everything encoded before
        anything is stored (so a job or event that cannot be encoded writes nothing)."""
        with self._lock:
            answers: list[JobRecord | Conflict] = []
            staged: list[tuple[JobRecord, int, str, list[Event]]] = []
            seen: set[str] = set()
            for job, events in items:
                if job.id in self._docs or job.id in seen:
                    answers.append(Conflict(f"job {job.id} already exists"))
                    continue
                seen.add(job.id)
                staged.append(self._encoded(job, 1, events))
                answers.append(job)
            return handed_over(answers, self._commit(staged))

    def update_many(
        self, items: Sequence[Written], *, fence: int | None = None
    ) -> list[JobRecord | Conflict | NotFound]:
        """:class:`~dispatch.records.base.BatchWrites`: as :meth:`create_many`, each item compared with the
        stored job or with the one an earlier item of the batch wrote."""
        with self._lock:
            answers: list[JobRecord | Conflict | NotFound] = []
            staged: list[tuple[JobRecord, int, str, list[Event]]] = []
            written: dict[str, JobRecord] = {}
            for job, events in items:
                doc = self._docs.get(job.id)
                if doc is None:
                    answers.append(NotFound(f"no job {job.id!r} in the records"))
                    continue
                stored = written.get(job.id) or self._load(doc)
                if stored.version != job.version:
                    answers.append(
                        Conflict(f"job {job.id}: written at version {job.version}, the record is at {stored.version}")
                    )
                    continue
                try:
                    check_fence(stored, fence)
                except Conflict as exc:
                    answers.append(exc)
                    continue
                staged.append(self._encoded(job, job.version + 1, events))
                written[job.id] = self._load(staged[-1][2])
                answers.append(job)
            return handed_over(answers, self._commit(staged))

    @staticmethod
    def _encoded(job: JobRecord, version: int, events: Sequence[Event]) -> tuple[JobRecord, int, str, list[Event]]:
        """``job``, the version it is written at, its document, and its events as they will be kept."""
        data = job.to_json()
        data["version"] = version
        kept = [Event(e.job_id, e.at, e.kind, json.loads(json.dumps(e.data))) for e in events]
        return job, version, json.dumps(data), kept

    def _commit(self, staged: Sequence[tuple[JobRecord, int, str, list[Event]]]) -> dict[int, int]:
        """Store what :meth:`_encoded` made (the lock held), as one write; the versions written, by ``id(job)``."""
        versions: dict[int, int] = {}
        for job, version, text, events in staged:
            self._docs[job.id] = text
            self._index_head(job, version)
            for e in events:
                self._events.append(replace(e, seq=len(self._events) + 1))
            versions[id(job)] = version
        self.writes += 1
        return versions

    def jobs(self, *, active_only: bool = True, cluster: str | None = None) -> list[JobRecord]:
        with self._lock:
            docs = list(self._docs.values())
        out = [self._load(d) for d in docs]
        out = [j for j in out if not (active_only and j.closed) and (cluster is None or j.cluster == cluster)]
        return sorted(out, key=lambda j: (j.created_at, j.id))

    def to_supervise(self, *, cluster: str, owner: str, now: float) -> list[JobHead]:
        with self._lock:
            live = self._live.get(cluster, {})
            heads = [live[i] for i in self._ordered(cluster)]
        return [h for h in heads if h.takeable(owner, now)]

    def get_many(self, job_ids: Sequence[str]) -> list[JobRecord]:
        with self._lock:
            docs = [d for d in (self._docs.get(i) for i in job_ids) if d is not None]
        return [self._load(d) for d in docs]

    def renew(self, *, cluster: str, owner: str, now: float, expires_at: float) -> dict[str, int]:
        with self._lock:
            renewed: dict[str, int] = {}
            live = self._live.get(cluster, {})
            for job_id, h in live.items():
                if h.lease_owner != owner or (h.lease_expires or 0.0) <= now:
                    continue
                self._docs[job_id], version = _renewed(self._docs[job_id], expires_at)
                live[job_id] = JobHead(job_id, version, owner, expires_at)  # same key: the dict keeps its size
                renewed[job_id] = version
            self.writes += 1
            return renewed

    def peers(self, *, cluster: str, owner: str, now: float, expires_at: float) -> Peers:
        with self._lock:
            self._alive[(cluster, owner)] = expires_at
            self.writes += 1
            owners = tuple(sorted(o for (c, o), until in self._alive.items() if c == cluster and until > now))
            jobs = len(self._live.get(cluster, {}))
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

    def prune_outputs(self, before: float, *, limit: int | None = None, dry_run: bool = False) -> int:
        check_limit(limit)
        with self._lock:
            # a job needing supervision (every open one) is in _created; the others' old entries go
            old = [(e.archived_at, key) for key, e in self._outputs.items() if e.archived_at < before]
            doomed = [key for _, key in sorted(old) if key[0] not in self._created][:limit]
            if not dry_run:
                for key in doomed:
                    del self._outputs[key]
            return len(doomed)

    # ----- node blames (see dispatch.records.nodes) -------------------------------------------------------

    def add_node_blames(self, blames: Sequence[NodeBlame]) -> int:
        with self._lock:
            new = 0
            for b in blames:
                key = (b.cluster, b.node, b.job_id, b.execution)
                if key not in self._blames:
                    self._blames[key] = b
                    new += 1
            return new

    def node_blames(self, cluster: str, since: float) -> list[NodeBlame]:
        with self._lock:
            found = [b for b in self._blames.values() if b.cluster == cluster and b.at >= since]
        return sorted(found, key=lambda b: (b.at, b.node, b.job_id, b.execution))

    def clear_node_blames(self, cluster: str, node: str) -> int:
        with self._lock:
            doomed = [k for k in self._blames if k[0] == cluster and k[1] == node]
            for k in doomed:
                del self._blames[k]
            return len(doomed)

    def prune_node_blames(self, cluster: str, before: float) -> int:
        with self._lock:
            doomed = [k for k, b in self._blames.items() if k[0] == cluster and b.at < before]
            for k in doomed:
                del self._blames[k]
            return len(doomed)

    def close(self) -> None:
        pass


def _renewed(doc: str, expires_at: float) -> tuple[str, int]:
    """``doc`` with its version moved on by one and its lease expiry set, and that version: the two fields a
    renewal changes (as SQLite's
    ``json_set`` does in place), edited as text instead of decoding and encoding the whole document.

    The document is ``json.dumps(JobRecord.to_json())`` (or this function's output), whose top-level keys come in
    a fixed order: ``..., "rules", "version", "updatedAt", "submissions", ..., "lease", "closed",
    "stopRequested", "counters", "notBefore"``. User data (the spec, the rules) comes before ``"version"``;
    after the top-level ``"submissions"`` only dispatch's own keys follow, and a key inside a JSON string is
    escaped (``\\"``), so the last ``, "submissions": [`` and the last ``"lease": {"owner": `` are the top-level
    ones. A document that does not have this shape is decoded and encoded instead."""
    try:
        lease = doc.rindex('"lease": {"owner": ')
        at = doc.index('"expiresAt": ', lease) + len('"expiresAt": ')
        doc = doc[:at] + json.dumps(expires_at) + doc[doc.index("}", at) :]
        subs = doc.rindex(', "submissions": [')
        updated = doc.rindex(', "updatedAt": ', 0, subs)
        start = doc.rindex('"version": ', 0, updated) + len('"version": ')
        version = int(doc[start:updated]) + 1  # ValueError unless the shape is as described
        return doc[:start] + str(version) + doc[updated:], version
    except ValueError:
        data = json.loads(doc)
        data["version"] += 1
        data["lease"]["expiresAt"] = expires_at
        return json.dumps(data), int(data["version"])
