"""The supervisor's output archive on the memory adapter (Kubeflow shape: rank 0's log goes with the execution)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from dispatch.clock import FakeClock
from dispatch.cluster import Cluster
from dispatch.extensions import Image
from dispatch.memory import KubeflowShapedBackend, MemoryScheduler, backend
from dispatch.records import MemoryRecords
from dispatch.records.archive import ArchivedOutput, ArchiveStatus
from dispatch.records.model import Event, JobRecord
from dispatch.spec import JobSpec
from dispatch.supervise import Supervisor
from dispatch.supervise.archive import Archiver, ArchiveSettings, keep_tail

RESUBMIT = {"rules": [{"name": "evicted", "cause": ["preempted"], "action": "resubmit", "limit": 2}]}


class LoggedRecords(MemoryRecords):
    """Memory records that log the archive writes and the intents, in order, and count archive reads."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[str] = []
        self.listings = 0

    def put_output(self, entry: ArchivedOutput) -> ArchivedOutput:
        self.log.append(f"archive {entry.execution} {entry.status.value}")
        return super().put_output(entry)

    def outputs(self, job_ids: Sequence[str]) -> list[ArchivedOutput]:
        self.listings += 1
        return super().outputs(job_ids)

    def update(self, job: JobRecord, events: Sequence[Event] = (), *, fence: int | None = None) -> JobRecord:
        for e in events:
            if e.kind == "intent":
                self.log.append(f"intent {e.data.get('action')} {e.data.get('submission')}")
        return super().update(job, events, fence=fence)


class Env:
    def __init__(self, b: Any = None, call_bound: float = 30.0) -> None:
        self.clock = FakeClock()
        self.sched = MemoryScheduler(self.clock, "kubeflow", nodes=4)
        self.backend = b(self.sched) if b is not None else backend(self.sched, call_bound=call_bound)
        self.records = LoggedRecords()
        self.cluster = Cluster("memory", self.backend, self.records, self.clock)

    def submit(self, *argv: str, rules: Any = RESUBMIT) -> str:
        return self.cluster.submit(JobSpec(command=argv, extensions=(Image("registry.example/x:1"),)), rules)

    def supervisor(self, owner: str = "sup-a", **kw: Any) -> Supervisor:
        return Supervisor(self.backend, self.records, clock=self.clock, owner=owner, poll=10, **kw)

    def sid(self, job_id: str, n: int = 1) -> str:
        sid = self.records.get(job_id).submission(n).scheduler_id
        assert sid is not None
        return sid

    def first_execution(self, job_id: str) -> str:
        return self.records.get(job_id).submission(1).executions[0].identity

    def cycles(self, sup: Supervisor, n: int, step: float = 10.0) -> None:
        for _ in range(n):
            sup.cycle()
            self.clock.advance(step)


@pytest.fixture
def env() -> Iterator[Env]:
    yield Env()


def preempt_after_writing(env: Env, sup: Supervisor, job_id: str, *lines: str) -> None:
    env.cycles(sup, 1)
    for line in lines:
        env.sched.control.write(env.sid(job_id), line)
    env.sched.control.preempt(env.sid(job_id))


def test_preempted_execution_is_archived_before_the_resubmit(env: Env) -> None:
    job_id = env.submit("sleep", "100")
    sup = env.supervisor()
    preempt_after_writing(env, sup, job_id, "step 1", "step 2")
    report = sup.cycle()
    first = env.first_execution(job_id)
    assert report.archive == {"kept": 1} and report.to_json()["archive"] == {"kept": 1}
    entry = env.records.get_output(job_id, first)
    assert entry is not None and entry.status is ArchiveStatus.KEPT
    assert entry.data == f"rank 0 of execution {first}\nstep 1\nstep 2\n".encode()
    assert (entry.submission, entry.restart, entry.truncated, entry.size) == (1, 0, False, len(entry.data))
    # the archive is written before the intent that starts submission 2
    assert env.records.log.index(f"archive {first} kept") < env.records.log.index("intent start 2")


def test_only_the_tail_is_kept_under_the_cap(env: Env) -> None:
    job_id = env.submit("sleep", "100")
    sup = env.supervisor(archive=ArchiveSettings(max_bytes=40))
    preempt_after_writing(env, sup, job_id, *(f"line {i:03d}" for i in range(100)))
    sup.cycle()
    entry = env.records.get_output(job_id, env.first_execution(job_id))
    assert entry is not None and entry.status is ArchiveStatus.KEPT
    assert entry.truncated and len(entry.data) == 40 and entry.data.endswith(b"line 098\nline 099\n")
    assert entry.size == len(f"rank 0 of execution {entry.execution}\n") + 100 * len("line 000\n")
    assert "the last 40 of" in entry.reason


def test_keep_tail_bounds_memory_and_counts_every_byte() -> None:
    chunks = [bytes([65 + i % 26]) * 7 for i in range(1000)]
    data, total = keep_tail(chunks, 10)
    assert total == 7000 and data == b"".join(chunks)[-10:]
    assert keep_tail([], 10) == (b"", 0)
    assert keep_tail([b"abc"], 10) == (b"abc", 3)


def test_a_log_already_gone_is_recorded_as_gone(env: Env) -> None:
    job_id = env.submit("sleep", "100")
    sup = env.supervisor()
    env.cycles(sup, 1)
    env.sched.control.native_restart(env.sid(job_id))  # a new execution's pods replace the first's at once
    sup.cycle()
    entry = env.records.get_output(job_id, env.first_execution(job_id))
    assert entry is not None and entry.status is ArchiveStatus.GONE and "replaced" in entry.reason
    assert entry.data == b""


