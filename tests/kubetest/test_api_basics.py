"""CRUD, status subresource, conflicts, errors and selectors through the real lightkube client."""

from __future__ import annotations

import httpx
import pytest
from lightkube import ApiError, Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Namespace, Node, Pod
from lightkube.types import PatchType

from dispatch_kubetest import FakeAPIServer

from .conftest import AUTH, ClusterTrainingRuntime, TrainJob, trainjob


def test_discovery_lists_groups_and_can_unserve(server: FakeAPIServer) -> None:
    groups = httpx.get(headers=AUTH, url=f"{server.url}/apis").json()["groups"]
    names = {g["name"]: g["preferredVersion"]["version"] for g in groups}
    assert names["trainer.kubeflow.org"] == "v1alpha1"
    assert names["jobset.x-k8s.io"] == "v1alpha2"
    assert names["kueue.x-k8s.io"] == "v1beta2"
    assert names["authorization.k8s.io"] == "v1"
    trainer = httpx.get(headers=AUTH, url=f"{server.url}/apis/trainer.kubeflow.org/v1alpha1").json()
    assert {"trainjobs", "trainjobs/status", "clustertrainingruntimes"} <= {r["name"] for r in trainer["resources"]}
    core = httpx.get(headers=AUTH, url=f"{server.url}/api/v1").json()
    assert {"pods", "pods/log", "nodes", "namespaces", "events"} <= {r["name"] for r in core["resources"]}

    server.control.unserve("kueue.x-k8s.io/v1beta2")
    assert "kueue.x-k8s.io" not in {
        g["name"] for g in httpx.get(headers=AUTH, url=f"{server.url}/apis").json()["groups"]
    }
    assert httpx.get(headers=AUTH, url=f"{server.url}/apis/kueue.x-k8s.io/v1beta2").status_code == 404
    assert httpx.get(headers=AUTH, url=f"{server.url}/apis/kueue.x-k8s.io/v1beta2/workloads").status_code == 404


def test_crud_metadata_and_generation(server: FakeAPIServer, client: Client) -> None:
    server.control.reactors.clear()  # a bare apiserver: no controller reacts to the TrainJob
    created = client.create(TrainJob(trainjob("tj-a")))
    meta = created.metadata
    assert meta.uid and meta.creationTimestamp and meta.generation == 1
    rv1 = int(meta.resourceVersion)

    fetched = client.get(TrainJob, "tj-a", namespace="default")
    assert fetched.metadata.uid == meta.uid
    assert fetched["spec"]["trainer"]["numNodes"] == 2

    patched = client.patch(
        TrainJob,
        "tj-a",
        {"spec": {"trainer": {"numNodes": 4}}},
        namespace="default",
        patch_type=PatchType.MERGE,
    )
    assert patched.metadata.generation == 2
    assert int(patched.metadata.resourceVersion) > rv1

    labelled = client.patch(
        TrainJob,
        "tj-a",
        {"metadata": {"labels": {"team": "a"}}},
        namespace="default",
        patch_type=PatchType.MERGE,
    )
    assert labelled.metadata.generation == 2, "metadata changes do not bump generation"

    items = list(client.list(TrainJob, namespace="default"))
    assert [i.metadata.name for i in items] == ["tj-a"]
    client.delete(TrainJob, "tj-a", namespace="default")
    with pytest.raises(ApiError) as err:
        client.get(TrainJob, "tj-a", namespace="default")
    assert err.value.status.code == 404
    assert err.value.status.reason == "NotFound"
    assert err.value.status.message == 'trainjobs.trainer.kubeflow.org "tj-a" not found'


