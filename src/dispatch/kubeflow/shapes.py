"""What the watched nodes can hold, for :class:`dispatch.spi.ShapeCheck` (:mod:`dispatch.shapes`).

Each node of a TrainJob is a pod asking ``resourcesPerNode`` (:func:`dispatch.kubeflow.render.resources_per_node`):
``cpu`` = ranks per node x CPUs per process and ``memory`` where the spec asks them. A pod asking more than every
node's ``status.allocatable`` stays ``Unschedulable`` for as long as those are the nodes; pods of one TrainJob
may share a node, so the number of nodes is no limit. What is not asked is not judged, nor are the nodes a
cluster autoscaler could add (the same stance as the GPUs, :mod:`dispatch.kubeflow.accelerators`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from dispatch.shapes import NodeKind, Pool, Shape, refusal
from dispatch.spec import JobSpec

_QUANTITY = re.compile(r"([0-9]+(?:\.[0-9]+)?)([a-zA-Z]*)")
_SUFFIX = {
    "": 1.0,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
}


def quantity(text: object) -> float | None:
    """A Kubernetes quantity (``2``, ``1500m``, ``16384Ki``, ``4Gi``, ``4G``) in base units; None when unread."""
    m = _QUANTITY.fullmatch(str(text).strip())
    if m is None or m.group(2) not in _SUFFIX:
        return None
    return float(m.group(1)) * _SUFFIX[m.group(2)]


def _kind(node: Mapping[str, Any], cpu: bool, memory: bool) -> NodeKind:
    alloc = (node.get("status") or {}).get("allocatable") or {}
    cores = quantity(alloc.get("cpu")) if cpu and "cpu" in alloc else None
    mem = quantity(alloc.get("memory")) if memory and "memory" in alloc else None
    return NodeKind(
        1,
        math.floor(cores + 1e-9) if cores is not None else None,
        math.floor(mem / 2**20) if mem is not None else None,
    )


def never_runs(spec: JobSpec, nodes: Iterable[Mapping[str, Any]]) -> str | None:
    """Why no node of ``nodes`` (Node objects as JSON, whatever their state) could hold one pod of ``spec``."""
    res = spec.resources
    if res.exclusive:
        return "a Kubernetes pod cannot ask for a node of its own: drop resources.exclusive"
    cpu, memory = res.cpus_per_proc is not None, res.mem_per_node is not None
    if not (cpu or memory):
        return None
    kinds = tuple(_kind(n, cpu, memory) for n in nodes)
    if not kinds:
        return None
    return refusal(
        Pool("this Kubernetes cluster", kinds), Shape(1, spec.procs_per_node, res.cpus_per_proc or 1, res.mem_per_node)
    )
