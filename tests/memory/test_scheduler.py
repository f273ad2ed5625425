"""The memory scheduler's timed behaviour, faults and ground truth, driven by a fake clock."""

from __future__ import annotations

import pytest

from dispatch import Cause, FakeClock, JobSpec, NotFound, OutcomeUnknown, Rejected, State, Unavailable
from dispatch.extensions import Image
from dispatch.identity import AttemptId, RestartId
from dispatch.memory import Crashed, MemoryScheduler, Runtime, backend
from dispatch.memory.scheduler import read_program
from dispatch.spi import Gate, StartRequest

SLEEP = JobSpec(command=("sleep", "100"), nodes=2)


def start(b: object, spec: JobSpec = SLEEP, n: int = 1, job: str = "j1") -> str:
    sid: str = b.start(StartRequest(job, n, f"dsp-{job}-{n}", spec))  # type: ignore[attr-defined]
    return sid


@pytest.mark.parametrize(
    ("argv", "runtime", "code", "oom"),
    [
        (("sleep", "7"), 7, 0, False),
        (("exit", "3"), 1, 3, False),
        (("sleep", "2", "exit", "300"), 2, 44, False),
        (("oom", "4"), 4, 0, True),
        (("python", "train.py"), 60, 0, False),
        (("sleep", "soon"), 60, 0, False),
    ],
)
def test_programs(argv: tuple[str, ...], runtime: float, code: int, oom: bool) -> None:
    p = read_program(JobSpec(command=argv), 60)
    assert (p.runtime, p.exit_code, p.oom) == (runtime, code, oom)


def test_lifecycle_purge_and_accounting() -> None:
    clock = FakeClock()
    s = MemoryScheduler(clock, "slurm", min_job_age=300)
    b = backend(s)
    sid = start(b)
    assert b.inspect(sid).outcome.cause is Cause.GATED
    b.open(sid)
    ev = b.inspect(sid)
    assert ev.outcome.state is State.RUNNING and ev.current is not None
    assert RestartId.parse(ev.current.identity) == RestartId(1, sid, 0)
    clock.advance(100)
    ev = b.inspect(sid)
    assert ev.outcome.state is State.SUCCEEDED and ev.current is not None and ev.current.ended_at == 1_800_000_100
    clock.advance(300)
    ev = b.inspect(sid)
    assert ev.outcome.state is State.UNKNOWN, "after MinJobAge the state is gone, as declared"
    assert len(ev.executions) == 1 and ev.executions[0].outcome.cause is Cause.UNKNOWN


def test_purge_without_accounting_is_not_found() -> None:
    clock = FakeClock()
    s = MemoryScheduler(clock, "slurm", min_job_age=10, accounting=False)
    b = backend(s)
    sid = start(b, JobSpec(command=("exit", "2")))
    b.open(sid)
    clock.advance(5)
    assert b.inspect(sid).outcome.exit_code == 2
    clock.advance(10)
    with pytest.raises(NotFound):
        b.inspect(sid)
    assert b.declarations().polled_loss is not None and b.declarations().polled_loss.execution == 0


def test_capacity_queueing_and_no_capacity() -> None:
    clock = FakeClock()
    s = MemoryScheduler(clock, "slurm", nodes=2)
    b = backend(s)
    a, c, big = start(b, n=1), start(b, n=2), start(b, JobSpec(command=("sleep", "1"), nodes=3), n=3)
    for sid in (a, c, big):
        b.open(sid)
    assert b.inspect(a).outcome.state is State.RUNNING
    assert b.inspect(c).outcome.cause is Cause.QUEUED
    assert b.inspect(big).outcome.cause is Cause.NO_CAPACITY
    clock.advance(101)
    assert b.inspect(c).outcome.state is State.RUNNING


def test_node_loss_ends_after_the_window() -> None:
    clock = FakeClock()
    s = MemoryScheduler(clock, "slurm", node_loss_window=120)
    b = backend(s)
    sid = start(b, JobSpec(command=("sleep", "10000"), nodes=2))
    b.open(sid)
    s.control.lose_node(s.jobs[sid].current.nodes[1])
    clock.advance(119)
    assert b.inspect(sid).outcome.state is State.RUNNING
    clock.advance(1)
    ev = b.inspect(sid)
    assert ev.outcome.cause is Cause.NODE_LOST and ev.current is not None and ev.current.ended_at == 1_800_000_120


