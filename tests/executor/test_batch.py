"""dispatch.Executor's ``batch()`` and ``with_options`` on the local adapter: a batch is one batched submission
(one ``submit_many``, its records in one write) whose futures work after the block; an exception in the block
submits nothing; a view changes the job's shape and not the executor's; ``as_completed`` over many futures runs
on the executor's one collector thread."""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time
from typing import Any

import pytest

from dispatch.cluster import Cluster
from dispatch.errors import SpecError
from dispatch.executor import Executor
from dispatch.resources import Resources

from . import scenarios


class Submissions:
    """The operator's submissions as they are made: the size of each ``submit_many``, each single ``submit``,
    and the size of each batched record write."""

    def __init__(self, cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
        self.many: list[int] = []
        self.singles = 0
        self.writes: list[int] = []
        operator, records = cluster.operator, cluster.records
        submit_many, submit, create_many = operator.submit_many, operator.submit, records.create_many  # type: ignore[union-attr]

        def counted_many(specs: Any, rules: Any = None, **kw: Any) -> Any:
            self.many.append(len(specs))
            return submit_many(specs, rules, **kw)

        def counted(spec: Any, rules: Any = None) -> Any:
            self.singles += 1
            return submit(spec, rules)

        def counted_writes(items: Any) -> Any:
            self.writes.append(len(items))
            return create_many(items)

        monkeypatch.setattr(operator, "submit_many", counted_many)
        monkeypatch.setattr(operator, "submit", counted)
        monkeypatch.setattr(records, "create_many", counted_writes)


def test_a_batch_is_one_batched_submission_whose_futures_work_after_it(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = Submissions(cluster, monkeypatch)
    with Executor(cluster, poll=0.1) as ex:
        with ex.batch():
            futures = [ex.submit(scenarios.square, i) for i in range(6)]
            named = ex.with_options(name="wide add").submit(scenarios.add, 1, 2, c=3)
            with pytest.raises(RuntimeError, match="no job_id yet"):
                _ = futures[0].job_id
            assert futures[0].stdout() is None
            assert seen.many == [] and seen.singles == 0 and cluster.observer.list() == []
        assert seen.many == [7] and seen.singles == 0 and seen.writes == [7]
        assert [f.result(timeout=180) for f in futures] == [i * i for i in range(6)]
        assert named.result(timeout=180) == 6
        assert cluster.get(named.job_id).spec.name == "wide add"
        assert len({f.job_id for f in [*futures, named]}) == 7


def test_an_exception_in_the_block_submits_nothing_and_leaves_no_file(cluster: Cluster) -> None:
    with Executor(cluster, poll=0.1) as ex:
        with pytest.raises(scenarios.Boom), ex.batch():
            future = ex.submit(scenarios.square, 2)
            raise scenarios.Boom("changed my mind")
        assert future.cancelled()
        assert os.listdir(ex._session.local) == ["run.py"]
    assert cluster.observer.list() == []


def test_a_call_cancelled_in_the_block_is_left_out(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = Submissions(cluster, monkeypatch)
    with Executor(cluster, poll=0.1) as ex:
        with ex.batch():
            dropped = ex.submit(scenarios.square, 2)
            kept = ex.submit(scenarios.square, 3)
            assert dropped.cancel() and dropped.cancelled()
        assert seen.many == [1]
        assert kept.result(timeout=180) == 9
    assert [j.id for j in cluster.observer.list()] == [kept.job_id]


def test_batches_do_not_nest_and_calls_with_other_rules_go_in_their_own_batched_submission(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = Submissions(cluster, monkeypatch)
    rules = {"rules": [{"cause": "preempted", "action": "resubmit", "limit": 1}]}
    with Executor(cluster, poll=0.1) as ex:
        with ex.batch():
            with pytest.raises(RuntimeError, match="do not nest"), ex.batch():
                pass
            plain = [ex.submit(scenarios.square, i) for i in range(2)]
            ruled = [ex.with_options(rules=rules).submit(scenarios.square, i) for i in range(3)]
        assert seen.many == [2, 3]
        assert [f.result(timeout=180) for f in plain + ruled] == [0, 1, 0, 1, 4]
        assert cluster.get(ruled[0].job_id).rules is not None and cluster.get(plain[0].job_id).rules is None


def test_a_view_changes_the_jobs_shape_and_not_the_executors(cluster: Cluster) -> None:
    with Executor(cluster, poll=0.1) as ex:
        wide = ex.with_options(nodes=2, time_limit=300, resources=Resources(cpus_per_proc=1), name="two nodes")
        assert wide.shape.nodes == 2 and ex.shape.nodes == 1 and ex.shape.time_limit is None
        assert wide.with_options(all_ranks=True).shape.nodes == 2  # a view of a view keeps what it does not change
        every = wide.with_options(all_ranks=True).submit(scenarios.where)
        one = ex.submit(scenarios.where)
        assert [r["rank"] for r in every.result(timeout=180)] == [0, 1]
        assert one.result(timeout=180)["world"] == 1
        spec = cluster.get(every.job_id).spec
        assert (spec.nodes, spec.time_limit, spec.resources.cpus_per_proc, spec.name) == (2, 300, 1, "two nodes")
        assert cluster.get(one.job_id).spec.nodes == 1
        set_up = ex.with_options(setup=["export DISPATCH_SETUP_PROOF=ran"]).submit(os.getenv, "DISPATCH_SETUP_PROOF")
        assert set_up.result(timeout=180) == "ran" and cluster.get(set_up.job_id).spec.command[0] == "bash"
        with pytest.raises(SpecError, match="nodes"):
            ex.with_options(nodes=0)
        with pytest.raises(SpecError, match="setup"):
            ex.with_options(setup="export X=1")
        with pytest.raises(TypeError, match="partition"):
            ex.with_options(partition="gpu")  # type: ignore[call-arg]


def test_as_completed_over_many_futures_needs_one_collector_thread(cluster: Cluster) -> None:
    before = threading.active_count()
    most = before
    with Executor(cluster, poll=0.1) as ex:
        with ex.batch():
            futures = [ex.submit(scenarios.square, i) for i in range(100)]
        done = []
        for f in concurrent.futures.as_completed(futures, timeout=600):
            done.append(f.result())
            most = max(most, threading.active_count())
        collectors = [t for t in threading.enumerate() if t.name == "dispatch-executor"]
    assert sorted(done) == [i * i for i in range(100)]
    assert len(collectors) <= 1 and most <= before + 2, (before, most)


def test_a_view_shares_its_executors_shutdown(cluster: Cluster) -> None:
    ex = Executor(cluster, poll=0.1)
    view = ex.with_options(name="view")
    with view:
        assert view.submit(scenarios.square, 5).result(timeout=180) == 25
    with pytest.raises(RuntimeError, match="after shutdown"):
        ex.submit(scenarios.square, 1)
    deadline = time.monotonic() + 5
    while ex._session.local.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not ex._session.local.exists()
