"""Preflight: what this cluster serves, what we may do on it, whether the readmission gate is proven, and (on
a writable open) a probe TrainJob that cannot run.

Outcome (:class:`PreflightResult`):

* a resource we must read is not served or may not be read: the open fails (:class:`~dispatch.errors.Unsupported`
  naming it), since nothing could be observed;
* writes not allowed, or (kueue mode) the readmission gate not proven: **observe-only** (reads work, ``start``
  is Unsupported, other writes ReadOnly, Hold ``no``);
* ``pods/log`` not allowed: OutputRead and OutputFollow ``no``;
* a caller's read-only open runs no probe and no write checks: Hold ``unknown``.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dispatch.errors import DispatchError, NotFound, ReadOnly, Unsupported
from dispatch.kubeflow import client as k
from dispatch.kubeflow import names as n
from dispatch.kubeflow.mapping import condition
from dispatch.kubeflow.settings import KubeflowSettings, Mode


@dataclass(frozen=True)
class Permission:
    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespaced: bool = True

    def __str__(self) -> str:
        sub = f"/{self.subresource}" if self.subresource else ""
        return f"{self.verb} {self.resource}{sub}" + (f".{self.group}" if self.group else "")


JSON = dict[str, Any]

TR, JS, KQ = k.TRAINER, k.JOBSET_GROUP, k.KUEUE

READS: tuple[Permission, ...] = (
    *(Permission(v, TR, "trainjobs") for v in ("get", "list", "watch")),
    *(Permission(v, JS, "jobsets") for v in ("list", "watch")),
    *(Permission(v, "", "pods") for v in ("list", "watch")),
    *(Permission(v, "", "nodes", namespaced=False) for v in ("get", "list", "watch")),
    Permission("get", TR, "clustertrainingruntimes", namespaced=False),
    Permission("get", TR, "trainingruntimes"),
)
"""What the adapter reads in every mode."""

KUEUE_READS: tuple[Permission, ...] = (
    *tuple(Permission(v, KQ, "workloads") for v in ("list", "watch")),
    Permission("get", KQ, "localqueues"),
    Permission("get", KQ, "clusterqueues", namespaced=False),
    Permission("get", KQ, "admissionchecks", namespaced=False),
)

WRITES: tuple[Permission, ...] = (
    Permission("create", TR, "trainjobs"),
    Permission("patch", TR, "trainjobs"),
    Permission("delete", TR, "trainjobs"),
    Permission("create", TR, "trainingruntimes"),
    Permission("patch", TR, "trainingruntimes"),
    Permission("delete", TR, "trainingruntimes"),
)
KUEUE_WRITES: tuple[Permission, ...] = (Permission("patch", KQ, "workloads"),)
"""Kueue-mode writes. ``list`` on workloads (to find a TrainJob's Workload by uid) is among KUEUE_READS."""
LOGS = Permission("get", "", "pods", "log")


SSAR = Permission("create", "authorization.k8s.io", "selfsubjectaccessreviews", namespaced=False)


def permissions(mode: Mode) -> tuple[Permission, ...]:
    """Every verb and resource the adapter uses in ``mode`` (the RBAC test checks deploy/ against this)."""
    out = READS + WRITES + (LOGS, SSAR)
    if mode is Mode.KUEUE:
        out += KUEUE_READS + KUEUE_WRITES
    return out


@dataclass
class PreflightResult:
    observe_only: bool = False
    reasons: list[str] = field(default_factory=list)
    can_log: bool = True
    gate_proven: bool = False
    gate_reason: str = ""
    probed: bool = False
    probe_reason: str = ""

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons) or "all checks passed"


