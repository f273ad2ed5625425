"""A batch called again with its key after a supervisor adopted its default rules carries on.

``submit_many``'s contract: calling again with the same key, specs and rules carries the batch on (the
documented way out of ``BatchIncomplete``). A supervisor with default rules writes them into a job without
rules of its own (``rules-adopted``), so the record's rules no longer equal the ``None`` the caller gives
again; the call still matches (it was refused as "the key was used for other jobs")."""

from __future__ import annotations

from dispatch.clock import FakeClock
from dispatch.cluster import Cluster
from dispatch.memory import MemoryScheduler, backend
from dispatch.records import MemoryRecords
from dispatch.spec import JobSpec
from dispatch.supervise import Supervisor

RESUBMIT = {"rules": [{"name": "evicted", "cause": ["preempted"], "action": "resubmit", "limit": 2}]}


def test_a_batch_called_again_after_a_supervisor_adopted_its_rules_carries_on() -> None:
    clock = FakeClock()
    b = backend(MemoryScheduler(clock, "slurm", nodes=4, min_job_age=300, node_loss_window=60))
    records = MemoryRecords()
    cluster = Cluster("memory", b, records, clock)
    specs = [JobSpec(command=("sleep", "500")), JobSpec(command=("sleep", "501"))]
    first = cluster.operator.submit_many(specs, key="k1")
    sup = Supervisor(b, records, clock=clock, owner="sup-a", poll=10, default_rules=RESUBMIT)  # type: ignore[arg-type]
    sup.cycle()
    assert records.get(first[0].job_id).rules is not None  # adopted
    again = cluster.operator.submit_many(specs, key="k1")  # the same call again: Conflict today
    assert [r.job_id for r in again] == [r.job_id for r in first]
    assert all(r.existed for r in again)
