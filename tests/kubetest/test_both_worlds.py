"""API semantics asserted identically in both worlds: the real apiextensions-apiserver and dispatch_kubetest.

Each test runs twice, against upstream Kubernetes code (``real``, marked ``apiserver``) and against the
project's own server (``fake``); the assertions do not know which. What the adapter relies on is here: 422 with
nothing stored, defaulting and pruning from the CRD schemas, PUT without resourceVersion, 409 on a stale one,
shared server-side-apply ownership, and the watch-list's initial-events-end bookmark.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from dispatch_kubetest import FakeAPIServer
from dispatch_kubetest.crdserver import CRDAPIServer

TJ = "/apis/trainer.kubeflow.org/v1alpha1"
TOKEN = "both-worlds"


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.apiserver)])
def world(request: pytest.FixtureRequest) -> Iterator[tuple[httpx.Client, str]]:
    ns = f"t-{uuid.uuid4().hex[:10]}"
    if request.param == "real":
        srv: CRDAPIServer = request.getfixturevalue("crd_server")
        with httpx.Client(base_url=srv.url, verify=srv.ssl_context(), timeout=30) as c:
            yield c, ns  # the real server has no Namespace objects: any name works
        return
    with FakeAPIServer(reactors=False, bookmark_interval=0.2) as fake:
        fake.control.add_namespace(ns)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=fake.url, headers=headers, timeout=30) as c:
            yield c, ns


@pytest.fixture
def api(world: tuple[httpx.Client, str]) -> httpx.Client:
    return world[0]


@pytest.fixture
def ns(world: tuple[httpx.Client, str]) -> str:
    return world[1]


def trainjob(name: str, ns: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 2}, **spec},
    }


def apply(api: httpx.Client, path: str, body: dict[str, Any], manager: str, force: bool = False) -> httpx.Response:
    q = f"?fieldManager={manager}" + ("&force=true" if force else "")
    return api.patch(path + q, content=json.dumps(body), headers={"Content-Type": "application/apply-patch+yaml"})


def test_wrongly_typed_trainjob_is_422_and_nothing_is_stored(api: httpx.Client, ns: str) -> None:
    bad = trainjob("bad", ns, trainer={"numNodes": "two"})
    r = api.post(f"{TJ}/namespaces/{ns}/trainjobs", json=bad)
    assert r.status_code == 422, r.text
    causes = r.json()["details"]["causes"]
    assert any(c["field"] == "spec.trainer.numNodes" for c in causes), causes
    assert api.get(f"{TJ}/namespaces/{ns}/trainjobs/bad").status_code == 404
    assert api.post(f"{TJ}/namespaces/{ns}/trainjobs", json=trainjob("good", ns)).status_code == 201


def test_defaults_are_filled_and_unknown_fields_pruned(api: httpx.Client, ns: str) -> None:
    body = trainjob("d", ns)
    body["spec"]["unknownField"] = 1
    r = api.post(f"{TJ}/namespaces/{ns}/trainjobs", json=body)
    assert r.status_code == 201, r.text
    spec = r.json()["spec"]
    assert spec["runtimeRef"] == {
        "name": "torch-distributed",
        "kind": "ClusterTrainingRuntime",
        "apiGroup": "trainer.kubeflow.org",
    }
    assert spec["suspend"] is False and "unknownField" not in spec
    strict = trainjob("s", ns)
    strict["spec"]["unknownField"] = 1
    r = api.post(f"{TJ}/namespaces/{ns}/trainjobs?fieldValidation=Strict", json=strict)
    assert r.status_code == 400 and 'unknown field "spec.unknownField"' in r.json()["message"], r.text


def test_put_without_resource_version_is_422_and_stale_is_409(api: httpx.Client, ns: str) -> None:
    created = api.post(f"{TJ}/namespaces/{ns}/trainjobs", json=trainjob("p", ns)).json()
    body = copy.deepcopy(created)
    del body["metadata"]["resourceVersion"]
    r = api.put(f"{TJ}/namespaces/{ns}/trainjobs/p", json=body)
    assert r.status_code == 422 and "must be specified for an update" in r.text, r.text
    api.patch(
        f"{TJ}/namespaces/{ns}/trainjobs/p",
        content=b'{"metadata":{"labels":{"a":"b"}}}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    r = api.put(f"{TJ}/namespaces/{ns}/trainjobs/p", json=created)
    assert r.status_code == 409, r.text


def test_server_side_apply_shares_ownership(api: httpx.Client, ns: str) -> None:
    """Two managers applying the same value share it; the field stays while either still applies it."""
    path = f"{TJ}/namespaces/{ns}/trainjobs/ssa"
    assert apply(api, path, trainjob("ssa", ns, suspend=True), "adapter").status_code == 201
    assert apply(api, path, trainjob("ssa", ns, suspend=True), "kueue").status_code == 200
    mine = trainjob("ssa", ns)  # "kueue" stops applying spec.suspend
    r = apply(api, path, mine, "kueue")
    assert r.status_code == 200 and r.json()["spec"]["suspend"] is True, r.text
    r = apply(api, path, trainjob("ssa", ns, suspend=False), "other")
    assert r.status_code == 409 and "adapter" in r.text, r.text
    r = apply(api, path, trainjob("ssa", ns), "adapter")  # the last owner lets go: the default comes back
    assert r.json()["spec"]["suspend"] is False


def test_watch_send_initial_events_ends_with_bookmark(api: httpx.Client, ns: str) -> None:
    for i in range(2):
        api.post(f"{TJ}/namespaces/{ns}/trainjobs", json=trainjob(f"w{i}", ns))
    q = "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=5"
    events = []
    with api.stream("GET", f"{TJ}/namespaces/{ns}/trainjobs?{q}") as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            ev = json.loads(line)
            events.append(ev)
            if ev["type"] == "BOOKMARK":
                break
    assert [e["type"] for e in events] == ["ADDED", "ADDED", "BOOKMARK"]
    assert events[-1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"] == "true"


def test_list_resource_version_match(api: httpx.Client, ns: str) -> None:
    created = api.post(f"{TJ}/namespaces/{ns}/trainjobs", json=trainjob("m", ns)).json()
    rv = created["metadata"]["resourceVersion"]
    r = api.get(
        f"{TJ}/namespaces/{ns}/trainjobs", params={"resourceVersion": rv, "resourceVersionMatch": "NotOlderThan"}
    )
    assert r.status_code == 200 and [i["metadata"]["name"] for i in r.json()["items"]] == ["m"]
    r = api.get(f"{TJ}/namespaces/{ns}/trainjobs", params={"resourceVersionMatch": "NotOlderThan"})
    assert r.status_code == 422, r.text
    r = api.get(f"{TJ}/namespaces/{ns}/trainjobs?watch=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1")
    assert r.status_code == 422, r.text