def test_status_subresource_is_separate(server: FakeAPIServer, client: Client) -> None:
    server.control.reactors.clear()
    body = trainjob("tj-s")
    body["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    created = client.create(TrainJob(body))
    assert not created.get("status"), "status sent on create is dropped"

    with_status = client.patch(
        TrainJob.Status,
        "tj-s",
        {
            "status": {
                "jobsStatus": [{"name": "node", "active": 2, "ready": 0, "succeeded": 0, "failed": 0, "suspended": 0}]
            }
        },
        namespace="default",
        patch_type=PatchType.MERGE,
    )
    assert with_status["status"]["jobsStatus"][0]["active"] == 2
    assert with_status.metadata.generation == 1

    # a spec write carrying status leaves status alone; a status write leaves spec alone
    spec_write = client.patch(
        TrainJob,
        "tj-s",
        {"spec": {"suspend": True}, "status": {"jobsStatus": []}},
        namespace="default",
        patch_type=PatchType.MERGE,
    )
    assert spec_write["status"]["jobsStatus"][0]["active"] == 2
    assert spec_write["spec"]["suspend"] is True
    status_write = client.patch(
        TrainJob.Status,
        "tj-s",
        {"spec": {"suspend": False}, "status": {"jobsStatus": []}},
        namespace="default",
        patch_type=PatchType.MERGE,
    )
    assert status_write["spec"]["suspend"] is True
    assert status_write["status"]["jobsStatus"] == []


def test_conflict_on_stale_resource_version(server: FakeAPIServer, client: Client) -> None:
    cm = client.create(ConfigMap(metadata=ObjectMeta(name="c1", namespace="default"), data={"a": "1"}))
    stale = cm.metadata.resourceVersion
    cm.data = {"a": "2"}
    client.replace(cm)
    cm.data = {"a": "3"}
    cm.metadata.resourceVersion = stale
    with pytest.raises(ApiError) as err:
        client.replace(cm)
    assert err.value.status.code == 409
    assert err.value.status.reason == "Conflict"
    assert "the object has been modified" in err.value.status.message
    assert client.get(ConfigMap, "c1", namespace="default").data == {"a": "2"}


def test_already_exists_missing_namespace_and_invalid_name(client: Client) -> None:
    client.create(ConfigMap(metadata=ObjectMeta(name="dup", namespace="default")))
    with pytest.raises(ApiError) as err:
        client.create(ConfigMap(metadata=ObjectMeta(name="dup", namespace="default")))
    assert (err.value.status.code, err.value.status.reason) == (409, "AlreadyExists")

    with pytest.raises(ApiError) as err:
        client.create(ConfigMap(metadata=ObjectMeta(name="x", namespace="nowhere")))
    assert (err.value.status.code, err.value.status.message) == (404, 'namespaces "nowhere" not found')

    with pytest.raises(ApiError) as err:
        client.create(TrainJob(trainjob("Bad_Name")))
    assert (err.value.status.code, err.value.status.reason) == (422, "Invalid")
    assert err.value.status.details.causes[0].field == "metadata.name"


def test_strategic_merge_is_refused_on_custom_resources(server: FakeAPIServer, client: Client) -> None:
    server.control.reactors.clear()
    client.create(TrainJob(trainjob("tj-smp")))
    with pytest.raises(ApiError) as err:
        client.patch(TrainJob, "tj-smp", {"spec": {"suspend": True}}, namespace="default")  # lightkube default: SMP
    assert (err.value.status.code, err.value.status.reason) == (415, "UnsupportedMediaType")
    # built-in types accept it (approximated as a merge patch)
    client.create(ConfigMap(metadata=ObjectMeta(name="smp", namespace="default"), data={"a": "1"}))
    out = client.patch(ConfigMap, "smp", {"data": {"b": "2"}}, namespace="default")
    assert out.data == {"a": "1", "b": "2"}


def test_json_patch(client: Client) -> None:
    client.create(ConfigMap(metadata=ObjectMeta(name="jp", namespace="default"), data={"a": "1"}))
    out = client.patch(
        ConfigMap,
        "jp",
        [{"op": "add", "path": "/data/b", "value": "2"}, {"op": "remove", "path": "/data/a"}],
        namespace="default",
        patch_type=PatchType.JSON,
    )
    assert out.data == {"b": "2"}


def test_label_and_field_selectors(server: FakeAPIServer, client: Client) -> None:
    server.control.reactors.clear()
    for name, labels, node, phase in (
        ("p1", {"app": "a", "tier": "x"}, "n1", "Running"),
        ("p2", {"app": "b"}, "n2", "Pending"),
        ("p3", {"app": "c", "tier": "y"}, "n1", "Failed"),
    ):
        server.control.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "labels": labels},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
                "status": {"phase": phase},
            }
        )

    def names(**kw: object) -> list[str]:
        return sorted(p.metadata.name for p in client.list(Pod, namespace="default", **kw))

    assert names(labels={"app": "a"}) == ["p1"]
    assert names(labels={"app": ("a", "b")}) == ["p1", "p2"]
    assert names(labels={"tier": None}) == ["p1", "p3"]  # exists
    raw = httpx.get(
        headers=AUTH,
        url=f"{server.url}/api/v1/namespaces/default/pods",
        params={"labelSelector": "app notin (a),!tier"},
    ).json()
    assert [i["metadata"]["name"] for i in raw["items"]] == ["p2"]
    raw = httpx.get(
        headers=AUTH, url=f"{server.url}/api/v1/namespaces/default/pods", params={"labelSelector": "app!=a"}
    ).json()
    assert [i["metadata"]["name"] for i in raw["items"]] == ["p2", "p3"]
    assert names(fields={"spec.nodeName": "n1"}) == ["p1", "p3"]
    assert names(fields={"status.phase": "Running"}) == ["p1"]
    assert names(fields={"metadata.name": "p2"}) == ["p2"]
    bad = httpx.get(
        headers=AUTH, url=f"{server.url}/api/v1/namespaces/default/pods", params={"fieldSelector": "spec.bogus=1"}
    )
    assert bad.status_code == 400 and bad.json()["reason"] == "BadRequest"


