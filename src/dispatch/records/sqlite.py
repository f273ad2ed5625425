"""The SQLite record store: the embedded default. One file, WAL, a versioned schema with migrations.

Each job is one row holding its JSON document and the columns a status table needs; events live in an
append-only table. A write is one ``BEGIN IMMEDIATE`` transaction: compare the version (and the lease token),
write the row, append the events. WAL with ``synchronous=NORMAL``: a commit survives a crash of the process,
but the last ones may be lost on power loss or an OS crash, so a write that carries an **intent** (an event of
kind ``intent``, written before a backend call) commits with ``synchronous=FULL``: the call is made only after
its intent is on disk. The file is created with mode 0600: records hold commands and environments.
Several processes may share the file (SQLite serialises writers; ``busy_timeout`` absorbs short waits).

``read_only=True`` opens an existing file for reading only (dashboards, status tools): the connection is opened
``mode=ro`` with ``PRAGMA query_only``, so SQLite itself refuses any write, and ``create``/``update`` raise
:class:`~dispatch.errors.ReadOnly` before touching it. A read-only open never creates nor migrates the file.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dispatch.errors import Conflict, NotFound, ReadOnly
from dispatch.records import archive, nodes
from dispatch.records.archive import ArchivedOutput
from dispatch.records.base import Written, check_token, handed_over, planned_updates
from dispatch.records.browse import Count, JobQuery, LeaseRow, Page, counts
from dispatch.records.model import (
    Event,
    JobHead,
    JobRecord,
    JobSummary,
    Peers,
    needs_supervision,
    row_values,
)
from dispatch.records.nodes import NodeBlame
from dispatch.records.statements import SQLITE, Statements, event_rows

SCHEMA_VERSION = 7


def _run(db: sqlite3.Connection, script: str) -> None:
    # executescript() would COMMIT the migration's transaction; run statement by statement instead.
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


def _migration_1(db: sqlite3.Connection) -> None:
    _run(
        db,
        """
        CREATE TABLE jobs (
            id TEXT PRIMARY KEY,
            version INTEGER NOT NULL,
            cluster TEXT NOT NULL,
            name TEXT,
            state TEXT NOT NULL,
            cause TEXT,
            exit_code INTEGER,
            execution TEXT,
            closed INTEGER NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            observed_at REAL,
            doc TEXT NOT NULL
        );
        CREATE TABLE events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            job_id TEXT NOT NULL,
            at REAL NOT NULL,
            kind TEXT NOT NULL,
            data TEXT NOT NULL
        );
        CREATE INDEX events_job ON events (job_id, seq);
        """,
    )


def _migration_2(db: sqlite3.Connection) -> None:
    _run(
        db,
        """
        CREATE INDEX jobs_active ON jobs (closed, created_at);
        CREATE INDEX jobs_created ON jobs (created_at);
        """,
    )


def _migration_3(db: sqlite3.Connection) -> None:
    """The supervision columns: whether a job needs a supervisor, and its lease's owner and expiry (filled from
    each existing document once, here), with a partial index holding only the jobs that need supervision."""
    _run(
        db,
        """
        ALTER TABLE jobs ADD COLUMN supervised INTEGER NOT NULL DEFAULT 1;
        ALTER TABLE jobs ADD COLUMN lease_owner TEXT;
        ALTER TABLE jobs ADD COLUMN lease_expires REAL;
        """,
    )
    rows = db.execute("SELECT id, doc FROM jobs").fetchall()
    for job_id, doc in rows:
        job = JobRecord.from_json(json.loads(doc))
        lease = job.lease
        db.execute(
            "UPDATE jobs SET supervised = ?, lease_owner = ?, lease_expires = ? WHERE id = ?",
            (needs_supervision(job), lease.owner if lease else None, lease.expires_at if lease else None, job_id),
        )
    db.execute("CREATE INDEX jobs_supervised ON jobs (cluster, created_at) WHERE supervised = 1")


def _migration_4(db: sqlite3.Connection) -> None:
    """The supervisors alive per cluster (each renews its row every cycle), so they can divide the jobs."""
    _run(
        db,
        "CREATE TABLE supervisors"
        " (cluster TEXT NOT NULL, owner TEXT NOT NULL, until REAL NOT NULL, PRIMARY KEY (cluster, owner))",
    )


def _migration_5(db: sqlite3.Connection) -> None:
    """The output archive (see :mod:`dispatch.records.archive`): one row per (job, execution)."""
    _run(
        db,
        "CREATE TABLE outputs (job_id TEXT NOT NULL, execution TEXT NOT NULL, submission INTEGER NOT NULL,"
        " restart INTEGER NOT NULL, status TEXT NOT NULL, archived_at REAL NOT NULL, size INTEGER NOT NULL,"
        " truncated INTEGER NOT NULL, reason TEXT NOT NULL, attempts INTEGER NOT NULL, rank INTEGER NOT NULL,"
        " stream TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (job_id, execution))",
    )


def _migration_6(db: sqlite3.Connection) -> None:
    """The archive's retention (:meth:`SQLiteRecords.prune_outputs`) finds old entries by their archive time."""
    _run(db, "CREATE INDEX outputs_archived ON outputs (archived_at)")


