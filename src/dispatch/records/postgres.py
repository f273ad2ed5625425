"""The PostgreSQL record store: several supervisors on several hosts over one database (psycopg 3).

Same protocol, same document model and same guarantees as :mod:`dispatch.records.sqlite`: one row per job
(its JSON document plus summary columns) and an append-only event table, all in one PostgreSQL schema (default
``dispatch``) whose version lives in ``<schema>.meta``. A write locks the job's row (``SELECT ... FOR UPDATE``),
compares the version and the lease's fencing token, writes the row and appends its events, in one transaction.
Migrations run on open under an advisory lock, so several processes opening at once migrate once.

``read_only=True`` (dashboards, status tools) neither creates nor migrates the schema: the session is opened
with ``default_transaction_read_only``, so the server refuses any write, and ``create``/``update``/``drop``
raise :class:`~dispatch.errors.ReadOnly` before sending anything.

Credentials belong in the DSN or the standard ``PG*`` environment; :func:`redact` keeps passwords out of errors.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from dispatch.errors import ConfigError, Conflict, NotFound, ReadOnly, Unavailable
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
from dispatch.records.statements import PostgresDialect, Statements, event_rows

try:
    import psycopg
    from psycopg import sql
except ImportError:  # pragma: no cover - exercised only without the extra
    psycopg = None  # type: ignore[assignment]

SCHEMA_VERSION = 6
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_LOCK_KEY = 0x64697370  # "disp": the advisory lock migrations take


def redact(dsn: str) -> str:
    """The DSN with any password replaced, for messages."""
    dsn = re.sub(r"(password\s*=\s*)(\S+)", r"\1***", dsn, flags=re.IGNORECASE)
    return re.sub(r"(://[^:/@]+:)([^@]+)(@)", r"\1***\3", dsn)


def _migration_1(cur: Any, schema: sql.Identifier) -> None:
    cur.execute(
        sql.SQL(
            """
        CREATE TABLE IF NOT EXISTS {s}.jobs (
            id TEXT PRIMARY KEY,
            version BIGINT NOT NULL,
            cluster TEXT NOT NULL,
            name TEXT,
            state TEXT NOT NULL,
            cause TEXT,
            exit_code INTEGER,
            execution TEXT,
            closed BOOLEAN NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            observed_at DOUBLE PRECISION,
            doc JSONB NOT NULL
        )"""
        ).format(s=schema)
    )
    cur.execute(
        sql.SQL(
            """
        CREATE TABLE IF NOT EXISTS {s}.events (
            seq BIGSERIAL PRIMARY KEY,
            job_id TEXT NOT NULL,
            at DOUBLE PRECISION NOT NULL,
            kind TEXT NOT NULL,
            data JSONB NOT NULL
        )"""
        ).format(s=schema)
    )
    cur.execute(sql.SQL("CREATE INDEX IF NOT EXISTS events_job ON {s}.events (job_id, seq)").format(s=schema))
    cur.execute(sql.SQL("CREATE INDEX IF NOT EXISTS jobs_active ON {s}.jobs (closed, created_at)").format(s=schema))


def _migration_2(cur: Any, schema: sql.Identifier) -> None:
    """The supervision columns (see the SQLite store's migration 3), filled from each existing document."""
    cur.execute(
        sql.SQL(
            "ALTER TABLE {s}.jobs ADD COLUMN IF NOT EXISTS supervised BOOLEAN NOT NULL DEFAULT TRUE,"
            " ADD COLUMN IF NOT EXISTS lease_owner TEXT, ADD COLUMN IF NOT EXISTS lease_expires DOUBLE PRECISION"
        ).format(s=schema)
    )
    cur.execute(sql.SQL("SELECT id, doc FROM {s}.jobs").format(s=schema))
    for job_id, doc in cur.fetchall():
        job = JobRecord.from_json(doc)
        lease = job.lease
        cur.execute(
            sql.SQL("UPDATE {s}.jobs SET supervised = %s, lease_owner = %s, lease_expires = %s WHERE id = %s").format(
                s=schema
            ),
            (needs_supervision(job), lease.owner if lease else None, lease.expires_at if lease else None, job_id),
        )
    cur.execute(
        sql.SQL("CREATE INDEX IF NOT EXISTS jobs_supervised ON {s}.jobs (cluster, created_at) WHERE supervised").format(
            s=schema
        )
    )


def _migration_3(cur: Any, schema: sql.Identifier) -> None:
    """The supervisors alive per cluster (see the SQLite store's migration 4)."""
    cur.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {s}.supervisors (cluster TEXT NOT NULL, owner TEXT NOT NULL,"
            " until DOUBLE PRECISION NOT NULL, PRIMARY KEY (cluster, owner))"
        ).format(s=schema)
    )


