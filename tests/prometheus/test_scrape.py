"""A real prometheus scraping a running ``dispatch supervise`` on the local adapter answers PromQL with what the
records hold: open jobs by state and cause (as ``dispatch status --json`` lists them), stalled executions and
resubmissions by cause (as the records API reads them), cycle durations; the shipped alert on a stall fires and
the one on a supervisor not cycling does not; every query of the shipped dashboard evaluates."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import dispatch
from dispatch.errors import Conflict, OutcomeUnknown
from dispatch.outcome import Cause, State
from dispatch.records import SQLiteRecords
from dispatch.records.model import JobRecord
from dispatch.resources import Resources
from dispatch.spec import JobSpec
from dispatch.supervise.metrics import ENDED_CAUSES

from .prom import DEPLOY, ROOT, Prometheus
from .test_deploy_files import dashboard_queries

pytestmark = pytest.mark.prometheus

SRC = str(ROOT / "src")
ENTRY = "import sys; from dispatch.cli.main import main; sys.exit(main())"
CLUSTER = "local"
POLL = 0.5
# Submission 1 reports progress once and then hangs (a collective that never returns); submission 2 runs on
# without reporting, so it is never judged stalled.
HANG = (
    "import time\n"
    "from dispatch import job\n"
    "if job.context().submission == 1:\n"
    "    job.progress(0, total=100)\n"
    "time.sleep(600)\n"
)
STALL_RULES = {
    "rules": [{"name": "hung", "cause": ["stalled"], "stalledAfter": "2s", "action": "resubmit", "limit": 1}]
}


@dataclass
class Supervise:
    """A ``dispatch supervise`` process whose standard output is read as it comes (a full pipe would stop it)."""

    proc: subprocess.Popen[str]
    lines: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                self.lines.append(json.loads(line))

    def cycles(self) -> int:
        return sum(1 for x in list(self.lines) if "cycle" in x)

    def metrics_target(self, timeout: float = 60.0) -> str:
        """``host:port`` of its /metrics, from its ``metrics`` event."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for x in list(self.lines):
                if x.get("event") == "metrics":
                    return str(x["url"]).removeprefix("http://").removesuffix("/metrics")
            assert self.proc.poll() is None, self.proc.stderr.read() if self.proc.stderr else ""
            time.sleep(0.1)
        pytest.fail("dispatch supervise announced no metrics address")


