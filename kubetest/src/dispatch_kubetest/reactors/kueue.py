"""Kueue v0.20 (``kueue.x-k8s.io/v1beta2``) for the TrainJob and JobSet integrations.

Jobs it manages: TrainJobs carrying the label ``kueue.x-k8s.io/queue-name``, and JobSets carrying it
that are not owned by a TrainJob. What it does, in Kueue's words where the strings are Kueue's:

- webhook (every create/update of a managed job): ``spec.suspend`` is forced to true on create;
  ``kueue.x-k8s.io/admission-gated-by`` must be a comma-separated list of distinct domain-prefixed
  names (≤ 63 chars each), can only be set at creation and afterwards only shrink; violations are
  403 "admission webhook ... denied the request: ...";
- one Workload per job, name ``<lowercased kind>-<job name>-<5 chars>``, label
  ``kueue.x-k8s.io/job-uid=<job uid>``, controller ownerReference to the job, the gate annotation
  copied, ``spec.queueName``, ``spec.active: true``, ``spec.podSets`` (one per replicatedJob:
  ``count = replicas * parallelism``), ``spec.priority`` from label ``kueue.x-k8s.io/priority-class``
  (a WorkloadPriorityClass);
- gated (annotation non-empty): ``QuotaReserved=False`` ``AdmissionGated`` "Admission is gated by: <gates>";
- queueing: LocalQueue → ClusterQueue; missing/inactive ones give ``QuotaReserved=False``
  ``Inadmissible``; quota = ``nominalQuota`` per flavor and resource (first flavor that fits, pod
  requests or else limits; a requested resource the ClusterQueue does not cover is unschedulable);
  no fit → ``QuotaReserved=False`` ``Pending`` with Kueue's "couldn't assign flavors..." message;
  order = priority, then creation time; preemption ``withinClusterQueue: LowerPriority`` (or
  ``LowerOrNewerEqualPriority``) evicts lower-priority admitted Workloads;
- quota reserved: ``status.admission`` (clusterQueue, podSetAssignments), ``QuotaReserved=True``
  ``QuotaReserved`` "Quota reserved in ClusterQueue <cq>", previous ``Evicted``/``Preempted`` reset to
  False reason ``QuotaReserved`` "Previously: ..."; one ``status.admissionChecks`` entry per check of
  the ClusterQueue (state ``Pending``); ``Admitted=False`` ``UnsatisfiedAdmissionChecks`` until every
  state is ``Ready``, then ``Admitted=True`` ``Admitted`` "The workload is admitted" and the job is
  unsuspended (for a TrainJob, with a runtimePatch of manager ``kueue.x-k8s.io/manager`` carrying the
  flavors' nodeLabels and the checks' podSetUpdates);
- check ``Retry`` → eviction reason ``AdmissionCheck``; check ``Rejected`` → ``spec.active=false``
  and eviction reason ``DeactivatedDueToAdmissionCheck``;
- ``spec.active: false`` → eviction reason ``Deactivated`` "The workload is deactivated",
  ``Requeued=False`` reason ``Deactivated``; ``spec.active: true`` again → ``Requeued=True``
  ``Reactivated`` "The workload was reactivated";
- eviction (any reason): ``Evicted=True`` (+ ``Preempted=True`` ``InClusterQueue`` when preempted),
  every non-Pending check reset to ``Pending`` "Reset to Pending after eviction. Previously: <state>",
  ``status.schedulingStats.evictions`` counted, the job suspended (Kueue's runtimePatch removed),
  quota released: ``status.admission`` cleared, ``QuotaReserved=False`` ``Pending``,
  ``Admitted=False`` ``NoReservation`` "The workload has no reservation", ``Requeued=True`` with the
  eviction reason (False for deactivation);
- job finished → ``Finished=True`` ``Succeeded``/``Failed``, quota released.
Not modelled: cohorts/borrowing/fair sharing, TAS, waitForPodsReady (``PodsReady``), requeue
backoff, MultiKueue, partial admission, ProvisioningRequests, resource transformations,
LocalQueue/ClusterQueue stop policies other than blocking admission.
"""

from __future__ import annotations

import copy
import hashlib
import re
from typing import Any, Protocol

