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

import json
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from dispatch.errors import ConfigError, Conflict, NotFound, ReadOnly, Unavailable
from dispatch.records import archive, nodes
from dispatch.records.archive import ArchivedOutput
from dispatch.records.base import Written, check_token, handed_over, planned_updates
from dispatch.records.browse import Count, JobQuery, LeaseRow, Page, counts, where
from dispatch.records.model import (
    ROW_COLUMNS,
    SUMMARY_COLUMNS,
    Event,
    JobHead,
    JobRecord,
    JobSummary,
    Peers,
    needs_supervision,
    row_values,
)
from dispatch.records.nodes import NodeBlame

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
_MARKS = ",".join(["%s"] * (len(ROW_COLUMNS.split(",")) + 1))
_SETS = ", ".join(f"{c.strip()}=%s" for c in ROW_COLUMNS.split(","))
PRUNE = (
    "DELETE FROM {{s}}.outputs WHERE ctid = ANY(ARRAY(SELECT o.ctid FROM {{s}}.outputs AS o WHERE {prunable}"
    " ORDER BY o.archived_at LIMIT %s FOR UPDATE OF o SKIP LOCKED))"
)
"""The delete of :meth:`PostgresRecords.prune_outputs` (``{prunable}``: :data:`dispatch.records.archive.PRUNABLE`)."""


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

    # ----- writes --------------------------------------------------------------------------------------------

    def _append(self, cur: Any, events: Sequence[Event]) -> None:
        if events:
            cur.executemany(
                self._q("INSERT INTO {s}.events (job_id, at, kind, data) VALUES (%s, %s, %s, %s)"),
                [(e.job_id, e.at, e.kind, json.dumps(e.data)) for e in events],
            )

    def create(self, job: JobRecord, events: Sequence[Event] = ()) -> JobRecord:
        new = job.copy()
        new.version = 1
        with self._tx() as cur:
            cur.execute(
                self._q(
                    "INSERT INTO {s}.jobs (id, " + ROW_COLUMNS + ") VALUES (" + _MARKS + ") ON CONFLICT (id) DO NOTHING"
                ),
                (new.id, *row_values(new)),
            )
            if cur.rowcount != 1:
                raise Conflict(f"job {job.id} already exists")
            self._append(cur, events)
        return new

    def update(self, job: JobRecord, events: Sequence[Event] = (), *, fence: int | None = None) -> JobRecord:
        new = job.copy()
        new.version = job.version + 1
        with self._tx() as cur:
            cur.execute(
                self._q(
                    "SELECT version, (doc->'lease'->>'token')::bigint, lease_owner"
                    " FROM {s}.jobs WHERE id = %s FOR UPDATE"
                ),
                (job.id,),
            )
            row = cur.fetchone()
            if row is None:
                raise NotFound(f"no job {job.id!r} in the records")
            if row[0] != job.version:
                raise Conflict(f"job {job.id}: written at version {job.version}, the record is at {row[0]}")
            check_token(job.id, row[1], row[2], fence)
            cur.execute(self._q("UPDATE {s}.jobs SET " + _SETS + " WHERE id=%s"), (*row_values(new), job.id))
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
                self._q(
                    "INSERT INTO {s}.jobs (id, " + ROW_COLUMNS + ") VALUES (" + _MARKS + ")"
                    " ON CONFLICT (id) DO NOTHING RETURNING id"
                ),
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
            cur.execute(
                self._q(
                    "SELECT id, version, (doc->'lease'->>'token')::bigint, lease_owner"
                    " FROM {s}.jobs WHERE id = ANY(%s) ORDER BY id FOR UPDATE"
                ),
                (ids,),
            )
            heads: dict[str, tuple[int, Any, Any]] = {r[0]: (r[1], r[2], r[3]) for r in cur.fetchall()}
            answers, versions, rows, events = planned_updates(items, heads, fence)
            if rows:
                cur.executemany(self._q("UPDATE {s}.jobs SET " + _SETS + " WHERE id=%s"), rows)
            self._append(cur, events)
        return handed_over(answers, versions)

    # ----- reads -----------------------------------------------------------------------------------------------

    def get(self, job_id: str) -> JobRecord:
        with self._lock, self._db.cursor() as cur:
            cur.execute(self._q("SELECT doc FROM {s}.jobs WHERE id = %s"), (job_id,))
            row = cur.fetchone()
        if row is None:
            raise NotFound(f"no job {job_id!r} in the records")
        return JobRecord.from_json(row[0])

    def jobs(self, *, active_only: bool = True, cluster: str | None = None) -> list[JobRecord]:
        text = "SELECT doc FROM {s}.jobs WHERE TRUE"
        args: list[Any] = []
        if active_only:
            text += " AND NOT closed"
        if cluster is not None:
            text += " AND cluster = %s"
            args.append(cluster)
        text += " ORDER BY created_at, id"
        with self._lock, self._db.cursor() as cur:
            cur.execute(self._q(text), args)
            rows = cur.fetchall()
        return [JobRecord.from_json(r[0]) for r in rows]

    def to_supervise(self, *, cluster: str, owner: str, now: float) -> list[JobHead]:
        with self._lock, self._db.cursor() as cur:
            cur.execute(
                self._q(
                    "SELECT id, version, lease_owner, lease_expires FROM {s}.jobs"
                    " WHERE cluster = %s AND supervised"
                    " AND (lease_owner IS NULL OR lease_owner = %s OR lease_expires <= %s)"
                    " ORDER BY created_at, id"
                ),
                (cluster, owner, now),
            )
            rows = cur.fetchall()
        return [JobHead(*r) for r in rows]

    def get_many(self, job_ids: Sequence[str]) -> list[JobRecord]:
        with self._lock, self._db.cursor() as cur:
            cur.execute(self._q("SELECT doc FROM {s}.jobs WHERE id = ANY(%s)"), (list(job_ids),))
            rows = cur.fetchall()
        return [JobRecord.from_json(r[0]) for r in rows]

    def renew(self, *, cluster: str, owner: str, now: float, expires_at: float) -> dict[str, int]:
        with self._tx() as cur:
            cur.execute(
                self._q(
                    "UPDATE {s}.jobs SET version = version + 1, lease_expires = %s,"
                    " doc = jsonb_set(jsonb_set(doc, '{{version}}', to_jsonb(version + 1)),"
                    " '{{lease,expiresAt}}', to_jsonb(%s::double precision))"
                    " WHERE cluster = %s AND supervised AND lease_owner = %s AND lease_expires > %s"
                    " RETURNING id, version"
                ),
                (expires_at, expires_at, cluster, owner, now),
            )
            rows = cur.fetchall()
        return {r[0]: r[1] for r in rows}

    def peers(self, *, cluster: str, owner: str, now: float, expires_at: float) -> Peers:
        with self._tx() as cur:
            cur.execute(
                self._q(
                    "INSERT INTO {s}.supervisors (cluster, owner, until) VALUES (%s, %s, %s)"
                    " ON CONFLICT (cluster, owner) DO UPDATE SET until = EXCLUDED.until"
                ),
                (cluster, owner, expires_at),
            )
            cur.execute(
                self._q("DELETE FROM {s}.supervisors WHERE cluster = %s AND until < %s"), (cluster, now - 86400.0)
            )
            cur.execute(
                self._q("SELECT owner FROM {s}.supervisors WHERE cluster = %s AND until > %s ORDER BY owner"),
                (cluster, now),
            )
            owners = [r[0] for r in cur.fetchall()]
            cur.execute(self._q("SELECT count(*) FROM {s}.jobs WHERE cluster = %s AND supervised"), (cluster,))
            row = cur.fetchone()
        return Peers(tuple(owners), int(row[0]) if row else 0)

    def summaries(
        self, *, active_only: bool = False, cluster: str | None = None, limit: int | None = None
    ) -> list[JobSummary]:
        text = "SELECT " + SUMMARY_COLUMNS + " FROM {s}.jobs WHERE TRUE"
        args: list[Any] = []
        if active_only:
            text += " AND NOT closed"
        if cluster is not None:
            text += " AND cluster = %s"
            args.append(cluster)
        text += " ORDER BY created_at DESC, id DESC"
        if limit is not None:
            text += " LIMIT %s"
            args.append(limit)
        with self._lock, self._db.cursor() as cur:
            cur.execute(self._q(text), args)
            rows = cur.fetchall()
        return [JobSummary.from_row(r) for r in rows]

    def events(self, job_id: str, after: int = 0) -> list[Event]:
        with self._lock, self._db.cursor() as cur:
            cur.execute(
                self._q(
                    "SELECT seq, job_id, at, kind, data FROM {s}.events WHERE job_id = %s AND seq > %s ORDER BY seq"
                ),
                (job_id, after),
            )
            rows = cur.fetchall()
        return [Event(job_id=r[1], at=r[2], kind=r[3], data=r[4], seq=r[0]) for r in rows]

    # ----- the output archive (see dispatch.records.archive) ----------------------------------------------------

    def put_output(self, entry: ArchivedOutput) -> ArchivedOutput:
        upsert = archive.UPSERT.format(table="{s}.outputs", marks=",".join(["%s"] * 13))
        with self._tx() as cur:
            cur.execute(self._q(upsert), archive.values(entry))
            cur.execute(
                self._q("SELECT " + archive.COLUMNS + " FROM {s}.outputs WHERE job_id = %s AND execution = %s"),
                (entry.job_id, entry.execution),
            )
            row = cur.fetchone()
        return archive.from_row(row)

    def get_output(self, job_id: str, execution: str) -> ArchivedOutput | None:
        with self._lock, self._db.cursor() as cur:
            cur.execute(
                self._q("SELECT " + archive.COLUMNS + ", data FROM {s}.outputs WHERE job_id = %s AND execution = %s"),
                (job_id, execution),
            )
            row = cur.fetchone()
        return None if row is None else archive.from_row(row, row[-1])

    def outputs(self, job_ids: Sequence[str]) -> list[ArchivedOutput]:
        with self._lock, self._db.cursor() as cur:
            cur.execute(
                self._q(
                    "SELECT " + archive.COLUMNS + " FROM {s}.outputs WHERE job_id = ANY(%s)"
                    " ORDER BY job_id, submission, archived_at"
                ),
                (list(job_ids),),
            )
            rows = cur.fetchall()
        return [archive.from_row(r) for r in rows]

    def prune_outputs(self, before: float, *, limit: int | None = None, dry_run: bool = False) -> int:
        archive.check_limit(limit)
        prunable = archive.PRUNABLE.format(jobs="{s}.jobs", mark="%s")
        if dry_run:
            with self._lock, self._db.cursor() as cur:
                cur.execute(
                    self._q("SELECT count(*) FROM (SELECT FROM {s}.outputs AS o WHERE " + prunable + " LIMIT %s) AS d"),
                    (before, limit),  # LIMIT NULL: no limit
                )
                row = cur.fetchone()
            return int(row[0]) if row else 0
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
                cur.execute(
                    self._q(
                        "INSERT INTO {s}.node_blames (" + nodes.COLUMNS + ") VALUES (%s, %s, %s, %s, %s, %s)"
                        " ON CONFLICT DO NOTHING"
                    ),
                    nodes.values(b),
                )
                new += max(cur.rowcount, 0)
        return new

    def node_blames(self, cluster: str, since: float) -> list[NodeBlame]:
        with self._lock, self._db.cursor() as cur:
            cur.execute(
                self._q(
                    "SELECT " + nodes.COLUMNS + " FROM {s}.node_blames WHERE cluster = %s AND at >= %s"
                    " ORDER BY at, node, job_id, execution"
                ),
                (cluster, since),
            )
            rows = cur.fetchall()
        return [nodes.from_row(r) for r in rows]

    def clear_node_blames(self, cluster: str, node: str) -> int:
        with self._tx() as cur:
            cur.execute(self._q("DELETE FROM {s}.node_blames WHERE cluster = %s AND node = %s"), (cluster, node))
            return int(cur.rowcount)

    def prune_node_blames(self, cluster: str, before: float) -> int:
        with self._tx() as cur:
            cur.execute(self._q("DELETE FROM {s}.node_blames WHERE cluster = %s AND at < %s"), (cluster, before))
            return int(cur.rowcount)

    # ----- browsing (see dispatch.records.browse) --------------------------------------------------------------

    def find(self, query: JobQuery) -> Page:
        cond, args = where(query, "%s", "strpos")
        with self._lock, self._db.cursor() as cur:
            cur.execute(self._q("SELECT count(*) FROM {s}.jobs WHERE " + cond), args)
            (total,) = cur.fetchone() or (0,)
            cur.execute(
                self._q(
                    "SELECT "
                    + SUMMARY_COLUMNS
                    + " FROM {s}.jobs WHERE "
                    + cond
                    + " ORDER BY created_at DESC, id DESC LIMIT %s OFFSET %s"
                ),
                [*args, query.limit, query.offset],
            )
            rows = cur.fetchall()
        return Page([JobSummary.from_row(r) for r in rows], int(total))

    def tally(self, since: float) -> list[Count]:
        with self._lock, self._db.cursor() as cur:
            cur.execute(
                self._q(
                    "SELECT floor((created_at - %s) / 3600)::int AS h, state, cause, count(*) FROM {s}.jobs"
                    " WHERE created_at >= %s GROUP BY h, state, cause ORDER BY h"
                ),
                (since, since),
            )
            rows = cur.fetchall()
        return counts(rows)

    def leases(self) -> list[LeaseRow]:
        with self._lock, self._db.cursor() as cur:
            cur.execute(
                self._q(
                    "SELECT id, cluster, doc->'lease'->>'owner', (doc->'lease'->>'token')::bigint,"
                    " (doc->'lease'->>'expiresAt')::float8 FROM {s}.jobs"
                    " WHERE NOT closed AND jsonb_typeof(doc->'lease') = 'object' ORDER BY 3, id"
                )
            )
            rows = cur.fetchall()
        return [LeaseRow(r[0], r[1], r[2], int(r[3]), float(r[4])) for r in rows]

    def clusters(self) -> list[str]:
        with self._lock, self._db.cursor() as cur:
            cur.execute(self._q("SELECT DISTINCT cluster FROM {s}.jobs ORDER BY cluster"))
            return [r[0] for r in cur.fetchall()]

    def drop(self) -> None:
        """Drop this store's schema and everything in it (tests and benchmarks)."""
        with self._tx() as cur:
            cur.execute(self._q("DROP SCHEMA IF EXISTS {s} CASCADE"))

    def close(self) -> None:
        with self._lock:
            self._db.close()
