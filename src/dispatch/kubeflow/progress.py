"""Progress on Kubeflow: the Trainer's own ``status.trainerStatus`` of a TrainJob, read as rank 0's report.

Where the cluster's Trainer runs its status server (the ``TrainJobStatus`` feature gate; the adapter's setting
``trainerStatus`` declares it), :func:`dispatch.job.progress` in rank 0 posts each report there
(:mod:`dispatch.trainerstatus`) and the Trainer writes it into the TrainJob's status, which the adapter's watch
already holds: reading it costs no request and needs no permission beyond the watch of TrainJobs.

:func:`trainer_progress` turns that status into the :class:`~dispatch.spi.RankProgress` of the current execution:

* a report that names its execution (``dispatch.execution``) counts for that execution only: a status left by
  an earlier execution of the same TrainJob (suspended, then resumed) is never read as the new one's;
* a status without dispatch's metrics (a script that reports with the Kubeflow SDK) counts when its
  ``lastUpdatedTime`` is not before the execution started: its step is ``progressPercentage`` of 100 (0 when
  it gives none);
* anything else (no status, a time that does not parse, a step that is not a count) is no progress: progress
  is advisory evidence, and a job without it is never judged stalled.
"""

from __future__ import annotations

import math
from typing import Any

from dispatch import trainerstatus as ts
from dispatch.kubeflow.mapping import parse_time
from dispatch.spi import RankProgress

JSON = dict[str, Any]
_MAX = 2**53


def trainer_progress(trainjob: JSON, execution: str, started_at: float | None) -> tuple[RankProgress, ...]:
    """Rank 0's progress in ``trainjob``'s ``status.trainerStatus`` for the execution ``execution`` that started
    at ``started_at`` (None: not known); empty when the status holds none of it (see the module docstring)."""
    status = (trainjob.get("status") or {}).get("trainerStatus")
    if not isinstance(status, dict):
        return ()
    metrics = {
        str(m.get("name")): str(m.get("value"))
        for m in status.get("metrics") or []
        if isinstance(m, dict) and m.get("name") is not None and m.get("value") is not None
    }
    updated = parse_time(status.get("lastUpdatedTime"))
    if ts.STEP in metrics:
        if metrics.get(ts.EXECUTION) != execution:
            return ()
        step, at = _count(metrics[ts.STEP]), _seconds(metrics.get(ts.AT))
        at = at if at is not None else updated
        if step is None or at is None:
            return ()
        total = _count(metrics.get(ts.TOTAL))
        first_step, first_at = _count(metrics.get(ts.FIRST_STEP)), _seconds(metrics.get(ts.FIRST_AT))
        own = tuple((name, _number(value)) for name, value in metrics.items() if not name.startswith("dispatch."))
        return (
            RankProgress(
                0, step, at, total if total else None, own, first_step, first_at if first_step is not None else None
            ),
        )
    if updated is None or (started_at is not None and updated < started_at):
        return ()
    pct = status.get("progressPercentage")
    step = pct if isinstance(pct, int) and not isinstance(pct, bool) and 0 <= pct <= 100 else 0
    own = tuple((name, _number(value)) for name, value in metrics.items())
    return (RankProgress(0, step, updated, 100 if isinstance(pct, int) else None, own),)


def _count(text: str | None) -> int | None:
    if text is None or not text.isdigit() or len(text) > 16:
        return None
    value = int(text)
    return value if value < _MAX else None


def _seconds(text: str | None) -> float | None:
    value = _number(text)
    return value if value is not None and value > 0 else None


def _number(text: str | None) -> float | None:
    """A finite float, or None (a NaN, an infinity, not a number)."""
    if text is None or len(text) > ts.MAX_VALUE:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


__all__ = ["trainer_progress"]
