"""Opening clusters and the operator's write path: gate before record, intents before calls, strict settings."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import dispatch
from dispatch import (
    ConfigError,
    FakeClock,
    Image,
    JobSpec,
    NotFound,
    OutcomeUnknown,
    ReadOnly,
    Unavailable,
    Unsupported,
)
from dispatch.memory import forget, scheduler_for
from dispatch.records import GateState, IntentStatus, MemoryRecords
from dispatch.spi import Gate, Holder, Requeuer, new_backend, register

SLEEP = JobSpec(command=("sleep", "100"), nodes=2)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def cluster(clock: FakeClock, request: pytest.FixtureRequest) -> Iterator[dispatch.Cluster]:
    name = f"t-{request.node.name}"
    c = dispatch.open("memory", adapter={"cluster": name}, records=MemoryRecords(), clock=clock)
    yield c
    forget(name)


def test_submit_records_then_opens(cluster: dispatch.Cluster) -> None:
    job_id = cluster.submit(SLEEP)
    job = cluster.get(job_id)
    sub = job.current
    assert sub is not None and sub.gate is GateState.OPEN and sub.scheduler_id
    assert [(i.action.value, i.status) for i in job.intents] == [
        ("start", IntentStatus.DONE),
        ("open", IntentStatus.DONE),
    ]
    kinds = [e.kind for e in cluster.observer.events(job_id)]
    assert kinds[0] == "submitted" and kinds.count("intent") == 2 and kinds.count("call") == 2
    assert cluster.observer.inspect(sub.scheduler_id).gate is Gate.OPEN


def test_the_submitters_umask_is_recorded_with_a_job_that_names_none(cluster: dispatch.Cluster) -> None:
    """Every later execution (a supervisor's resubmission under its own umask too) runs under the one recorded."""
    import os

    old = os.umask(0o027)
    try:
        plain = cluster.submit(JobSpec(("true",)))
        pinned = cluster.submit(JobSpec(("true",), umask=0o077))
        (batched,) = cluster.operator.submit_many([JobSpec(("true",))])
    finally:
        os.umask(old)
    assert cluster.get(plain).spec.umask == 0o027
    assert cluster.get(pinned).spec.umask == 0o077
    assert cluster.get(batched.job_id).spec.umask == 0o027


def test_intent_is_written_before_the_call(clock: FakeClock) -> None:
    """The scheduler object's marker is already in the record when start runs."""
    store = MemoryRecords()
    c = dispatch.open("memory", adapter={"cluster": "t-intent"}, records=store, clock=clock)
    sched = scheduler_for("t-intent")
    seen: list[str] = []
    real_create = sched.create

    def spying_create(job_id: str, submission: int, marker: str, spec: JobSpec, **kw: Any) -> str:
        job = store.get(job_id)
        assert job.intents[-1].action.value == "start" and job.intents[-1].status is IntentStatus.PENDING
        assert job.current is not None and job.current.marker == marker
        seen.append(marker)
        return real_create(job_id, submission, marker, spec, **kw)

    sched.create = spying_create  # type: ignore[method-assign]
    c.submit(SLEEP)
    assert len(seen) == 1
    forget("t-intent")


def test_unknown_start_outcome_is_recorded_not_retried(cluster: dispatch.Cluster) -> None:
    sched = cluster.backend.scheduler  # type: ignore[attr-defined]
    sched.control.inject("start", "unknown", landed=True)
    with pytest.raises(OutcomeUnknown) as err:
        cluster.submit(SLEEP)
    job_id = err.value.job_id
    assert job_id is not None, "the caller resolves the job from the exception it catches"
    job = cluster.get(job_id)
    assert job.current is not None and job.current.gate is GateState.PLANNED
    assert job.intents[-1].status is IntentStatus.UNKNOWN
    objs = [j for j in sched.jobs.values() if j.marker == job.current.marker]
    assert len(objs) == 1 and not objs[0].gate_open, "the landed object stays gated: nothing runs unrecorded"


def test_unavailable_start_is_a_known_failure(cluster: dispatch.Cluster) -> None:
    cluster.backend.scheduler.control.inject("start", "unavailable")  # type: ignore[attr-defined]
    with pytest.raises(Unavailable):
        cluster.submit(SLEEP)
    (summary,) = cluster.observer.list()
    job = cluster.get(summary.id)
    assert job.intents[-1].status is IntentStatus.FAILED
    assert job.current is not None and job.current.gate is GateState.PLANNED


def test_unsupported_extension_records_nothing(cluster: dispatch.Cluster) -> None:
    with pytest.raises(Unsupported, match="dispatch.Image"):
        cluster.submit(JobSpec(command=("x",), extensions=(Image("img"),)))
    assert cluster.observer.list() == []
    assert cluster.backend.scheduler.jobs == {}  # type: ignore[attr-defined]


def test_read_only_open_needs_no_store_and_refuses_writes(clock: FakeClock) -> None:
    c = dispatch.open("memory", adapter={"cluster": "t-ro"}, read_only=True, clock=clock)
    for call in (lambda: c.submit(SLEEP), lambda: c.operator.stop("x"), lambda: c.operator.hold("x")):
        with pytest.raises(ReadOnly):
            call()
    with pytest.raises(NotFound):
        c.observer.inspect("12345")
    forget("t-ro")


def test_open_takes_name_as_a_config_keyword(clock: FakeClock) -> None:
    c = dispatch.open("memory", adapter={"cluster": "t-name"}, read_only=True, clock=clock, name="x")
    assert c.name == "x"


def test_writable_open_without_records_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as err:
        dispatch.open("memory", adapter={"cluster": "t-nostore"})
    assert err.value.path == "records"


def test_store_is_the_deprecated_spelling_of_records(clock: FakeClock) -> None:
    """``store=`` still opens (to ``open`` and to ``Config``) with a DeprecationWarning pointing at the caller."""
    records = MemoryRecords()
    with pytest.warns(DeprecationWarning, match="use records=") as caught:
        c = dispatch.open("memory", adapter={"cluster": "t-store"}, store=records, clock=clock)
    assert c.records is records and caught[0].filename == __file__
    with pytest.warns(DeprecationWarning, match="use records=") as caught:
        cfg = dispatch.Config(adapter={"cluster": "t-store"}, store=records, clock=clock)
    assert cfg.records is records and caught[0].filename == __file__
    assert dispatch.open("memory", cfg).records is records
    with pytest.raises(TypeError, match="different record stores"), pytest.warns(DeprecationWarning):
        dispatch.open("memory", adapter={"cluster": "t-store"}, store=records, records=MemoryRecords())
    forget("t-store")


def test_records_opens_without_a_warning(clock: FakeClock, recwarn: pytest.WarningsRecorder) -> None:
    records = MemoryRecords()
    assert dispatch.open("memory", adapter={"cluster": "t-rec"}, records=records, clock=clock).records is records
    assert dispatch.Config(records=records).records is records
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]
    forget("t-rec")


