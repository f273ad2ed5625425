"""The Kubeflow Trainer v2.3 TrainJob controller, reduced to the JobSet plugin path.

For each TrainJob it resolves ``spec.runtimeRef`` (kind ClusterTrainingRuntime by default, or a
TrainingRuntime in the TrainJob's namespace), writes the runtime snapshot ConfigMap
``<name>-runtime-snapshot`` (data key ``runtime``, YAML, owned by the TrainJob) once, and from the
snapshot builds the JobSet ``<name>`` (owned by the TrainJob):
- JobSet metadata labels/annotations = the runtime template's ``metadata`` plus runtimePatches';
- ``spec.runtimePatches`` are merged in order (lists of named items merge by ``name``);
- the trainer step (replicatedJob labelled ``trainer.kubeflow.org/trainjob-ancestor-step: trainer``,
  else the one named ``node``) gets ``replicas: 1`` and ``parallelism = completions = numNodes``
  (``spec.trainer.numNodes``, else the runtime's ``mlPolicy.numNodes``, else 1); its container
  ``node`` gets ``image``, ``command``, ``args``, ``env`` (merged by name) and ``resourcesPerNode``;
  with a torch mlPolicy the ``PET_*`` variables are added as Trainer does;
- ``spec.suspend`` is copied to the JobSet; while the TrainJob is suspended (and when it resumes)
  the JobSet spec is rebuilt, so runtimePatches changed while suspended reach the new pods.
Status: ``Suspended`` (True ``Suspended`` "TrainJob is suspended" / False ``Resumed`` "TrainJob is
resumed"), ``Complete`` and ``Failed`` copied from the JobSet's ``Completed``/``Failed`` (reason and
message), ``jobsStatus`` copied from ``replicatedJobsStatus``; ``activeDeadlineSeconds`` (counted
from creation or the last resume on the injected clock) fails the TrainJob with ``DeadlineExceeded``
"TrainJob exceeded its active deadline" and deletes the JobSet.
Not modelled: initializer steps, other runtimes' plugins (MPI launcher, JAX, volcano/coscheduling
PodGroups), the Trainer webhook's checks of a runtime's contents, managedBy. Modelled admission: the
Trainer webhook refuses (403) a TrainJob, on create and on update, whose ``runtimeRef`` names a kind it
does not know or a runtime that does not exist ("specified trainingRuntime must be created before the
TrainJob is created"; on a real cluster Kueue v0.19's webhook may answer first, in its own words, which
are not modelled). Modelled update rules: ``runtimeRef``, ``trainer``, ``initializer``,
``activeDeadlineSeconds``, ``managedBy`` are immutable (422 Invalid, "field is immutable"), and
``runtimePatches`` may only change when the TrainJob is suspended before or after the update
(403 from the webhook).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import yaml

from ..clock import parse_time
from ..errors import StatusError, invalid
from ..resources import CLUSTER_TRAINING_RUNTIME, CONFIGMAP, JOBSET, TRAINING_RUNTIME, TRAINJOB, ResourceType
from .base import Reactor, find_condition, is_true, owner_ref, set_condition

JSON = dict[str, Any]

ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_CONTAINER = "node"
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"


def merge_named(base: Any, patch: Any) -> Any:
    """Merge dicts recursively; lists whose items all have ``name`` merge by name; else replace."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = copy.deepcopy(base)
        for key, value in patch.items():
            out[key] = merge_named(out.get(key), value)
        return out
    if (
        isinstance(base, list)
        and isinstance(patch, list)
        and all(isinstance(i, dict) and "name" in i for i in base + patch)
    ):
        merged = copy.deepcopy(base)
        for item in patch:
            for i, existing in enumerate(merged):
                if existing["name"] == item["name"]:
                    merged[i] = merge_named(existing, item)
                    break
            else:
                merged.append(copy.deepcopy(item))
        return merged
    return copy.deepcopy(patch)


