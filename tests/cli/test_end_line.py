"""The line ``dispatch run`` ends with: its outcome, and where to look next only when there is something there."""

from __future__ import annotations

from tests.cli.conftest import Env


def last_line(stderr: str) -> str:
    return stderr.strip().splitlines()[-1]


def test_a_success_without_stderr_points_nowhere(cli: Env) -> None:
    p = cli.run("run", "--", "true")
    assert p.returncode == 0, p.stderr
    line = last_line(p.stderr)
    assert " succeeded" in line and "stderr" not in line and "dispatch show" not in line


def test_stderr_is_pointed_at_only_when_there_is_some(cli: Env) -> None:
    p = cli.run("run", "--", "sh", "-c", "echo careful >&2")
    assert p.returncode == 0 and "careful" in p.stderr
    assert last_line(p.stderr).endswith("--stderr")
    p = cli.run("run", "--", "sh", "-c", "exit 2")
    line = last_line(p.stderr)
    assert p.returncode == 1 and "failed (exit code 2)" in line
    assert "--stderr" not in line and line.endswith(tuple(f"dispatch show {r['id']}" for r in cli.json("status")))
