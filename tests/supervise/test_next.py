"""next_step: the next thing to do for a record, purely."""

from __future__ import annotations

import pytest

from dispatch.clock import FakeClock
from dispatch.memory import MemoryScheduler, backend
from dispatch.outcome import Cause, Evidence, Outcome, State
from dispatch.records.model import (
    Action,
    Decision,
    ExecutionRecord,
    GateState,
    HoldRecord,
    Intent,
    IntentStatus,
    JobRecord,
    Lease,
    Submission,
)
from dispatch.rules import RuleSet
from dispatch.spec import JobSpec
from dispatch.spi import restrict
from dispatch.supervise import Facts, StepKind, apply_record_step, hold_instance, next_step

T0 = 1_800_000_000.0
RULES = RuleSet.from_data(
    {
        "limits": {"total": 3},
        "rules": [
            {"name": "evicted", "cause": "preempted", "action": "resubmit", "limit": 2, "backoff": "10s"},
            {"name": "again", "cause": "exit", "exitCodes": [75], "action": "requeue"},
            {"name": "park", "cause": "timeout", "action": "hold"},
        ],
    }
)


@pytest.fixture(scope="module")
def facts() -> Facts:
    return Facts.of(backend(MemoryScheduler(FakeClock(), "slurm")))


def job(gate: GateState = GateState.OPEN, sid: str | None = "101", outcome: Outcome | None = None) -> JobRecord:
    sub = Submission(1, "dsp-j-1", T0, scheduler_id=sid, gate=gate, outcome=outcome)
    if outcome is not None and outcome.state is not State.PENDING:
        sub.executions.append(ExecutionRecord(f"1.{sid}.0", 0, outcome, T0))
    return JobRecord("j", "memory", JobSpec(command=("x",)), T0, submissions=[sub])


def ended(cause: Cause, code: int | None = None) -> Outcome:
    state = State.SUCCEEDED if cause is Cause.EXIT and code == 0 else State.FAILED
    return Outcome(state, cause, Evidence("memory:queue", T0 + 10), exit_code=code)


def test_an_open_intent_waits_for_its_deadline_then_asks_for_observation(facts: Facts) -> None:
    j = job()
    j.intents.append(Intent(1, Action.OPEN, 1, "s", T0, T0 + 35, status=IntentStatus.UNKNOWN))
    assert next_step(j, RULES, facts, T0 + 10).kind is StepKind.WAIT
    assert next_step(j, RULES, facts, T0 + 10).until == T0 + 35
    assert next_step(j, RULES, facts, T0 + 40).kind is StepKind.OBSERVE


def test_a_submission_without_an_object_is_started_with_its_own_marker(facts: Facts) -> None:
    step = next_step(job(GateState.PLANNED, None), RULES, facts, T0)
    assert (step.kind, step.action, step.submission, step.new_submission) == (StepKind.ACT, Action.START, 1, False)


def test_strays_are_stopped_by_id(facts: Facts) -> None:
    j = job(GateState.CLOSED)
    j.current.strays.append("102")  # type: ignore[union-attr]
    step = next_step(j, RULES, facts, T0)
    assert (step.action, step.args) == (Action.STOP, {"schedulerId": "102"})
    j.intents.append(Intent(1, Action.STOP, 1, "s", T0, T0 + 35, IntentStatus.DONE, args={"schedulerId": "102"}))
    assert next_step(j, RULES, facts, T0).action is Action.OPEN


def test_a_recorded_closed_gate_is_opened(facts: Facts) -> None:
    assert next_step(job(GateState.CLOSED), RULES, facts, T0).action is Action.OPEN


def test_success_closes(facts: Facts) -> None:
    assert next_step(job(outcome=ended(Cause.EXIT, 0)), RULES, facts, T0).kind is StepKind.CLOSE


def test_a_rule_decides_then_the_backoff_is_waited_out(facts: Facts) -> None:
    j = job(outcome=ended(Cause.PREEMPTED))
    step = next_step(j, RULES, facts, T0 + 20)
    assert (step.kind, step.rule, step.rule_action, step.cause) == (
        StepKind.DECIDE,
        "evicted",
        "resubmit",
        Cause.PREEMPTED,
    )
    decided, events = apply_record_step(j, step, T0 + 20, "s")
    assert decided.counters == {"total": 1, "cause:preempted": 1, "rule:evicted": 1, "resubmit": 1}
    assert decided.decisions[0].reason and events[0].kind == "decided"
    decided.not_before = T0 + 30
    assert next_step(decided, RULES, facts, T0 + 25).kind is StepKind.WAIT
    go = next_step(decided, RULES, facts, T0 + 31)
    assert (go.action, go.submission, go.new_submission, go.decision) == (Action.START, 2, True, 1)


def test_a_decision_is_made_once_per_execution(facts: Facts) -> None:
    j = job(outcome=ended(Cause.PREEMPTED))
    step = next_step(j, RULES, facts, T0)
    once, _ = apply_record_step(j, step, T0, "s")
    assert next_step(once, RULES, facts, T0).kind is StepKind.WAIT  # its backoff: never decides again
    assert next_step(once, RULES, facts, T0 + 10).kind is StepKind.ACT