def test_list_pagination_and_resource_version(server: FakeAPIServer, client: Client) -> None:
    for i in range(5):
        client.create(ConfigMap(metadata=ObjectMeta(name=f"cm{i}", namespace="default")))
    first = httpx.get(
        headers=AUTH, url=f"{server.url}/api/v1/namespaces/default/configmaps", params={"limit": 2}
    ).json()
    assert len(first["items"]) == 2 and first["metadata"]["continue"]
    assert int(first["metadata"]["resourceVersion"]) == server.store.resource_version
    listed = list(client.list(ConfigMap, namespace="default", chunk_size=2))
    assert [c.metadata.name for c in listed] == [f"cm{i}" for i in range(5)]
    client.create(ConfigMap(metadata=ObjectMeta(name="later", namespace="default")))
    server.control.compact()  # history before the write above is gone: the token's version too
    expired = httpx.get(
        headers=AUTH,
        url=f"{server.url}/api/v1/namespaces/default/configmaps",
        params={"limit": 2, "continue": first["metadata"]["continue"]},
    )
    assert expired.status_code == 410 and expired.json()["reason"] == "Expired"


def test_cluster_scoped_objects_and_namespaces(server: FakeAPIServer, client: Client) -> None:
    server.control.add_node("worker-0", labels={"pool": "gpu"})
    node = client.get(Node, "worker-0")
    assert node.status.conditions[0].type == "Ready" and node.status.conditions[0].status == "True"
    client.create(Namespace(metadata=ObjectMeta(name="ml")))
    client.create(ConfigMap(metadata=ObjectMeta(name="in-ml", namespace="ml")))
    client.create(
        ClusterTrainingRuntime(
            server.control
            and {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "ClusterTrainingRuntime",
                "metadata": {"name": "rt"},
                "spec": {"mlPolicy": {"numNodes": 1}},
            }
        )
    )
    assert client.get(ClusterTrainingRuntime, "rt").metadata.namespace is None
    client.delete(Namespace, "ml")
    with pytest.raises(ApiError):
        client.get(ConfigMap, "in-ml", namespace="ml")


def test_dry_run_validates_without_persisting(server: FakeAPIServer, client: Client) -> None:
    before = server.store.resource_version
    out = client.create(ConfigMap(metadata=ObjectMeta(name="dry", namespace="default")), dry_run=True)
    assert out.metadata.uid
    with pytest.raises(ApiError) as err:
        client.get(ConfigMap, "dry", namespace="default")
    assert err.value.status.code == 404
    with pytest.raises(ApiError) as err:  # admission and validation still run
        client.create(ConfigMap(metadata=ObjectMeta(name="x", namespace="nowhere")), dry_run=True)
    assert err.value.status.code == 404
    client.create(ConfigMap(metadata=ObjectMeta(name="real", namespace="default"), data={"a": "1"}))
    after_create = server.store.resource_version
    client.patch(ConfigMap, "real", {"data": {"a": "2"}}, namespace="default", patch_type=PatchType.MERGE, dry_run=True)
    client.delete(ConfigMap, "real", namespace="default", dry_run=True)
    assert client.get(ConfigMap, "real", namespace="default").data == {"a": "1"}
    assert server.store.resource_version == after_create == before + 1
    bad = httpx.post(
        headers=AUTH,
        url=f"{server.url}/api/v1/namespaces/default/configmaps",
        params={"dryRun": "Yes"},
        json={"metadata": {"name": "b"}},
    )
    assert bad.status_code == 400


