"""How progress is shown: per rank, the step and total, the rate, an estimated end and how long ago the rank last
reported; and one line per job for tables. Plain text and JSON (no colour), for the CLI and the dashboard.

The rate of a rank is its steps per second since its first report of the execution (``first_step`` at
``first_at``: a run resumed from a checkpoint counts from the step it resumed at); a rank with a single report
has no rate yet. The estimated end is the last report's time plus the steps left at that rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dispatch.present import NONE, age, when
from dispatch.spi import RankProgress


@dataclass(frozen=True)
class RankView:
    """One rank's progress as shown at ``now``."""

    rank: int
    step: int
    total: int | None
    last_report_age: float
    rate: float | None
    """Steps per second, or None before the rank has reported twice (or when no step passed)."""
    ends_at: float | None
    """When the rank reaches ``total`` at its rate (None without a total or a rate)."""
    metrics: tuple[tuple[str, float | None], ...]

    @classmethod
    def of(cls, p: RankProgress, now: float) -> RankView:
        rate = None
        if p.first_step is not None and p.first_at is not None and p.at > p.first_at and p.step > p.first_step:
            rate = (p.step - p.first_step) / (p.at - p.first_at)
        ends = None
        if rate is not None and p.total is not None:
            ends = p.at + max(0, p.total - p.step) / rate
        return cls(p.rank, p.step, p.total, max(0.0, now - p.at), rate, ends, p.metrics)

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "step": self.step,
            "total": self.total,
            "rate": self.rate,
            "endsAt": self.ends_at,
            "lastReportAgeSeconds": round(self.last_report_age, 3),
            "metrics": dict(self.metrics),
        }


def views(reports: Sequence[RankProgress], now: float) -> list[RankView]:
    """Every rank's view, by rank."""
    return [RankView.of(p, now) for p in sorted(reports, key=lambda p: p.rank)]


def step_text(v: RankView) -> str:
    """The step, with the total and the share done where the total is known: ``1200/5000 (24%)``."""
    if v.total is None:
        return f"{v.step}"
    return f"{v.step}/{v.total} ({100 * v.step / v.total:.0f}%)"


def rate_text(rate: float | None) -> str:
    """Steps per second (per hour below 0.01/s); ``-`` without a rate."""
    if rate is None:
        return NONE
    return f"{rate:.3g}/s" if rate >= 0.01 else f"{rate * 3600:.3g}/h"


def summary(reports: Sequence[RankProgress], now: float) -> str:
    """One cell for a job: the slowest rank's step and total, rate and estimated end, and the oldest last report
    (``1200/5000 (24%) 3.1/s ends 12:41:09, 2s ago``); ``-`` when no rank reported."""
    vs = views(reports, now)
    if not vs:
        return NONE
    slow = min(vs, key=lambda v: (v.step, v.rank))
    ends = [v.ends_at for v in vs]
    end = max(e for e in ends if e is not None) if any(e is not None for e in ends) else None
    text = f"{step_text(slow)} {rate_text(slow.rate)}"
    if end is not None:
        text += f" ends {when(end)[11:] if end - now < 86400 else when(end)}"
    return text + f", {age(max(v.last_report_age for v in vs))} ago"


def lines(reports: Sequence[RankProgress], now: float) -> list[str]:
    """One line per rank for ``dispatch show``."""
    out = []
    for v in views(reports, now):
        metrics = " ".join(f"{k}={'nan' if x is None else f'{x:.4g}'}" for k, x in v.metrics)
        ends = f"ends {when(v.ends_at)}" if v.ends_at is not None else "end unknown"
        text = (
            f"rank {v.rank}: step {step_text(v)}, {rate_text(v.rate)}, {ends}, last report {age(v.last_report_age)} ago"
        )
        out.append(text + (f"; {metrics}" if metrics else ""))
    return out


__all__ = ["RankView", "lines", "rate_text", "step_text", "summary", "views"]
