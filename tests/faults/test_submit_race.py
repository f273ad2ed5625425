"""A supervisor may take the lease of a job while the operator is still submitting it: the operator's write of the
start's answer then loses its compare-and-set. submit must say so with the job id (OutcomeUnknown: recorded, a
supervisor carries it on), never with a bare Conflict that leaves the caller without the id."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from dispatch.clock import FakeClock
from dispatch.cluster import Cluster
from dispatch.errors import OutcomeUnknown
from dispatch.memory import MemoryScheduler, backend
from dispatch.records import Lease, MemoryRecords
from dispatch.records.model import Event, IntentStatus, JobRecord
from dispatch.spec import JobSpec


class LeaseTakenMidSubmit(MemoryRecords):
    """Before the operator's first write after the intent (the start's answer), a supervisor takes the lease."""

    def __init__(self) -> None:
        super().__init__()
        self.updates = 0

    def update(self, job: JobRecord, events: Sequence[Event] = (), *, fence: int | None = None) -> JobRecord:
        self.updates += 1
        if self.updates == 2:
            stored = self.get(job.id)
            stored.lease = Lease("supervisor:elsewhere", 1, 1e12)
            super().update(stored)
        return super().update(job, events, fence=fence)


def test_submit_names_the_job_when_a_supervisor_wrote_meanwhile() -> None:
    clock = FakeClock()
    records = LeaseTakenMidSubmit()
    cluster = Cluster("memory", backend(MemoryScheduler(clock, "slurm", nodes=1)), records, clock)
    with pytest.raises(OutcomeUnknown) as info:
        cluster.submit(JobSpec(command=("true",)))
    job_id = info.value.job_id  # type: ignore[attr-defined]
    job = records.get(job_id)
    assert "a supervisor carries it on" in str(info.value)
    assert job.lease is not None and job.lease.owner == "supervisor:elsewhere"
    start = job.intents[0]
    assert start.status is IntentStatus.PENDING, "the answer was lost: the supervisor resolves it by the marker"
