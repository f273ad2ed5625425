"""Metrics and health of a supervisor process: scraped over HTTP, as Prometheus would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from dispatch.clock import FakeClock
from dispatch.cluster import Cluster
from dispatch.extensions import Image
from dispatch.memory import MemoryScheduler, backend
from dispatch.outcome import Cause, State
from dispatch.records import MemoryRecords
from dispatch.spec import JobSpec
from dispatch.supervise import Supervisor
from dispatch.supervise.archive import ArchiveSettings
from dispatch.supervise.metrics import ENDED_CAUSES, Metrics

SRC = str(Path(__file__).resolve().parents[2] / "src")


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def cycles(text: str) -> float:
    """The cycle count in a Prometheus scrape (0 before the first)."""
    for line in text.splitlines():
        if line.startswith("dispatch_supervisor_cycle_seconds_count "):
            return float(line.split()[1])
    return 0.0


def run_cycles(metrics: Metrics, sup: Supervisor, clock: FakeClock, n: int) -> None:
    """``n`` cycles, 10 s of the fake clock apart, each accounted for in ``metrics``."""
    for _ in range(n):
        metrics.cycle(sup.cycle(), 0.01)
        clock.advance(10)


def test_a_supervisor_process_serves_metrics_and_health(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DISPATCH_", "XDG_"))}
    env.update(PYTHONPATH=SRC, XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_STATE_HOME=str(tmp_path / "state"))
    argv = [sys.executable, "-m", "dispatch.supervise", "--adapter", "memory", "--records", str(tmp_path / "r.db")]
    proc = subprocess.Popen(
        [*argv, "--poll", "0.5", "--metrics-port", "0", "--log-json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = ""
        while not url:
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else ""
            url = json.loads(line).get("url", "")
        assert url.startswith("http://127.0.0.1:")  # loopback unless told otherwise
        base = url.rsplit("/", 1)[0]
        deadline = time.monotonic() + 20
        while True:
            code, text = get(url)
            if cycles(text) >= 2:
                break
            assert time.monotonic() < deadline, text
            time.sleep(0.2)
        assert code == 200
        for name in (
            "dispatch_supervisor_scheduler_calls_per_cycle",
            "dispatch_supervisor_scheduler_calls_total",
            "dispatch_supervisor_record_writes_total",
            "dispatch_supervisor_lease_takeovers_total",
            "dispatch_supervisor_records_seconds_bucket",
            "dispatch_supervisor_last_cycle_timestamp_seconds",
        ):
            assert name in text, name
        assert get(base + "/healthz") == (200, "ok\n")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
        assert proc.returncode == 0
        assert proc.stderr is not None
        logs = [json.loads(x) for x in proc.stderr.read().splitlines()]
        assert logs and all({"ts", "level", "owner", "msg"} <= set(x) for x in logs)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_jobs_decisions_and_health_as_cycles_go_and_stop() -> None:
    clock = FakeClock()
    sched = MemoryScheduler(clock, "slurm", nodes=4, min_job_age=300, node_loss_window=60)
    b = backend(sched)
    records = MemoryRecords()
    cluster = Cluster("memory", b, records, clock)
    rules = {"rules": [{"name": "evicted", "cause": ["preempted"], "action": "resubmit", "limit": 1}]}
    job = cluster.submit(JobSpec(command=("sleep", "500")), rules)
    cluster.submit(JobSpec(command=("sleep", "500")))
    now = [0.0]  # the health clock, moved by the test: a loaded machine cannot age the last cycle
    metrics = Metrics(stale_after=0.5, monotonic=lambda: now[0])
    sup = Supervisor(b, metrics.timed(records), clock=clock, owner="sup-m", poll=10)
    host, port = metrics.serve("127.0.0.1", 0)
    try:
        run_cycles(metrics, sup, clock, 2)
        sched.control.preempt(records.get(job).current.scheduler_id)  # type: ignore[union-attr]
        run_cycles(metrics, sup, clock, 2)
        code, text = get(f"http://{host}:{port}/metrics")
        assert code == 200
        assert 'dispatch_supervisor_jobs{cluster="memory",state="running"} 2.0' in text
        assert 'cause=""' not in text and "_created" not in text
        assert 'dispatch_supervisor_decisions_total{action="resubmit",cluster="memory",rule="evicted"} 1.0' in text
        assert 'dispatch_supervisor_records_seconds_count{op="to_supervise"} 4.0' in text
        assert get(f"http://{host}:{port}/healthz")[0] == 200
        now[0] += 0.7  # no cycle for longer than stale_after
        code, text = get(f"http://{host}:{port}/healthz")
        assert code == 503 and "unhealthy" in text
    finally:
        metrics.close()


def scrape(metrics: Metrics, prefix: str) -> dict[str, float]:
    """The samples of ``metrics`` whose line starts with ``prefix``, by their name and labels."""
    from prometheus_client import generate_latest

    text = generate_latest(metrics.registry).decode()
    return {ln.rsplit(" ", 1)[0]: float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines() if ln.startswith(prefix)}


def test_a_resubmission_whose_start_fails_is_not_counted_until_one_lands() -> None:
    """``decisions_total`` counts decisions carried out: a resubmit decision whose start the scheduler did not
    take counts nothing; it counts once, when a later start of the new submission lands."""
    clock = FakeClock()
    sched = MemoryScheduler(clock, "slurm", nodes=4, min_job_age=300, node_loss_window=60)
    b = backend(sched)
    records = MemoryRecords()
    cluster = Cluster("hpc", b, records, clock)
    rules = {"rules": [{"name": "evicted", "cause": ["preempted"], "action": "resubmit", "limit": 1}]}
    job = cluster.submit(JobSpec(command=("sleep", "500")), rules)
    metrics = Metrics(stale_after=60)
    sup = Supervisor(b, records, clock=clock, owner="sup-m", poll=10, cluster="hpc")
    run_cycles(metrics, sup, clock, 2)
    for _ in range(20):  # the resubmission's starts do not reach the cluster for a while
        sched.control.inject("start", "unavailable")
    sched.control.preempt(records.get(job).current.scheduler_id)  # type: ignore[union-attr]
    report = sup.cycle()
    metrics.cycle(report, 0.01)
    decided = records.get(job)
    assert [d.action for d in decided.decisions] == ["resubmit"] and len(decided.submissions) == 2
    assert decided.submissions[1].scheduler_id is None  # decided, not carried out
    counted = scrape(metrics, "dispatch_supervisor_decisions_total")
    assert not [k for k in counted if 'action="resubmit"' in k], counted
    sched.faults.clear()  # the cluster is reachable again
    clock.advance(10)
    run_cycles(metrics, sup, clock, 3)
    assert records.get(job).submissions[1].scheduler_id is not None
    series = 'dispatch_supervisor_decisions_total{action="resubmit",cluster="hpc",rule="evicted"}'
    assert scrape(metrics, "dispatch_supervisor_decisions_total") == {series: 1.0}


def test_job_series_carry_the_cluster_and_read_zero_once_empty() -> None:
    """A (state, cause) series once exported stays, reading 0 when no job of the cluster is in it."""
    clock = FakeClock()
    sched = MemoryScheduler(clock, "slurm", nodes=4, min_job_age=300, node_loss_window=60)
    b = backend(sched)
    records = MemoryRecords()
    cluster = Cluster("hpc", b, records, clock)
    jobs = [cluster.submit(JobSpec(command=("sleep", "500"))) for _ in range(2)]
    metrics = Metrics(stale_after=60)
    sup = Supervisor(b, records, clock=clock, owner="sup-m", poll=10, cluster="hpc")
    run_cycles(metrics, sup, clock, 2)
    running = 'dispatch_supervisor_jobs{cluster="hpc",state="running"}'
    assert scrape(metrics, "dispatch_supervisor_jobs{")[running] == 2.0
    for job in jobs:
        sched.control.finish(records.get(job).current.scheduler_id)  # type: ignore[union-attr]
    run_cycles(metrics, sup, clock, 3)
    assert all(records.get(j).closed for j in jobs)
    assert scrape(metrics, "dispatch_supervisor_jobs{")[running] == 0.0
    assert scrape(metrics, "dispatch_supervisor_escalations_total") == {}  # succeeded: nothing escalated


def test_the_output_archive_and_its_retention_are_counted() -> None:
    """A preempted execution's log is archived (``archive_entries_total{status}``); once the job is closed and
    the entry older than ``keep``, retention deletes it (``archive_pruned_total``)."""
    clock = FakeClock()
    sched = MemoryScheduler(clock, "kubeflow", nodes=2)
    b = backend(sched)
    records = MemoryRecords()
    cluster = Cluster("memory", b, records, clock)
    job = cluster.submit(JobSpec(command=("sleep", "500"), extensions=(Image("registry.example/train:1"),)))
    metrics = Metrics(stale_after=60)
    sup = Supervisor(b, metrics.timed(records), clock=clock, owner="sup-m", poll=10, archive=ArchiveSettings(keep=3600))
    host, port = metrics.serve("127.0.0.1", 0)
    try:
        run_cycles(metrics, sup, clock, 2)
        sched.control.preempt(records.get(job).current.scheduler_id)  # type: ignore[union-attr]
        run_cycles(metrics, sup, clock, 3)  # no rule: the preemption is escalated and the job closed
        assert records.get(job).closed and len(records.outputs([job])) == 1
        text = get(f"http://{host}:{port}/metrics")[1]
        assert 'dispatch_supervisor_archive_entries_total{status="kept"} 1.0' in text
        assert "dispatch_supervisor_archive_pruned_total 0.0" in text
        clock.advance(2 * 3600)  # past keep, and past the hour between two prunes
        metrics.cycle(sup.cycle(), 0.01)
        assert records.outputs([job]) == []
        text = get(f"http://{host}:{port}/metrics")[1]
        assert "dispatch_supervisor_archive_pruned_total 1.0" in text
        assert "dispatch_supervisor_archive_prune_errors_total 0.0" in text
        assert 'dispatch_supervisor_records_seconds_count{op="prune_outputs"} 2.0' in text
    finally:
        metrics.close()


def test_stalls_and_resubmissions_are_counted_by_cause_from_zero() -> None:
    """``stalled_executions_total`` counts each execution recorded as stalled once; ``resubmissions_total`` counts
    the resubmissions carried out by the cause decided on, every ended cause reading 0 from the first cycle (so
    that PromQL's ``increase()`` sees the first one)."""
    clock = FakeClock()
    sched = MemoryScheduler(clock, "slurm", nodes=4, min_job_age=300, node_loss_window=60)
    b = backend(sched)
    records = MemoryRecords()
    cluster = Cluster("hpc", b, records, clock)
    rules = {
        "rules": [
            {"name": "hung", "cause": ["stalled"], "stalledAfter": "60s", "action": "resubmit", "limit": 1},
            {"name": "evicted", "cause": ["preempted"], "action": "resubmit", "limit": 1},
        ]
    }
    hung = cluster.submit(JobSpec(command=("hang", "30")), rules)
    evicted = cluster.submit(JobSpec(command=("sleep", "5000")), rules)
    metrics = Metrics(stale_after=60)
    metrics.set_poll(10)
    assert metrics.stale_after == 40 and scrape(metrics, "dispatch_supervisor_poll_seconds") == {
        "dispatch_supervisor_poll_seconds": 10.0
    }
    sup = Supervisor(b, records, clock=clock, owner="sup-m", poll=10, cluster="hpc")
    run_cycles(metrics, sup, clock, 1)
    resubmissions = scrape(metrics, "dispatch_supervisor_resubmissions_total")
    assert resubmissions == {
        f'dispatch_supervisor_resubmissions_total{{cause="{c}",cluster="hpc"}}': 0.0 for c in ENDED_CAUSES
    }
    assert {"preempted", "stalled", "node-lost", "exit"} <= set(ENDED_CAUSES) and "queued" not in ENDED_CAUSES
    stalled = 'dispatch_supervisor_stalled_executions_total{cluster="hpc"}'
    assert scrape(metrics, "dispatch_supervisor_stalled_executions_total") == {stalled: 0.0}
    sched.control.preempt(records.get(evicted).current.scheduler_id)  # type: ignore[union-attr]
    for _ in range(30):  # the hang's reports stop after 30 s; the stall is judged after 60 s more
        run_cycles(metrics, sup, clock, 1)
        if all(len(j.submissions) == 2 and j.submissions[1].scheduler_id for j in map(records.get, (hung, evicted))):
            break
    job = records.get(hung)
    assert [(s.outcome.state, s.outcome.cause) for s in job.submissions[:1] if s.outcome] == [
        (State.FAILED, Cause.STALLED)
    ], job.to_json()
    assert len(job.submissions) == 2 and len(records.get(evicted).submissions) == 2
    assert scrape(metrics, "dispatch_supervisor_stalled_executions_total") == {stalled: 1.0}
    counted = {k: v for k, v in scrape(metrics, "dispatch_supervisor_resubmissions_total").items() if v}
    assert counted == {
        'dispatch_supervisor_resubmissions_total{cause="preempted",cluster="hpc"}': 1.0,
        'dispatch_supervisor_resubmissions_total{cause="stalled",cluster="hpc"}': 1.0,
    }


class _Watching:
    """A backend with a watch cache, as the supervisor sees it (the Kubeflow adapter's two methods)."""

    def __init__(self) -> None:
        self.failures = {("pods", "401 Unauthorized"): 3, ("nodes", "ReadTimeout"): 1}
        self.age = 0.0

    def watch_failures(self) -> dict[tuple[str, str], int]:
        return dict(self.failures)

    def watch_age(self) -> float:
        return self.age


def test_a_backends_watch_failures_and_cache_age_are_scraped_as_they_are_now() -> None:
    metrics = Metrics(stale_after=60)
    watching = _Watching()
    metrics.watch(watching)
    metrics.watch(object())  # a backend without a watch cache adds nothing
    host, port = metrics.serve("127.0.0.1", 0)
    try:
        text = get(f"http://{host}:{port}/metrics")[1]
        assert 'dispatch_supervisor_watch_failures_total{reason="401 Unauthorized",watch="pods"} 3.0' in text
        assert 'dispatch_supervisor_watch_failures_total{reason="ReadTimeout",watch="nodes"} 1.0' in text
        assert "dispatch_supervisor_watch_age_seconds 0.0" in text
        watching.failures[("pods", "401 Unauthorized")] = 5
        watching.age = 42.0
        text = get(f"http://{host}:{port}/metrics")[1]
        assert 'dispatch_supervisor_watch_failures_total{reason="401 Unauthorized",watch="pods"} 5.0' in text
        assert "dispatch_supervisor_watch_age_seconds 42.0" in text
    finally:
        metrics.close()
