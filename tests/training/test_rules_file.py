"""examples/rules/training.yaml: what each interruption of a training job leads to."""

from __future__ import annotations

from pathlib import Path

import pytest

from dispatch.outcome import Cause, State
from dispatch.rules import RuleAction, RuleSet

RULES = Path(__file__).resolve().parents[2] / "examples" / "rules" / "training.yaml"


@pytest.mark.parametrize(
    ("cause", "action", "rule"),
    [
        (Cause.PREEMPTED, RuleAction.RESUBMIT, "evicted"),
        (Cause.NODE_LOST, RuleAction.RESUBMIT, "evicted"),
        (Cause.CESSATION, RuleAction.RESUBMIT, "evicted"),
        (Cause.TIMEOUT, RuleAction.RESUBMIT, "time-limit"),
        (Cause.OUT_OF_MEMORY, RuleAction.ESCALATE, "out-of-memory"),
        (Cause.EXIT, RuleAction.ESCALATE, "program-error"),
    ],
)
def test_each_cause_has_its_action(cause: Cause, action: RuleAction, rule: str) -> None:
    rules = RuleSet.load(RULES)
    found, _ = rules.find(State.FAILED, cause, 1 if cause is Cause.EXIT else None, 1, {})
    assert found is not None and found.action is action and found.name == rule


def test_limits_and_backoff_bound_the_recoveries() -> None:
    rules = RuleSet.load(RULES)
    evicted = next(r for r in rules.rules if r.name == "evicted")
    assert [evicted.delay(n) for n in (0, 1, 2)] == [2.0, 4.0, 8.0] and evicted.delay(20) == 300.0
    found, why = rules.find(State.FAILED, Cause.PREEMPTED, None, 16, {"rule:evicted": 15, "total": 15})
    assert found is None and "limit" in why
    found, why = rules.find(State.FAILED, Cause.TIMEOUT, None, 11, {"cause:timeout": 10, "total": 10})
    assert found is None and "timeout" in why
    found, why = rules.find(State.FAILED, Cause.NODE_LOST, None, 21, {"total": 20})
    assert found is None and "total" in why
    assert rules.find(State.FAILED, Cause.LAUNCH_FAILED, None, 1, {})[0] is None  # unmatched: escalate
