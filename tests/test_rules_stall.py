"""The stall rule's field: stalledAfter is a duration on rules naming the cause stalled, and is refused where
progress does not reach the supervisor."""

from __future__ import annotations

import pytest

from dispatch.capabilities import Capability, no
from dispatch.clock import FakeClock
from dispatch.errors import ConfigError
from dispatch.memory import MemoryScheduler, backend
from dispatch.rules import RuleSet


def test_stalled_after_is_read_and_written_back() -> None:
    rules = RuleSet.from_data(
        {
            "rules": [
                {"cause": ["stalled"], "stalledAfter": "10m", "action": "resubmit", "limit": 3},
                {"cause": ["stalled", "node-lost"], "stalledAfter": 120, "action": "resubmit"},
            ]
        }
    )
    assert [r.stalled_after for r in rules.rules] == [600.0, 120.0]
    assert rules.stall_bound == 120.0
    assert RuleSet.from_data(rules.to_json()) == rules


@pytest.mark.parametrize(
    ("rule", "path", "says"),
    [
        ({"cause": "stalled", "action": "resubmit"}, "rules[0].stalledAfter", "is required"),
        ({"cause": "exit", "stalledAfter": "1m", "action": "resubmit"}, "rules[0].stalledAfter", "includes stalled"),
        ({"cause": "stalled", "stalledAfter": "soon", "action": "resubmit"}, "rules[0].stalledAfter", "duration"),
        ({"cause": "stalled", "stalledAfter": 0, "action": "resubmit"}, "rules[0].stalledAfter", "longer than zero"),
    ],
)
def test_a_wrong_stall_rule_names_its_key(rule: dict[str, object], path: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as info:
        RuleSet.from_data({"rules": [rule]})
    assert info.value.path == path


def test_a_stall_rule_is_refused_where_progress_does_not_reach_the_supervisor() -> None:
    b = backend(MemoryScheduler(FakeClock(), "slurm"))
    caps = b.capabilities().with_answer(Capability.PROGRESS_REPORTING, no("this cluster carries no progress"))
    rules = RuleSet.from_data({"rules": [{"cause": "stalled", "stalledAfter": "5m", "action": "resubmit"}]})
    with pytest.raises(ConfigError, match="ProgressReporting is no on this cluster: this cluster carries no progress"):
        rules.check_against(b, caps)
