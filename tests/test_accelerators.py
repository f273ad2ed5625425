"""The GPU inventory: which requests can ever run, the refusal naming what exists, its JSON."""

from __future__ import annotations

import pytest

import dispatch
from dispatch.accelerators import GpuPool, Inventory, check_request
from dispatch.capabilities import Answer, Capability
from dispatch.clock import FakeClock
from dispatch.errors import Unsupported
from dispatch.memory import MemoryScheduler, backend
from dispatch.records import MemoryRecords
from dispatch.resources import Resources
from dispatch.spec import JobSpec

INV = Inventory.of(
    [GpuPool("gpu", "a100-sxm4-40gb", 4, 2), GpuPool("gpu", "a100-sxm4-40gb", 4, 1), GpuPool("debug", None, 1, 3)],
    "sinfo Gres",
)


def test_pools_merge_and_describe_themselves() -> None:
    assert INV.pools == (GpuPool("debug", None, 1, 3), GpuPool("gpu", "a100-sxm4-40gb", 4, 3))
    assert INV.total == 15
    assert INV.describe() == "debug: 3 node(s) with 1 GPU(s); gpu: 3 node(s) with 4 a100-sxm4-40gb GPU(s) (sinfo Gres)"
    assert Inventory.from_json(INV.to_json()) == INV


@pytest.mark.parametrize(
    ("gpus", "kind", "nodes", "fits"),
    [(4, None, 3, True), (4, None, 4, False), (8, None, 1, False), (1, None, 6, False), (1, None, 3, True),
     (4, "a100", 3, True), (4, "A100-SXM4-40GB", 1, True), (1, "h100", 1, False), (0, None, 99, True)],
)  # fmt: skip
def test_a_request_fits_when_one_pool_has_enough_nodes_big_enough(
    gpus: int, kind: str | None, nodes: int, fits: bool
) -> None:
    assert INV.fits(Resources(gpus_per_node=gpus, gpu_type=kind if gpus else None), nodes) is fits


def test_the_refusal_names_the_request_and_the_inventory() -> None:
    with pytest.raises(Unsupported) as err:
        check_request(INV, Resources(gpus_per_node=8), 1, "cluster x")
    assert str(err.value) == (
        "cluster x can never run 1 node(s) with 8 GPU(s) each: it has debug: 3 node(s) with 1 GPU(s); "
        "gpu: 3 node(s) with 4 a100-sxm4-40gb GPU(s) (sinfo Gres)"
    )
    check_request(None, Resources(gpus_per_node=8), 1, "unknown inventory: the scheduler decides")


def test_a_cluster_without_gpus_refuses_a_gpu_request_before_recording_anything() -> None:
    records = MemoryRecords()
    cluster = dispatch.Cluster("sim", backend(MemoryScheduler(FakeClock(), "slurm")), records, FakeClock())
    assert cluster.capabilities().answer(Capability.ACCELERATORS) is Answer.NO
    with pytest.raises(
        Unsupported,
        match=r"can never run 1 node\(s\) with 1 GPU\(s\) each: it has no GPUs \(setting gpusPerNode is 0\)",
    ):
        cluster.submit(JobSpec(("true",), resources=Resources(gpus_per_node=1)))
    assert records.jobs(active_only=False) == []
    cluster.submit(JobSpec(("true",), resources=Resources(cpus_per_proc=2)))  # no GPUs asked: no check
