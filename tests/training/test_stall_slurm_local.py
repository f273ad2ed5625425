"""A hang on the real Slurm 22.05 cluster: examples/train_ddp.py on two nodes, whose rank 1 stops without a word
at step 45 (the other rank then waits in the next all-reduce), under a supervisor process with a stall rule. The
supervisor judges it stalled no earlier than the bound and within a cycle of it, ends it through scancel, records
the cause ``stalled`` and resubmits away from both its nodes (the ``wide`` partition's spares take it); the new
submission resumes from the step-40 checkpoint and ends with the parameters of the uninterrupted run, bit for
bit (:func:`scenarios.hung`). Fails when the cluster is down."""

from __future__ import annotations

import pytest

from . import scenarios

pytestmark = [pytest.mark.slurm_local, pytest.mark.training]
CLUSTER = "local"


def test_a_rank_that_hangs_is_ended_as_stalled_and_the_resubmission_reaches_the_same_parameters() -> None:
    ref = scenarios.reference(CLUSTER)
    res = scenarios.hung(CLUSTER, ref.params)
    print(f"stall judged after {scenarios.stall_detected_s(res)}s of silence (bound {scenarios.HANG_BOUND:g}s)")
