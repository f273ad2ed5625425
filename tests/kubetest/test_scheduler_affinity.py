"""The test cluster's scheduler honours a pod's required node affinity as Kubernetes does: terms ORed, a term's
requirements ANDed, ``matchExpressions`` on the node's labels, ``matchFields`` on ``metadata.name``."""

from __future__ import annotations

from typing import Any

from dispatch_kubetest.reactors.pods import affinity_allows


def _node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def _pod(*terms: dict[str, Any]) -> dict[str, Any]:
    required = {"nodeSelectorTerms": list(terms)}
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}}


def test_no_required_affinity_admits_every_node() -> None:
    assert affinity_allows({}, _node("a"))
    assert affinity_allows({"affinity": {"nodeAffinity": {}}}, _node("a"))


def test_match_fields_exclude_nodes_by_name() -> None:
    pod = _pod({"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["a", "b"]}]})
    assert [n for n in "abc" if affinity_allows(pod, _node(n))] == ["c"]


def test_terms_are_ored_and_a_terms_requirements_anded() -> None:
    not_a = {"key": "metadata.name", "operator": "NotIn", "values": ["a"]}
    pod = _pod(
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["x"]}], "matchFields": [not_a]},
        {"matchExpressions": [{"key": "gpu", "operator": "Exists"}], "matchFields": [not_a]},
    )
    assert not affinity_allows(pod, _node("a", pool="x"))  # its term's exclusion holds
    assert affinity_allows(pod, _node("b", pool="x"))
    assert affinity_allows(pod, _node("c", gpu="1"))  # the second term
    assert not affinity_allows(pod, _node("d", pool="y"))
    assert affinity_allows(_pod({"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}), _node("e"))