def _migration_7(db: sqlite3.Connection) -> None:
    """Node blames (see :mod:`dispatch.records.nodes`): one row per (cluster, node, job, execution)."""
    _run(db, nodes.CREATE.format(table="node_blames", real="REAL"))
    _run(db, nodes.INDEX.format(table="node_blames"))


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    1: _migration_1,
    2: _migration_2,
    3: _migration_3,
    4: _migration_4,
    5: _migration_5,
    6: _migration_6,
    7: _migration_7,
}


def _carries_intent(items: Sequence[Written]) -> bool:
    """Whether a batch carries an intent (so its commit must reach the disk before the call it announces)."""
    return any(e.kind == "intent" for _, events in items for e in events)


class SQLiteRecords:
    """Records in one SQLite file at ``path`` (created, with its parent directory, if missing).

    ``read_only``: the file must exist and is opened read-only (``mode=ro``: nothing is created, migrated or
    written; a write raises :class:`~dispatch.errors.ReadOnly`), for status tools and dashboards. Its schema
    must be this dispatch's (an older one is migrated by the next writable open)."""

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 10.0, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self._lock = threading.RLock()
        self._st = Statements(SQLITE)
        if read_only:
            if not self.path.exists():
                raise NotFound(f"no record store at {self.path}")
            uri = f"{self.path.resolve().as_uri()}?mode=ro"
            self._db = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA query_only=ON")
            self._db.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
            try:
                self._check_readable()
            except RuntimeError:
                self._db.close()
                raise
            return
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not self.path.exists():
            fd = os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600)
            os.close(fd)
        self._db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        self._migrate()

    # ----- schema ----------------------------------------------------------------------------------------

    def schema_version(self) -> int:
        row = self._db.execute("PRAGMA user_version").fetchone()
        return int(row[0])

    def _migrate(self) -> None:
        with self._tx():
            current = self.schema_version()
            if current > SCHEMA_VERSION:
                raise RuntimeError(
                    f"{self.path} has schema version {current}, newer than this dispatch ({SCHEMA_VERSION}); "
                    "upgrade dispatch"
                )
            for version in range(current + 1, SCHEMA_VERSION + 1):
                MIGRATIONS[version](self._db)
                self._db.execute(f"PRAGMA user_version={version}")

    def _check_readable(self) -> None:
        """A read-only open reads only a store at this dispatch's schema version (it may not migrate)."""
        current = self.schema_version()
        if current == 0:
            raise RuntimeError(
                f"{self.path} holds no dispatch records (schema version 0): open it writable once to create it"
            )
        if current > SCHEMA_VERSION:
            raise RuntimeError(
                f"{self.path} has schema version {current}, newer than this dispatch ({SCHEMA_VERSION}); "
                "upgrade dispatch"
            )
        if current < SCHEMA_VERSION:
            raise RuntimeError(
                f"{self.path} has schema version {current}, this dispatch reads {SCHEMA_VERSION}: "
                "open it writable once (any dispatch command that writes) to migrate it"
            )

    @contextmanager
    def _tx(self, *, durable: bool = False) -> Iterator[sqlite3.Connection]:
        """One write transaction. ``durable``: its COMMIT syncs the WAL to disk (``synchronous=FULL``), so it
        survives power loss, and so does every commit before it (the WAL is one sequential file)."""
        if self.read_only:
            raise ReadOnly(f"the record store {self.path} is open read-only")
        with self._lock:
            if durable:
                self._db.execute("PRAGMA synchronous=FULL")
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                else:
                    self._db.execute("COMMIT")
            finally:
                if durable:
                    self._db.execute("PRAGMA synchronous=NORMAL")

    def now(self) -> float:
        """This host's clock, which judges every lease in this store (a SQLite file lives on one host, so its
        writers share that clock; a writer's own clock may still be set wrong)."""
        return time.time()

    # ----- writes ----------------------------------------------------------------------------------------

    def _append(self, db: sqlite3.Connection, events: Sequence[Event]) -> None:
        db.executemany(self._st.insert_event, event_rows(events))

    def create(self, job: JobRecord, events: Sequence[Event] = ()) -> JobRecord:
        new = job.copy()
        new.version = 1
        with self._tx() as db:
            if db.execute(self._st.insert_job, (new.id, *row_values(new))).rowcount != 1:
                raise Conflict(f"job {job.id} already exists")
            self._append(db, events)
        return new

    def update(self, job: JobRecord, events: Sequence[Event] = (), *, fence: int | None = None) -> JobRecord:
        new = job.copy()
        new.version = job.version + 1
        with self._tx(durable=any(e.kind == "intent" for e in events)) as db:
            row = db.execute(self._st.head, (job.id,)).fetchone()
            if row is None:
                raise NotFound(f"no job {job.id!r} in the records")
            if row[0] != job.version:
                raise Conflict(f"job {job.id}: written at version {job.version}, the record is at {row[0]}")
            check_token(job.id, row[1], row[2], fence)
            db.execute(self._st.update_job, (*row_values(new), job.id))
            self._append(db, events)
        return new

    # ----- batched writes (dispatch.records.base.BatchWrites) --------------------------------------------------

    def create_many(self, items: Sequence[Written]) -> list[JobRecord | Conflict]:
        answers: list[JobRecord | Conflict] = []
        events: list[Event] = []
        with self._tx(durable=_carries_intent(items)) as db:
            for job, evs in items:
                if db.execute(self._st.insert_job, (job.id, *row_values(job, version=1))).rowcount != 1:
                    answers.append(Conflict(f"job {job.id} already exists"))
                    continue
                events.extend(evs)
                answers.append(job)
            self._append(db, events)
        return handed_over(answers, {id(job): 1 for job in answers if isinstance(job, JobRecord)})

    def update_many(
        self, items: Sequence[Written], *, fence: int | None = None
    ) -> list[JobRecord | Conflict | NotFound]:
        ids = list(dict.fromkeys(job.id for job, _ in items))
        with self._tx(durable=_carries_intent(items)) as db:
            heads: dict[str, tuple[int, Any, Any]] = {}
            for n, args in SQLITE.id_lists(ids):
                for row in db.execute(self._st.heads(n), args):
                    heads[row[0]] = (row[1], row[2], row[3])
            answers, versions, rows, events = planned_updates(items, heads, fence)
            db.executemany(self._st.update_job, rows)
            self._append(db, events)
        return handed_over(answers, versions)

    # ----- reads -----------------------------------------------------------------------------------------

    def get(self, job_id: str) -> JobRecord:
        with self._lock:
            row = self._db.execute(self._st.get, (job_id,)).fetchone()
        if row is None:
            raise NotFound(f"no job {job_id!r} in the records")
        return JobRecord.from_json(json.loads(row[0]))

    def jobs(self, *, active_only: bool = True, cluster: str | None = None) -> list[JobRecord]:
        text, args = self._st.jobs(active_only=active_only, cluster=cluster)
        with self._lock:
            rows = self._db.execute(text, args).fetchall()
        return [JobRecord.from_json(json.loads(r[0])) for r in rows]

    def to_supervise(self, *, cluster: str, owner: str, now: float) -> list[JobHead]:
        with self._lock:
            rows = self._db.execute(self._st.to_supervise, (cluster, owner, now)).fetchall()
        return [JobHead(*r) for r in rows]

    def get_many(self, job_ids: Sequence[str]) -> list[JobRecord]:
        docs: list[str] = []
        with self._lock:
            for n, args in SQLITE.id_lists(job_ids):
                docs += [r[0] for r in self._db.execute(self._st.docs(n), args)]
        return [JobRecord.from_json(json.loads(d)) for d in docs]

    def renew(self, *, cluster: str, owner: str, now: float, expires_at: float) -> dict[str, int]:
        with self._tx() as db:
            rows = db.execute(self._st.renew, (expires_at, expires_at, cluster, owner, now)).fetchall()
        return dict(rows)

    def peers(self, *, cluster: str, owner: str, now: float, expires_at: float) -> Peers:
        with self._tx() as db:
            db.execute(self._st.peer_alive, (cluster, owner, expires_at))
            db.execute(self._st.peers_forgotten, (cluster, now - 86400.0))
            owners = [r[0] for r in db.execute(self._st.peers, (cluster, now))]
            jobs = db.execute(self._st.supervised_count, (cluster,)).fetchone()[0]
        return Peers(tuple(owners), int(jobs))

    def summaries(
        self, *, active_only: bool = False, cluster: str | None = None, limit: int | None = None
    ) -> list[JobSummary]:
        text, args = self._st.summaries(active_only=active_only, cluster=cluster, limit=limit)
        with self._lock:
            rows = self._db.execute(text, args).fetchall()
        return [JobSummary.from_row(r) for r in rows]

    def events(self, job_id: str, after: int = 0) -> list[Event]:
        with self._lock:
            rows = self._db.execute(self._st.events, (job_id, after)).fetchall()
        return [Event(job_id=r[1], at=r[2], kind=r[3], data=json.loads(r[4]), seq=r[0]) for r in rows]

    # ----- the output archive (see dispatch.records.archive) --------------------------------------------------

    def put_output(self, entry: ArchivedOutput) -> ArchivedOutput:
        with self._tx() as db:
            db.execute(self._st.put_output, archive.values(entry))
            row = db.execute(self._st.output, (entry.job_id, entry.execution)).fetchone()
        return archive.from_row(row)

    def get_output(self, job_id: str, execution: str) -> ArchivedOutput | None:
        with self._lock:
            row = self._db.execute(self._st.output_with_data, (job_id, execution)).fetchone()
        return None if row is None else archive.from_row(row, row[-1])

    def outputs(self, job_ids: Sequence[str]) -> list[ArchivedOutput]:
        rows: list[Any] = []
        with self._lock:
            for n, args in SQLITE.id_lists(job_ids):
                rows += self._db.execute(self._st.outputs(n), args).fetchall()
        return [archive.from_row(r) for r in rows]

    def prune_outputs(self, before: float, *, limit: int | None = None, dry_run: bool = False) -> int:
        archive.check_limit(limit)
        doomed = f"SELECT o.rowid FROM outputs AS o WHERE {self._st.prunable} ORDER BY o.archived_at LIMIT ?"
        args = (before, -1 if limit is None else limit)  # LIMIT -1: no limit
        if dry_run:
            with self._lock:
                return int(self._db.execute(f"SELECT count(*) FROM ({doomed})", args).fetchone()[0])
        with self._tx() as db:
            return db.execute(f"DELETE FROM outputs WHERE rowid IN ({doomed})", args).rowcount

    # ----- node blames (see dispatch.records.nodes) -----------------------------------------------------------

    def add_node_blames(self, blames: Sequence[NodeBlame]) -> int:
        with self._tx() as db:
            before = db.total_changes
            db.executemany(self._st.add_blame, [nodes.values(b) for b in blames])
            return db.total_changes - before

    def node_blames(self, cluster: str, since: float) -> list[NodeBlame]:
        with self._lock:
            rows = self._db.execute(self._st.node_blames, (cluster, since)).fetchall()
        return [nodes.from_row(r) for r in rows]

    def clear_node_blames(self, cluster: str, node: str) -> int:
        with self._tx() as db:
            return db.execute(self._st.clear_blames, (cluster, node)).rowcount

    def prune_node_blames(self, cluster: str, before: float) -> int:
        with self._tx() as db:
            return db.execute(self._st.prune_blames, (cluster, before)).rowcount

    # ----- browsing (see dispatch.records.browse) ------------------------------------------------------------

    def find(self, query: JobQuery) -> Page:
        count, page, args = self._st.find(query)
        with self._lock:
            total = self._db.execute(count, args).fetchone()[0]
            rows = self._db.execute(page, [*args, query.limit, query.offset]).fetchall()
        return Page([JobSummary.from_row(r) for r in rows], int(total))

    def tally(self, since: float) -> list[Count]:
        with self._lock:
            rows = self._db.execute(self._st.tally, (since, since)).fetchall()
        return counts(rows)

    def leases(self) -> list[LeaseRow]:
        with self._lock:
            rows = self._db.execute(self._st.leases).fetchall()
        return [LeaseRow(r[0], r[1], r[2], int(r[3]), float(r[4])) for r in rows]

    def clusters(self) -> list[str]:
        with self._lock:
            rows = self._db.execute(self._st.clusters).fetchall()
        return [r[0] for r in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()
