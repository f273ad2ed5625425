"""The supervisor's recovery on the real control plane: a TrainJob preempted the way a real cluster preempts it is
readmitted (Kueue mode: real Kueue priority preemption, dispatch-admission at the readmission gate) or resubmitted
(plain mode: rank 0 evicted through the Eviction API) by rule, and the job ends once, succeeded, with no two
executions' pods running at the same time (sampled from the cluster every cycle).

Nothing is started here (scripts/k8s/controlplane-up.sh); each test has a namespace of its own.
"""

# ruff: noqa: F811  (the fixture control_plane is imported from test_controlplane)

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dispatch.clock import SYSTEM_CLOCK
from dispatch.cluster import Cluster
from dispatch.kubeflow import Mode
from dispatch.outcome import Cause, State
from dispatch.records import MemoryRecords
from dispatch.records.model import Action, IntentStatus
from dispatch.supervise import Supervisor

from .controlplane_harness import ControlPlaneCluster, cluster_in, job_spec
from .test_controlplane import control_plane  # noqa: F401

pytestmark = pytest.mark.controlplane


@pytest.fixture
def cluster(
    control_plane: dict[str, Any], tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[ControlPlaneCluster]:
    mode: Mode = request.param
    yield from cluster_in(control_plane, tmp_path, mode, "kueue")


class PodSampler:
    """The running pods of the namespace's TrainJobs, sampled as executions: (JobSet name, the attempt Kueue's
    admission check annotated the pods with). Two executions in one sample overlap."""

    def __init__(self, cluster: ControlPlaneCluster) -> None:
        self.cluster = cluster
        self.samples: list[set[tuple[str, str]]] = []

    def sample(self) -> None:
        out = self.cluster.k("get", "pods", "-n", self.cluster.ns, "-o", "json")
        running = {
            (
                p["metadata"].get("labels", {}).get("jobset.sigs.k8s.io/jobset-name", ""),
                p["metadata"].get("annotations", {}).get("dispatch.io/attempt", ""),
            )
            for p in json.loads(out)["items"]
            if p["status"].get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
            and not p["metadata"]["name"].startswith("preemptor-")
        }
        self.samples.append(running)

    def overlaps(self) -> list[set[tuple[str, str]]]:
        """Samples holding pods of two executions."""
        return [s for s in self.samples if len(s) > 1]

    def executions(self) -> list[tuple[str, str]]:
        """The executions seen running, in the order first seen."""
        seen: list[tuple[str, str]] = []
        for s in self.samples:
            seen.extend(sorted(e for e in s if e not in seen))
        return seen


def cycle_until(
    sup: Supervisor, sampler: PodSampler, records: MemoryRecords, job_id: str, what: str, pred: Callable[[], bool]
) -> None:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        sup.cycle()
        sampler.sample()
        if pred():
            return
        time.sleep(1)
    job = records.get(job_id)
    raise AssertionError(f"timed out waiting until {what}: {job.state} {job.intents} {job.decisions}")


def running_job(
    cluster: ControlPlaneCluster, b: Any, records: MemoryRecords, sup: Supervisor, sampler: PodSampler
) -> tuple[str, str]:
    """Submit a ``slow`` job, supervise it until it runs and its pods are seen running: (job id, TrainJob)."""
    job_id = Cluster("cp", b, records, SYSTEM_CLOCK).submit(job_spec("slow"))
    cycle_until(sup, sampler, records, job_id, "running", lambda: records.get(job_id).state is State.RUNNING)
    sid = records.get(job_id).current.scheduler_id  # type: ignore[union-attr]
    assert sid is not None
    wait_running = time.monotonic() + 60
    while not sampler.samples[-1] and time.monotonic() < wait_running:
        sampler.sample()
        time.sleep(0.5)
    return job_id, sid


@pytest.mark.parametrize("cluster", [Mode.KUEUE], indirect=True, ids=["kueue"])
def test_a_trainjob_kueue_preempts_is_readmitted_by_rule_and_ends_once(cluster: ControlPlaneCluster) -> None:
    b = cluster.backend()
    records = MemoryRecords()
    rules = {"rules": [{"name": "back", "cause": "preempted", "action": "readmit", "limit": 1}]}
    sup = Supervisor(b, records, clock=SYSTEM_CLOCK, owner="sup", poll=1, cluster="cp", default_rules=rules)
    sampler = PodSampler(cluster)
    try:
        job_id, sid = running_job(cluster, b, records, sup, sampler)
        cluster.preempt(sid)  # a TrainJob of a higher priority class needs the whole quota
        cycle_until(sup, sampler, records, job_id, "closed", lambda: records.get(job_id).closed)
        job = records.get(job_id)
        assert len(job.submissions) == 1, "a readmission is no new submission"
        execs = job.current.executions  # type: ignore[union-attr]
        assert [e.identity.split(".")[2] for e in execs] == ["1", "2"], "the next attempt of the same TrainJob"
        assert execs[0].outcome.cause is Cause.PREEMPTED
        assert job.state is State.SUCCEEDED
        assert [(d.action, d.rule, d.cause) for d in job.decisions] == [("readmit", "back", Cause.PREEMPTED)]
        readmits = [(i.status, i.decision) for i in job.intents if i.action is Action.READMIT]
        assert readmits == [(IntentStatus.DONE, 1)]
        assert not sampler.overlaps(), "pods of both attempts ran at once"
        assert sampler.executions() == [(sid, "1"), (sid, "2")], "each attempt's pods were seen running"
    finally:
        b.close()


@pytest.mark.parametrize("cluster", [Mode.PLAIN], indirect=True, ids=["plain"])
def test_a_trainjob_whose_rank_is_evicted_is_resubmitted_by_rule_and_ends_once(cluster: ControlPlaneCluster) -> None:
    b = cluster.backend()
    records = MemoryRecords()
    rules = {"rules": [{"name": "again", "cause": "preempted", "action": "resubmit", "limit": 1}]}
    sup = Supervisor(b, records, clock=SYSTEM_CLOCK, owner="sup", poll=1, cluster="cp", default_rules=rules)
    sampler = PodSampler(cluster)
    try:
        job_id, sid = running_job(cluster, b, records, sup, sampler)
        cluster.rank0(sid)
        cluster.preempt(sid)  # rank 0 evicted through the Eviction API
        cycle_until(sup, sampler, records, job_id, "closed", lambda: records.get(job_id).closed)
        job = records.get(job_id)
        assert len(job.submissions) == 2, "resubmitted once"
        assert job.submissions[0].outcome is not None and job.submissions[0].outcome.cause is Cause.PREEMPTED
        assert job.state is State.SUCCEEDED
        assert [(d.action, d.rule, d.cause) for d in job.decisions] == [("resubmit", "again", Cause.PREEMPTED)]
        assert job.submissions[0].scheduler_id != job.submissions[1].scheduler_id
        assert not sampler.overlaps(), "pods of both submissions ran at once"
        assert [e[0] for e in sampler.executions()] == [s.scheduler_id for s in job.submissions]
    finally:
        b.close()
