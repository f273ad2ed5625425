"""RBAC and SelfSubjectAccessReview, pod logs, server-side apply, strict TrainJob validation."""

from __future__ import annotations

import queue
import threading
from pathlib import Path

import httpx
import pytest
from lightkube import ApiError, Client, KubeConfig
from lightkube.models.authorization_v1 import ResourceAttributes, SelfSubjectAccessReviewSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.authorization_v1 import SelfSubjectAccessReview
from lightkube.resources.core_v1 import ConfigMap, Pod
from lightkube.types import PatchType

from dispatch_kubetest import FakeAPIServer, rule
from dispatch_kubetest.resources import TRAINJOB

from .conftest import AUTH, TrainJob, trainjob


def _client_for(server: FakeAPIServer, tmp_path: Path, token: str) -> Client:
    path = server.write_kubeconfig(tmp_path / f"kc-{token}", token=token)
    return Client(KubeConfig.from_file(str(path)), timeout=10)


def _ssar(
    client: Client,
    verb: str,
    resource: str,
    group: str = "",
    subresource: str | None = None,
    namespace: str = "ml",
) -> bool:
    review = client.create(
        SelfSubjectAccessReview(
            spec=SelfSubjectAccessReviewSpec(
                resourceAttributes=ResourceAttributes(
                    verb=verb, group=group, resource=resource, subresource=subresource, namespace=namespace
                )
            )
        )
    )
    assert review.status is not None
    return bool(review.status.allowed)


def test_ssar_answers_from_the_rule_table(server: FakeAPIServer, tmp_path: Path) -> None:
    server.control.add_namespace("ml")
    server.control.set_rules(
        "reader",
        [
            rule("get,list,watch", "trainer.kubeflow.org", "trainjobs", ["ml"]),
            rule("get", "", "pods,pods/log", ["ml"]),
            rule("create", "authorization.k8s.io", "selfsubjectaccessreviews"),
        ],
        user="system:serviceaccount:ml:reader",
    )
    reader = _client_for(server, tmp_path, "reader")
    assert _ssar(reader, "list", "trainjobs", "trainer.kubeflow.org")
    assert not _ssar(reader, "create", "trainjobs", "trainer.kubeflow.org")
    assert not _ssar(reader, "list", "trainjobs", "trainer.kubeflow.org", namespace="other")
    assert _ssar(reader, "get", "pods", subresource="log")
    assert not _ssar(reader, "patch", "workloads", "kueue.x-k8s.io")
    admin = _client_for(server, tmp_path, "admin")  # no table: the default (allow all)
    assert _ssar(admin, "patch", "workloads", "kueue.x-k8s.io")


def test_denied_requests_are_403_status_objects(server: FakeAPIServer, tmp_path: Path) -> None:
    server.control.set_rules("ro", [rule("get,list", "", "configmaps")], user="alice")
    ro = _client_for(server, tmp_path, "ro")
    assert list(ro.list(ConfigMap, namespace="default")) == []
    with pytest.raises(ApiError) as err:
        ro.create(ConfigMap(metadata=ObjectMeta(name="nope", namespace="default")))
    status = err.value.status
    assert (status.code, status.reason) == (403, "Forbidden")
    assert status.message == (
        'configmaps is forbidden: User "alice" cannot create resource "configmaps" '
        'in API group "" in the namespace "default"'
    )
    server.rbac.require_token = True
    assert httpx.get(headers=AUTH, url=f"{server.url}/api/v1/namespaces").status_code == 401


def test_pod_log_follow_streams_appended_lines(server: FakeAPIServer, client: Client) -> None:
    cluster = server.control
    cluster.add_node("worker-0")
    cluster.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {
                "containers": [{"name": "node", "image": "i"}, {"name": "side", "image": "i"}],
                "restartPolicy": "Never",
            },
        },
        with_status=False,
    )
    with pytest.raises(ApiError) as err:
        list(client.log("p", namespace="default", container="node"))
    assert err.value.status.code == 400 and "waiting to start" in err.value.status.message
    cluster.run_pod("p")
    with pytest.raises(ApiError) as err:
        list(client.log("p", namespace="default"))
    assert "a container name must be specified" in err.value.status.message

    cluster.append_log("p", "line 1", "line 2")
    lines: queue.Queue[str] = queue.Queue()

    def follow() -> None:
        for line in client.log("p", namespace="default", container="node", follow=True):
            lines.put(line)
        lines.put("<end>")

    threading.Thread(target=follow, daemon=True).start()
    assert [lines.get(timeout=10) for _ in range(2)] == ["line 1\n", "line 2\n"]
    cluster.append_log("p", "line 3")
    assert lines.get(timeout=10) == "line 3\n"
    cluster.succeed_pod("p")  # the container terminated: the stream ends
    assert lines.get(timeout=10) == "<end>"
    assert list(client.log("p", namespace="default", container="node", tail_lines=1)) == ["line 3\n"]


