"""The output archive of every store: one entry per (job, execution), final once kept or gone, bytes intact."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from dispatch import ReadOnly
from dispatch.records import MemoryRecords, SQLiteRecords
from dispatch.records.archive import ArchivedOutput, ArchiveStatus, OutputArchive
from dispatch.records.postgres import PostgresRecords

from .test_contract import postgres_store

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


def test_sqlite_store_of_the_previous_schema_gains_the_archive(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    SQLiteRecords(path).close()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE outputs")
    db.execute("PRAGMA user_version=4")
    db.commit()
    db.close()
    s = SQLiteRecords(path)
    try:
        assert s.schema_version() == 5
        s.put_output(entry())
        assert s.outputs(["j1"])[0].status is ArchiveStatus.KEPT
    finally:
        s.close()
