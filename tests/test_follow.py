"""The library waits: ``Cluster.wait`` and ``Cluster.run`` supervise one job in process until its outcome, as
``dispatch run`` does (real processes on the local adapter)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import dispatch
from dispatch import JobSpec, ReadOnly, State
from dispatch.outcome import Cause
from dispatch.records import SQLiteRecords


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[dispatch.Cluster]:
    store = SQLiteRecords(str(tmp_path / "records.db"))
    with dispatch.open("local", adapter={"stateDir": str(tmp_path / "local")}, records=store) as c:
        yield c
    store.close()


def py(code: str) -> tuple[str, ...]:
    return (sys.executable, "-c", code)


def test_wait_returns_the_outcome_without_any_supervisor_running(cluster: dispatch.Cluster) -> None:
    job_id = cluster.operator.submit(JobSpec(command=py("print('hello')"), nodes=2))
    assert cluster.observer.get(job_id).state is State.PENDING  # nobody observes it: the record alone stays put
    job = cluster.wait(job_id, timeout=60)
    assert job.closed and job.outcome is not None
    assert (job.outcome.state, job.outcome.cause, job.outcome.exit_code) == (State.SUCCEEDED, Cause.EXIT, 0)
    assert cluster.observer.get(job_id).state is State.SUCCEEDED  # and the record says so for every reader


def test_run_gives_the_first_failed_ranks_own_exit_code(cluster: dispatch.Cluster) -> None:
    code = "import os, sys; sys.exit(3 if os.environ['RANK'] == '1' else 0)"
    job = cluster.run(JobSpec(command=py(code), nodes=2), timeout=60)
    assert job.outcome is not None
    assert (job.outcome.state, job.outcome.cause, job.outcome.exit_code) == (State.FAILED, Cause.EXIT, 3)


def test_run_applies_the_jobs_rules_in_process(cluster: dispatch.Cluster, tmp_path: Path) -> None:
    """A rule that resubmits on a time limit acts here, with no supervisor service: two submissions."""
    rules = {"rules": [{"cause": ["timeout"], "action": "resubmit", "limit": 1}]}
    job = cluster.run(JobSpec(command=("sleep", "30"), time_limit=1), rules=rules, timeout=90)
    assert [s.outcome.cause for s in job.submissions if s.outcome] == [Cause.TIMEOUT, Cause.TIMEOUT]
    assert job.outcome is not None and job.outcome.state is State.FAILED


def test_wait_times_out_and_leaves_the_job_running(cluster: dispatch.Cluster) -> None:
    job_id = cluster.submit(JobSpec(command=("sleep", "30")))
    with pytest.raises(TimeoutError, match=f"job {job_id} has not ended after 0.5s"):
        cluster.wait(job_id, timeout=0.5)
    assert cluster.get(job_id).state is State.RUNNING
    cluster.operator.stop(job_id)
    job = cluster.wait(job_id, timeout=60)
    assert job.outcome is not None and job.outcome.state is State.CANCELLED


def test_wait_refuses_a_read_only_open(tmp_path: Path) -> None:
    with (
        dispatch.open("local", adapter={"stateDir": str(tmp_path)}, read_only=True) as c,
        pytest.raises(ReadOnly, match="read-only"),
    ):
        c.wait("00000000abcdef")
