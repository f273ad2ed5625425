"""Combining the ends of an execution's ranks into the execution's one end.

An adapter that sees each rank end (the local adapter's launcher; an adapter for hosts without a scheduler)
must turn those ends into one outcome, by one rule:

* **the first failure in time wins**: a distributed job cannot go on without a rank, so the first rank to fail
  is the cause, and the ranks that the adapter then ends (SIGTERM, SIGKILL) are consequences, never the cause
  (ties in time go to the lower rank);
* a rank **killed by a signal** fails with that signal; a rank that **could not be started** (its program
  missing, its working directory gone) fails as ``not-launchable``, told apart from a rank that started and
  exited non-zero (``exit``);
* **success only when every rank exited 0**: with no failure and a rank missing from ``ends``, the execution
  has not ended (or its end is not known), and :func:`combine` says so with None.

The verdict carries the winning rank's exit code and signal as the adapter reported them (the local adapter
reports ``128 + signal`` with the signal; a scheduler's rule may differ), and its state and cause as the
values of :class:`dispatch.outcome.State` and :class:`dispatch.outcome.Cause`;
:func:`dispatch.adapterkit.outcomes.ranks_outcome` makes the :class:`~dispatch.outcome.Outcome`.

This module imports the standard library only: the local adapter's launcher, which runs by path and imports
nothing of dispatch, loads it by path (as it loads :mod:`dispatch.adapterkit.rankenv`).
"""

from __future__ import annotations

import signal as signals
from collections.abc import Iterable
from dataclasses import dataclass

SUCCEEDED, FAILED = "succeeded", "failed"
EXIT, LAUNCH_FAILED = "exit", "not-launchable"
"""The verdicts' causes. A rank that could not be started is the job's own failure (its program or working
directory), ``not-launchable``, which blames no node; the constant keeps its name for the adapters that use it."""


@dataclass(frozen=True)
class RankEnd:
    """How one rank ended, at ``ended_at`` (seconds, any clock shared by the ranks): its ``exit_code``, the
    ``signal`` that killed it, or ``launch_error`` when it could not be started (the reason, for humans)."""

    rank: int
    ended_at: float
    exit_code: int | None = None
    signal: int | None = None
    launch_error: str | None = None

    def __post_init__(self) -> None:
        if self.rank < 0:
            raise ValueError(f"a rank is 0 or more, not {self.rank}")
        if self.exit_code is None and not self.signal and self.launch_error is None:
            raise ValueError(f"rank {self.rank} ended with neither an exit code, a signal nor a launch error")

    @property
    def failed(self) -> bool:
        """Whether this rank failed: it could not start, was killed by a signal, or exited non-zero."""
        return self.launch_error is not None or bool(self.signal) or self.exit_code != 0

    def describe(self) -> str:
        """``rank 1 exited with code 3``, ``rank 0 was killed by SIGKILL``, ``rank 2 could not start: ...``."""
        if self.launch_error is not None:
            return f"rank {self.rank} could not start: {self.launch_error}"
        if self.signal:
            return f"rank {self.rank} was killed by {_signal_name(self.signal)}"
        return f"rank {self.rank} exited with code {self.exit_code}"


@dataclass(frozen=True)
class RanksEnd:
    """The execution's end: ``state`` and ``cause`` (values of State and Cause), the exit code and signal of
    the rank that decided it (``rank``; None for a success, which every rank decided), and a ``detail``."""

    state: str
    cause: str
    exit_code: int | None
    signal: int | None
    rank: int | None
    detail: str


def first_failure(ends: Iterable[RankEnd]) -> RankEnd | None:
    """The rank that failed first in time (the lower rank on a tie), or None when none failed."""
    failures = [e for e in ends if e.failed]
    return min(failures, key=lambda e: (e.ended_at, e.rank)) if failures else None


def combine(ends: Iterable[RankEnd], world_size: int) -> RanksEnd | None:
    """The end of an execution of ``world_size`` ranks from the ends seen so far (by the rule of this module):
    the first failure's, else success once every rank 0 .. ``world_size``-1 exited 0, else None (not ended).
    A rank outside the world, or one reported twice, is a ValueError: the adapter's bookkeeping is wrong."""
    if world_size < 1:
        raise ValueError(f"a world has at least one rank, not {world_size}")
    seen: dict[int, RankEnd] = {}
    for end in ends:
        if end.rank >= world_size:
            raise ValueError(f"rank {end.rank} is not in a world of {world_size}")
        if end.rank in seen:
            raise ValueError(f"rank {end.rank} ended twice")
        seen[end.rank] = end
    first = first_failure(seen.values())
    if first is not None:
        cause = LAUNCH_FAILED if first.launch_error is not None else EXIT
        return RanksEnd(FAILED, cause, first.exit_code, first.signal or None, first.rank, first.describe())
    if len(seen) < world_size:
        return None
    return RanksEnd(SUCCEEDED, EXIT, 0, None, None, "")


def _signal_name(number: int) -> str:
    try:
        return signals.Signals(number).name
    except ValueError:
        return f"signal {number}"
