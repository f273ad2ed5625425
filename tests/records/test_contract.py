"""The Records contract, run against every store: CAS, fencing, atomic events, copies, migrations."""

from __future__ import annotations

import os
import secrets
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dispatch import Conflict, JobSpec, NotFound, Unavailable
from dispatch.outcome import Cause, Evidence, Outcome, State
from dispatch.records import (
    Event,
    ExecutionRecord,
    JobRecord,
    Lease,
    MemoryRecords,
    Records,
    SQLiteRecords,
    Submission,
)
from dispatch.records.base import batch_writes
from dispatch.records.nodes import NodeBlame, NodeBlames
from dispatch.records.postgres import SCHEMA_VERSION as PG_SCHEMA
from dispatch.records.postgres import PostgresRecords, redact
from dispatch.records.sqlite import SCHEMA_VERSION as SQLITE_SCHEMA


def make_job(job_id: str = "j1", at: float = 100.0) -> JobRecord:
    return JobRecord(
        id=job_id,
        cluster="c",
        spec=JobSpec(command=("echo", "hi"), name="n"),
        created_at=at,
        updated_at=at,
        submissions=[Submission(1, f"dsp-{job_id}-1", at)],
    )


POSTGRES_DSN = os.environ.get("DISPATCH_TEST_POSTGRES", "host=127.0.0.1 dbname=dispatch_test user=postgres")


def postgres_store() -> PostgresRecords:
    """A store in a fresh schema of the test database; fails loudly (never skips) if PostgreSQL is down."""
    try:
        return PostgresRecords(POSTGRES_DSN, schema=f"t_{secrets.token_hex(6)}")
    except Unavailable as exc:
        pytest.fail(f"{exc}\nstart it with scripts/postgres-up.sh (the README's test command does)")


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Records]:
    s: Records
    if request.param == "memory":
        s = MemoryRecords()
    elif request.param == "sqlite":
        s = SQLiteRecords(tmp_path / "r.db")
    else:
        s = postgres_store()
    yield s
    if isinstance(s, PostgresRecords):
        s.drop()
    s.close()


def test_create_get_round_trip(store: Records) -> None:
    job = make_job()
    created = store.create(job, [Event("j1", 100.0, "submitted", {"a": 1})])
    assert created.version == 1
    got = store.get("j1")
    assert got.to_json() == created.to_json()
    assert [e.kind for e in store.events("j1")] == ["submitted"]
    with pytest.raises(Conflict):
        store.create(job)
    with pytest.raises(NotFound):
        store.get("nope")


def test_exactly_one_of_two_writers_wins(store: Records) -> None:
    store.create(make_job())
    a, b = store.get("j1"), store.get("j1")
    a.closed = True
    store.update(a, [Event("j1", 1.0, "a")])
    b.stop_requested = True
    with pytest.raises(Conflict):
        store.update(b, [Event("j1", 1.0, "b")])
    final = store.get("j1")
    assert final.closed and not final.stop_requested and final.version == 2
    assert [e.kind for e in store.events("j1")] == ["a"]


def test_concurrent_writers_serialise(store: Records) -> None:
    store.create(make_job())
    wins: list[int] = []
    losses: list[int] = []
    barrier = threading.Barrier(8)

    def writer(i: int) -> None:
        job = store.get("j1")
        barrier.wait()
        job.counters[f"w{i}"] = i
        try:
            store.update(job)
            wins.append(i)
        except Conflict:
            losses.append(i)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and len(losses) == 7
    assert store.get("j1").counters == {f"w{wins[0]}": wins[0]}


def test_fence_refuses_a_stale_token(store: Records) -> None:
    store.create(make_job())
    job = store.get("j1")
    job.lease = Lease("sup-a", 1, 200.0)
    job = store.update(job)
    job.lease = Lease("sup-b", 2, 300.0)
    job = store.update(job, fence=1)
    job.closed = True
    with pytest.raises(Conflict, match="stale"):
        store.update(job, fence=1)
    assert store.update(job, fence=2).closed


def test_reads_are_copies(store: Records) -> None:
    store.create(make_job())
    job = store.get("j1")
    job.submissions[0].scheduler_id = "123"
    assert store.get("j1").submissions[0].scheduler_id is None


