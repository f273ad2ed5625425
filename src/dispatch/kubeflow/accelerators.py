"""The cluster's GPUs as Kubernetes counts them: each node's allocatable GPU resource, per node pool.

The GPU resource is the ``gpuResource`` setting (``nvidia.com/gpu``); a node's GPU type is the value of its
``gpuTypeLabel`` label when that setting is given; its pool is the first node-pool label it carries
(:data:`POOL_LABELS`, the managed clouds' and Karpenter's), else ``nodes``. The nodes come from the adapter's
node watch (the same list it reads node loss from).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dispatch.accelerators import GpuPool, Inventory

POOL_LABELS = (
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "kubernetes.azure.com/agentpool",
    "karpenter.sh/nodepool",
)


def node_inventory(nodes: Iterable[Mapping[str, Any]], gpu_resource: str, type_label: str | None) -> Inventory:
    """The inventory of ``nodes`` (Node objects as JSON); a node whose allocatable count cannot be read counts
    no GPUs."""
    pools = []
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") or {}
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        raw = str(allocatable.get(gpu_resource, "0"))
        count = int(raw) if raw.isdigit() else 0
        pool = next((str(labels[k]) for k in POOL_LABELS if labels.get(k)), "nodes")
        kind = labels.get(type_label) if type_label else None
        pools.append(GpuPool(pool, None if kind is None else str(kind), count, 1))
    return Inventory.of(pools, f"node allocatable {gpu_resource}")