def test_server_side_apply_ownership(server: FakeAPIServer, client: Client) -> None:
    cm = ConfigMap(metadata=ObjectMeta(name="ssa", namespace="default"), data={"a": "1", "b": "1"})
    created = client.apply(cm, field_manager="mgr-a")
    assert created.data == {"a": "1", "b": "1"}
    managers = {m.manager: m.operation for m in created.metadata.managedFields}
    assert managers == {"mgr-a": "Apply"}

    # another manager changing a field owned by mgr-a conflicts, unless forced
    with pytest.raises(ApiError) as err:
        client.apply(
            ConfigMap(metadata=ObjectMeta(name="ssa", namespace="default"), data={"a": "2"}),
            field_manager="mgr-b",
        )
    assert err.value.status.code == 409
    assert err.value.status.details.causes[0].reason == "FieldManagerConflict"
    assert err.value.status.details.causes[0].field == ".data.a"
    # the same value is shared ownership, not a conflict
    client.apply(
        ConfigMap(metadata=ObjectMeta(name="ssa", namespace="default"), data={"b": "1", "c": "3"}),
        field_manager="mgr-b",
    )
    forced = client.apply(
        ConfigMap(metadata=ObjectMeta(name="ssa", namespace="default"), data={"a": "2", "b": "1", "c": "3"}),
        field_manager="mgr-b",
        force=True,
    )
    assert forced.data == {"a": "2", "b": "1", "c": "3"}

    # mgr-a stops applying "b": it is still owned by mgr-b, so it stays; "a" was taken from mgr-a
    after = client.apply(
        ConfigMap(metadata=ObjectMeta(name="ssa", namespace="default"), data={}), field_manager="mgr-a"
    )
    assert after.data == {"a": "2", "b": "1", "c": "3"}
    # mgr-b drops "c" (only it owned it): removed
    final = client.apply(
        ConfigMap(metadata=ObjectMeta(name="ssa", namespace="default"), data={"a": "2", "b": "1"}),
        field_manager="mgr-b",
    )
    assert final.data == {"a": "2", "b": "1"}

    # an Update (merge patch) by a manager records ownership that later applies conflict with
    client.patch(
        ConfigMap,
        "ssa",
        {"data": {"d": "4"}},
        namespace="default",
        patch_type=PatchType.MERGE,
        field_manager="kubectl-edit",
    )
    with pytest.raises(ApiError) as err:
        client.apply(
            ConfigMap(metadata=ObjectMeta(name="ssa", namespace="default"), data={"d": "5"}),
            field_manager="mgr-a",
        )
    assert 'conflict with "kubectl-edit"' in err.value.status.message


def test_server_side_apply_on_custom_resource_status(server: FakeAPIServer, client: Client) -> None:
    server.control.reactors.clear()
    client.apply(TrainJob(trainjob("ssa-tj")), field_manager="adapter")
    out = client.apply(
        TrainJob.Status(
            apiVersion="trainer.kubeflow.org/v1alpha1",
            kind="TrainJob",
            metadata={"name": "ssa-tj", "namespace": "default"},
            status={
                "jobsStatus": [{"name": "node", "active": 1, "ready": 0, "succeeded": 0, "failed": 0, "suspended": 0}]
            },
        ),
        field_manager="ctrl",
    )
    assert out["status"]["jobsStatus"][0]["active"] == 1
    assert out["spec"]["trainer"]["numNodes"] == 2


def test_strict_validation_rejects_wrong_types_and_unknown_fields(tmp_path: Path) -> None:
    """As the real apiextensions-apiserver: under Strict an unknown field is a 400 before any schema check; a
    wrong type is a 422 naming the field; nothing is stored, and the server is fine afterwards."""
    with FakeAPIServer(strict_validation=True) as server:
        server.control.add_runtime()  # the Trainer refuses a TrainJob whose runtime does not exist
        client = Client(KubeConfig.from_file(str(server.write_kubeconfig(tmp_path / "kc"))), timeout=10)
        bad = trainjob("strict")
        bad["spec"]["trainer"]["numNodes"] = "two"
        with pytest.raises(ApiError) as err:
            client.create(TrainJob(bad))
        status = err.value.status
        assert (status.code, status.reason) == (422, "Invalid")
        assert {c.field: c.reason for c in status.details.causes} == {"spec.trainer.numNodes": "FieldValueTypeInvalid"}
        unknown = trainjob("strict")
        unknown["spec"]["trainer"]["gpus"] = 4
        with pytest.raises(ApiError) as err:
            client.create(TrainJob(unknown))
        assert (err.value.status.code, err.value.status.reason) == (400, "BadRequest")
        assert 'strict decoding error: unknown field "spec.trainer.gpus"' in err.value.status.message
        assert server.store.try_get(TRAINJOB, "default", "strict") is None
        created = client.create(TrainJob(trainjob("strict-ok")))
        assert created.metadata.name == "strict-ok"


