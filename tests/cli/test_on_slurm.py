"""The user's commands on the real Slurm clusters (22.05 on the host, 26.05 over SSH), configured as a new
user would: the cluster's settings in config.toml and no preflight cache, so ``dispatch logs`` (a read-only
open) has no accounting to ask. Fails loudly when a cluster is down (tests/slurm/clusters.py)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from dispatch.cli.exitcodes import Exit
from dispatch.slurm.harness import settings_for

from ..slurm.clusters import admin, description
from .conftest import Env

CLUSTERS = [
    pytest.param("local", marks=pytest.mark.slurm_local, id="22.05"),
    pytest.param("sid", marks=pytest.mark.slurm_sid, id="26.05-ssh"),
]


def _toml(table: str, values: dict[str, Any]) -> str:
    lines = [f"[{table}]"]
    nested = []
    for key, value in values.items():
        if isinstance(value, dict):
            nested.append(_toml(f"{table}.{key}", value))
        elif value is not None:
            lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n" + "".join(nested)


def on(cli: Env, name: str) -> Env:
    """``cli`` with cluster ``slurm`` (test cluster ``name``, no preflight cache) as the default."""
    settings = settings_for(description(name))
    settings.pop("preflight")
    head = 'default = "slurm"\n[clusters.slurm]\nadapter = "slurm"\n'
    cli.config.write_text(head + _toml("clusters.slurm.settings", settings))
    return cli


def run(cli: Env, *argv: str, timeout: float = 180.0) -> tuple[int, dict[str, Any]]:
    p = cli.run("run", "--json", *argv, timeout=timeout)
    assert p.returncode in (0, 1), p.stderr
    return p.returncode, json.loads(p.stdout)


def wait_purged(name: str, sid: str, timeout: float = 150.0) -> None:
    end = time.time() + timeout
    while True:
        r = admin(name, "squeue", "-h", "-t", "all", "-j", sid, check=False)
        if r.returncode != 0 or not r.stdout.strip():
            return
        assert time.time() < end, "the job was never purged from squeue"
        time.sleep(3)


@pytest.mark.parametrize("name", CLUSTERS)
def test_logs_after_the_scheduler_forgot_the_job_and_one_rank_refused(cli: Env, name: str) -> None:
    on(cli, name)
    code, out = run(cli, "--", "bash", "-c", "echo hello; echo oops >&2")
    assert code == 0, out
    job = out["id"]
    sid = out["execution"].split(".")[1]  # <submission>.<Slurm job id>.<restart>
    wait_purged(name, sid)
    p = cli.run("logs", job)
    assert (p.returncode, p.stdout) == (0, "hello\n"), p.stderr
    p = cli.run("logs", job, "--stderr")
    assert (p.returncode, p.stdout) == (0, "oops\n"), p.stderr
    p = cli.run("logs", job, "--rank", "0")
    assert p.returncode == Exit.REFUSED, p.stderr
    assert "one stdout and one stderr file per execution" in p.stderr, p.stderr
