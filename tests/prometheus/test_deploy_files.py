"""deploy/prometheus/ and deploy/grafana/ name only metrics a supervisor exports, and cover what they promise:
the alerts each have a unit test, the dashboard is JSON whose queries read the supervisor's main metrics."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from dispatch.clock import FakeClock
from dispatch.memory import MemoryScheduler, backend
from dispatch.records import MemoryRecords
from dispatch.supervise import Supervisor
from dispatch.supervise.metrics import Metrics

from .prom import DEPLOY, ROOT

DASHBOARD = ROOT / "deploy" / "grafana" / "dispatch-supervisor.json"
METRIC = re.compile(r"\bdispatch_supervisor_\w+")
ALERTS = {
    "DispatchRunStalled",
    "DispatchJobHeldByAdmin",
    "DispatchSupervisorNotCycling",
    "DispatchResubmissionsOverBudget",
}


class _Watching:
    """A backend with a watch cache (its metrics exist only then)."""

    def watch_failures(self) -> dict[tuple[str, str], int]:
        return {}

    def watch_age(self) -> float:
        return 0.0


def exported() -> set[str]:
    """Every series name a supervisor's ``/metrics`` can serve (a counter's ``_total``, a histogram's
    ``_bucket``, ``_sum`` and ``_count``), whether or not it has a sample yet."""
    clock = FakeClock()
    b = backend(MemoryScheduler(clock, "slurm", nodes=2))
    metrics = Metrics(stale_after=60)
    metrics.watch(_Watching())
    sup = Supervisor(b, metrics.timed(MemoryRecords()), clock=clock, owner="sup-m", poll=10)
    metrics.cycle(sup.cycle(), 0.01)
    names = set()
    for family in metrics.registry.collect():
        if family.type == "counter":
            names.add(family.name + "_total")
        elif family.type == "histogram":
            names |= {family.name + suffix for suffix in ("_bucket", "_sum", "_count")}
        else:
            names.add(family.name)
    return names


def dashboard_queries() -> list[str]:
    data = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in data["panels"] for t in p["targets"]]


def test_the_alerts_name_only_exported_metrics_and_each_has_a_unit_test() -> None:
    rules = yaml.safe_load((DEPLOY / "dispatch-alerts.yml").read_text())
    alerts = {r["alert"]: r for g in rules["groups"] for r in g["rules"]}
    assert set(alerts) == ALERTS
    names = exported()
    for name, rule in alerts.items():
        used = set(METRIC.findall(rule["expr"]))
        assert used and used <= names, (name, used - names)
        assert "job_id" not in rule["expr"] and rule["labels"]["severity"] in {"warning", "critical"}
    tests = yaml.safe_load((DEPLOY / "dispatch-alerts.test.yml").read_text())
    assert tests["rule_files"] == ["dispatch-alerts.yml"]
    firing = {case["alertname"] for t in tests["tests"] for case in t["alert_rule_test"] if case.get("exp_alerts")}
    assert firing == ALERTS  # every alert is shown firing by a unit test (and promtool shows when it does not)


def test_the_dashboard_is_json_whose_queries_read_the_supervisors_metrics() -> None:
    data = json.loads(DASHBOARD.read_text())
    assert data["uid"] == "dispatch-supervisor" and data["panels"]
    assert len({p["id"] for p in data["panels"]}) == len(data["panels"])
    variables = {v["name"] for v in data["templating"]["list"]}
    assert variables == {"datasource", "cluster"}
    queries = dashboard_queries()
    used = {m for q in queries for m in METRIC.findall(q)}
    names = exported()
    assert used <= names, used - names
    for expected in (
        "dispatch_supervisor_jobs",
        "dispatch_supervisor_stalled_executions_total",
        "dispatch_supervisor_resubmissions_total",
        "dispatch_supervisor_decisions_total",
        "dispatch_supervisor_cycle_seconds_bucket",
        "dispatch_supervisor_last_cycle_timestamp_seconds",
        "dispatch_supervisor_poll_seconds",
    ):
        assert expected in used, expected
    for q in queries:  # the cluster filter wherever the series carry the label
        if any(m in q for m in ("_jobs{", "_stalled_", "_resubmissions_", "_decisions_", "_escalations_")):
            assert 'cluster=~"$cluster"' in q, q


def test_the_scrape_configuration_loads_the_alerts_and_names_the_job_they_expect() -> None:
    config = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    assert config["rule_files"] == ["dispatch-alerts.yml"]
    (job,) = config["scrape_configs"]
    assert job["job_name"] == "dispatch-supervisor"
    assert 'up{job="dispatch-supervisor"}' in (DEPLOY / "dispatch-alerts.yml").read_text()


def test_no_deploy_file_names_a_per_job_label() -> None:
    """Series are per cluster, state, cause, action, rule or operation, never per job (bounded cardinality)."""
    for path in [*DEPLOY.iterdir(), DASHBOARD]:
        text = Path(path).read_text()
        assert not re.search(r"\b(job_id|jobid|job_name|scheduler_id)\b\s*[=!~]", text), path
