"""The Kubeflow ShapeCheck: a pod asking more CPUs or memory than every node's allocatable is refused; what is
not asked, and nodes whose allocatable is not read, are never refused."""

from __future__ import annotations

from typing import Any

from dispatch.kubeflow.shapes import never_runs, quantity
from dispatch.resources import Resources
from dispatch.spec import JobSpec


def _node(cpu: str | None, memory: str | None) -> dict[str, Any]:
    alloc = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    return {"metadata": {"name": "n"}, "status": {"allocatable": alloc}}


def test_quantities() -> None:
    assert quantity("1500m") == 1.5 and quantity("2") == 2.0
    assert quantity("16384Ki") == 16 * 2**20 and quantity("4Gi") == 4 * 2**30 and quantity("1G") == 1e9
    assert quantity("lots") is None and quantity("4Xi") is None


def test_cpus_and_memory_against_the_largest_node() -> None:
    nodes = [_node("1900m", "7Gi"), _node("8", "31Gi")]
    spec = JobSpec(("true",), nodes=4, procs_per_node=2, resources=Resources(cpus_per_proc=4))
    assert never_runs(spec, nodes) is None  # 8 CPUs: the big node; pods of a job may share nodes
    spec = JobSpec(("true",), procs_per_node=3, resources=Resources(cpus_per_proc=3))
    assert never_runs(spec, nodes) == (
        "3 rank(s) x 3 CPU(s) per node asked, the nodes of this Kubernetes cluster have at most 8 CPU(s)"
    )
    spec = JobSpec(("true",), resources=Resources(mem_per_node="32G"))
    assert never_runs(spec, nodes) == (
        "32G of memory per node asked, the nodes of this Kubernetes cluster have at most 31G"
    )


def test_what_is_not_asked_or_not_known_is_not_refused() -> None:
    assert never_runs(JobSpec(("true",), procs_per_node=64), [_node("1", "1Gi")]) is None
    assert never_runs(JobSpec(("true",), resources=Resources(cpus_per_proc=64)), [_node(None, None)]) is None
    assert never_runs(JobSpec(("true",), resources=Resources(cpus_per_proc=64)), []) is None
    assert never_runs(JobSpec(("true",), resources=Resources(exclusive=True)), []) is not None
