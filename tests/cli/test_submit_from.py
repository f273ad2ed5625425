"""``dispatch submit --from FILE``: many jobs in one batch, on the embedded local cluster."""

from __future__ import annotations

import json

from dispatch.cli.exitcodes import Exit

from .conftest import Env, wait_until


def test_submit_from_a_sweep_records_every_job(cli: Env) -> None:
    sweep = {"sweep": {"n": [1, 2, 3]}, "spec": {"command": ["sh", "-c", "echo run-{n}"], "name": "s{n}"}}
    path = cli.home / "sweep.json"
    path.write_text(json.dumps(sweep))
    p = cli.run("submit", "--from", str(path), "--json")
    assert p.returncode == 0, p.stderr
    jobs = [j["job"] for j in json.loads(p.stdout)["jobs"]]
    assert len(set(jobs)) == 3
    wait_until(lambda: all(cli.json("status", j)[0]["state"] == "succeeded" for j in jobs))
    assert [cli.run("logs", j).stdout.strip() for j in jobs] == ["run-1", "run-2", "run-3"]


def test_submit_from_refuses_a_command_too(cli: Env) -> None:
    path = cli.home / "jobs.jsonl"
    path.write_text('{"command": ["true"]}\n')
    p = cli.run("submit", "--from", str(path), "-N", "2", "--", "true")
    assert p.returncode == Exit.USAGE and "--from FILE describes every job itself" in p.stderr
    p = cli.run("submit", "--from", str(path), "--dry-run")
    assert p.returncode == 0 and "nothing was recorded" in p.stderr


def test_submit_from_a_bad_line_submits_nothing(cli: Env) -> None:
    path = cli.home / "jobs.jsonl"
    path.write_text('{"command": ["true"]}\n{"command": "true"}\n')
    p = cli.run("submit", "--from", str(path))
    assert p.returncode == Exit.USAGE and "line 2" in p.stderr
    assert cli.json("status") == []