from ..errors import StatusError
from ..quantity import format_quantity, parse_quantity
from ..resources import (
    ADMISSION_CHECK,
    CLUSTER_QUEUE,
    JOBSET,
    LOCAL_QUEUE,
    RESOURCE_FLAVOR,
    TRAINJOB,
    WORKLOAD,
    WORKLOAD_PRIORITY_CLASS,
    ResourceType,
)
from .base import Host, Reactor, find_condition, is_true, owner_ref, set_condition
from .trainer import TrainerReactor, build_jobset

JSON = dict[str, Any]

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GATE_ANNOTATION = "kueue.x-k8s.io/admission-gated-by"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
KUEUE_MANAGER = "kueue.x-k8s.io/manager"
_GATE_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


RESOURCE_IN_USE = "kueue.x-k8s.io/resource-in-use"
"""The finalizer Kueue puts on every Workload it manages; removed once the Workload's quota is released."""


def _drop_resource_in_use(cur: JSON) -> None:
    fins = [f for f in cur["metadata"].get("finalizers") or [] if f != RESOURCE_IN_USE]
    if fins:
        cur["metadata"]["finalizers"] = fins
    else:
        cur["metadata"].pop("finalizers", None)


def gates_of(obj: JSON) -> list[str]:
    value = (obj["metadata"].get("annotations") or {}).get(GATE_ANNOTATION, "")
    return [g.strip() for g in value.split(",") if g.strip()]


def _denied(kind: str, message: str) -> StatusError:
    hook = "vtrainjob.kb.io" if kind == "TrainJob" else "vjobset.kb.io"
    return StatusError(403, f'admission webhook "{hook}" denied the request: {message}', "Forbidden")


