"""``dispatch prune-outputs`` and ``dispatch supervise --archive-keep``: the output archive's retention from the
command line, on the configured record store (SQLite here; PostgreSQL in test_postgres_records.py)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from dispatch.cli.exitcodes import Exit
from dispatch.records import SQLiteRecords
from dispatch.records.archive import ArchivedOutput, ArchiveStatus

from ..records.test_contract import make_job
from .conftest import Env
from .test_cli import one_line_error

DAY = 86400.0


def seed(records: Any) -> None:
    """A closed job with entries archived 40 days, 31 days and 1 day ago, and an open job with one of 90 days."""
    done = make_job("done")
    done.closed = True
    records.create(done)
    records.create(make_job("open"))
    now = time.time()
    for job_id, age in (("done", 40 * DAY), ("done", 31 * DAY), ("done", DAY), ("open", 90 * DAY)):
        records.put_output(
            ArchivedOutput(
                job_id=job_id,
                execution=f"{job_id}.{int(age)}",
                submission=1,
                restart=0,
                status=ArchiveStatus.KEPT,
                archived_at=now - age,
                data=b"x" * 1000,
                size=1000,
            )
        )


def left(records: Any) -> list[tuple[str, str]]:
    return [(e.job_id, e.execution) for e in records.outputs(["done", "open"])]


def test_dry_run_counts_then_prune_deletes_old_output_of_closed_jobs_only(cli: Env) -> None:
    cli.records.parent.mkdir(parents=True)
    store = SQLiteRecords(cli.records)
    seed(store)
    before = left(store)
    dry = cli.json("prune-outputs", "--older-than", "30d", "--dry-run")
    assert (dry["dryRun"], dry["entries"], dry["olderThan"]) == (True, 2, 30 * DAY)
    assert left(store) == before
    p = cli.run("prune-outputs", "--older-than", "30d")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("deleted 2 archived outputs of closed jobs, archived before ")
    assert left(store) == [("done", "done.86400"), ("open", "open.7776000")]
    again = cli.json("prune-outputs", "--older-than", "720h")
    assert (again["dryRun"], again["entries"]) == (False, 0)
    assert cli.json("prune-outputs", "--older-than", str(3600))["entries"] == 1  # seconds: the one-day entry
    assert left(store) == [("open", "open.7776000")]
    store.close()


def test_no_records_yet_deletes_nothing_and_creates_nothing(cli: Env) -> None:
    p = cli.run("prune-outputs", "--older-than", "30d")
    assert p.returncode == 0 and "no records yet" in p.stderr
    assert not cli.records.exists()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("prune-outputs", "--older-than", "30days"), "'--older-than': '30days' is not a duration"),
        (("prune-outputs", "--older-than", "-1"), "'--older-than': a duration must be finite and not negative"),
        (("prune-outputs", "--older-than", "0"), "'--older-than': must be more than 0"),
        (("supervise", "--once", "--archive-keep", "a month"), "'--archive-keep': 'a month' is not a duration"),
    ],
)
def test_bad_durations_name_the_option(cli: Env, args: tuple[str, ...], words: str) -> None:
    p = cli.run(*args)
    assert p.returncode == Exit.USAGE, (p.stdout, p.stderr)
    assert words in one_line_error(p.stderr)


def test_supervise_with_archive_keep_prunes_in_its_cycle(cli: Env) -> None:
    cli.records.parent.mkdir(parents=True)
    store = SQLiteRecords(cli.records)
    seed(store)
    store.close()
    p = cli.run("supervise", "--once", "--archive-keep", "30d")
    assert p.returncode == 0, p.stderr
    (cycle,) = [json.loads(line)["cycle"] for line in p.stdout.splitlines() if '"cycle"' in line]
    assert (cycle["archivePruned"], cycle["archivePruneErrors"]) == (2, 0)
    store = SQLiteRecords(cli.records)
    assert left(store) == [("done", "done.86400"), ("open", "open.7776000")]
    store.close()
    p = cli.run("supervise", "--once")  # no --archive-keep: kept forever
    (cycle,) = [json.loads(line)["cycle"] for line in p.stdout.splitlines() if '"cycle"' in line]
    assert cycle["archivePruned"] == 0
