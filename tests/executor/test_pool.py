"""dispatch.Executor on the local adapter (real processes): values, exceptions with their remote traceback, two
nodes, map over 200 items in one batch, a cancelled future, the result cap; and the errors that must come at
submission (an unpicklable call, a cluster without shared storage), never a hang."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dispatch
from dispatch.capabilities import Capability
from dispatch.cluster import Cluster
from dispatch.errors import Unsupported
from dispatch.executor import CallError, CallFailed, Executor
from dispatch.records.memory import MemoryRecords

from . import scenarios


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with dispatch.open(
        "local", adapter={"stateDir": str(tmp_path / "state"), "grace": 1}, records=MemoryRecords()
    ) as c:
        yield c
        for job in c.observer.list(active_only=True):
            c.operator.stop(job.id)


@pytest.fixture
def make(cluster: Cluster) -> scenarios.Make:
    def make(**kw: Any) -> Executor:
        return Executor(cluster, poll=0.1, **kw)

    return make


def test_a_value_comes_back(make: scenarios.Make) -> None:
    scenarios.value_returned(make)


def test_an_exception_is_raised_with_its_remote_traceback(make: scenarios.Make) -> None:
    scenarios.exception_raised(make)


def test_a_function_on_two_nodes_returns_rank_0s_result_or_every_ranks(make: scenarios.Make) -> None:
    scenarios.two_nodes(make)


def test_map_over_200_items_is_one_batch_in_order(make: scenarios.Make, cluster: Cluster) -> None:
    batches: list[int] = []
    submit_many = cluster.operator.submit_many

    def counted(specs: Any, rules: Any = None, **kw: Any) -> Any:
        batches.append(len(specs))
        return submit_many(specs, rules, **kw)

    cluster.operator.submit_many = counted  # type: ignore[method-assign]
    scenarios.map_many(make, 200)
    assert batches == [200]
    assert len(cluster.observer.list()) == 200


def test_a_cancelled_future_stops_its_job(make: scenarios.Make) -> None:
    scenarios.cancelled(make)


def test_a_result_over_the_cap_is_a_clear_error(make: scenarios.Make) -> None:
    scenarios.result_over_cap(make)


def test_futures_work_with_wait_and_as_completed(make: scenarios.Make) -> None:
    with make() as ex:
        futures = [ex.submit(scenarios.square, i) for i in range(4)]
        done, pending = concurrent.futures.wait(futures, timeout=120)
        assert not pending and len(done) == 4
        assert sorted(f.result() for f in concurrent.futures.as_completed(futures)) == [0, 1, 4, 9]


def test_an_unpicklable_call_fails_at_submission_and_records_nothing(make: scenarios.Make, cluster: Cluster) -> None:
    lock = threading.Lock()
    with make() as ex, pytest.raises(CallError, match="cannot pickle the call to square"):
        ex.submit(scenarios.square, lock)
    assert cluster.observer.list() == []


def test_a_job_that_ends_without_a_result_fails_its_future(make: scenarios.Make, cluster: Cluster) -> None:
    with make(python="/bin/false") as ex:
        future = ex.submit(scenarios.square, 3)
        with pytest.raises(CallFailed, match="without a result") as caught:
            future.result(timeout=120)
    assert caught.value.record.id == future.job_id


def test_a_cluster_without_shared_storage_is_refused_with_the_reason() -> None:
    with dispatch.open("memory", records=MemoryRecords()) as c:
        assert not c.capabilities()[Capability.SHARED_STORAGE].yes
        with pytest.raises(Unsupported, match="SharedStorage, which is no here: the simulator runs no program"):
            Executor(c)


def test_submission_after_shutdown_is_refused(make: scenarios.Make) -> None:
    ex = make()
    ex.shutdown()
    with pytest.raises(RuntimeError, match="after shutdown"):
        ex.submit(scenarios.square, 1)


def test_the_call_files_are_removed_once_read(make: scenarios.Make, cluster: Cluster) -> None:
    with make() as ex:
        assert ex.submit(scenarios.square, 2).result(timeout=120) == 4
        session = ex._session.local
    assert not session.exists()


def test_a_checkpointable_callable_stopped_by_its_time_limit_resumes_to_the_right_answer(
    make: scenarios.Make,
) -> None:
    # 10 s of work: two executions at least, each with room for a slow start on a loaded machine
    scenarios.checkpointed_and_resumed(make, time_limit=8, steps=40, delay=0.25)
