"""The training example on the local adapter, supervised: a rank is SIGKILLed mid-run, the execution is carried on
from the last checkpoint, and the final parameters are bit-identical to an uninterrupted run.

On one machine nothing preempts and no node is lost; a rank killed from outside (exit 137: 128 + SIGKILL) is the
local stand-in, so these tests add one rule in front of examples/rules/training.yaml (which escalates every
non-zero exit): exit 137 -> requeue, twice at most.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import dispatch
from dispatch.clock import SystemClock
from dispatch.extensions import CessationWarning, SharedCheckpoint
from dispatch.outcome import State
from dispatch.records import SQLiteRecords
from dispatch.rules import RuleSet
from dispatch.spec import JobSpec
from dispatch.spi import new_backend
from dispatch.supervise import Supervisor

from .harness import EVERY, EXAMPLE, ROOT, RULES, STEPS

pytestmark = pytest.mark.training


def _rules() -> dict[str, Any]:
    data = RuleSet.load(RULES).to_json()
    rank_killed = {"name": "rank-killed", "cause": "exit", "exitCodes": [137], "action": "requeue", "limit": 2}
    return {**data, "rules": [rank_killed, *data["rules"]]}


def _train(
    tmp: Path,
    label: str,
    kill_rank_at: int | None,
    example: Path = EXAMPLE,
    steps: int = STEPS,
    every: int = EVERY,
    delay: float = 0.05,
    warn_at: int | None = None,
) -> tuple[bytes, Any, list[list[dict[str, Any]]]]:
    """Train once under a supervisor; past ``warn_at`` (if given) both ranks get the warning signal, past
    ``kill_rank_at`` rank 1 is SIGKILLed. Returns the final parameters, the record and rank 0's log lines per
    execution."""
    clock = SystemClock()
    records = SQLiteRecords(tmp / f"{label}.db")
    state = tmp / f"{label}-state"
    backend = new_backend("local", {"stateDir": str(state), "grace": "3s"})
    cluster = dispatch.cluster.Cluster("local", backend, records, clock)
    sup = Supervisor(backend, records, clock=clock, poll=0.5, lease_ttl=5.0, cluster="local")
    out = tmp / f"{label}.params"
    spec = JobSpec(
        (sys.executable, str(example), "--steps", str(steps), "--checkpoint-every", str(every),
         "--step-delay", str(delay) if kill_rank_at else "0", "--out", str(out)),
        nodes=2,
        env={"PYTHONPATH": str(ROOT / "src")},
        extensions=(SharedCheckpoint(path=str(tmp / f"{label}-ckpt")), CessationWarning(seconds=2)),
    )  # fmt: skip
    job_id = cluster.operator.submit(spec, _rules())
    killed = kill_rank_at is None
    warned = warn_at is None
    deadline = time.monotonic() + 180
    while not records.get(job_id).closed:
        assert time.monotonic() < deadline, records.get(job_id).to_json()
        sup.cycle()
        if not warned and _step(state) >= (warn_at or 0):
            launcher = json.loads(next(state.glob("jobs/*/executions/0/launcher.json")).read_text())
            for pid in launcher["ranks"].values():
                os.kill(int(pid), signal.SIGUSR1)  # CessationWarning's default signal
            warned = True
        if not killed and _step(state) >= (kill_rank_at or 0):
            launcher = json.loads(next(state.glob("jobs/*/executions/0/launcher.json")).read_text())
            os.kill(int(launcher["ranks"]["1"]), signal.SIGKILL)
            killed = True
        time.sleep(0.2)
    job = records.get(job_id)
    records.close()
    logs = [_lines(p) for p in sorted(state.glob("jobs/*/executions/*/rank-0.out"))]
    return out.read_bytes(), job, logs


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.startswith("{")]


def _step(state: Path) -> int:
    steps = [ln["step"] for p in state.glob("jobs/*/executions/*/rank-0.out") for ln in _lines(p) if "step" in ln]
    return max(steps, default=0)


def test_a_rank_killed_is_carried_on_to_the_same_parameters(tmp_path: Path) -> None:
    t = time.time()
    ref, job, _ = _train(tmp_path, "reference", None)
    assert job.state is State.SUCCEEDED and len(job.submissions[0].executions) == 1
    got, job, logs = _train(tmp_path, "killed", 40)
    assert job.state is State.SUCCEEDED, job.to_json()
    assert [d.rule for d in job.decisions] == ["rank-killed"]
    assert [e.restart for e in job.submissions[0].executions] == [0, 1]
    resumed = [ln for ln in logs[1] if ln.get("event") == "resumed"]
    assert resumed and resumed[0]["step"] >= 40
    assert got == ref
    print(f"local rank killed: {time.time() - t:.1f}s")


@pytest.mark.parametrize("framework", ["lightning", "accelerate"])
def test_lightning_and_accelerate_killed_rank_resume_to_the_same_parameters(tmp_path: Path, framework: str) -> None:
    """examples/train_lightning.py and examples/train_accelerate.py, shorter (30 steps, a checkpoint every 5): the
    ranks warned past step 6 checkpoint together and go on; a rank SIGKILLed past step 12 is carried on from the
    step-10 checkpoint (or the warning's, if later) to the uninterrupted run's parameters."""
    t = time.time()
    example = ROOT / "examples" / f"train_{framework}.py"
    ref, job, _ = _train(tmp_path, "reference", None, example, steps=30, every=5)
    assert job.state is State.SUCCEEDED and len(job.submissions[0].executions) == 1
    got, job, logs = _train(tmp_path, "killed", 12, example, steps=30, every=5, delay=0.15, warn_at=6)
    # the warning (SIGUSR1) first: every rank saw it at the same step, there was a checkpoint at that step, and
    # the run went on
    warned = {
        ln["step"] for p in tmp_path.glob("killed-state/jobs/*/executions/0/rank-*.out") for ln in _lines(p)
        if ln.get("event") == "warned" and ln.get("signal") == "SIGUSR1"
    }  # fmt: skip
    saved = {ln["step"] for ln in logs[0] if ln.get("event") == "checkpoint"}
    assert len(warned) == 1 and warned <= saved, (warned, saved)
    assert job.state is State.SUCCEEDED, job.to_json()
    assert [d.rule for d in job.decisions] == ["rank-killed"]
    resumed = [ln for ln in logs[1] if ln.get("event") == "resumed"]
    assert resumed and resumed[0]["step"] >= 10, logs[1][:5]
    assert got == ref
    print(f"local {framework} rank killed: {time.time() - t:.1f}s")