# ----- batched writes (dispatch.records.base.BatchWrites) -----------------------------------------------------


def test_every_store_offers_batched_writes(store: Records) -> None:
    assert batch_writes(store) is store


def test_a_batch_answers_each_item_as_its_single_write_would(store: Records) -> None:
    batched = batch_writes(store)
    assert batched is not None
    store.create(make_job("old"))
    created = batched.create_many(
        [(make_job("b0"), [Event("b0", 1.0, "submitted")]), (make_job("old"), [Event("old", 1.0, "lost")]),
         (make_job("b1"), []), (make_job("b1"), [Event("b1", 1.0, "twice")])]
    )  # fmt: skip
    assert [type(a).__name__ for a in created] == ["JobRecord", "Conflict", "JobRecord", "Conflict"]
    assert [a.version for a in created if isinstance(a, JobRecord)] == [1, 1]
    assert [e.kind for e in store.events("b0")] == ["submitted"]
    assert store.events("old") == [] and store.events("b1") == []

    a, b, stale = store.get("b0"), store.get("b1"), store.get("old")
    stale.closed = True
    store.update(store.get("old"))  # "old" moves on: the copy read before is stale
    a.closed = True
    b.counters["n"] = 1
    again = store.get("b1")
    again.counters["n"] = 2  # a second write of b1 in the same batch, from the same version: it loses
    ghost = make_job("ghost")
    ghost.version = 1
    answers = batched.update_many(
        [(a, [Event("b0", 2.0, "intent", {"seq": 1})]), (stale, [Event("old", 2.0, "lost")]), (b, []),
         (again, [Event("b1", 2.0, "lost")]), (ghost, [])]
    )  # fmt: skip
    assert [type(x).__name__ for x in answers] == ["JobRecord", "Conflict", "JobRecord", "Conflict", "NotFound"]
    assert store.get("b0").closed and store.get("b0").version == 2
    assert store.get("b1").counters == {"n": 1} and not store.get("old").closed
    assert [e.kind for e in store.events("b0")] == ["submitted", "intent"]
    assert store.events("old") == [] and store.events("b1") == []
    assert answers[0] is a and a.to_json() == store.get("b0").to_json(), "an item written is handed over, as stored"
    assert (stale.version, again.version, ghost.version) == (1, 1, 1), "an item refused is left as it was"
    assert created[0] is not None and created[0].version == 1


def test_a_batch_checks_the_fence_of_each_item(store: Records) -> None:
    batched = batch_writes(store)
    assert batched is not None
    for i in range(2):
        job = make_job(f"f{i}")
        job.lease = Lease("sup-a", 1 + i, 500.0)
        store.create(job)
    answers = batched.update_many([(store.get("f0"), []), (store.get("f1"), [])], fence=1)
    assert [type(x).__name__ for x in answers] == ["JobRecord", "Conflict"]
    assert "stale" in str(answers[1]) and store.get("f1").version == 1


def test_a_batch_that_cannot_be_written_writes_nothing(store: Records) -> None:
    batched = batch_writes(store)
    assert batched is not None
    store.create(make_job("u0"))
    store.create(make_job("u9"))
    job = store.get("u0")
    job.closed = True
    with pytest.raises(TypeError):  # an event the store cannot encode: the whole batch fails
        batched.update_many([(job, [Event("u0", 1.0, "ok")]), (store.get("u9"), [Event("u9", 1.0, "x", {"x": {1j}})])])
    assert not store.get("u0").closed and store.get("u0").version == 1 and store.events("u0") == []
    assert job.version == 1, "an item of a batch that raised is left as it was"
    with pytest.raises(TypeError):
        batched.create_many([(make_job("u1"), []), (make_job("u2"), [Event("u2", 1.0, "x", {"x": {1j}})])])
    assert store.get_many(["u1", "u2"]) == []


def test_sqlite_syncs_a_batch_carrying_an_intent_to_disk(tmp_path: Path) -> None:
    s = SQLiteRecords(tmp_path / "d.db")
    statements: list[str] = []
    s._db.set_trace_callback(statements.append)
    s.create_many([(make_job("k0"), [Event("k0", 1.0, "submitted")])])
    assert not any("synchronous" in x for x in statements)
    s.update_many([(s.get("k0"), [Event("k0", 1.0, "intent", {"seq": 1})])])
    full = statements.index("PRAGMA synchronous=FULL")
    commit = max(i for i, x in enumerate(statements) if x == "COMMIT")
    assert full < commit < statements.index("PRAGMA synchronous=NORMAL")
    assert sum(x == "COMMIT" for x in statements) == 2, "one commit per batch"
    s.close()


