"""Job ids that do not collide, and ``submit_many`` that never runs a job twice: a forced id collision, a store
that fails half-way through a batch, retries with the batch key; on the memory and local adapters, over every
record store."""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import dispatch
from dispatch import Conflict, FakeClock, JobSpec, OutcomeUnknown, Unavailable
from dispatch.actions import marker_for
from dispatch.cluster import BatchIncomplete, Submitted, batch_job_id, new_job_id
from dispatch.memory import forget
from dispatch.records import Event, GateState, IntentStatus, JobRecord, MemoryRecords, Records, SQLiteRecords
from dispatch.records.model import Submission
from dispatch.records.postgres import PostgresRecords
from dispatch.supervise import Supervisor

from .records.test_contract import postgres_store

FOREIGN = JobSpec(command=("echo", "another batch's job"))
RULES = {"rules": [{"name": "lost", "cause": ["node-lost", "preempted"], "action": "resubmit", "limit": 2}]}


class FaultyRecords:
    """A real store with faults injected into ``create``, counted from 1: at a number in ``collide_at`` another
    writer has just created a job with the same id (a genuine collision); at one in ``fail_at`` the store fails
    before writing anything."""

    def __init__(self, inner: Records) -> None:
        self.inner = inner
        self.creates = 0
        self.collide_at: set[int] = set()
        self.fail_at: set[int] = set()
        self.foreign: list[str] = []

    def create(self, job: JobRecord, events: Sequence[Event] = ()) -> JobRecord:
        self.creates += 1
        if self.creates in self.fail_at:
            raise Unavailable("injected: the record store went away")
        if self.creates in self.collide_at:
            at = job.created_at
            self.inner.create(JobRecord(job.id, job.cluster, FOREIGN, at, submissions=[Submission(1, "foreign", at)]))
            self.foreign.append(job.id)
        return self.inner.create(job, events)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def make_store(kind: str, tmp_path: Path) -> Records:
    if kind == "memory":
        return MemoryRecords()
    if kind == "sqlite":
        return SQLiteRecords(tmp_path / "records.db")
    return postgres_store()


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FaultyRecords]:
    inner = make_store(request.param, tmp_path)
    yield FaultyRecords(inner)
    if isinstance(inner, PostgresRecords):
        inner.drop()
    inner.close()


@pytest.fixture(params=["memory", "local"])
def cluster(request: pytest.FixtureRequest, store: FaultyRecords, tmp_path: Path) -> Iterator[dispatch.Cluster]:
    if request.param == "memory":
        name = f"batch-{secrets.token_hex(4)}"
        c = dispatch.open("memory", adapter={"cluster": name}, records=store, clock=FakeClock())
        yield c
        forget(name)
    else:
        settings = {"stateDir": str(tmp_path / "local"), "grace": 1.0}
        c = dispatch.open("local", adapter=settings, records=store)
        yield c
        c.close()


def specs(n: int = 5) -> list[JobSpec]:
    return [JobSpec(command=("true",), name=f"job-{i}") for i in range(n)]


def objects(cluster: dispatch.Cluster, job_id: str) -> list[str]:
    """The scheduler objects carrying the job's marker (how many times it was created)."""
    return [f.scheduler_id for f in cluster.backend.find(marker_for(job_id, 1), 0.0)]


def check_each_started_once(cluster: dispatch.Cluster, got: Sequence[Submitted], n: int) -> None:
    assert len(got) == n and len({g.job_id for g in got}) == n
    for i, g in enumerate(got):
        assert g.ok, g.error
        job = cluster.get(g.job_id)
        assert job.spec.name == f"job-{i}"
        assert job.current is not None and job.current.gate is GateState.OPEN
        assert len(objects(cluster, g.job_id)) == 1, f"job {i} was created {len(objects(cluster, g.job_id))} times"


# ----- ids ------------------------------------------------------------------------------------------------------


def test_ids_carry_64_random_bits_and_do_not_collide_within_one_second() -> None:
    ids = [new_job_id(1_800_000_000.0) for _ in range(10_000)]
    assert all(len(i) == 16 and int(i, 16) >= 0 for i in ids)
    assert len(set(ids)) == len(ids)
    assert len({i[:8] for i in ids}) > 9_000, "the leading digits are random too (a short prefix is enough to type)"


def test_batch_ids_are_derived_from_the_key_and_index() -> None:
    assert batch_job_id("k", 0, 0) == batch_job_id("k", 0, 0)
    assert len({batch_job_id("k", i, p) for i in range(100) for p in range(3)} | {batch_job_id("k2", 0, 0)}) == 301
    assert all(len(batch_job_id("k", i, 0)) == 16 for i in range(10))


