"""Fixtures: a started FakeAPIServer and a real lightkube Client pointed at it over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from lightkube import Client, KubeConfig
from lightkube.generic_resource import create_global_resource, create_namespaced_resource

from dispatch_kubetest import FakeAPIServer
from dispatch_kubetest.crdserver import CRDAPIServer

TrainJob = create_namespaced_resource("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs")
ClusterTrainingRuntime = create_global_resource(
    "trainer.kubeflow.org", "v1alpha1", "ClusterTrainingRuntime", "clustertrainingruntimes"
)
JobSet = create_namespaced_resource("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets")
Workload = create_namespaced_resource("kueue.x-k8s.io", "v1beta2", "Workload", "workloads")
ClusterQueue = create_global_resource("kueue.x-k8s.io", "v1beta2", "ClusterQueue", "clusterqueues")
LocalQueue = create_namespaced_resource("kueue.x-k8s.io", "v1beta2", "LocalQueue", "localqueues")

TOKEN = "test-token"


@pytest.fixture
def server() -> Iterator[FakeAPIServer]:
    with FakeAPIServer(bookmark_interval=0.2) as srv:
        yield srv


@pytest.fixture
def kubeconfig(server: FakeAPIServer, tmp_path: Path) -> Path:
    return server.write_kubeconfig(tmp_path / "kubeconfig", token=TOKEN, namespace="default")


@pytest.fixture
def client(kubeconfig: Path) -> Iterator[Client]:
    c = Client(KubeConfig.from_file(str(kubeconfig)), timeout=10)
    yield c


def trainjob(
    name: str,
    *,
    runtime: str = "torch-distributed",
    num_nodes: int = 2,
    suspend: bool | None = None,
    queue: str | None = None,
    gate: str | None = None,
    image: str = "registry.example/train:1.0",
) -> dict:
    """A TrainJob manifest like the Kubeflow adapter would submit."""
    meta: dict = {"name": name, "namespace": "default", "labels": {}, "annotations": {}}
    if queue:
        meta["labels"]["kueue.x-k8s.io/queue-name"] = queue
    if gate:
        meta["annotations"]["kueue.x-k8s.io/admission-gated-by"] = gate
    spec: dict = {
        "runtimeRef": {"name": runtime, "kind": "ClusterTrainingRuntime", "apiGroup": "trainer.kubeflow.org"},
        "trainer": {
            "image": image,
            "command": ["torchrun", "train.py"],
            "numNodes": num_nodes,
            "resourcesPerNode": {"limits": {"nvidia.com/gpu": "4"}},
        },
    }
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": meta, "spec": spec}


def conditions(obj: dict) -> dict[str, dict]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


@pytest.fixture(scope="session")
def crd_server() -> CRDAPIServer:
    """The real apiextensions-apiserver with the project's CRDs installed; fails (never skips) when it is down."""
    srv = CRDAPIServer.from_state()
    srv.install_crds()
    return srv


AUTH = {"Authorization": f"Bearer {TOKEN}"}
"""Headers for raw httpx requests: the fake refuses requests without credentials (401), as a real cluster does."""