def test_a_wrapper_forwarding_attributes_is_not_taken_for_a_batch_writer() -> None:
    class Forwarding:
        def __init__(self, inner: Records) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> object:
            return getattr(self.inner, name)

    assert batch_writes(Forwarding(MemoryRecords())) is None


def test_summaries_and_listing(store: Records) -> None:
    for i in range(5):
        job = make_job(f"j{i}", at=100.0 + i)
        job.closed = i % 2 == 0
        store.create(job)
    job = store.get("j3")
    ev = Evidence("test", 150.0)
    job.submissions[0].outcome = Outcome(State.FAILED, Cause.PREEMPTED, ev)
    job.submissions[0].executions.append(ExecutionRecord("1.99.0", 0, Outcome(State.FAILED, Cause.PREEMPTED, ev)))
    store.update(job)
    rows = store.summaries()
    assert [r.id for r in rows] == ["j4", "j3", "j2", "j1", "j0"]
    j3 = next(r for r in rows if r.id == "j3")
    assert (j3.state, j3.cause, j3.execution) == (State.FAILED, Cause.PREEMPTED, "1.99.0")
    assert [r.id for r in store.summaries(active_only=True)] == ["j3", "j1"]
    assert [j.id for j in store.jobs()] == ["j1", "j3"]
    assert len(store.summaries(limit=2)) == 2


def test_to_supervise_reads_open_jobs_and_takeable_leases_only(store: Records) -> None:
    for j in _closed_and_leased():
        store.create(j)
    other = make_job("theirs", 80.0)
    other.lease = Lease("sup-b", 1, 400.0)
    store.create(other)
    elsewhere = make_job("elsewhere", 90.0)
    elsewhere.cluster = "d"
    store.create(elsewhere)
    heads = store.to_supervise(cluster="c", owner="sup-a", now=100.0)
    assert [(h.id, h.version, h.lease_owner) for h in heads] == [("mine", 1, "sup-a"), ("free", 1, None)]
    assert [h.id for h in store.to_supervise(cluster="c", owner="sup-a", now=400.0)] == ["mine", "free", "theirs"]
    assert {j.id for j in store.get_many(["mine", "free", "nope"])} == {"mine", "free"}
    # closing a job takes it out; a closed job with an open stop of a stray keeps it in
    free = store.get("free")
    free.closed = True
    store.update(free)
    assert [h.id for h in store.to_supervise(cluster="c", owner="sup-a", now=100.0)] == ["mine"]


def test_renew_moves_only_the_owners_unexpired_leases_in_one_write(store: Records) -> None:
    mine = make_job("mine", 60.0)
    mine.lease = Lease("sup-a", 3, 500.0)
    late = make_job("late", 61.0)
    late.lease = Lease("sup-a", 4, 90.0)  # expired at t=100: never renewed in place
    theirs = make_job("theirs", 62.0)
    theirs.lease = Lease("sup-b", 1, 500.0)
    for j in (mine, late, theirs):
        store.create(j)
    stale = store.get("mine")
    assert store.renew(cluster="c", owner="sup-a", now=100.0, expires_at=700.0) == {"mine": 2}
    got = store.get("mine")
    assert (got.version, got.lease) == (2, Lease("sup-a", 3, 700.0))
    assert store.get("late").lease == Lease("sup-a", 4, 90.0) and store.get("theirs").version == 1
    with pytest.raises(Conflict):
        store.update(stale)  # a copy read before the renewal cannot write the old expiry back
    store.update(got, fence=3)
    heads = {h.id: h for h in store.to_supervise(cluster="c", owner="sup-a", now=100.0)}
    assert (heads["mine"].version, heads["mine"].lease_expires) == (3, 700.0)


