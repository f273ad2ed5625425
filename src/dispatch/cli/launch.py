"""Why a job's launch failed, in the words its job script wrote on stderr (read back from the cluster), for
``run``, ``stop --wait`` and ``show``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dispatch.cluster import Cluster
    from dispatch.records.model import JobRecord


LAUNCH_CAUSES = ("launch-failed", "not-launchable")
"""The causes of a launch that failed: the node's or the scheduler's (``launch-failed``), the job's own
(``not-launchable``: its program, working directory or image is missing)."""


def launch_failed(job: JobRecord) -> bool:
    """Whether ``job`` ended with one of :data:`LAUNCH_CAUSES`."""
    return job.cause is not None and job.cause.value in LAUNCH_CAUSES


def launch_reason(cluster: Cluster, job: JobRecord) -> str | None:
    """Why the job's last execution could not be launched, as its job script said on stderr
    (:data:`~dispatch.adapterkit.jobscript.LAUNCH_FAILED_PREFIX`): ``the program ./train does not exist``.

    None unless the job ended ``not-launchable`` (its program, working directory or image is missing) or
    ``launch-failed`` and the cluster can still read that stderr with such a line (a
    scheduler's own words for the failure, e.g. Slurm's ``FAILED NonZeroExitCode``, stay the outcome's detail)."""
    from dispatch.adapterkit.jobscript import LAUNCH_FAILED_PREFIX
    from dispatch.errors import DispatchError

    out, sub = job.outcome, job.current
    if out is None or out.cause is None or out.cause.value not in LAUNCH_CAUSES or sub is None:
        return None
    backend: Any = getattr(cluster.backend, "unrestricted", cluster.backend)
    read = getattr(backend, "stderr", None)
    if sub.scheduler_id is None or not callable(read):
        return None
    restart = sub.executions[-1].restart if sub.executions else None
    try:
        text = b"".join(read(sub.scheduler_id, restart, False)).decode("utf-8", "replace")
    except (DispatchError, OSError):
        return None
    said = [ln[len(LAUNCH_FAILED_PREFIX) :].strip() for ln in text.splitlines() if ln.startswith(LAUNCH_FAILED_PREFIX)]
    return said[-1] if said and said[-1] else None
