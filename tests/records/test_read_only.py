"""Read-only record stores: reads work, every write is refused by dispatch AND by the database itself."""

from __future__ import annotations

import os
import secrets
import sqlite3
from pathlib import Path

import psycopg
import pytest

from dispatch import JobSpec, NotFound, ReadOnly, Unavailable
from dispatch.records import Event, JobRecord, SQLiteRecords, Submission
from dispatch.records.postgres import PostgresRecords

POSTGRES_DSN = os.environ.get("DISPATCH_TEST_POSTGRES", "host=127.0.0.1 dbname=dispatch_test user=postgres")


def make_job(job_id: str = "j1") -> JobRecord:
    return JobRecord(
        id=job_id,
        cluster="c",
        spec=JobSpec(command=("echo", "hi"), name="n"),
        created_at=100.0,
        updated_at=100.0,
        submissions=[Submission(1, f"dsp-{job_id}-1", 100.0)],
    )


def test_sqlite_read_only_reads_and_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    rw = SQLiteRecords(path)
    rw.create(make_job(), [Event("j1", 100.0, "submitted")])
    ro = SQLiteRecords(path, read_only=True)
    try:
        job = ro.get("j1")
        assert job.spec.name == "n" and [e.kind for e in ro.events("j1")] == ["submitted"]
        assert [s.id for s in ro.summaries()] == ["j1"]
        with pytest.raises(ReadOnly):
            ro.create(make_job("j2"))
        job.closed = True
        with pytest.raises(ReadOnly):
            ro.update(job)
        # enforced below dispatch too: the connection itself cannot write
        with pytest.raises(sqlite3.OperationalError):
            ro._db.execute("UPDATE jobs SET state = 'failed'")
        # and it sees what a writer writes later
        rw.create(make_job("j2"))
        assert {s.id for s in ro.summaries()} == {"j1", "j2"}
    finally:
        ro.close()
        rw.close()
    assert rw_state(path) == "pending"


def rw_state(path: Path) -> str:
    with sqlite3.connect(path) as db:
        return str(db.execute("SELECT state FROM jobs WHERE id = 'j1'").fetchone()[0])


def test_sqlite_read_only_never_creates_a_store(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="no record store"):
        SQLiteRecords(tmp_path / "absent.db", read_only=True)
    assert not (tmp_path / "absent.db").exists()
    (tmp_path / "empty.db").touch()
    with pytest.raises(RuntimeError, match="no dispatch records"):
        SQLiteRecords(tmp_path / "empty.db", read_only=True)


@pytest.mark.postgres
def test_postgres_read_only_reads_and_refuses_writes() -> None:
    schema = f"t_{secrets.token_hex(6)}"
    try:
        rw = PostgresRecords(POSTGRES_DSN, schema=schema)
    except Unavailable as exc:
        pytest.fail(f"{exc}\nstart it with scripts/postgres-up.sh (the README's test command does)")
    try:
        rw.create(make_job(), [Event("j1", 100.0, "submitted")])
        ro = PostgresRecords(POSTGRES_DSN, schema=schema, read_only=True)
        try:
            job = ro.get("j1")
            assert [e.kind for e in ro.events("j1")] == ["submitted"]
            with pytest.raises(ReadOnly):
                ro.create(make_job("j2"))
            with pytest.raises(ReadOnly):
                ro.update(job)
            with pytest.raises(ReadOnly):
                ro.drop()
            with pytest.raises(psycopg.errors.ReadOnlySqlTransaction), ro._db.cursor() as cur:
                cur.execute(f"UPDATE {schema}.jobs SET state = 'failed'")
        finally:
            ro.close()
        assert rw.get("j1").state.value == "pending"
        with pytest.raises(RuntimeError, match="no dispatch records"):
            PostgresRecords(POSTGRES_DSN, schema=f"t_{secrets.token_hex(6)}", read_only=True)
    finally:
        rw.drop()
        rw.close()
