"""The SQL of the two SQL stores, written once: :mod:`dispatch.records.sqlite` and :mod:`dispatch.records.postgres`
send the same statements, built here from a :class:`Dialect` that holds every difference between the two.

A store builds its :class:`Statements` once, at open, and sends them as they are (no text is composed per call,
except the lists of ids, whose length varies). The stores keep what is not shared SQL text: the driver calls and
transactions, the migrations (each engine's column types), and the one statement each has alone (the prune of
the output archive: SQLite deletes by ``rowid``, PostgreSQL by ``ctid`` with ``SKIP LOCKED``).

The differences, all in the dialect: the placeholder (``?``, ``%s``); the tables' qualifier (none; the schema);
booleans (SQLite's 0/1 integers, PostgreSQL's ``BOOLEAN``); reading a field of the JSON document
(``json_extract``; ``->``/``->>`` with a cast) and changing one (``json_set``; ``jsonb_set``); how a JSON column
reads back (text to decode; decoded by the driver); locking the rows read before a write (SQLite's
``BEGIN IMMEDIATE`` locks the whole file; PostgreSQL's ``FOR UPDATE``, in id order so two batches never
deadlock); a list of ids (``IN (?, ...)`` in chunks under SQLite's parameter limit; one array with ``= ANY``);
the hour of a timestamp (truncated; floored); and the substring search (``instr``; ``strpos``). Both take
``ON CONFLICT ... DO NOTHING`` / ``DO UPDATE`` upserts and ``RETURNING`` as they are.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from dispatch.records import archive, nodes
from dispatch.records.browse import JobQuery, where
from dispatch.records.model import ROW_COLUMNS, SUMMARY_COLUMNS, Event

_ROW = [c.strip() for c in ROW_COLUMNS.split(",")]


class Dialect:
    """What one SQL engine spells its own way (the base class spells it as SQLite does)."""

    mark = "?"
    """The placeholder."""
    prefix = ""
    """What qualifies a table's name (PostgreSQL: the schema)."""
    lock = ""
    """What a ``SELECT`` ends with to lock the rows it reads until the transaction ends."""
    position = "instr"
    """The 1-based substring search ``f(haystack, needle)``."""
    chunk: int | None = 500
    """How many ids one ``IN`` list holds at most (None: one array parameter, any length)."""

    def table(self, name: str) -> str:
        return self.prefix + name

    def marks(self, n: int) -> str:
        return ", ".join([self.mark] * n)

    def true(self, column: str) -> str:
        """The condition that a boolean column is true."""
        return f"{column} = 1"

    def false(self, column: str) -> str:
        return f"{column} = 0"

    def field(self, *path: str, cast: str = "") -> str:
        """A field of the job's JSON document (``cast``: PostgreSQL's type for it; SQLite keeps JSON's own)."""
        return f"json_extract(doc, '$.{'.'.join(path)}')"

    def has_object(self, *path: str) -> str:
        """The condition that the document holds an object at ``path``."""
        return f"{self.field(*path)} IS NOT NULL"

    def renewed_doc(self) -> str:
        """The document with its version one up and its lease's expiry the statement's first argument."""
        return f"json_set(doc, '$.version', version + 1, '$.lease.expiresAt', {self.mark})"

    def hour(self) -> str:
        """Whole hours from the statement's argument to ``created_at`` (never negative where it is used)."""
        return f"CAST((created_at - {self.mark}) / 3600 AS INTEGER)"

    def any_of(self, column: str, n: int) -> str:
        """The condition that ``column`` is one of ``n`` ids (see :meth:`id_lists`)."""
        return f"{column} IN ({self.marks(n)})"

    def id_lists(self, ids: Sequence[str]) -> Iterator[tuple[int, Sequence[Any]]]:
        """``ids`` in lists of at most :attr:`chunk`: each list's length and the arguments that pass it."""
        assert self.chunk is not None
        for i in range(0, len(ids), self.chunk):
            part = list(ids[i : i + self.chunk])
            yield len(part), part

    def load(self, value: Any) -> Any:
        """A JSON column as the driver reads it, decoded."""
        return json.loads(value)


