"""The supervisor's retention of the output archive: pruned at most hourly of its clock, only with ``keep`` set."""

from __future__ import annotations

from typing import Any

import pytest

from dispatch.clock import FakeClock
from dispatch.cluster import Cluster
from dispatch.errors import ConfigError, Unavailable
from dispatch.extensions import Image
from dispatch.memory import MemoryScheduler, backend
from dispatch.records import MemoryRecords
from dispatch.records.archive import ArchivedOutput, ArchiveStatus
from dispatch.spec import JobSpec
from dispatch.supervise import Supervisor
from dispatch.supervise.archive import PRUNE_EVERY, ArchiveSettings

from ..records.test_contract import make_job

DAY = 86400.0


class CountingRecords(MemoryRecords):
    """Memory records that count prune calls, and fail them while ``failing`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.prunes: list[tuple[float, int | None]] = []
        self.failing = False

    def prune_outputs(self, before: float, *, limit: int | None = None, dry_run: bool = False) -> int:
        self.prunes.append((before, limit))
        if self.failing:
            raise Unavailable("the database is restarting")
        return super().prune_outputs(before, limit=limit, dry_run=dry_run)


class Env:
    def __init__(self) -> None:
        self.clock = FakeClock(start=100 * DAY)
        self.backend = backend(MemoryScheduler(self.clock, "kubeflow", nodes=2))
        self.records = CountingRecords()
        done = make_job("done", at=self.clock.now() - 10 * DAY)
        done.closed = True
        self.records.create(done)
        self.records.create(make_job("open", at=self.clock.now() - 10 * DAY))

    def archive(self, job_id: str, age: float, n: int = 1) -> None:
        """``n`` entries of ``job_id`` archived ``age`` seconds ago."""
        for i in range(n):
            self.records.put_output(
                ArchivedOutput(
                    job_id=job_id,
                    execution=f"{job_id}.{age:g}.{i}",
                    submission=1,
                    restart=i,
                    status=ArchiveStatus.GONE,
                    archived_at=self.clock.now() - age,
                )
            )

    def left(self, job_id: str) -> int:
        return len(self.records.outputs([job_id]))

    def supervisor(self, keep: float | None) -> Supervisor:
        return Supervisor(
            self.backend, self.records, clock=self.clock, owner="sup-a", poll=10, archive=ArchiveSettings(keep=keep)
        )


def test_nothing_is_pruned_without_keep() -> None:
    env = Env()
    env.archive("done", 365 * DAY)
    for keep in (None, 0.0):
        sup = env.supervisor(keep)
        assert sup.pruner is None
        for _ in range(3):
            report = sup.cycle()
            env.clock.advance(PRUNE_EVERY)
            assert (report.archive_pruned, report.archive_prune_errors) == (0, 0)
    assert env.records.prunes == [] and env.left("done") == 1


def test_pruning_happens_at_once_then_at_most_hourly_and_spares_open_jobs() -> None:
    env = Env()
    env.archive("done", 31 * DAY, n=2)
    env.archive("done", 29 * DAY)
    env.archive("open", 60 * DAY)
    sup = env.supervisor(30 * DAY)
    start = env.clock.now()
    report = sup.cycle()
    assert report.archive_pruned == 2 and report.to_json()["archivePruned"] == 2
    assert env.records.prunes == [(start - 30 * DAY, 1000)]
    assert (env.left("done"), env.left("open")) == (1, 1)
    env.archive("done", 40 * DAY)  # due for deletion, but not before the hour is up
    for _ in range(int(PRUNE_EVERY // 10) - 1):  # a cycle every 10 s
        env.clock.advance(10)
        assert sup.cycle().archive_pruned == 0
    assert len(env.records.prunes) == 1 and env.left("done") == 2
    env.clock.advance(10)  # an hour after the first
    assert sup.cycle().archive_pruned == 1
    assert len(env.records.prunes) == 2 and (env.left("done"), env.left("open")) == (1, 1)


def test_a_full_batch_is_followed_by_another_next_cycle_until_the_backlog_is_gone() -> None:
    env = Env()
    env.archive("done", 90 * DAY, n=5)
    sup = env.supervisor(30 * DAY)
    assert sup.pruner is not None
    sup.pruner.limit = 2
    pruned = []
    for _ in range(4):
        pruned.append(sup.cycle().archive_pruned)
        env.clock.advance(10)
    assert pruned == [2, 2, 1, 0] and len(env.records.prunes) == 3  # no call after the short one
    assert env.left("done") == 0


def test_a_failing_prune_is_counted_and_the_cycle_goes_on() -> None:
    env = Env()
    env.archive("done", 90 * DAY)
    job_id = Cluster("memory", env.backend, env.records, env.clock).submit(
        JobSpec(("sleep", "600"), extensions=(Image("x:1"),))
    )
    sup = env.supervisor(30 * DAY)
    env.records.failing = True
    report = sup.cycle()
    assert (report.archive_pruned, report.archive_prune_errors) == (0, 1)
    assert report.to_json()["archivePruneErrors"] == 1
    lease = env.records.get(job_id).lease
    assert report.owned == 1 and lease is not None and lease.owner == "sup-a"  # the cycle's work was done
    env.records.failing = False
    env.clock.advance(10)
    report = sup.cycle()
    assert (report.archive_pruned, report.archive_prune_errors) == (0, 0)
    assert len(env.records.prunes) == 1  # not again before the hour is up
    env.clock.advance(PRUNE_EVERY)
    assert sup.cycle().archive_pruned == 1 and env.left("done") == 0


def test_keep_is_checked_and_needs_a_store_with_an_archive() -> None:
    with pytest.raises(ConfigError, match="archiveKeep"):
        ArchiveSettings(keep=-1.0)
    with pytest.raises(ConfigError, match="archiveKeep"):
        ArchiveSettings(keep=float("inf"))

    class NoArchive:
        def __getattr__(self, name: str) -> Any:
            if name == "prune_outputs":
                raise AttributeError(name)
            return getattr(records, name)

    clock = FakeClock()
    records = MemoryRecords()
    b = backend(MemoryScheduler(clock, "slurm"))
    with pytest.raises(ConfigError, match="archiveKeep.*no output archive"):
        Supervisor(b, NoArchive(), clock=clock, poll=10, archive=ArchiveSettings(keep=DAY))  # type: ignore[arg-type]
