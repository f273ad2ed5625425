"""dispatch.Executor on the local adapter (real processes): values, exceptions with their remote traceback, two
nodes, map over 200 items in one batch, a cancelled future, the result cap; and the errors that must come at
submission (an unpicklable call, a cluster without shared storage), never a hang."""

from __future__ import annotations

import concurrent.futures
import os
import threading
from typing import Any

import cloudpickle
import pytest

import dispatch
from dispatch.capabilities import Capability
from dispatch.cluster import BatchIncomplete, Cluster
from dispatch.errors import Unavailable, Unsupported
from dispatch.executor import CallError, CallFailed, Executor, run
from dispatch.outcome import State
from dispatch.records.memory import MemoryRecords

from . import scenarios


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


def test_map_over_200_items_is_one_batch_in_order(
    make: scenarios.Make, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the records are written as one batch: 200 jobs one by one, or 200 batches of one, would show here
    records = cluster.records
    batches: list[int] = []
    singles: list[str] = []
    create_many, create = records.create_many, records.create  # type: ignore[union-attr]

    def counted_many(items: Any) -> Any:
        batches.append(len(items))
        return create_many(items)

    def counted(*a: Any, **kw: Any) -> Any:
        singles.append("create")
        return create(*a, **kw)

    monkeypatch.setattr(records, "create_many", counted_many)
    monkeypatch.setattr(records, "create", counted)
    scenarios.map_many(make, 200)
    assert batches == [200] and singles == []
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


def test_a_multi_rank_call_missing_a_rank_fails_naming_the_rank_and_the_ending(make: scenarios.Make) -> None:
    with make(nodes=2, all_ranks=True) as ex:
        future = ex.submit(scenarios.rank_1_killed)
        with pytest.raises(CallFailed, match=r"ended \(failed, .*\) without a result from rank\(s\) 1\b") as caught:
            future.result(timeout=120)
    record = caught.value.record
    assert record.outcome is not None and record.outcome.state is State.FAILED
    assert f"exit code {record.outcome.exit_code}" in str(caught.value)


@pytest.mark.parametrize("how", ["an exception", "close", "dropped"])
def test_leaving_map_early_cancels_the_calls_not_yet_yielded(make: scenarios.Make, cluster: Cluster, how: str) -> None:
    ex = make()
    try:
        if how == "an exception":
            with pytest.raises(scenarios.Boom):
                list(ex.map(scenarios.fail_or_nap, [0, 600, 600]))
        else:
            it = ex.map(scenarios.fail_or_nap, [1, 600, 600])
            assert next(it) == 1
            if how == "close":
                it.close()  # type: ignore[attr-defined]
            del it
        jobs = cluster.observer.list()
        assert len(jobs) == 3
        assert sorted(cluster.get(j.id).stop_requested for j in jobs) == [False, True, True]
    finally:
        ex.shutdown(wait=False, cancel_futures=True)


def test_cancel_returns_false_when_the_stop_fails(
    make: scenarios.Make, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(job_id: str, *a: Any, **kw: Any) -> None:
        raise Unavailable("the scheduler does not answer")

    with scenarios.gated(make) as (ex, gate):
        future = ex.submit(scenarios.square, 2)
        monkeypatch.setattr(cluster.operator, "stop", broken)
        assert future.cancel() is False
        assert not future.done()
        monkeypatch.undo()
        gate.touch()
        assert future.result(timeout=120) == 4


def test_a_map_that_cannot_write_every_call_leaves_no_file_and_no_job(make: scenarios.Make, cluster: Cluster) -> None:
    with make() as ex:
        with pytest.raises(CallError, match="cannot pickle the call to square"):
            ex.map(scenarios.square, [1, 2, threading.Lock(), 4])
        assert os.listdir(ex._session.local) == ["run.py"]
    assert cluster.observer.list() == []


def test_a_batch_that_fails_part_way_stops_what_it_started_and_leaves_no_file(
    make: scenarios.Make, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    submit_many = cluster.operator.submit_many

    def part_way(specs: Any, rules: Any = None, **kw: Any) -> Any:
        key = cluster.operator.new_batch_key()
        done = submit_many(specs[:2], rules, key=key)
        raise BatchIncomplete(key, done, len(specs), Unavailable("the record store went away"))

    monkeypatch.setattr(cluster.operator, "submit_many", part_way)
    with make() as ex:
        with pytest.raises(BatchIncomplete, match="2 of 4 jobs recorded"):
            ex.map(scenarios.nap, [600] * 4)
        assert os.listdir(ex._session.local) == ["run.py"]
    jobs = cluster.observer.list()
    assert len(jobs) == 2 and all(cluster.get(j.id).stop_requested for j in jobs)


def test_a_result_the_file_system_shows_late_is_waited_for(make: scenarios.Make) -> None:
    # the job ends without a result; the result appears once the executor has seen the job over
    with scenarios.gated(make, runs=False, result_wait=600) as (ex, gate):
        future = ex.submit(scenarios.square, 4)
        seen = threading.Event()
        settle = ex._settle

        def watched(f: Any, job: Any) -> bool:
            done = settle(f, job)
            seen.set()
            return done

        ex._settle = watched  # type: ignore[method-assign]
        gate.touch()
        assert seen.wait(120), "the executor never saw the job over"
        assert not future.done()
        call = future._call
        fd = os.open(call.local, os.O_RDONLY | os.O_DIRECTORY)
        try:
            data = run.seal(call.key, "result.0", cloudpickle.dumps({"ok": True, "value": 16}))
            run.write_new(fd, run.result_name(0), data, 0o600)
        finally:
            os.close(fd)
        assert future.result(timeout=60) == 16


def test_the_wait_for_a_late_result_is_bounded(make: scenarios.Make) -> None:
    with make(python="/bin/true", result_wait=0.5) as ex:
        future = ex.submit(scenarios.square, 3)
        with pytest.raises(CallFailed, match=r"without a result from rank\(s\) 0 \(waited 0.5 s for it\)"):
            future.result(timeout=120)


@pytest.mark.parametrize("poll", [0, -1, float("nan"), float("inf"), True])
def test_a_poll_that_would_spin_or_never_wake_is_refused(cluster: Cluster, poll: float) -> None:
    with pytest.raises(ValueError, match="poll must be a positive number of seconds"):
        Executor(cluster, poll=poll)