def test_core_objects_from_clients_are_checked_against_the_published_schema(server: FakeAPIServer) -> None:
    """Built-in objects are validated with kubernetes-validate's copy of Kubernetes' OpenAPI schemas."""
    url = f"{server.url}/api/v1/namespaces/default/pods"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": 3}]},
    }
    r = httpx.post(url, json=pod, headers=AUTH)
    assert r.status_code == 422, r.text
    assert r.json()["details"]["causes"][0]["field"] == "spec.containers[0].image"
    assert httpx.get(f"{url}/p", headers=AUTH).status_code == 404
    pod["spec"]["containers"][0].update(image="x", bogus=1)
    r = httpx.post(url, json=pod, headers=AUTH, params={"fieldValidation": "Strict"})
    assert r.status_code == 400 and "strict decoding error" in r.json()["message"], r.text


def test_delete_propagation_policies(server: FakeAPIServer) -> None:
    """Background collects dependents, Orphan keeps them without the ownerReference, Foreground is refused
    with a clear error (not modelled) instead of silently behaving like Background."""
    base = f"{server.url}/api/v1/namespaces/default/configmaps"

    def owner_and_child(tag: str) -> None:
        owner = httpx.post(base, json={"metadata": {"name": f"o-{tag}"}}, headers=AUTH).json()
        ref = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
        }
        child = {"metadata": {"name": f"c-{tag}", "ownerReferences": [ref]}}
        assert httpx.post(base, json=child, headers=AUTH).status_code == 201

    def delete(name: str, policy: str) -> httpx.Response:
        return httpx.request("DELETE", f"{base}/{name}", json={"propagationPolicy": policy}, headers=AUTH)

    owner_and_child("bg")
    assert delete("o-bg", "Background").status_code == 200
    assert httpx.get(f"{base}/c-bg", headers=AUTH).status_code == 404
    owner_and_child("or")
    assert delete("o-or", "Orphan").status_code == 200
    kept = httpx.get(f"{base}/c-or", headers=AUTH).json()
    assert "ownerReferences" not in kept["metadata"]
    owner_and_child("fg")
    r = delete("o-fg", "Foreground")
    assert r.status_code == 400 and "not modelled" in r.json()["message"]
    assert httpx.get(f"{base}/o-fg", headers=AUTH).status_code == 200


def test_pod_deletion_honours_the_grace_period_asked_for(server: FakeAPIServer) -> None:
    """A pod deletion that asks for a grace period leaves the pod Terminating that long (test_graceful_deletion.py
    has the details); grace 0 deletes at once; a grace that is not a number is a 400."""
    server.control.add_node("n0")
    base = f"{server.url}/api/v1/namespaces/default/pods"
    for name in ("p-grace", "p-zero"):
        pod = {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        assert httpx.post(base, json=pod, headers=AUTH).status_code == 201
        server.control.run_pod(name)
    r = httpx.request("DELETE", f"{base}/p-grace", json={"gracePeriodSeconds": 30}, headers=AUTH)
    assert r.status_code == 200 and r.json()["metadata"]["deletionGracePeriodSeconds"] == 30, r.text
    assert httpx.get(f"{base}/p-grace", headers=AUTH).status_code == 200
    r = httpx.delete(f"{base}/p-grace", params={"gracePeriodSeconds": "soon"}, headers=AUTH)
    assert r.status_code == 400 and "gracePeriodSeconds" in r.json()["message"], r.text
    assert httpx.request("DELETE", f"{base}/p-zero", json={"gracePeriodSeconds": 0}, headers=AUTH).status_code == 200
    assert httpx.get(f"{base}/p-zero", headers=AUTH).status_code == 404