def test_unknown_adapter_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="known: .*memory"):
        dispatch.open("nosuch", read_only=True)


def test_bad_adapter_setting_names_the_key() -> None:
    with pytest.raises(ConfigError) as err:
        new_backend("memory", {"cluster": "t-bad", "nodez": 3})
    assert err.value.path == "nodez"
    with pytest.raises(ConfigError) as err:
        new_backend("memory", '{"cluster": "t-bad", "minJobAge": "forever"}')
    assert err.value.path == "minJobAge"


def test_zero_call_bound_hands_out_no_holder_or_requeuer(clock: FakeClock) -> None:
    b = new_backend("memory", {"cluster": "t-zero", "callBound": 0}, clock=clock)
    assert not isinstance(b, Holder) and not isinstance(b, Requeuer)
    store = MemoryRecords()
    c = dispatch.Cluster("t-zero", b, store, clock)
    with pytest.raises(ConfigError) as err:
        c.submit(SLEEP, {"rules": [{"cause": "preempted", "action": "requeue"}]})
    assert err.value.path == "rules[0]"
    with pytest.raises(Unsupported):
        c.operator.hold("x")
    forget("t-zero")


def test_hold_and_release_by_instance(cluster: dispatch.Cluster, clock: FakeClock) -> None:
    spec = JobSpec(command=("sleep", "100"), nodes=4)
    first = cluster.submit(spec)  # takes every node
    second = cluster.submit(spec)  # waits
    instance = cluster.operator.hold(second)
    job = cluster.get(second)
    assert [h.instance for h in job.active_holds()] == [instance]
    clock.advance(150)
    sid = job.current.scheduler_id  # type: ignore[union-attr]
    assert cluster.observer.inspect(sid).outcome.state is dispatch.State.HELD
    with pytest.raises(NotFound):
        cluster.operator.release(second, "not-mine")
    assert cluster.operator.release(second) == [instance]
    clock.advance(1)
    assert cluster.observer.inspect(sid).outcome.state is dispatch.State.RUNNING
    assert first != second


def test_stop_ends_the_job(cluster: dispatch.Cluster, clock: FakeClock) -> None:
    job_id = cluster.submit(SLEEP)
    clock.advance(1)
    cluster.operator.stop(job_id)
    job = cluster.get(job_id)
    assert job.closed and job.stop_requested
    ev = cluster.observer.inspect(job.current.scheduler_id)  # type: ignore[union-attr]
    assert ev.outcome.state is dispatch.State.CANCELLED


def test_third_party_adapter_registers(clock: FakeClock) -> None:
    from dispatch.memory import MemoryScheduler
    from dispatch.memory import backend as memory_backend

    sched = MemoryScheduler(clock, "slurm")
    register("thirdparty", lambda settings, options: memory_backend(sched), replace=True)
    c = dispatch.open("thirdparty", read_only=True, clock=clock)
    assert c.backend.name == "memory"