@pytest.fixture
def home(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str], dict[str, Any]]]:
    """A dispatch configuration with one local cluster offering one (pretend) GPU; every job stopped at the end."""
    settings = {"stateDir": str(tmp_path / "local"), "grace": "1s", "gpus": ["0"]}
    config = tmp_path / "config.toml"
    config.write_text(
        f'records = "{tmp_path / "records.db"}"\n'
        f'[clusters.{CLUSTER}]\nadapter = "local"\n[clusters.{CLUSTER}.settings]\n'
        f'stateDir = "{settings["stateDir"]}"\ngrace = "1s"\ngpus = ["0"]\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DISPATCH_", "XDG_"))}
    env.update(
        PYTHONPATH=SRC,
        XDG_CONFIG_HOME=str(tmp_path / "xdg-config"),
        XDG_STATE_HOME=str(tmp_path / "xdg-state"),
        NO_COLOR="1",
    )
    yield config, env, settings
    from dispatch.clock import SystemClock
    from dispatch.local import LocalBackend

    jobs = tmp_path / "local" / "jobs"
    b = LocalBackend(tmp_path / "local", SystemClock(), grace=1.0)
    for d in jobs.iterdir() if jobs.exists() else ():
        with contextlib.suppress(Exception):
            b.stop_job(d.name)


def wait_for(what: str, pred: Callable[[], bool], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            pytest.fail(f"not reached in {timeout:g}s: {what}")
        time.sleep(0.25)


def status(config: Path, env: dict[str, str]) -> Counter[tuple[str, str]]:
    """Open jobs by (state, cause), as ``dispatch status --json`` lists them (the records, not refreshed)."""
    argv = [sys.executable, "-c", ENTRY, "--config", str(config), "status", "--json", "--all", "--active"]
    done = subprocess.run([*argv, "--no-refresh"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return Counter((j["state"], j["cause"] or "") for j in json.loads(done.stdout) if j["cluster"] == CLUSTER)


def stalled_executions(jobs: list[JobRecord]) -> int:
    return sum(
        1
        for j in jobs
        for s in j.submissions
        for e in s.executions
        if (e.outcome.state, e.outcome.cause) == (State.FAILED, Cause.STALLED)
    )


def resubmissions(jobs: list[JobRecord]) -> Counter[str]:
    """Resubmit decisions carried out (the next submission exists on the scheduler), by cause."""
    done: Counter[str] = Counter()
    for j in jobs:
        for d in j.decisions:
            if d.action == "resubmit" and any(s.n == d.submission + 1 and s.scheduler_id for s in j.submissions):
                done[d.cause.value] += 1
    return done


def submit(cluster: dispatch.Cluster, spec: JobSpec, rules: dict[str, Any] | None = None) -> str:
    """``Cluster.submit`` beside a running supervisor: when the supervisor took the new job's lease before the
    submission's answer was written, the job is recorded and the supervisor carries the submission on."""
    try:
        return cluster.submit(spec, rules)
    except OutcomeUnknown as exc:
        return str(exc.job_id)


def hold(cluster: dispatch.Cluster, job: str) -> None:
    """``dispatch hold``, tried again when the supervisor wrote the record in between (a lost compare-and-set)."""
    for _ in range(10):
        try:
            cluster.operator.hold(job)
            return
        except Conflict:
            time.sleep(0.2)
    pytest.fail(f"could not hold job {job}: its record kept changing")


def test_prometheus_answers_with_what_the_records_hold(
    home: tuple[Path, dict[str, str], dict[str, Any]], start_prometheus: Callable[..., Prometheus]
) -> None:
    config, env, settings = home
    argv = [sys.executable, "-c", ENTRY, "--config", str(config), "supervise"]
    proc = subprocess.Popen(
        [*argv, "--poll", str(POLL), "--lease-ttl", "10", "--metrics-port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    sup = Supervise(proc)
    records = SQLiteRecords(config.parent / "records.db")
    try:
        prom = start_prometheus([sup.metrics_target()], rule_files=[DEPLOY / "dispatch-alerts.yml"])
        stalled = f'dispatch_supervisor_stalled_executions_total{{cluster="{CLUSTER}"}}'
        # Prometheus hands a new target to its scrapers within seconds (its discovery updates are throttled):
        # the counter's 0 must be scraped before the stall, or increase() has nothing to count from
        wait_for("the supervisor's first cycle is scraped", lambda: prom.values(stalled) == {(): 0.0})
        cluster = dispatch.open("local", adapter=settings, records=records, name=CLUSTER)
        env_job = {"DISPATCH_PROGRESS_INTERVAL": "0", "PYTHONPATH": SRC}
        hung = submit(cluster, JobSpec(command=(sys.executable, "-c", HANG), env=env_job), STALL_RULES)
        submit(cluster, JobSpec(command=("sleep", "600")))
        gpu = JobSpec(command=("sleep", "600"), resources=Resources(gpus_per_node=1))
        first = submit(cluster, gpu)
        wait_for("the first GPU job runs", lambda: records.get(first).state is State.RUNNING)
        waiting = [submit(cluster, gpu) for _ in range(2)]
        wait_for(
            "the other two wait for the GPU",
            lambda: all((records.get(j).state, records.get(j).cause) == (State.PENDING, Cause.QUEUED) for j in waiting),
        )
        hold(cluster, waiting[1])
        wait_for(
            "the hung job is ended as stalled and resubmitted",
            lambda: len(records.get(hung).submissions) == 2 and records.get(hung).state is State.RUNNING,
        )

        def jobs() -> dict[tuple[str, str], int]:
            return {
                k: int(v)
                for k, v in prom.values(
                    f'dispatch_supervisor_jobs{{cluster="{CLUSTER}"}} > 0', "state", "cause"
                ).items()
            }

        wait_for("Prometheus's open jobs are dispatch status's", lambda: jobs() == status(config, env))
        assert status(config, env) == {("running", ""): 3, ("pending", "queued"): 1, ("held", "held"): 1}

        every = records.jobs(active_only=False)
        assert stalled_executions(every) == 1 and resubmissions(every) == {"stalled": 1}
        wait_for("the stall is scraped", lambda: prom.values(stalled) == {(): 1.0})
        by_cause = f'dispatch_supervisor_resubmissions_total{{cluster="{CLUSTER}"}} > 0'
        assert prom.values(by_cause, "cause") == {("stalled",): 1.0}
        every_cause = f'count(dispatch_supervisor_resubmissions_total{{cluster="{CLUSTER}"}})'
        assert prom.values(every_cause) == {(): float(len(ENDED_CAUSES))}  # each from 0

        # cycle durations: every completed cycle observed once, none longer than the test
        scraped = prom.values("dispatch_supervisor_cycle_seconds_count")[()]
        assert 0 < scraped <= sup.cycles()
        mean = prom.values("dispatch_supervisor_cycle_seconds_sum / dispatch_supervisor_cycle_seconds_count")[()]
        assert 0 < mean < 5
        p95 = prom.values("histogram_quantile(0.95, rate(dispatch_supervisor_cycle_seconds_bucket[30s]))")[()]
        assert 0 < p95 <= 10
        assert prom.values("dispatch_supervisor_poll_seconds") == {(): POLL}

        # the shipped alerts, evaluated by this server on the live series
        def firing() -> dict[str, dict[str, str]]:
            return {a["labels"]["alertname"]: a["labels"] for a in prom.alerts() if a["state"] == "firing"}

        wait_for("DispatchRunStalled fires", lambda: "DispatchRunStalled" in firing())
        assert firing()["DispatchRunStalled"]["cluster"] == CLUSTER
        assert not [a for a in prom.alerts() if a["labels"]["alertname"] != "DispatchRunStalled"], prom.alerts()

        # bounded cardinality: no label names a job, whatever the number of jobs
        series = prom.query('{__name__=~"dispatch_supervisor_.*"}')
        labels = {k for x in series for k in x["metric"]}
        assert labels <= {
            "__name__",
            "instance",
            "job",
            "cluster",
            "state",
            "cause",
            "action",
            "rule",
            "op",
            "status",
            "le",
        }
        ids = {j.id for j in every} | {s.scheduler_id for j in every for s in j.submissions}
        assert not ids & {v for x in series for v in x["metric"].values()}
        print(f"{len(series)} dispatch_supervisor_* series for {len(every)} jobs")

        # the dashboard's queries, as Grafana sends them with every cluster chosen
        for q in dashboard_queries():
            expr = q.replace("$cluster", ".*").replace("$__rate_interval", "30s")
            prom.query(expr)  # evaluates (an error answer fails the test)
        assert prom.query('sum by (state, cause) (dispatch_supervisor_jobs{cluster=~".*"})')
    finally:
        records.close()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