def _pod_requests(template: JSON) -> dict[str, float]:
    total: dict[str, float] = {}
    for c in (template.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        amounts = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        for name, qty in amounts.items():
            total[name] = total.get(name, 0.0) + parse_quantity(qty)
    return total


def _checks_of(cq: JSON) -> list[str]:
    spec = cq.get("spec") or {}
    names = [c["name"] for c in (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []]
    return names + [n for n in spec.get("admissionChecks") or [] if n not in names]


class KueueHost(Host, Protocol):
    """What the Kueue reactor needs of its cluster: the store, and the Trainer reactor (a TrainJob's JobSet shape)."""

    @property
    def trainer(self) -> TrainerReactor: ...


class KueueReactor(Reactor):
    manager = "kueue"
    cluster: KueueHost

    def __init__(self, cluster: KueueHost) -> None:
        super().__init__(cluster)

    # ---- webhook --------------------------------------------------------------------------
    def _managed(self, rt: ResourceType, obj: JSON) -> bool:
        if QUEUE_LABEL not in (obj["metadata"].get("labels") or {}):
            return False
        if rt.kind == "TrainJob":
            return True
        if rt.kind == "JobSet":
            return not any(r.get("kind") == "TrainJob" for r in obj["metadata"].get("ownerReferences") or [])
        return False

    def admit(self, rt: ResourceType, obj: JSON, old: JSON | None) -> None:
        if rt.kind not in ("TrainJob", "JobSet") or not self._managed(rt, obj):
            return
        value = (obj["metadata"].get("annotations") or {}).get(GATE_ANNOTATION)
        field = f"metadata.annotations[{GATE_ANNOTATION}]"
        if old is None:
            obj.setdefault("spec", {})["suspend"] = True
            if value is not None:
                names = [g.strip() for g in value.split(",")]
                if any(not n or len(n) > 63 or not _GATE_RE.match(n) for n in names):
                    raise _denied(
                        rt.kind,
                        f"{field}: Invalid value: {value!r}: each gate must be a "
                        "domain-prefixed path of at most 63 characters",
                    )
                if len(set(names)) != len(names):
                    raise _denied(rt.kind, f"{field}: Duplicate value: {value!r}")
            return
        old_value = (old["metadata"].get("annotations") or {}).get(GATE_ANNOTATION)
        if old_value is None and value is not None:
            raise _denied(rt.kind, f"{field}: Forbidden: cannot add the annotation after creation")
        if value is not None and not set(gates_of(obj)) <= set(gates_of(old)):
            raise _denied(rt.kind, f"{field}: Forbidden: gates can only be removed")

    # ---- helpers --------------------------------------------------------------------------
    def _jobset_shape(self, rt: ResourceType, job: JSON) -> JSON | None:
        if rt.kind == "JobSet":
            return job
        runtime = (
            self.cluster.trainer.snapshot(job)
            if self.store.try_get(TRAINJOB, job["metadata"]["namespace"], job["metadata"]["name"])
            else None
        )
        return build_jobset(job, runtime) if runtime is not None else None

    def _pod_sets(self, rt: ResourceType, job: JSON) -> list[JSON] | None:
        shape = self._jobset_shape(rt, job)
        if shape is None:
            return None
        out = []
        for rj in (shape.get("spec") or {}).get("replicatedJobs") or []:
            jspec = (rj.get("template") or {}).get("spec") or {}
            count = int(rj.get("replicas", 1)) * int(jspec.get("parallelism", 1))
            out.append({"name": rj["name"], "count": count, "template": copy.deepcopy(jspec.get("template") or {})})
        return out

    def _priority(self, job: JSON) -> tuple[int, str | None]:
        name = (job["metadata"].get("labels") or {}).get(PRIORITY_LABEL)
        if not name:
            return 0, None
        wpc = self.store.try_get(WORKLOAD_PRIORITY_CLASS, "", name)
        return (int(wpc.get("value", 0)) if wpc else 0), name

    def _workload_for(self, job: JSON, workloads: list[JSON]) -> JSON | None:
        uid = job["metadata"]["uid"]
        for wl in workloads:
            if any(r.get("uid") == uid and r.get("controller") for r in wl["metadata"].get("ownerReferences") or []):
                return wl
        return None

    # ---- reconcile ------------------------------------------------------------------------
    def reconcile(self) -> None:
        workloads, _ = self.store.list(WORKLOAD)
        for gone in [w for w in workloads if w["metadata"].get("deletionTimestamp")]:
            # a Workload being deleted (its job is gone) releases its quota; then Kueue lets it go
            self.edit(WORKLOAD, gone, _drop_resource_in_use)
        workloads, _ = self.store.list(WORKLOAD)
        jobs: list[tuple[ResourceType, JSON]] = []
        for rt in (TRAINJOB, JOBSET):
            items, _ = self.store.list(rt)
            jobs.extend((rt, j) for j in items if self._managed(rt, j) and not j["metadata"].get("deletionTimestamp"))
        for rt, job in jobs:
            wl = self._workload_for(job, workloads)
            if wl is None:
                created = self._create_workload(rt, job)
                if created is not None:
                    workloads.append(created)
            else:
                self._sync_workload(rt, job, wl)
        self._schedule(jobs)
        self._update_queue_status()

    def _create_workload(self, rt: ResourceType, job: JSON) -> JSON | None:
        pod_sets = self._pod_sets(rt, job)
        if pod_sets is None:
            return None
        name, uid = job["metadata"]["name"], job["metadata"]["uid"]
        digest = hashlib.sha1(f"{name}/{uid}".encode()).hexdigest()[:5]
        prefix = f"{rt.kind.lower()}-{name}"[: 253 - 6]
        priority, pclass = self._priority(job)
        annotations = {}
        gate = (job["metadata"].get("annotations") or {}).get(GATE_ANNOTATION)
        if gate is not None:
            annotations[GATE_ANNOTATION] = gate
        spec: JSON = {
            "queueName": job["metadata"]["labels"][QUEUE_LABEL],
            "active": True,
            "podSets": pod_sets,
            "priority": priority,
        }
        if pclass:
            spec["priorityClassRef"] = {
                "group": "kueue.x-k8s.io",
                "kind": "WorkloadPriorityClass",
                "name": pclass,
            }
        wl = self.create(
            WORKLOAD,
            {
                "apiVersion": WORKLOAD.api_version,
                "kind": "Workload",
                "metadata": {
                    "name": f"{prefix}-{digest}",
                    "namespace": job["metadata"]["namespace"],
                    "labels": {JOB_UID_LABEL: uid},
                    "annotations": annotations,
                    "ownerReferences": [owner_ref(job)],
                    "finalizers": [RESOURCE_IN_USE],
                },
                "spec": spec,
            },
        )
        self._sync_workload(rt, job, wl)
        return wl

    def _sync_workload(self, rt: ResourceType, job: JSON, wl: JSON) -> None:
        gate = (job["metadata"].get("annotations") or {}).get(GATE_ANNOTATION)

        def sync_meta(cur: JSON) -> None:
            ann = cur["metadata"].setdefault("annotations", {})
            if gate:
                ann[GATE_ANNOTATION] = gate
            else:
                ann.pop(GATE_ANNOTATION, None)

        wl = self.edit(WORKLOAD, wl, sync_meta) or wl
        status = copy.deepcopy(wl.get("status") or {})
        now = self.now()
        finished = self._job_finished(rt, job)
        if finished is not None:
            if not is_true(wl, "Finished"):
                reason, message = finished
                set_condition(status, "Finished", "True", reason, message, now)
                self.write_status(WORKLOAD, wl, status)
            return
        active = (wl.get("spec") or {}).get("active", True)
        requeued = find_condition(wl, "Requeued")
        if not active:
            if status.get("admission") is not None:
                self._evict(rt, job, wl, "Deactivated", "The workload is deactivated")
                return
            already = (
                requeued is not None
                and requeued.get("status") == "False"
                and str(requeued.get("reason", "")).startswith("Deactivated")
            )
            if not already:  # keep the reason of an eviction that deactivated it
                set_condition(status, "QuotaReserved", "False", "Pending", "The workload is deactivated", now)
                set_condition(status, "Requeued", "False", "Deactivated", "The workload is deactivated", now)
                self.write_status(WORKLOAD, wl, status)
            self._suspend_job(rt, job)
            return
        if requeued and requeued.get("status") == "False" and str(requeued.get("reason", "")).startswith("Deactivated"):
            set_condition(status, "Requeued", "True", "Reactivated", "The workload was reactivated", now)
            wl = self.write_status(WORKLOAD, wl, status)
            status = copy.deepcopy(wl.get("status") or {})
        if status.get("admission") is None:
            self._suspend_job(rt, job)
            return
        states = {c.get("name"): c.get("state") for c in status.get("admissionChecks") or []}
        if "Rejected" in states.values():
            rejected = [n for n, s in states.items() if s == "Rejected"]
            set_condition(
                status,
                "DeactivationTarget",
                "True",
                "AdmissionCheck",
                f'AdmissionCheck in Rejected state: "{rejected[0]}"',
                now,
            )
            wl = self.write_status(WORKLOAD, wl, status)

            def deactivate(cur: JSON) -> None:
                cur["spec"]["active"] = False

            wl = self.edit(WORKLOAD, wl, deactivate) or wl
            self._evict(
                rt,
                job,
                wl,
                "DeactivatedDueToAdmissionCheck",
                f"The workload is deactivated due to Admission check(s): {', '.join(rejected)}, were rejected",
            )
            return
        if "Retry" in states.values():
            self._evict(rt, job, wl, "AdmissionCheck", "At least one admission check is false")
            return
        if all(s == "Ready" for s in states.values()):
            set_condition(status, "Admitted", "True", "Admitted", "The workload is admitted", now)
            wl = self.write_status(WORKLOAD, wl, status)
            self._start_job(rt, job, wl)
        else:
            set_condition(
                status,
                "Admitted",
                "False",
                "UnsatisfiedAdmissionChecks",
                "The workload has not all checks ready",
                now,
            )
            self.write_status(WORKLOAD, wl, status)
            self._suspend_job(rt, job)

    def _job_finished(self, rt: ResourceType, job: JSON) -> tuple[str, str] | None:
        ok, bad = ("Complete", "Failed") if rt.kind == "TrainJob" else ("Completed", "Failed")
        for type_, reason in ((ok, "Succeeded"), (bad, "Failed")):
            cond = find_condition(job, type_)
            if cond is not None and cond.get("status") == "True":
                msg = cond.get("message") or ("Job finished successfully" if reason == "Succeeded" else "Job failed")
                return reason, str(msg)
        return None

    # ---- job control ----------------------------------------------------------------------
    def _suspend_job(self, rt: ResourceType, job: JSON) -> None:
        def stop(cur: JSON) -> None:
            cur.setdefault("spec", {})["suspend"] = True
            if rt.kind == "TrainJob":
                patches = [p for p in cur["spec"].get("runtimePatches") or [] if p.get("manager") != KUEUE_MANAGER]
                if patches:
                    cur["spec"]["runtimePatches"] = patches
                else:
                    cur["spec"].pop("runtimePatches", None)

        self.edit(rt, job, stop)

    def _start_job(self, rt: ResourceType, job: JSON, wl: JSON) -> None:
        admission = (wl.get("status") or {}).get("admission") or {}
        updates: dict[str, list[JSON]] = {}
        for check in (wl.get("status") or {}).get("admissionChecks") or []:
            for upd in check.get("podSetUpdates") or []:
                updates.setdefault(upd.get("name", ""), []).append(upd)
        replicated: list[JSON] = []
        for psa in admission.get("podSetAssignments") or []:
            labels: dict[str, str] = {}
            annotations: dict[str, str] = {}
            selector: dict[str, str] = {}
            tolerations: list[JSON] = []
            for flavor_name in sorted(set((psa.get("flavors") or {}).values())):
                flavor = self.store.try_get(RESOURCE_FLAVOR, "", flavor_name) or {}
                selector.update((flavor.get("spec") or {}).get("nodeLabels") or {})
                tolerations.extend((flavor.get("spec") or {}).get("tolerations") or [])
            for upd in updates.get(psa["name"], []):
                labels.update(upd.get("labels") or {})
                annotations.update(upd.get("annotations") or {})
                selector.update(upd.get("nodeSelector") or {})
                tolerations.extend(upd.get("tolerations") or [])
            pod_meta = {k: v for k, v in (("labels", labels), ("annotations", annotations)) if v}
            pod_spec = {k: v for k, v in (("nodeSelector", selector), ("tolerations", tolerations)) if v}
            if pod_meta or pod_spec:
                template: JSON = {}
                if pod_meta:
                    template["metadata"] = pod_meta
                if pod_spec:
                    template["spec"] = pod_spec
                replicated.append({"name": psa["name"], "template": {"spec": {"template": template}}})

        def start(cur: JSON) -> None:
            cur.setdefault("spec", {})["suspend"] = False
            if rt.kind == "TrainJob":
                patches = [p for p in cur["spec"].get("runtimePatches") or [] if p.get("manager") != KUEUE_MANAGER]
                if replicated:
                    patches.append(
                        {
                            "manager": KUEUE_MANAGER,
                            "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": replicated}}},
                        }
                    )
                if patches:
                    cur["spec"]["runtimePatches"] = patches

        self.edit(rt, job, start)

    def _evict(
        self, rt: ResourceType, job: JSON, wl: JSON, reason: str, message: str, preempted: str | None = None
    ) -> None:
        now = self.now()
        status = copy.deepcopy(wl.get("status") or {})
        set_condition(status, "Evicted", "True", reason, message, now)
        if preempted:
            set_condition(status, "Preempted", "True", preempted, message, now)
        for check in status.get("admissionChecks") or []:
            if check.get("state") == "Pending":
                continue
            previous = check.get("state")
            if previous == "Retry":
                check["retryCount"] = int(check.get("retryCount", 0)) + 1
            check.update(
                {
                    "state": "Pending",
                    "message": f"Reset to Pending after eviction. Previously: {previous}",
                    "lastTransitionTime": now,
                }
            )
            check.pop("podSetUpdates", None)
        stats = status.setdefault("schedulingStats", {}).setdefault("evictions", [])
        base_reason = "Deactivated" if reason.startswith("Deactivated") else reason
        cause = reason[len("DeactivatedDueTo") :] if reason.startswith("DeactivatedDueTo") else ""
        for entry in stats:
            if entry.get("reason") == base_reason and entry.get("underlyingCause", "") == cause:
                entry["count"] = int(entry.get("count", 0)) + 1
                break
        else:
            stats.append({"reason": base_reason, "underlyingCause": cause, "count": 1})
        wl = self.write_status(WORKLOAD, wl, status)
        self._suspend_job(rt, job)
        # the job is stopped: release the quota reservation
        status = copy.deepcopy(wl.get("status") or {})
        status.pop("admission", None)
        set_condition(status, "QuotaReserved", "False", "Pending", message, now)
        set_condition(status, "Admitted", "False", "NoReservation", "The workload has no reservation", now)
        deactivated = reason.startswith("Deactivated")
        set_condition(status, "Requeued", "False" if deactivated else "True", reason, message, now)
        if deactivated:
            # Kueue drops DeactivationTarget once the deactivation has been carried out
            status["conditions"] = [c for c in status["conditions"] if c.get("type") != "DeactivationTarget"]
        self.write_status(WORKLOAD, wl, status)

    def preempt(self, wl: JSON, reason: str = "InClusterQueue", message: str | None = None) -> None:
        """Evict ``wl`` as preempted (what Kueue does for a higher-priority Workload)."""
        job, rt = self._owner(wl)
        if job is None or rt is None:
            raise StatusError(409, "the workload has no job", "Conflict")
        if (wl.get("status") or {}).get("admission") is None:
            raise StatusError(409, f'workload "{wl["metadata"]["name"]}" has no quota reservation', "Conflict")
        text = message or "Preempted to accommodate a workload due to prioritization in the ClusterQueue"
        self._evict(rt, job, wl, "Preempted", text, preempted=reason)

    def _owner(self, wl: JSON) -> tuple[JSON | None, ResourceType | None]:
        for ref in wl["metadata"].get("ownerReferences") or []:
            rt = TRAINJOB if ref.get("kind") == "TrainJob" else JOBSET if ref.get("kind") == "JobSet" else None
            if rt is not None:
                job = self.store.try_get(rt, wl["metadata"]["namespace"], ref["name"])
                if job is not None and job["metadata"]["uid"] == ref.get("uid"):
                    return job, rt
        return None, None

    # ---- scheduler ------------------------------------------------------------------------
    def cluster_queue_problem(self, cq: JSON) -> tuple[str, str] | None:
        """Why a ClusterQueue cannot admit (reason, message), or None when it is active."""
        spec = cq.get("spec") or {}
        if spec.get("stopPolicy") in ("Hold", "HoldAndDrain"):
            return "Stopped", "Can't admit new workloads: the ClusterQueue is stopped"
        for group in spec.get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                if self.store.try_get(RESOURCE_FLAVOR, "", flavor["name"]) is None:
                    return (
                        "FlavorNotFound",
                        f"Can't admit new workloads: references missing ResourceFlavor(s): {flavor['name']}",
                    )
        for name in _checks_of(cq):
            ac = self.store.try_get(ADMISSION_CHECK, "", name)
            if ac is None:
                return (
                    "AdmissionCheckNotFound",
                    f"Can't admit new workloads: references missing AdmissionCheck(s): {name}",
                )
            if not is_true(ac, "Active"):
                return (
                    "AdmissionCheckInactive",
                    f"Can't admit new workloads: references inactive AdmissionCheck(s): {name}",
                )
        return None

    def _usage(self, cq_name: str, workloads: list[JSON]) -> dict[tuple[str, str], float]:
        usage: dict[tuple[str, str], float] = {}
        for wl in workloads:
            admission = (wl.get("status") or {}).get("admission")
            if admission is None or admission.get("clusterQueue") != cq_name or is_true(wl, "Finished"):
                continue
            for psa in admission.get("podSetAssignments") or []:
                for res, flavor in (psa.get("flavors") or {}).items():
                    amount = parse_quantity((psa.get("resourceUsage") or {}).get(res, 0))
                    usage[(flavor, res)] = usage.get((flavor, res), 0.0) + amount
        return usage

    def _assign(self, cq: JSON, wl: JSON, usage: dict[tuple[str, str], float]) -> tuple[list[JSON] | None, str]:
        groups = (cq.get("spec") or {}).get("resourceGroups") or []
        assignments: list[JSON] = []
        trial = dict(usage)
        for ps in (wl.get("spec") or {}).get("podSets") or []:
            per_pod = _pod_requests(ps.get("template") or {})
            count = int(ps.get("count", 1))
            flavors: dict[str, str] = {}
            usage_out: dict[str, str] = {}
            for res, amount in sorted(per_pod.items()):
                total = amount * count
                group = next((g for g in groups if res in (g.get("coveredResources") or [])), None)
                if group is None:
                    return (
                        None,
                        f"couldn't assign flavors to pod set {ps['name']}: resource {res} unavailable in ClusterQueue",
                    )
                reasons = []
                for flavor in group.get("flavors") or []:
                    quota = next(
                        (
                            parse_quantity(r.get("nominalQuota", 0))
                            for r in flavor.get("resources") or []
                            if r.get("name") == res
                        ),
                        0.0,
                    )
                    used = trial.get((flavor["name"], res), 0.0)
                    if used + total <= quota:
                        flavors[res] = flavor["name"]
                        trial[(flavor["name"], res)] = used + total
                        usage_out[res] = format_quantity(total)
                        break
                    if total > quota:
                        reasons.append(
                            f"insufficient quota for {res} in flavor {flavor['name']}, request > maximum "
                            f"capacity ({format_quantity(total)} > {format_quantity(quota)})"
                        )
                    else:
                        reasons.append(
                            f"insufficient unused quota for {res} in flavor {flavor['name']}, "
                            f"{format_quantity(used + total - quota)} more needed"
                        )
                else:
                    return None, f"couldn't assign flavors to pod set {ps['name']}: {', '.join(reasons)}"
            assignments.append({"name": ps["name"], "flavors": flavors, "resourceUsage": usage_out, "count": count})
        return assignments, ""

    def _schedule(self, jobs: list[tuple[ResourceType, JSON]]) -> None:
        workloads, _ = self.store.list(WORKLOAD)
        owners = {j["metadata"]["uid"]: (rt, j) for rt, j in jobs}
        pending = []
        for wl in workloads:
            owner_uid = next(
                (r.get("uid") for r in wl["metadata"].get("ownerReferences") or [] if r.get("controller")),
                None,
            )
            if owner_uid not in owners or is_true(wl, "Finished") or not (wl.get("spec") or {}).get("active", True):
                continue
            if (wl.get("status") or {}).get("admission") is None:
                pending.append(wl)
        pending.sort(
            key=lambda w: (
                -int((w.get("spec") or {}).get("priority", 0)),
                w["metadata"]["creationTimestamp"],
                w["metadata"]["name"],
            )
        )
        now = self.now()
        for wl in pending:
            status = copy.deepcopy(wl.get("status") or {})
            rt, job = owners[next(r["uid"] for r in wl["metadata"]["ownerReferences"] if r.get("controller"))]
            gates = gates_of(wl)
            if gates:
                set_condition(
                    status,
                    "QuotaReserved",
                    "False",
                    "AdmissionGated",
                    f"Admission is gated by: {','.join(gates)}",
                    now,
                )
                self.write_status(WORKLOAD, wl, status)
                continue
            ns = wl["metadata"]["namespace"]
            lq_name = (wl.get("spec") or {}).get("queueName", "")
            lq = self.store.try_get(LOCAL_QUEUE, ns, lq_name)
            cq = self.store.try_get(CLUSTER_QUEUE, "", ((lq or {}).get("spec") or {}).get("clusterQueue", ""))
            problem = None
            if lq is None:
                problem = f"LocalQueue {lq_name} doesn't exist"
            elif cq is None:
                problem = f"ClusterQueue {(lq.get('spec') or {}).get('clusterQueue', '')} doesn't exist"
            elif self.cluster_queue_problem(cq) is not None:
                problem = f"ClusterQueue {cq['metadata']['name']} is inactive"
            if problem is not None or cq is None:
                set_condition(status, "QuotaReserved", "False", "Inadmissible", problem or "", now)
                self.write_status(WORKLOAD, wl, status)
                continue
            all_workloads, _ = self.store.list(WORKLOAD)
            assignments, why = self._assign(cq, wl, self._usage(cq["metadata"]["name"], all_workloads))
            if assignments is None:
                if self._try_preemption(cq, wl, all_workloads):
                    status = copy.deepcopy(
                        (self.store.try_get(WORKLOAD, ns, wl["metadata"]["name"]) or wl).get("status") or {}
                    )
                    all_workloads, _ = self.store.list(WORKLOAD)
                    assignments, why = self._assign(cq, wl, self._usage(cq["metadata"]["name"], all_workloads))
                if assignments is None:
                    set_condition(status, "QuotaReserved", "False", "Pending", why, now)
                    self.write_status(WORKLOAD, wl, status)
                    continue
            self._reserve(rt, job, wl, status, cq, assignments)

    def _reserve(self, rt: ResourceType, job: JSON, wl: JSON, status: JSON, cq: JSON, assignments: list[JSON]) -> None:
        now = self.now()
        cq_name = cq["metadata"]["name"]
        status["admission"] = {"clusterQueue": cq_name, "podSetAssignments": assignments}
        set_condition(
            status, "QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq_name}", now
        )
        for type_ in ("Evicted", "Preempted"):
            cond = find_condition({"status": status}, type_)
            if cond is not None and cond.get("status") == "True":
                set_condition(status, type_, "False", "QuotaReserved", f"Previously: {cond.get('message', '')}", now)
        existing = {c.get("name"): c for c in status.get("admissionChecks") or []}
        status["admissionChecks"] = [
            existing.get(name) or {"name": name, "state": "Pending", "message": "", "lastTransitionTime": now}
            for name in _checks_of(cq)
        ]
        wl = self.write_status(WORKLOAD, wl, status)
        self._sync_workload(rt, job, wl)

    def _try_preemption(self, cq: JSON, wl: JSON, workloads: list[JSON]) -> bool:
        policy = ((cq.get("spec") or {}).get("preemption") or {}).get("withinClusterQueue", "Never")
        if policy not in ("LowerPriority", "LowerOrNewerEqualPriority"):
            return False
        mine = int((wl.get("spec") or {}).get("priority", 0))
        cq_name = cq["metadata"]["name"]

        def eligible(other: JSON) -> bool:
            admission = (other.get("status") or {}).get("admission")
            if admission is None or admission.get("clusterQueue") != cq_name or is_true(other, "Finished"):
                return False
            theirs = int((other.get("spec") or {}).get("priority", 0))
            if theirs < mine:
                return True
            return (
                policy == "LowerOrNewerEqualPriority"
                and theirs == mine
                and other["metadata"]["creationTimestamp"] > wl["metadata"]["creationTimestamp"]
            )

        # lowest priority first; among equals the most recently created first (two stable sorts)
        candidates = sorted(
            (w for w in workloads if eligible(w)),
            key=lambda w: (w["metadata"]["creationTimestamp"], w["metadata"]["name"]),
            reverse=True,
        )
        candidates.sort(key=lambda w: int((w.get("spec") or {}).get("priority", 0)))
        victims: list[JSON] = []
        remaining = list(workloads)
        for cand in candidates:
            victims.append(cand)
            remaining = [w for w in remaining if w["metadata"]["uid"] != cand["metadata"]["uid"]]
            if self._assign(cq, wl, self._usage(cq_name, remaining))[0] is not None:
                break
        else:
            return False
        job_uid = (wl["metadata"].get("labels") or {}).get(JOB_UID_LABEL, "")
        message = (
            f"Preempted to accommodate a workload (UID: {wl['metadata']['uid']}, JobUID: {job_uid}) "
            "due to prioritization in the ClusterQueue"
        )
        for victim in victims:
            job, rt = self._owner(victim)
            if job is not None and rt is not None:
                self._evict(rt, job, victim, "Preempted", message, preempted="InClusterQueue")
        return True

    def _update_queue_status(self) -> None:
        workloads, _ = self.store.list(WORKLOAD)
        now = self.now()
        cqs, _ = self.store.list(CLUSTER_QUEUE)
        for cq in cqs:
            name = cq["metadata"]["name"]
            status = copy.deepcopy(cq.get("status") or {})
            problem = self.cluster_queue_problem(cq)
            if problem is None:
                set_condition(status, "Active", "True", "Ready", "Can admit new workloads", now)
            else:
                set_condition(status, "Active", "False", problem[0], problem[1], now)
            mine = [
                w
                for w in workloads
                if ((w.get("status") or {}).get("admission") or {}).get("clusterQueue") == name
                and not is_true(w, "Finished")
            ]
            status["reservingWorkloads"] = len(mine)
            status["admittedWorkloads"] = sum(1 for w in mine if is_true(w, "Admitted"))
            self.write_status(CLUSTER_QUEUE, cq, status)
        lqs, _ = self.store.list(LOCAL_QUEUE)
        for lq in lqs:
            status = copy.deepcopy(lq.get("status") or {})
            target = self.store.try_get(CLUSTER_QUEUE, "", (lq.get("spec") or {}).get("clusterQueue", ""))
            if target is None:
                set_condition(
                    status,
                    "Active",
                    "False",
                    "ClusterQueueDoesNotExist",
                    "Can't submit new workloads to clusterQueue",
                    now,
                )
            elif self.cluster_queue_problem(target) is not None:
                set_condition(
                    status,
                    "Active",
                    "False",
                    "ClusterQueueIsInactive",
                    "Can't submit new workloads to clusterQueue",
                    now,
                )
            else:
                set_condition(status, "Active", "True", "Ready", "Can submit new workloads to localQueue", now)
            ns, lq_name = lq["metadata"]["namespace"], lq["metadata"]["name"]
            mine = [
                w
                for w in workloads
                if w["metadata"]["namespace"] == ns
                and (w.get("spec") or {}).get("queueName") == lq_name
                and not is_true(w, "Finished")
            ]
            status["pendingWorkloads"] = sum(1 for w in mine if (w.get("status") or {}).get("admission") is None)
            status["reservingWorkloads"] = sum(1 for w in mine if (w.get("status") or {}).get("admission") is not None)
            status["admittedWorkloads"] = sum(1 for w in mine if is_true(w, "Admitted"))
            self.write_status(LOCAL_QUEUE, lq, status)
