"""Progress on Grid Engine: where a job's rank reports go, and how the backend reads them back.

A job's rank writes its reports (:func:`dispatch.job.progress`) to ``<output dir>/<marker>.<job id>.progress/``,
beside the job's ``.out`` and ``.err`` in the adapter's output directory (the job script exports it as
``DISPATCH_PROGRESS_DIR``: :func:`prelude`). The output directory is already one this host and the execution
hosts share (Grid Engine writes the job's output there, the backend creates it here), so the backend reads the
reports with plain file reads, in the same :meth:`~dispatch.gridengine.GridEngineBackend.inspect_many` that
reads the jobs' state from ``qstat``: no command and no round trip per job, one small directory per running
job. Every report names its execution (``DISPATCH_EXECUTION``); one of another execution is left out.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping

from dispatch.adapterkit.progress import FILE, MAX_REPORT, VARIABLE, parse_report
from dispatch.spi import RankProgress

JOB_ID = '"$JOB_ID"'
"""The shell expression of the job's id in its job script."""


def directory(output_dir: str, marker: str, job_id: str) -> str:
    """The progress directory of job ``job_id`` (named ``marker``) in ``output_dir``, as a path."""
    return f"{output_dir.rstrip('/')}/{marker}.{job_id}.progress"


def prelude(output_dir: str, marker: str) -> list[str]:
    """The job script's lines that give the rank its progress directory (``$JOB_ID`` expanded when it runs)."""
    base = shlex.quote(f"{output_dir.rstrip('/')}/{marker}.")
    return [f"export {VARIABLE}={base}{JOB_ID}.progress", f'mkdir -p -- "${VARIABLE}" 2>/dev/null || true']


def read_raw(path: str) -> dict[int, bytes]:
    """The raw reports in the progress directory ``path``, by rank (none when it does not exist or cannot be
    read; a file that is too large to be a report is left out)."""
    out: dict[int, bytes] = {}
    try:
        entries = list(os.scandir(path))
    except OSError:
        return out
    for entry in entries:
        m = FILE.fullmatch(entry.name)
        if m is None:
            continue
        try:
            with open(entry.path, "rb") as f:
                text = f.read(MAX_REPORT + 1)
        except OSError:
            continue
        if len(text) <= MAX_REPORT:
            out[int(m.group(1))] = text
    return out


def reports_of(raw: Mapping[int, bytes], execution: str) -> tuple[RankProgress, ...]:
    """The reports of ``execution`` among one job's raw reports, by rank; a report of another execution, or a
    file that is not a report, is left out."""
    out = []
    for rank, text in sorted(raw.items()):
        report = parse_report(text, rank, execution=execution)
        if report is not None:
            out.append(report)
    return tuple(out)
