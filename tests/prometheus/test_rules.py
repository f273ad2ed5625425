"""deploy/prometheus/ as Prometheus's own tool reads it: the alert rules check, their unit tests pass, and the
example configuration loads them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .prom import DEPLOY, promtool

pytestmark = pytest.mark.prometheus


def test_the_alert_rules_check() -> None:
    done = promtool("check", "rules", "dispatch-alerts.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 4 rules found" in done.stdout + done.stderr


def test_the_alert_rules_pass_their_unit_tests() -> None:
    done = promtool("test", "rules", "dispatch-alerts.test.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr


def test_the_example_configuration_checks_with_its_rules() -> None:
    done = promtool("check", "config", "prometheus.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "dispatch-alerts.yml" in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("rule", "changed", "alert"),
    [
        ("_resubmissions_total[1h])) > 20", "_resubmissions_total[1h])) > 100", "DispatchResubmissionsOverBudget"),
        ('{cause="admin-held"}', '{cause=~"admin-held|held"}', "DispatchJobHeldByAdmin"),
        (
            "3 * dispatch_supervisor_poll_seconds",
            "30 * dispatch_supervisor_poll_seconds",
            "DispatchSupervisorNotCycling",
        ),
        ("_stalled_executions_total[15m]", "_stalled_executions_total[60m]", "DispatchRunStalled"),
    ],
)
def test_the_unit_tests_catch_a_changed_rule(tmp_path: Path, rule: str, changed: str, alert: str) -> None:
    """Each alert's expression, changed, fails its unit test: the tests pin what the alerts catch."""
    rules = (DEPLOY / "dispatch-alerts.yml").read_text()
    assert rules.count(rule) == 1
    (tmp_path / "dispatch-alerts.yml").write_text(rules.replace(rule, changed))
    shutil.copy(DEPLOY / "dispatch-alerts.test.yml", tmp_path)
    done = promtool("test", "rules", "dispatch-alerts.test.yml", cwd=tmp_path)
    assert done.returncode != 0, done.stdout + done.stderr
    assert alert in done.stdout + done.stderr