def test_requeue_two_steps_and_crash() -> None:
    clock = FakeClock()
    s = MemoryScheduler(clock, "slurm")
    b = backend(s)
    sid = start(b, JobSpec(command=("exit", "1")))
    b.open(sid)
    clock.advance(2)
    s.control.crash_next_requeue()
    with pytest.raises(Crashed) as err:
        b.requeue(sid)  # type: ignore[attr-defined]
    assert isinstance(err.value, OutcomeUnknown)
    assert s.jobs[sid].requeue_flag and len(s.jobs[sid].executions) == 1
    b.requeue(sid)  # type: ignore[attr-defined]
    ev = b.inspect(sid)
    assert [x.restart for x in ev.executions] == [0, 1]
    assert ev.current is not None and ev.current.identity == f"1.{sid}.1"


def test_holds_by_instance_and_running_holds_by_shape() -> None:
    clock = FakeClock()
    s = MemoryScheduler(clock, "slurm")
    b = backend(s)
    sid = start(b)
    b.hold(sid, "a")  # type: ignore[attr-defined]
    b.open(sid)
    ev = b.inspect(sid)
    assert (ev.outcome.state, ev.holds, ev.gate) == (State.HELD, ("a",), Gate.OPEN)
    with pytest.raises(Rejected):
        b.release(sid, "b")  # type: ignore[attr-defined]
    b.release(sid, "a")  # type: ignore[attr-defined]
    b.release(sid, "a")  # type: ignore[attr-defined]
    assert b.inspect(sid).outcome.state is State.RUNNING
    with pytest.raises(Rejected):
        b.hold(sid, "c")  # type: ignore[attr-defined]


def test_kubeflow_hold_ends_running_execution_and_readmits_as_new_attempt() -> None:
    clock = FakeClock()
    s = MemoryScheduler(clock, "kubeflow")
    b = backend(s)
    spec = JobSpec(command=("sleep", "100"), extensions=(Image("img"),))
    sid = start(b, spec)
    b.open(sid)
    first = b.inspect(sid).current
    assert first is not None and AttemptId.parse(first.identity) == AttemptId("j1", 1, 1, 0, 0)
    b.hold(sid, "h")  # type: ignore[attr-defined]
    ev = b.inspect(sid)
    assert ev.outcome.state is State.HELD
    assert ev.executions[0].outcome.state is State.CANCELLED and ev.executions[0].outcome.cause is Cause.HELD
    b.release(sid, "h")  # type: ignore[attr-defined]
    ev = b.inspect(sid)
    assert ev.outcome.state is State.RUNNING and ev.current is not None
    assert AttemptId.parse(ev.current.identity).attempt == 2


def test_faults_landed_and_not_landed() -> None:
    clock = FakeClock()
    s = MemoryScheduler(clock, "slurm")
    b = backend(s)
    s.control.inject("start", "unknown", landed=False)
    with pytest.raises(OutcomeUnknown):
        start(b)
    assert s.jobs == {}
    s.control.inject("start", "unknown", landed=True)
    with pytest.raises(OutcomeUnknown):
        start(b)
    assert len(s.jobs) == 1
    s.control.inject("inspect_many", "unavailable")
    with pytest.raises(Unavailable):
        b.inspect_many(list(s.jobs))
    assert [c.applied for c in s.calls] == [False, True]


def test_watch_changes_and_reset() -> None:
    clock = FakeClock()
    s = MemoryScheduler(clock, "kubeflow", watch_window=3)
    b = backend(s)
    spec = JobSpec(command=("sleep", "5"), extensions=(Image("img"),))
    first = b.watch(None, 0)  # type: ignore[attr-defined]
    assert first.reset
    sid = start(b, spec)
    batch = b.watch(first.cursor, 0)  # type: ignore[attr-defined]
    assert batch.changed == (sid,) and not batch.reset
    s.control.drop_watch()
    assert b.watch(batch.cursor, 0).reset  # type: ignore[attr-defined]
    for i in range(5):
        start(b, spec, n=i + 2)
    assert b.watch(batch.cursor, 0).reset, "a cursor older than the retained window must re-list"  # type: ignore[attr-defined]


