"""The fault campaign at CI size on each real Slurm cluster: 20 jobs, 2 supervisor processes, 20 faults.

Runs ``bench/faults.py`` as a separate process (it starts supervisor processes of its own, injects the faults and
restores the cluster in ``finally``) and asserts its four figures are 0. Needs root, PostgreSQL and the clusters
(``sudo scripts/slurm/up.sh``; the campaign runs it itself when a cluster does not answer).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
MUST_BE_ZERO = ("jobs_lost", "duplicate_submissions", "ended_without_cause", "disagreements")


def campaign(
    cluster: str, *, jobs: int = 20, supervisors: int = 2, faults: int = 20, seed: int = 7, extra: tuple[str, ...] = ()
) -> dict[str, Any]:
    if os.geteuid() != 0:
        pytest.fail("the fault campaign needs root (admin.sh, the sid SSH key): run the tests as root")
    argv = [
        sys.executable,
        str(ROOT / "bench" / "faults.py"),
        "--json",
        "--cluster",
        cluster,
        "--jobs",
        str(jobs),
        "--supervisors",
        str(supervisors),
        "--faults",
        str(faults),
        "--seed",
        str(seed),
        *extra,
    ]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=900, cwd=ROOT)
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    assert lines, f"the campaign printed no JSON (rc {r.returncode}):\n{r.stderr[-4000:]}"
    result: dict[str, Any] = json.loads(lines[-1])
    print(json.dumps(result, indent=2))
    return result


def check(result: dict[str, Any], faults: int) -> None:
    assert result["settled"], f"jobs did not settle: {result.get('details')}"
    assert result["faults_injected"] == faults, result["faults_by_kind"]
    assert result["jobs_recorded"] == result["jobs"]
    assert result["executions"] >= result["jobs"], "every job ran at least once"
    for key in MUST_BE_ZERO:
        assert result[key] == 0, f"{key} = {result[key]}: {result.get('details')}"


@pytest.mark.slurm_local
@pytest.mark.postgres
def test_campaign_on_the_local_cluster() -> None:
    check(campaign("local"), 20)


@pytest.mark.slurm_sid
@pytest.mark.postgres
def test_campaign_on_the_sid_cluster_over_ssh() -> None:
    result = campaign("sid", seed=11)
    check(result, 20)
    assert result["faults_by_kind"].get("cut-ssh", 0) > 0, "the sid campaign must cut SSH connections"


@pytest.mark.slurm_local
@pytest.mark.postgres
def test_the_checks_see_planted_faults() -> None:
    """A rogue job carrying a recorded marker, a record rewritten to end unknown and a reopened (lost) record
    must show in the figures."""
    result = campaign("local", jobs=4, faults=2, seed=5, extra=("--plant",))
    assert result["planted"], result
    seen = {"details": result["details"], "planted": result["planted"]}
    assert result["duplicate_submissions"] >= 1, seen
    assert result["disagreements"] >= 1, result["details"]
    assert result["ended_without_cause"] >= 1, result["details"]
    assert any(result["planted"]["rogue"] in d for d in result["details"]["disagreements"]), seen
    assert any(result["planted"]["lost"] in d for d in result["details"]["lost"]), result["details"]
