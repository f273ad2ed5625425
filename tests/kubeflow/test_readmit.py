"""The supervisor readmits a Workload Kueue preempted through the SPI (Readmitter), on the fake cluster with
dispatch-admission at the readmission gate: the same TrainJob runs again as the next attempt, and no second
submission is made. Plain mode has no readmission gate, so a readmit rule is refused there."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from dispatch.cluster import Cluster
from dispatch.conformance.core import CORE_CHECKS, CoreHarness, run_core_check
from dispatch.errors import Unsupported
from dispatch.kubeflow import names as n
from dispatch.outcome import Cause, State
from dispatch.records import MemoryRecords
from dispatch.records.model import Action, IntentStatus
from dispatch.spi import Readmitter
from dispatch.supervise import Supervisor
from dispatch_kubetest.resources import TRAINJOB

from .harness import CHECK, FakeCluster, harness, job_spec

READMIT = {"rules": [{"name": "back", "cause": "preempted", "action": "readmit", "limit": 1}]}


def cycle_until(sup: Supervisor, kueue: FakeCluster, job_id: str, what: str, pred: Callable[[], bool]) -> None:
    """Cycle the supervisor, two seconds of the fake cluster apart, until ``pred()`` (at most 60 cycles)."""
    for _ in range(60):
        sup.cycle()
        if pred():
            return
        kueue.tick(2)
    job = sup.records.get(job_id)
    raise AssertionError(f"{what}: {job.state} {job.intents}")


def test_a_kueue_preemption_is_readmitted_through_the_spi_not_resubmitted(kueue: FakeCluster) -> None:
    b = kueue.backend()
    assert isinstance(b, Readmitter)
    records = MemoryRecords()
    cluster = Cluster("kueue", b, records, kueue.clock)
    sup = Supervisor(b, records, clock=kueue.clock, owner="sup", poll=5, cluster="kueue", default_rules=READMIT)
    try:
        job_id = cluster.submit(job_spec("sleep"))

        cycle_until(sup, kueue, job_id, "running", lambda: records.get(job_id).state is State.RUNNING)
        sid = records.get(job_id).current.scheduler_id  # type: ignore[union-attr]
        assert sid is not None
        wl = kueue.control.workload_for(sid)
        assert wl is not None
        kueue.control.preempt_workload(wl["metadata"]["name"])
        cycle_until(
            sup,
            kueue,
            job_id,
            "running again",
            lambda: records.get(job_id).state is State.RUNNING and len(records.get(job_id).current.executions) == 2,  # type: ignore[union-attr]
        )
        job = records.get(job_id)
        assert len(job.submissions) == 1, "a readmission is no new submission"
        assert [t["metadata"]["name"] for t in kueue.control.list(TRAINJOB, "default")] == [sid]
        execs = job.current.executions  # type: ignore[union-attr]
        assert [e.identity.split(".")[2] for e in execs] == ["1", "2"], "the next attempt of the same TrainJob"
        assert execs[0].outcome.cause is Cause.PREEMPTED
        assert [(d.action, d.rule, d.cause) for d in job.decisions] == [("readmit", "back", Cause.PREEMPTED)]
        readmits = [(i.action, i.status, i.decision) for i in job.intents if i.action is Action.READMIT]
        assert readmits == [(Action.READMIT, IntentStatus.DONE, 1)]
        tj = kueue.control.get(TRAINJOB, sid, "default") or {}
        assert tj["metadata"]["annotations"][n.ADMIT] == "2", "dispatch authorised attempt 2, once"
        wl = kueue.control.workload_for(sid)
        assert wl is not None
        entry = next(e for e in wl["status"]["admissionChecks"] if e["name"] == CHECK)
        assert entry["state"] == "Ready"
        kinds = [(e.kind, e.data.get("action")) for e in records.events(job_id)]
        assert (
            kinds.index(("decided", "readmit")) < kinds.index(("intent", "readmit")) < kinds.index(("call", "readmit"))
        )
    finally:
        b.close()


def test_the_core_readmit_rule_check_passes_in_kueue_mode(kueue: FakeCluster) -> None:
    check = next(c for c in CORE_CHECKS if c.name == "readmit_rule")
    run_core_check(check, CoreHarness(base=harness(kueue)), strict=True)


def test_plain_mode_offers_no_readmitter_and_refuses_a_readmit_rule(plain: FakeCluster) -> None:
    b = plain.backend()
    try:
        assert not isinstance(b, Readmitter)
        with pytest.raises(Unsupported, match="action readmit is refused on this cluster: the backend offers no"):
            Supervisor(b, MemoryRecords(), clock=plain.clock, poll=5, default_rules=READMIT)
    finally:
        b.close()


def test_a_readmitted_workload_evicted_again_is_readmitted_again_up_to_the_limit(kueue: FakeCluster) -> None:
    """Evicted, readmitted, evicted again: each eviction is its own decision on the same submission (the next
    attempt of the same TrainJob each time), until the rule's limit; the eviction past it is escalated."""
    b = kueue.backend()
    rules = {"rules": [{"name": "back", "cause": "preempted", "action": "readmit", "limit": 2}]}
    records = MemoryRecords()
    cluster = Cluster("kueue", b, records, kueue.clock)
    sup = Supervisor(b, records, clock=kueue.clock, owner="sup", poll=5, cluster="kueue", default_rules=rules)
    try:
        job_id = cluster.submit(job_spec("sleep"))

        def running_as(attempt: int) -> Callable[[], bool]:
            def pred() -> bool:
                job = records.get(job_id)
                return job.state is State.RUNNING and len(job.current.executions) == attempt  # type: ignore[union-attr]

            return pred

        def evict(sid: str) -> None:
            wl = kueue.control.workload_for(sid)
            assert wl is not None
            kueue.control.preempt_workload(wl["metadata"]["name"])

        cycle_until(sup, kueue, job_id, "running", lambda: records.get(job_id).state is State.RUNNING)
        sid = records.get(job_id).current.scheduler_id  # type: ignore[union-attr]
        assert sid is not None
        for attempt in (2, 3):
            evict(sid)
            cycle_until(sup, kueue, job_id, f"running as attempt {attempt}", running_as(attempt))
        evict(sid)
        cycle_until(sup, kueue, job_id, "closed after the third eviction", lambda: records.get(job_id).closed)
        job = records.get(job_id)
        assert len(job.submissions) == 1, "readmissions are no new submissions"
        execs = job.current.executions  # type: ignore[union-attr]
        assert [e.identity.split(".")[2] for e in execs] == ["1", "2", "3"]
        assert [e.outcome.cause for e in execs] == [Cause.PREEMPTED] * 3
        decided = [(d.action, d.rule, d.cause) for d in job.decisions]
        assert decided == [("readmit", "back", Cause.PREEMPTED)] * 2 + [("escalate", "unmatched", Cause.PREEMPTED)]
        assert [i.decision for i in job.intents if i.action is Action.READMIT] == [1, 2]
        assert all(i.status is IntentStatus.DONE for i in job.intents if i.action is Action.READMIT)
        tj = kueue.control.get(TRAINJOB, sid, "default") or {}
        assert tj["metadata"]["annotations"][n.ADMIT] == "3", "dispatch authorised attempts 2 and 3, each once"
        assert [e.cause for e in job.escalations] == [Cause.PREEMPTED], "past the limit it is escalated, as it is"
    finally:
        b.close()
