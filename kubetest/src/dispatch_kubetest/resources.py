"""The catalogue of resource types the fake server serves, and how a group-version is named.

A ``ResourceType`` is what discovery publishes for one resource (plural, kind, scope, verbs)
plus which subresources exist. ``default_catalogue()`` lists everything the kit serves out of
the box: core v1, batch/v1, coordination, authorization, Trainer, JobSet and Kueue.
"""

from __future__ import annotations

from dataclasses import dataclass, field

KUEUE_VERSION = "v1beta2"
"""Kueue v0.20 serves and stores ``kueue.x-k8s.io/v1beta2`` (see docs/dev/fake-apiserver.md)."""

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    """One REST resource: ``/apis/<group>/<version>/[namespaces/<ns>/]<plural>``."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    singular: str = ""
    subresources: frozenset[str] = field(default_factory=frozenset)
    verbs: tuple[str, ...] = ALL_VERBS
    short_names: tuple[str, ...] = ()
    builtin: bool = True
    """False for custom resources (CRDs): strategic merge patch is refused on them."""

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def api_version(self) -> str:
        return self.group_version

    @property
    def key(self) -> str:
        """``plural.group`` (``pods`` for core), the name RBAC and errors use."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


def _core(kind: str, plural: str, namespaced: bool, sub: frozenset[str] = frozenset()) -> ResourceType:
    return ResourceType("", "v1", kind, plural, namespaced, kind.lower(), sub)


def _crd(group: str, version: str, kind: str, plural: str, namespaced: bool) -> ResourceType:
    return ResourceType(group, version, kind, plural, namespaced, kind.lower(), frozenset({"status"}), builtin=False)


STATUS = frozenset({"status"})

POD = _core("Pod", "pods", True, frozenset({"status", "log"}))
NODE = _core("Node", "nodes", False, STATUS)
NAMESPACE = _core("Namespace", "namespaces", False, STATUS)
EVENT = _core("Event", "events", True)
CONFIGMAP = _core("ConfigMap", "configmaps", True)
JOB = ResourceType("batch", "v1", "Job", "jobs", True, "job", STATUS)
LEASE = ResourceType("coordination.k8s.io", "v1", "Lease", "leases", True, "lease")
SSAR = ResourceType(
    "authorization.k8s.io",
    "v1",
    "SelfSubjectAccessReview",
    "selfsubjectaccessreviews",
    False,
    "selfsubjectaccessreview",
    verbs=("create",),
)
TRAINJOB = _crd("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs", True)
TRAINING_RUNTIME = _crd("trainer.kubeflow.org", "v1alpha1", "TrainingRuntime", "trainingruntimes", True)
CLUSTER_TRAINING_RUNTIME = _crd(
    "trainer.kubeflow.org", "v1alpha1", "ClusterTrainingRuntime", "clustertrainingruntimes", False
)
JOBSET = _crd("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", True)
WORKLOAD = _crd("kueue.x-k8s.io", KUEUE_VERSION, "Workload", "workloads", True)
LOCAL_QUEUE = _crd("kueue.x-k8s.io", KUEUE_VERSION, "LocalQueue", "localqueues", True)
CLUSTER_QUEUE = _crd("kueue.x-k8s.io", KUEUE_VERSION, "ClusterQueue", "clusterqueues", False)
ADMISSION_CHECK = _crd("kueue.x-k8s.io", KUEUE_VERSION, "AdmissionCheck", "admissionchecks", False)
RESOURCE_FLAVOR = _crd("kueue.x-k8s.io", KUEUE_VERSION, "ResourceFlavor", "resourceflavors", False)
WORKLOAD_PRIORITY_CLASS = _crd(
    "kueue.x-k8s.io", KUEUE_VERSION, "WorkloadPriorityClass", "workloadpriorityclasses", False
)


def default_catalogue() -> list[ResourceType]:
    return [
        POD,
        NODE,
        NAMESPACE,
        EVENT,
        CONFIGMAP,
        JOB,
        LEASE,
        SSAR,
        TRAINJOB,
        TRAINING_RUNTIME,
        CLUSTER_TRAINING_RUNTIME,
        JOBSET,
        WORKLOAD,
        LOCAL_QUEUE,
        CLUSTER_QUEUE,
        ADMISSION_CHECK,
        RESOURCE_FLAVOR,
        WORKLOAD_PRIORITY_CLASS,
    ]


class Catalogue:
    """Resource types by group-version, with group-versions that can be switched off."""

    def __init__(self, types: list[ResourceType]) -> None:
        self._types = list(types)
        self._unserved: set[str] = set()

    def all(self) -> list[ResourceType]:
        return list(self._types)

    def served(self) -> list[ResourceType]:
        return [t for t in self._types if t.group_version not in self._unserved]

    def is_served(self, group_version: str) -> bool:
        return group_version not in self._unserved and any(t.group_version == group_version for t in self._types)

    def unserve(self, group_version: str) -> None:
        self._unserved.add(group_version)

    def serve(self, group_version: str) -> None:
        self._unserved.discard(group_version)

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        for t in self._types:
            if t.group == group and t.version == version and t.plural == plural:
                return t if t.group_version not in self._unserved else None
        return None

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        for t in self._types:
            if t.group_version == api_version and t.kind == kind:
                return t
        return None

    def group_versions(self) -> dict[str, list[str]]:
        """Served versions per group (core group is ``""``)."""
        out: dict[str, list[str]] = {}
        for t in self.served():
            versions = out.setdefault(t.group, [])
            if t.version not in versions:
                versions.append(t.version)
        return out
