"""A job that passes sbatch but waits for a reason that will not change, on the host 22.05 cluster, through the
library: every node of the default partition excluded reads ``pending`` / ``unrunnable`` (BadConstraints);
``Cluster.wait`` raises naming it and leaves it queued; ``Cluster.run`` stops it with the reason recorded."""

from __future__ import annotations

import pytest

import dispatch
from dispatch.errors import Unsupported
from dispatch.outcome import Cause, State
from dispatch.records import MemoryRecords
from dispatch.slurm.extensions import Placement
from dispatch.spec import JobSpec

from .clusters import description, open_backend

pytestmark = pytest.mark.slurm_local


def _spec() -> JobSpec:
    return JobSpec(("true",), extensions=(Placement(exclude=",".join(description("local")["nodes"])),))


def test_wait_raises_naming_the_reason_and_run_stops_the_job() -> None:
    records = MemoryRecords()
    cluster = dispatch.Cluster("local", open_backend("local"), records, dispatch.SystemClock())
    try:
        job_id = cluster.submit(_spec())
        with pytest.raises(Unsupported, match="can never run as asked: PENDING BadConstraints"):
            cluster.wait(job_id, timeout=120)
        job = records.get(job_id)
        assert (job.state, job.cause) == (State.PENDING, Cause.UNRUNNABLE)
        cluster.operator.stop(job_id)

        record = cluster.run(_spec(), timeout=120)
        assert record.state is State.CANCELLED, record.outcome
        stops = [e for e in records.events(record.id) if e.kind == "stop-requested"]
        assert len(stops) == 1 and "BadConstraints" in str(stops[0].data["reason"]), stops
    finally:
        cluster.close()
