"""The shipped Slurm harness sizes its waits from the cluster's own enforcement of time limits."""

from __future__ import annotations

from typing import Any

from dispatch.slurm.harness import LIMIT_CHECK_PERIOD, TIME_LIMIT, WAIT, base_harness, enforcement_lag


def described(**settings: str) -> dict[str, Any]:
    return {
        "transport": "local",
        "partitions": {"default": "batch"},
        "admin": {"command": ["false"]},  # never run: the settings are given
        "settings": settings,
    }


def test_the_lag_is_the_check_period_plus_overtime_plus_killwait() -> None:
    assert enforcement_lag({"OverTimeLimit": "0 min", "KillWait": "5 sec"}) == LIMIT_CHECK_PERIOD + 5
    assert enforcement_lag({"OverTimeLimit": "5 min", "KillWait": "30 sec"}) == LIMIT_CHECK_PERIOD + 300 + 30
    assert enforcement_lag({}) == LIMIT_CHECK_PERIOD + 30  # Slurm's defaults: OverTimeLimit 0, KillWait 30 s
    assert enforcement_lag({"OverTimeLimit": "UNLIMITED"}) is None


def test_the_wait_covers_a_late_enforcement_and_the_timeout_job_asks_for_one_minute() -> None:
    h = base_harness(described(OverTimeLimit="2 min", KillWait="30 sec"))
    assert h.timings.wait == WAIT + LIMIT_CHECK_PERIOD + 120 + 30
    spec = h.spec("timeout")
    assert spec is not None and spec.time_limit == TIME_LIMIT == 60


def test_a_cluster_that_never_times_out_a_job_has_no_timeout_job() -> None:
    h = base_harness(described(OverTimeLimit="UNLIMITED"))
    assert h.spec("timeout") is None and h.spec("sleep") is not None
