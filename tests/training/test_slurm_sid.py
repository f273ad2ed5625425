"""The training proofs on the real Slurm 26.05 cluster (sid chroot, over SSH, both nodes): the uninterrupted
reference and the preemption case. The jobs run the host's Python and torch, mounted read-only into the chroot
by scripts/training-sid.sh (which the test command runs). Fails when the cluster or the mounts are missing."""

from __future__ import annotations

import pytest

from . import scenarios
from .harness import Result

pytestmark = [pytest.mark.slurm_sid, pytest.mark.training]
CLUSTER = "sid"


@pytest.fixture(scope="module")
def ref() -> Result:
    return scenarios.reference(CLUSTER)


def test_uninterrupted_reference(ref: Result) -> None:
    assert ref.interruptions() == [], ref.interruptions()  # reference() retries an interrupted run


def test_preempted_mid_run_resumes_to_the_same_parameters(ref: Result) -> None:
    scenarios.preempted(CLUSTER, ref.params)