def _trainer_step(replicated: list[JSON]) -> JSON | None:
    for rj in replicated:
        labels = ((rj.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if labels.get(ANCESTOR_LABEL) == "trainer":
            return rj
    for rj in replicated:
        if rj.get("name") == "node":
            return rj
    return None


def build_jobset(trainjob: JSON, runtime: JSON) -> JSON:
    """The JobSet Trainer would create for ``trainjob`` from ``runtime`` (no owner, no status)."""
    rspec = runtime.get("spec") or {}
    template = copy.deepcopy(rspec.get("template") or {})
    tspec = trainjob.get("spec") or {}
    for rp in tspec.get("runtimePatches") or []:
        template = merge_named(template, ((rp.get("trainingRuntimeSpec") or {}).get("template")) or {})
    js_spec: JSON = copy.deepcopy(template.get("spec") or {})
    name = trainjob["metadata"]["name"]
    trainer = tspec.get("trainer") or {}
    ml = rspec.get("mlPolicy") or {}
    num_nodes = int(trainer.get("numNodes") or ml.get("numNodes") or 1)
    step = _trainer_step(js_spec.get("replicatedJobs") or [])
    if step is not None:
        step["replicas"] = 1
        job_spec = step.setdefault("template", {}).setdefault("spec", {})
        job_spec["parallelism"] = num_nodes
        job_spec["completions"] = num_nodes
        pod_spec = job_spec.setdefault("template", {}).setdefault("spec", {})
        for c in pod_spec.get("containers") or []:
            if c.get("name") != TRAINER_CONTAINER:
                continue
            for key in ("image", "command", "args"):
                if trainer.get(key) is not None:
                    c[key] = copy.deepcopy(trainer[key])
            if trainer.get("resourcesPerNode") is not None:
                c["resources"] = copy.deepcopy(trainer["resourcesPerNode"])
            env = merge_named(c.get("env") or [], copy.deepcopy(trainer.get("env") or []))
            if "torch" in ml:
                procs = str(trainer.get("numProcPerNode") or (ml.get("torch") or {}).get("numProcPerNode") or "auto")
                env = merge_named(
                    env,
                    [
                        {"name": "PET_NNODES", "value": str(num_nodes)},
                        {"name": "PET_NPROC_PER_NODE", "value": procs},
                        {
                            "name": "PET_NODE_RANK",
                            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_ANNOTATION}']"}},
                        },
                        {"name": "PET_MASTER_ADDR", "value": f"{name}-{step['name']}-0-0.{name}"},
                        {"name": "PET_MASTER_PORT", "value": "29500"},
                    ],
                )
            if env:
                c["env"] = env
    js_spec["suspend"] = bool(tspec.get("suspend", False))
    tmeta = template.get("metadata") or {}
    return {
        "apiVersion": JOBSET.api_version,
        "kind": JOBSET.kind,
        "metadata": {
            "name": name,
            "namespace": trainjob["metadata"]["namespace"],
            "labels": dict(tmeta.get("labels") or {}),
            "annotations": dict(tmeta.get("annotations") or {}),
        },
        "spec": js_spec,
    }


WEBHOOK_DENIED = 'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: '


def runtime_missing(kind: str, name: str) -> str:
    """The webhook's refusal of a TrainJob whose runtime (``kind`` TrainingRuntime or ClusterTrainingRuntime) it
    does not find, as Trainer 2.3.0 prints it (seen on the control plane): the defaulted ref as JSON."""
    spelled = "trainingRuntime" if kind == "TrainingRuntime" else "clusterTrainingRuntime"
    value = json.dumps({"name": name, "apiGroup": "trainer.kubeflow.org", "kind": kind}, separators=(",", ":"))
    return (
        f"{WEBHOOK_DENIED}spec.runtimeRef: Invalid value: {value}: "
        f'{kind}.trainer.kubeflow.org "{name}" not found: '
        f"specified {spelled} must be created before the TrainJob is created"
    )


IMMUTABLE_FIELDS = ("runtimeRef", "trainer", "initializer", "activeDeadlineSeconds", "managedBy")


class TrainerReactor(Reactor):
    manager = "trainer-controller"

    def admit(self, rt: ResourceType, obj: JSON, old: JSON | None) -> None:
        """TrainJob rules: the runtime it names must exist (webhook → 403, on create and update); on update,
        immutable fields (CRD validation → 422) and runtimePatches that may only change while the TrainJob is
        suspended before or after (webhook → 403)."""
        if rt.kind != "TrainJob":
            return
        if old is None:
            self._runtime_exists(obj)
            return
        new_spec, old_spec = obj.get("spec") or {}, old.get("spec") or {}
        name = obj["metadata"].get("name", "")
        causes = [
            {"reason": "FieldValueInvalid", "message": "field is immutable", "field": f"spec.{f}"}
            for f in IMMUTABLE_FIELDS
            if new_spec.get(f) != old_spec.get(f)
        ]
        if causes:
            raise invalid(rt, name, causes)
        if new_spec.get("runtimePatches") != old_spec.get("runtimePatches") and not (
            old_spec.get("suspend") or new_spec.get("suspend")
        ):
            raise StatusError(
                403,
                f"{WEBHOOK_DENIED}spec.runtimePatches: Forbidden: runtimePatches can only be modified "
                "when the TrainJob is suspended",
                "Forbidden",
            )
        self._runtime_exists(obj)

    def _runtime_exists(self, trainjob: JSON) -> None:
        """The Trainer webhook's first check: the runtime registry knows the kind, and the runtime exists."""
        ref = (trainjob.get("spec") or {}).get("runtimeRef") or {}
        group, kind = ref.get("apiGroup", "trainer.kubeflow.org"), ref.get("kind", "ClusterTrainingRuntime")
        if group != "trainer.kubeflow.org" or kind not in ("TrainingRuntime", "ClusterTrainingRuntime"):
            raise StatusError(403, f"{WEBHOOK_DENIED}unsupported runtime: {kind}.{group}", "Forbidden")
        if self.runtime_for(trainjob) is not None:
            return
        raise StatusError(403, runtime_missing(kind, ref.get("name", "")), "Forbidden")

    def runtime_for(self, trainjob: JSON) -> JSON | None:
        ref = (trainjob.get("spec") or {}).get("runtimeRef") or {}
        if ref.get("apiGroup", "trainer.kubeflow.org") != "trainer.kubeflow.org":
            return None
        if ref.get("kind", "ClusterTrainingRuntime") == "TrainingRuntime":
            return self.store.try_get(TRAINING_RUNTIME, trainjob["metadata"]["namespace"], ref.get("name", ""))
        return self.store.try_get(CLUSTER_TRAINING_RUNTIME, "", ref.get("name", ""))

    def snapshot(self, trainjob: JSON) -> JSON | None:
        """The runtime as snapshotted for this TrainJob (creating the snapshot if needed)."""
        ns, name = trainjob["metadata"]["namespace"], trainjob["metadata"]["name"]
        cm = self.store.try_get(CONFIGMAP, ns, f"{name}-runtime-snapshot")
        if cm is not None:
            loaded = yaml.safe_load((cm.get("data") or {}).get("runtime") or "{}")
            return loaded if isinstance(loaded, dict) else None
        runtime = self.runtime_for(trainjob)
        if runtime is None:
            return None
        clean = {
            "apiVersion": runtime["apiVersion"],
            "kind": runtime["kind"],
            "metadata": {
                k: runtime["metadata"][k]
                for k in ("name", "namespace", "labels", "annotations")
                if k in runtime["metadata"]
            },
            "spec": runtime.get("spec") or {},
        }
        self.create(
            CONFIGMAP,
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": f"{name}-runtime-snapshot",
                    "namespace": ns,
                    "ownerReferences": [owner_ref(trainjob)],
                },
                "data": {"runtime": yaml.safe_dump(clean, sort_keys=False)},
            },
        )
        return clean

    def reconcile(self) -> None:
        trainjobs, _ = self.store.list(TRAINJOB)
        for tj in trainjobs:
            if tj["metadata"].get("deletionTimestamp"):
                continue
            self._reconcile(tj)

    def _reconcile(self, tj: JSON) -> None:
        now = self.now()
        status = copy.deepcopy(tj.get("status") or {})
        ns, name = tj["metadata"]["namespace"], tj["metadata"]["name"]
        suspended = bool((tj.get("spec") or {}).get("suspend", False))
        finished = is_true(tj, "Complete") or is_true(tj, "Failed")
        jobset = self.store.try_get(JOBSET, ns, name)
        if not finished:
            runtime = self.snapshot(tj)
            if runtime is not None:
                desired = build_jobset(tj, runtime)
                if jobset is None:
                    desired["metadata"]["ownerReferences"] = [owner_ref(tj)]
                    jobset = self.create(JOBSET, desired)
                else:
                    was_suspended = bool((jobset.get("spec") or {}).get("suspend"))
                    if was_suspended or suspended:

                        def rebuild(cur: JSON, desired: JSON = desired) -> None:
                            cur["spec"] = desired["spec"]
                            cur["metadata"]["labels"] = {
                                **(cur["metadata"].get("labels") or {}),
                                **desired["metadata"]["labels"],
                            }

                        jobset = self.edit(JOBSET, jobset, rebuild) or jobset
            if suspended:
                set_condition(status, "Suspended", "True", "Suspended", "TrainJob is suspended", now)
            elif is_true(tj, "Suspended"):
                set_condition(status, "Suspended", "False", "Resumed", "TrainJob is resumed", now)
            deadline = (tj.get("spec") or {}).get("activeDeadlineSeconds")
            if deadline is not None and not suspended:
                resumed = find_condition(tj, "Suspended")
                start = (
                    parse_time(resumed["lastTransitionTime"])
                    if resumed and resumed.get("status") == "False"
                    else self.store.created_at(tj)
                )
                elapsed = (self.store.clock.now() - start).total_seconds()
                if elapsed >= float(deadline):
                    set_condition(
                        status,
                        "Failed",
                        "True",
                        "DeadlineExceeded",
                        "TrainJob exceeded its active deadline",
                        now,
                    )
                    if jobset is not None:
                        self.delete(JOBSET, jobset)
                        jobset = None
        if jobset is not None:
            js_status = jobset.get("status") or {}
            for js_type, tj_type in (("Completed", "Complete"), ("Failed", "Failed")):
                cond = find_condition(jobset, js_type)
                if cond is not None and cond.get("status") == "True" and not is_true(tj, tj_type):
                    # Trainer copies the JobSet's condition, transition time included
                    copied = dict(cond, type=tj_type)
                    copied.pop("observedGeneration", None)
                    status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != tj_type] + [
                        copied
                    ]
            status["jobsStatus"] = [
                {k: rj.get(k, 0) for k in ("ready", "succeeded", "failed", "active", "suspended")}
                | {"name": rj["name"]}
                for rj in js_status.get("replicatedJobsStatus") or []
            ]
        self.write_status(TRAINJOB, tj, status)
