"""Capacity per node in the memory scheduler: GPUs (with a type), CPUs and memory are held by the jobs that run
on a node, so a job (a resubmission too) that needs GPUs waits until enough nodes have them free."""

from __future__ import annotations

import pytest

import dispatch
from dispatch import Cause, FakeClock, JobSpec, State
from dispatch.capabilities import Answer, Capability
from dispatch.cluster import Cluster
from dispatch.errors import Unsupported
from dispatch.memory import MemoryScheduler, MemorySettings, backend, forget, scheduler_for
from dispatch.records import MemoryRecords
from dispatch.resources import Resources
from dispatch.spi import StartRequest
from dispatch.supervise import Supervisor

RESUBMIT = {"rules": [{"name": "evicted", "cause": ["preempted"], "action": "resubmit", "limit": 2}]}


def _gpu_spec(argv: tuple[str, ...], gpus: int, nodes: int = 2, **kw: object) -> JobSpec:
    return JobSpec(argv, nodes=nodes, resources=Resources(gpus_per_node=gpus, **kw))  # type: ignore[arg-type]


def _start(sched: MemoryScheduler, spec: JobSpec, job: str) -> str:
    b = backend(sched)
    sid: str = b.start(StartRequest(job, 1, f"dsp-{job}-1", spec))
    b.open(sid)
    return sid


def test_a_resubmission_that_needs_gpus_waits_for_them_though_other_nodes_are_free() -> None:
    clock = FakeClock()
    # node1, node2: 4 GPUs each; node3, node4: none
    sched = MemoryScheduler(clock, "slurm", nodes=4, gpus_per_node=4, gpu_nodes=2)
    b = backend(sched)
    records = MemoryRecords()
    cluster = Cluster("memory", b, records, clock)
    sup = Supervisor(b, records, clock=clock, owner="sup-a", poll=10)

    def cycles(n: int) -> None:
        for _ in range(n):
            sup.cycle()
            clock.advance(10)

    training = cluster.submit(_gpu_spec(("sleep", "500"), 4), RESUBMIT)
    cycles(1)
    first = records.get(training).current
    assert first is not None and first.scheduler_id is not None
    assert sched.jobs[first.scheduler_id].current.nodes == ("node1", "node2")
    sched.control.preempt(first.scheduler_id)
    # before the supervisor resubmits, another job takes both GPU nodes' GPUs for 100 s
    other = _start(sched, _gpu_spec(("sleep", "100"), 3), "other")
    assert sched.jobs[other].current.nodes == ("node1", "node2")
    cycles(3)
    job = records.get(training)
    assert [s.n for s in job.submissions] == [1, 2]
    second = job.current
    assert second is not None and second.scheduler_id is not None
    waiting = b.inspect(second.scheduler_id)
    assert waiting.outcome.state is State.PENDING and waiting.outcome.cause is Cause.QUEUED, waiting.outcome
    assert sched.control.running() == [other], "node3 and node4 are free but have no GPUs"
    clock.advance(100)
    started = b.inspect(second.scheduler_id)
    assert started.outcome.state is State.RUNNING, started.outcome
    assert sched.jobs[second.scheduler_id].current.nodes == ("node1", "node2")
    cycles(60)
    job = records.get(training)
    assert job.closed and job.state is State.SUCCEEDED


def test_jobs_share_a_node_while_their_gpus_cpus_and_memory_add_up_to_what_it_holds() -> None:
    clock = FakeClock()
    sched = MemoryScheduler(clock, "slurm", nodes=1, gpus_per_node=4, cpus_per_node=8, memory_per_node=4096)
    a = _start(sched, _gpu_spec(("sleep", "50"), 2, nodes=1), "a")
    b = _start(sched, _gpu_spec(("sleep", "100"), 2, nodes=1, mem_per_node=1024), "b")
    c = _start(sched, _gpu_spec(("sleep", "50"), 1, nodes=1), "c")  # no GPU left
    d = _start(sched, JobSpec(("sleep", "10"), procs_per_node=2, resources=Resources(cpus_per_proc=2)), "d")
    assert sched.control.running() == [a, b, d], "2 + 2 GPUs, 1 + 1 + 4 CPUs: c waits for a GPU"
    e = _start(sched, JobSpec(("sleep", "10"), resources=Resources(mem_per_node=3500)), "e")
    f = _start(sched, JobSpec(("sleep", "10"), resources=Resources(cpus_per_proc=8)), "f")
    clock.advance(10)
    assert sched.control.running() == [a, b], "d ended; e needs more memory than b leaves, f every CPU"
    clock.advance(40)
    assert sched.control.running() == [b, c], "a's GPUs went to c, the first waiting job that fits"
    whole = _start(sched, JobSpec(("sleep", "10")), "whole")  # asks for nothing: takes the node whole
    clock.advance(50)
    assert sched.control.running() == [e], "b and c ended: e fits; f needs every CPU and e holds one"
    clock.advance(10)
    assert sched.control.running() == [f], "the job that asks for nothing waits for an empty node"
    clock.advance(10)
    assert sched.control.running() == [whole]


