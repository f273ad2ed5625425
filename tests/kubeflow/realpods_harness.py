"""The Kubeflow adapter on the two real nodes (scripts/k8s/nodes-up.sh): a cluster of the control-plane harness
(:class:`~tests.kubeflow.controlplane_harness.ControlPlaneCluster`, a namespace of its own, plain or Kueue mode)
with one more runtime, ``host-torch``, whose pods run on the real kubelets.

``host-torch`` is a namespaced TrainingRuntime of the Trainer's torch plugin (as ``torch-distributed``) that the
adapter accepts (``restartPolicy: Never``, ``backoffLimit: 0``) and whose trainer pods

* tolerate the real nodes' taint and select them by their label, one rank per node (pod anti-affinity keyed on
  the JobSet), so no other test's pod and no kwok node is involved;
* run the ``host-usr`` image with the host's ``/usr``, its Python's prefix (torch inside) and the repository
  (``src`` for ``dispatch.job``, ``examples``) mounted read-only at the paths the host has them, so a rank runs
  ``sys.executable`` and the repository's files by the host's own paths;
* mount one read-write ``hostPath`` directory, :attr:`RealPodsCluster.shared` (under /tmp, the cluster's
  namespace in its name), at the same path: both nodes run on this host, so it is storage both nodes (and the
  test) see, for checkpoints, output and a working directory;
* ask for one CPU each (the nodes have two), so Kueue counts a TrainJob's ranks against its ClusterQueue's quota.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dispatch.kubeflow import Mode

from .controlplane_harness import ControlPlaneCluster, cluster_in
from .test_controlplane import CONTROL_PLANE_JSON

TAINT = "dispatch.dev/real"
ROOT = Path(__file__).resolve().parents[2]
RUNTIME = "host-torch"
SHARED_BASE = Path("/tmp/dispatch-realpods")


def read_control_plane() -> dict[str, Any]:
    """control-plane.json, as the ``control_plane`` fixture of test_controlplane reads it (fails when missing)."""
    if not CONTROL_PLANE_JSON.exists():
        pytest.fail(f"{CONTROL_PLANE_JSON} is missing: start the control plane with scripts/k8s/controlplane-up.sh")
    doc: dict[str, Any] = json.loads(CONTROL_PLANE_JSON.read_text())
    return doc


def real_nodes(control_plane: dict[str, Any]) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = control_plane.get("real_nodes") or []
    if len(nodes) < 2:
        pytest.fail(f"{CONTROL_PLANE_JSON} lists {len(nodes)} real nodes: start them with scripts/k8s/nodes-up.sh")
    return nodes


def host_mounts(shared: Path) -> list[tuple[str, str, bool]]:
    """(volume name, host path = mount path, read-only) of the trainer pods."""
    prefixes = sorted({sys.base_prefix, sys.prefix})
    return [
        ("usr", "/usr", True),
        *((f"python{i}", p, True) for i, p in enumerate(prefixes)),
        ("repo-src", str(ROOT / "src"), True),
        ("repo-examples", str(ROOT / "examples"), True),
        ("shared", str(shared), False),
    ]


def host_torch_runtime(control_plane: dict[str, Any], namespace: str, shared: Path) -> dict[str, Any]:
    """The ``host-torch`` TrainingRuntime (module docstring)."""
    mounts = host_mounts(shared)
    pod_spec = {
        "restartPolicy": "Never",
        "nodeSelector": {TAINT: "true"},
        "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {
                            "matchExpressions": [
                                {"key": "trainer.kubeflow.org/trainjob-ancestor-step", "operator": "Exists"}
                            ]
                        },
                        # (the key may not be in labelSelector too: kube-apiserver refuses the pod)
                        "matchLabelKeys": ["jobset.sigs.k8s.io/jobset-name"],
                    }
                ]
            }
        },
        "containers": [
            {
                "name": "node",
                "image": control_plane["real_images"]["host_usr"],
                "imagePullPolicy": "Never",
                "resources": {"requests": {"cpu": "1"}},
                "volumeMounts": [{"name": name, "mountPath": path, "readOnly": ro} for name, path, ro in mounts],
            }
        ],
        "volumes": [{"name": name, "hostPath": {"path": path, "type": "Directory"}} for name, path, _ in mounts],
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": RUNTIME, "namespace": namespace},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "groupName": "default",
                            "replicas": 1,
                            "template": {
                                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                                "spec": {"backoffLimit": 0, "template": {"spec": pod_spec}},
                            },
                        }
                    ]
                }
            },
        },
    }


class RealPodsCluster:
    """A control-plane cluster (``base``) with the ``host-torch`` runtime and its shared directory."""

    def __init__(self, base: ControlPlaneCluster) -> None:
        self.base = base
        self.nodes = real_nodes(base.cp)
        self.shared = SHARED_BASE / base.ns
        base.apply(host_torch_runtime(base.cp, base.ns, self.shared))  # first: a refusal leaves no directory
        self.shared.mkdir(parents=True, mode=0o777)
        self.shared.chmod(0o777)

    @property
    def ns(self) -> str:
        return self.base.ns

    def settings(self) -> dict[str, Any]:
        """The Kubeflow adapter's settings of a cluster in plain mode on this namespace."""
        return {
            "kubeconfig": {"path": self.base.cp["kubeconfig"]},
            "namespace": self.ns,
            "mode": "plain",
            "timeouts": {"apiserverRequest": "20s"},
            "preflight": {"probeWatch": "2s"},
        }

    def extensions(self) -> tuple[str, ...]:
        """The CLI's ``-x`` options of a job on the real nodes."""
        return (
            "-x",
            f'dispatch.Image={{"ref": "{self.base.cp["real_images"]["host_usr"]}"}}',
            "-x",
            f'kubeflow.RuntimeRef={{"name": "{RUNTIME}", "runtimeKind": "TrainingRuntime"}}',
        )

    def forgotten(self, trainjob: str) -> bool:
        """Delete the TrainJob (as an administrator or a TTL would); True once it and its pods are gone."""
        self.base.k("delete", "trainjob", "-n", self.ns, trainjob, "--ignore-not-found", "--wait=false")
        return not self.base.pods_of(trainjob) and not self.base.k(
            "get", "trainjob", "-n", self.ns, trainjob, "--ignore-not-found", "-o", "name"
        )

    def close(self) -> None:
        # the namespace goes with the base cluster; its pods (root in their containers) wrote here
        shutil.rmtree(self.shared, ignore_errors=True)


def real_cluster_in(cp: dict[str, Any], tmp_path: Path, mode: Mode) -> Iterator[RealPodsCluster]:
    """A fixture's body: the real-pods cluster, closed (namespace deleted, shared directory removed) after."""
    bases = cluster_in(cp, tmp_path, mode)
    try:
        real = RealPodsCluster(next(bases))
        try:
            yield real
        finally:
            real.close()
    finally:
        bases.close()


def until(pred: Any, what: str, timeout: float, every: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what}: not within {timeout:g}s"
        time.sleep(every)
