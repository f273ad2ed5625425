"""Test support for the real control plane (scripts/k8s/controlplane-up.sh): a conformance harness for the
Kubeflow adapter whose job behaviours are played by kwok's own stages, not by a script of ours.

Each behaviour is a ClusterTrainingRuntime copied from the Trainer's ``torch-distributed`` whose pod template
carries kwok's stage annotations: ``succeed`` completes its pods after 2 s (kwok's pod-complete stage for pods of a
Job), ``slow`` after 30 to 32 s (kwok takes the jitter delay as the upper bound), ``sleep`` after an hour,
``fail`` and ``oom`` end the container through kwok's pod-container-running-failed stage with exit code 3
(reason Error) or 137 (reason OOMKilled). The adapter copies
the runtime into its own TrainingRuntime, so every pod the Trainer, JobSet and the Job controller make carries them.
Every rank restart is off (restartPolicy Never, backoffLimit 0), as the adapter asks of a runtime. Each rank asks
for one CPU, so that Kueue counts it against a ClusterQueue's quota.

The situations a check needs from outside are made the way a real cluster makes them:

- preemption: in Kueue mode, real Kueue priority preemption (a TrainJob of a higher WorkloadPriorityClass that
  needs the whole quota comes to the same ClusterQueue, whose policy preempts lower priorities; it ends after 2 s,
  so the quota comes back); in plain mode, a pod disruption: rank 0 evicted through the Eviction API;
- node loss: kwok's node-not-ready stage takes rank 0's node NotReady, the node lifecycle controller taints it
  and evicts its pods (kube-apiserver's default toleration of a not-ready node is 10 s here); the node is
  deleted and made again (kwok initialises it Ready) when the cluster is closed;
- an administrator's hold: the adapter's own hold annotation in plain mode; in Kueue mode the Workload
  deactivated (``spec.active: false``), as `kubectl patch` by an administrator does.

In Kueue mode each cluster has its own ResourceFlavor, AdmissionCheck (of a controller name of its own),
ClusterQueue (8 CPUs, preemption of lower priorities within it) and LocalQueue ``lq``, and runs
dispatch-admission (its Lease in the cluster's namespace) against the real kube-apiserver.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from dispatch.clock import SYSTEM_CLOCK
from dispatch.conformance.harness import FAIL_EXIT_CODE, Harness, Timings
from dispatch.extensions import Image
from dispatch.kubeflow import KubeflowSettings, Mode, open_backend
from dispatch.kubeflow.extensions import RuntimeRef
from dispatch.registry import OpenOptions
from dispatch.settings import decode
from dispatch.spec import JobSpec
from dispatch.spi import Backend

from .test_controlplane import KUBECTL, needs

COMPLETE = "pod-complete.stage.kwok.x-k8s.io"
FAILED = "pod-container-running-failed.stage.kwok.x-k8s.io"

# behaviour -> (pod labels, pod annotations)
BEHAVIOURS: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    "succeed": ({}, {f"{COMPLETE}/delay": "2s", f"{COMPLETE}/jitter-delay": "0s"}),
    # kwok takes the jitter-delay (default 5 s) as the delay when it is not longer than the delay itself
    "sleep": ({}, {f"{COMPLETE}/delay": "3600s", f"{COMPLETE}/jitter-delay": "3600s"}),
    "slow": ({}, {f"{COMPLETE}/delay": "30s", f"{COMPLETE}/jitter-delay": "32s"}),
    "fail": (
        {FAILED: "true"},
        {f"{FAILED}/exit-code": str(FAIL_EXIT_CODE), f"{FAILED}/reason": "Error", f"{COMPLETE}/weight": "0"},
    ),
    "oom": (
        {FAILED: "true"},
        {f"{FAILED}/exit-code": "137", f"{FAILED}/reason": "OOMKilled", f"{COMPLETE}/weight": "0"},
    ),
}


def runtime_name(behaviour: str) -> str:
    return f"dispatch-kwok-{behaviour}"


def behaviour_runtimes(base: dict[str, Any]) -> list[dict[str, Any]]:
    """ClusterTrainingRuntimes, one per behaviour, made from the Trainer's ``torch-distributed``."""
    out = []
    for behaviour, (labels, notes) in BEHAVIOURS.items():
        rt = copy.deepcopy(base)
        rt["metadata"] = {"name": runtime_name(behaviour), "labels": dict(base["metadata"].get("labels") or {})}
        for rj in rt["spec"]["template"]["spec"]["replicatedJobs"]:
            job = rj.setdefault("template", {}).setdefault("spec", {})
            job["backoffLimit"] = 0
            pod = job.setdefault("template", {})
            meta = pod.setdefault("metadata", {})
            meta.setdefault("labels", {}).update(labels)
            meta.setdefault("annotations", {}).update(notes)
            pod_spec = pod.setdefault("spec", {})
            pod_spec["restartPolicy"] = "Never"
            for c in pod_spec.get("containers") or []:
                if c.get("name") == "node":
                    c["resources"] = {"requests": {"cpu": "1"}}
        out.append(rt)
    return out


