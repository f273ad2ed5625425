"""fold: evidence into records, purely."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dispatch.outcome import Cause, Evidence, Outcome, State
from dispatch.records.model import Action, GateState, Intent, IntentStatus, JobRecord, Submission
from dispatch.spec import JobSpec
from dispatch.spi import Cessation, ExecutionEvidence, Found, Gate, JobEvidence, Unanswered
from dispatch.supervise import fold, fold_found
from dispatch.supervise.fold import Settled

T0 = 1_800_000_000.0


def job(gate: GateState = GateState.OPEN, sid: str | None = "101") -> JobRecord:
    return JobRecord(
        id="j1",
        cluster="memory",
        spec=JobSpec(command=("true",)),
        created_at=T0,
        submissions=[Submission(1, "dsp-j1-1", T0, scheduler_id=sid, gate=gate)],
    )


def running(at: float, sid: str = "101") -> JobEvidence:
    ev = Evidence("memory:queue", at)
    out = Outcome(State.RUNNING, None, ev)
    return JobEvidence(sid, "dsp-j1-1", out, Gate.OPEN, executions=(ExecutionEvidence(f"1.{sid}.0", 0, out, T0),))


def ended(at: float, state: State, cause: Cause, code: int | None = None, sid: str = "101") -> JobEvidence:
    ev = Evidence("memory:queue", at)
    out = Outcome(state, cause, ev, exit_code=code)
    return JobEvidence(sid, "dsp-j1-1", out, Gate.OPEN, executions=(ExecutionEvidence(f"1.{sid}.0", 0, out, T0, at),))


def test_running_evidence_is_recorded_with_its_source_and_time() -> None:
    new, events = fold(job(), running(T0 + 5), T0 + 5)
    sub = new.current
    assert sub is not None and sub.outcome is not None
    assert sub.outcome.state is State.RUNNING and sub.outcome.evidence == Evidence("memory:queue", T0 + 5)
    assert [e.identity for e in sub.executions] == ["1.101.0"]
    assert any(e.kind == "observed" for e in events)


def test_an_unchanged_observation_writes_nothing_until_the_refresh() -> None:
    first, _ = fold(job(), running(T0 + 5), T0 + 5)
    same, events = fold(first, running(T0 + 15), T0 + 15, refresh=60)
    assert same is first and events == []
    later, _ = fold(first, running(T0 + 70), T0 + 70, refresh=60)
    assert later is not first and later.current.outcome.evidence.observed_at == T0 + 70  # type: ignore[union-attr]


def test_older_evidence_never_rewinds_the_record() -> None:
    done, _ = fold(job(), ended(T0 + 50, State.FAILED, Cause.PREEMPTED), T0 + 50)
    again, _ = fold(done, running(T0 + 20), T0 + 60)
    assert again.current.outcome.state is State.FAILED  # type: ignore[union-attr]


def test_vanished_after_running_becomes_unknown_never_success() -> None:
    seen, _ = fold(job(), running(T0 + 5), T0 + 5)
    gone, events = fold(seen, None, T0 + 30)
    sub = gone.current
    assert sub is not None and sub.gone
    assert sub.outcome is not None and sub.outcome.state is State.UNKNOWN and sub.outcome.cause is Cause.UNKNOWN
    assert sub.executions[0].outcome.state is State.UNKNOWN
    assert any(e.kind == "vanished" for e in events)


def test_vanished_after_it_ended_keeps_the_evidence_of_the_end() -> None:
    seen, _ = fold(job(), ended(T0 + 5, State.SUCCEEDED, Cause.EXIT, 0), T0 + 5)
    gone, _ = fold(seen, None, T0 + 500)
    sub = gone.current
    assert sub is not None and sub.gone
    assert sub.outcome is not None and sub.outcome.state is State.SUCCEEDED
    assert sub.outcome.evidence.observed_at == T0 + 5


def test_purged_unknown_evidence_keeps_a_seen_end() -> None:
    seen, _ = fold(job(), ended(T0 + 5, State.FAILED, Cause.OUT_OF_MEMORY), T0 + 5)
    ev = Evidence("memory:accounting", T0 + 400)
    unknown = Outcome(State.UNKNOWN, Cause.UNKNOWN, ev)
    purged = JobEvidence("101", "dsp-j1-1", unknown, Gate.OPEN, executions=(ExecutionEvidence("1.101.0", 0, unknown),))
    after, _ = fold(seen, purged, T0 + 400)
    assert after.current.outcome.cause is Cause.OUT_OF_MEMORY  # type: ignore[union-attr]
    assert after.current.executions[0].outcome.cause is Cause.OUT_OF_MEMORY  # type: ignore[union-attr]


def test_unknown_evidence_of_an_execution_after_the_seen_end_is_not_that_end() -> None:
    """Preempted, then readmitted (or requeued): the object runs again as a new execution. Unknown evidence of
    that execution (a transient accounting gap) says nothing of the old end: the submission is unknown, on the
    unknown clock, not still preempted, so no rule decides on an end that is past (found by the simulator,
    seed 5667: a resubmission while the readmitted execution ran)."""
    seen, _ = fold(job(), ended(T0 + 5, State.FAILED, Cause.PREEMPTED), T0 + 5)
    ev = Evidence("memory:accounting", T0 + 40)
    unknown = Outcome(State.UNKNOWN, Cause.UNKNOWN, ev)
    preempted = Outcome(State.FAILED, Cause.PREEMPTED, Evidence("memory:queue", T0 + 5))
    again = JobEvidence(
        "101",
        "dsp-j1-1",
        unknown,
        Gate.OPEN,
        executions=(
            ExecutionEvidence("1.101.0", 0, preempted, T0, T0 + 5),
            ExecutionEvidence("2.101.0", 0, unknown, T0 + 30),
        ),
    )
    after, _ = fold(seen, again, T0 + 40)
    sub = after.current
    assert sub is not None and sub.outcome is not None
    assert (sub.outcome.state, sub.outcome.cause) == (State.UNKNOWN, Cause.UNKNOWN)
    assert [e.outcome.state for e in sub.executions] == [State.FAILED, State.UNKNOWN]
    assert sub.unknown_since == T0 + 40


def test_a_foreign_hold_on_a_waiting_object_is_admin_held() -> None:
    ev = Evidence("memory:queue", T0 + 5)
    waiting = JobEvidence(
        "101", "dsp-j1-1", Outcome(State.PENDING, Cause.QUEUED, ev), Gate.OPEN, foreign_holds=("admin",)
    )
    new, _ = fold(job(), waiting, T0 + 5)
    out = new.current.outcome  # type: ignore[union-attr]
    assert out is not None and out.state is State.HELD and out.cause is Cause.ADMIN_HELD


def test_cessation_turns_node_lost_into_cessation() -> None:
    new, _ = fold(
        job(), ended(T0 + 50, State.FAILED, Cause.NODE_LOST), T0 + 50, cessation=Cessation("maintenance", T0 + 40)
    )
    assert new.current.outcome.cause is Cause.CESSATION  # type: ignore[union-attr]
    assert new.current.executions[0].outcome.cause is Cause.CESSATION  # type: ignore[union-attr]


def _with_start(j: JobRecord, deadline: float) -> JobRecord:
    j.intents.append(Intent(1, Action.START, 1, "sup", T0, deadline, status=IntentStatus.UNKNOWN))
    return j


def test_an_unknown_start_is_not_resolved_before_its_deadline() -> None:
    j = _with_start(job(GateState.PLANNED, None), T0 + 35)
    new, events = fold_found(j, [Found("101", "dsp-j1-1", T0)], T0 + 10)
    assert new is j and events == []


def test_an_unknown_start_found_once_is_recorded() -> None:
    j = _with_start(job(GateState.PLANNED, None), T0 + 35)
    new, _ = fold_found(j, [Found("101", "dsp-j1-1", T0)], T0 + 40)
    sub = new.current
    assert sub is not None and sub.scheduler_id == "101" and sub.gate is GateState.CLOSED and sub.strays == []
    assert new.intents[0].status is IntentStatus.DONE


def test_an_unknown_start_found_twice_keeps_one_and_lists_the_stray() -> None:
    j = _with_start(job(GateState.PLANNED, None), T0 + 35)
    new, _ = fold_found(j, [Found("102", "dsp-j1-1", T0 + 2), Found("101", "dsp-j1-1", T0 + 1)], T0 + 40)
    sub = new.current
    assert sub is not None and sub.scheduler_id == "101" and sub.strays == ["102"]


def test_an_unknown_start_found_nowhere_failed() -> None:
    j = _with_start(job(GateState.PLANNED, None), T0 + 35)
    new, _ = fold_found(j, [], T0 + 40)
    assert new.intents[0].status is IntentStatus.FAILED
    assert new.current.scheduler_id is None and new.current.gate is GateState.PLANNED  # type: ignore[union-attr]


def test_a_requeue_is_resolved_by_whether_the_restart_count_moved() -> None:
    base, _ = fold(job(), ended(T0 + 5, State.FAILED, Cause.EXIT, 75), T0 + 5)
    base.intents.append(
        Intent(1, Action.REQUEUE, 1, "sup", T0 + 6, T0 + 41, status=IntentStatus.UNKNOWN, args={"restart": 0})
    )
    not_moved, _ = fold(base, ended(T0 + 50, State.FAILED, Cause.EXIT, 75), T0 + 50)
    assert not_moved.intents[0].status is IntentStatus.FAILED
    ev = Evidence("memory:queue", T0 + 50)
    moved = JobEvidence(
        "101",
        "dsp-j1-1",
        Outcome(State.PENDING, Cause.QUEUED, ev),
        Gate.OPEN,
        executions=(
            ExecutionEvidence("1.101.0", 0, Outcome(State.FAILED, Cause.EXIT, ev, exit_code=75), T0, T0 + 5),
            ExecutionEvidence("1.101.1", 1, Outcome(State.RUNNING, None, ev), T0 + 45),
        ),
    )
    done, _ = fold(base, moved, T0 + 50)
    assert done.intents[0].status is IntentStatus.DONE
    assert [e.restart for e in done.current.executions] == [0, 1]  # type: ignore[union-attr]


def test_fold_does_not_touch_its_input() -> None:
    j = job()
    before = j.to_json()
    fold(j, ended(T0 + 5, State.FAILED, Cause.PREEMPTED), T0 + 5)
    assert j.to_json() == before


def test_an_observation_made_before_the_deadline_resolves_nothing() -> None:
    # a slow supervisor read the object at T0+5, before the hold intent's deadline, and folds it at T0+60
    base, _ = fold(job(), running(T0 + 1), T0 + 1)
    base.intents.append(
        Intent(1, Action.HOLD, 1, "op", T0 + 2, T0 + 37, status=IntentStatus.UNKNOWN, args={"instance": "u1"})
    )
    stale, _ = fold(base, running(T0 + 5), T0 + 60)
    assert stale.intents[0].status is IntentStatus.UNKNOWN
    late = JobEvidence("101", "dsp-j1-1", running(T0 + 40).outcome, Gate.OPEN, holds=("u1",))
    resolved, _ = fold(base, late, T0 + 60)
    assert resolved.intents[0].status is IntentStatus.DONE and resolved.holds[0].instance == "u1"


def test_a_find_made_before_the_deadline_resolves_nothing() -> None:
    j = _with_start(job(GateState.PLANNED, None), T0 + 35)
    new, _ = fold_found(j, [], T0 + 60, observed_at=T0 + 30)
    assert new is j and new.intents[0].status is IntentStatus.UNKNOWN


def unanswered(at: float, sid: str = "101") -> Unanswered:
    return Unanswered(sid, "accounting lag", at)


def test_unanswered_keeps_the_last_evidence_and_starts_the_unknown_clock() -> None:
    seen, _ = fold(job(), running(T0 + 5), T0 + 5)
    new, events = fold(seen, unanswered(T0 + 10), T0 + 10, unanswered_grace=120)
    sub = new.current
    assert sub is not None and sub.outcome is not None
    assert sub.outcome.state is State.RUNNING and sub.outcome.evidence.observed_at == T0 + 5
    assert sub.unknown_since == T0 + 10 and not sub.gone
    assert [e.kind for e in events] == ["unanswered"]
    # asked again within the bound: nothing to write, the clock is not restarted
    again, events = fold(new, unanswered(T0 + 60), T0 + 60, unanswered_grace=120)
    assert again is new and events == []


def test_unanswered_past_the_bound_is_folded_as_unknown_evidence() -> None:
    seen, _ = fold(job(), running(T0 + 5), T0 + 5)
    first, _ = fold(seen, unanswered(T0 + 10), T0 + 10, unanswered_grace=120)
    late, events = fold(first, unanswered(T0 + 130), T0 + 130, unanswered_grace=120)
    sub = late.current
    assert sub is not None and sub.outcome is not None
    assert (sub.outcome.state, sub.outcome.cause) == (State.UNKNOWN, Cause.UNKNOWN)
    assert sub.outcome.evidence == Evidence("unanswered", T0 + 130) and "accounting lag" in sub.outcome.detail
    assert sub.unknown_since == T0 + 10  # the same clock: the decision waits no longer than the bound
    assert [e.outcome.state for e in sub.executions] == [State.UNKNOWN]
    assert [e.kind for e in events] == ["observed"]


def test_an_answer_within_the_bound_clears_the_clock() -> None:
    seen, _ = fold(job(), running(T0 + 5), T0 + 5)
    first, _ = fold(seen, unanswered(T0 + 10), T0 + 10, unanswered_grace=120)
    done, _ = fold(first, ended(T0 + 30, State.SUCCEEDED, Cause.EXIT, 0), T0 + 30, unanswered_grace=120)
    sub = done.current
    assert sub is not None and sub.outcome is not None
    assert sub.outcome.state is State.SUCCEEDED and sub.unknown_since is None


def test_unanswered_never_replaces_an_end_seen_nor_resolves_an_intent() -> None:
    base = job()
    base.intents.append(Intent(1, Action.STOP, 1, "sv", T0, T0 + 5, status=IntentStatus.UNKNOWN))
    seen, _ = fold(base, ended(T0 + 2, State.FAILED, Cause.PREEMPTED), T0 + 2)
    new, events = fold(seen, unanswered(T0 + 500), T0 + 500, unanswered_grace=120)
    assert new is seen and events == []
    assert new.current.outcome.state is State.FAILED  # type: ignore[union-attr]
    assert new.intents[0].open


def test_the_same_answer_after_unanswered_clears_the_clock() -> None:
    seen, _ = fold(job(), running(T0 + 5), T0 + 5)
    first, _ = fold(seen, unanswered(T0 + 10), T0 + 10, unanswered_grace=120)
    back, _ = fold(first, running(T0 + 20), T0 + 20, refresh=60)
    assert back is not first and back.current.unknown_since is None  # type: ignore[union-attr]


# ----- Settled: the supervisor's steady path must agree with fold ---------------------------------------------

_STATES = [
    (State.RUNNING, None, None),
    (State.PENDING, Cause.QUEUED, None),
    (State.HELD, Cause.HELD, None),
    (State.SUCCEEDED, Cause.EXIT, 0),
    (State.FAILED, Cause.EXIT, 3),
    (State.FAILED, Cause.PREEMPTED, None),
    (State.UNKNOWN, Cause.UNKNOWN, None),
]


def _evidence(
    sid: str, at: float, shape: tuple[State, Cause | None, int | None], runs: int, ended_at: float | None, gate: Gate
) -> JobEvidence:
    state, cause, code = shape
    out = Outcome(state, cause, Evidence("memory:queue", at), exit_code=code)
    executions = tuple(
        ExecutionEvidence(
            f"1.101.{i}",
            i,
            out if i == runs - 1 else Outcome(State.FAILED, Cause.NODE_LOST, out.evidence),
            T0,
            ended_at if i == runs - 1 else T0 + 2,
        )
        for i in range(runs)
    )
    return JobEvidence(sid, "dsp-j1-1", out, gate, executions=executions)


@st.composite
def two_readings(draw: st.DrawFn) -> tuple[JobEvidence, JobEvidence]:
    """Two readings of submission 1's object (sid 101): the second the same as the first but for some of its
    fields (often none, so that only the time moves), read earlier, at the same time or later."""
    fields = {
        "sid": st.just("101"),
        "at": st.sampled_from([T0 + 5.0, T0 + 10.0, T0 + 20.0]),
        "shape": st.sampled_from(_STATES),
        "runs": st.integers(min_value=0, max_value=2),
        "ended_at": st.sampled_from([None, T0 + 4]),
        "gate": st.sampled_from([Gate.OPEN, Gate.CLOSED]),
    }
    first = {k: draw(v) for k, v in fields.items()}
    fields["sid"] = st.sampled_from(["101", "102"])
    second = {k: draw(v) if draw(st.integers(0, 3)) == 0 else first[k] for k, v in fields.items()}
    second["at"] = first["at"] + draw(st.sampled_from([-5.0, 0.0, 10.0, 29.0, 30.0, 75.0]))
    return _evidence(**first), _evidence(**second)


@settings(max_examples=800, deadline=None)
@given(readings=two_readings(), refresh=st.sampled_from([30.0, 60.0, float("inf")]))
def test_settled_says_unchanged_exactly_when_fold_changes_nothing(
    readings: tuple[JobEvidence, JobEvidence], refresh: float
) -> None:
    first, second = readings
    record, _ = fold(job(), first, first.outcome.evidence.observed_at, refresh=refresh)
    settled = Settled.of(record, refresh)
    assume(settled is not None)
    assert settled is not None
    now = max(second.outcome.evidence.observed_at, first.outcome.evidence.observed_at)
    folded, _ = fold(record, second, now, refresh=refresh)
    if settled.unchanged_by(second):
        assert folded is record  # the steady path never skips a change
    if second.scheduler_id == settled.scheduler_id:  # what the supervisor reads: evidence of the object itself
        assert settled.unchanged_by(second) == (folded is record)  # and skips every non-change


def test_a_submission_with_an_open_intent_gone_or_on_the_unknown_clock_is_not_settled() -> None:
    seen, _ = fold(job(), running(T0 + 5), T0 + 5)
    assert Settled.of(seen, 60.0) is not None
    assert Settled.of(_with_start(seen, T0 + 100), 60.0) is None
    gone, _ = fold(seen, None, T0 + 30)
    assert Settled.of(gone, 60.0) is None
    waiting, _ = fold(seen, unanswered(T0 + 40), T0 + 40, unanswered_grace=100.0)
    assert waiting.current is not None and waiting.current.unknown_since is not None
    assert Settled.of(waiting, 60.0) is None
    assert Settled.of(job(sid=None), 60.0) is None


def test_settled_never_takes_an_unanswered_or_missing_reading_as_unchanged() -> None:
    seen, _ = fold(job(), running(T0 + 5), T0 + 5)
    settled = Settled.of(seen, 60.0)
    assert settled is not None and settled.unchanged_by(running(T0 + 15))
    assert not settled.unchanged_by(unanswered(T0 + 15))
    assert not settled.unchanged_by(None)


def test_an_object_shown_again_after_it_vanished_starts_the_unknown_clock_afresh() -> None:
    """A reader with a narrower view (another user's credentials) marked the object gone at T0+20; a supervisor
    reads it unknown (a node silent for a moment) at T0+90: the unknown starts then, not when the object went
    missing from one reader's view (found by the simulator: a decision on an unknown while the object ran)."""
    seen, _ = fold(job(), running(T0 + 5), T0 + 5)
    gone, _ = fold(seen, None, T0 + 20)
    assert gone.current is not None and gone.current.unknown_since == T0 + 20
    ev = Evidence("memory:queue", T0 + 90)
    silent = Outcome(State.UNKNOWN, Cause.UNKNOWN, ev)
    shown = JobEvidence("101", "dsp-j1-1", silent, Gate.OPEN, executions=(ExecutionEvidence("1.101.0", 0, silent, T0),))
    again, _ = fold(gone, shown, T0 + 90)
    sub = again.current
    assert sub is not None and not sub.gone and sub.unknown_since == T0 + 90
