"""Progress on Slurm: where each rank's reports go, and how the observation script reads them back.

A job's ranks write their reports (:func:`dispatch.job.progress`) to :data:`LAYOUT`
(``<output dir>/<marker>.<job id>.progress/``, one directory for all the job's executions), beside the job's
output files on the shared output directory (the batch script exports it as
``DISPATCH_PROGRESS_DIR``; :func:`prelude`). Every report names its execution (``DISPATCH_EXECUTION``), so the
reports of an execution that ended are told from the current one's without a directory per execution.

The supervisor's observation reads them in the same script as its ``squeue`` listing (:data:`READ`): for each
job, the files' prefix from the pointer its submission wrote (:func:`~dispatch.slurm.submit.pointer_path`),
then one line per report. Only shell builtins run per job (``read``, a glob of one small directory), so the
cost is no extra round trip and no process per job.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping

from dispatch.adapterkit.progress import MAX_REPORT, VARIABLE, parse_report
from dispatch.spi import RankProgress

LAYOUT = "<output dir>/<marker>.<job id>.progress"
"""The progress directory's name as the ``ProgressReporting`` capability and the docs say it; :func:`directory`
makes it (``<marker>``: an array's name for its tasks, ``<job id>``: ``<array>_<task>`` for a task)."""

READ = (
    'root=$1; shift\n'
    'for jid in "$@"; do\n'
    '  base=\n'
    '  { IFS= read -r base <"$root.$jid"; } 2>/dev/null\n'
    '  [ -n "$base" ] || continue\n'
    '  for f in "$base.$jid.progress"/rank-*.json; do\n'
    '    [ -f "$f" ] || continue\n'
    '    line=\n'
    f'    {{ IFS= read -r -n {MAX_REPORT} line <"$f"; }} 2>/dev/null\n'
    '    printf "%s %s %s\\n" "$jid" "${f##*/}" "$line"\n'
    '  done\n'
    'done\n'
    'exit 0'
)  # fmt: skip
"""Print ``<job id> rank-<r>.json <report>`` for every report of the jobs ``$2...``; ``$1`` is the pointers'
prefix (``<output root>/.jobs/<cluster>``). A job without a pointer or without reports prints nothing."""

_LINE = re.compile(r"(\d+(?:_\d+)?) rank-(\d{1,7})\.json (.*)")
JOB_ID = '"$SLURM_JOB_ID"'
"""The shell expression of a job's scheduler id in its batch script (an array task's is
:data:`dispatch.slurm.submit.ARRAY_TASK_ID`)."""


def directory(base: str, job_id: str = JOB_ID) -> str:
    """The progress directory of the job whose files' prefix is ``base`` (``<dir>/<marker>``), as a shell word
    that expands ``job_id`` (the scheduler id's shell expression) when the batch script runs."""
    return f"{shlex.quote(base)}.{job_id}.progress"


def prelude(base: str, job_id: str = JOB_ID) -> list[str]:
    """The batch script's lines that give every rank its progress directory (srun passes it on)."""
    return [f"export {VARIABLE}={directory(base, job_id)}", f'mkdir -p -- "${VARIABLE}" 2>/dev/null || true']


def parse_reports(stdout: str) -> dict[str, dict[int, str]]:
    """The raw reports :data:`READ` printed, by job id and rank (lines that are not one are skipped)."""
    out: dict[str, dict[int, str]] = {}
    for line in stdout.splitlines():
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
