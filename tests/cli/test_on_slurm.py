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
def test_logs_after_the_scheduler_forgot_the_job(cli: Env, name: str) -> None:
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


SHOW = (
    'printf "%s\\n" "rank=$RANK world=$WORLD_SIZE local=$LOCAL_RANK/$LOCAL_WORLD_SIZE node=$NODE_RANK/$GROUP_RANK '
    "master=$MASTER_ADDR:$MASTER_PORT ours=$DISPATCH_RANK/$DISPATCH_WORLD_SIZE@$DISPATCH_NODE "
    'exec=$DISPATCH_SCHEDULER_ID.$DISPATCH_RESTART"'
)


@pytest.mark.parametrize("name", CLUSTERS)
def test_every_rank_gets_the_rank_environment_and_one_rank_is_refused(cli: Env, name: str) -> None:
    """2 nodes x 2 ranks: the variables the local adapter and torchrun set, node by node; one rendezvous."""
    on(cli, name)
    code, out = run(cli, "-N", "2", "-p", "2", "--", "bash", "-u", "-c", SHOW)
    assert code == 0, out
    sid = out["execution"].split(".")[1]
    p = cli.run("logs", out["id"])
    assert p.returncode == 0, p.stderr
    lines = sorted(p.stdout.splitlines())
    assert len(lines) == 4, lines
    fields = [dict(w.split("=", 1) for w in line.split()) for line in lines]
    masters = {f["master"] for f in fields}
    assert len(masters) == 1 and masters.pop().endswith(f":{20000 + int(sid) % 12000}"), fields
    nodes = {}
    for rank, f in enumerate(fields):
        node_rank, local = divmod(rank, 2)
        assert f["rank"] == str(rank) and f["world"] == "4", f
        assert f["local"] == f"{local}/2" and f["node"] == f"{node_rank}/{node_rank}", f
        ours, _, node = f["ours"].partition("@")
        assert ours == f"{rank}/4" and node, f
        nodes.setdefault(node_rank, set()).add(node)
        assert f["exec"] == f"{sid}.0", f
    assert all(len(v) == 1 for v in nodes.values()) and nodes[0] != nodes[1], nodes
    p = cli.run("logs", out["id"], "--rank", "0")
    assert p.returncode == Exit.REFUSED, p.stderr
    assert "one stdout and one stderr file per execution" in p.stderr, p.stderr


@pytest.mark.parametrize("name", CLUSTERS)
def test_a_failed_rank_reports_its_own_exit_code(cli: Env, name: str) -> None:
    """Rank 1 exits 3, the others are ended by Slurm: the job failed with exit code 3, as on the local adapter."""
    on(cli, name)
    code, out = run(cli, "-N", "2", "--", "bash", "-c", '[ "$SLURM_PROCID" = 1 ] && exit 3; sleep 60')
    assert code == 1, out
    assert (out["state"], out["cause"], out["exitCode"]) == ("failed", "exit", 3), out


@pytest.mark.parametrize("name", CLUSTERS)
def test_the_default_working_directory_is_shown_and_used(cli: Env, name: str) -> None:
    """The local transport: the directory dispatch runs in; over SSH: the home directory on the cluster."""
    on(cli, name)
    dry = cli.run("run", "--dry-run", "--", "pwd")
    assert dry.returncode == 0, dry.stderr
    shown = [w.split("=", 1)[1].strip("'") for w in dry.stdout.split() if w.strip("'").startswith("--chdir=")]
    assert len(shown) == 1, dry.stdout
    if name == "local":
        assert shown[0] == str(cli.home)
    else:
        assert shown[0] != str(cli.home) and shown[0].startswith("/")
    code, out = run(cli, "--", "pwd")
    assert code == 0, out
    p = cli.run("logs", out["id"])
    assert p.stdout == shown[0] + "\n", p.stderr


@pytest.mark.parametrize("name", CLUSTERS)
def test_a_launch_failure_is_shown_with_the_reason_run_printed(cli: Env, name: str) -> None:
    """The job script's launch check fails (exit 125): `run` streams its reason, ends with it rather than
    Slurm's "FAILED NonZeroExitCode", and `show` says the same reason."""
    on(cli, name)
    p = cli.run("run", "--", "/no/such/program", timeout=180)
    assert p.returncode == Exit.JOB_FAILED, p.stderr
    reason = "the program /no/such/program does not exist"
    assert f"dispatch: launch failed: {reason}\n" in p.stderr  # the job's own stderr, as run showed it
    end = p.stderr.splitlines()[-1]
    assert "failed (not-launchable)" in end and f": {reason};" in end and "NonZeroExitCode" not in end, end
    job = end.split()[1]
    shown = cli.run("show", job)
    assert shown.returncode == 0, shown.stderr
    assert f"\n  reason     launch failed: {reason}\n" in shown.stdout, shown.stdout
    quiet = cli.run("show", "--no-refresh", job)  # asks nothing of the cluster: the record's words only
    assert quiet.returncode == 0 and "not-launchable" in quiet.stdout, quiet.stderr
    assert "reason     launch failed" not in quiet.stdout, quiet.stdout