def test_a_gpu_type_or_count_no_node_has_waits_for_capacity_and_is_refused_at_submission() -> None:
    clock = FakeClock()
    sched = MemoryScheduler(clock, "slurm", nodes=3, gpus_per_node=8, gpu_type="a100-sxm4-40gb", gpu_nodes=2)
    b = backend(sched)
    never = _start(sched, _gpu_spec(("sleep", "10"), 1, gpu_type="h100"), "never")
    three = _start(sched, _gpu_spec(("sleep", "10"), 1, nodes=3), "three")
    fits = _start(sched, _gpu_spec(("sleep", "10"), 8, gpu_type="a100"), "fits")
    assert b.inspect(never).outcome.cause is Cause.NO_CAPACITY
    assert b.inspect(three).outcome.cause is Cause.NO_CAPACITY
    assert b.inspect(fits).outcome.state is State.RUNNING

    answer = b.capabilities()[Capability.ACCELERATORS]
    assert answer.answer is Answer.YES and answer.reason.startswith("nodes: 2 node(s) with 8 a100-sxm4-40gb GPU(s)")
    records = MemoryRecords()
    cluster = Cluster("memory", b, records, clock)
    with pytest.raises(Unsupported, match=r"can never run 1 node\(s\) with 1 h100 GPU\(s\) each: it has nodes: 2"):
        cluster.submit(_gpu_spec(("true",), 1, nodes=1, gpu_type="h100"))
    with pytest.raises(Unsupported, match=r"can never run 3 node\(s\) with 1 GPU\(s\) each"):
        cluster.submit(_gpu_spec(("true",), 1, nodes=3))
    assert records.jobs(active_only=False) == []


def test_a_cluster_that_counts_nothing_keeps_whole_node_scheduling_and_has_no_gpus() -> None:
    clock = FakeClock()
    sched = MemoryScheduler(clock, "slurm", nodes=2)
    first = _start(sched, JobSpec(("sleep", "10"), resources=Resources(cpus_per_proc=1)), "first")
    second = _start(sched, JobSpec(("sleep", "10"), resources=Resources(cpus_per_proc=1)), "second")
    third = _start(sched, JobSpec(("sleep", "10")), "third")
    assert sched.control.running() == [first, second], "one job per node"
    clock.advance(10)
    assert sched.control.running() == [third]
    assert backend(sched).capabilities().answer(Capability.ACCELERATORS) is Answer.NO


def test_the_settings_give_the_nodes_their_capacity_and_refuse_nonsense() -> None:
    try:
        b = dispatch.open(
            "memory",
            adapter={"cluster": "gpu-settings", "nodes": 3, "gpusPerNode": 2, "gpuType": "a100", "gpuNodes": 1},
            clock=FakeClock(),
            read_only=True,
        ).backend
        caps = scheduler_for("gpu-settings").capacity
        assert [(c.gpus, c.gpu_type) for c in caps.values()] == [(2, "a100"), (0, None), (0, None)]
        assert "nodes: 1 node(s) with 2 a100 GPU(s)" in b.capabilities()[Capability.ACCELERATORS].reason
    finally:
        forget("gpu-settings")
    with pytest.raises(ValueError, match="gpuNodes must be between 0 and 2"):
        MemorySettings(nodes=2, gpus_per_node=1, gpu_nodes=3)
    with pytest.raises(ValueError, match="gpuType names the type"):
        MemorySettings(gpu_type="a100")
    with pytest.raises(ValueError, match="gpusPerNode must be between 0"):
        MemorySettings(gpus_per_node=-1)
