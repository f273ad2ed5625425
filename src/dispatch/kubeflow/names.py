"""The names, labels and annotations the adapter writes and reads (documented in docs/adapters/kubeflow.md).

Everything dispatch writes on a cluster is under the ``dispatch.io/`` prefix, except Kueue's own keys.
"""

from __future__ import annotations

import hashlib
import re

PREFIX = "dispatch.io/"

# labels (selectable)
MANAGED = PREFIX + "managed"
"""Label ``"true"`` on every TrainJob (and runtime copy) dispatch created; dispatch-admission keys on it."""
MARKER = PREFIX + "marker"
"""Label: the submission's marker (or ``h-<sha>`` of it when it is not a valid label value); ``find`` selects on it."""
PROBE = PREFIX + "probe"
"""Label ``"true"`` on the preflight probe TrainJob."""

# annotations (state dispatch keeps on the TrainJob)
MARKER_FULL = PREFIX + "marker"
JOB_ID = PREFIX + "job-id"
SUBMISSION = PREFIX + "submission"
GATE = PREFIX + "gate"
"""``closed`` until :meth:`open`, then ``open``: dispatch's own start gate as dispatch set it."""
HOLDS = PREFIX + "holds"
"""Comma-separated instances of the dispatch holds on the object."""
ATTEMPT = PREFIX + "attempt"
"""Plain mode: the attempt number of the latest admission (the adapter bumps it at each unsuspend). On pods
(both modes): the attempt the pod runs, read by the downward API into ``DISPATCH_ATTEMPT``."""
ADMIT = PREFIX + "admit"
"""Kueue mode: the highest attempt dispatch has authorised; dispatch-admission admits attempt k only when
this is >= k."""
STOP = PREFIX + "stop-requested"
"""Set by ``stop_job``: the job was stopped on request (it reads cancelled from then on)."""
ADMIN_HOLD = PREFIX + "admin-hold"
"""Plain mode convention: an administrator's hold (any value: its reason). dispatch never removes it."""
RUNTIME_SOURCE = PREFIX + "runtime"
"""On the runtime copy and the TrainJob: ``<kind>/<name>`` of the runtime it was copied from."""
RANK_RESTART = PREFIX + "rank-restart"
"""``allowed`` when the runtime can restart a rank inside an execution (accepted under allowRankRestart)."""

PATCH_MANAGER = PREFIX + "adapter"
"""The ``spec.runtimePatches[].manager`` the adapter owns (plain mode: the attempt on the pods)."""
RESOURCES_PATCH_MANAGER = PREFIX + "resources"
"""The ``spec.runtimePatches[].manager`` of the patch that places the trainer pods on nodes of the GPU type."""

# Kueue and upstream keys
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GATED_BY = "kueue.x-k8s.io/admission-gated-by"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
JOB_RESTART_ATTEMPT = "jobset.sigs.k8s.io/job-restart-attempt"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
ANCESTOR_STEP = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_CONTAINER = "node"

MAX_NAME = 40
"""TrainJob names stay <= 40 characters so pod names (``<name>-node-<j>-<p>-xxxxx``) fit in 63."""

_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def short_hash(text: str, n: int = 10) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def trainjob_name(job_id: str, submission: int) -> str:
    """``dj-<job id>-<N>``, lower-cased; a hash replaces the id when it is not name-safe or too long."""
    safe = job_id.lower().replace("_", "-")
    name = f"dj-{safe}-{submission}"
    if len(name) > MAX_NAME or not re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name) or "--" in name:
        name = f"dj-{short_hash(job_id)}-{submission}"
    return name


def marker_label(marker: str) -> str:
    """The label value for a marker (the marker itself when valid, else ``h-<sha>``)."""
    if _LABEL_VALUE.match(marker) and marker:
        return marker
    return "h-" + short_hash(marker, 40)


def split_list(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]
