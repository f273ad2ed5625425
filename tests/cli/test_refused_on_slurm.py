"""Jobs Slurm can never run, tried as a new user would on the real clusters of all three releases (22.05 on the
host, 24.11 and 26.05 over SSH): more nodes than the default partition has, more ranks per node than a node has
CPUs, more memory per node than a node has. Each is refused before anything is recorded or left in the queue, in
one line naming what is wrong, with exit code 4; and a job that passes sbatch but then waits for a reason that
will not change (every node of the partition excluded: BadConstraints) is stopped by ``dispatch run``, which
says why and exits 4, leaving nothing in the queue."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from dispatch.cli.exitcodes import Exit

from ..slurm.clusters import admin, description
from .conftest import Env
from .test_on_slurm import on

CLUSTERS = [
    pytest.param("local", marks=pytest.mark.slurm_local, id="22.05"),
    pytest.param("trixie", marks=pytest.mark.slurm_trixie, id="24.11-ssh"),
    pytest.param("sid", marks=pytest.mark.slurm_sid, id="26.05-ssh"),
]


def _queued_in(name: str, workdir: str) -> dict[str, str]:
    """The jobs Slurm shows (any state) whose working directory is ``workdir``: their states by id."""
    out = admin(name, "squeue", "-h", "-t", "all", "-o", "%i|%T|%Z").stdout
    rows = [line.split("|", 2) for line in out.splitlines() if line.count("|") >= 2]
    return {r[0]: r[1] for r in rows if r[2].strip() == workdir}


def _requests(desc: dict[str, Any]) -> list[tuple[list[str], str]]:
    partition = desc["partitions"]["default"]
    nodes, cpus, mem = len(desc["nodes"]), int(desc["cpus_per_node"]), int(desc["memory_per_node_mb"])
    return [
        (["-N", str(nodes + 3)], f"refused: {nodes + 3} nodes asked, partition {partition} has {nodes}"),
        (
            ["-p", str(2 * cpus)],
            f"refused: {2 * cpus} rank(s) x 1 CPU(s) per node asked, the nodes of partition {partition} have at most"
            f" {cpus} CPU(s)",
        ),
        (
            ["--mem-per-node", "64G"],
            f"refused: 64G of memory per node asked, the nodes of partition {partition} have at most {mem}M",
        ),
    ]


@pytest.mark.parametrize("name", CLUSTERS)
def test_a_job_slurm_can_never_run_is_refused_before_anything_is_recorded_or_queued(cli: Env, name: str) -> None:
    on(cli, name)
    for argv, line in _requests(description(name)):
        workdir = f"/tmp/dispatch-refused-{uuid.uuid4().hex}"
        p = cli.run("run", "-w", workdir, *argv, "--", "true", timeout=120)
        assert p.returncode == Exit.REFUSED, (argv, p.returncode, p.stdout, p.stderr)
        assert p.stderr.strip() == f"dispatch: error: {line}", (argv, p.stderr)
        assert p.stdout == "", p.stdout
        assert cli.json("status", "--all") == [], argv
        assert _queued_in(name, workdir) == {}, argv


@pytest.mark.parametrize("name", CLUSTERS)
def test_run_stops_a_job_that_waits_for_a_reason_that_will_not_change(cli: Env, name: str) -> None:
    """Every node of the default partition excluded: sbatch takes it behind dispatch's hold; once released it
    waits BadConstraints. ``run`` says so in one line, stops it (the reason recorded) and exits 4."""
    on(cli, name)
    desc = description(name)
    workdir = f"/tmp/dispatch-unrunnable-{uuid.uuid4().hex}"
    placement = json.dumps({"exclude": ",".join(desc["nodes"])})
    p = cli.run("run", "-w", workdir, "-x", f"slurm.Placement={placement}", "--", "true", timeout=180)
    assert p.returncode == Exit.REFUSED, (p.returncode, p.stdout, p.stderr)
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("refused: job ") and "can never run as asked: PENDING BadConstraints" in last, p.stderr
    assert last.endswith("dispatch stopped it (nothing is left in the queue)"), last
    (job,) = cli.json("status", "--all")
    assert (job["state"], job["cause"]) == ("cancelled", "cancelled"), job
    shown = cli.json("show", job["id"])
    stops = [e for e in shown["events"] if e["kind"] == "stop-requested"]
    assert len(stops) == 1 and "BadConstraints" in stops[0]["data"]["reason"], shown["events"]
    left = _queued_in(name, workdir)
    assert set(left.values()) <= {"CANCELLED"}, left


@pytest.mark.parametrize("name", CLUSTERS)
def test_status_says_a_queued_job_will_never_start_and_why(cli: Env, name: str) -> None:
    """``dispatch submit`` of the same job (submit does not wait): ``status`` shows cause unrunnable and a line
    with Slurm's reason; the job is then stopped."""
    on(cli, name)
    desc = description(name)
    placement = json.dumps({"exclude": ",".join(desc["nodes"])})
    p = cli.run("submit", "-x", f"slurm.Placement={placement}", "--", "true", timeout=120)
    assert p.returncode == 0, p.stderr
    (job,) = cli.json("status", "--all")
    try:
        deadline = time.monotonic() + 120
        while True:
            p = cli.run("status", "--all")
            assert p.returncode == 0, p.stderr
            if "unrunnable" in p.stdout:
                break
            assert time.monotonic() < deadline, p.stdout
            time.sleep(2)
        hints = [ln for ln in p.stderr.splitlines() if "can never run as asked" in ln]
        assert hints == [
            f"job {job['id']} can never run as asked: PENDING BadConstraints; it will not start by itself:"
            f" dispatch stop {job['id']}"
        ], p.stderr
    finally:
        assert cli.run("stop", job["id"]).returncode == 0
