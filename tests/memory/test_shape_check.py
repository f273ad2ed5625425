"""The memory cluster's ShapeCheck: a job no node of it could ever hold (nodes, CPUs, memory per node) is
refused by the core before anything is recorded; a cluster that counts nothing refuses only too many nodes."""

from __future__ import annotations

import re

import pytest

from dispatch import FakeClock, JobSpec
from dispatch.cluster import Cluster
from dispatch.errors import Unsupported
from dispatch.memory import MemoryScheduler, backend
from dispatch.records import MemoryRecords
from dispatch.resources import Resources


def test_what_no_node_holds_is_refused_before_recording() -> None:
    clock = FakeClock()
    sched = MemoryScheduler(clock, "slurm", nodes=2, cpus_per_node=4, memory_per_node=8192)
    records = MemoryRecords()
    cluster = Cluster("memory", backend(sched), records, clock)
    for spec, why in (
        (JobSpec(("true",), nodes=3), "refused: 3 nodes asked, the memory cluster has 2"),
        (JobSpec(("true",), procs_per_node=8), "refused: 8 rank(s) x 1 CPU(s) per node asked, the nodes of the"),
        (JobSpec(("true",), resources=Resources(mem_per_node="16G")), "refused: 16G of memory per node asked"),
    ):
        with pytest.raises(Unsupported, match=re.escape(why)):
            cluster.submit(spec)
    assert records.jobs(active_only=False) == []
    assert cluster.submit(JobSpec(("true",), nodes=2, procs_per_node=4, resources=Resources(mem_per_node="8G")))


def test_a_cluster_that_counts_nothing_refuses_only_too_many_nodes() -> None:
    b = backend(MemoryScheduler(FakeClock(), "slurm", nodes=2))
    assert b.never_runs(JobSpec(("true",), procs_per_node=64, resources=Resources(mem_per_node="1T"))) is None
    assert b.never_runs(JobSpec(("true",), nodes=3)) == "3 nodes asked, the memory cluster has 2"
