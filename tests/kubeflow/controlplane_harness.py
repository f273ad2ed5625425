"""Test support for the real control plane (scripts/k8s/controlplane-up.sh): a conformance harness for the
Kubeflow adapter whose job behaviours are played by kwok's own stages, not by a script of ours.

Each behaviour is a ClusterTrainingRuntime copied from the Trainer's ``torch-distributed`` whose pod template
carries kwok's stage annotations: ``succeed`` completes its pods after 2 s (kwok's pod-complete stage for pods of a
Job), ``sleep`` after an hour, ``fail`` and ``oom`` end the container through kwok's
pod-container-running-failed stage with exit code 3 (reason Error) or 137 (reason OOMKilled). The adapter copies
the runtime into its own TrainingRuntime, so every pod the Trainer, JobSet and the Job controller make carries them.
Every rank restart is off (restartPolicy Never, backoffLimit 0), as the adapter asks of a runtime.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import uuid
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

COMPLETE = "pod-complete.stage.kwok.x-k8s.io"
FAILED = "pod-container-running-failed.stage.kwok.x-k8s.io"

# behaviour -> (pod labels, pod annotations)
BEHAVIOURS: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    "succeed": ({}, {f"{COMPLETE}/delay": "2s", f"{COMPLETE}/jitter-delay": "0s"}),
    # kwok takes the jitter-delay (default 5 s) as the delay when it is not longer than the delay itself
    "sleep": ({}, {f"{COMPLETE}/delay": "3600s", f"{COMPLETE}/jitter-delay": "3600s"}),
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
            pod.setdefault("spec", {})["restartPolicy"] = "Never"
        out.append(rt)
    return out


class ControlPlaneCluster:
    """The Kubeflow adapter on the real control plane, in a namespace of its own."""

    def __init__(self, control_plane: dict[str, Any], kubectl: str, home: Path, mode: Mode = Mode.PLAIN) -> None:
        self.cp = control_plane
        self.mode = mode
        self.kubectl = kubectl
        self.env = {**os.environ, "KUBECONFIG": control_plane["kubeconfig"], "HOME": str(home)}
        self.ns = f"cpk-{uuid.uuid4().hex[:10]}"
        self.k("create", "namespace", self.ns)
        base = json.loads(self.k("get", "clustertrainingruntime", "torch-distributed", "-o", "json"))
        self.apply(*behaviour_runtimes(base))

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
        data.update(over)
        return decode(KubeflowSettings, data)

    def backend(self, *, read_only: bool = False, **over: Any) -> Backend:
        return open_backend(self.settings(**over), OpenOptions(read_only=read_only, clock=SYSTEM_CLOCK))

    def pods_of(self, trainjob: str) -> list[dict[str, Any]]:
        out = self.k("get", "pods", "-n", self.ns, "-l", f"jobset.sigs.k8s.io/jobset-name={trainjob}", "-o", "json")
        pods: list[dict[str, Any]] = json.loads(out)["items"]
        return sorted(pods, key=lambda p: p["metadata"]["name"])

    def close(self) -> None:
        self.k("delete", "namespace", self.ns, "--wait=false")


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

    def cleanup(b: Backend, sid: str) -> None:
        cluster.k("delete", "trainjob", "-n", cluster.ns, sid, "--ignore-not-found", "--wait=false")

    return Harness(
        backend=cluster.backend,
        clock=SYSTEM_CLOCK,
        spec=spec,
        timings=Timings(wait=120.0, quiet=8.0, poll=1.0),
        read_only_backend=lambda: cluster.backend(read_only=True),
        cleanup=cleanup,
        name=f"kubeflow-controlplane-{cluster.mode.value}",
    )
