"""The adapter through the core: dispatch.open("kubeflow", ...) and the operator's submit (gated, recorded, opened)."""

from __future__ import annotations

import dispatch
from dispatch.records import MemoryRecords
from dispatch.records.model import GateState

from .harness import FakeCluster, job_spec


def test_submit_through_the_core_runs_the_job(plain: FakeCluster) -> None:
    settings = {
        "kubeconfig": {"path": str(plain.kubeconfig)},
        "preflight": {"probeWatch": "0.1s"},
        "timeouts": {"apiserverRequest": "10s"},
    }
    with dispatch.open("kubeflow", adapter=settings, records=MemoryRecords(), clock=plain.clock) as cluster:
        job_id = cluster.submit(job_spec("succeed"))
        record = cluster.get(job_id)
        sub = record.current
        assert sub is not None and sub.scheduler_id is not None and sub.gate is GateState.OPEN
        sid = sub.scheduler_id
        ev = plain.until(lambda: cluster.observer.inspect(sid), lambda e: e.outcome.state.ended, 30)
        assert ev.outcome.state is dispatch.State.SUCCEEDED
        assert ev.current is not None and ev.current.identity.startswith(f"{job_id}.1.1.")
    with dispatch.open("kubeflow", adapter=settings, read_only=True, clock=plain.clock) as ro:
        assert ro.capabilities().answer(dispatch.Capability.HOLD) is dispatch.Answer.UNKNOWN
        assert ro.observer.inspect(sub.scheduler_id).outcome.state is dispatch.State.SUCCEEDED
