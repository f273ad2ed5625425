"""The one records setting: $DISPATCH_RECORDS over the file's ``records`` over the default SQLite file, and
``open_records`` opening SQLite or PostgreSQL from it, writable or read-only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dispatch.cli.config import is_postgres, load, open_records, postgres_target
from dispatch.errors import ConfigError, NotFound, ReadOnly
from dispatch.records import JobRecord, SQLiteRecords
from dispatch.spec import JobSpec

POSTGRES_DSN = os.environ.get("DISPATCH_TEST_POSTGRES", "host=127.0.0.1 dbname=dispatch_test user=postgres")


def test_the_setting_comes_from_the_environment_then_the_file_then_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("DISPATCH_RECORDS", raising=False)
    cfg = tmp_path / "config.toml"
    cfg.write_text('records = "postgresql://u@h/db?schema=team"\n')
    assert load(cfg).records == "postgresql://u@h/db?schema=team"
    monkeypatch.setenv("DISPATCH_RECORDS", "/srv/records.db")
    assert load(cfg).records == "/srv/records.db"
    monkeypatch.delenv("DISPATCH_RECORDS")
    cfg.write_text("")
    assert load(cfg).records == str(tmp_path / "state" / "dispatch" / "records.db")
    cfg.write_text('records = "relative.db"\n')
    with pytest.raises(ConfigError, match="records"):
        load(cfg)


def test_postgres_settings_and_their_schema() -> None:
    assert is_postgres("postgresql://u@h/db") and is_postgres("host=h dbname=d") and not is_postgres("/x/y.db")
    assert postgres_target("postgresql://u@h:5/db?schema=s1&sslmode=require") == (
        "postgresql://u@h:5/db?sslmode=require",
        "s1",
    )
    assert postgres_target("host=h schema=s2 dbname=d") == ("host=h dbname=d", "s2")
    assert postgres_target("host=h dbname=d") == ("host=h dbname=d", "dispatch")


def test_read_only_sqlite_reads_and_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    with pytest.raises(NotFound):
        open_records(str(path), read_only=True)
    assert not path.exists()
    w = SQLiteRecords(path)
    w.create(JobRecord("j1", "c", JobSpec(command=("true",)), 1.0))
    r = open_records(str(path), read_only=True)
    assert r.get("j1").id == "j1" and [s.id for s in r.summaries()] == ["j1"]
    with pytest.raises(ReadOnly):
        r.update(r.get("j1"))
    r.close()
    w.close()


@pytest.mark.postgres
def test_postgres_opens_from_the_setting_writable_and_read_only() -> None:
    import secrets

    schema = f"t_{secrets.token_hex(5)}"
    setting = f"{POSTGRES_DSN} schema={schema}"
    with pytest.raises(ConfigError, match="open it writable"):
        open_records(setting, read_only=True)
    w = open_records(setting)
    try:
        w.create(JobRecord("j1", "c", JobSpec(command=("true",)), 1.0))
        r = open_records(setting, read_only=True)
        assert [s.id for s in r.summaries()] == ["j1"]
        with pytest.raises(ReadOnly):
            r.update(r.get("j1"))
        r.close()
    finally:
        w.drop()  # type: ignore[attr-defined]
        w.close()
