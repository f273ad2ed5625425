"""dispatch.job.run_id() and execution_id(): the identities an experiment tracker needs, read from the job's
environment, and a clear error outside a job."""

from __future__ import annotations

import pytest

from dispatch import job


def test_the_run_id_is_the_dispatch_job_and_the_execution_id_the_execution() -> None:
    local = {"DISPATCH_JOB": "5f0c2e9a1b7d4e33", "DISPATCH_EXECUTION": "2.4711.0"}
    assert (job.run_id(local), job.execution_id(local)) == ("5f0c2e9a1b7d4e33", "2.4711.0")
    kubeflow = {"DISPATCH_JOB_ID": "5f0c2e9a1b7d4e33", "DISPATCH_EXECUTION": "5f0c2e9a1b7d4e33.1.0.0.0"}
    assert (job.run_id(kubeflow), job.execution_id(kubeflow)) == ("5f0c2e9a1b7d4e33", "5f0c2e9a1b7d4e33.1.0.0.0")


def test_outside_a_job_each_names_itself_and_its_variable() -> None:
    with pytest.raises(job.NotInJob, match=r"^dispatch\.job\.run_id\(\): .*DISPATCH_JOB is not set"):
        job.run_id({"SLURM_JOB_ID": "12"})
    with pytest.raises(job.NotInJob, match=r"^dispatch\.job\.execution_id\(\): .*DISPATCH_EXECUTION is not set"):
        job.execution_id({})
    assert issubclass(job.NotInJob, LookupError)