def test_field_validation_strict_per_request(server: FakeAPIServer) -> None:
    server.control.add_runtime()
    body = trainjob("per-request")
    body["spec"]["unknownField"] = True
    url = f"{server.url}/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs"
    strict = httpx.post(headers=AUTH, url=url, json=body, params={"fieldValidation": "Strict"})
    assert strict.status_code == 400
    assert 'unknown field "spec.unknownField"' in strict.json()["message"]
    lax = httpx.post(headers=AUTH, url=url, json=body)
    assert lax.status_code == 201 and "unknownField" not in lax.json()["spec"], "pruned, as the real server does"


def test_pods_list_log_and_missing_pod(client: Client) -> None:
    with pytest.raises(ApiError) as err:
        list(client.log("ghost", namespace="default"))
    assert err.value.status.code == 404
    assert list(client.list(Pod, namespace="default")) == []


def test_apply_merges_map_lists_by_key(server: FakeAPIServer, client: Client) -> None:
    from .conftest import Workload

    cluster = server.control
    cluster.add_runtime()
    for check in ("first-check", "second-check"):
        cluster.add_admission_check(check)
    cluster.add_cluster_queue("cq", admission_checks=["first-check", "second-check"])
    cluster.add_local_queue("lq")
    client.create(TrainJob(trainjob("tj-ssa-list", queue="lq")))
    wl = cluster.workload_for("tj-ssa-list")
    assert wl is not None
    name = wl["metadata"]["name"]
    # an AdmissionCheck controller applies only its own entry, forcing ownership of "state"
    out = client.apply(
        Workload.Status(
            apiVersion="kueue.x-k8s.io/v1beta2",
            kind="Workload",
            metadata={"name": name, "namespace": "default"},
            status={"admissionChecks": [{"name": "second-check", "state": "Ready", "message": "ok"}]},
        ),
        field_manager="second-controller",
        force=True,
    )
    states = {c["name"]: c["state"] for c in out["status"]["admissionChecks"]}
    assert states == {"first-check": "Pending", "second-check": "Ready"}
    owned = [m for m in out.metadata.managedFields if m.manager == "second-controller"]
    assert owned and 'k:{"name":"second-check"}' in owned[0].fieldsV1["f:status"]["f:admissionChecks"]
    # without force, taking a field another manager set is a conflict
    with pytest.raises(ApiError) as err:
        client.apply(
            Workload.Status(
                apiVersion="kueue.x-k8s.io/v1beta2",
                kind="Workload",
                metadata={"name": name, "namespace": "default"},
                status={"admissionChecks": [{"name": "first-check", "state": "Ready", "message": "ok"}]},
            ),
            field_manager="first-controller",
        )
    assert err.value.status.code == 409
    assert '.status.admissionChecks[name="first-check"].state' in err.value.status.message


def test_requests_without_credentials_are_refused_unless_anonymous_is_allowed(server: FakeAPIServer) -> None:
    assert httpx.get(f"{server.url}/api/v1/namespaces").status_code == 401
    server.rbac.allow_anonymous = True
    assert httpx.get(f"{server.url}/api/v1/namespaces").status_code == 200


def test_a_revoked_token_is_refused_until_restored_and_others_are_not(server: FakeAPIServer) -> None:
    url = f"{server.url}/api/v1/namespaces"
    other = {"Authorization": "Bearer another-token"}
    assert httpx.get(url, headers=AUTH).status_code == 200
    server.control.revoke_token(AUTH["Authorization"].split()[1])
    refused = httpx.get(url, headers=AUTH)
    assert refused.status_code == 401 and refused.json()["reason"] == "Unauthorized"
    assert httpx.get(url, headers=other).status_code == 200
    server.control.restore_token(AUTH["Authorization"].split()[1])
    assert httpx.get(url, headers=AUTH).status_code == 200