def test_submit_mints_another_id_when_one_is_taken(store: FaultyRecords) -> None:
    c = dispatch.open("memory", adapter={"cluster": "t-mint"}, records=store, clock=FakeClock())
    try:
        taken = c.submit(JobSpec(command=("true",)))
        minted = iter([taken, taken, "0123456789abcdef"])
        c.operator.new_id = lambda now: next(minted)
        assert c.submit(JobSpec(command=("true",))) == "0123456789abcdef"
        assert len(c.observer.list()) == 2
    finally:
        forget("t-mint")


# ----- submit_many ------------------------------------------------------------------------------------------------


def test_a_forced_collision_does_not_break_the_batch(cluster: dispatch.Cluster, store: FaultyRecords) -> None:
    store.collide_at = {3}  # the third job's id is taken by another writer just before it is recorded
    got = cluster.operator.submit_many(specs())
    check_each_started_once(cluster, got, 5)
    [foreign] = store.foreign
    assert foreign not in {g.job_id for g in got}
    theirs = store.get(foreign)
    assert theirs.spec == FOREIGN and theirs.intents == [] and theirs.version == 1, "the other job is untouched"
    assert len(store.jobs(active_only=False)) == 6


def test_a_collision_forced_through_the_minter_seam(cluster: dispatch.Cluster) -> None:
    taken = cluster.submit(JobSpec(command=("true",), name="someone else's"))
    real = cluster.operator.batch_id
    cluster.operator.batch_id = lambda key, i, probe: taken if probe == 0 and i in (1, 3) else real(key, i, probe)
    got = cluster.operator.submit_many(specs(), key="seam")
    check_each_started_once(cluster, got, 5)
    assert [g.job_id for g in got] == [real("seam", i, 1 if i in (1, 3) else 0) for i in range(5)]
    assert cluster.get(taken).spec.name == "someone else's" and len(objects(cluster, taken)) == 1
    again = cluster.operator.submit_many(specs(), key="seam")
    assert [g.job_id for g in again] == [g.job_id for g in got] and all(g.existed for g in again)


def test_a_store_failure_mid_batch_names_what_exists_and_a_retry_finishes_it(
    cluster: dispatch.Cluster, store: FaultyRecords
) -> None:
    store.fail_at = {3}
    with pytest.raises(BatchIncomplete) as info:
        cluster.operator.submit_many(specs(), RULES, key="sweep-1")
    failed = info.value
    assert isinstance(failed, OutcomeUnknown) and failed.key == "sweep-1" and failed.total == 5
    assert [s.ok for s in failed.submitted] == [True, True], "the jobs recorded before the failure went through"
    assert "submit again with the same batch key" in str(failed)
    for s in failed.submitted:
        assert len(objects(cluster, s.job_id)) == 1
    got = cluster.operator.submit_many(specs(), RULES, key="sweep-1")
    assert [g.existed for g in got] == [True, True, False, False, False]
    assert [g.job_id for g in got[:2]] == [s.job_id for s in failed.submitted]
    check_each_started_once(cluster, got, 5)
    again = cluster.operator.submit_many(specs(), RULES, key="sweep-1")
    assert [(g.job_id, g.existed, g.ok) for g in again] == [(g.job_id, True, True) for g in got]
    check_each_started_once(cluster, again, 5)
    assert len(store.jobs(active_only=False)) == 5


def test_a_collision_and_a_failure_together_then_a_retry(cluster: dispatch.Cluster, store: FaultyRecords) -> None:
    store.collide_at, store.fail_at = {2}, {4}
    with pytest.raises(BatchIncomplete) as info:
        cluster.operator.submit_many(specs(), key="sweep-2")
    assert len(info.value.submitted) == 2
    got = cluster.operator.submit_many(specs(), key="sweep-2")
    check_each_started_once(cluster, got, 5)
    assert [g.existed for g in got] == [True, True, False, False, False]
    assert store.foreign[0] not in {g.job_id for g in got}


def test_the_same_key_for_other_specs_is_refused_before_anything_is_recorded(cluster: dispatch.Cluster) -> None:
    first = cluster.operator.submit_many(specs(2), key="k")
    other = [JobSpec(command=("true",), name="job-0"), JobSpec(command=("false",), name="job-1")]
    with pytest.raises(Conflict, match="batch key 'k' was used for other jobs"):
        cluster.operator.submit_many([*specs(2), JobSpec(command=("true",))][:1] + other[1:], key="k")
    assert len(cluster.observer.list()) == 2
    assert [g.job_id for g in cluster.operator.submit_many(specs(2), key="k")] == [g.job_id for g in first]


