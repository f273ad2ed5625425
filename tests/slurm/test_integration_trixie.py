"""Scenarios on the real Slurm 24.11 cluster (Debian 13) over SSH. Fails loudly when the cluster is down."""

import pytest

from . import integration as it

pytestmark = pytest.mark.slurm_trixie


def test_hostile_argv_reaches_every_rank_byte_for_byte() -> None:
    it.hostile_argv_byte_for_byte("trixie")


def test_output_per_execution_after_requeue() -> None:
    it.output_per_execution_after_requeue("trixie")


def test_purged_job_with_and_without_accounting() -> None:
    it.purged_with_and_without_accounting("trixie")


@pytest.mark.parametrize("cut_before_sbatch", [True, False], ids=["cut-before-sbatch", "cut-after-sbatch"])
def test_ssh_cut_mid_submission_leaves_exactly_one_job(cut_before_sbatch: bool) -> None:
    it.ssh_cut_mid_submission_leaves_one_job("trixie", cut_before_sbatch)


def test_batch_submission_one_script_per_phase() -> None:
    it.batch_submission_one_script_per_phase("trixie")


def test_the_first_failing_rank_outranks_a_higher_code() -> None:
    it.first_failing_rank_outranks_a_higher_code("trixie")
