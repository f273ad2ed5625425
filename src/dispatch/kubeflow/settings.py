"""The Kubeflow adapter's settings, decoded strictly by :func:`dispatch.settings.decode`.

Keys (camelCase)::

    kubeconfig: {path, context}     # how to reach the apiserver (default: $KUBECONFIG or ~/.kube/config)
    inCluster: false                # use the pod's service account instead
    token: null                     # optional bearer token (never logged, never echoed in errors or repr)
    namespace: default              # where TrainJobs are created and watched
    mode: plain | kueue
    localQueue: null                # required in kueue mode (value of kueue.x-k8s.io/queue-name)
    gateName: dispatch.io/start     # our entry in kueue.x-k8s.io/admission-gated-by
    admissionCheckController: dispatch.io/admission   # controllerName dispatch-admission serves
    nodeLossWindow: 5m
    timeouts: {apiserverRequest: 60s}   # CallBound = apiserverRequest + 5 s
    allowRankRestart: false
    preflight: {probe: true, probeWatch: 10s}
    supervised: false               # a dispatch supervisor runs for this cluster (OutputRetained: yes)
    trainerStatus: false            # the Trainer runs its status server (TrainJobStatus gate): ProgressReporting yes
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from dispatch.errors import ConfigError
from dispatch.settings import schema as _schema

_GATE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_RESOURCE_NAME = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
"""A resource name or label key: an optional DNS subdomain prefix and a name (``nvidia.com/gpu``)."""

CALL_BOUND_MARGIN = 5.0
"""Seconds added to ``timeouts.apiserverRequest`` to make the CallBound."""


class Mode(StrEnum):
    PLAIN = "plain"
    """Trainer and JobSet only: the start gate and holds are the TrainJob's ``spec.suspend``."""
    KUEUE = "kueue"
    """Kueue: the start gate is ``admission-gated-by``, holds deactivate the Workload, readmission is
    gated by the AdmissionCheck served by dispatch-admission."""


@dataclass(frozen=True)
class Kubeconfig:
    """A kubeconfig file and the context to use in it (None: the file's current context)."""

    path: str | None = field(default=None, metadata={"doc": "kubeconfig path (default $KUBECONFIG, ~/.kube/config)"})
    context: str | None = field(default=None, metadata={"doc": "context name (default: current-context)"})


@dataclass(frozen=True)
class Timeouts:
    """Deadlines of API calls (the CallBound is ``apiserverRequest`` + 5 s)."""

    api_server_request: float = field(
        default=60.0, metadata={"duration": True, "key": "apiserverRequest", "doc": "per-request timeout"}
    )

    def __post_init__(self) -> None:
        if self.api_server_request <= 0:
            raise ConfigError("apiserverRequest", "must be a positive duration")


@dataclass(frozen=True)
class Preflight:
    """The probes run when the cluster is opened."""

    probe: bool = field(default=True, metadata={"doc": "create a probe TrainJob on a writable open"})
    probe_watch: float = field(default=10.0, metadata={"duration": True, "doc": "how long the probe is watched"})


