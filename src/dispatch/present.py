"""How the CLI and the dashboard show times, ages and causes: one wording, so a job reads the same in both.

Plain text only (no colour, no markup): ``dispatch.cli.ui`` styles it for a terminal and the dashboard's templates
escape it. Imports nothing of the CLI or the web stack, so either may use it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from dispatch.outcome import Cause
from dispatch.records.model import Event, JobRecord, JobSummary

NONE = "-"
"""What stands for a missing value in a table cell or a field."""


def age(seconds: float | None) -> str:
    """``42s``, ``5m``, ``3h``, ``2d``: the largest whole unit, short and sortable by eye (negative counts as 0)."""
    if seconds is None:
        return NONE
    s = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"


def duration(seconds: float | None) -> str:
    """How long something took: ``4.2s`` under a minute, else ``3m07s`` or ``2h03m07s``."""
    if seconds is None:
        return NONE
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


def when(at: float | None) -> str:
    """A moment in local time, ``2026-12-03 11:41:29``."""
    return NONE if at is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def cause_text(s: JobSummary) -> str:
    """A job's cause in a word, with the exit code for an exit (``exit 3``); ``-`` while it has none."""
    if s.cause is None:
        return NONE
    if s.cause is Cause.EXIT and s.exit_code is not None:
        return f"exit {s.exit_code}"
    return s.cause.value


NO_RULES = (
    "none of its own: the default rules of the supervisor that takes the job apply (dispatch supervise --rules),"
    " written here when it does; with none, a failure waits for a human"
)
"""What a job without rules is told: recovery depends on the supervisor that takes it (docs/supervisor.md)."""


def rules_origin(job: JobRecord, events: Iterable[Event]) -> str:
    """Where the rules that apply to ``job`` come from, in a sentence: the job's own (given at submission), a
    supervisor's defaults it adopted (its ``rules-adopted`` event: by whom, when), or :data:`NO_RULES`."""
    if job.rules is None:
        return NO_RULES
    n = len(job.rules.get("rules", []))
    count = f"{n} rule{'' if n == 1 else 's'}"
    adopted = next((e for e in events if e.kind == "rules-adopted"), None)
    if adopted is None:
        return f"{count}, given at submission"
    return f"{count}: the default rules of {adopted.data.get('by', 'a supervisor')}, adopted {when(adopted.at)}"
