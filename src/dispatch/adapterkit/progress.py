"""Progress reports as the adapters read them: the files :func:`dispatch.job.progress` writes, parsed into
:class:`~dispatch.spi.RankProgress`.

Every adapter that carries progress on shared storage gives each execution a directory (``DISPATCH_PROGRESS_DIR``)
in which rank ``r`` replaces ``rank-<r>.json`` atomically; the adapter reads the directory with the job's state,
in the same batched call, and hands the text of each file to :func:`parse_report`. A file that is not a report
(someone else's, or garbage) is skipped, never an error: progress is advisory evidence, and a job that reports
nothing is simply a job without progress.
"""

from __future__ import annotations

import json
import math
import re

from dispatch.spi import RankProgress

VARIABLE = "DISPATCH_PROGRESS_DIR"
"""The variable that tells a rank where to write (see :mod:`dispatch.job`)."""
FILE = re.compile(r"rank-(\d{1,7})\.json")
"""The name of one rank's report in the progress directory."""
MAX_REPORT = 4096
"""The most bytes of one report an adapter reads (a report of 16 metrics is well under 1 KiB)."""
_MAX = 2**53
MAX_METRICS = 16
"""The most metrics a report may carry (:func:`dispatch.job.progress` writes at most this many)."""
_METRIC = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _unique(pairs: list[tuple[str, object]]) -> dict[str, object]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("a key given twice")
    return out


_DECODER = json.JSONDecoder(parse_constant=_no_constant, object_pairs_hook=_unique)
"""The strict decoder of a report, made once (``json.loads`` with options builds one per call)."""


_NUMBER = (int, float)
"""``isinstance``'s types of a JSON number (a tuple: ``int | float`` would build a union at every call)."""


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < _MAX:
        return None
    return value


def parse_report(
    text: str | bytes, rank: int | None = None, *, execution: str | None = None, offset: float = 0.0
) -> RankProgress | None:
    """The report in ``text`` (a progress file's content), or None when it is not one: parsed strictly (at most
    :data:`MAX_REPORT` bytes, plain JSON without NaN or a key given twice, counts in range, at most
    :data:`MAX_METRICS` metrics named as :func:`dispatch.job.progress` names them). ``rank`` is the rank its
    file name says (it must agree with the report's own); ``execution``, when given, is the execution identity
    the report must name; ``offset`` is subtracted from its time (the cluster's clock minus the supervisor's)."""
    if len(text) > MAX_REPORT:
        return None
    try:
        if isinstance(text, str):
            data = _DECODER.decode(text)
        else:  # json.loads finds the encoding of bytes
            data = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    r, step, total, at = _count(data.get("rank")), _count(data.get("step")), data.get("total"), data.get("at")
    if r is None or step is None or (rank is not None and r != rank):
        return None
    if execution is not None and data.get("execution") != execution:
        return None
    if total is not None and _count(total) is None:
        return None
    if isinstance(at, bool) or not isinstance(at, _NUMBER) or not math.isfinite(at):
        return None
    metrics: list[tuple[str, float | None]] = []
    raw = data.get("metrics") or {}
    if not isinstance(raw, dict) or len(raw) > MAX_METRICS:
        return None
    for name, value in raw.items():
        if not _METRIC.fullmatch(name):
            return None
        if value is None or (isinstance(value, _NUMBER) and not isinstance(value, bool)):
            metrics.append((name, None if value is None else float(value)))
    first_step, first_at = None, None
    first = data.get("first")
    if isinstance(first, dict):
        fs, fa = _count(first.get("step")), first.get("at")
        if fs is not None and isinstance(fa, _NUMBER) and not isinstance(fa, bool) and math.isfinite(fa):
            first_step, first_at = fs, float(fa) - offset
    return RankProgress(
        r, step, float(at) - offset, total if isinstance(total, int) else None, tuple(metrics), first_step, first_at
    )
