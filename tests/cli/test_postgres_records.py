"""The ``dispatch`` command end to end over PostgreSQL records (``DISPATCH_RECORDS``): submit, status, show,
logs and supervise, each a real subprocess, all reading and writing one PostgreSQL schema."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import Env, wait_until

pytestmark = pytest.mark.postgres

DSN = os.environ.get("DISPATCH_TEST_POSTGRES", "host=127.0.0.1 dbname=dispatch_test user=postgres")


@pytest.fixture
def pg(cli: Env) -> Iterator[Env]:
    from dispatch.errors import Unavailable
    from dispatch.records.postgres import PostgresRecords

    schema = f"cli_{secrets.token_hex(5)}"
    try:
        store = PostgresRecords(DSN, schema=schema)
    except Unavailable as exc:
        pytest.fail(f"{exc}\nstart it with scripts/postgres-up.sh (the README's test command does)")
    cli.env["DISPATCH_RECORDS"] = f"{DSN} schema={schema}"
    try:
        yield cli
    finally:
        store.drop()
        store.close()


def test_submit_status_show_logs_and_supervise_over_postgres(pg: Env, tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text(
        'unmatched = "close"\n[[rules]]\ncause = "exit"\nexitCodes = [75]\naction = "requeue"\nlimit = 2\n'
    )
    script = '[ "$DISPATCH_RESTART" = 0 ] && exit 75; echo recovered $DISPATCH_EXECUTION'
    p = pg.run("submit", "--rules", str(rules), "-N", "2", "--", "sh", "-c", script)
    assert p.returncode == 0, p.stderr
    job = p.stdout.strip()
    assert not pg.records.exists()  # nothing went to the SQLite default
    assert [r["id"] for r in pg.json("status", "--no-refresh")] == [job]
    sup = pg.popen("supervise", "--poll", "0.5")
    try:
        wait_until(lambda: pg.json("status", job)[0]["state"] == "succeeded", timeout=40)
    finally:
        sup.send_signal(signal.SIGINT)
        out, err = sup.communicate(timeout=15)
    assert sup.returncode == 0, err
    assert '"cycle"' in out
    record = pg.json("show", job)["job"]
    assert [e["restart"] for e in record["submissions"][0]["executions"]] == [0, 1]
    assert record["decisions"][0]["action"] == "requeue"
    assert sorted(pg.run("logs", job, "-r", "1").stdout.split()) == sorted(
        f"recovered {record['submissions'][0]['executions'][1]['identity']}".split()
    )
    assert pg.run("logs", job, "-r", "0", "-e", "0").stdout == ""
    assert pg.json("clusters")["records"].endswith(pg.env["DISPATCH_RECORDS"].split()[-1])


def test_python_m_dispatch_supervise_is_the_same_command(pg: Env) -> None:
    env = dict(pg.env)
    a = subprocess.run([sys.executable, "-m", "dispatch.supervise", "--help"], env=env, capture_output=True, text=True)
    b = pg.run("supervise", "--help")
    assert a.returncode == b.returncode == 0
    assert a.stdout.split("\n", 1)[1] == b.stdout.split("\n", 1)[1]  # the usage line names the program
    once = subprocess.run(
        [sys.executable, "-m", "dispatch.supervise", "--once", "--owner", "alias"],
        env=env,
        cwd=pg.home,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert once.returncode == 0, once.stderr
    assert '"owner": "alias", "cycle"' in once.stdout


def test_a_bad_records_setting_is_one_clear_line(cli: Env) -> None:
    cli.env["DISPATCH_RECORDS"] = "host=127.0.0.1 port=1 dbname=nope user=postgres password=hunter2"
    p = cli.run("status")
    assert p.returncode == 6, p.stderr  # Exit.UNAVAILABLE
    assert "cannot connect to PostgreSQL" in p.stderr and "hunter2" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_prune_outputs_over_postgres(pg: Env) -> None:
    from dispatch.records.postgres import PostgresRecords

    from .test_prune_outputs import left, seed

    dsn, schema = pg.env["DISPATCH_RECORDS"].rsplit(" schema=", 1)
    store = PostgresRecords(dsn, schema=schema)
    try:
        seed(store)
        assert pg.json("prune-outputs", "--older-than", "30d", "--dry-run")["entries"] == 2
        assert len(left(store)) == 4
        assert pg.json("prune-outputs", "--older-than", "30d")["entries"] == 2
        assert left(store) == [("done", "done.86400"), ("open", "open.7776000")]
    finally:
        store.close()
