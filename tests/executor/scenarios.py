"""The executor's proofs, written once and run on every cluster (local adapter, real Slurm 22.05 and 26.05):
each takes a way to make an :class:`~dispatch.executor.Executor` on that cluster.

The functions below travel by value (``register_pickle_by_value``): the jobs cannot import this test module, nor
dispatch itself on a cluster where it is not installed (the sid chroot), so :mod:`dispatch.job` travels by value too."""

from __future__ import annotations

import concurrent.futures
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import cloudpickle
import pytest

import dispatch.job
from dispatch.executor import CallFuture, Executor, RemoteTraceback
from dispatch.job import context
from dispatch.outcome import State

cloudpickle.register_pickle_by_value(sys.modules[__name__])
cloudpickle.register_pickle_by_value(dispatch.job)

Make = Callable[..., Executor]


class Boom(Exception):
    """An exception of the function's own, raised on the cluster."""


def square(x: int) -> int:
    return x * x


def add(a: int, b: int, *, c: int = 0) -> int:
    return a + b + c


def explode(message: str) -> None:
    raise Boom(message)


def where() -> dict[str, Any]:
    """Every rank's place in the job (read the way a multi-rank function reads it)."""
    ctx = context()
    return {"rank": ctx.rank, "world": ctx.world_size, "node_rank": ctx.node_rank, "job": ctx.job, "pid": os.getpid()}


def nap(seconds: float) -> str:
    time.sleep(seconds)
    return "woke"


def returns(value: Any) -> Any:
    return value


def value_returned(make: Make) -> None:
    with make() as ex:
        future = ex.submit(add, 2, 3, c=10)
        assert future.result(timeout=180) == 15
        assert future.done() and not future.cancelled() and future.exception() is None
        record = ex.cluster.get(future.job_id)
        assert record.outcome is not None and record.outcome.state is State.SUCCEEDED
        assert record.spec.name == "call add"


def exception_raised(make: Make) -> None:
    with make() as ex:
        future = ex.submit(explode, "on the cluster")
        with pytest.raises(Boom, match="on the cluster") as caught:
            future.result(timeout=180)
        assert isinstance(caught.value.__cause__, RemoteTraceback)
        remote = caught.value.__cause__.text  # the cluster's: the runner's frame, then the function's
        assert f"{ex._session.remote}/run.py" in remote and "in explode" in remote, remote
        assert "Boom: on the cluster" in remote, remote
        assert isinstance(future.exception(), Boom)
        record = ex.cluster.get(future.job_id)
        assert record.outcome is not None and record.outcome.state is State.FAILED
        assert record.outcome.exit_code == 1


def two_nodes(make: Make) -> None:
    with make(nodes=2) as ex:
        future = ex.submit(where)
        first = future.result(timeout=180)
        assert first["rank"] == 0 and first["world"] == 2 and first["job"] == future.job_id
    with make(nodes=2, all_ranks=True) as ex:
        future = ex.submit(where)
        every = future.result(timeout=180)
        assert [r["rank"] for r in every] == [0, 1]
        assert [r["node_rank"] for r in every] == [0, 1]
        assert {r["world"] for r in every} == {2}


def map_many(make: Make, n: int = 200, timeout: float = 600) -> None:
    with make() as ex:
        results = list(ex.map(square, range(n), timeout=timeout))
    assert results == [i * i for i in range(n)]


def cancelled(make: Make) -> None:
    with make() as ex:
        future = ex.submit(nap, 600)
        done: list[concurrent.futures.Future[Any]] = []
        future.add_done_callback(done.append)
        assert future.cancel()
        assert future.cancelled() and done == [future]
        with pytest.raises(concurrent.futures.CancelledError):
            future.result(timeout=1)
        assert not future.cancel() or future.cancelled()
        record = ex.cluster.get(future.job_id)
        assert record.stop_requested
        other = ex.submit(square, 7)
        assert other.result(timeout=180) == 49  # the executor goes on after a cancel


def result_over_cap(make: Make) -> None:
    from dispatch.executor import ResultTooLarge

    with make(max_result_bytes=1000) as ex:
        future: CallFuture = ex.submit(returns, b"x" * 5000)
        with pytest.raises(ResultTooLarge, match="over the cap of 1000"):
            future.result(timeout=180)
        assert ex.submit(returns, b"small").result(timeout=180) == b"small"


class Summer:
    """A checkpointable callable (submitit's convention): sums ``i * i`` for i below ``n``, one step every
    ``delay`` seconds, resuming from ``start`` with the partial ``total``; ``starts`` lists where each execution
    began."""

    def __init__(self, delay: float, start: int = 0, total: int = 0, starts: tuple[int, ...] = ()) -> None:
        self.delay, self.start, self.total, self.starts = delay, start, total, starts

    def __call__(self, n: int) -> tuple[int, tuple[int, ...]]:
        self.starts = (*self.starts, self.start)
        for i in range(self.start, n):
            time.sleep(self.delay)
            self.total += i * i  # one step, then its state: a signal between two bytecodes sees them in step
            self.start = i + 1
        return self.total, self.starts

    def checkpoint(self, n: int) -> Summer:
        return Summer(self.delay, self.start, self.total, self.starts)


def checkpointed_and_resumed(make: Make, time_limit: float, steps: int, delay: float) -> None:
    rules = {"rules": [{"cause": ["timeout", "preempted"], "action": "resubmit", "limit": 5}]}
    with make(time_limit=time_limit, rules=rules) as ex:
        future = ex.submit(Summer(delay), steps)
        total, starts = future.result(timeout=600)
        assert total == sum(i * i for i in range(steps))
        assert len(starts) >= 2 and starts[0] == 0 and list(starts) == sorted(set(starts)), starts
        record = ex.cluster.get(future.job_id)
        # the rule resubmitted it: every execution after the first resumed from a checkpoint
        assert len(record.submissions) >= 2, (starts, [sub.n for sub in record.submissions])
