"""The unknown clock runs under one supervisor lease: a reading after a gap in supervision restarts it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dispatch.actions import apply_failure
from dispatch.clock import FakeClock
from dispatch.cluster import Cluster
from dispatch.errors import NotFound
from dispatch.memory import MemoryScheduler, backend
from dispatch.outcome import Cause, Evidence, Outcome, State
from dispatch.records import MemoryRecords
from dispatch.records.model import Action, GateState, Intent, JobRecord, Submission
from dispatch.spec import JobSpec
from dispatch.spi import ExecutionEvidence, Gate, JobEvidence, Unanswered
from dispatch.supervise import Supervisor, fold

T0 = 1_800_000_000.0
GRACE = 60.0
"""The backend's NodeLossWindow, as the supervisor passes it to the fold."""


def job() -> JobRecord:
    return JobRecord(
        id="j1",
        cluster="memory",
        spec=JobSpec(command=("true",)),
        created_at=T0,
        submissions=[Submission(1, "dsp-j1-1", T0, scheduler_id="101", gate=GateState.OPEN)],
    )


def reading(at: float, state: State = State.RUNNING) -> JobEvidence:
    out = Outcome(state, Cause.UNKNOWN if state is State.UNKNOWN else None, Evidence("memory:queue", at))
    return JobEvidence("101", "dsp-j1-1", out, Gate.OPEN, executions=(ExecutionEvidence("1.101.0", 0, out, T0),))


def unanswered(at: float) -> Unanswered:
    return Unanswered("101", "accounting lag", at)


def read(rec: JobRecord, ev: JobEvidence | Unanswered, lease: int | None) -> JobRecord:
    """``rec`` with a reading folded in under the supervisor lease ``lease`` (None: a read command)."""
    at = ev.observed_at if isinstance(ev, Unanswered) else ev.outcome.evidence.observed_at
    new, _ = fold(rec, ev, at, observed_at=at, unanswered_grace=GRACE, reading_lease=lease)
    return new


def running_job() -> JobRecord:
    return read(job(), reading(T0 + 5), 1)


def test_a_status_clock_restarts_at_the_supervisors_first_reading() -> None:
    """A status read finds the object unanswered; every supervisor is down while it answers again; the first
    supervisor reading after the gap finds it unanswered again, for a moment. That is not one long spell: the
    clock starts again at the supervisor's reading, and the last evidence stays."""
    first = read(running_job(), unanswered(T0 + 10), None)
    assert first.current is not None and first.current.unknown_since == T0 + 10
    assert first.current.unknown_seen_by is None
    after, events = fold(first, unanswered(T0 + 112), T0 + 112, unanswered_grace=GRACE, reading_lease=2)
    sub = after.current
    assert sub is not None and sub.outcome is not None
    assert sub.unknown_since == T0 + 112 and sub.unknown_seen_by == 2
    assert sub.outcome.state is State.RUNNING and sub.outcome.evidence.observed_at == T0 + 5
    assert [e.kind for e in events] == ["unanswered"]


def test_a_successor_restarts_the_clock_of_a_supervisor_that_died() -> None:
    """A supervisor reads the object unknown and dies; its successor (a new lease, a new token) reads it unknown
    a window later. Nobody watched in between: the clock starts again."""
    first = read(running_job(), reading(T0 + 26, State.UNKNOWN), 1)
    assert first.current is not None and first.current.unknown_since == T0 + 26
    after = read(first, reading(T0 + 88, State.UNKNOWN), 2)
    sub = after.current
    assert sub is not None and sub.outcome is not None
    assert sub.outcome.state is State.UNKNOWN and sub.unknown_since == T0 + 88 and sub.unknown_seen_by == 2


