"""The project's CRDs in the real apiextensions-apiserver (scripts/k8s/up.sh), and what the adapter writes there.

These tests talk to upstream Kubernetes API machinery, not to a model: they prove that the generated schemas are
structural and accepted, that what the Kubeflow adapter renders is valid and survives pruning unchanged, and the
API semantics the adapter relies on (422 with nothing stored, defaulting, shared server-side-apply ownership,
PUT without resourceVersion, the initial-events-end bookmark, status subresources, printer columns, 401).
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from dispatch_kubetest.crdserver import CRD_DIR, CRDAPIServer, crd_manifests

pytestmark = pytest.mark.apiserver

ROOT = Path(__file__).resolve().parents[2]
TJ = "/apis/trainer.kubeflow.org/v1alpha1"


@pytest.fixture(scope="module")
def api(crd_server: CRDAPIServer) -> httpx.Client:
    with httpx.Client(base_url=crd_server.url, verify=crd_server.ssl_context(), timeout=30) as c:
        yield c


@pytest.fixture
def ns() -> str:
    # the server has no Namespace objects: any name works, and a fresh one isolates each test
    return f"t-{uuid.uuid4().hex[:10]}"


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


def test_generated_crds_are_current() -> None:
    """The committed CRDs are what scripts/k8s/gen_crds.py makes from the installed kubeflow-trainer-api."""
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts/k8s/gen_crds.py"), "--check"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr


def test_every_crd_is_established_and_structural(api: httpx.Client) -> None:
    names = {c["metadata"]["name"] for c in crd_manifests()}
    assert len(names) == 10 and {p.stem for p in CRD_DIR.glob("*.yaml")} == {"trainer", "jobset", "kueue"}
    items = api.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions").json()["items"]
    served = {i["metadata"]["name"]: {c["type"]: c["status"] for c in i["status"]["conditions"]} for i in items}
    for name in names:
        assert served[name].get("Established") == "True", (name, served[name])
        assert "NonStructuralSchema" not in served[name], (name, served[name])


@pytest.mark.parametrize("mode", ["plain", "kueue"])
def test_adapter_trainjob_and_runtime_copy_survive_the_real_schema(api: httpx.Client, ns: str, mode: str) -> None:
    """What the adapter renders is accepted with strict field validation and comes back unpruned."""
    from dispatch.extensions import Image
    from dispatch.kubeflow import names as n
    from dispatch.kubeflow import render as rd
    from dispatch.kubeflow.extensions import RuntimeRef
    from dispatch.kubeflow.settings import KubeflowSettings
    from dispatch.settings import decode
    from dispatch.spec import JobSpec
    from dispatch.spi import StartRequest
    from dispatch_kubetest import torch_runtime

    data: dict[str, Any] = {"namespace": ns, "mode": mode}
    if mode == "kueue":
        data["localQueue"] = "lq"
    settings = decode(KubeflowSettings, data)
    spec = JobSpec(
        command=("torchrun", "train.py", "--lr", "0.1; rm -rf /"),  # several processes a pod: torchrun
        nodes=2,
        procs_per_node=2,
        working_dir="/w d",
        env={"RUN": "x"},
        time_limit=90.5,
        extensions=(Image("registry.example/train:1"), RuntimeRef("torch-distributed")),
    )
    req = StartRequest("a1b2c3d4e5f6", 1, "dsp-a1b2c3d4e5f6-1", spec)
    rt = torch_runtime(num_nodes=2, max_restarts=1)
    report = rd.check_runtime(rt)
    name = n.trainjob_name(req.job_id, req.submission)
    runtime_copy = rd.runtime_copy(rt, name, settings, req)
    tj = rd.render_trainjob(req, settings, report, name, name)

    for path, body in (
        (f"{TJ}/namespaces/{ns}/trainingruntimes", runtime_copy),
        (f"{TJ}/namespaces/{ns}/trainjobs", tj),
    ):
        r = api.post(path + "?fieldValidation=Strict", json=body)
        assert r.status_code == 201, r.text
        got = r.json()
        assert _missing(body["spec"], got["spec"]) == [], "the server pruned or changed these fields"
        assert got["metadata"]["labels"] == body["metadata"]["labels"]
        assert got["metadata"]["annotations"] == body["metadata"]["annotations"]


def _missing(sent: Any, got: Any, path: str = "spec") -> list[str]:
    """Paths of what was sent but did not come back identical (defaults the server adds are allowed)."""
    if isinstance(sent, dict) and isinstance(got, dict):
        return [m for k, v in sent.items() for m in _missing(v, got.get(k, _GONE), f"{path}.{k}")]
    if isinstance(sent, list) and isinstance(got, list) and len(sent) == len(got):
        return [m for i, (a, b) in enumerate(zip(sent, got, strict=True)) for m in _missing(a, b, f"{path}[{i}]")]
    return [] if sent == got else [path]


_GONE = object()


def test_status_subresource_and_immutability(api: httpx.Client, ns: str) -> None:
    path = f"{TJ}/namespaces/{ns}/trainjobs/st"
    api.post(f"{TJ}/namespaces/{ns}/trainjobs", json=trainjob("st", ns))
    cond = {
        "type": "Complete",
        "status": "True",
        "reason": "X",
        "message": "m",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    r = api.patch(
        path,
        content=json.dumps({"status": {"conditions": [cond]}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 200 and not (r.json().get("status") or {}).get("conditions"), r.text
    r = api.patch(
        path + "/status",
        content=json.dumps({"status": {"conditions": [cond]}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 200 and r.json()["status"]["conditions"][0]["type"] == "Complete", r.text
    bad = {"status": {"conditions": [{**cond, "status": 7}]}}
    r = api.patch(path + "/status", content=json.dumps(bad), headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 422, r.text
    r = api.patch(
        path, content=b'{"spec":{"trainer":{"numNodes":3}}}', headers={"Content-Type": "application/merge-patch+json"}
    )
    assert r.status_code == 422 and "field is immutable" in r.text, r.text


def test_printer_columns_as_upstream(api: httpx.Client, ns: str) -> None:
    api.post(f"{TJ}/namespaces/{ns}/trainjobs", json=trainjob("pc", ns))
    table = api.get(
        f"{TJ}/namespaces/{ns}/trainjobs", headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
    ).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "State", "Age"]


def test_workload_admission_check_status_merges_per_name(api: httpx.Client, ns: str) -> None:
    """dispatch-admission's write shape: one admissionChecks entry applied to /status merges by name."""
    wl = "/apis/kueue.x-k8s.io/v1beta2/namespaces/" + ns + "/workloads"
    body = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "wl", "namespace": ns},
        "spec": {
            "queueName": "lq",
            "podSets": [
                {"name": "node", "count": 2, "template": {"spec": {"containers": [{"name": "node", "image": "x"}]}}}
            ],
        },
    }
    r = api.post(wl, json=body)
    assert r.status_code == 201 and r.json()["spec"]["active"] is True, r.text
    t = "2026-01-01T00:00:00Z"
    for check, manager in (("a", "kueue"), ("b", "kueue")):
        st = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": "wl", "namespace": ns},
            "status": {
                "admissionChecks": [{"name": check, "state": "Pending", "message": "", "lastTransitionTime": t}]
            },
        }
        assert apply(api, f"{wl}/wl/status", st, f"{manager}-{check}").status_code == 200
    st["status"]["admissionChecks"][0].update(name="a", state="Ready", message="ok")
    r = apply(api, f"{wl}/wl/status", st, "dispatch-admission", force=True)
    checks = {c["name"]: c["state"] for c in r.json()["status"]["admissionChecks"]}
    assert checks == {"a": "Ready", "b": "Pending"}, r.text
    st["status"]["admissionChecks"][0]["state"] = "Maybe"
    assert apply(api, f"{wl}/wl/status", st, "dispatch-admission", force=True).status_code == 422


def test_requests_without_credentials_are_refused(crd_server: CRDAPIServer) -> None:
    with httpx.Client(base_url=crd_server.url, verify=crd_server.ssl_context(client_cert=False)) as anon:
        assert anon.get("/apis").status_code == 401
