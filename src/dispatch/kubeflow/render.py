"""Rendering: JobSpec + Image + RuntimeRef (+ SharedCheckpoint) -> a runtime copy and one TrainJob.

Pure functions of their inputs (no apiserver calls). What is written where is documented in
docs/adapters/kubeflow.md; the names live in :mod:`dispatch.kubeflow.names`.

* The named runtime is checked (:func:`check_runtime`): a trainer step that can restart a rank inside one
  execution without any counter moving (``restartPolicy`` other than ``Never``, or ``backoffLimit`` other
  than 0) is refused unless ``allowRankRestart``.
* The runtime is copied (:func:`runtime_copy`) into a namespaced TrainingRuntime named like the TrainJob, so a
  later edit of the shared runtime cannot change a submitted job; a SharedCheckpoint claim is mounted there, and
  the nodes the request excludes are kept off by a required node affinity (:func:`exclude_nodes`).
* The TrainJob (:func:`render_trainjob`) is created behind the start gate: Kueue's ``admission-gated-by``
  annotation (kueue mode) or ``spec.suspend: true`` (plain mode).
* The command runs under a ``/bin/sh`` prologue that sets ``DISPATCH_EXECUTION`` from the downward API, exports
  the rank environment (:mod:`dispatch.adapterkit.rankenv`) from what the runtime gives the pod (the torch
  runtime's ``PET_*``, else the Indexed Job's ``JOB_COMPLETION_INDEX``), sets the spec's umask (the submitter's,
  recorded by the ``Cluster``; without one the image's stays) and changes to the working directory; the user's argv
  is passed as positional parameters, never as shell text.
"""

from __future__ import annotations

import copy
import math
import os.path
import re
import shlex
from dataclasses import dataclass
from typing import Any

from dispatch.adapterkit.private import umask_line
from dispatch.adapterkit.rankenv import RankLayout, rank_prelude
from dispatch.errors import SpecError, Unsupported
from dispatch.extensions import CessationWarning, Image, SharedCheckpoint
from dispatch.kubeflow import names as n
from dispatch.kubeflow.extensions import RuntimeRef
from dispatch.kubeflow.settings import KubeflowSettings, Mode
from dispatch.spec import JobSpec
from dispatch.spi import StartRequest

JSON = dict[str, Any]

PROLOGUE = (
    'export DISPATCH_EXECUTION="$DISPATCH_JOB_ID.$DISPATCH_SUBMISSION.${DISPATCH_ATTEMPT:-0}'
    '.${DISPATCH_RESTART_A:-0}.${DISPATCH_RESTART_J:-0}"; '
    'if [ -n "$1" ]; then cd -- "$1" || exit 127; fi; shift; exec "$@"'
)
"""The prologue's last line. ``$1`` is the working directory (empty: stay), the rest is the user's argv."""
TORCH_MASTER_PORT = 29500
"""The rendezvous port the torch runtime gives (``PET_MASTER_PORT``: the Trainer's ``ContainerTrainerPort``, 29500 in
v2.3.0, as its pods on the real nodes show), used too where no runtime gives one."""

RESERVED_ENV_PREFIXES = ("DISPATCH_", "PET_")
_NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
"""A Kubernetes node name (a DNS subdomain)."""
CHECKPOINT_VOLUME = "dispatch-checkpoint"


@dataclass(frozen=True)
class RuntimeReport:
    """What :func:`check_runtime` learnt: the trainer step, its ML policy, and whether a rank may restart
    silently (the reason, or None)."""

    trainer_job: str
    ml_policy: str | None
    rank_restart: str | None


