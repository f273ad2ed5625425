"""A hang on the real Slurm 26.05 cluster (sid chroot, over SSH, two nodes): the scenario of
test_stall_slurm_local.py (:func:`scenarios.hung`): rank 1 stops without a word at step 45, the supervisor
judges the run stalled within a cycle of the bound, ends it through scancel over SSH, records ``stalled`` and
resubmits away from both its nodes (the ``wide`` partition's spares take it); the resubmission resumes from its
checkpoint to the uninterrupted run's parameters, bit for bit. The jobs run the host's Python and torch, mounted
read-only into the chroot by scripts/training-sid.sh. Fails when the cluster or the mounts are missing."""

from __future__ import annotations

import pytest

from . import scenarios

pytestmark = [pytest.mark.slurm_sid, pytest.mark.training]
CLUSTER = "sid"


def test_a_rank_that_hangs_over_ssh_is_ended_as_stalled_and_the_resubmission_reaches_the_same_parameters() -> None:
    ref = scenarios.reference(CLUSTER)
    res = scenarios.hung(CLUSTER, ref.params)
    print(f"stall judged after {scenarios.stall_detected_s(res)}s of silence (bound {scenarios.HANG_BOUND:g}s)")
