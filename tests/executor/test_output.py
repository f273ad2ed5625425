"""A call's output through its future, on the local adapter: ``stdout()`` and ``stderr()`` read rank 0's own
files as ``dispatch logs`` reads them, during and after the call."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import cloudpickle
import pytest

import dispatch
import dispatch.job
from dispatch.cluster import Cluster
from dispatch.executor import Executor
from dispatch.job import context
from dispatch.records.memory import MemoryRecords

cloudpickle.register_pickle_by_value(sys.modules[__name__])
cloudpickle.register_pickle_by_value(dispatch.job)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with dispatch.open(
        "local", adapter={"stateDir": str(tmp_path / "state"), "grace": 1}, records=MemoryRecords()
    ) as c:
        yield c


def shout(word: str) -> str:
    rank = context().rank
    print(f"rank {rank} says {word}", flush=True)
    print(f"rank {rank} warns {word}", file=sys.stderr, flush=True)
    return word


def test_stdout_and_stderr_are_rank_0s(cluster: Cluster) -> None:
    with Executor(cluster, poll=0.1, nodes=2) as ex:
        future = ex.submit(shout, "hello")
        assert future.result(timeout=180) == "hello"
        out, err = future.stdout(), future.stderr()
    assert out is not None and "rank 0 says hello" in out and "rank 1" not in out
    assert err is not None and "rank 0 warns hello" in err and "rank 1" not in err