def test_entry_point_discovery(monkeypatch: pytest.MonkeyPatch) -> None:
    from dispatch import registry

    called: list[str] = []

    class EP:
        name = "plugged"

        def load(self) -> object:
            def hook() -> None:
                called.append("hook")
                register("plugged", lambda s, o: new_backend("memory", {"cluster": "t-ep"}), replace=True)

            return hook

    monkeypatch.setattr(registry, "entry_points", lambda group: [EP()] if group == "dispatch.adapters" else [])
    assert registry.adapter("plugged").name == "plugged"
    assert called == ["hook"]
    forget("t-ep")


def test_registered_lists_builtins_and_entry_point_adapters_without_importing_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from importlib.metadata import EntryPoint

    from dispatch import registry

    ep = EntryPoint(name="pbs", value="no_such_pbs_adapter:register", group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "entry_points", lambda group: [ep] if group == registry.ENTRY_POINT_GROUP else [])
    names = registry.registered()
    assert {"pbs", "gridengine", "slurm", "kubeflow", "local", "memory"} <= set(names)
    with pytest.raises(ConfigError, match="known: .*pbs"):
        registry.adapter("nope")


@pytest.fixture
def one_by_one(cluster: dispatch.Cluster) -> dispatch.Cluster:
    """The memory cluster with its backend seen without BatchStarter (its Slurm shape makes job arrays)."""
    from dispatch.spi import BatchStarter, restrict

    cluster.backend = restrict(cluster.backend, [BatchStarter])
    return cluster


def test_submit_many_without_a_batch_starter_goes_one_by_one(one_by_one: dispatch.Cluster) -> None:
    from dispatch.spi import BatchStarter

    cluster = one_by_one
    assert not isinstance(cluster.backend, BatchStarter)
    got = cluster.operator.submit_many([SLEEP, JobSpec(("true",))])
    assert [g.ok for g in got] == [True, True] and len({g.job_id for g in got}) == 2
    for g in got:
        job = cluster.get(g.job_id)
        assert job.current is not None and job.current.gate is GateState.OPEN
        assert [(i.action.value, i.status) for i in job.intents] == [
            ("start", IntentStatus.DONE),
            ("open", IntentStatus.DONE),
        ]
        assert job.current.marker.startswith(f"dsp-{g.job_id}")


def test_submit_many_partial_failure_records_each_job(one_by_one: dispatch.Cluster) -> None:
    cluster = one_by_one
    sched = cluster.backend.unrestricted.scheduler  # type: ignore[attr-defined]
    sched.control.inject("start", "unknown", landed=True)  # the first start lands, its answer is lost
    got = cluster.operator.submit_many([SLEEP, SLEEP])
    first, second = (cluster.get(g.job_id) for g in got)
    assert isinstance(got[0].error, OutcomeUnknown) and got[1].ok
    assert first.intents[-1].status is IntentStatus.UNKNOWN, "recorded: a supervisor resolves it by its marker"
    assert second.current is not None and second.current.gate is GateState.OPEN


def test_submit_many_checks_every_spec_before_recording_anything(cluster: dispatch.Cluster) -> None:
    bad = JobSpec(("true",), extensions=(Image("x"),))
    with pytest.raises(Unsupported):
        cluster.operator.submit_many([SLEEP, bad])
    assert cluster.observer.list() == []


def test_acknowledge_resolves_a_closed_jobs_escalations_and_refuses_an_open_one(
    cluster: dispatch.Cluster, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    """An escalation of an open job stands for something still going on (here a foreign hold): acknowledging
    it is refused and changes nothing. Once the job is closed, it is resolved with who acknowledged it."""
    from dispatch import Rejected
    from dispatch.supervise import Supervisor

    sched = scheduler_for(f"t-{request.node.name}")
    cluster.submit(JobSpec(command=("sleep", "500"), nodes=len(sched.node_set)))  # takes every node
    job_id = cluster.submit(SLEEP)  # waits
    sup = Supervisor(cluster.backend, cluster.records, clock=clock, owner="sup-a", poll=10)  # type: ignore[arg-type]
    sched.control.admin_hold(cluster.get(job_id).current.scheduler_id)  # type: ignore[union-attr]
    for _ in range(2):
        sup.cycle()
        clock.advance(10)
    (escalation,) = cluster.get(job_id).escalations
    assert escalation.cause.value == "admin-held" and escalation.resolved_at is None
    with pytest.raises(Rejected, match=f"job {job_id} is still open: its escalation \\(admin-held\\)"):
        cluster.operator.acknowledge(job_id)
    assert cluster.get(job_id).escalations[0].resolved_at is None
    cluster.operator.stop(job_id)
    assert cluster.operator.acknowledge(job_id, "seen") == [escalation.seq]
    assert cluster.get(job_id).escalations[0].resolved_at == clock.now()
    (event,) = [e for e in cluster.observer.events(job_id) if e.kind == "escalation-resolved"]
    assert event.data == {"seq": escalation.seq, "reason": "acknowledged", "by": cluster.operator.owner, "note": "seen"}
    assert cluster.operator.acknowledge(job_id) == []  # nothing left to acknowledge