def trainer_step(runtime: JSON) -> JSON:
    """The runtime's trainer replicatedJob (labelled ancestor-step trainer, else the one named ``node``)."""
    jobs = (((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs") or []
    for rj in jobs:
        labels = ((rj.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if labels.get(n.ANCESTOR_STEP) == "trainer":
            return dict(rj)
    for rj in jobs:
        if rj.get("name") == n.TRAINER_CONTAINER:
            return dict(rj)
    raise Unsupported("the runtime has no trainer step (a replicatedJob labelled ancestor-step trainer or 'node')")


def check_runtime(runtime: JSON) -> RuntimeReport:
    """Inspect a runtime; raises Unsupported when it has no trainer step."""
    rj = trainer_step(runtime)
    job_spec = (rj.get("template") or {}).get("spec") or {}
    pod_spec = (job_spec.get("template") or {}).get("spec") or {}
    reasons = []
    policy = pod_spec.get("restartPolicy")
    if policy != "Never":
        reasons.append(f"restartPolicy is {policy or 'unset (JobSet defaults it to OnFailure)'}")
    backoff = job_spec.get("backoffLimit")
    if backoff != 0:
        reasons.append(f"backoffLimit is {backoff if backoff is not None else 'unset (Kubernetes defaults it to 6)'}")
    ml = (runtime.get("spec") or {}).get("mlPolicy") or {}
    kinds = [k for k in ("torch", "mpi", "jax", "xgboost", "flux") if k in ml]
    reason = None
    if reasons:
        reason = "the runtime can restart a rank inside an execution without a new identity: " + "; ".join(reasons)
    return RuntimeReport(str(rj.get("name")), kinds[0] if kinds else None, reason)


def runtime_copy(runtime: JSON, name: str, settings: KubeflowSettings, request: StartRequest) -> JSON:
    """A namespaced TrainingRuntime ``name``: the named runtime's spec, with the checkpoint volume mounted."""
    spec = copy.deepcopy(runtime.get("spec") or {})
    ckpt = request.spec.extension(SharedCheckpoint)
    if ckpt is not None and ckpt.claim is not None:
        trainer = trainer_step({"spec": spec})
        for rj in spec["template"]["spec"]["replicatedJobs"]:
            if rj.get("name") != trainer.get("name"):
                continue
            pod = rj.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {}).setdefault("spec", {})
            pod.setdefault("volumes", []).append(
                {"name": CHECKPOINT_VOLUME, "persistentVolumeClaim": {"claimName": ckpt.claim}}
            )
            for c in pod.setdefault("containers", []):
                if c.get("name") == n.TRAINER_CONTAINER:
                    c.setdefault("volumeMounts", []).append({"name": CHECKPOINT_VOLUME, "mountPath": ckpt.path})
    warning = request.spec.extension(CessationWarning)
    if warning is not None:
        # Kubernetes has one warning, SIGTERM, and kills terminationGracePeriodSeconds later: the warning's seconds
        trainer = trainer_step({"spec": spec})
        for rj in spec["template"]["spec"]["replicatedJobs"]:
            if rj.get("name") == trainer.get("name"):
                pod = rj.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})
                pod.setdefault("spec", {})["terminationGracePeriodSeconds"] = math.ceil(warning.seconds)
    if request.exclude:
        trainer = trainer_step({"spec": spec})
        for rj in spec["template"]["spec"]["replicatedJobs"]:
            if rj.get("name") == trainer.get("name"):
                pod = rj.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})
                exclude_nodes(pod.setdefault("spec", {}), request.exclude)
    ref = request.spec.extension(RuntimeRef)
    assert ref is not None
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {
            "name": name,
            "namespace": settings.namespace,
            "labels": {
                n.MANAGED: "true",
                n.MARKER: n.marker_label(request.marker),
                **{k: v for k, v in ((runtime.get("metadata") or {}).get("labels") or {}).items()},
            },
            "annotations": {n.RUNTIME_SOURCE: f"{ref.runtime_kind}/{ref.name}"},
        },
        "spec": spec,
    }


def exclude_nodes(pod_spec: JSON, nodes: tuple[str, ...]) -> None:
    """Keep the pods of ``pod_spec`` off ``nodes``: a required node affinity term ``metadata.name NotIn [node]``
    for each node (a field selector on the node's name, which every scheduler honours; the API server refuses a
    node field selector with more than one value, so one requirement per node). The runtime's own required terms
    are kept, each with the exclusions added (terms are ORed, a term's requirements ANDed); SpecError names a
    node that is not a Kubernetes node name."""
    for node in nodes:
        if not _NODE_NAME.match(node):
            raise SpecError("exclude", f"{node!r} is not a Kubernetes node name")
    matches = [{"key": "metadata.name", "operator": "NotIn", "values": [node]} for node in sorted(set(nodes))]
    affinity = pod_spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    for term in terms:
        term["matchFields"] = [*(term.get("matchFields") or []), *(dict(m) for m in matches)]
    required["nodeSelectorTerms"] = terms


