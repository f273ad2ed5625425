"""Job arrays on the real Slurm 22.05 on the host (see arrays_suite.py). Fails loudly when the cluster is down."""

import pytest

from . import arrays_suite as suite

pytestmark = pytest.mark.slurm_local


def test_a_batch_of_20_is_one_array_each_task_its_own_job() -> None:
    suite.batch_of_20_is_one_array("local")


def test_one_task_cancelled_one_requeued_one_held_alone() -> None:
    suite.one_task_cancelled_one_requeued_one_held_alone("local")


def test_a_lost_sbatch_answer_is_resolved_by_marker_and_no_task_runs_twice() -> None:
    suite.lost_answer_after_sbatch_runs_no_task_twice("local")


def test_a_task_cancelled_before_it_started_reads_cancelled_after_squeue_forgot_it() -> None:
    suite.cancelled_before_it_started_reads_cancelled("local")


def test_a_throttled_batch_runs_at_most_k_tasks_at_once() -> None:
    suite.throttled_batch_runs_at_most_k_at_once("local")
