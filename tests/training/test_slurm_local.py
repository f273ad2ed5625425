"""The training proofs on the real Slurm 22.05 cluster (both nodes, local transport). Fails when it is down."""

from __future__ import annotations

import time

import pytest

from . import scenarios
from .harness import Result

pytestmark = [pytest.mark.slurm_local, pytest.mark.training]
CLUSTER = "local"


@pytest.fixture(scope="module")
def ref() -> Result:
    return scenarios.reference(CLUSTER)


def test_uninterrupted_reference(ref: Result) -> None:
    assert ref.interruptions() == [], ref.interruptions()  # reference() retries an interrupted run
    print(f"reference: {ref.wall:.1f}s")


def test_preempted_mid_run_resumes_to_the_same_parameters(ref: Result) -> None:
    t = time.time()
    scenarios.preempted(CLUSTER, ref.params)
    print(f"preempted: {time.time() - t:.1f}s")


def test_time_limit_checkpoints_on_the_warning_and_continues(ref: Result) -> None:
    scenarios.timed_out(CLUSTER, ref.params)


def test_node_lost_while_a_rank_runs_on_it(ref: Result) -> None:
    scenarios.node_lost(CLUSTER, ref.params)


def test_supervisor_killed_during_recovery_and_restarted(ref: Result) -> None:
    scenarios.supervisor_killed(CLUSTER, ref.params)


@pytest.mark.parametrize("framework", ["lightning", "accelerate"])
def test_lightning_and_accelerate_preempted_resume_to_the_same_parameters(framework: str) -> None:
    """examples/train_lightning.py and examples/train_accelerate.py, shorter (40 steps, a checkpoint every 5):
    preempted past step 15, resubmitted by the supervisor's rules, resumed from the step the ranks stopped at,
    bit-identical to their own uninterrupted reference."""
    t = time.time()
    case = {"example": f"train_{framework}.py", "steps": 40, "every": 5}
    ref = scenarios.reference(CLUSTER, **case)
    assert ref.interruptions() == [], ref.interruptions()
    scenarios.preempted(CLUSTER, ref.params, past=15, delay=0.2, **case)
    print(f"{framework} reference and preempted: {time.time() - t:.1f}s")
