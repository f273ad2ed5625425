"""A backend whose progress read costs per job (ProgressScope) is asked for the progress of the jobs that need
it only: running, as the records last showed, with rules that judge stalls."""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from dispatch.clock import FakeClock
from dispatch.cluster import Cluster
from dispatch.memory import MemoryScheduler, backend
from dispatch.outcome import State
from dispatch.records import MemoryRecords
from dispatch.spec import JobSpec
from dispatch.spi import Backend, JobEvidence, ProgressScope, Unanswered
from dispatch.supervise import Supervisor

STALLS = {"rules": [{"cause": ["stalled"], "stalledAfter": "10m", "action": "resubmit", "limit": 1}]}
PLAIN = {"rules": [{"cause": ["node-lost"], "action": "resubmit", "limit": 1}]}


class Scoped:
    """The memory backend, answering ProgressScope and recording what each observation asked."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.asked: list[tuple[list[str], list[str] | None]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def scopes_progress(self) -> bool:
        return True

    def inspect_many(
        self, scheduler_ids: Sequence[str], *, progress_of: Collection[str] | None = None
    ) -> Mapping[str, JobEvidence | Unanswered]:
        self.asked.append((list(scheduler_ids), None if progress_of is None else sorted(progress_of)))
        return self.inner.inspect_many(scheduler_ids)


def test_progress_is_asked_only_for_running_jobs_whose_rules_judge_stalls() -> None:
    clock = FakeClock()
    sched = MemoryScheduler(clock, "slurm", nodes=2)
    scoped = Scoped(backend(sched))
    assert isinstance(scoped, ProgressScope)
    records = MemoryRecords()
    cluster = Cluster("memory", scoped, records, clock)  # type: ignore[arg-type]
    spec = JobSpec(command=("train",), nodes=1)
    judged = cluster.submit(spec, STALLS)
    plain = cluster.submit(spec, PLAIN)
    waiting = cluster.submit(spec, STALLS)  # two nodes: the third job waits
    sup = Supervisor(scoped, records, clock=clock, owner="sup", poll=10)  # type: ignore[arg-type]
    for _ in range(4):
        sup.cycle()
        clock.advance(10)
    states = {j: records.get(j).state for j in (judged, plain, waiting)}
    assert states == {judged: State.RUNNING, plain: State.RUNNING, waiting: State.PENDING}, states
    sid = {j: records.get(j).current.scheduler_id for j in (judged, plain, waiting)}  # type: ignore[union-attr]
    ids, _ = scoped.asked[-1]
    assert set(ids) >= set(sid.values())
    asked_for = {s for _, progress_of in scoped.asked for s in progress_of or ()}
    assert asked_for == {sid[judged]}  # not the plain job's, not the waiting one's


def test_a_running_jobs_progress_is_read_every_tenth_of_its_stall_bound_not_every_cycle() -> None:
    """Reading reports costs about what the listing does (on Slurm): with a bound of 10 minutes and a cycle of 10
    seconds, the progress is read once a minute and the cycles between read the listing alone."""
    clock = FakeClock()
    sched = MemoryScheduler(clock, "slurm", nodes=2, default_runtime=3600.0)
    scoped = Scoped(backend(sched))
    records = MemoryRecords()
    cluster = Cluster("memory", scoped, records, clock)  # type: ignore[arg-type]
    job = cluster.submit(JobSpec(command=("train",), nodes=1), STALLS)
    sup = Supervisor(scoped, records, clock=clock, owner="sup", poll=10)  # type: ignore[arg-type]
    read_at: list[float] = []
    for _ in range(40):
        before = len(scoped.asked)
        sup.cycle()
        if any(progress_of for _, progress_of in scoped.asked[before:]):
            read_at.append(clock.now())
        clock.advance(10)
    assert records.get(job).state is State.RUNNING
    gaps = [b - a for a, b in itertools.pairwise(read_at)]
    assert len(read_at) >= 5 and set(gaps) == {60.0}, read_at
