"""The local adapter under the supervisor: recovery rules carried out on real processes, with SQLite records."""

from __future__ import annotations

import time
from pathlib import Path

import dispatch
from dispatch.clock import SystemClock
from dispatch.local import LocalBackend
from dispatch.outcome import Cause, State
from dispatch.records import SQLiteRecords
from dispatch.spec import JobSpec
from dispatch.spi import new_backend
from dispatch.supervise import Supervisor


def supervise_until_closed(sup: Supervisor, records: SQLiteRecords, job_id: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not records.get(job_id).closed:
        assert time.monotonic() < deadline, f"job not closed in time: {records.get(job_id).to_json()}"
        sup.cycle()
        time.sleep(0.1)


def test_requeue_rule_runs_a_new_execution_and_resubmit_a_new_submission(tmp_path: Path) -> None:
    clock = SystemClock()
    records = SQLiteRecords(tmp_path / "records.db")
    backend = new_backend("local", {"stateDir": str(tmp_path / "state"), "grace": "1s"})
    assert isinstance(getattr(backend, "unrestricted", backend), LocalBackend)
    cluster = dispatch.cluster.Cluster("local", backend, records, clock)
    rules = {
        "unmatched": "close",
        "rules": [
            {"name": "retry-75", "cause": "exit", "exitCodes": [75], "action": "requeue", "limit": 2},
            {"name": "again", "cause": "timeout", "action": "resubmit", "limit": 1},
        ],
    }
    sup = Supervisor(backend, records, clock=clock, poll=0.5, lease_ttl=5.0, cluster="local")

    requeued = cluster.operator.submit(
        JobSpec(command=("sh", "-c", '[ "$DISPATCH_RESTART" = 0 ] && exit 75; echo ok'), nodes=2), rules
    )
    supervise_until_closed(sup, records, requeued)
    job = records.get(requeued)
    assert job.state is State.SUCCEEDED and len(job.submissions) == 1
    assert [e.restart for e in job.submissions[0].executions] == [0, 1]
    assert [d.action for d in job.decisions][:1] == ["requeue"]

    resubmitted = cluster.operator.submit(
        JobSpec(command=("sh", "-c", '[ "$DISPATCH_SUBMISSION" = 1 ] && sleep 30; exit 0'), time_limit=1.0), rules
    )
    supervise_until_closed(sup, records, resubmitted)
    job = records.get(resubmitted)
    assert [s.n for s in job.submissions] == [1, 2]
    assert job.submissions[0].outcome is not None and job.submissions[0].outcome.cause is Cause.TIMEOUT
    assert job.state is State.SUCCEEDED
    records.close()