def test_renew_changes_nothing_but_the_version_and_the_expiry_whatever_the_user_data(store: Records) -> None:
    """User data holding the keys a renewal edits (rules, the environment, a counter, a decision's reason) is
    left as it was."""
    from dispatch.records.model import Decision

    lookalike = '"version": 7, "updatedAt": 1.0, "submissions": [], "lease": {"owner": "x", "expiresAt": 1.0}'
    job = make_job("odd", 60.0)
    job.spec = JobSpec(command=("echo", lookalike), name="n", env={"X": lookalike})
    job.rules = {"version": 7, "updatedAt": 1.0, "submissions": [1], "lease": {"owner": "x", "expiresAt": 1.0}}
    job.counters = {lookalike: 1}
    job.decisions = [Decision(1, 60.0, 1, "1.x.0", Cause.EXIT, "close", "unmatched", lookalike, "sup-a")]
    job.lease = Lease("sup-a", 3, 500.0)
    store.create(job)
    before = store.get("odd").to_json()
    assert store.renew(cluster="c", owner="sup-a", now=100.0, expires_at=700.5) == {"odd": 2}
    after = store.get("odd").to_json()
    assert (after["version"], after["lease"]) == (2, {"owner": "sup-a", "token": 3, "expiresAt": 700.5})
    assert {k: v for k, v in after.items() if k not in ("version", "lease")} == {
        k: v for k, v in before.items() if k not in ("version", "lease")
    }
    assert store.renew(cluster="c", owner="sup-a", now=100.0, expires_at=800.0) == {"odd": 3}


def test_sqlite_file_is_private_and_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "state" / "records.db"
    s = SQLiteRecords(path)
    s.create(make_job())
    s.close()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    s2 = SQLiteRecords(path)
    assert s2.get("j1").spec.command == ("echo", "hi")
    assert s2.schema_version() == SQLITE_SCHEMA
    s2.close()


def test_sqlite_migrates_an_old_schema(tmp_path: Path) -> None:
    import sqlite3

    from dispatch.records.sqlite import MIGRATIONS

    path = tmp_path / "old.db"
    db = sqlite3.connect(path, isolation_level=None)
    MIGRATIONS[1](db)
    db.execute("PRAGMA user_version=1")
    db.close()
    s = SQLiteRecords(path)
    assert s.schema_version() == SQLITE_SCHEMA
    s.create(make_job())
    s.close()


def _closed_and_leased() -> list[JobRecord]:
    closed = make_job("old", 50.0)
    closed.closed = True
    leased = make_job("mine", 60.0)
    leased.lease = Lease("sup-a", 3, 500.0)
    return [closed, leased, make_job("free", 70.0)]


def test_sqlite_migration_fills_the_supervision_columns_of_existing_jobs(tmp_path: Path) -> None:
    import json
    import sqlite3

    from dispatch.records.sqlite import MIGRATIONS

    path = tmp_path / "v2.db"
    db = sqlite3.connect(path, isolation_level=None)
    MIGRATIONS[1](db)
    MIGRATIONS[2](db)
    db.execute("PRAGMA user_version=2")
    for j in _closed_and_leased():
        j.version = 1
        db.execute(
            "INSERT INTO jobs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                j.id,
                1,
                j.cluster,
                None,
                "pending",
                None,
                None,
                None,
                j.closed,
                j.created_at,
                j.created_at,
                None,
                json.dumps(j.to_json()),
            ),
        )
    db.close()
    s = SQLiteRecords(path)
    assert [h.id for h in s.to_supervise(cluster="c", owner="sup-b", now=100.0)] == ["free"]
    assert [h.id for h in s.to_supervise(cluster="c", owner="sup-a", now=100.0)] == ["mine", "free"]
    assert s.renew(cluster="c", owner="sup-a", now=100.0, expires_at=700.0) == {"mine": 2}
    s.close()