def test_a_successor_restarts_the_clock_of_an_object_gone_from_the_queue() -> None:
    """A spurious blank (the queue shows no trace of a running job) starts the clock as unknown evidence does;
    a successor's NotFound a window later restarts it (the object may have shown again in between)."""
    gone, _ = fold(running_job(), None, T0 + 20, observed_at=T0 + 20, unanswered_grace=GRACE, reading_lease=1)
    assert gone.current is not None and gone.current.gone and gone.current.unknown_since == T0 + 20
    same, _ = fold(gone, None, T0 + 90, observed_at=T0 + 90, unanswered_grace=GRACE, reading_lease=1)
    assert same is gone
    after, _ = fold(gone, None, T0 + 90, observed_at=T0 + 90, unanswered_grace=GRACE, reading_lease=2)
    assert after.current is not None and after.current.unknown_since == T0 + 90


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=0.5, max_value=200.0), min_size=1, max_size=30), st.booleans())
def test_readings_under_one_lease_never_restart_the_clock(gaps: list[float], answerless: bool) -> None:
    """However far apart (a watch reports no change for a long time), readings under the lease that started
    the clock keep it where it started, so that an unknown that lasts is an ending one window after it began."""
    at = T0 + 10
    rec = read(running_job(), unanswered(at) if answerless else reading(at, State.UNKNOWN), 1)
    for gap in gaps:
        at += gap
        rec = read(rec, unanswered(at) if answerless else reading(at, State.UNKNOWN), 1)
        sub = rec.current
        assert sub is not None and sub.unknown_since == T0 + 10
        assert sub.outcome is not None
        assert (sub.outcome.state is State.UNKNOWN) == (not answerless or at - (T0 + 10) >= GRACE)


def test_a_read_command_never_restarts_a_clock() -> None:
    first = read(running_job(), unanswered(T0 + 10), 1)
    again = read(first, unanswered(T0 + 500), None)
    assert again.current is not None and again.current.unknown_since == T0 + 10


def test_a_known_reading_stops_the_clock_and_forgets_its_lease() -> None:
    first = read(running_job(), unanswered(T0 + 10), 1)
    back = read(first, reading(T0 + 20), 1)
    sub = back.current
    assert sub is not None and sub.unknown_since is None and sub.unknown_seen_by is None


def test_a_calls_not_found_leaves_a_running_clock_alone() -> None:
    """A user's ``release`` answered NotFound (Slurm's queue forgot the job; its accounting still shows it) while
    the clock runs: the submission is not marked gone, so the next reading that shows the object does not restart
    the clock, and a user retrying the release every few seconds cannot keep the job from ever ending. Without a
    running clock the NotFound still marks it gone, and the next reading tells."""
    release = Intent(1, Action.RELEASE, 1, "operator:u", T0 + 30, T0 + 65, args={"instance": "u1"})
    at = T0 + 10
    rec = read(running_job(), reading(at, State.UNKNOWN), 1)
    for step in range(1, 12):
        apply_failure(rec, release, NotFound("memory: job 101 left the queue"), at + step * 10 - 5)
        rec = read(rec, reading(at + step * 10, State.UNKNOWN), 1)
        assert rec.current is not None and not rec.current.gone and rec.current.unknown_since == T0 + 10
    live = running_job()
    apply_failure(live, release, NotFound("memory: job 101 left the queue"), T0 + 30)
    assert live.current is not None and live.current.gone and live.current.unknown_since is None


def test_the_clocks_lease_survives_the_store() -> None:
    first = read(running_job(), unanswered(T0 + 10), 3)
    again = JobRecord.from_json(first.to_json())
    assert again.current is not None and again.current.unknown_seen_by == 3


def test_the_supervisor_folds_under_its_own_lease_token() -> None:
    """End to end on the memory adapter: a clock a status read started (no token) restarts at the supervisor's
    first reading, which carries the token of its lease on the job."""
    clock = FakeClock()
    sched = MemoryScheduler(clock, "slurm", nodes=4, min_job_age=300, node_loss_window=GRACE)
    b = backend(sched)
    records = MemoryRecords()
    job_id = Cluster("memory", b, records, clock).submit(JobSpec(command=("sleep", "1000")))
    sup = Supervisor(b, records, clock=clock, owner="sup-a", poll=10)
    sup.cycle()
    clock.advance(10)
    sid = records.get(job_id).current.scheduler_id  # type: ignore[union-attr]
    assert sid is not None
    sched.control.lag(sid, 30)
    rec = records.get(job_id)
    at = clock.now() - 5
    status_read, _ = fold(rec, Unanswered(sid, "accounting lag", at), at, observed_at=at, unanswered_grace=GRACE)
    records.update(status_read, [])
    sup.cycle()
    after = records.get(job_id)
    assert after.lease is not None and after.current is not None
    assert after.current.unknown_since == clock.now()
    assert after.current.unknown_seen_by == after.lease.token
