"""Bad nodes on the real Slurm 22.05 cluster (nodes n1, n2): a job whose node is lost is resubmitted with
``--exclude`` and runs on the other node; the node, blamed again by a second job, is a suspect that job's
resubmission avoids although its rule does not ask to. Fails loudly when the cluster is down.

The node is lost as the conformance harness loses one (``scontrol update State=DOWN``: Slurm ends its jobs
NODE_FAIL at once) and is resumed as soon as the supervisor has decided, so it is free again when the
resubmission is scheduled: only the exclusion keeps the job off it. Jobs are ``--exclusive``, one per node.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

import dispatch.slurm as slurm
from dispatch.clock import SystemClock
from dispatch.cluster import Cluster
from dispatch.records import SQLiteRecords
from dispatch.records.model import Action, JobRecord
from dispatch.slurm.extensions import Resources
from dispatch.slurm.harness import settings_for
from dispatch.spec import JobSpec
from dispatch.supervise import Supervisor
from dispatch.supervise.blame import SuspectPolicy

from .clusters import admin, description

pytestmark = pytest.mark.slurm_local

NAME = "local"
EXCLUDING = {
    "rules": [
        {"name": "lost", "cause": "node-lost", "action": "resubmit", "limit": 2, "backoff": "4s",
         "excludeBlamedNodes": True}
    ]
}  # fmt: skip
PLAIN = {"rules": [{"name": "lost", "cause": "node-lost", "action": "resubmit", "limit": 2, "backoff": "4s"}]}
SPEC = JobSpec(("sleep", "300"), extensions=(Resources(exclusive=True),))


def test_a_lost_node_is_excluded_from_the_resubmission_and_then_a_suspect(tmp_path: Path) -> None:
    desc = description(NAME)
    assert sorted(desc["nodes"]) == ["n1", "n2"], desc["nodes"]
    backend = slurm.new(settings_for(desc))
    records = SQLiteRecords(tmp_path / "records.db")
    cluster = Cluster(NAME, backend, records, SystemClock())
    sup = Supervisor(
        backend, records, clock=SystemClock(), poll=1, cluster=cluster, suspects=SuspectPolicy(after=2, ttl=600)
    )
    down = ""
    jobs: list[str] = []

    def until(pred: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            sup.cycle()
            if pred():
                return
            time.sleep(1)
        raise AssertionError(f"timed out waiting until {what}: {[records.get(j).to_json() for j in jobs]}")

    def ran_on(job_id: str, n: int) -> list[str]:
        sub = records.get(job_id).submission(n)
        return [node for ex in sub.executions for node in ex.nodes if ex.started_at is not None]

    def excluded(job: JobRecord, n: int) -> list[str]:
        starts = [i for i in job.intents if i.action is Action.START and i.submission == n]
        return list(starts[-1].args.get("exclude", [])) if starts else []

    def lose(job_id: str, node: str) -> None:
        nonlocal down
        down = node
        admin(NAME, "scontrol", "update", f"NodeName={node}", "State=DOWN", "Reason=dispatch-test-blame")
        until(lambda: any(d.cause.value == "node-lost" for d in records.get(job_id).decisions), "node-lost", 60)
        admin(NAME, "scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)
        down = ""

    def slurm_excludes(job_id: str) -> str:
        sid = records.get(job_id).current.scheduler_id  # type: ignore[union-attr]
        out = admin(NAME, "scontrol", "show", "job", str(sid)).stdout
        return next((w.split("=", 1)[1] for w in out.split() if w.startswith("ExcNodeList=")), "")

    try:
        first = cluster.submit(SPEC, EXCLUDING)
        jobs.append(first)
        until(lambda: bool(ran_on(first, 1)), "the first job runs")
        (node,) = ran_on(first, 1)
        other = "n2" if node == "n1" else "n1"
        lose(first, node)
        until(lambda: bool(ran_on(first, 2) if len(records.get(first).submissions) > 1 else False), "it runs again")
        job = records.get(first)
        assert job.submission(1).outcome.cause.value == "node-lost"  # type: ignore[union-attr]
        assert excluded(job, 2) == [node] and slurm_excludes(first) == node
        assert ran_on(first, 2) == [other], "the resubmission ran on the node its rule excluded"

        # a second job gets the lost node (the other one is taken); lost again, the node is now a suspect
        second = cluster.submit(SPEC, PLAIN)
        jobs.append(second)
        until(lambda: bool(ran_on(second, 1)), "the second job runs")
        assert ran_on(second, 1) == [node]
        lose(second, node)
        until(lambda: len(records.get(second).submissions) > 1 and bool(excluded(records.get(second), 2)), "resubmit")
        assert [s.node for s in sup.exclusions.current_suspects(time.time())] == [node]
        assert excluded(records.get(second), 2) == [node], "a suspect is excluded whatever the rule says"
        assert slurm_excludes(second) == node
        assert {b.job_id for b in records.node_blames(NAME, 0.0)} == {first, second}
    finally:
        if down:
            admin(NAME, "scontrol", "update", f"NodeName={down}", "State=RESUME", check=False)
        for j in jobs:
            for sub in records.get(j).submissions:
                if sub.scheduler_id:
                    admin(NAME, "scancel", sub.scheduler_id, check=False)
        records.close()
        backend.close()
