"""Executor.submit_many on the local adapter: one batched submission, one named job and future per item, the
executor's resources in every job's spec; as many names as items or nothing is written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import dispatch
from dispatch.cluster import Cluster
from dispatch.executor import Executor
from dispatch.records.memory import MemoryRecords
from dispatch.resources import Resources


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with dispatch.open("local", adapter={"stateDir": str(tmp_path / "state")}, records=MemoryRecords()) as c:
        yield c


def test_submit_many_is_one_batch_of_named_jobs_with_a_future_each(cluster: Cluster) -> None:
    with Executor(cluster, poll=0.1, resources=Resources(cpus_per_proc=1)) as ex:
        futures = ex.submit_many(pow, [2, 3, 4], [3, 2, 1], names=["cube of 2", "square of 3", "4"])
        assert [f.result(timeout=60) for f in futures] == [8, 9, 4]
    jobs = [cluster.get(f.job_id) for f in futures]
    assert len({j.batch.key for j in jobs if j.batch is not None}) == 1
    assert [j.batch.index for j in jobs if j.batch is not None] == [0, 1, 2]
    assert [j.spec.name for j in jobs] == ["cube of 2", "square of 3", "4"]
    assert all(j.spec.resources == Resources(cpus_per_proc=1) for j in jobs)


def test_submit_many_without_as_many_names_as_items_writes_nothing(cluster: Cluster) -> None:
    with Executor(cluster, poll=0.1) as ex, pytest.raises(ValueError, match="2 names for 3 calls"):
        ex.submit_many(abs, [1, 2, 3], names=["a", "b"])
    assert cluster.observer.list() == []
