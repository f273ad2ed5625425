"""Several supervisors of one cluster divide its jobs: balanced, a newcomer gets its share, a dead one's jobs
are taken over within the lease plus one poll, and no job is ever held by two."""

from __future__ import annotations

import os
import secrets
from collections import Counter
from collections.abc import Iterator

import pytest

from dispatch.clock import FakeClock
from dispatch.cluster import Cluster
from dispatch.memory import MemoryScheduler, backend
from dispatch.records import MemoryRecords, Records
from dispatch.spec import JobSpec
from dispatch.supervise import Supervisor

POLL, TTL = 10.0, 60.0
DSN = os.environ.get("DISPATCH_TEST_POSTGRES", "host=127.0.0.1 dbname=dispatch_test user=postgres")


@pytest.fixture(params=["memory", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest) -> Iterator[Records]:
    if request.param == "memory":
        yield MemoryRecords()
        return
    from dispatch.errors import Unavailable
    from dispatch.records.postgres import PostgresRecords

    try:
        s = PostgresRecords(DSN, schema=f"share_{secrets.token_hex(5)}")
    except Unavailable as exc:
        pytest.fail(f"{exc}\nstart it with scripts/postgres-up.sh (the README's test command does)")
    yield s
    s.drop()
    s.close()


def holders(records: Records, now: float) -> Counter[str]:
    return Counter(
        j.lease.owner for j in records.jobs(cluster="memory") if j.lease is not None and j.lease.expires_at > now
    )


def test_supervisors_share_take_over_and_never_overlap(store: Records) -> None:
    clock = FakeClock()
    sched = MemoryScheduler(clock, "slurm", nodes=40, min_job_age=300, node_loss_window=60)
    cluster = Cluster("memory", backend(sched), store, clock)
    for _ in range(30):
        cluster.submit(JobSpec(command=("sleep", "100000")))

    def sup(owner: str) -> Supervisor:
        return Supervisor(backend(sched), store, clock=clock, owner=owner, poll=POLL, lease_ttl=TTL)

    def round_of(*sups: Supervisor) -> None:
        for s in sups:
            s.cycle()
        clock.advance(POLL)

    a = sup("sup-a")
    round_of(a)
    assert holders(store, clock.now()) == {"sup-a": 30}  # alone, it takes everything
    b, c = sup("sup-b"), sup("sup-c")
    for _ in range(3):
        round_of(a, b, c)
    shares = holders(store, clock.now())
    assert sum(shares.values()) == 30 and set(shares) == {"sup-a", "sup-b", "sup-c"}
    assert max(shares.values()) <= 2 * min(shares.values()), shares  # a newcomer got its share
    # sup-a dies: nothing of it cycles any more; within the lease plus one poll the others hold everything
    died = clock.now()
    while clock.now() - died <= TTL + POLL:
        round_of(b, c)
    after = holders(store, clock.now())
    assert "sup-a" not in after and sum(after.values()) == 30, after
    assert max(after.values()) <= 2 * min(after.values()), after
    # one holder per job at every moment: the record has one lease, and every token was taken once
    for job in store.jobs(cluster="memory"):
        tokens = [e.data["token"] for e in store.events(job.id) if e.kind == "lease" and e.data["owner"]]
        assert len(tokens) == len(set(tokens)), (job.id, tokens)


def test_a_supervisor_of_one_job_takes_no_share_and_registers_no_peer(store: Records) -> None:
    """``dispatch run``'s in-process supervisor (``only=``) looks after its own job: the service keeps every
    other job, and the service's share is not cut by a peer that leaves when the run ends."""
    clock = FakeClock()
    sched = MemoryScheduler(clock, "slurm", nodes=40, min_job_age=300, node_loss_window=60)
    cluster = Cluster("memory", backend(sched), store, clock)
    ids = [cluster.submit(JobSpec(command=("sleep", "100000"))) for _ in range(10)]
    service = Supervisor(backend(sched), store, clock=clock, owner="service", poll=POLL, lease_ttl=TTL)
    run = Supervisor(backend(sched), store, clock=clock, owner="run", poll=POLL, lease_ttl=TTL, only={ids[0]})
    for _ in range(3):
        run.cycle()
        service.cycle()
        clock.advance(POLL)
    assert holders(store, clock.now()) == {"run": 1, "service": 9}
    peers = store.peers(cluster="memory", owner="service", now=clock.now(), expires_at=clock.now() + TTL)
    assert list(peers.owners) == ["service"], peers
