"""The batch/v1 Job controller, reduced to what JobSet-driven training jobs exercise.

Modelled: Indexed and NonIndexed completion; one pod per missing index (up to ``parallelism``);
pod labels/annotations ``batch.kubernetes.io/job-completion-index``, ``batch.kubernetes.io/job-name``,
``batch.kubernetes.io/controller-uid`` (plus the legacy ``job-name``/``controller-uid``), hostname
``<job>-<index>``, env ``JOB_COMPLETION_INDEX``; the ``batch.kubernetes.io/job-tracking`` finalizer
(so a deleted pod is still counted, then released); ``backoffLimit`` (default 6) →
``FailureTarget`` + ``Failed`` reason ``BackoffLimitExceeded``; ``podFailurePolicy`` rules with
``onExitCodes``/``onPodConditions`` and actions ``FailJob`` (reason ``PodFailurePolicy``), ``Ignore``
and ``Count``; success → ``SuccessCriteriaMet`` + ``Complete`` reason ``CompletionsReached``;
``suspend`` → active pods deleted (not counted as failures), ``Suspended`` reasons
``JobSuspended``/``JobResumed``.
Not modelled: backoff delays between retries, ``backoffLimitPerIndex``, ``activeDeadlineSeconds``,
``ttlSecondsAfterFinished``, ``successPolicy``, ``podReplacementPolicy`` (replacements are created
as soon as a pod is terminating or failed), ``FailIndex``.
"""

from __future__ import annotations

import copy
from typing import Any

from ..resources import JOB, POD
from .base import Reactor, controller_uid, is_true, owner_ref, set_condition

JSON = dict[str, Any]

TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
INDEX_KEY = "batch.kubernetes.io/job-completion-index"


def _finished(job: JSON) -> bool:
    return is_true(job, "Complete") or is_true(job, "Failed")


def _phase(pod: JSON) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _ready(pod: JSON) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _index(pod: JSON) -> int | None:
    text = (pod["metadata"].get("annotations") or {}).get(INDEX_KEY)
    return int(text) if text is not None and text.isdigit() else None


def _ranges(indexes: set[int]) -> str:
    out: list[str] = []
    ordered = sorted(indexes)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


def _parse_ranges(text: str | None) -> set[int]:
    out: set[int] = set()
    for part in (text or "").split(","):
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-", 1)
            out.update(range(int(a), int(b) + 1))
        else:
            out.add(int(part))
    return out


def _policy_action(job: JSON, pod: JSON) -> str:
    """The podFailurePolicy action for a failed pod: FailJob, Ignore or Count (default)."""
    for rule in ((job.get("spec") or {}).get("podFailurePolicy") or {}).get("rules") or []:
        codes = rule.get("onExitCodes")
        if codes:
            values = set(codes.get("values") or [])
            for cs in (pod.get("status") or {}).get("containerStatuses") or []:
                if codes.get("containerName") and cs.get("name") != codes["containerName"]:
                    continue
                term = (cs.get("state") or {}).get("terminated")
                if term is None or term.get("exitCode") == 0:
                    continue
                inside = term.get("exitCode") in values
                if inside == (codes.get("operator", "In") == "In"):
                    return str(rule.get("action", "Count"))
        for pattern in rule.get("onPodConditions") or []:
            for cond in (pod.get("status") or {}).get("conditions") or []:
                if cond.get("type") == pattern.get("type") and cond.get("status") == pattern.get("status", "True"):
                    return str(rule.get("action", "Count"))
    return "Count"


def _qos_class(pod_spec: JSON) -> str:
    """Guaranteed when every container limits cpu and memory with requests equal to limits,
    BestEffort when none requests or limits anything, else Burstable."""
    resources = [c.get("resources") or {} for c in pod_spec.get("containers") or []]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    guaranteed = all(
        all(k in (r.get("limits") or {}) for k in ("cpu", "memory"))
        and all((r.get("requests") or r.get("limits") or {}).get(k) == v for k, v in (r.get("limits") or {}).items())
        for r in resources
    )
    return "Guaranteed" if guaranteed else "Burstable"


