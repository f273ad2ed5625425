"""Progress and stalls on Kubeflow against the test cluster: rank 0's ``dispatch.job.progress`` (a real process)
posts to the Trainer's status server, the report reaches the supervisor through the TrainJob's
``status.trainerStatus``, a silence past ``stalledAfter`` ends the TrainJob, and the resubmission's pods avoid the
nodes it ran on (a required node affinity the scheduler honours).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dispatch.capabilities import Capability
from dispatch.cluster import Cluster
from dispatch.errors import SpecError
from dispatch.kubeflow import render as rd
from dispatch.kubeflow.backend import KubeflowBackend
from dispatch.kubeflow.progress import trainer_progress
from dispatch.kubeflow.settings import KubeflowSettings
from dispatch.outcome import Cause, State
from dispatch.records import MemoryRecords
from dispatch.records.model import Action
from dispatch.spi import StartRequest
from dispatch.supervise import Supervisor
from dispatch.trainerstatus import request_body
from dispatch_kubetest.resources import TRAINJOB

from .harness import FakeCluster, job_spec
from .statusserver import StatusServer
from .test_archive import caught_up

SRC = str(Path(__file__).resolve().parents[2] / "src")
BOUND = 60.0
RULES = {
    "unmatched": "escalate",
    "rules": [
        {
            "name": "hang",
            "cause": ["stalled"],
            "stalledAfter": f"{BOUND:g}s",
            "action": "resubmit",
            "limit": 1,
            "excludeBlamedNodes": True,
        }
    ],
}
REPORT = (
    "import sys; from dispatch import job\n"
    "if not job.progress(int(sys.argv[1]), total=100, loss=0.25): sys.exit('progress was not queued')\n"
)


# ---- the pieces --------------------------------------------------------------------------------------------


def test_a_report_travels_as_the_trainers_metrics_and_reads_back_for_its_execution_only() -> None:
    report = {"rank": 0, "step": 30, "total": 100, "at": 1_800_000_010.5, "execution": "j1.1.1.0.0"}
    report.update(first={"step": 10, "at": 1_800_000_000.5}, metrics={"loss": 0.25, "gnorm": None})
    body = request_body(report)
    status = body["trainerStatus"]
    assert isinstance(status, dict)
    assert status["progressPercentage"] == 30 and status["lastUpdatedTime"] == "2027-01-15T08:00:10Z"
    assert status["estimatedRemainingSeconds"] == 35  # 70 steps at 2 steps/s
    trainjob = {"status": {"trainerStatus": status}}
    (p,) = trainer_progress(trainjob, "j1.1.1.0.0", None)
    assert (p.rank, p.step, p.total, p.at, p.first_step, p.first_at) == (
        0,
        30,
        100,
        1_800_000_010.5,
        10,
        1_800_000_000.5,
    )
    assert dict(p.metrics) == {"loss": 0.25, "gnorm": None}
    assert trainer_progress(trainjob, "j1.1.2.0.0", None) == ()  # an earlier execution's status is not this one's


def test_a_status_from_the_kubeflow_sdk_counts_from_the_executions_start() -> None:
    trainjob = {"status": {"trainerStatus": {"progressPercentage": 40, "lastUpdatedTime": "2027-01-15T08:00:10Z"}}}
    (p,) = trainer_progress(trainjob, "any", 1_800_000_000.0)
    assert (p.step, p.total, p.at) == (40, 100, 1_800_000_010.0)
    assert trainer_progress(trainjob, "any", 1_800_000_011.0) == ()  # older than the execution
    assert trainer_progress({"status": {}}, "any", None) == ()


def test_excluded_nodes_become_a_required_affinity_on_the_trainer_pods_only() -> None:
    runtime = {
        "spec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {"name": "initializer", "template": {"spec": {"template": {"spec": {}}}}},
                        {
                            "name": "node",
                            "template": {
                                "spec": {
                                    "template": {
                                        "spec": {
                                            "affinity": {
                                                "nodeAffinity": {
                                                    "requiredDuringSchedulingIgnoredDuringExecution": {
                                                        "nodeSelectorTerms": [
                                                            {
                                                                "matchExpressions": [
                                                                    {"key": "pool", "operator": "In", "values": ["a"]}
                                                                ]
                                                            },
                                                            {
                                                                "matchExpressions": [
                                                                    {"key": "pool", "operator": "In", "values": ["b"]}
                                                                ]
                                                            },
                                                        ]
                                                    }
                                                }
                                            }
                                        }
                                    }
                                }
                            },
                        },
                    ]
                }
            }
        }
    }
    spec = job_spec("sleep")
    req = StartRequest("j1", 2, "m" * 8, spec, ("worker-1", "worker-0"))
    out = rd.runtime_copy(runtime, "tj", KubeflowSettings(), req)
    jobs = {rj["name"]: rj for rj in out["spec"]["template"]["spec"]["replicatedJobs"]}
    assert "affinity" not in jobs["initializer"]["template"]["spec"]["template"]["spec"]
    terms = jobs["node"]["template"]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert len(terms) == 2  # each of the runtime's own terms keeps its requirement and gains the exclusion
    for term in terms:
        assert term["matchFields"] == [  # one value each: the API server refuses a node field selector of more
            {"key": "metadata.name", "operator": "NotIn", "values": ["worker-0"]},
            {"key": "metadata.name", "operator": "NotIn", "values": ["worker-1"]},
        ]
        assert term["matchExpressions"][0]["key"] == "pool"
    with pytest.raises(SpecError, match="not a Kubernetes node name"):
        rd.runtime_copy(runtime, "tj", KubeflowSettings(), StartRequest("j1", 2, "m" * 8, spec, ("Bad Node",)))


# ---- end to end --------------------------------------------------------------------------------------------


class Rig:
    """The test cluster with its clock at the wall clock (the rank's reports carry wall-clock times), the
    Trainer's status server, a writable backend declaring ``trainerStatus`` and one supervisor."""

    def __init__(self, tmp: Path) -> None:
        self.c = FakeCluster(tmp, nodes=4)
        self.c.server.clock.set(datetime.now(UTC).replace(microsecond=0))
        self.status = StatusServer(self.c, tmp)
        b = self.c.backend(trainerStatus=True)
        assert isinstance(b, KubeflowBackend)
        self.b = b
        self.records = MemoryRecords()
        self.cluster = Cluster("kf", b, self.records, self.c.clock)
        self.sup = Supervisor(b, self.records, clock=self.c.clock, owner="sup-kf", poll=1, cluster="kf")

    def close(self) -> None:
        self.b.close()
        self.status.close()
        self.c.close()

    def sid(self, job_id: str, n: int) -> str:
        job = self.records.get(job_id)
        sid = job.submission(n).scheduler_id if len(job.submissions) >= n else None
        return sid or ""

    def report(self, job_id: str, step: int) -> float:
        """Rank 0 of the current execution reports ``step`` (a real process, as in a pod); the report's time."""
        sub = self.records.get(job_id).current
        assert sub is not None and sub.scheduler_id is not None
        ex = sub.executions[-1]
        before = len(self.status.accepted)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DISPATCH_", "KUBEFLOW_"))}
        env.update(self.status.pod_env(sub.scheduler_id))
        env.update(DISPATCH_RANK="0", DISPATCH_EXECUTION=ex.identity, PYTHONPATH=SRC)
        subprocess.run([sys.executable, "-c", REPORT, str(step)], env=env, check=True, timeout=120)
        assert len(self.status.accepted) == before + 1, "the status server did not get the report"
        metrics = {m["name"]: m["value"] for m in self.status.accepted[-1]["trainerStatus"]["metrics"]}
        assert metrics["dispatch.execution"] == ex.identity
        return float(metrics["dispatch.at"])

    def until(self, pred: Callable[[], bool], what: str, within: float = 300.0) -> None:
        """Cycle, a second of fake time each, until ``pred()``: bounded by real time (the watches deliver in real
        time, slower on a loaded machine), not by a number of cycles."""
        deadline = time.monotonic() + within
        while True:
            self.sup.cycle()
            if pred():
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"not reached within {within:g}s: {what}")
            self.c.tick(1.0)

    def advance_to(self, t: float) -> None:
        now = self.c.clock.now()
        assert t > now, f"the fake clock ({now:.0f}) is already past {t:.0f}"
        self.c.tick(t - now)


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    try:
        yield r
    finally:
        r.close()