@pytest.mark.postgres
def test_postgres_migration_fills_the_supervision_columns_of_existing_jobs() -> None:
    import json

    from dispatch.records import postgres

    s = postgres_store()
    try:
        with s._tx() as cur:
            cur.execute(s._q("DROP TABLE {s}.jobs"))
            cur.execute(s._q("DROP TABLE {s}.events"))
            postgres.MIGRATIONS[1](cur, s._s)
            cur.execute(s._q("UPDATE {s}.meta SET value = '1' WHERE key = 'schema_version'"))
            for j in _closed_and_leased():
                j.version = 1
                cur.execute(
                    s._q("INSERT INTO {s}.jobs VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"),
                    (
                        j.id,
                        1,
                        j.cluster,
                        None,
                        "pending",
                        None,
                        None,
                        None,
                        j.closed,
                        j.created_at,
                        j.created_at,
                        None,
                        json.dumps(j.to_json()),
                    ),
                )
        again = PostgresRecords(POSTGRES_DSN, schema=s.schema)
        assert again.schema_version() == postgres.SCHEMA_VERSION
        assert [h.id for h in again.to_supervise(cluster="c", owner="sup-b", now=100.0)] == ["free"]
        assert [h.id for h in again.to_supervise(cluster="c", owner="sup-a", now=100.0)] == ["mine", "free"]
        again.close()
    finally:
        s.drop()
        s.close()


