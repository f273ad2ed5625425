"""The ``kubeflow.RuntimeRef`` extension: the (Cluster)TrainingRuntime a job runs under."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from dispatch.errors import SpecError
from dispatch.extensions import Extension, register_extension

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")


@register_extension
@dataclass(frozen=True)
class RuntimeRef(Extension):
    """Names the runtime: ``name`` and ``kind`` (``ClusterTrainingRuntime``, the default, or a
    ``TrainingRuntime`` in the adapter's namespace). Required on every Kubeflow job."""

    kind: ClassVar[str] = "kubeflow.RuntimeRef"
    name: str
    runtime_kind: str = "ClusterTrainingRuntime"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise SpecError("name", "must be a Kubernetes object name")
        if self.runtime_kind not in RUNTIME_KINDS:
            raise SpecError("runtimeKind", f"must be one of {', '.join(RUNTIME_KINDS)}")
