"""The Kubeflow adapter's API client against the real Trainer webhook (scripts/k8s/controlplane-up.sh; nothing is
started here, a missing control-plane.json fails).

Kueue's and the Trainer's webhooks read runtimes from their informer caches, so under load either can refuse a
TrainJob whose runtime copy was made a moment before. That lag cannot be caused on demand, but the refusal it
gives can: a TrainJob created before its runtime exists gets the very same answer. These tests prove that the
words the retry matches are the real webhooks', and that the retry ends once the runtime is there.
"""

# ruff: noqa: F811  (the fixture control_plane is imported from test_controlplane)

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dispatch.errors import Rejected
from dispatch.kubeflow import Mode
from dispatch.kubeflow import client as k

from .controlplane_harness import ControlPlaneCluster, cluster_in
from .test_controlplane import control_plane  # noqa: F401  (control_plane is a fixture)

pytestmark = pytest.mark.controlplane


@pytest.fixture
def cluster(control_plane: dict[str, Any], tmp_path: Path) -> Iterator[ControlPlaneCluster]:
    yield from cluster_in(control_plane, tmp_path, Mode.PLAIN)


def _runtime(cluster: ControlPlaneCluster, name: str) -> dict[str, Any]:
    """A TrainingRuntime in the cluster's namespace, the Trainer's own ``torch-distributed`` copied."""
    base = json.loads(cluster.k("get", "clustertrainingruntime", "torch-distributed", "-o", "json"))
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": name, "namespace": cluster.ns},
        "spec": copy.deepcopy(base["spec"]),
    }


def _trainjob(cluster: ControlPlaneCluster, name: str, runtime: str) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": cluster.ns},
        "spec": {
            "suspend": True,
            "runtimeRef": {"name": runtime, "apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime"},
            "trainer": {"numNodes": 1},
        },
    }


def test_the_webhooks_refusal_of_a_missing_runtime_is_the_one_the_retry_matches(cluster: ControlPlaneCluster) -> None:
    kube = k.Kube(cluster.settings())
    runtime = f"rt-{uuid.uuid4().hex[:8]}"
    with pytest.raises(Rejected) as refused:
        kube.create(k.TrainJob, _trainjob(cluster, "refused", runtime))
    assert "admission webhook" in str(refused.value)
    assert k.runtime_not_seen(str(refused.value), runtime), str(refused.value)
    assert not k.runtime_not_seen(str(refused.value), "another-runtime")


def test_a_trainjob_refused_until_its_runtime_exists_is_created_by_the_retry(cluster: ControlPlaneCluster) -> None:
    """The first attempt is refused for certain (the runtime is made in the first pause); the retry goes on until
    the webhook's cache has the runtime, and no TrainJob is created twice."""
    kube = k.Kube(cluster.settings())
    runtime = f"rt-{uuid.uuid4().hex[:8]}"
    pauses: list[float] = []

    def sleep(seconds: float) -> None:
        if not pauses:
            kube.create(k.TrainingRuntime, _runtime(cluster, runtime))
        pauses.append(seconds)
        time.sleep(seconds)

    created = kube.create_trainjob(_trainjob(cluster, "late-runtime", runtime), runtime, sleep=sleep)
    assert created["metadata"]["name"] == "late-runtime" and pauses, pauses
    listed = json.loads(cluster.k("get", "trainjobs", "-n", cluster.ns, "-o", "json"))["items"]
    assert [tj["metadata"]["name"] for tj in listed] == ["late-runtime"]


def test_another_refusal_is_not_retried(cluster: ControlPlaneCluster) -> None:
    """A TrainJob naming a runtime other than the copy it was made for is refused at once: the retry is for that
    copy only."""
    kube = k.Kube(cluster.settings())
    pauses: list[float] = []
    with pytest.raises(Rejected, match="never-made"):
        kube.create_trainjob(_trainjob(cluster, "wrong-ref", "never-made"), "the-copy", sleep=pauses.append)
    assert pauses == []