def run(
    kube: k.Kube,
    settings: KubeflowSettings,
    *,
    read_only: bool,
    sleep: Callable[[float], None] = time.sleep,
) -> PreflightResult:
    """Run preflight against the cluster (see the module docstring)."""
    res = PreflightResult()
    served = [(k.TrainJob, "trainer.kubeflow.org/v1alpha1"), (k.JobSet, "jobset.x-k8s.io/v1alpha2")]
    for resource, gv in served:
        try:
            kube.list_one(resource)
        except NotFound:
            raise Unsupported(f"the cluster does not serve {gv} (is Kubeflow Trainer/JobSet installed?)") from None
    kueue = settings.mode is Mode.KUEUE
    kueue_served = True
    if kueue:
        try:
            kube.list_one(k.Workload)
        except NotFound:
            kueue_served = False
            res.observe_only = True
            res.reasons.append("kueue mode, but the cluster does not serve kueue.x-k8s.io/v1beta2")
    denied = [p for p in READS + (KUEUE_READS if kueue and kueue_served else ()) if not _allowed(kube, p)]
    if denied:
        raise Unsupported("the adapter may not read what it must observe: " + ", ".join(map(str, denied)))
    res.can_log = _allowed(kube, LOGS)
    if read_only:
        return res
    no_write = [p for p in WRITES + (KUEUE_WRITES if kueue else ()) if not _allowed(kube, p)]
    if no_write:
        res.observe_only = True
        res.reasons.append("may read but not write: " + ", ".join(map(str, no_write)))
    if kueue and kueue_served:
        res.gate_proven, res.gate_reason = prove_gate(kube, settings)
        if not res.gate_proven:
            res.observe_only = True
            res.reasons.append("readmission gate not proven: " + res.gate_reason)
    if not res.observe_only and settings.preflight.probe:
        try:
            res.probed, res.probe_reason = probe(kube, settings, sleep)
        except ReadOnly as exc:
            res.observe_only = True
            res.reasons.append(f"a probe write was refused: {exc}")
        if not res.probed and not res.observe_only:
            res.observe_only = True
            res.reasons.append("the probe failed: " + res.probe_reason)
    return res


def _allowed(kube: k.Kube, p: Permission) -> bool:
    return kube.access(p.verb, p.group, p.resource, subresource=p.subresource, namespaced=p.namespaced)


def prove_gate(kube: k.Kube, settings: KubeflowSettings) -> tuple[bool, str]:
    """LocalQueue -> ClusterQueue -> an Active AdmissionCheck of dispatch-admission's controller, on all flavors."""
    assert settings.local_queue is not None
    try:
        lq = kube.get(k.LocalQueue, settings.local_queue)
    except NotFound:
        return False, f"LocalQueue {settings.local_queue} not found in {settings.namespace}"
    cq_name = (lq.get("spec") or {}).get("clusterQueue")
    if not cq_name:
        return False, f"LocalQueue {settings.local_queue} names no ClusterQueue"
    try:
        cq = kube.get(k.ClusterQueue, cq_name)
    except NotFound:
        return False, f"ClusterQueue {cq_name} not found"
    checks = ((cq.get("spec") or {}).get("admissionChecksStrategy") or {}).get("admissionChecks") or []
    for entry in checks:
        if entry.get("onFlavors"):
            continue
        try:
            ac = kube.get(k.AdmissionCheck, str(entry.get("name")))
        except NotFound:
            continue
        if (ac.get("spec") or {}).get("controllerName") != settings.admission_check_controller:
            continue
        active = condition(ac, "Active")
        if active is not None and active.get("status") == "True":
            return True, f"ClusterQueue {cq_name} has the Active AdmissionCheck {entry.get('name')} on every flavor"
        return False, f"AdmissionCheck {entry.get('name')} is not Active (is dispatch-admission running?)"
    return False, (
        f"ClusterQueue {cq_name} has no AdmissionCheck of controller {settings.admission_check_controller} "
        "covering every flavor"
    )


PROBE_IMAGE = "dispatch.invalid/probe:none"
"""The probe's image: the ``.invalid`` top-level domain never resolves (RFC 2606), so no node can pull it."""


def probe_runtime(name: str, settings: KubeflowSettings) -> JSON:
    """The probe's own TrainingRuntime ``name``: one trainer step (``node``, one replica, as the Trainer's
    runtime webhook asks) whose only container has an image no node can pull and runs ``/bin/false``, with
    every rank restart off. It exists only because the Trainer refuses a TrainJob naming a runtime that does
    not exist; nothing it describes can run."""
    pod = {
        "restartPolicy": "Never",
        "containers": [{"name": n.TRAINER_CONTAINER, "image": PROBE_IMAGE, "command": ["/bin/false"]}],
    }
    step = {
        "name": n.TRAINER_CONTAINER,
        "replicas": 1,
        "template": {
            "metadata": {"labels": {n.ANCESTOR_STEP: "trainer"}},
            "spec": {"backoffLimit": 0, "template": {"spec": pod}},
        },
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {
            "name": name,
            "namespace": settings.namespace,
            "labels": {n.MANAGED: "true", n.PROBE: "true"},
        },
        "spec": {"template": {"spec": {"replicatedJobs": [step]}}},
    }


