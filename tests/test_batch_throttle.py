"""``submit_many(max_running=K)``: at most K of a batch's jobs run at once. The memory adapter's Slurm shape
keeps it (one throttled array), the local adapter and the Kubeflow shape refuse it before anything is recorded
(the BatchThrottle capability), and a cap the batch cannot keep is refused, never broken."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

import dispatch
from dispatch import ConfigError, FakeClock, JobSpec, Rejected, State, Unsupported
from dispatch.capabilities import Capability
from dispatch.extensions import Image
from dispatch.memory import forget, scheduler_for
from dispatch.records import MemoryRecords


@pytest.fixture
def memory() -> Iterator[tuple[dispatch.Cluster, FakeClock, str]]:
    name = f"throttle-{secrets.token_hex(4)}"
    clock = FakeClock()
    c = dispatch.open("memory", adapter={"cluster": name, "nodes": 8}, records=MemoryRecords(), clock=clock)
    yield c, clock, name
    forget(name)


def running(cluster: dispatch.Cluster, name: str, ids: list[str]) -> int:
    sched = scheduler_for(name)
    sched.advance()
    subs = [cluster.get(i).current for i in ids]
    return sum(1 for s in subs if s is not None and sched.jobs[str(s.scheduler_id)].current.live)


def test_at_most_k_of_the_batch_run_at_once_the_others_as_each_ends(
    memory: tuple[dispatch.Cluster, FakeClock, str],
) -> None:
    cluster, clock, name = memory
    assert cluster.capabilities()[Capability.BATCH_THROTTLE].yes
    got = cluster.operator.submit_many([JobSpec(("sleep", "10"))] * 5, max_running=2)
    assert all(g.ok for g in got), [g.error for g in got]
    ids = [g.job_id for g in got]
    seen = []
    for _ in range(4):
        seen.append(running(cluster, name, ids))
        clock.advance(10)
    assert seen == [2, 2, 1, 0], "8 nodes free, yet two at a time: 2, 2, then the fifth alone"
    sched = scheduler_for(name)
    (array,) = {str(cluster.get(i).current.scheduler_id).split("_")[0] for i in ids}  # type: ignore[union-attr]
    assert sched.throttles == {array: 2}


def test_a_cap_of_the_batch_s_size_or_more_caps_nothing(memory: tuple[dispatch.Cluster, FakeClock, str]) -> None:
    cluster, _, name = memory
    got = cluster.operator.submit_many([JobSpec(("sleep", "10"))] * 3, max_running=3)
    assert running(cluster, name, [g.job_id for g in got]) == 3 and scheduler_for(name).throttles == {}


def test_a_batch_that_needs_two_arrays_is_refused_not_split(memory: tuple[dispatch.Cluster, FakeClock, str]) -> None:
    cluster, _, name = memory
    specs = [JobSpec(("sleep", "10")), JobSpec(("sleep", "10")), JobSpec(("sleep", "10"), nodes=2)]
    got = cluster.operator.submit_many(specs, max_running=1)
    assert all(isinstance(g.error, Rejected) and "need 2 arrays" in str(g.error) for g in got), got
    assert scheduler_for(name).jobs == {}, "nothing was created"
    assert all(cluster.get(g.job_id).state is State.FAILED for g in got)


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_a_cap_that_is_not_a_positive_integer_is_a_config_error(
    memory: tuple[dispatch.Cluster, FakeClock, str], bad: object
) -> None:
    cluster, _, _ = memory
    with pytest.raises(ConfigError, match="max_running"):
        cluster.operator.submit_many([JobSpec(("true",))] * 2, max_running=bad)  # type: ignore[arg-type]
    assert cluster.observer.list() == []


def test_the_local_adapter_refuses_a_cap_before_anything_is_recorded(tmp_path: Path) -> None:
    with dispatch.open("local", adapter={"stateDir": str(tmp_path / "s")}, records=MemoryRecords()) as cluster:
        assert not cluster.capabilities()[Capability.BATCH_THROTTLE].yes
        with pytest.raises(Unsupported, match="max_running=1 needs BatchThrottle, which is no here: the local"):
            cluster.operator.submit_many([JobSpec(("true",))] * 2, max_running=1)
        assert cluster.observer.list() == []


def test_the_kubeflow_shape_refuses_a_cap() -> None:
    name = f"throttle-kf-{secrets.token_hex(4)}"
    settings = {"cluster": name, "shape": "kubeflow"}
    c = dispatch.open("memory", adapter=settings, records=MemoryRecords(), clock=FakeClock())
    image = Image(ref="busybox:1")
    try:
        with pytest.raises(Unsupported, match="BatchThrottle.*no job arrays"):
            c.operator.submit_many([JobSpec(("true",), extensions=(image,))] * 2, max_running=1)
        assert c.observer.list() == []
    finally:
        forget(name)
