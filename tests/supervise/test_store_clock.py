"""Leases judged by the store's clock: two supervisors on one PostgreSQL store whose own clocks are two minutes
off, one each way. The one ahead takes no lease the store still holds live; the one behind, cut off from the store
past its lease, stops acting before another may take the lease, and its late fenced write is refused. Every write
that lands is checked against the store's own clock (``clock_timestamp()``), from outside the supervisors.

The first case also runs with the leases judged by the supervisors' own clocks (``lease_clock`` not given), to show
the fault is real: the one ahead steals. (A supervisor behind, alone, is consistent with itself: it writes its
leases' expiries on its own clock; the store's clock is what makes its expiries and the others' comparable.)
"""

from __future__ import annotations

import os
import secrets
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from dispatch.clock import SkewedClock, SystemClock
from dispatch.cluster import Cluster
from dispatch.errors import Conflict, Unavailable
from dispatch.memory import MemoryScheduler, backend
from dispatch.records.model import Event, JobRecord
from dispatch.records.postgres import PostgresRecords
from dispatch.spec import JobSpec
from dispatch.spi import Backend, view
from dispatch.supervise import LostLease, Supervisor

pytestmark = [pytest.mark.postgres]

DSN = os.environ.get("DISPATCH_TEST_POSTGRES", "host=127.0.0.1 dbname=dispatch_test user=postgres")
POLL, TTL, SKEW = 0.2, 1.5, 120.0
RULES = {"rules": [{"name": "again", "cause": ["preempted"], "action": "resubmit", "limit": 3}]}
ACTIONS = frozenset({"start", "open", "hold", "release", "requeue", "readmit", "stop_job"})


class Judged(PostgresRecords):
    """One supervisor's connection to the store, which checks every fenced write that lands against the store's
    clock: the lease it carries the token of was live when the write committed."""

    def __init__(self, schema: str, late: list[str]) -> None:
        super().__init__(DSN, schema=schema)
        self.late = late
        self.cut = False
        """A partition from the store: every call fails as a lost connection would."""

    def _reach(self) -> None:
        if self.cut:
            raise Unavailable("partitioned from the store")

    def update(self, job: JobRecord, events: Sequence[Event] = (), *, fence: int | None = None) -> JobRecord:
        self._reach()
        written = super().update(job, events, fence=fence)
        after = self.now()
        releases = any(e.kind == "lease" and e.data.get("owner") is None for e in events)
        if fence is not None and not releases and (written.lease is None or written.lease.expires_at <= after):
            self.late.append(f"{job.id}: a write under token {fence} landed at {after:.2f}, after its lease")
        return written

    def to_supervise(self, *, cluster: str, owner: str, now: float) -> Any:
        self._reach()
        return super().to_supervise(cluster=cluster, owner=owner, now=now)

    def renew(self, *, cluster: str, owner: str, now: float, expires_at: float) -> dict[str, int]:
        self._reach()
        return super().renew(cluster=cluster, owner=owner, now=now, expires_at=expires_at)


