"""The controller roles as controllers, in front of the real apiextensions-apiserver (controllers.py, apistore.py).

Each test makes its own world (``FakeAPIServer(crd_backend=..., namespace=<unique>)``): the Trainer, JobSet, Job,
Kueue and kubelet roles watch the front and write through it, so what they write to a custom resource is stored
(and validated) by the real server, which the tests read directly to prove it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from dispatch_kubetest import FakeAPIServer, FakeClock, torch_runtime
from dispatch_kubetest.controllers import SettleTimeout
from dispatch_kubetest.crdserver import CRDAPIServer
from dispatch_kubetest.reactors.base import Reactor
from dispatch_kubetest.resources import CLUSTER_QUEUE, CONFIGMAP, JOB, POD, TRAINJOB

pytestmark = pytest.mark.apiserver

TRAINER = "/apis/trainer.kubeflow.org/v1alpha1"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2"


@pytest.fixture
def world(crd_server: CRDAPIServer) -> Iterator[FakeAPIServer]:
    ns = f"c-{uuid.uuid4().hex[:10]}"
    clock = FakeClock(datetime.now(UTC).replace(microsecond=0))
    with FakeAPIServer(crd_backend=crd_server, namespace=ns, clock=clock, bookmark_interval=0.2) as srv:
        srv.control.add_node("worker-0")
        srv.control.add_node("worker-1")
        srv.control.add_runtime(torch_runtime("torch", namespace=ns, num_nodes=2))
        yield srv


@pytest.fixture
def http(world: FakeAPIServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=world.url, headers={"Authorization": "Bearer t"}, timeout=30) as c:
        yield c


def trainjob(name: str, ns: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {
            "runtimeRef": {"name": "torch", "kind": "TrainingRuntime"},
            "trainer": {"image": "registry.example/train:1", "numNodes": 2},
        },
    }


def real(crd_server: CRDAPIServer, path: str) -> dict[str, Any] | None:
    code, body = crd_server.request("GET", path)
    if code == 404:
        return None
    assert code == 200, body[:300]
    out: dict[str, Any] = json.loads(body)
    return out


def conditions(obj: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}


def test_a_trainjob_becomes_pods_and_its_status_is_written_to_the_real_server(
    world: FakeAPIServer, http: httpx.Client, crd_server: CRDAPIServer
) -> None:
    ns, control = world.control.namespace, world.control
    r = http.post(f"{TRAINER}/namespaces/{ns}/trainjobs", json=trainjob("tj", ns))
    assert r.status_code == 201, r.text
    control.reconcile()
    # the JobSet is the real server's object, the Jobs and pods the project's server's
    js = real(crd_server, f"{JOBSETS}/namespaces/{ns}/jobsets/tj")
    assert js is not None and js["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    assert [j["metadata"]["name"] for j in control.list(JOB)] == ["tj-node-0"]
    assert control.get(CONFIGMAP, "tj-runtime-snapshot") is not None
    pods = control.pods_of("tj")
    assert len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods)
    control.run_pods("tj")
    control.succeed_pods("tj")
    tj = real(crd_server, f"{TRAINER}/namespaces/{ns}/trainjobs/tj")
    assert tj is not None and conditions(tj).get("Complete") == "True", tj.get("status")
    assert tj["status"]["jobsStatus"] == [
        {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
    ]


def test_deleting_a_trainjob_collects_what_it_owns_in_both_servers(
    world: FakeAPIServer, http: httpx.Client, crd_server: CRDAPIServer
) -> None:
    ns, control = world.control.namespace, world.control
    http.post(f"{TRAINER}/namespaces/{ns}/trainjobs", json=trainjob("gone", ns))
    control.reconcile()
    assert control.pods_of("gone")
    assert http.delete(f"{TRAINER}/namespaces/{ns}/trainjobs/gone").status_code == 200
    control.reconcile()
    assert real(crd_server, f"{JOBSETS}/namespaces/{ns}/jobsets/gone") is None
    assert control.list(JOB) == [] and control.get(CONFIGMAP, "gone-runtime-snapshot") is None
    assert [p for p in control.list(POD) if not p["metadata"].get("deletionTimestamp")] == []


def test_the_kubelet_removes_a_terminating_pod_over_the_api_when_its_grace_runs_out(
    world: FakeAPIServer, http: httpx.Client
) -> None:
    ns, control = world.control.namespace, world.control
    http.post(f"{TRAINER}/namespaces/{ns}/trainjobs", json=trainjob("grace", ns))
    control.reconcile()
    [rank0, _] = control.run_pods("grace")
    name = rank0["metadata"]["name"]
    r = http.delete(f"/api/v1/namespaces/{ns}/pods/{name}", params={"gracePeriodSeconds": "20"})
    assert r.status_code == 200 and r.json()["metadata"]["deletionGracePeriodSeconds"] == 20, r.text
    control.reconcile()
    assert http.get(f"/api/v1/namespaces/{ns}/pods/{name}").status_code == 200  # Terminating
    control.advance(20)  # the controllers' kubelet deletes it with grace 0, through the front
    assert http.get(f"/api/v1/namespaces/{ns}/pods/{name}").status_code == 404


def test_kueue_admits_through_the_api(world: FakeAPIServer, http: httpx.Client, crd_server: CRDAPIServer) -> None:
    ns, control = world.control.namespace, world.control
    control.add_cluster_queue(f"cq-{ns}", flavor=f"flavor-{ns}")
    control.add_local_queue("lq", cluster_queue=f"cq-{ns}")
    body = trainjob("queued", ns, **{"kueue.x-k8s.io/queue-name": "lq"})
    body["spec"]["suspend"] = True
    http.post(f"{TRAINER}/namespaces/{ns}/trainjobs", json=body)
    control.reconcile()
    wl = control.workload_for("queued")
    assert wl is not None and conditions(wl).get("Admitted") == "True", wl
    stored = real(crd_server, f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads/{wl['metadata']['name']}")
    assert stored is not None and stored["status"]["admission"]["clusterQueue"] == f"cq-{ns}"
    assert len(control.pods_of("queued")) == 2
    control.preempt_workload(wl["metadata"]["name"])
    wl = control.workload_for("queued")
    # requeued at once (the quota is free again): the eviction is recorded, Preempted reset by the new reservation
    assert wl is not None and wl["status"]["schedulingStats"]["evictions"] == [
        {"reason": "Preempted", "underlyingCause": "", "count": 1}
    ]
    assert conditions(wl).get("Admitted") == "True"


def test_controllers_resume_after_their_watches_drop(world: FakeAPIServer, http: httpx.Client) -> None:
    ns, control = world.control.namespace, world.control
    control.drop_watches(abrupt=True)
    http.post(f"{TRAINER}/namespaces/{ns}/trainjobs", json=trainjob("after", ns))
    control.reconcile()
    assert len(control.pods_of("after")) == 2


class _WritesAnInvalidStatus(Reactor):
    manager = "broken-controller"

    def reconcile(self) -> None:
        for tj in self.store.list(TRAINJOB)[0]:
            self.write_status(TRAINJOB, tj, {"jobsStatus": [{"name": "node", "ready": "many"}]})


def test_settle_fails_loudly_naming_a_write_the_real_schema_refuses(world: FakeAPIServer, http: httpx.Client) -> None:
    ns, control = world.control.namespace, world.control
    assert control.loop is not None
    control.loop.reactors.append(_WritesAnInvalidStatus(control))
    http.post(f"{TRAINER}/namespaces/{ns}/trainjobs", json=trainjob("bad", ns))
    control.settle_timeout = 600.0  # never reached: a refusal that repeats ends the wait at once
    with pytest.raises(
        SettleTimeout, match="refused a write 3 rounds in a row: broken-controller: 422 Invalid: .*jobsStatus"
    ):
        control.reconcile()
    control.loop.reactors.pop()


def test_a_world_sees_only_its_own_cluster_scoped_objects(world: FakeAPIServer, crd_server: CRDAPIServer) -> None:
    other = f"c-{uuid.uuid4().hex[:10]}"
    mine = world.control.namespace
    with FakeAPIServer(crd_backend=crd_server, namespace=other) as srv:
        srv.control.add_cluster_queue(f"cq-{other}", flavor=f"flavor-{other}")
        world.control.add_cluster_queue(f"cq-{mine}", flavor=f"flavor-{mine}")
        seen, _ = world.control.reactor_store.list(CLUSTER_QUEUE)
        assert [q["metadata"]["name"] for q in seen] == [f"cq-{mine}"]
        cq = world.control.get(CLUSTER_QUEUE, f"cq-{mine}")
        assert cq is not None and conditions(cq).get("Active") == "True"


class _NeverStopsWriting(Reactor):
    manager = "restless-controller"

    def __init__(self, control: Any) -> None:
        super().__init__(control)
        self.n = 0

    def reconcile(self) -> None:
        for tj in self.store.list(TRAINJOB)[0]:
            self.n += 1
            self.write_status(
                TRAINJOB,
                tj,
                {
                    "jobsStatus": [
                        {"name": "node", "ready": self.n, "active": 0, "failed": 0, "succeeded": 0, "suspended": 0}
                    ]
                },
            )


def test_settle_fails_on_controllers_that_never_stop_writing_by_rounds_not_seconds(
    world: FakeAPIServer, http: httpx.Client
) -> None:
    ns, control = world.control.namespace, world.control
    assert control.loop is not None
    restless = _NeverStopsWriting(control)
    control.loop.reactors.append(restless)
    http.post(f"{TRAINER}/namespaces/{ns}/trainjobs", json=trainjob("restless", ns))
    try:
        with pytest.raises(SettleTimeout, match=r"not quiescent after 6 rounds \(bounds: 5 rounds, 600.0 s\)"):
            control.loop.settle(600.0, max_rounds=5)  # the wall bound is never reached: the rounds end the wait
    finally:
        control.loop.reactors.remove(restless)
    assert restless.n >= 6