def _progress(rig: Rig, job_id: str) -> Any:
    ev = rig.b.inspect(rig.sid(job_id, 1))
    return ev.executions[-1].progress if ev.executions else ()


def test_capabilities_follow_the_declared_status_server(rig: Rig) -> None:
    caps = rig.b.capabilities()
    assert caps[Capability.PROGRESS_REPORTING].yes and caps[Capability.NODE_EXCLUSION].yes
    # the nodes a resubmission may be left with (the supervisor escalates one that excludes too many)
    assert rig.b.schedulable_nodes(job_spec("sleep")) == {f"worker-{i}" for i in range(4)}
    other = rig.c.backend()
    try:
        answer = other.capabilities()[Capability.PROGRESS_REPORTING]
        assert not answer.yes and "trainerStatus" in answer.reason
    finally:
        other.close()  # type: ignore[attr-defined]


def test_a_stall_ends_the_trainjob_and_the_resubmission_avoids_its_nodes(rig: Rig) -> None:
    job_id = rig.cluster.submit(job_spec("sleep", nodes=2), RULES)
    rig.until(lambda: bool(rig.c.control.pods_of(rig.sid(job_id, 1))), "pods run")

    def running() -> bool:
        execs = rig.records.get(job_id).submission(1).executions
        return bool(execs) and execs[-1].outcome.state is State.RUNNING

    caught_up(rig.c, rig.sup, running, "the execution recorded running", within=120.0)
    first_nodes = sorted(p["spec"]["nodeName"] for p in rig.c.control.pods_of(rig.sid(job_id, 1)))
    assert len(first_nodes) == 2

    # progress reaches the supervisor: the watch delivers the TrainJob's new status, read as rank 0's report
    at = rig.report(job_id, 7)
    caught_up(rig.c, rig.sup, lambda: [p.step for p in _progress(rig, job_id)] == [7], "the report read", within=120.0)
    (p,) = _progress(rig, job_id)
    assert (p.rank, p.total, p.at, dict(p.metrics)) == (0, 100, at, {"loss": 0.25})

    # silent for less than the bound: running, whatever the number of cycles (the watch re-reads it each one)
    rig.advance_to(at + BOUND - 5)
    for _ in range(3):
        rig.sup.cycle()
    job = rig.records.get(job_id)
    assert job.state is State.RUNNING and not any(i.action is Action.STOP for i in job.intents)

    # past the bound: ended by the supervisor, recorded stalled, resubmitted away from the nodes it ran on
    rig.advance_to(at + BOUND + 5)
    rig.until(lambda: len(rig.records.get(job_id).submissions) >= 2, "the stall resubmitted")
    job = rig.records.get(job_id)
    stop = next(i for i in job.intents if i.action is Action.STOP)
    assert stop.args["silentFor"] > BOUND and stop.args["ranks"] == [0]
    first = job.submission(1).executions[-1]
    assert (first.outcome.state, first.outcome.cause) == (State.FAILED, Cause.STALLED)
    assert sorted(first.nodes) == first_nodes
    start = next(i for i in job.intents if i.action is Action.START and i.submission == 2)
    assert sorted(start.args["exclude"]) == first_nodes
    ended = rig.c.control.get(TRAINJOB, rig.sid(job_id, 1))
    assert ended is not None and ended["spec"]["suspend"] is True
    assert "dispatch.io/stop-requested" in ended["metadata"]["annotations"]

    rig.until(lambda: len(rig.c.control.pods_of(rig.sid(job_id, 2))) == 2, "the resubmission runs")
    second_nodes = {p["spec"]["nodeName"] for p in rig.c.control.pods_of(rig.sid(job_id, 2))}
    assert second_nodes.isdisjoint(first_nodes), (second_nodes, first_nodes)
    assert len(second_nodes) == 2