class JobReactor(Reactor):
    manager = "job-controller"

    def reconcile(self) -> None:
        jobs, _ = self.store.list(JOB)
        pods, _ = self.store.list(POD)
        job_uids = {j["metadata"]["uid"] for j in jobs}
        by_owner: dict[str, list[JSON]] = {}
        for pod in pods:
            uid = controller_uid(pod)
            if uid is not None:
                by_owner.setdefault(uid, []).append(pod)
            if TRACKING_FINALIZER in (pod["metadata"].get("finalizers") or []) and uid not in job_uids:
                self._release(pod)  # orphaned by a deleted Job
        for job in jobs:
            self._reconcile_job(job, by_owner.get(job["metadata"]["uid"], []))

    def _release(self, pod: JSON) -> None:
        def drop(cur: JSON) -> None:
            cur["metadata"]["finalizers"] = [
                f for f in cur["metadata"].get("finalizers") or [] if f != TRACKING_FINALIZER
            ]

        self.edit(POD, pod, drop)

    def _reconcile_job(self, job: JSON, pods: list[JSON]) -> None:
        spec = job.get("spec") or {}
        status = copy.deepcopy(job.get("status") or {})
        now = self.now()
        indexed = spec.get("completionMode", "NonIndexed") == "Indexed"
        parallelism = int(spec.get("parallelism", 1))
        completions = int(spec.get("completions", parallelism if indexed else 1) or 1)
        backoff_limit = int(spec.get("backoffLimit", 6))
        suspended = bool(spec.get("suspend"))
        succeeded_idx = _parse_ranges(status.get("completedIndexes"))
        succeeded = int(status.get("succeeded", 0))
        failed = int(status.get("failed", 0))
        fail_job_reason: tuple[str, str] | None = None

        # account for pods that finished or are going away, exactly once (job-tracking finalizer)
        for pod in pods:
            if TRACKING_FINALIZER not in (pod["metadata"].get("finalizers") or []):
                continue
            phase = _phase(pod)
            deleting = bool(pod["metadata"].get("deletionTimestamp"))
            if phase == "Succeeded":
                idx = _index(pod)
                if idx is not None:
                    succeeded_idx.add(idx)
                succeeded += 1
                self._release(pod)
            elif phase == "Failed" or deleting:
                if suspended and deleting:
                    self._release(pod)
                    continue
                action = _policy_action(job, pod)
                if action == "FailJob" and fail_job_reason is None:
                    fail_job_reason = (
                        "PodFailurePolicy",
                        f"Pod {pod['metadata']['namespace']}/{pod['metadata']['name']} has condition "
                        "or exit code matching FailJob rule of the podFailurePolicy",
                    )
                if action != "Ignore":
                    failed += 1
                self._release(pod)
        if indexed:
            succeeded = len(succeeded_idx)
        active = [
            p for p in pods if _phase(p) not in ("Succeeded", "Failed") and not p["metadata"].get("deletionTimestamp")
        ]

        finished = _finished(job)
        if not finished and fail_job_reason is None and failed > backoff_limit:
            fail_job_reason = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
        if not finished and fail_job_reason is not None:
            set_condition(status, "FailureTarget", "True", fail_job_reason[0], fail_job_reason[1], now)
            set_condition(status, "Failed", "True", fail_job_reason[0], fail_job_reason[1], now)
            finished = True
        elif not finished and succeeded >= completions:
            set_condition(
                status,
                "SuccessCriteriaMet",
                "True",
                "CompletionsReached",
                "Reached expected number of succeeded pods",
                now,
            )
            set_condition(
                status,
                "Complete",
                "True",
                "CompletionsReached",
                "Reached expected number of succeeded pods",
                now,
            )
            status["completionTime"] = now
            finished = True

        if finished or suspended:
            for pod in active:
                if suspended:
                    self._release(pod)
                self.delete(POD, pod)
            active = []
        if suspended and not finished:
            set_condition(status, "Suspended", "True", "JobSuspended", "Job suspended", now)
            status.pop("startTime", None)
        elif not finished:
            if any(c.get("type") == "Suspended" and c.get("status") == "True" for c in status.get("conditions") or []):
                set_condition(status, "Suspended", "False", "JobResumed", "Job resumed", now)
            status.setdefault("startTime", now)
            active = self._create_missing(job, active, succeeded_idx, indexed, parallelism, completions, succeeded)

        status["active"] = len(active)
        status["ready"] = sum(1 for p in active if _ready(p))
        status["succeeded"] = succeeded
        status["failed"] = failed
        status["terminating"] = sum(1 for p in pods if p["metadata"].get("deletionTimestamp"))
        if indexed:
            status["completedIndexes"] = _ranges(succeeded_idx)
        self.write_status(JOB, job, status)

    def _create_missing(
        self,
        job: JSON,
        active: list[JSON],
        done: set[int],
        indexed: bool,
        parallelism: int,
        completions: int,
        succeeded: int,
    ) -> list[JSON]:
        if indexed:
            busy = {_index(p) for p in active}
            wanted = [i for i in range(completions) if i not in done and i not in busy]
        else:
            wanted = [-1] * max(0, min(parallelism, completions - succeeded) - len(active))
        for idx in wanted:
            if len(active) >= parallelism:
                break
            active.append(self._create_pod(job, idx))
        return active

    def _create_pod(self, job: JSON, index: int) -> JSON:
        name = job["metadata"]["name"]
        template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
        tmeta = template.get("metadata") or {}
        labels = dict(tmeta.get("labels") or {})
        annotations = dict(tmeta.get("annotations") or {})
        uid = job["metadata"]["uid"]
        labels.update(
            {
                "batch.kubernetes.io/controller-uid": uid,
                "batch.kubernetes.io/job-name": name,
                "controller-uid": uid,
                "job-name": name,
            }
        )
        spec = template.get("spec") or {}
        prefix = name
        if index >= 0:
            labels[INDEX_KEY] = str(index)
            annotations[INDEX_KEY] = str(index)
            spec["hostname"] = f"{name}-{index}"
            prefix = f"{name}-{index}"
            for c in spec.get("containers") or []:
                env = [e for e in c.get("env") or [] if e.get("name") != "JOB_COMPLETION_INDEX"]
                env.append(
                    {
                        "name": "JOB_COMPLETION_INDEX",
                        "valueFrom": {
                            "fieldRef": {
                                "apiVersion": "v1",
                                "fieldPath": f"metadata.annotations['{INDEX_KEY}']",
                            }
                        },
                    }
                )
                c["env"] = env
        spec.setdefault("restartPolicy", "Never")
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{prefix}-{self.store.random_suffix(prefix)}",
                "namespace": job["metadata"]["namespace"],
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": [owner_ref(job)],
                "finalizers": [TRACKING_FINALIZER],
            },
            "spec": spec,
        }
        created = self.create(POD, pod)
        status = {"phase": "Pending", "qosClass": _qos_class(spec)}
        return self.write_status(POD, created, status)
