"""Browsing the records (find, tally, leases, clusters): the same answers from every store."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from dispatch import JobSpec, Unavailable
from dispatch.outcome import Cause, Evidence, Outcome, State
from dispatch.records import JobRecord, Lease, MemoryRecords, SQLiteRecords, Submission
from dispatch.records.browse import NO_CAUSE, Browse, JobQuery
from dispatch.records.postgres import PostgresRecords

POSTGRES_DSN = os.environ.get("DISPATCH_TEST_POSTGRES", "host=127.0.0.1 dbname=dispatch_test user=postgres")
T0 = 1_800_000_000.0


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Browse]:
    if request.param == "memory":
        s: object = MemoryRecords()
    elif request.param == "sqlite":
        s = SQLiteRecords(tmp_path / "r.db")
    else:
        try:
            s = PostgresRecords(POSTGRES_DSN, schema=f"t_{secrets.token_hex(6)}")
        except Unavailable as exc:
            pytest.fail(f"{exc}\nstart it with scripts/postgres-up.sh (the README's test command does)")
    fill(s)
    assert isinstance(s, Browse)
    yield s
    if isinstance(s, PostgresRecords):
        s.drop()
    s.close()  # type: ignore[attr-defined]


def job(
    i: int, state: State, cause: Cause | None, *, name: str, cluster: str = "c", lease: str | None = None
) -> JobRecord:
    at = T0 + i * 600
    sub = Submission(1, f"dsp-j{i:03d}-1", at, scheduler_id=str(i))
    if state is not State.PENDING or cause is not None:
        code = {State.SUCCEEDED: 0, State.FAILED: 1}.get(state) if cause is Cause.EXIT else None
        sub.outcome = Outcome(state, cause, Evidence("test", at), exit_code=code)
    return JobRecord(
        id=f"j{i:03d}",
        cluster=cluster,
        spec=JobSpec(command=("true",), name=name),
        created_at=at,
        updated_at=at,
        submissions=[sub],
        lease=Lease(lease, i, at + 60) if lease else None,
    )


def fill(s: object) -> None:
    jobs = [
        job(0, State.SUCCEEDED, Cause.EXIT, name="Train-ResNet"),
        job(1, State.FAILED, Cause.PREEMPTED, name="train-bert", lease="sup-b"),
        job(2, State.FAILED, Cause.EXIT, name="100%_done", cluster="hpc"),
        job(3, State.RUNNING, None, name="eval", lease="sup-a"),
        job(4, State.PENDING, None, name="under_score", cluster="hpc"),
    ]
    for j in jobs:
        s.create(j)  # type: ignore[attr-defined]


def ids(page: object) -> list[str]:
    return [r.id for r in page.rows]  # type: ignore[attr-defined]


def test_find_filters_and_pages(store: Browse) -> None:
    assert ids(store.find(JobQuery())) == ["j004", "j003", "j002", "j001", "j000"]
    assert ids(store.find(JobQuery(state="failed"))) == ["j002", "j001"]
    assert ids(store.find(JobQuery(cause="exit"))) == ["j002", "j000"]
    assert ids(store.find(JobQuery(cause=NO_CAUSE))) == ["j003"]
    assert ids(store.find(JobQuery(cause="gated"))) == ["j004"]
    assert ids(store.find(JobQuery(cluster="hpc"))) == ["j004", "j002"]
    assert ids(store.find(JobQuery(name="TRAIN"))) == ["j001", "j000"]
    assert ids(store.find(JobQuery(name="j00"))) == ["j004", "j003", "j002", "j001", "j000"]
    # the name filter is literal: no LIKE wildcards
    assert ids(store.find(JobQuery(name="%"))) == ["j002"]
    assert ids(store.find(JobQuery(name="_"))) == ["j004", "j002"]
    page = store.find(JobQuery(offset=2, limit=2))
    assert ids(page) == ["j002", "j001"] and page.total == 5
    page = store.find(JobQuery(state="failed", cluster="c"))
    assert ids(page) == ["j001"] and page.total == 1


def test_tally_counts_by_hour_state_and_cause(store: Browse) -> None:
    got = {(c.hour, c.state, c.cause): c.count for c in store.tally(T0 + 600)}
    assert got == {(0, "failed", "preempted"): 1, (0, "failed", "exit"): 1, (0, "running", None): 1,
                   (0, "pending", "gated"): 1}  # fmt: skip


def test_leases_and_clusters(store: Browse) -> None:
    rows = store.leases()
    assert [(r.owner, r.job_id, r.token) for r in rows] == [("sup-a", "j003", 3), ("sup-b", "j001", 1)]
    assert rows[0].expires_at == T0 + 3 * 600 + 60
    assert store.clusters() == ["c", "hpc"]