def _migration_4(cur: Any, schema: sql.Identifier) -> None:
    """The output archive (see :mod:`dispatch.records.archive`): one row per (job, execution)."""
    cur.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {s}.outputs (job_id TEXT NOT NULL, execution TEXT NOT NULL,"
            " submission INTEGER NOT NULL, restart INTEGER NOT NULL, status TEXT NOT NULL,"
            " archived_at DOUBLE PRECISION NOT NULL, size BIGINT NOT NULL, truncated BOOLEAN NOT NULL,"
            " reason TEXT NOT NULL, attempts INTEGER NOT NULL, rank INTEGER NOT NULL, stream TEXT NOT NULL,"
            " data BYTEA NOT NULL, PRIMARY KEY (job_id, execution))"
        ).format(s=schema)
    )


def _migration_5(cur: Any, schema: sql.Identifier) -> None:
    """The archive's retention (see the SQLite store's migration 6): an index on the archive time. Built in the
    migration's transaction, which holds off writes to ``outputs`` meanwhile; the table's bytes live out of
    line (TOAST), so the index reads only the small rows."""
    cur.execute(sql.SQL("CREATE INDEX IF NOT EXISTS outputs_archived ON {s}.outputs (archived_at)").format(s=schema))


def _migration_6(cur: Any, schema: sql.Identifier) -> None:
    """Node blames (see the SQLite store's migration 7)."""
    cur.execute(sql.SQL(nodes.CREATE.format(table="{s}.node_blames", real="DOUBLE PRECISION")).format(s=schema))
    cur.execute(sql.SQL(nodes.INDEX.format(table="{s}.node_blames")).format(s=schema))


MIGRATIONS: dict[int, Callable[[Any, Any], None]] = {
    1: _migration_1,
    2: _migration_2,
    3: _migration_3,
    4: _migration_4,
    5: _migration_5,
    6: _migration_6,
}
PRUNE = (
    "DELETE FROM {{s}}.outputs WHERE ctid = ANY(ARRAY(SELECT o.ctid FROM {{s}}.outputs AS o WHERE {prunable}"
    " ORDER BY o.archived_at LIMIT %s FOR UPDATE OF o SKIP LOCKED))"
)
"""The delete of :meth:`PostgresRecords.prune_outputs` (``{prunable}``:
:attr:`~dispatch.records.statements.Statements.prunable`, then ``{s}``: the schema), PostgreSQL's alone (SQLite
deletes by ``rowid``, without ``SKIP LOCKED``)."""


