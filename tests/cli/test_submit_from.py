"""``dispatch submit --from FILE``: many jobs in one batch, on the embedded local cluster."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dispatch.cli.exitcodes import Exit
from dispatch.cli.main import cli
from dispatch.clock import SystemClock
from dispatch.errors import Unavailable
from dispatch.local import LocalBackend
from dispatch.records import SQLiteRecords

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


def test_submit_from_again_with_the_same_key_starts_nothing_twice(cli: Env) -> None:
    path = cli.home / "jobs.jsonl"
    path.write_text("".join(json.dumps({"command": ["sh", "-c", f"echo run-{n}"]}) + "\n" for n in range(3)))
    first = cli.json("submit", "--from", str(path), "--key", "sweep-7")
    assert first["key"] == "sweep-7" and first["complete"] and not any(j["existed"] for j in first["jobs"])
    again = cli.json("submit", "--from", str(path), "--key", "sweep-7")
    assert [j["job"] for j in again["jobs"]] == [j["job"] for j in first["jobs"]]
    assert all(j["existed"] and j["error"] is None for j in again["jobs"])
    rows = cli.json("status", "--all")
    assert sorted(r["id"] for r in rows) == sorted(j["job"] for j in first["jobs"])
    wait_until(lambda: all(r["state"] == "succeeded" for r in cli.json("status", "--all")))
    assert [cli.run("logs", j["job"]).stdout for j in first["jobs"]] == [f"run-{n}\n" for n in range(3)]
    other = cli.run("submit", "--from", str(path), "--key", "sweep-7", "--name", "x")
    assert other.returncode == Exit.USAGE
    path.write_text(json.dumps({"command": ["true"]}) + "\n")
    changed = cli.run("submit", "--from", str(path), "--key", "sweep-7")
    assert changed.returncode == Exit.CONFLICT and "was used for other jobs" in changed.stderr
    assert cli.run("submit", "--key", "k", "--", "true").returncode == Exit.USAGE


def test_an_incomplete_batch_says_how_to_finish_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In process: the record store fails the batch's first write (all the jobs with their start intents, one
    transaction: none is recorded); the command says the batch is incomplete, prints the command that finishes
    it, and exits 5; that command then finishes it, starting each job once. (A store that fails a later write
    leaves a complete batch: every job is recorded and a supervisor carries it on. The one-by-one path that fails
    halfway is tests/test_cluster_batch.py's.)"""
    env = {"XDG_CONFIG_HOME": str(tmp_path / "c"), "XDG_STATE_HOME": str(tmp_path / "s"), "NO_COLOR": "1"}
    path = tmp_path / "jobs.jsonl"
    path.write_text("".join(json.dumps({"command": ["true"], "name": f"j{n}"}) + "\n" for n in range(5)))
    real_create_many = SQLiteRecords.create_many

    def failing_create_many(self: SQLiteRecords, items: Sequence[Any]) -> Any:
        raise Unavailable("injected: the record store went away")

    monkeypatch.setattr(SQLiteRecords, "create_many", failing_create_many)
    r = CliRunner().invoke(cli, ["submit", "--from", str(path), "--key", "nightly", "--json"], env=env)
    assert r.exit_code == Exit.UNKNOWN, r.output
    data = json.loads(r.stdout)
    assert data["key"] == "nightly" and data["complete"] is False and data["jobs"] == []
    assert f"finish it with: dispatch submit --from {path} --key nightly" in r.stderr
    monkeypatch.setattr(SQLiteRecords, "create_many", real_create_many)
    r = CliRunner().invoke(cli, ["submit", "--from", str(path), "--key", "nightly", "--json"], env=env)
    assert r.exit_code == 0, r.output
    again = json.loads(r.stdout)
    assert again["complete"] and [j["existed"] for j in again["jobs"]] == [False] * 5
    local = LocalBackend(tmp_path / "s" / "dispatch" / "local", SystemClock())
    for job in again["jobs"]:
        assert len(local.find(f"dsp-{job['job']}-1", 0.0)) == 1, "each job created exactly once"