class PostgresDialect(Dialect):
    """PostgreSQL's spelling, the tables in ``schema`` (a name quoted as an identifier: ``"dispatch".``)."""

    mark = "%s"
    lock = " FOR UPDATE"
    position = "strpos"
    chunk = None

    def __init__(self, schema: str) -> None:
        self.prefix = schema + "."

    def true(self, column: str) -> str:
        return column

    def false(self, column: str) -> str:
        return f"NOT {column}"

    def field(self, *path: str, cast: str = "") -> str:
        text = f"{_json(path[:-1])}->>'{path[-1]}'"
        return f"({text})::{cast}" if cast else text

    def has_object(self, *path: str) -> str:
        return f"jsonb_typeof({_json(path)}) = 'object'"

    def renewed_doc(self) -> str:
        return (
            "jsonb_set(jsonb_set(doc, '{version}', to_jsonb(version + 1)),"
            f" '{{lease,expiresAt}}', to_jsonb({self.mark}::double precision))"
        )

    def hour(self) -> str:
        return f"floor((created_at - {self.mark}) / 3600)::int"

    def any_of(self, column: str, n: int) -> str:
        return f"{column} = ANY({self.mark})"

    def id_lists(self, ids: Sequence[str]) -> Iterator[tuple[int, Sequence[Any]]]:
        yield len(ids), (list(ids),)

    def load(self, value: Any) -> Any:
        return value


def _json(path: Sequence[str]) -> str:
    """PostgreSQL: the JSON value at ``path`` in the document."""
    return "doc" + "".join(f"->'{p}'" for p in path)


SQLITE = Dialect()


def event_rows(events: Sequence[Event]) -> list[tuple[str, float, str, str]]:
    """The rows :attr:`Statements.insert_event` appends for ``events``."""
    return [(e.job_id, e.at, e.kind, json.dumps(e.data, separators=(",", ":"))) for e in events]


