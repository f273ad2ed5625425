"""The edges a user meets on the real Slurm 22.05 cluster (host, marker slurm_local), seen through the commands a
user runs: a suspended job is not stopped as stalled and reads suspended in ``dispatch status``; a job whose
program does not exist, resubmitted by a rule, leaves ``dispatch nodes`` empty. The supervisor runs in the test
(as ``dispatch supervise`` would) on the records the commands read. Fails loudly when the cluster is down.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from dispatch.clock import SystemClock
from dispatch.cluster import Cluster
from dispatch.outcome import Cause, State
from dispatch.records import SQLiteRecords
from dispatch.records.model import Action
from dispatch.rules import RuleSet
from dispatch.slurm.harness import settings_for
from dispatch.spec import JobSpec
from dispatch.supervise import Supervisor

from ..slurm.clusters import admin, description, open_backend
from .conftest import SRC, Env
from .test_on_slurm import on

pytestmark = pytest.mark.slurm_local

NAME = "local"
CLUSTER = "slurm"  # the name test_on_slurm.on() gives the cluster in the user's config
BOUND = 10.0

REPORTER = (
    "import time\n"
    "from dispatch import job\n"
    "for step in range(60):\n"  # about 15 s of running time, reporting every quarter second
    "    job.progress(step, total=60)\n"
    "    time.sleep(0.25)\n"
)


def _supervised(cli: Env) -> tuple[Any, SQLiteRecords, Cluster, Supervisor]:
    on(cli, NAME)
    assert settings_for(description(NAME))  # the cluster answers (fails loudly when it is down)
    backend = open_backend(NAME)
    cli.records.parent.mkdir(parents=True, exist_ok=True)
    records = SQLiteRecords(cli.records)
    cluster = Cluster(CLUSTER, backend, records, SystemClock())
    sup = Supervisor(backend, records, clock=SystemClock(), poll=1, cluster=CLUSTER)
    return backend, records, cluster, sup


def _until(sup: Supervisor, pred: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        sup.cycle()
        if pred():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting until {what}")


def _cleanup(records: SQLiteRecords, backend: Any, job_id: str | None) -> None:
    try:
        if job_id:
            for sub in records.get(job_id).submissions:
                if sub.scheduler_id:
                    admin(NAME, "scontrol", "resume", sub.scheduler_id, check=False)
                    admin(NAME, "scancel", sub.scheduler_id, check=False)
    finally:
        records.close()
        backend.close()


def test_a_suspended_job_is_not_stopped_as_stalled_reads_suspended_and_succeeds_once_resumed(cli: Env) -> None:
    backend, records, cluster, sup = _supervised(cli)
    rules = {"rules": [{"cause": "stalled", "stalledAfter": f"{BOUND:g}s", "action": "resubmit", "limit": 1}]}
    assert RuleSet.from_data(rules).stall_bound == BOUND
    spec = JobSpec(
        (sys.executable, "-c", REPORTER),
        time_limit=600,
        env={"PYTHONPATH": SRC, "DISPATCH_PROGRESS_INTERVAL": "0.5"},
    )
    job_id = None
    try:
        job_id = cluster.submit(spec, rules)
        sid_of = lambda: records.get(job_id).current.scheduler_id  # type: ignore[union-attr]  # noqa: E731

        def last_report() -> float:
            ev = backend.inspect(sid_of())
            return max((p.at for p in ev.current.progress), default=0.0) if ev.current is not None else 0.0

        _until(sup, lambda: sid_of() is not None and last_report() > 0, "the job reports progress")
        silent_since = last_report()  # read while it runs: a suspended job's reports are not read
        admin(NAME, "scontrol", "suspend", sid_of())
        suspended_at = time.time()

        def reads_suspended() -> bool:
            out = records.get(job_id).current.outcome  # type: ignore[union-attr]
            return out is not None and (out.state, out.cause) == (State.RUNNING, Cause.SUSPENDED)

        _until(sup, reads_suspended, "the record reads it suspended", 60)
        # the supervisor reads it, suspended, until its silence and its suspension are both well past the bound
        # (a condition on the readings, not a sleep): the judgement had every chance to fire

        def read_long_after() -> bool:  # the supervisor has just cycled: its reading is this one's, or older
            ev = backend.inspect(sid_of())
            seen = ev.outcome.evidence.observed_at
            return (
                ev.outcome.cause is Cause.SUSPENDED and seen - silent_since > BOUND + 5 and seen - suspended_at > BOUND
            )

        _until(sup, read_long_after, "a reading past the bound", 60)
        sup.cycle()
        job = records.get(job_id)
        assert not [i for i in job.intents if i.action is Action.STOP], "a suspended job was stopped"
        assert not job.closed
        p = cli.run("status", job_id, "--json")
        assert p.returncode == 0, p.stderr
        shown = json.loads(p.stdout)
        shown = shown[0] if isinstance(shown, list) else shown
        assert "suspended" in json.dumps(shown), shown
        p = cli.run("status", job_id)
        assert p.returncode == 0 and "suspended" in p.stdout, (p.stdout, p.stderr)
        admin(NAME, "scontrol", "resume", sid_of())
        assert time.time() - suspended_at > BOUND
        _until(sup, lambda: records.get(job_id).closed, "the job ends", 180)
        job = records.get(job_id)
        assert job.state is State.SUCCEEDED, job.to_json()
        assert len(job.submissions) == 1 and not [i for i in job.intents if i.action is Action.STOP]
        ex = job.submissions[0].executions[-1]
        assert ex.resumed_at is not None and ex.resumed_at >= suspended_at
    finally:
        _cleanup(records, backend, job_id)


def test_a_job_whose_program_does_not_exist_leaves_dispatch_nodes_empty(cli: Env) -> None:
    """A typo in the program under a rule that resubmits launch failures: every execution ends not-launchable,
    no node is blamed, and ``dispatch nodes`` lists no suspect (the default policy: 3 jobs, 1 day), where every
    execution once blamed its node and one job alone made it a suspect for the whole cluster."""
    backend, records, cluster, sup = _supervised(cli)
    rules = {
        "unmatched": "escalate",
        "rules": [{"cause": ["launch-failed", "not-launchable"], "action": "resubmit", "limit": 3, "backoff": "1s"}],
    }
    job_id = None
    try:
        job_id = cluster.submit(JobSpec(("dispatch-test-trian.py", "--epochs", "1")), rules)
        _until(sup, lambda: records.get(job_id).closed, "the job is closed", 240)
        job = records.get(job_id)
        ends = [ex.outcome.cause for s in job.submissions for ex in s.executions]
        assert len(job.submissions) == 4 and ends == [Cause.NOT_LAUNCHABLE] * 4, job.to_json()
        assert all(ex.nodes for s in job.submissions for ex in s.executions), "each ran on a node"
        assert records.node_blames(CLUSTER, 0.0) == []
        p = cli.run("nodes", "--json")
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["suspects"] == []
        p = cli.run("status", job_id)
        assert "not-launchable" in p.stdout, p.stdout
    finally:
        _cleanup(records, backend, job_id)
