"""The output archive of every store: one entry per (job, execution), final once kept or gone, bytes intact."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dispatch import ReadOnly
from dispatch.records import MemoryRecords, SQLiteRecords
from dispatch.records.archive import ArchivedOutput, ArchiveStatus, OutputArchive
from dispatch.records.postgres import PostgresRecords
from dispatch.records.sqlite import SCHEMA_VERSION as SQLITE_SCHEMA

from .test_contract import POSTGRES_DSN, make_job, postgres_store

DATA = bytes(range(256)) * 40 + b"\x00tail\n"


def entry(status: ArchiveStatus = ArchiveStatus.KEPT, execution: str = "j1.1.1.0.0", **kw: object) -> ArchivedOutput:
    base: dict[str, object] = {
        "job_id": "j1",
        "execution": execution,
        "submission": 1,
        "restart": 0,
        "status": status,
        "archived_at": 100.0,
    }
    if status is ArchiveStatus.KEPT:
        base.update(data=DATA, size=len(DATA) + 10, truncated=True, reason="the last bytes")
    else:
        base.update(reason=f"{status.value} for a reason")
    base.update(kw)
    return ArchivedOutput(**base)  # type: ignore[arg-type]


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OutputArchive]:
    s: MemoryRecords | SQLiteRecords | PostgresRecords
    if request.param == "memory":
        s = MemoryRecords()
    elif request.param == "sqlite":
        s = SQLiteRecords(tmp_path / "r.db")
    else:
        s = postgres_store()
    assert isinstance(s, OutputArchive)
    yield s
    if isinstance(s, PostgresRecords):
        s.drop()
    s.close()


def test_kept_output_round_trips_byte_for_byte(store: OutputArchive) -> None:
    stored = store.put_output(entry())
    assert stored.data == b"" and stored.status is ArchiveStatus.KEPT and stored.attempts == 1
    got = store.get_output("j1", "j1.1.1.0.0")
    assert got is not None
    assert got.data == DATA
    assert (got.size, got.truncated, got.submission, got.restart, got.rank, got.stream) == (
        len(DATA) + 10,
        True,
        1,
        0,
        0,
        "stdout",
    )
    assert store.get_output("j1", "j1.1.2.0.0") is None
    assert store.get_output("other", "j1.1.1.0.0") is None


def test_a_final_entry_is_never_replaced(store: OutputArchive) -> None:
    store.put_output(entry())
    again = store.put_output(entry(ArchiveStatus.GONE, archived_at=200.0))
    assert again.status is ArchiveStatus.KEPT and again.archived_at == 100.0 and again.attempts == 1
    got = store.get_output("j1", "j1.1.1.0.0")
    assert got is not None and got.data == DATA
    store.put_output(entry(ArchiveStatus.GONE, execution="j1.1.2.0.0"))
    later = store.put_output(entry(execution="j1.1.2.0.0"))
    assert later.status is ArchiveStatus.GONE


def test_a_failed_entry_is_replaced_and_its_attempts_counted(store: OutputArchive) -> None:
    first = store.put_output(entry(ArchiveStatus.FAILED))
    assert (first.status, first.attempts) == (ArchiveStatus.FAILED, 1)
    second = store.put_output(entry(ArchiveStatus.FAILED, archived_at=150.0, reason="again"))
    assert (second.status, second.attempts, second.reason) == (ArchiveStatus.FAILED, 2, "again")
    third = store.put_output(entry(archived_at=160.0))
    assert (third.status, third.attempts, third.archived_at) == (ArchiveStatus.KEPT, 3, 160.0)
    got = store.get_output("j1", "j1.1.1.0.0")
    assert got is not None and got.data == DATA


def test_listing_is_per_job_without_data(store: OutputArchive) -> None:
    store.put_output(entry(execution="j1.2.1.0.0", submission=2, archived_at=300.0))
    store.put_output(entry(execution="j1.1.1.0.0", archived_at=200.0))
    store.put_output(entry(ArchiveStatus.GONE, job_id="j2", execution="j2.1.1.0.0"))
    rows = store.outputs(["j1", "missing"])
    assert [(r.execution, r.submission, r.data) for r in rows] == [("j1.1.1.0.0", 1, b""), ("j1.2.1.0.0", 2, b"")]
    assert [r.status for r in store.outputs(["j2"])] == [ArchiveStatus.GONE]
    assert store.outputs([]) == []


def test_sqlite_read_only_store_reads_and_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    w = SQLiteRecords(path)
    w.put_output(entry())
    w.close()
    r = SQLiteRecords(path, read_only=True)
    try:
        got = r.get_output("j1", "j1.1.1.0.0")
        assert got is not None and got.data == DATA
        with pytest.raises(ReadOnly):
            r.put_output(entry(execution="x.1.1.0.0"))
    finally:
        r.close()


def rewound(path: Path, undo: str, version: int) -> SQLiteRecords:
    """A SQLite store made at the current schema, then taken back to ``version`` by ``undo`` (what that schema
    did not have yet), and opened again: the migrations since ``version`` run."""
    SQLiteRecords(path).close()
    db = sqlite3.connect(path)
    db.execute(undo)
    db.execute(f"PRAGMA user_version={version}")
    db.commit()
    db.close()
    return SQLiteRecords(path)


def test_sqlite_store_of_the_previous_schema_gains_the_archive(tmp_path: Path) -> None:
    s = rewound(tmp_path / "old.db", "DROP TABLE outputs", 4)
    try:
        assert s.schema_version() == SQLITE_SCHEMA
        s.put_output(entry())
        assert s.outputs(["j1"])[0].status is ArchiveStatus.KEPT
    finally:
        s.close()


# ----- retention: prune_outputs ------------------------------------------------------------------------------


def with_jobs(store: OutputArchive) -> None:
    """Job ``open`` (open) and job ``done`` (closed), each with entries archived at 100, 200 and 300."""
    done = make_job("done")
    done.closed = True
    records: Any = store
    records.create(make_job("open"))
    records.create(done)
    for job_id in ("open", "done"):
        for at in (100.0, 200.0, 300.0):
            store.put_output(entry(job_id=job_id, execution=f"{job_id}.1.{int(at)}.0.0", archived_at=at))


def kept(store: OutputArchive) -> list[tuple[str, float]]:
    return [(e.job_id, e.archived_at) for e in store.outputs(["open", "done"])]


def test_prune_deletes_old_entries_of_closed_jobs_only(store: OutputArchive) -> None:
    with_jobs(store)
    assert store.prune_outputs(250.0) == 2
    assert kept(store) == [("done", 300.0), ("open", 100.0), ("open", 200.0), ("open", 300.0)]
    got = store.get_output("done", "done.1.300.0.0")
    assert got is not None and got.data == DATA  # what is kept is intact


def test_prune_is_idempotent(store: OutputArchive) -> None:
    with_jobs(store)
    assert store.prune_outputs(250.0) == 2
    assert store.prune_outputs(250.0) == 0
    assert len(kept(store)) == 4


def test_prune_honours_its_limit_oldest_first(store: OutputArchive) -> None:
    with_jobs(store)
    assert store.prune_outputs(1000.0, limit=2) == 2
    assert [at for job, at in kept(store) if job == "done"] == [300.0]
    assert store.prune_outputs(1000.0, limit=2) == 1
    assert store.prune_outputs(1000.0, limit=2) == 0
    assert [job for job, _ in kept(store)] == ["open"] * 3
    for bad in (0, -1):
        with pytest.raises(ValueError, match="limit"):
            store.prune_outputs(1000.0, limit=bad)


def test_a_dry_run_counts_and_deletes_nothing(store: OutputArchive) -> None:
    with_jobs(store)
    assert store.prune_outputs(250.0, dry_run=True) == 2
    assert store.prune_outputs(1000.0, dry_run=True) == 3
    assert store.prune_outputs(1000.0, limit=2, dry_run=True) == 2
    assert len(kept(store)) == 6
    assert store.prune_outputs(250.0) == 2


def test_a_closed_job_still_followed_keeps_its_entries(store: OutputArchive) -> None:
    from dispatch.records import Action, Intent

    job = make_job("stopping")
    job.closed = True
    job.intents.append(Intent(1, Action.STOP, 1, "sup-a", 50.0, 80.0))  # open: a supervisor still follows it
    records: Any = store
    records.create(job)
    store.put_output(entry(job_id="stopping", execution="stopping.1.1.0.0", archived_at=10.0))
    store.put_output(entry(job_id="gone-from-records", execution="g.1.1.0.0", archived_at=10.0))
    assert store.prune_outputs(1000.0) == 1
    assert [e.job_id for e in store.outputs(["stopping", "gone-from-records"])] == ["stopping"]


def test_sqlite_prune_reads_the_archive_time_index_and_no_whole_table(tmp_path: Path) -> None:
    s = SQLiteRecords(tmp_path / "r.db")
    try:
        with_jobs(s)
        ran: list[str] = []
        s._db.set_trace_callback(ran.append)  # the statements as executed, values bound
        assert s.prune_outputs(250.0, limit=10) == 2
        s._db.set_trace_callback(None)
        (delete,) = [q for q in ran if q.startswith("DELETE")]
        plan = [str(row[-1]) for row in s._db.execute("EXPLAIN QUERY PLAN " + delete)]
        assert "SEARCH o USING INDEX outputs_archived (archived_at<?)" in plan, plan
        assert not [step for step in plan if step.startswith("SCAN")], plan
    finally:
        s.close()


def test_sqlite_read_only_store_counts_but_does_not_prune(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    w = SQLiteRecords(path)
    with_jobs(w)
    w.close()
    r = SQLiteRecords(path, read_only=True)
    try:
        assert r.prune_outputs(250.0, dry_run=True) == 2
        with pytest.raises(ReadOnly):
            r.prune_outputs(250.0)
    finally:
        r.close()


@pytest.mark.postgres
def test_postgres_concurrent_prunes_delete_each_entry_once() -> None:
    from concurrent.futures import ThreadPoolExecutor

    a = postgres_store()
    others = [PostgresRecords(POSTGRES_DSN, schema=a.schema) for _ in range(3)]
    try:
        done = make_job("done")
        done.closed = True
        a.create(done)
        for i in range(200):
            a.put_output(entry(job_id="done", execution=f"done.1.{i}.0.0", archived_at=float(i)))

        def drain(s: PostgresRecords) -> int:
            total = 0
            while (n := s.prune_outputs(1000.0, limit=7)) > 0:
                total += n
            return total

        with ThreadPoolExecutor(len(others)) as pool:
            counts = list(pool.map(drain, others))
        assert sum(counts) == 200 and a.outputs(["done"]) == []
    finally:
        for o in others:
            o.close()
        a.drop()
        a.close()


def test_sqlite_store_of_the_previous_schema_gains_the_retention_index(tmp_path: Path) -> None:
    s = rewound(tmp_path / "old.db", "DROP INDEX outputs_archived", 5)
    try:
        assert s.schema_version() == SQLITE_SCHEMA
        names = [r[0] for r in s._db.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'outputs'")]
        assert "outputs_archived" in names
    finally:
        s.close()


@pytest.mark.postgres
def test_postgres_store_of_the_previous_schema_gains_the_retention_index() -> None:
    from dispatch.records.postgres import SCHEMA_VERSION as PG_SCHEMA

    s = postgres_store()
    try:
        with s._tx() as cur:
            cur.execute(s._q("DROP INDEX {s}.outputs_archived"))
            cur.execute(s._q("UPDATE {s}.meta SET value = '4' WHERE key = 'schema_version'"))
        again = PostgresRecords(POSTGRES_DSN, schema=s.schema)
        try:
            assert again.schema_version() == PG_SCHEMA
            with again._tx() as cur:
                cur.execute("SELECT indexname FROM pg_indexes WHERE schemaname = %s", (s.schema,))
                assert "outputs_archived" in {r[0] for r in cur.fetchall()}
        finally:
            again.close()
    finally:
        s.drop()
        s.close()


@pytest.mark.postgres
def test_postgres_prune_can_read_the_archive_time_index_and_deletes_by_ctid() -> None:
    from dispatch.records import archive
    from dispatch.records.postgres import PRUNE

    s = postgres_store()
    try:
        with_jobs(s)
        with s._tx() as cur:
            cur.execute("SET LOCAL enable_seqscan = off")  # a small table: ask whether the index can serve at all
            prunable = archive.PRUNABLE.format(jobs="{s}.jobs", mark="%s")
            cur.execute(s._q("EXPLAIN " + PRUNE.format(prunable=prunable)), (250.0, 10))
            plan = "\n".join(r[0] for r in cur.fetchall())
        assert "Index Scan using outputs_archived on outputs o" in plan, plan
        assert "Tid Scan on outputs" in plan and "Seq Scan on outputs" not in plan, plan
    finally:
        s.drop()
        s.close()