def test_unmatched_escalates_and_closes(facts: Facts) -> None:
    j = job(outcome=ended(Cause.OUT_OF_MEMORY))
    step = next_step(j, RULES, facts, T0)
    assert (step.kind, step.rule, step.rule_action) == (StepKind.DECIDE, "unmatched", "escalate")
    decided, _ = apply_record_step(j, step, T0, "s")
    assert decided.counters == {}  # the unmatched policy is not a recovery action
    esc = next_step(decided, RULES, facts, T0)
    assert esc.kind is StepKind.ESCALATE and esc.close
    final, _ = apply_record_step(decided, esc, T0, "s")
    assert final.closed and final.escalations[0].cause is Cause.OUT_OF_MEMORY


def test_limits_stop_a_rule(facts: Facts) -> None:
    j = job(outcome=ended(Cause.PREEMPTED))
    j.counters = {"total": 3}
    step = next_step(j, RULES, facts, T0)
    assert step.rule == "unmatched" and "total limit" in step.reason


def test_an_unavailable_action_is_not_applied(facts: Facts) -> None:
    reduced = Facts.of(restrict(backend(MemoryScheduler(FakeClock(), "slurm")), ()))
    no_requeue = Facts(
        reduced.capabilities,
        reduced.interfaces - {"Requeuer"},
        reduced.declarations,
        {
            **reduced.availability,
            **Facts.of(restrict(backend(MemoryScheduler(FakeClock(), "kubeflow")), ())).availability,
        },
    )
    step = next_step(job(outcome=ended(Cause.EXIT, 75)), RULES, no_requeue, T0)
    assert step.rule == "unmatched" and "unavailable" in step.reason


def test_requeue_carries_the_restart_count_it_expects_to_raise(facts: Facts) -> None:
    j = job(outcome=ended(Cause.EXIT, 75))
    decided, _ = apply_record_step(j, next_step(j, RULES, facts, T0), T0, "s")
    step = next_step(decided, RULES, facts, T0)
    assert (step.action, step.args, step.decision) == (Action.REQUEUE, {"restart": 0}, 1)
    decided.intents.append(
        Intent(1, Action.REQUEUE, 1, "s", T0, T0 + 35, IntentStatus.FAILED, result="Rejected: no", decision=1)
    )
    assert next_step(decided, RULES, facts, T0).kind is StepKind.ESCALATE


def test_a_hold_rule_holds_the_new_submission_before_opening_it(facts: Facts) -> None:
    j = job(outcome=ended(Cause.TIMEOUT))
    j.decisions.append(Decision(1, T0, 1, "1.101.0", Cause.TIMEOUT, "hold", "park", "r", "s"))
    j.submissions.append(Submission(2, "dsp-j-2", T0, scheduler_id="103", gate=GateState.CLOSED))
    step = next_step(j, RULES, facts, T0)
    assert step.action is Action.HOLD and step.args["instance"] == hold_instance(j, 2)
    j.holds.append(HoldRecord(hold_instance(j, 2), "s", 2, T0))
    assert next_step(j, RULES, facts, T0).action is Action.OPEN


def test_admin_held_is_escalated_once(facts: Facts) -> None:
    held = Outcome(State.HELD, Cause.ADMIN_HELD, Evidence("memory:queue", T0))
    j = job(outcome=held)
    step = next_step(j, RULES, facts, T0)
    assert step.kind is StepKind.ESCALATE and not step.close
    escalated, _ = apply_record_step(j, step, T0, "s")
    assert next_step(escalated, RULES, facts, T0).kind is StepKind.NOTHING
    assert not escalated.closed


def test_a_stop_is_followed_until_the_object_ended(facts: Facts) -> None:
    j = job(outcome=Outcome(State.RUNNING, None, Evidence("q", T0)))
    j.stop_requested = j.closed = True
    assert next_step(j, RULES, facts, T0).action is Action.STOP
    j.intents.append(Intent(1, Action.STOP, 1, "op", T0, T0 + 35, IntentStatus.DONE, result="30.0", resolved_at=T0))
    assert next_step(j, RULES, facts, T0 + 10).kind is StepKind.WAIT
    assert next_step(j, RULES, facts, T0 + 100).action is Action.STOP  # its bound passed: stop again


def test_an_unknown_clock_of_another_lease_is_waited_on_until_this_holders_reading(facts: Facts) -> None:
    """A clock started under lease 1, long past the backend's bound, and a successor holding lease 2 whose cycle
    read nothing (its observation failed): the time since says nothing of its own watch, so it waits for its
    first reading (which restarts the clock) instead of deciding on the unknown; under its own lease it decides.
    The simulator's seed 92166 found a supervisor closing a running job so."""
    unknown = Outcome(State.UNKNOWN, Cause.UNKNOWN, Evidence("memory:accounting", T0 + 36))
    j = job(outcome=unknown)
    sub = j.current
    assert sub is not None
    sub.unknown_since, sub.unknown_seen_by = T0 + 36, 1
    j.lease = Lease("sup-2", 2, T0 + 200)
    now = T0 + 36 + facts.unknown_grace + 50
    step = next_step(j, RULES, facts, now)
    assert step.kind is StepKind.WAIT and "first reading" in step.reason, step
    sub.unknown_seen_by = 2
    assert next_step(j, RULES, facts, now).kind is not StepKind.WAIT
