"""The JobSet v0.12 controller, reduced to what Trainer's JobSets exercise.

Modelled: Jobs ``<jobset>-<replicatedJob>-<index>`` per replicatedJob replica, with labels and
annotations ``jobset.sigs.k8s.io/jobset-name``, ``jobset-uid``, ``job-key`` (sha1 of
``<namespace>/<job name>``), ``global-replicas``, ``replicatedjob-name``, ``replicatedjob-replicas``,
``job-index``, ``job-global-index``, ``restart-attempt`` on the Job and its pod template; pod
``subdomain`` = the JobSet name; ``spec.suspend`` propagated to the Jobs (on resume the Jobs' pod
template labels, annotations, nodeSelector and tolerations are refreshed from the JobSet, as
JobSet does for Kueue); ``failurePolicy`` (``maxRestarts``, rules by ``onJobFailureReasons`` and
``targetReplicatedJobs``, actions ``FailJobSet``, ``RestartJobSet``,
``RestartJobSetAndIgnoreMaxRestarts``; no matching rule = RestartJobSet); a restart (strategy
Recreate) deletes every Job of the attempt and creates them again with ``restart-attempt`` + 1;
status ``restarts``, ``restartsCountTowardsMax``, ``terminalState``, ``replicatedJobsStatus``.
Conditions: ``Completed`` (``AllJobsCompleted``), ``Failed`` (``FailedJobs``, ``ReachedMaxRestarts``,
``FailJobSetFailurePolicyAction``; messages end with "(first failed job: <job>)"), ``Suspended``
(``SuspendedJobs``/``ResumeJobs``), ``RestartingJobSet`` (True while a restart's Jobs are not all
ready; False reason ``JobsReady`` after).
Not modelled: successPolicy other than "all Jobs complete", startupPolicy, coordinator,
exclusive placement, RestartJob actions, BlockingRecreate/InPlaceRestart, ttlSecondsAfterFinished,
headless Service creation, managedBy.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from ..resources import JOB, JOBSET
from .base import Reactor, find_condition, is_true, owner_ref, set_condition

JSON = dict[str, Any]

P = "jobset.sigs.k8s.io/"
JOBSET_NAME = P + "jobset-name"
JOBSET_UID = P + "jobset-uid"
JOB_KEY = P + "job-key"
GLOBAL_REPLICAS = P + "global-replicas"
REPLICATED_JOB_NAME = P + "replicatedjob-name"
REPLICATED_JOB_REPLICAS = P + "replicatedjob-replicas"
JOB_INDEX = P + "job-index"
JOB_GLOBAL_INDEX = P + "job-global-index"
RESTART_ATTEMPT = P + "restart-attempt"


def job_failure_reason(job: JSON) -> str | None:
    cond = find_condition(job, "Failed")
    if cond is not None and cond.get("status") == "True":
        return str(cond.get("reason", ""))
    return None


class JobSetReactor(Reactor):
    manager = "jobset-controller"

    def reconcile(self) -> None:
        jobsets, _ = self.store.list(JOBSET)
        for js in jobsets:
            if js["metadata"].get("deletionTimestamp"):
                continue
            self._reconcile(js)

    def _labels(self, js: JSON, rj: JSON, idx: int, global_idx: int, attempt: int) -> dict[str, str]:
        job_name = f"{js['metadata']['name']}-{rj['name']}-{idx}"
        total = sum(int(r.get("replicas", 1)) for r in (js.get("spec") or {}).get("replicatedJobs") or [])
        return {
            JOBSET_NAME: js["metadata"]["name"],
            JOBSET_UID: js["metadata"]["uid"],
            JOB_KEY: hashlib.sha1(f"{js['metadata']['namespace']}/{job_name}".encode()).hexdigest(),
            GLOBAL_REPLICAS: str(total),
            REPLICATED_JOB_NAME: rj["name"],
            REPLICATED_JOB_REPLICAS: str(rj.get("replicas", 1)),
            JOB_INDEX: str(idx),
            JOB_GLOBAL_INDEX: str(global_idx),
            RESTART_ATTEMPT: str(attempt),
        }

    def _desired_jobs(self, js: JSON, attempt: int) -> list[tuple[JSON, str, dict[str, str]]]:
        out = []
        global_idx = 0
        for rj in (js.get("spec") or {}).get("replicatedJobs") or []:
            for idx in range(int(rj.get("replicas", 1))):
                out.append(
                    (
                        rj,
                        f"{js['metadata']['name']}-{rj['name']}-{idx}",
                        self._labels(js, rj, idx, global_idx, attempt),
                    )
                )
                global_idx += 1
        return out

    def _pod_template(self, js: JSON, rj: JSON, keys: dict[str, str]) -> JSON:
        template = copy.deepcopy(((rj.get("template") or {}).get("spec") or {}).get("template") or {})
        tmeta = template.setdefault("metadata", {})
        tmeta["labels"] = {**(tmeta.get("labels") or {}), **keys}
        tmeta["annotations"] = {**(tmeta.get("annotations") or {}), **keys}
        network = (js.get("spec") or {}).get("network") or {}
        if network.get("enableDNSHostnames", True):
            template.setdefault("spec", {})["subdomain"] = network.get("subdomain") or js["metadata"]["name"]
        return template

    def _reconcile(self, js: JSON) -> None:
        now = self.now()
        spec = js.get("spec") or {}
        status = copy.deepcopy(js.get("status") or {})
        attempt = int(status.get("restarts", 0))
        suspended = bool(spec.get("suspend"))
        terminal = bool(status.get("terminalState"))
        jobs = self.owned(JOB, js)
        # Recreate: Jobs of an older attempt go first
        current: dict[str, JSON] = {}
        for job in jobs:
            job_attempt = int((job["metadata"].get("labels") or {}).get(RESTART_ATTEMPT, "0"))
            if job_attempt < attempt:
                self.delete(JOB, job)
            else:
                current[job["metadata"]["name"]] = job
        desired = self._desired_jobs(js, attempt)
        if not terminal:
            for rj, name, keys in desired:
                existing = current.get(name)
                if existing is None:
                    rj_meta = (rj.get("template") or {}).get("metadata") or {}
                    job_spec = copy.deepcopy(((rj.get("template") or {}).get("spec")) or {})
                    job_spec["template"] = self._pod_template(js, rj, keys)
                    job_spec["suspend"] = suspended
                    job_spec.setdefault("completionMode", "Indexed")
                    body = {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "metadata": {
                            "name": name,
                            "namespace": js["metadata"]["namespace"],
                            "labels": {**(rj_meta.get("labels") or {}), **keys},
                            "annotations": {**(rj_meta.get("annotations") or {}), **keys},
                            "ownerReferences": [owner_ref(js)],
                        },
                        "spec": job_spec,
                    }
                    current[name] = self.create(JOB, body)
                elif bool((existing.get("spec") or {}).get("suspend")) != suspended:
                    template = self._pod_template(js, rj, keys)

                    def sync(cur: JSON, template: JSON = template) -> None:
                        cur["spec"]["suspend"] = suspended
                        if not suspended:  # resume: refresh what Kueue may have injected
                            pod_meta = cur["spec"]["template"].setdefault("metadata", {})
                            pod_meta["labels"] = template["metadata"].get("labels") or {}
                            pod_meta["annotations"] = template["metadata"].get("annotations") or {}
                            pod_spec = cur["spec"]["template"].setdefault("spec", {})
                            for key in ("nodeSelector", "tolerations"):
                                if key in template.get("spec", {}):
                                    pod_spec[key] = template["spec"][key]
                                else:
                                    pod_spec.pop(key, None)

                    current[name] = self.edit(JOB, existing, sync) or existing

        rj_status = self._replicated_status(js, list(current.values()))
        status["replicatedJobsStatus"] = rj_status
        status.setdefault("restarts", attempt)
        status.setdefault("restartsCountTowardsMax", int(status.get("restartsCountTowardsMax", 0)))

        if not terminal:
            if suspended:
                set_condition(status, "Suspended", "True", "SuspendedJobs", "jobset is suspended", now)
            elif is_true(js, "Suspended"):
                set_condition(status, "Suspended", "False", "ResumeJobs", "jobset is resumed", now)
            failed_jobs = sorted(
                (j for j in current.values() if job_failure_reason(j) is not None),
                key=lambda j: j["metadata"]["name"],
            )
            wanted = {name for _, name, _ in desired}
            if failed_jobs:
                self._on_failure(js, status, failed_jobs[0], now)
            elif (
                wanted
                and all(is_true(j, "Complete") for n, j in current.items() if n in wanted)
                and wanted <= set(current)
            ):
                set_condition(status, "Completed", "True", "AllJobsCompleted", "jobset completed successfully", now)
                status["terminalState"] = "Completed"
            elif (
                is_true(js, "RestartingJobSet")
                and wanted <= set(current)
                and all(
                    int((j.get("status") or {}).get("ready", 0)) + int((j.get("status") or {}).get("succeeded", 0))
                    >= int((j.get("spec") or {}).get("parallelism", 1))
                    for n, j in current.items()
                    if n in wanted
                )
            ):
                set_condition(status, "RestartingJobSet", "False", "JobsReady", "all jobs are ready", now)
        self.write_status(JOBSET, js, status)

    def _on_failure(self, js: JSON, status: JSON, failed_job: JSON, now: str) -> None:
        policy = (js.get("spec") or {}).get("failurePolicy")
        job_name = failed_job["metadata"]["name"]
        suffix = f" (first failed job: {job_name})"
        if policy is None:
            self._fail(status, "FailedJobs", "jobset failed due to one or more job failures" + suffix, now)
            return
        reason = job_failure_reason(failed_job) or ""
        rj_name = (failed_job["metadata"].get("labels") or {}).get(REPLICATED_JOB_NAME, "")
        action, rule_name = "RestartJobSet", ""
        for i, rule in enumerate(policy.get("rules") or []):
            reasons = rule.get("onJobFailureReasons") or []
            targets = rule.get("targetReplicatedJobs") or []
            if (not reasons or reason in reasons) and (not targets or rj_name in targets):
                action, rule_name = (
                    str(rule.get("action", "RestartJobSet")),
                    str(rule.get("name", f"rule{i}")),
                )
                break
        if action == "FailJobSet":
            self._fail(
                status,
                "FailJobSetFailurePolicyAction",
                "applying FailJobSet failure policy action" + suffix,
                now,
            )
            return
        counts = action != "RestartJobSetAndIgnoreMaxRestarts"
        if counts and int(status.get("restartsCountTowardsMax", 0)) >= int(policy.get("maxRestarts", 0)):
            self._fail(
                status,
                "ReachedMaxRestarts",
                "jobset failed due to reaching max number of restarts" + suffix,
                now,
            )
            return
        status["restarts"] = int(status.get("restarts", 0)) + 1
        if counts:
            status["restartsCountTowardsMax"] = int(status.get("restartsCountTowardsMax", 0)) + 1
        restart_reason = f"FailurePolicy_{rule_name}" if rule_name else "DefaultFailurePolicy"
        set_condition(
            status,
            "RestartingJobSet",
            "True",
            restart_reason,
            f"restarting jobset, attempt {status['restarts']}" + suffix,
            now,
        )

    def _fail(self, status: JSON, reason: str, message: str, now: str) -> None:
        set_condition(status, "Failed", "True", reason, message, now)
        status["terminalState"] = "Failed"

    def _replicated_status(self, js: JSON, jobs: list[JSON]) -> list[JSON]:
        out = []
        for rj in (js.get("spec") or {}).get("replicatedJobs") or []:
            mine = [j for j in jobs if (j["metadata"].get("labels") or {}).get(REPLICATED_JOB_NAME) == rj["name"]]
            entry = {"name": rj["name"], "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
            for j in mine:
                st = j.get("status") or {}
                parallelism = int((j.get("spec") or {}).get("parallelism", 1))
                if is_true(j, "Complete"):
                    entry["succeeded"] += 1
                elif is_true(j, "Failed"):
                    entry["failed"] += 1
                elif (j.get("spec") or {}).get("suspend"):
                    entry["suspended"] += 1
                else:
                    if int(st.get("active", 0)) > 0:
                        entry["active"] += 1
                    if int(st.get("ready", 0)) + int(st.get("succeeded", 0)) >= parallelism:
                        entry["ready"] += 1
            out.append(entry)
        return out