def probe_trainjob(name: str, settings: KubeflowSettings) -> JSON:
    """The probe TrainJob ``name``: gated as a job would be (suspended; kueue: our admission gate), naming
    the probe runtime ``name``."""
    labels = {n.MANAGED: "true", n.PROBE: "true"}
    annotations = {n.GATE: "closed"}
    if settings.mode is Mode.KUEUE:
        assert settings.local_queue is not None
        labels[n.QUEUE_LABEL] = settings.local_queue
        annotations[n.GATED_BY] = settings.gate_name
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": settings.namespace, "labels": labels, "annotations": annotations},
        "spec": {
            "runtimeRef": {"name": name, "kind": "TrainingRuntime", "apiGroup": "trainer.kubeflow.org"},
            "trainer": {"image": PROBE_IMAGE, "command": ["/bin/false"], "numNodes": 1},
            "suspend": True,
        },
    }


def probe(kube: k.Kube, settings: KubeflowSettings, sleep: Callable[[float], None]) -> tuple[bool, str]:
    """Create a probe TrainJob that cannot run (gated, suspended, on a runtime of its own whose image no node
    can pull: :func:`probe_runtime`), check for the watch period that nothing unsuspends it, exercise a hold
    on it, then delete both. The runtime is made the TrainJob's owned object right after the TrainJob exists,
    so the garbage collector removes it with the TrainJob if this process dies before deleting them.
    Returns (passed, reason); a write refused by RBAC raises ReadOnly."""
    name = f"dispatch-probe-{secrets.token_hex(4)}"
    try:
        kube.create(k.TrainingRuntime, probe_runtime(name, settings))
    except ReadOnly:
        raise
    except DispatchError as exc:
        return False, f"creating the probe TrainingRuntime failed: {exc}"
    try:
        try:
            tj = kube.create_trainjob(probe_trainjob(name, settings), name, sleep=sleep)
        except ReadOnly:
            raise
        except DispatchError as exc:  # it may have landed (OutcomeUnknown): the finally deletes it too
            return False, f"creating the probe TrainJob failed: {exc}"
        uid = (tj.get("metadata") or {}).get("uid")
        owner = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": name, "uid": uid}
        with contextlib.suppress(DispatchError):  # only a safety net: the finally below deletes both
            kube.merge_patch(k.TrainingRuntime, name, {"metadata": {"ownerReferences": [owner]}})
        return _watch_probe(kube, settings, name, sleep)
    finally:
        with contextlib.suppress(DispatchError):
            kube.delete(k.TrainJob, name)
        with contextlib.suppress(DispatchError):
            kube.delete(k.TrainingRuntime, name)


def _watch_probe(
    kube: k.Kube, settings: KubeflowSettings, name: str, sleep: Callable[[float], None]
) -> tuple[bool, str]:
    try:
        deadline = time.monotonic() + settings.preflight.probe_watch
        step = min(1.0, max(0.05, settings.preflight.probe_watch / 5))
        while True:
            tj = kube.get(k.TrainJob, name)
            if not (tj.get("spec") or {}).get("suspend", False):
                return False, "the probe TrainJob was unsuspended: the start gate does not hold"
            if time.monotonic() >= deadline:
                break
            sleep(step)
        held = kube.merge_patch(k.TrainJob, name, {"metadata": {"annotations": {n.HOLDS: "probe"}}})
        if n.HOLDS not in ((held.get("metadata") or {}).get("annotations") or {}):
            return False, "a hold annotation did not stick on the probe"
        return True, f"a gated probe TrainJob stayed suspended for {settings.preflight.probe_watch:g}s and took a hold"
    except DispatchError as exc:
        return False, f"watching the probe failed: {exc}"
