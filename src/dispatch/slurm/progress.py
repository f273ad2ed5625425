"""Progress on Slurm: where each rank's reports go, and how the observation script reads them back.

A job's ranks write their reports (:func:`dispatch.job.progress`) to ``<root>/<job id>/rank-<r>.json``
(:data:`LAYOUT`), where ``<root>`` is the cluster's progress directory, ``<output dir>/.progress/<cluster>``
(:func:`root`; the output directory there is the output root, ``output.dir``, default ``~/dispatch-output``, for
every job, whatever its ``dispatch.Output``). The batch script exports the job's directory as
``DISPATCH_PROGRESS_DIR`` and makes sure ``<root>`` exists (0700); the job's directory itself is made by the
first report, so only a job that reports has one. Every report names its execution (``DISPATCH_EXECUTION``), so
an ended execution's reports are told from the current one's.

The supervisor's observation reads them in the same call as its ``squeue`` listing (:data:`OBSERVE`), and only
where progress can exist and is wanted: one directory read of ``<root>`` (the jobs that have reports), then,
for each job the listing shows RUNNING (or COMPLETING) that has a directory and that the caller wants progress
of, one read of its directory and one of each report. A pending job costs no file system operation, and a
running job that never reported costs none either. Every file and directory is checked before it is trusted
(``programs/observe.sh``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Mapping

from dispatch.adapterkit.programs import program
from dispatch.adapterkit.progress import MAX_REPORT, VARIABLE, parse_report
from dispatch.spi import RankProgress

PROGRESS = ".progress"
"""The directory, inside the cluster's output root, of every cluster's progress directory."""
SEPARATOR = ":dispatch-progress:"
"""The line :data:`OBSERVE` prints between squeue's listing and the reports (no squeue row starts with ``:``)."""
ALL = "*"
"""The ``want`` of :data:`OBSERVE` that asks for the progress of every running job listed."""
LAYOUT = "<output dir>/.progress/<cluster>/<job id>"
"""The progress directory's name as the ``ProgressReporting`` capability and the docs say it (``<output dir>``:
the output root; ``<cluster>``: the cluster's name, characters other than letters, digits, ``_.-`` as ``_``;
``<job id>``: ``<array>_<task>`` for an array's task)."""

OBSERVE = program("dispatch.slurm", "observe.sh", separator=SEPARATOR, max_report=MAX_REPORT)
"""The observation's one call (``programs/observe.sh``): ``squeue -h -t all -j $1 -O $2`` (its rows, its status, its
stderr; without ``-r``, the tasks an array's record still holds are one row, ``<array>_[<tasks>]``, which the parser
expands: a pending array of 1,000 tasks is one line to print, not 1,000), then, when ``$4`` (the jobs whose progress
is wanted: :data:`ALL` or ids comma-separated; empty: none) asks for any, a line :data:`SEPARATOR`, ``ROOT`` when the
progress directory ``$3`` (:func:`root`) is trusted, and ``./<job id>/rank-<r>.json <report>`` for every trusted
report (a directory or report is trusted when it is the reading user's, writable by neither group nor others, no
symbolic link, and a report holds at most :data:`MAX_REPORT` bytes) of the wanted jobs that the listing shows running
and that have a directory there. Processes: squeue, and with reports to read an ``awk`` that picks the jobs, ``find``
and one ``awk`` that reads every report; no process and no file operation per job that has no report."""

_LINE = re.compile(r"\./(\d+(?:_\d+)?)/rank-(\d{1,7})\.json (.*)")
JOB_ID = '"$SLURM_JOB_ID"'
"""The shell expression of a job's scheduler id in its batch script (an array task's is
:data:`dispatch.slurm.submit.ARRAY_TASK_ID`)."""


def root(output_root: str, cluster: str) -> str:
    """The progress directory of ``cluster`` (a name safe in a path), under the output root
    ``output_root``: ``<output root>/.progress/<cluster>``."""
    return f"{output_root.rstrip('/')}/{PROGRESS}/{cluster}"


def directory(root_dir: str, job_id: str = JOB_ID) -> str:
    """The progress directory of a job in ``root_dir`` (:func:`root`), as a shell word that expands ``job_id``
    (the scheduler id's shell expression) when the batch script runs."""
    return f"{shlex.quote(root_dir)}/{job_id}"


def prelude(root_dir: str, job_id: str = JOB_ID) -> list[str]:
    """The batch script's lines that give every rank its progress directory (srun passes it on) and make sure
    the cluster's progress directory exists, private to the user (the job's own directory is made 0700 by its
    first report, :func:`dispatch.job.progress`)."""
    q = shlex.quote(root_dir)
    return [f"export {VARIABLE}={directory(root_dir, job_id)}", f"(umask 077 && mkdir -p -- {q}) 2>/dev/null || true"]


def want(progress_of: Collection[str] | None) -> str:
    """:data:`OBSERVE`'s ``$4`` for ``progress_of``: None is every job (:data:`ALL`), an empty collection none."""
    if progress_of is None:
        return ALL
    return ",".join(sorted(set(progress_of)))


def split(stdout: str) -> tuple[str, str]:
    """:data:`OBSERVE`'s output: squeue's listing and the reports' lines."""
    listing, sep, reports = stdout.partition(f"\n{SEPARATOR}\n")
    if sep:
        return listing + "\n", reports
    if stdout.startswith(f"{SEPARATOR}\n"):
        return "", stdout[len(SEPARATOR) + 1 :]
    return stdout, ""


def parse_reports(stdout: str) -> dict[str, dict[int, str]]:
    """The raw reports :data:`OBSERVE` printed (after its separator), by job id and rank (lines that are not one
    are skipped); none unless the progress directory was trusted (its ``ROOT`` line)."""
    out: dict[str, dict[int, str]] = {}
    lines = stdout.splitlines()
    if "ROOT" not in lines:
        return out
    for line in lines:
        m = _LINE.fullmatch(line)
        if m is not None:
            out.setdefault(m.group(1), {})[int(m.group(2))] = m.group(3)
    return out


def reports_of(raw: Mapping[int, str], execution: str, offset: float) -> tuple[RankProgress, ...]:
    """The reports of ``execution`` among one job's raw reports, by rank, times moved by the cluster's
    ``offset``; a report of another execution of the job, or one that is not a report, is left out."""
    out = []
    for rank, text in sorted(raw.items()):
        report = parse_report(text, rank, execution=execution, offset=offset)
        if report is not None:
            out.append(report)
    return tuple(out)
