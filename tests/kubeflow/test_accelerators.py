"""Node allocatable GPUs read into the Accelerators inventory, per node pool."""

from __future__ import annotations

from typing import Any

from dispatch.accelerators import GpuPool
from dispatch.kubeflow.accelerators import node_inventory


def node(name: str, gpus: str | None, **labels: str) -> dict[str, Any]:
    alloc = {"cpu": "8", "memory": "32Gi"} | ({"nvidia.com/gpu": gpus} if gpus is not None else {})
    return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": alloc}}


def test_nodes_are_counted_per_pool_and_type() -> None:
    nodes = [
        node("a", "8", **{"karpenter.sh/nodepool": "train", "nvidia.com/gpu.product": "H100"}),
        node("b", "8", **{"karpenter.sh/nodepool": "train", "nvidia.com/gpu.product": "H100"}),
        node("c", None),
        node("d", "bogus"),
    ]
    inv = node_inventory(nodes, "nvidia.com/gpu", "nvidia.com/gpu.product")
    assert inv.pools == (GpuPool("train", "H100", 8, 2),)
    untyped = node_inventory(nodes, "nvidia.com/gpu", None)
    assert untyped.pools == (GpuPool("train", None, 8, 2),)
    assert node_inventory(nodes[2:], "nvidia.com/gpu", None).pools == ()