class ControlPlaneCluster:
    """The Kubeflow adapter on the real control plane, in a namespace of its own."""

    def __init__(self, control_plane: dict[str, Any], kubectl: str, home: Path, mode: Mode = Mode.PLAIN) -> None:
        self.cp = control_plane
        self.mode = mode
        self.kubectl = kubectl
        self.env = {**os.environ, "KUBECONFIG": control_plane["kubeconfig"], "HOME": str(home)}
        suffix = uuid.uuid4().hex[:10]
        self.ns = f"cpk-{suffix}"
        self.flavor, self.cluster_queue, self.check = f"{self.ns}-flavor", f"{self.ns}-cq", f"{self.ns}-check"
        self.priority_class = f"{self.ns}-high"
        self.admission_controller = f"dispatch.io/admission-{suffix}"
        self.controller: Any = None
        self.lost_nodes: list[str] = []
        self.k("create", "namespace", self.ns)
        base = json.loads(self.k("get", "clustertrainingruntime", "torch-distributed", "-o", "json"))
        self.apply(*behaviour_runtimes(base))
        if mode is Mode.KUEUE:
            self._queue()

    def _queue(self) -> None:
        kq = "kueue.x-k8s.io/v1beta2"
        self.apply(
            {"apiVersion": kq, "kind": "ResourceFlavor", "metadata": {"name": self.flavor}},
            {
                "apiVersion": kq,
                "kind": "AdmissionCheck",
                "metadata": {"name": self.check},
                "spec": {"controllerName": self.admission_controller},
            },
            {
                "apiVersion": kq,
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": self.priority_class},
                "value": 1000,
            },
            {
                "apiVersion": kq,
                "kind": "ClusterQueue",
                "metadata": {"name": self.cluster_queue},
                "spec": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.ns}},
                    "preemption": {"withinClusterQueue": "LowerPriority"},
                    "admissionChecksStrategy": {"admissionChecks": [{"name": self.check}]},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [{"name": self.flavor, "resources": [{"name": "cpu", "nominalQuota": "8"}]}],
                        }
                    ],
                },
            },
        )
        self.apply(
            {
                "apiVersion": kq,
                "kind": "LocalQueue",
                "metadata": {"name": "lq", "namespace": self.ns},
                "spec": {"clusterQueue": self.cluster_queue},
            }
        )
        self.start_admission()

    def start_admission(self) -> None:
        """dispatch-admission for this cluster's AdmissionCheck; returns once it has marked the check Active."""
        from dispatch.admission.controller import Controller, ControllerSettings

        self.controller = Controller(
            ControllerSettings(
                kubeconfig=self.cp["kubeconfig"],
                controller_name=self.admission_controller,
                lease_namespace=self.ns,
                identity="test-admission",
                lease_duration=15.0,
                renew_every=1.0,
            )
        )
        self.controller.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ac = json.loads(self.k("get", "admissioncheck", self.check, "-o", "json"))
            if any(
                c.get("type") == "Active" and c.get("status") == "True"
                for c in ac.get("status", {}).get("conditions") or []
            ):
                return
            time.sleep(0.5)
        raise AssertionError(f"dispatch-admission did not mark AdmissionCheck {self.check} Active within 60 s")

    def k(self, *args: str, stdin: str | None = None) -> str:
        p = subprocess.run([self.kubectl, *args], input=stdin, capture_output=True, text=True, env=self.env, timeout=60)
        if p.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({p.returncode}): {p.stderr.strip()}")
        return p.stdout

    def apply(self, *docs: dict[str, Any]) -> None:
        self.k("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=yaml.safe_dump_all(docs))

    def settings(self, **over: Any) -> KubeflowSettings:
        data: dict[str, Any] = {
            "kubeconfig": {"path": self.cp["kubeconfig"]},
            "namespace": self.ns,
            "mode": self.mode.value,
            "timeouts": {"apiserverRequest": "20s"},
            "preflight": {"probeWatch": "5s"},
        }
        if self.mode is Mode.KUEUE:
            data["localQueue"] = "lq"
            data["admissionCheckController"] = self.admission_controller
        data.update(over)
        return decode(KubeflowSettings, data)

    def backend(self, *, read_only: bool = False, **over: Any) -> Backend:
        return open_backend(self.settings(**over), OpenOptions(read_only=read_only, clock=SYSTEM_CLOCK))

    def pods_of(self, trainjob: str) -> list[dict[str, Any]]:
        out = self.k("get", "pods", "-n", self.ns, "-l", f"jobset.sigs.k8s.io/jobset-name={trainjob}", "-o", "json")
        pods: list[dict[str, Any]] = json.loads(out)["items"]
        return sorted(pods, key=lambda p: p["metadata"]["name"])

    def rank0(self, trainjob: str) -> dict[str, Any]:
        """Rank 0's pod of ``trainjob`` once it is bound to a node (waits up to 60 s)."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            pods = [p for p in self.pods_of(trainjob) if p["spec"].get("nodeName")]
            if pods:
                return pods[0]
            time.sleep(0.5)
        raise AssertionError(f"TrainJob {trainjob} has no pod on a node after 60 s")

    def workload_of(self, trainjob: str) -> dict[str, Any]:
        """Kueue's Workload of ``trainjob`` (waits up to 60 s for Kueue to make it)."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            items = json.loads(self.k("get", "workloads", "-n", self.ns, "-o", "json"))["items"]
            mine = [
                w for w in items if any(r.get("name") == trainjob for r in w["metadata"].get("ownerReferences") or [])
            ]
            if mine:
                return dict(mine[0])
            time.sleep(0.5)
        raise AssertionError(f"Kueue made no Workload for TrainJob {trainjob} within 60 s")

    def preempt(self, trainjob: str) -> None:
        """Kueue mode: a TrainJob of a higher priority that needs the whole quota; plain: evict rank 0."""
        if self.mode is Mode.KUEUE:
            self.workload_of(trainjob)
            name = f"preemptor-{uuid.uuid4().hex[:6]}"
            self.apply(
                {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "kind": "TrainJob",
                    "metadata": {
                        "name": name,
                        "namespace": self.ns,
                        "labels": {
                            "kueue.x-k8s.io/queue-name": "lq",
                            "kueue.x-k8s.io/priority-class": self.priority_class,
                        },
                    },
                    "spec": {
                        "runtimeRef": {"name": runtime_name("succeed")},
                        "trainer": {
                            "numNodes": 1,
                            "image": "registry.example/train:1",
                            "command": ["true"],
                            "resourcesPerNode": {"requests": {"cpu": "8"}},
                        },
                    },
                }
            )
            return
        pod = self.rank0(trainjob)["metadata"]["name"]
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": self.ns}}
        self.k(
            "create",
            "--raw",
            f"/api/v1/namespaces/{self.ns}/pods/{pod}/eviction",
            "-f",
            "-",
            stdin=json.dumps(eviction),
        )

    def lose_node(self, trainjob: str) -> None:
        """kwok's node-not-ready stage takes rank 0's node NotReady; the node lifecycle controller does the rest."""
        node = self.rank0(trainjob)["spec"]["nodeName"]
        self.lost_nodes.append(node)
        self.k("label", "node", node, "node-not-ready.stage.kwok.x-k8s.io=true", "--overwrite")

    def admin_hold(self, trainjob: str) -> None:
        if self.mode is Mode.KUEUE:
            wl = self.workload_of(trainjob)["metadata"]["name"]
            self.k("patch", "workload", "-n", self.ns, wl, "--type", "merge", "-p", '{"spec":{"active":false}}')
        else:
            self.k("annotate", "trainjob", "-n", self.ns, trainjob, "dispatch.io/admin-hold=maintenance", "--overwrite")

    def restore_nodes(self) -> None:
        """Lost kwok nodes deleted and made again: kwok initialises a new node Ready."""
        for node in self.lost_nodes:
            doc = json.loads(self.k("get", "node", node, "-o", "json"))
            self.k("delete", "node", node, "--wait=true", "--timeout=60s")
            meta = doc["metadata"]
            labels = {k: v for k, v in (meta.get("labels") or {}).items() if not k.startswith("node-not-ready.")}
            fresh = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": node, "annotations": {"kwok.x-k8s.io/node": "fake"}, "labels": labels},
                # as controlplane-up.sh makes them: with one address only, kwok's node-initialize wipes it
                "status": {
                    "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": node}]
                },
            }
            self.k("create", "-f", "-", stdin=json.dumps(fresh))
        self.lost_nodes.clear()

    def close(self) -> None:
        if self.controller is not None:
            self.controller.stop()
        try:
            self.restore_nodes()
        finally:
            self.k("delete", "namespace", self.ns, "--wait=false")
            if self.mode is Mode.KUEUE:
                for kind, name in (
                    ("clusterqueue", self.cluster_queue),
                    ("admissioncheck", self.check),
                    ("resourceflavor", self.flavor),
                    ("workloadpriorityclass", self.priority_class),
                ):
                    self.k("delete", kind, name, "--ignore-not-found", "--wait=false")