class PostgresRecords:
    """Records in PostgreSQL at ``dsn``, in schema ``schema`` (created if missing)."""

    def __init__(
        self, dsn: str, *, schema: str = "dispatch", connect_timeout: float = 10.0, read_only: bool = False
    ) -> None:
        """``read_only``: the session is read-only (``default_transaction_read_only``), nothing is migrated, and
        a write raises :class:`~dispatch.errors.ReadOnly` before it reaches the server; the schema must exist at
        this dispatch's version."""
        if psycopg is None:
            raise ConfigError("records", "the PostgreSQL store needs psycopg: install dispatch-jobs[postgres]")
        if not _SCHEMA_NAME.fullmatch(schema):
            raise ConfigError("store.schema", f"{schema!r} is not a plain lower-case schema name")
        self.schema = schema
        self.read_only = read_only
        self._s = sql.Identifier(schema)
        self._lock = threading.RLock()
        options = "-c default_transaction_read_only=on" if read_only else None
        try:
            if options is None:
                self._db = psycopg.connect(dsn, autocommit=True, connect_timeout=int(connect_timeout))
            else:
                self._db = psycopg.connect(dsn, autocommit=True, connect_timeout=int(connect_timeout), options=options)
        except psycopg.OperationalError as exc:
            raise Unavailable(
                f"cannot connect to PostgreSQL at {redact(dsn)}: {exc}".replace(dsn, redact(dsn))
            ) from None
        self._dialect = PostgresDialect(self._s.as_string(self._db))
        self._st = Statements(self._dialect)
        if read_only:
            try:
                self._check_readable()
            except RuntimeError:
                self._db.close()
                raise
            return
        self._migrate()

    def _q(self, text: str) -> sql.Composed:
        return sql.SQL(text).format(s=self._s)

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        if self.read_only:
            raise ReadOnly(f"the record store (schema {self.schema}) is open read-only")
        with self._lock, self._db.transaction(), self._db.cursor() as cur:
            yield cur

    def _version_or_none(self) -> int | None:
        with self._lock, self._db.cursor() as cur:
            cur.execute("SELECT to_regclass(%s)", (f"{self.schema}.meta",))
            row = cur.fetchone()
            if row is None or row[0] is None:
                return None
        return self.schema_version()

    def _migrate(self) -> None:
        with self._tx() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            cur.execute(self._q("CREATE SCHEMA IF NOT EXISTS {s}"))
            cur.execute(self._q("CREATE TABLE IF NOT EXISTS {s}.meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"))
            cur.execute(self._q("SELECT value FROM {s}.meta WHERE key = 'schema_version'"))
            row = cur.fetchone()
            current = int(row[0]) if row else 0
            if current > SCHEMA_VERSION:
                raise RuntimeError(
                    f"schema {self.schema} has version {current}, newer than this dispatch ({SCHEMA_VERSION})"
                )
            for version in range(current + 1, SCHEMA_VERSION + 1):
                MIGRATIONS[version](cur, self._s)
            if current != SCHEMA_VERSION:
                cur.execute(
                    self._q(
                        "INSERT INTO {s}.meta (key, value) VALUES ('schema_version', %s) "
                        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
                    ),
                    (str(SCHEMA_VERSION),),
                )

    def _check_readable(self) -> None:
        """A read-only open reads only a schema at this dispatch's version (it may not migrate)."""
        current = self._version_or_none() or 0
        if current == 0:
            raise RuntimeError(f"schema {self.schema} holds no dispatch records: open it writable once to create it")
        if current > SCHEMA_VERSION:
            raise RuntimeError(
                f"schema {self.schema} has version {current}, newer than this dispatch ({SCHEMA_VERSION})"
            )
        if current < SCHEMA_VERSION:
            raise RuntimeError(
                f"schema {self.schema} has version {current}, this dispatch reads {SCHEMA_VERSION}: "
                "open it writable once to migrate it"
            )

    def schema_version(self) -> int:
        with self._lock, self._db.cursor() as cur:
            cur.execute(self._q("SELECT value FROM {s}.meta WHERE key = 'schema_version'"))
            row = cur.fetchone()
            return int(row[0]) if row else 0

    def now(self) -> float:
        """The server's clock (``clock_timestamp()``), which judges every lease in this store."""
        with self._lock, self._db.cursor() as cur:
            cur.execute("SELECT extract(epoch FROM clock_timestamp())::float8")
            row = cur.fetchone()
        assert row is not None
        return float(row[0])

    # ----- writes --------------------------------------------------------------------------------------------

    def _append(self, cur: Any, events: Sequence[Event]) -> None:
        if events:
            cur.executemany(self._st.insert_event, event_rows(events))

    def create(self, job: JobRecord, events: Sequence[Event] = ()) -> JobRecord:
        new = job.copy()
        new.version = 1
        with self._tx() as cur:
            cur.execute(self._st.insert_job, (new.id, *row_values(new)))
            if cur.rowcount != 1:
                raise Conflict(f"job {job.id} already exists")
            self._append(cur, events)
        return new

    def update(self, job: JobRecord, events: Sequence[Event] = (), *, fence: int | None = None) -> JobRecord:
        new = job.copy()
        new.version = job.version + 1
        with self._tx() as cur:
            cur.execute(self._st.head, (job.id,))
            row = cur.fetchone()
            if row is None:
                raise NotFound(f"no job {job.id!r} in the records")
            if row[0] != job.version:
                raise Conflict(f"job {job.id}: written at version {job.version}, the record is at {row[0]}")
            check_token(job.id, row[1], row[2], fence)
            cur.execute(self._st.update_job, (*row_values(new), job.id))
            self._append(cur, events)
        return new

    # ----- batched writes (dispatch.records.base.BatchWrites) -------------------------------------------------

    def create_many(self, items: Sequence[Written]) -> list[JobRecord | Conflict]:
        """One transaction: the inserts go as one pipelined batch, each answering whether its id was free."""
        if not items:
            return []
        taken: list[bool] = []
        with self._tx() as cur:
            cur.executemany(
                self._st.insert_job_returning,
                [(job.id, *row_values(job, version=1)) for job, _ in items],
                returning=True,
            )
            while True:
                taken.append(cur.fetchone() is None)
                if not cur.nextset():
                    break
            self._append(cur, [e for (_, events), t in zip(items, taken, strict=True) if not t for e in events])
        answers: list[JobRecord | Conflict] = [
            Conflict(f"job {job.id} already exists") if t else job for (job, _), t in zip(items, taken, strict=True)
        ]
        return handed_over(answers, {id(job): 1 for (job, _), t in zip(items, taken, strict=True) if not t})

    def update_many(
        self, items: Sequence[Written], *, fence: int | None = None
    ) -> list[JobRecord | Conflict | NotFound]:
        """One transaction: every row read and locked by one ``SELECT ... FOR UPDATE`` (in id order, so two
        batches never deadlock), then the updates and the events, each as one pipelined batch."""
        if not items:
            return []
        ids = sorted({job.id for job, _ in items})
        with self._tx() as cur:
            heads: dict[str, tuple[int, Any, Any]] = {}
            for n, args in self._dialect.id_lists(ids):
                cur.execute(self._st.heads(n), args)
                heads.update((r[0], (r[1], r[2], r[3])) for r in cur.fetchall())
            answers, versions, rows, events = planned_updates(items, heads, fence)
            if rows:
                cur.executemany(self._st.update_job, rows)
            self._append(cur, events)
        return handed_over(answers, versions)

    # ----- reads -----------------------------------------------------------------------------------------------

    def _rows(self, text: str, args: Sequence[Any] = ()) -> list[Any]:
        """One read's rows."""
        with self._lock, self._db.cursor() as cur:
            cur.execute(text, args)
            return cur.fetchall()

    def get(self, job_id: str) -> JobRecord:
        rows = self._rows(self._st.get, (job_id,))
        if not rows:
            raise NotFound(f"no job {job_id!r} in the records")
        return JobRecord.from_json(rows[0][0])

    def jobs(self, *, active_only: bool = True, cluster: str | None = None) -> list[JobRecord]:
        text, args = self._st.jobs(active_only=active_only, cluster=cluster)
        return [JobRecord.from_json(r[0]) for r in self._rows(text, args)]

    def to_supervise(self, *, cluster: str, owner: str, now: float) -> list[JobHead]:
        return [JobHead(*r) for r in self._rows(self._st.to_supervise, (cluster, owner, now))]

    def get_many(self, job_ids: Sequence[str]) -> list[JobRecord]:
        rows: list[Any] = []
        for n, args in self._dialect.id_lists(job_ids):
            rows += self._rows(self._st.docs(n), args)
        return [JobRecord.from_json(r[0]) for r in rows]

    def renew(self, *, cluster: str, owner: str, now: float, expires_at: float) -> dict[str, int]:
        with self._tx() as cur:
            cur.execute(self._st.renew, (expires_at, expires_at, cluster, owner, now))
            rows = cur.fetchall()
        return {r[0]: r[1] for r in rows}

    def peers(self, *, cluster: str, owner: str, now: float, expires_at: float) -> Peers:
        with self._tx() as cur:
            cur.execute(self._st.peer_alive, (cluster, owner, expires_at))
            cur.execute(self._st.peers_forgotten, (cluster, now - 86400.0))
            cur.execute(self._st.peers, (cluster, now))
            owners = [r[0] for r in cur.fetchall()]
            cur.execute(self._st.supervised_count, (cluster,))
            row = cur.fetchone()
        return Peers(tuple(owners), int(row[0]) if row else 0)

    def summaries(
        self, *, active_only: bool = False, cluster: str | None = None, limit: int | None = None
    ) -> list[JobSummary]:
        text, args = self._st.summaries(active_only=active_only, cluster=cluster, limit=limit)
        return [JobSummary.from_row(r) for r in self._rows(text, args)]

    def events(self, job_id: str, after: int = 0) -> list[Event]:
        rows = self._rows(self._st.events, (job_id, after))
        return [Event(job_id=r[1], at=r[2], kind=r[3], data=r[4], seq=r[0]) for r in rows]

    # ----- the output archive (see dispatch.records.archive) ----------------------------------------------------

    def put_output(self, entry: ArchivedOutput) -> ArchivedOutput:
        with self._tx() as cur:
            cur.execute(self._st.put_output, archive.values(entry))
            cur.execute(self._st.output, (entry.job_id, entry.execution))
            row = cur.fetchone()
        return archive.from_row(row)

    def get_output(self, job_id: str, execution: str) -> ArchivedOutput | None:
        rows = self._rows(self._st.output_with_data, (job_id, execution))
        return archive.from_row(rows[0], rows[0][-1]) if rows else None

    def outputs(self, job_ids: Sequence[str]) -> list[ArchivedOutput]:
        rows: list[Any] = []
        for n, args in self._dialect.id_lists(job_ids):
            rows += self._rows(self._st.outputs(n), args)
        return [archive.from_row(r) for r in rows]

    def prune_outputs(self, before: float, *, limit: int | None = None, dry_run: bool = False) -> int:
        archive.check_limit(limit)
        outputs, prunable = self._dialect.table("outputs"), self._st.prunable
        if dry_run:
            count = f"SELECT count(*) FROM (SELECT FROM {outputs} AS o WHERE {prunable} LIMIT %s) AS d"
            rows = self._rows(count, (before, limit))  # LIMIT NULL: no limit
            return int(rows[0][0]) if rows else 0
        # SKIP LOCKED: concurrent callers each lock rows no other holds, and none waits for another. The rows
        # are deleted by their ctid (stable: locked, in this transaction), so the delete reads just those rows.
        with self._tx() as cur:
            cur.execute(self._q(PRUNE.format(prunable=prunable)), (before, limit))
            return int(cur.rowcount)

    # ----- node blames (see dispatch.records.nodes) -------------------------------------------------------------

    def add_node_blames(self, blames: Sequence[NodeBlame]) -> int:
        new = 0
        with self._tx() as cur:
            for b in blames:
                cur.execute(self._st.add_blame, nodes.values(b))
                new += max(cur.rowcount, 0)
        return new

    def node_blames(self, cluster: str, since: float) -> list[NodeBlame]:
        return [nodes.from_row(r) for r in self._rows(self._st.node_blames, (cluster, since))]

    def clear_node_blames(self, cluster: str, node: str) -> int:
        with self._tx() as cur:
            cur.execute(self._st.clear_blames, (cluster, node))
            return int(cur.rowcount)

    def prune_node_blames(self, cluster: str, before: float) -> int:
        with self._tx() as cur:
            cur.execute(self._st.prune_blames, (cluster, before))
            return int(cur.rowcount)

    # ----- browsing (see dispatch.records.browse) --------------------------------------------------------------

    def find(self, query: JobQuery) -> Page:
        count, page, args = self._st.find(query)
        with self._lock, self._db.cursor() as cur:
            cur.execute(count, args)
            (total,) = cur.fetchone() or (0,)
            cur.execute(page, [*args, query.limit, query.offset])
            rows = cur.fetchall()
        return Page([JobSummary.from_row(r) for r in rows], int(total))

    def tally(self, since: float) -> list[Count]:
        return counts(self._rows(self._st.tally, (since, since)))

    def leases(self) -> list[LeaseRow]:
        return [LeaseRow(r[0], r[1], r[2], int(r[3]), float(r[4])) for r in self._rows(self._st.leases)]

    def clusters(self) -> list[str]:
        return [r[0] for r in self._rows(self._st.clusters)]

    def drop(self) -> None:
        """Drop this store's schema and everything in it (tests and benchmarks)."""
        with self._tx() as cur:
            cur.execute(self._q("DROP SCHEMA IF EXISTS {s} CASCADE"))

    def close(self) -> None:
        with self._lock:
            self._db.close()
