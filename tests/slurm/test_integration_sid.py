"""Scenarios on the real Slurm 26.05 cluster over SSH. Fails loudly when the cluster is down."""

import pytest

from . import integration as it

pytestmark = pytest.mark.slurm_sid


def test_hostile_argv_reaches_every_rank_byte_for_byte() -> None:
    it.hostile_argv_byte_for_byte("sid")


def test_output_per_execution_after_requeue() -> None:
    it.output_per_execution_after_requeue("sid")


def test_purged_job_with_and_without_accounting() -> None:
    it.purged_with_and_without_accounting("sid")


@pytest.mark.parametrize("cut_before_sbatch", [True, False], ids=["cut-before-sbatch", "cut-after-sbatch"])
def test_ssh_cut_mid_submission_leaves_exactly_one_job(cut_before_sbatch: bool) -> None:
    it.ssh_cut_mid_submission_leaves_one_job("sid", cut_before_sbatch)


def test_batch_submission_one_script_per_phase() -> None:
    it.batch_submission_one_script_per_phase("sid")


def test_a_warning_before_the_program_listens_reaches_it_once_it_does() -> None:
    it.warning_before_the_program_listens_is_delivered_once_it_does("sid", it.LISTENER_PERL)


def test_output_is_readable_after_the_scheduler_forgot_the_job() -> None:
    it.output_after_the_scheduler_forgot("sid")


def test_launch_checks_fail_before_srun() -> None:
    it.launch_checks_fail_before_srun("sid")


def test_the_first_failing_rank_outranks_a_higher_code() -> None:
    it.first_failing_rank_outranks_a_higher_code("sid")


def test_an_ordinary_user_opens_with_the_release_alone_and_slurm_refuses_an_admin_hold() -> None:
    it.open_refuses_an_admin_hold_by_the_callers_privilege("sid", lifts=False)