def cluster_in(cp: dict[str, Any], tmp_path: Path, mode: Mode, *also: str) -> Iterator[ControlPlaneCluster]:
    """A fixture's body: the cluster in a namespace of its own, closed after the test; fails first when the
    control plane lacks JobSet, the Trainer, Kueue in Kueue mode, or a component ``also`` names."""
    needs(cp, "jobset", "trainer-controller-manager", *(("kueue",) if mode is Mode.KUEUE else ()), *also)
    assert KUBECTL is not None
    c = ControlPlaneCluster(cp, KUBECTL, tmp_path, mode)
    try:
        yield c
    finally:
        c.close()


def job_spec(behaviour: str, *, nodes: int = 2, time_limit: float | None = None) -> JobSpec:
    return JobSpec(
        command=(behaviour, "x"),
        nodes=nodes,
        time_limit=time_limit,
        extensions=(Image("registry.example/train:1"), RuntimeRef(runtime_name(behaviour))),
    )


def harness(cluster: ControlPlaneCluster) -> Harness:
    def spec(behaviour: str) -> JobSpec | None:
        if behaviour == "timeout":
            return job_spec("sleep", time_limit=15.0)
        if behaviour in BEHAVIOURS:
            return job_spec(behaviour)
        return None  # echo: kwok serves no container output unless given a Logs object (not set up yet)

    def preempt(b: Backend, sid: str) -> None:
        cluster.preempt(sid)

    def lose_node(b: Backend, sid: str) -> None:
        cluster.lose_node(sid)

    def admin_hold(b: Backend, sid: str) -> None:
        cluster.admin_hold(sid)

    def cleanup(b: Backend, sid: str) -> None:
        cluster.k("delete", "trainjob", "-n", cluster.ns, sid, "--ignore-not-found", "--wait=false")

    return Harness(
        backend=cluster.backend,
        clock=SYSTEM_CLOCK,
        spec=spec,
        timings=Timings(wait=120.0, quiet=8.0, poll=1.0),
        read_only_backend=lambda: cluster.backend(read_only=True),
        preempt=preempt,
        lose_node=lose_node,
        admin_hold=admin_hold,
        cleanup=cleanup,
        name=f"kubeflow-controlplane-{cluster.mode.value}",
    )