class Statements:
    """Every statement the SQL stores share, in ``dialect``. Each attribute is one statement's text; each method
    builds one whose text depends on its arguments (the number of ids, the filters asked for), with the
    arguments to send."""

    def __init__(self, dialect: Dialect) -> None:
        d = self.dialect = dialect
        m = d.mark
        jobs, events, outputs = d.table("jobs"), d.table("events"), d.table("outputs")
        blames, supervisors = d.table("node_blames"), d.table("supervisors")
        token = d.field("lease", "token", cast="bigint")
        supervised = d.true("supervised")
        self._jobs = jobs
        self._token = token
        self._outputs = outputs

        # writes
        self.insert_job = (
            f"INSERT INTO {jobs} (id, {ROW_COLUMNS}) VALUES ({d.marks(len(_ROW) + 1)}) ON CONFLICT (id) DO NOTHING"
        )
        """A new job (its id, then :func:`~dispatch.records.model.row_values`); no row when the id is taken."""
        self.insert_job_returning = self.insert_job + " RETURNING id"
        self.head = f"SELECT version, {token}, lease_owner FROM {jobs} WHERE id = {m}{d.lock}"
        """What a write compares before it writes: the version, the lease's token and owner (locked)."""
        self.update_job = f"UPDATE {jobs} SET {', '.join(f'{c}={m}' for c in _ROW)} WHERE id={m}"
        """A job's row rewritten (:func:`~dispatch.records.model.row_values`, then the id)."""
        self.insert_event = f"INSERT INTO {events} (job_id, at, kind, data) VALUES ({d.marks(4)})"
        """One event (:func:`event_rows`)."""
        self.renew = (
            f"UPDATE {jobs} SET version = version + 1, lease_expires = {m}, doc = {d.renewed_doc()}"
            f" WHERE cluster = {m} AND {supervised} AND lease_owner = {m} AND lease_expires > {m}"
            " RETURNING id, version"
        )
        """Args: the new expiry (twice), the cluster, the owner, now."""
        self.peer_alive = (
            f"INSERT INTO {supervisors} (cluster, owner, until) VALUES ({d.marks(3)})"
            " ON CONFLICT (cluster, owner) DO UPDATE SET until = excluded.until"
        )
        self.peers_forgotten = f"DELETE FROM {supervisors} WHERE cluster = {m} AND until < {m}"
        self.peers = f"SELECT owner FROM {supervisors} WHERE cluster = {m} AND until > {m} ORDER BY owner"
        self.supervised_count = f"SELECT count(*) FROM {jobs} WHERE cluster = {m} AND {supervised}"

        # reads
        self.get = f"SELECT doc FROM {jobs} WHERE id = {m}"
        self.to_supervise = (
            f"SELECT id, version, lease_owner, lease_expires FROM {jobs} WHERE cluster = {m} AND {supervised}"
            f" AND (lease_owner IS NULL OR lease_owner = {m} OR lease_expires <= {m}) ORDER BY created_at, id"
        )
        self.events = f"SELECT seq, job_id, at, kind, data FROM {events} WHERE job_id = {m} AND seq > {m} ORDER BY seq"
        self.tally = (
            f"SELECT {d.hour()} AS h, state, cause, count(*) FROM {jobs}"
            f" WHERE created_at >= {m} GROUP BY h, state, cause ORDER BY h"
        )
        self.leases = (
            f"SELECT id, cluster, {d.field('lease', 'owner')}, {token}, {d.field('lease', 'expiresAt', cast='float8')}"
            f" FROM {jobs} WHERE {d.false('closed')} AND {d.has_object('lease')} ORDER BY 3, id"
        )
        self.clusters = f"SELECT DISTINCT cluster FROM {jobs} ORDER BY cluster"

        # the output archive
        self.put_output = archive.UPSERT.format(table=outputs, marks=d.marks(13))
        self.output = f"SELECT {archive.COLUMNS} FROM {outputs} WHERE job_id = {m} AND execution = {m}"
        self.output_with_data = f"SELECT {archive.COLUMNS}, data FROM {outputs} WHERE job_id = {m} AND execution = {m}"
        self.prunable = archive.PRUNABLE.format(jobs=jobs, mark=m)
        """The condition on ``outputs AS o`` of the entries a prune may delete (arg: the cutoff)."""

        # node blames
        self.add_blame = f"INSERT INTO {blames} ({nodes.COLUMNS}) VALUES ({d.marks(6)}) ON CONFLICT DO NOTHING"
        self.node_blames = (
            f"SELECT {nodes.COLUMNS} FROM {blames} WHERE cluster = {m} AND at >= {m}"
            " ORDER BY at, node, job_id, execution"
        )
        self.clear_blames = f"DELETE FROM {blames} WHERE cluster = {m} AND node = {m}"
        self.prune_blames = f"DELETE FROM {blames} WHERE cluster = {m} AND at < {m}"

    def heads(self, n: int) -> str:
        """The heads (id, then :attr:`head`'s columns) of ``n`` jobs (:meth:`Dialect.id_lists`), locked in id
        order where the dialect locks."""
        order = f" ORDER BY id{self.dialect.lock}" if self.dialect.lock else ""
        return (
            f"SELECT id, version, {self._token}, lease_owner FROM {self._jobs}"
            f" WHERE {self.dialect.any_of('id', n)}{order}"
        )

    def docs(self, n: int) -> str:
        """The documents of ``n`` jobs (:meth:`Dialect.id_lists`)."""
        return f"SELECT doc FROM {self._jobs} WHERE {self.dialect.any_of('id', n)}"

    def outputs(self, n: int) -> str:
        """The archive's entries (no data) of ``n`` jobs (:meth:`Dialect.id_lists`)."""
        return (
            f"SELECT {archive.COLUMNS} FROM {self._outputs} WHERE {self.dialect.any_of('job_id', n)}"
            " ORDER BY job_id, submission, archived_at"
        )

    def jobs(self, *, active_only: bool, cluster: str | None) -> tuple[str, list[Any]]:
        """The documents of the jobs asked for, oldest first."""
        text, args = self._filtered("doc", active_only, cluster)
        return text + " ORDER BY created_at, id", args

    def summaries(self, *, active_only: bool, cluster: str | None, limit: int | None) -> tuple[str, list[Any]]:
        """The summary rows of the jobs asked for, newest first."""
        text, args = self._filtered(SUMMARY_COLUMNS, active_only, cluster)
        text += " ORDER BY created_at DESC, id DESC"
        if limit is not None:
            text += f" LIMIT {self.dialect.mark}"
            args.append(limit)
        return text, args

    def find(self, query: JobQuery) -> tuple[str, str, list[Any]]:
        """The count of the jobs ``query`` matches, and the rows of its page (its args, then limit and offset)."""
        cond, args = where(query, self.dialect.mark, self.dialect.position)
        m = self.dialect.mark
        count = f"SELECT count(*) FROM {self._jobs} WHERE {cond}"
        page = (
            f"SELECT {SUMMARY_COLUMNS} FROM {self._jobs} WHERE {cond}"
            f" ORDER BY created_at DESC, id DESC LIMIT {m} OFFSET {m}"
        )
        return count, page, args

    def _filtered(self, columns: str, active_only: bool, cluster: str | None) -> tuple[str, list[Any]]:
        text = f"SELECT {columns} FROM {self._jobs} WHERE 1=1"
        args: list[Any] = []
        if active_only:
            text += f" AND {self.dialect.false('closed')}"
        if cluster is not None:
            text += f" AND cluster = {self.dialect.mark}"
            args.append(cluster)
        return text, args
