"""``dispatch show --timeline`` on records of real runs (the local adapter, the memory adapter's supervisor)."""

from __future__ import annotations

import sys

from dispatch.records import SQLiteRecords
from dispatch.ui import scenarios

from .conftest import Env


def test_show_timeline_of_a_local_run(cli: Env) -> None:
    p = cli.run("run", "--name", "tl", "--", sys.executable, "-c", "print('hi')")
    assert p.returncode == 0, p.stderr
    (row,) = cli.json("status")
    p = cli.run("show", "--timeline", row["id"])
    assert p.returncode == 0, p.stderr
    lane = next(line for line in p.stdout.splitlines() if line.startswith("#1"))
    assert "#" in lane[8:]
    assert "succeeded (exit 0)" in p.stdout


def test_show_timeline_of_a_resubmitted_job(cli: Env) -> None:
    records = SQLiteRecords(cli.records)
    m = scenarios.memory(records)
    job_id = scenarios.preempted_then_resubmitted(m)
    records.close()
    cli.config.write_text('[clusters.sim]\nadapter = "memory"\n')
    p = cli.run("show", "--no-refresh", "--timeline", job_id)
    assert p.returncode == 0, p.stderr
    assert "failed (preempted)" in p.stdout and "succeeded (exit 0)" in p.stdout
    assert "resubmit" in p.stdout and "rule evicted" in p.stdout