def test_sqlite_refuses_a_newer_schema(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "new.db"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA user_version=99")
    db.close()
    with pytest.raises(RuntimeError, match="newer than this dispatch"):
        SQLiteRecords(path)


def test_two_sqlite_connections_share_one_file(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    a, b = SQLiteRecords(path), SQLiteRecords(path)
    a.create(make_job())
    ja, jb = a.get("j1"), b.get("j1")
    a.update(ja)
    with pytest.raises(Conflict):
        b.update(jb)
    a.close()
    b.close()


def test_postgres_two_connections_share_one_schema() -> None:
    a = postgres_store()
    b = PostgresRecords(POSTGRES_DSN, schema=a.schema)
    try:
        assert b.schema_version() == PG_SCHEMA
        a.create(make_job())
        ja, jb = a.get("j1"), b.get("j1")
        a.update(ja)
        with pytest.raises(Conflict):
            b.update(jb)
    finally:
        b.close()
        a.drop()
        a.close()


def test_postgres_errors_never_show_the_password() -> None:
    assert "hunter2" not in redact("host=x password=hunter2 user=u")
    assert "hunter2" not in redact("postgresql://u:hunter2@h/db")
    with pytest.raises(Unavailable) as err:
        PostgresRecords("host=127.0.0.1 port=1 user=u password=hunter2 dbname=x", connect_timeout=2)
    assert "hunter2" not in str(err.value)


def test_sqlite_syncs_a_write_carrying_an_intent_to_disk(tmp_path: Path) -> None:
    s = SQLiteRecords(tmp_path / "d.db")
    s.create(make_job())
    statements: list[str] = []
    s._db.set_trace_callback(statements.append)
    job = s.get("j1")
    s.update(job)  # no intent: synchronous=NORMAL
    assert not any("synchronous" in x for x in statements)
    s.update(s.get("j1"), [Event("j1", 1.0, "intent", {"seq": 1})])
    full = statements.index("PRAGMA synchronous=FULL")
    commit = max(i for i, x in enumerate(statements) if x == "COMMIT")
    assert full < commit < statements.index("PRAGMA synchronous=NORMAL")
    assert s._db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL again for the next write
    s.close()


def test_the_memory_store_renews_without_decoding_documents(monkeypatch: pytest.MonkeyPatch) -> None:
    import dispatch.records.memory as module

    store = MemoryRecords()
    job = make_job("m", 60.0)
    job.lease = Lease("sup-a", 1, 500.0)
    store.create(job)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a renewal decoded a document")

    monkeypatch.setattr(module.json, "loads", refuse)
    assert store.renew(cluster="c", owner="sup-a", now=100.0, expires_at=700.0) == {"m": 2}
    monkeypatch.undo()
    assert store.get("m").lease == Lease("sup-a", 1, 700.0)


def test_a_batch_member_round_trips_and_older_records_have_none(store: Records) -> None:
    from dispatch.records.model import BatchMember

    job = make_job("b1")
    job.batch = BatchMember("sweep-1", 3)
    store.create(job)
    store.create(make_job("6b0e248a437748"))  # an id of the older, 14-digit form
    assert store.get("b1").batch == BatchMember("sweep-1", 3)
    assert {j.id: j.batch for j in store.get_many(["b1", "6b0e248a437748"])} == {
        "b1": BatchMember("sweep-1", 3),
        "6b0e248a437748": None,
    }
    assert "batch" not in store.get("6b0e248a437748").to_json()


# ----- node blames (dispatch.records.nodes) ---------------------------------------------------------------------


def _blame(node: str, job: str, at: float, execution: str = "1.7.0", cluster: str = "c") -> NodeBlame:
    return NodeBlame(cluster, node, job, execution, Cause.NODE_LOST, at)


def test_node_blames_are_stored_once_per_execution_and_node(store: Records) -> None:
    assert isinstance(store, NodeBlames)
    first = [_blame("n1", "j1", 10.0), _blame("n2", "j1", 10.0)]
    assert store.add_node_blames(first) == 2
    # the same blames again (a supervisor that took the job over writes them again) change nothing
    assert store.add_node_blames([_blame("n1", "j1", 99.0), _blame("n1", "j2", 20.0)]) == 1
    got = store.node_blames("c", 0.0)
    assert got == [_blame("n1", "j1", 10.0), _blame("n2", "j1", 10.0), _blame("n1", "j2", 20.0)]
    assert got[0].cause is Cause.NODE_LOST and got[0].to_json()["jobId"] == "j1"
    assert store.node_blames("c", 15.0) == [_blame("n1", "j2", 20.0)]
    assert store.node_blames("other", 0.0) == []


def test_clearing_a_node_deletes_its_blames_on_that_cluster_only(store: Records) -> None:
    assert isinstance(store, NodeBlames)
    store.add_node_blames([_blame("n1", "j1", 10.0), _blame("n1", "j2", 11.0), _blame("n2", "j2", 11.0)])
    store.add_node_blames([_blame("n1", "j3", 12.0, cluster="d")])
    assert store.clear_node_blames("c", "n1") == 2
    assert store.clear_node_blames("c", "n1") == 0
    assert [b.node for b in store.node_blames("c", 0.0)] == ["n2"]
    assert [b.node for b in store.node_blames("d", 0.0)] == ["n1"]
    # cleared, then blamed again: counted afresh
    assert store.add_node_blames([_blame("n1", "j1", 10.0)]) == 1


def test_sqlite_store_of_the_previous_schema_gains_the_node_blames(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.db"
    SQLiteRecords(path).close()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE node_blames")
    db.execute(f"PRAGMA user_version={SQLITE_SCHEMA - 1}")
    db.commit()
    db.close()
    s = SQLiteRecords(path)
    try:
        assert s.schema_version() == SQLITE_SCHEMA
        assert s.add_node_blames([_blame("n1", "j1", 1.0)]) == 1 and len(s.node_blames("c", 0.0)) == 1
        names = [r[0] for r in s._db.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'node_blames'")]
        assert "node_blames_at" in names
    finally:
        s.close()


@pytest.mark.postgres
def test_postgres_store_of_the_previous_schema_gains_the_node_blames() -> None:
    s = postgres_store()
    try:
        with s._tx() as cur:
            cur.execute(s._q("DROP TABLE {s}.node_blames"))
            cur.execute(s._q("UPDATE {s}.meta SET value = %s WHERE key = 'schema_version'"), (str(PG_SCHEMA - 1),))
        again = PostgresRecords(POSTGRES_DSN, schema=s.schema)
        try:
            assert again.schema_version() == PG_SCHEMA
            assert again.add_node_blames([_blame("n1", "j1", 1.0)]) == 1
            assert again.node_blames("c", 0.0) == [_blame("n1", "j1", 1.0)]
            with again._tx() as cur:
                cur.execute("SELECT indexname FROM pg_indexes WHERE schemaname = %s", (s.schema,))
                assert "node_blames_at" in {r[0] for r in cur.fetchall()}
        finally:
            again.close()
    finally:
        s.drop()
        s.close()


def test_node_blames_too_old_to_count_are_pruned_per_cluster(store: Records) -> None:
    assert isinstance(store, NodeBlames)
    store.add_node_blames([_blame("n1", "j1", 10.0), _blame("n2", "j2", 19.9), _blame("n1", "j3", 20.0)])
    store.add_node_blames([_blame("n1", "j1", 5.0, cluster="d")])
    assert store.prune_node_blames("c", 20.0) == 2
    assert store.prune_node_blames("c", 20.0) == 0
    assert store.node_blames("c", 0.0) == [_blame("n1", "j3", 20.0)]
    assert store.node_blames("d", 0.0) == [_blame("n1", "j1", 5.0, cluster="d")]