class SlowBackend(KubeflowShapedBackend):
    """The first ``execution_output`` call blocks until ``release`` is set (a read that hangs)."""

    release = threading.Event()
    calls = 0

    def execution_output(self, scheduler_id: str, identity: str) -> Iterator[bytes]:
        type(self).calls += 1
        if type(self).calls == 1:
            self.release.wait(30)
        return super().execution_output(scheduler_id, identity)


def test_a_hanging_read_is_bounded_recorded_and_retried() -> None:
    SlowBackend.release = threading.Event()
    SlowBackend.calls = 0
    env = Env(lambda s: SlowBackend(s, call_bound=0.3))
    job_id = env.submit("sleep", "100")
    sup = env.supervisor()
    try:
        preempt_after_writing(env, sup, job_id, "kept at last")
        report = sup.cycle()
        first = env.first_execution(job_id)
        entry = env.records.get_output(job_id, first)
        assert entry is not None and entry.status is ArchiveStatus.FAILED
        assert entry.reason == "rank 0's log was not read within 0.3s"
        assert report.archive == {"failed": 1}
        # recovery went on in the same cycle
        assert [s.n for s in env.records.get(job_id).submissions] == [1, 2]
    finally:
        SlowBackend.release.set()
    env.clock.advance(10)
    assert sup.cycle().archive == {"kept": 1}
    entry = env.records.get_output(job_id, first)
    assert entry is not None and entry.status is ArchiveStatus.KEPT and entry.attempts == 2
    assert entry.data.endswith(b"kept at last\n")


def test_nothing_is_read_or_queried_while_nothing_ends(env: Env) -> None:
    env.submit("sleep", "1000")
    sup = env.supervisor()
    env.cycles(sup, 6)
    assert env.records.log == ["intent start 1", "intent open 1"] and env.records.listings == 0


def test_a_new_supervisor_archives_what_its_predecessor_did_not_and_nothing_twice(env: Env) -> None:
    job_id = env.submit("sleep", "100")
    old = env.supervisor("sup-a", archive=ArchiveSettings(max_bytes=0), lease_ttl=30)
    assert old.archiver is None
    preempt_after_writing(env, old, job_id, "before the takeover")
    env.cycles(old, 2)
    first = env.first_execution(job_id)
    assert env.records.get_output(job_id, first) is None
    env.clock.advance(60)  # sup-a's leases expire
    new = env.supervisor("sup-b")
    new.cycle()
    entry = env.records.get_output(job_id, first)
    assert entry is not None and entry.status is ArchiveStatus.KEPT and entry.data.endswith(b"before the takeover\n")
    env.cycles(new, 3)
    third = env.supervisor("sup-c")
    third.archiver.catch_up([env.records.get(job_id)])  # type: ignore[union-attr]
    assert third.archiver.pending(job_id) == []  # type: ignore[union-attr]
    assert [x for x in env.records.log if x.startswith(f"archive {first}")] == [f"archive {first} kept"]


def test_no_archiver_where_the_scheduler_keeps_output_or_the_store_has_no_archive() -> None:
    clock = FakeClock()
    slurm = backend(MemoryScheduler(clock, "slurm"))
    assert Archiver.for_backend(slurm, MemoryRecords(), clock) is None
    kf = backend(MemoryScheduler(clock, "kubeflow"))
    assert Archiver.for_backend(kf, object(), clock) is None
    archiver = Archiver.for_backend(kf, MemoryRecords(), clock)
    assert archiver is not None and archiver.bound == 30.0
    with pytest.raises(Exception, match="archiveMaxBytes"):
        ArchiveSettings(max_bytes=-1)


class HangingBackend(KubeflowShapedBackend):
    """Every ``execution_output`` call blocks until ``release`` is set (reads that all hang)."""

    release = threading.Event()

    def execution_output(self, scheduler_id: str, identity: str) -> Iterator[bytes]:
        self.release.wait(30)
        return super().execution_output(scheduler_id, identity)


def test_overrunning_reads_never_pile_up_threads() -> None:
    HangingBackend.release = threading.Event()
    env = Env(lambda s: HangingBackend(s, call_bound=0.2))
    jobs = [env.submit("sleep", "100") for _ in range(4)]
    sup = env.supervisor()
    before = {t for t in threading.enumerate() if t.name == "archive-reader"}
    try:
        env.cycles(sup, 1)
        for job_id in jobs:
            env.sched.control.preempt(env.sid(job_id))
        reports = [sup.cycle() for _ in range(5)]
        started = {t for t in threading.enumerate() if t.name == "archive-reader"} - before
        assert len(started) == 1, f"{len(started)} reader threads after 5 cycles of overruns"
        assert reports[0].archive == {"failed": 1}, "the first read overran and was recorded"
        assert all(r.archive == {} for r in reports[1:]), "while it hangs, nothing else is tried or counted"
    finally:
        HangingBackend.release.set()
    kept = 0
    for _ in range(30):  # the freed reader reads again (one bound of reads per cycle)
        env.clock.advance(10)
        kept += sup.cycle().archive.get("kept", 0)
        if kept == len(jobs):
            break
    assert kept == len(jobs)
    assert all(env.records.get_output(j, env.first_execution(j)) is not None for j in jobs)
    assert {t for t in threading.enumerate() if t.name == "archive-reader"} - before <= started
