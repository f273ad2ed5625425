"""A stall rule on real processes: a rank that stops reporting is judged stalled no earlier than the bound and
within a cycle of it, its execution is ended through the adapter, and the rule resubmits."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import dispatch
from dispatch.clock import SystemClock
from dispatch.outcome import Cause, State
from dispatch.records import SQLiteRecords
from dispatch.records.model import Action
from dispatch.spec import JobSpec
from dispatch.spi import new_backend
from dispatch.supervise import Supervisor

# Submission 1: rank 1 reports once and then hangs (a collective that never returns); rank 0 keeps reporting.
# Submission 2 reports on every rank and ends.
TRAIN = (
    "import os, sys, time\n"
    "from dispatch import job\n"
    "ctx = job.context()\n"
    "hang = ctx.submission == 1 and ctx.rank == 1\n"
    "for step in range(40):\n"
    "    if not hang or step == 0:\n"
    "        job.progress(step, total=40)\n"
    "    time.sleep(0.1)\n"
    "while hang:\n"
    "    time.sleep(1)\n"
)
BOUND = 2.0
POLL = 0.5


def test_a_rank_that_stops_reporting_is_ended_as_stalled_and_resubmitted(tmp_path: Path) -> None:
    clock = SystemClock()
    records = SQLiteRecords(tmp_path / "records.db")
    backend = new_backend("local", {"stateDir": str(tmp_path / "state"), "grace": "1s"})
    cluster = dispatch.cluster.Cluster("local", backend, records, clock)
    rules = {
        "unmatched": "close",
        "rules": [{"cause": ["stalled"], "stalledAfter": f"{BOUND:g}s", "action": "resubmit", "limit": 1}],
    }
    sup = Supervisor(backend, records, clock=clock, poll=POLL, lease_ttl=5.0, cluster="local")
    spec = JobSpec(
        command=(sys.executable, "-c", TRAIN),
        nodes=2,
        env={"DISPATCH_PROGRESS_INTERVAL": "0", "PYTHONPATH": ":".join(sys.path)},
    )
    job_id = cluster.operator.submit(spec, rules)
    deadline = time.monotonic() + 60
    while not records.get(job_id).closed:
        assert time.monotonic() < deadline, records.get(job_id).to_json()
        sup.cycle()
        time.sleep(POLL)
    job = records.get(job_id)
    assert job.state is State.SUCCEEDED and [s.n for s in job.submissions] == [1, 2]
    first = job.submissions[0]
    assert first.outcome is not None and (first.outcome.state, first.outcome.cause) == (State.FAILED, Cause.STALLED)
    assert "rank(s) 1 reported no progress" in first.outcome.detail
    (stop,) = [i for i in job.intents if i.action is Action.STOP]
    assert stop.args["stalled"] == first.executions[-1].identity and stop.args["ranks"] == [1]
    # never before the bound, and within one cycle of it (plus the cycle's own work on a loaded machine)
    assert BOUND < float(stop.args["silentFor"]) <= BOUND + POLL + 1.5, stop.args
    assert not job.stop_requested  # ending a stalled execution is not a stop of the job
    (decision,) = job.decisions[:1]
    assert (decision.cause, decision.action) == (Cause.STALLED, "resubmit")
    records.close()