class World:
    def __init__(self, schema: str) -> None:
        self.schema = schema
        self.late: list[str] = []
        self.calls: Counter[tuple[str, str, str]] = Counter()
        """(owner, call, first argument) of every scheduler action."""
        self.sched = MemoryScheduler(SystemClock(), "slurm", nodes=8, min_job_age=300, node_loss_window=60)
        self.store = PostgresRecords(DSN, schema=schema)
        self.cluster = Cluster("memory", backend(self.sched), self.store, SystemClock())
        self.ids = [self.cluster.submit(JobSpec(command=("sleep", "100000")), RULES) for _ in range(4)]
        self.opened: list[Judged] = []

    def traced(self, owner: str) -> Backend:
        def call(name: str, method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            if name in ACTIONS:
                self.calls[(owner, name, str(getattr(args[0], "job_id", args[0])))] += 1
            return method(*args, **kwargs)

        return view(backend(self.sched), "Traced", call=call)

    def supervisor(self, owner: str, skew: float, *, by_store: bool) -> tuple[Supervisor, Judged]:
        records = Judged(self.schema, self.late)
        self.opened.append(records)
        sup = Supervisor(
            self.traced(owner),
            records,
            clock=SkewedClock(SystemClock(), skew),
            owner=owner,
            poll=POLL,
            lease_ttl=TTL,
            only=set(self.ids),
            lease_clock=records.now if by_store else None,
        )
        return sup, records

    def holders(self) -> Counter[str | None]:
        return Counter(j.lease.owner if j.lease else None for j in self.store.get_many(self.ids))

    def close(self) -> None:
        for r in self.opened:
            r.close()
        self.store.drop()
        self.store.close()


@pytest.fixture
def world() -> Iterator[World]:
    try:
        w = World(f"skew_{secrets.token_hex(5)}")
    except Unavailable as exc:
        pytest.fail(f"{exc}\nstart it with scripts/postgres-up.sh (the README's test command does)")
    yield w
    w.close()


def rounds(seconds: float, *sups: Supervisor) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for s in sups:
            s.cycle()
        time.sleep(POLL)


@pytest.mark.parametrize("by_store", [True, False], ids=["store-clock", "own-clock"])
def test_a_supervisor_ahead_takes_no_live_lease(world: World, by_store: bool) -> None:
    behind, _ = world.supervisor("behind", -SKEW, by_store=by_store)
    ahead, _ = world.supervisor("ahead", +SKEW, by_store=by_store)
    behind.cycle()
    assert world.holders() == {"behind": 4}
    rounds(2 * TTL, behind, ahead)  # the one behind renews all the while
    if not by_store:
        assert world.holders()["ahead"] > 0, "the fault did not show: judged by its own clock, ahead should steal"
        return
    assert world.holders() == {"behind": 4}
    for job_id in world.ids:
        tokens = [e.data["token"] for e in world.store.events(job_id) if e.kind == "lease"]
        assert tokens == [1], (job_id, tokens)
    assert not world.late


def test_a_supervisor_behind_cut_off_stops_acting_and_its_late_write_is_refused(world: World) -> None:
    behind, cut = world.supervisor("behind", -SKEW, by_store=True)
    ahead, _ = world.supervisor("ahead", +SKEW, by_store=True)
    behind.cycle()
    assert world.holders() == {"behind": 4}
    held = {j.id: j for j in world.store.get_many(world.ids)}
    cut.cut = True  # partitioned from the store: no renewal, no write
    for job in held.values():
        sid = job.current.scheduler_id if job.current else None
        assert sid is not None
        world.sched.control.preempt(sid)  # each job now needs a resubmission: an act
    rounds(TTL + 0.3)  # nobody cycles; the lease runs out by the store's clock
    for job in held.values():
        with pytest.raises(LostLease):
            behind._check(job)  # it stops acting before anybody may take the lease
    rounds(6 * POLL, ahead)  # the one ahead takes every lease (now expired by the store's clock) and resubmits
    assert world.holders() == {"ahead": 4}
    cut.cut = False  # healed: the late fenced write is refused, its cycle finds every lease taken
    job = held[world.ids[0]]
    late = job.copy()
    late.updated_at = behind.clock.now()
    with pytest.raises(Conflict):
        cut.update(late, [], fence=job.lease.token if job.lease else None)
    rounds(4 * POLL, behind, ahead)
    starts = Counter(key[2] for key in world.calls if key[1] == "start")
    assert not [k for k in world.calls if k[0] == "behind"], world.calls
    assert all(n == 1 for n in world.calls.values()), world.calls  # no call made twice
    assert sorted(starts) == sorted(world.ids), starts  # one resubmission each, by the one that took the lease
    for j in world.store.get_many(world.ids):
        assert len(j.submissions) == 2 and j.lease is not None and j.lease.owner == "ahead", j.id
    assert not world.late


def test_the_store_tells_its_clock_and_a_store_in_memory_has_none(world: World, tmp_path: Any) -> None:
    from dispatch.records import MemoryRecords
    from dispatch.records.base import store_clock
    from dispatch.records.sqlite import SQLiteRecords

    pg = store_clock(world.store)
    assert pg is not None and abs(pg() - time.time()) < 5.0  # the server is this host; a clock on it is close
    lite = SQLiteRecords(tmp_path / "records.db")
    try:
        told = store_clock(lite)
        assert told is not None and abs(told() - time.time()) < 1.0
    finally:
        lite.close()
    assert store_clock(MemoryRecords()) is None