@dataclass(frozen=True)
class KubeflowSettings:
    """Settings of the Kubeflow adapter."""

    kubeconfig: Kubeconfig = field(default_factory=Kubeconfig, metadata={"doc": "how to reach the API server"})
    in_cluster: bool = field(default=False, metadata={"doc": "use the pod's service account instead of a kubeconfig"})
    token: str | None = field(default=None, repr=False, metadata={"doc": "bearer token (never logged)", "secret": True})
    namespace: str = field(default="default", metadata={"doc": "where TrainJobs are created and watched"})
    mode: Mode = field(default=Mode.PLAIN, metadata={"doc": "plain (Trainer and JobSet) or kueue (admission)"})
    local_queue: str | None = field(
        default=None, metadata={"doc": "Kueue LocalQueue of the jobs (required in kueue mode)"}
    )
    gate_name: str = field(
        default="dispatch.io/start", metadata={"doc": "dispatch's entry in kueue.x-k8s.io/admission-gated-by"}
    )
    admission_check_controller: str = field(
        default="dispatch.io/admission", metadata={"doc": "controllerName that dispatch-admission serves"}
    )
    node_loss_window: float = field(
        default=300.0, metadata={"duration": True, "doc": "how long a lost node may take to be noticed"}
    )
    timeouts: Timeouts = field(default_factory=Timeouts, metadata={"doc": "deadlines of API calls"})
    allow_rank_restart: bool = field(
        default=False, metadata={"doc": "accept runtimes that restart a rank inside an execution"}
    )
    preflight: Preflight = field(default_factory=Preflight, metadata={"doc": "the probes run on open"})
    gpu_resource: str = field(
        default="nvidia.com/gpu",
        metadata={"doc": "the extended resource a node's GPUs are counted in (resources.gpusPerNode asks for it)"},
    )
    gpu_type_label: str | None = field(
        default=None,
        metadata={
            "doc": "the node label whose value is the GPU type (nvidia.com/gpu.product under NVIDIA's GPU feature "
            "discovery); resources.gpuType places the pods on nodes with that value; unset: a typed request is refused"
        },
    )
    supervised: bool = field(
        default=False,
        metadata={
            "doc": "a dispatch supervisor runs for this cluster: it archives rank 0's log of each execution "
            "(OutputRetained is then yes)"
        },
    )
    trainer_status: bool = field(
        default=False,
        metadata={
            "doc": "the cluster's Trainer runs its status server (feature gate TrainJobStatus): rank 0's "
            "dispatch.job.progress reaches the TrainJob's status.trainerStatus (ProgressReporting is then yes)"
        },
    )

    def __post_init__(self) -> None:
        if not _DNS_LABEL.match(self.namespace):
            raise ConfigError("namespace", f"{self.namespace!r} is not a Kubernetes namespace name")
        if self.in_cluster and (self.kubeconfig.path or self.kubeconfig.context):
            raise ConfigError("inCluster", "choose inCluster or a kubeconfig, not both")
        if self.token is not None and (not self.token or any(c.isspace() for c in self.token)):
            raise ConfigError("token", "must be a non-empty token without white space")
        if len(self.gate_name) > 63 or not _GATE.match(self.gate_name):
            raise ConfigError("gateName", "must be a domain-prefixed path of at most 63 characters (dispatch.io/start)")
        if not self.admission_check_controller or len(self.admission_check_controller) > 253:
            raise ConfigError("admissionCheckController", "must be 1 to 253 characters")
        if self.mode is Mode.KUEUE and self.local_queue is None:
            raise ConfigError("localQueue", "is required in kueue mode")
        if self.local_queue is not None and not _DNS_SUBDOMAIN.match(self.local_queue):
            raise ConfigError("localQueue", f"{self.local_queue!r} is not a Kubernetes object name")
        if not _RESOURCE_NAME.match(self.gpu_resource):
            raise ConfigError("gpuResource", f"{self.gpu_resource!r} is not a Kubernetes resource name")
        if self.gpu_type_label is not None and not _RESOURCE_NAME.match(self.gpu_type_label):
            raise ConfigError("gpuTypeLabel", f"{self.gpu_type_label!r} is not a Kubernetes label key")
        if self.node_loss_window <= 0:
            raise ConfigError("nodeLossWindow", "must be a positive duration")

    @property
    def call_bound(self) -> float:
        return self.timeouts.api_server_request + CALL_BOUND_MARGIN

    def __repr__(self) -> str:
        token = "<set>" if self.token else None
        return (
            f"KubeflowSettings(namespace={self.namespace!r}, mode={self.mode.value!r}, "
            f"localQueue={self.local_queue!r}, token={token})"
        )


def schema() -> dict[str, Any]:
    """The JSON Schema of the settings (advisory; decoding is the judge)."""
    return _schema(KubeflowSettings, title="dispatch kubeflow adapter settings")
