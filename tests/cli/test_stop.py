"""``dispatch stop``: what it answers for a running job, with --wait, and for a job already closed."""

from __future__ import annotations

import json

from tests.cli.conftest import Env, wait_until

from dispatch.cli.exitcodes import Exit


def test_stop_wait_exits_0_once_the_job_has_ended_cancelled(cli: Env) -> None:
    job = cli.run("submit", "--", "sh", "-c", "echo up; sleep 30").stdout.strip()
    wait_until(lambda: "up" in cli.run("logs", job).stdout)
    p = cli.run("stop", job, "--wait")
    assert p.returncode == Exit.OK, p.stderr
    assert "stop requested" in p.stderr and f"job {job} cancelled" in p.stderr
    (row,) = cli.json("status", job)
    assert (row["state"], row["cause"], row["closed"]) == ("cancelled", "cancelled", True)


def test_stop_of_a_closed_job_says_so_with_its_outcome_and_exits_4(cli: Env) -> None:
    p = cli.run("run", "--", "sh", "-c", "exit 3")
    assert p.returncode == Exit.JOB_FAILED, p.stderr
    job = cli.json("status")[0]["id"]
    for args in (("stop", job), ("stop", job, "--wait")):
        p = cli.run(*args)
        assert p.returncode == Exit.REFUSED, p.stderr
        assert f"job {job} is already closed: nothing to stop" in p.stderr
        assert f"job {job} failed (exit code 3)" in p.stderr
        assert "stop requested" not in p.stderr
    events = [e["kind"] for e in cli.json("show", job)["events"]]
    assert "stop-requested" not in events  # nothing was written


def test_stop_of_a_job_that_ended_unobserved_says_it_is_closed(cli: Env) -> None:
    """Nobody observed the end (submit, no supervisor, no status): stop looks first, and finds nothing to stop."""
    from dispatch.clock import SystemClock
    from dispatch.local import LocalBackend

    job = cli.run("submit", "--", "true").stdout.strip()
    record = json.loads(cli.run("show", job, "--no-refresh", "--json").stdout)["job"]
    sid = record["submissions"][0]["schedulerId"]
    backend = LocalBackend(cli.local_state, SystemClock())
    wait_until(lambda: backend.inspect(sid).outcome.state.ended)
    assert not json.loads(cli.run("show", job, "--no-refresh", "--json").stdout)["job"]["closed"]
    p = cli.run("stop", job)
    assert p.returncode == Exit.REFUSED and f"job {job} succeeded" in p.stderr, p.stderr