# ----- a call that dies half-way (memory adapter: a supervisor on the fake clock takes over) ----------------------


class Crash(BaseException):
    """The process dies (nothing catches it)."""


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_call_that_died_after_recording_is_finished_by_a_supervisor_never_twice(kind: str, tmp_path: Path) -> None:
    clock = FakeClock()
    store = make_store(kind, tmp_path)
    c = dispatch.open("memory", adapter={"cluster": "t-died"}, records=store, clock=clock)
    try:
        real_start_many = c.backend.start_many  # type: ignore[attr-defined]

        def dying_start_many(requests: Any) -> list[Any]:
            real_start_many(requests[:2])  # the first two landed (as one array) when the process dies
            raise Crash

        c.backend.start_many = dying_start_many  # type: ignore[attr-defined]
        with pytest.raises(Crash):
            c.operator.submit_many(specs(), key="died")
        c.backend.start_many = real_start_many  # type: ignore[attr-defined]
        recorded = c.observer.list()
        before = {j.id: len(objects(c, j.id)) for j in recorded}
        assert len(recorded) == 5 and sorted(before.values()) == [0, 0, 0, 1, 1], "two landed, unrecorded"
        got = c.operator.submit_many(specs(), key="died")  # the retry: every job existed, every start in doubt
        assert all(g.existed for g in got)
        assert all(isinstance(g.error, OutcomeUnknown) and "in doubt" in str(g.error) for g in got)
        assert {g.job_id: len(objects(c, g.job_id)) for g in got} == before, "the retry started nothing in doubt"
        sup = Supervisor(c.backend, store, clock=clock, owner="sup", poll=10)
        for _ in range(6):
            clock.advance(10)
            sup.cycle()
        for g in got:
            job = c.get(g.job_id)
            assert len(objects(c, g.job_id)) == 1 and job.current is not None and job.current.gate is GateState.OPEN
            assert not [i for i in job.intents if i.status in (IntentStatus.PENDING, IntentStatus.UNKNOWN)]
    finally:
        forget("t-died")
        store.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_two_calls_with_one_key_at_once_start_each_job_once(kind: str, tmp_path: Path) -> None:
    """Two processes (here: threads, each with its own cluster over one store) submit the same batch at once."""
    import threading

    store = make_store(kind, tmp_path)
    clusters = [dispatch.open("local", adapter={"stateDir": str(tmp_path / "local")}, records=store) for _ in range(2)]
    results: list[list[Submitted]] = [[], []]
    go = threading.Barrier(2)

    def submit(n: int) -> None:
        go.wait()
        results[n] = clusters[n].operator.submit_many(specs(10), key="race")

    threads = [threading.Thread(target=submit, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        assert [g.job_id for g in results[0]] == [g.job_id for g in results[1]] and len(results[0]) == 10
        for a, b in zip(*results, strict=True):
            assert a.ok or b.ok, (a, b)  # the one that lost a race hands the job to the one that won it
            assert len(objects(clusters[0], a.job_id)) == 1, "each job created exactly once"
        assert len(store.jobs(active_only=False)) == 10
    finally:
        for c in clusters:
            c.close()
        store.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_one_write_per_job_and_one_per_phase_record_the_same(kind: str, tmp_path: Path) -> None:
    """The store's write granularity is all that differs between a batch over a store with batch writes and one
    over a store without (here: the same store behind a forwarding wrapper): the records and events are alike."""
    seen: list[list[tuple[Any, ...]]] = []
    for n, wrap in enumerate((False, True)):
        inner = make_store(kind, tmp_path / str(n))
        store: Any = FaultyRecords(inner) if wrap else inner
        name = f"t-granularity-{n}"
        c = dispatch.open("memory", adapter={"cluster": name}, records=store, clock=FakeClock())
        try:
            got = c.operator.submit_many(specs(3), key="same")
            check_each_started_once(c, got, 3)
            seen.append(
                [
                    (
                        [(i.seq, i.action, i.status) for i in job.intents],
                        job.current.gate if job.current else None,
                        [e.kind for e in c.observer.events(job.id)],
                    )
                    for job in (c.get(g.job_id) for g in got)
                ]
            )
        finally:
            forget(name)
            inner.close()
    assert seen[0] == seen[1]