def rank_lines(layout: RankLayout, trainjob: str, step: str) -> list[str]:
    """The shell lines that export the rank environment in the pod of one node (one process: torchrun, where
    it starts more, sets the per-process variables itself). The node's number and the rendezvous come from the
    torch runtime's ``PET_NODE_RANK``, ``PET_MASTER_ADDR``, ``PET_MASTER_PORT``; where a runtime sets none,
    from the Indexed Job's ``JOB_COMPLETION_INDEX`` and JobSet's name of the rank-0 pod
    (``<jobset>-<step>-0-0.<jobset>``) with :data:`TORCH_MASTER_PORT`. ``trainjob`` and ``step`` are object
    names (no user text); they are quoted all the same."""
    addr = shlex.quote(f"{trainjob}-{step}-0-0.{trainjob}")
    lines = [
        f'dispatch_addr=${{PET_MASTER_ADDR:-}}; [ -n "$dispatch_addr" ] || dispatch_addr={addr}',
        *rank_prelude(
            layout,
            rank=f'"$(( ${{PET_NODE_RANK:-${{JOB_COMPLETION_INDEX:-0}}}} * {layout.procs_per_node} ))"',
            local_rank="0",
            node_rank='"${PET_NODE_RANK:-${JOB_COMPLETION_INDEX:-0}}"',
            master_addr='"$dispatch_addr"',
            master_port=f'"${{PET_MASTER_PORT:-{TORCH_MASTER_PORT}}}"',
            node='"${DISPATCH_NODE:-}"',
        ),
    ]
    if layout.procs_per_node > 1:  # torchrun sets RANK and LOCAL_RANK in each process it starts
        lines.append("unset RANK LOCAL_RANK DISPATCH_RANK")
    return lines


def is_torchrun(argv: tuple[str, ...]) -> bool:
    """Whether ``argv`` starts torchrun (``torchrun ...`` or ``python -m torch.distributed.run ...``)."""
    if not argv:
        return False
    head = os.path.basename(argv[0])
    return head == "torchrun" or (head.startswith("python") and list(argv[1:3]) == ["-m", "torch.distributed.run"])


def _field_env(name: str, annotation: str) -> JSON:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{annotation}']"}}}


def dispatch_env(request: StartRequest) -> list[JSON]:
    """The environment dispatch adds: the static identity parts and the downward-API ones."""
    env: list[JSON] = [
        {"name": "DISPATCH_JOB_ID", "value": request.job_id},
        {"name": "DISPATCH_SUBMISSION", "value": str(request.submission)},
        _field_env("DISPATCH_ATTEMPT", n.ATTEMPT),
        _field_env("DISPATCH_RESTART_A", n.RESTART_ATTEMPT),
        _field_env("DISPATCH_RESTART_J", n.JOB_RESTART_ATTEMPT),
        {"name": "DISPATCH_NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
    ]
    ckpt = request.spec.extension(SharedCheckpoint)
    if ckpt is not None:
        env.append({"name": "DISPATCH_CHECKPOINT_DIR", "value": ckpt.path})
    warning = request.spec.extension(CessationWarning)
    if warning is not None:  # the signal is SIGTERM (dispatch.job always handles it): no DISPATCH_CESSATION_SIGNAL
        env.append({"name": "DISPATCH_CESSATION_GRACE", "value": str(math.ceil(warning.seconds))})
    return env


def render_trainjob(
    request: StartRequest, settings: KubeflowSettings, report: RuntimeReport, name: str, runtime_name: str
) -> JSON:
    """The TrainJob for ``request``, gated, pointing at the runtime copy ``runtime_name``."""
    spec = request.spec
    image = spec.extension(Image)
    if image is None:
        raise Unsupported("the kubeflow adapter requires the extension dispatch.Image")
    for key in spec.env:
        if key.startswith(RESERVED_ENV_PREFIXES):
            raise Unsupported(
                f"environment variable {key} is reserved on Kubeflow (DISPATCH_* and PET_* are set by it)"
            )
    if spec.procs_per_node > 1 and (report.ml_policy != "torch" or not is_torchrun(spec.command)):
        raise Unsupported(
            f"{spec.procs_per_node} processes per node: a Kubeflow pod runs one process, and only torchrun under a"
            " torch runtime starts more (the command must start with torchrun or python -m torch.distributed.run)"
        )
    ref = spec.extension(RuntimeRef)
    assert ref is not None
    umask = [] if spec.umask is None else [umask_line(spec.umask)]  # without one, the image's own
    script = "\n".join(
        [*rank_lines(RankLayout(spec.nodes, spec.procs_per_node), name, report.trainer_job), *umask, PROLOGUE]
    )
    trainer: JSON = {
        "image": image.ref,
        "command": ["/bin/sh", "-c", script, "dispatch-prologue", spec.working_dir or "", *spec.command],
        "numNodes": spec.nodes,
        "env": [{"name": k, "value": v} for k, v in sorted(spec.env.items())] + dispatch_env(request),
    }
    if report.ml_policy in ("torch", "mpi"):
        trainer["numProcPerNode"] = spec.procs_per_node
    per_node = resources_per_node(spec, settings)
    if per_node:
        trainer["resourcesPerNode"] = per_node
    annotations = {
        n.MARKER_FULL: request.marker,
        n.JOB_ID: request.job_id,
        n.SUBMISSION: str(request.submission),
        n.GATE: "closed",
        n.RUNTIME_SOURCE: f"{ref.runtime_kind}/{ref.name}",
    }
    if report.rank_restart is not None:
        annotations[n.RANK_RESTART] = "allowed"
    labels = {n.MANAGED: "true", n.MARKER: n.marker_label(request.marker)}
    if settings.mode is Mode.KUEUE:
        assert settings.local_queue is not None
        labels[n.QUEUE_LABEL] = settings.local_queue
        annotations[n.GATED_BY] = settings.gate_name
    body: JSON = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": settings.namespace, "labels": labels, "annotations": annotations},
        "spec": {
            "runtimeRef": {"name": runtime_name, "kind": "TrainingRuntime", "apiGroup": "trainer.kubeflow.org"},
            "trainer": trainer,
            "suspend": True,
        },
    }
    if spec.time_limit is not None:
        body["spec"]["activeDeadlineSeconds"] = max(1, math.ceil(spec.time_limit))
    placement = gpu_type_patch(spec, settings)
    if placement is not None:
        body["spec"]["runtimePatches"] = [placement]
    return body


