"""The shared wording of the CLI and the dashboard: ages, durations, moments and causes, and that both use it."""

from __future__ import annotations

import time

import pytest

from dispatch import present
from dispatch.outcome import Cause, State
from dispatch.records.model import JobSummary


def summary(cause: Cause | None, exit_code: int | None = None) -> JobSummary:
    state = State.PENDING if cause is None else State.FAILED
    return JobSummary("j1", "c", None, state, cause, exit_code, None, 0.0, 0.0, None, False, 1)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (-5, "0s"), (0, "0s"), (59.9, "59s"), (60, "1m"), (3599, "59m"), (3600, "1h"), (86400 * 3, "3d")],
)
def test_age_is_the_largest_whole_unit(seconds: float | None, text: str) -> None:
    assert present.age(seconds) == text


@pytest.mark.parametrize(("seconds", "text"), [(None, "-"), (4.25, "4.2s"), (187, "3m07s"), (7387, "2h03m07s")])
def test_duration_keeps_seconds(seconds: float | None, text: str) -> None:
    assert present.duration(seconds) == text


def test_when_is_local_time_to_the_second() -> None:
    at = 1_800_000_000.4
    assert present.when(at) == time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))
    assert present.when(None) == "-"


def test_cause_text_names_the_exit_code_of_an_exit_only() -> None:
    assert present.cause_text(summary(None)) == "-"
    assert present.cause_text(summary(Cause.EXIT, 3)) == "exit 3"
    assert present.cause_text(summary(Cause.EXIT)) == "exit"
    assert present.cause_text(summary(Cause.PREEMPTED)) == "preempted"


def test_the_cli_and_the_dashboard_share_one_wording() -> None:
    """Neither keeps a copy: the dashboard's template filters are these functions and the CLI modules define none."""
    pytest.importorskip("starlette")
    from dispatch.cli import ui, views
    from dispatch.ui import app

    env = app._templates()
    assert env.filters["age"] is present.age
    assert env.filters["when"] is present.when
    assert env.filters["cause"] is present.cause_text
    for module in (ui, views, app):
        assert not {"age", "duration", "cause_text", "_when", "_age"} & set(vars(module)), module.__name__
