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


def test_a_warning_before_the_program_listens_is_not_fatal() -> None:
    it.warning_before_the_program_listens_is_not_fatal("local")


def test_output_is_readable_after_the_scheduler_forgot_the_job() -> None:
    it.output_after_the_scheduler_forgot("local")