def resources_per_node(spec: JobSpec, settings: KubeflowSettings) -> JSON:
    """The trainer's ``resourcesPerNode`` for the spec's ``resources`` (requests equal to limits): the GPUs as
    the ``gpuResource`` setting's extended resource, ``cpu`` = ranks per node x CPUs per process, ``memory`` in
    ``Mi``. Unsupported for exclusive nodes, which a pod cannot ask for."""
    res = spec.resources
    if res.exclusive:
        raise Unsupported("a Kubernetes pod cannot ask for a node of its own: drop resources.exclusive")
    amounts: dict[str, str] = {}
    if res.gpus_per_node:
        amounts[settings.gpu_resource] = str(res.gpus_per_node)
    if res.cpus_per_proc is not None:
        amounts["cpu"] = str(res.cpus_per_proc * spec.procs_per_node)
    if res.mem_per_node is not None:
        amounts["memory"] = f"{res.mem_per_node}Mi"
    return {"limits": amounts, "requests": dict(amounts)} if amounts else {}


def gpu_type_patch(spec: JobSpec, settings: KubeflowSettings) -> JSON | None:
    """The runtime patch (manager :data:`~dispatch.kubeflow.names.RESOURCES_PATCH_MANAGER`) that places the
    trainer pods on nodes whose ``gpuTypeLabel`` is the asked GPU type; None when no type is asked."""
    kind = spec.resources.gpu_type
    if kind is None:
        return None
    if settings.gpu_type_label is None:
        raise Unsupported(
            f"resources.gpuType {kind!r} needs the node label that carries the GPU type: set the kubeflow setting"
            " gpuTypeLabel (for example nvidia.com/gpu.product)"
        )
    pod = {"spec": {"nodeSelector": {settings.gpu_type_label: kind}}}
    job = {"name": n.TRAINER_CONTAINER, "template": {"spec": {"template": pod}}}
    return {
        "manager": n.RESOURCES_PATCH_MANAGER,
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [job]}}},
    }


def attempt_patch(attempt: int) -> JSON:
    """The runtimePatch (plain mode) that puts ``attempt`` on the trainer pods' annotations."""
    return {
        "manager": n.PATCH_MANAGER,
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": n.TRAINER_CONTAINER,
                            "template": {
                                "spec": {"template": {"metadata": {"annotations": {n.ATTEMPT: str(attempt)}}}}
                            },
                        }
                    ]
                }
            }
        },
    }