def test_cessation_weakening_and_native_policy() -> None:
    clock = FakeClock()
    s = MemoryScheduler(clock, "kubeflow")
    b = backend(s)
    weak = JobSpec(command=("sleep", "100"), extensions=(Image("img"), Runtime(allow_rank_restart=True)))
    sid = start(b, weak)
    b.open(sid)
    assert b.weakened(sid)  # type: ignore[attr-defined]
    s.control.cease(list(s.jobs[sid].current.nodes), "kernel upgrade")
    assert b.inspect(sid).outcome.cause is Cause.NODE_LOST
    c = b.cessation([sid, "other"])  # type: ignore[attr-defined]
    assert set(c) == {sid} and c[sid].reason == "kernel upgrade"
    pol = b.compile_policy([{"action": "restart"}, {"action": "resubmit"}])  # type: ignore[attr-defined]
    assert pol.native == () and len(pol.residual) == 2


def test_truth_keeps_everything() -> None:
    clock = FakeClock()
    s = MemoryScheduler(clock, "slurm", accounting=False, min_job_age=1)
    b = backend(s)
    sid = start(b, JobSpec(command=("exit", "0")))
    b.open(sid)
    clock.advance(10)
    (t,) = s.truth()
    assert t.purged and t.current.state is State.SUCCEEDED and t.marker == "dsp-j1-1"


def test_an_accounting_lag_leaves_an_ended_job_unanswered_for_that_long() -> None:
    from dispatch.memory import MemorySettings
    from dispatch.spi import JobEvidence, Unanswered

    clock = FakeClock()
    b = backend(MemoryScheduler(clock, "slurm", accounting_lag=15))
    sid = start(b, JobSpec(command=("sleep", "10")))
    b.open(sid)
    clock.advance(12)  # ended at t=10: no answer until t=25
    assert isinstance(b.inspect_many([sid])[sid], Unanswered)
    with pytest.raises(Unavailable):
        b.inspect(sid)
    clock.advance(14)
    ev = b.inspect_many([sid])[sid]
    assert isinstance(ev, JobEvidence) and ev.outcome.state is State.SUCCEEDED
    with pytest.raises(ValueError, match="accountingLag"):
        MemorySettings(accounting_lag=-1)


def test_kubeflow_preemption_waits_for_a_readmission_which_is_a_new_attempt_once_per_eviction() -> None:
    clock = FakeClock()
    s = MemoryScheduler(clock, "kubeflow", nodes=4)
    b = backend(s)
    spec = JobSpec(command=("sleep", "100"), extensions=(Image("img"),))
    sid = start(b, spec)
    b.open(sid)
    s.control.preempt(sid)
    clock.advance(50)
    ev = b.inspect(sid)
    assert (ev.outcome.state, ev.outcome.cause) == (State.FAILED, Cause.PREEMPTED), "it waits, not re-run"
    b.readmit(sid)  # type: ignore[attr-defined]
    b.readmit(sid)  # type: ignore[attr-defined]  # the same eviction: nothing more
    ev = b.inspect(sid)
    assert ev.outcome.state is State.RUNNING and s.jobs[sid].readmissions == 1
    assert [AttemptId.parse(x.identity).attempt for x in ev.executions] == [1, 2]
    s.control.preempt(sid)
    b.readmit(sid)  # type: ignore[attr-defined]
    assert s.jobs[sid].readmissions == 2 and [
        AttemptId.parse(x.identity).attempt for x in b.inspect(sid).executions
    ] == [
        1,
        2,
        3,
    ]


def test_readmit_is_refused_for_an_object_that_ended_for_good_or_was_stopped() -> None:
    clock = FakeClock()
    s = MemoryScheduler(clock, "kubeflow", nodes=4)
    b = backend(s)
    failing = start(b, JobSpec(command=("exit", "3"), extensions=(Image("img"),)))
    b.open(failing)
    clock.advance(5)
    with pytest.raises(Rejected, match="only an evicted job"):
        b.readmit(failing)  # type: ignore[attr-defined]
    stopped = start(b, JobSpec(command=("sleep", "100"), extensions=(Image("img"),)), n=2)
    b.open(stopped)
    s.control.preempt(stopped)
    b.stop_job(stopped)
    with pytest.raises(Rejected, match="stopped"):
        b.readmit(stopped)  # type: ignore[attr-defined]
    assert not hasattr(backend(MemoryScheduler(clock, "slurm")), "readmit")
