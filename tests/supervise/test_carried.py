"""Decisions counted once carried out (:mod:`dispatch.supervise.carried`), as a cycle's report has them."""

from __future__ import annotations

from collections import Counter

import pytest

from dispatch.clock import FakeClock
from dispatch.cluster import Cluster
from dispatch.memory import MemoryScheduler, backend
from dispatch.records import MemoryRecords
from dispatch.spec import JobSpec
from dispatch.supervise import Supervisor
from dispatch.supervise.carried import carried_out


@pytest.mark.parametrize(
    ("rules", "action"),
    [(None, "escalate"), ({"unmatched": "close", "rules": []}, "close")],
    ids=["escalated", "closed"],
)
def test_an_unmatched_failure_counts_once_its_escalation_or_closing_is_written(
    rules: dict[str, object] | None, action: str
) -> None:
    clock = FakeClock()
    sched = MemoryScheduler(clock, "slurm", nodes=2)
    b = backend(sched)
    records = MemoryRecords()
    job_id = Cluster("memory", b, records, clock).submit(JobSpec(command=("sleep", "500")), rules)
    sup = Supervisor(b, records, clock=clock, owner="sup-c", poll=10)
    counted: Counter[tuple[str, str]] = Counter()
    for _ in range(2):
        counted += sup.cycle().carried_out
        clock.advance(10)
    sched.control.finish(records.get(job_id).current.scheduler_id, 3)  # type: ignore[union-attr]
    for _ in range(3):
        counted += sup.cycle().carried_out
        clock.advance(10)
    job = records.get(job_id)
    assert [d.action for d in job.decisions] == [action] and job.closed
    assert carried_out(job) == {job.decisions[0].seq}
    decided_only = job.copy()  # as written between the decision and the step that carries it out
    decided_only.escalations, decided_only.closed = [], False
    assert carried_out(decided_only) == set()
    assert counted == Counter({(action, "unmatched"): 1})  # once, though the job was written several times
