"""Scenarios on the real Slurm 22.05 cluster (local transport). Fails loudly when the cluster is down."""

import pytest

from . import integration as it

pytestmark = pytest.mark.slurm_local


def test_hostile_argv_reaches_every_rank_byte_for_byte() -> None:
    it.hostile_argv_byte_for_byte("local")


def test_output_per_execution_after_requeue() -> None:
    it.output_per_execution_after_requeue("local")


def test_purged_job_with_and_without_accounting() -> None:
    it.purged_with_and_without_accounting("local")


def test_batch_submission_one_script_per_phase() -> None:
    it.batch_submission_one_script_per_phase("local")


def test_a_warning_before_the_program_listens_reaches_it_once_it_does() -> None:
    it.warning_before_the_program_listens_is_delivered_once_it_does("local", it.LISTENER_PYTHON)


def test_output_slices_of_every_viewer_in_one_script() -> None:
    it.output_slices_in_one_script("local")


def test_output_is_readable_after_the_scheduler_forgot_the_job() -> None:
    it.output_after_the_scheduler_forgot("local")


def test_launch_checks_fail_before_srun() -> None:
    it.launch_checks_fail_before_srun("local")


def test_the_first_failing_rank_outranks_a_higher_code() -> None:
    it.first_failing_rank_outranks_a_higher_code("local")


def test_root_reads_the_hold_before_it_opens_and_never_lifts_an_admin_hold() -> None:
    it.open_refuses_an_admin_hold_by_the_callers_privilege("local", lifts=True)
