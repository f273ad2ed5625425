"""The ``readmit`` rule action: next_step and fold purely, then the supervisor on the memory Kubeflow shape
(preempted by its queue, readmitted through the Readmitter, running again, once), including a supervisor that
dies between the intent and the call."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from dispatch.clock import FakeClock
from dispatch.cluster import Cluster, checked
from dispatch.errors import Unsupported
from dispatch.extensions import Image
from dispatch.memory import MemoryScheduler, backend
from dispatch.outcome import Cause, Evidence, Outcome, State
from dispatch.records import MemoryRecords
from dispatch.records.model import (
    Action,
    Decision,
    ExecutionRecord,
    GateState,
    Intent,
    IntentStatus,
    JobRecord,
    Submission,
)
from dispatch.rules import RuleSet
from dispatch.spec import JobSpec
from dispatch.spi import ExecutionEvidence, Gate, JobEvidence, Readmitter, restrict
from dispatch.supervise import Facts, StepKind, Supervisor, apply_record_step, fold, next_step

T0 = 1_800_000_000.0
READMIT = {"rules": [{"name": "back", "cause": "preempted", "action": "readmit", "limit": 2}]}
RULES = RuleSet.from_data(READMIT)
FIRST = "j.1.1.0.0"


@pytest.fixture(scope="module")
def facts() -> Facts:
    return Facts.of(backend(MemoryScheduler(FakeClock(), "kubeflow")))


def preempted(at: float = T0 + 10) -> Outcome:
    return Outcome(State.FAILED, Cause.PREEMPTED, Evidence("memory:queue", at))


def record(outcome: Outcome) -> JobRecord:
    sub = Submission(1, "dsp-j-1", T0, scheduler_id="tj-1", gate=GateState.OPEN, outcome=outcome)
    sub.executions.append(ExecutionRecord(FIRST, 0, outcome, T0))
    return JobRecord("j", "memory", JobSpec(command=("x",)), T0, submissions=[sub])


def decided(facts: Facts) -> JobRecord:
    j = record(preempted())
    step = next_step(j, RULES, facts, T0 + 10)
    assert (step.kind, step.rule, step.rule_action) == (StepKind.DECIDE, "back", "readmit")
    out, _ = apply_record_step(j, step, T0 + 10, "sup")
    return out


def intent(status: IntentStatus, result: str = "", resolved: float | None = T0 + 12) -> Intent:
    return Intent(
        1,
        Action.READMIT,
        1,
        "sup",
        T0 + 11,
        T0 + 46,
        status,
        args={"execution": FIRST},
        result=result,
        resolved_at=resolved,
        decision=1,
    )


# ----- next_step ------------------------------------------------------------------------------------------------


def test_a_readmit_decision_acts_on_the_same_submission_with_the_execution_it_readmits(facts: Facts) -> None:
    j = decided(facts)
    assert j.counters["readmit"] == 1 and j.counters["rule:back"] == 1
    step = next_step(j, RULES, facts, T0 + 11)
    assert (step.kind, step.action, step.submission, step.decision) == (StepKind.ACT, Action.READMIT, 1, 1)
    assert step.args == {"execution": FIRST} and not step.new_submission


def test_a_readmission_that_landed_waits_for_the_observation(facts: Facts) -> None:
    j = decided(facts)
    j.intents.append(intent(IntentStatus.DONE))
    assert next_step(j, RULES, facts, T0 + 13).kind is StepKind.NOTHING


def test_evicted_again_before_it_ran_is_readmitted_again_under_the_same_decision(facts: Facts) -> None:
    j = decided(facts)
    j.intents.append(intent(IntentStatus.DONE))
    j.submissions[0].outcome = preempted(T0 + 30)  # seen ended again after the readmission, no later execution
    step = next_step(j, RULES, facts, T0 + 30)
    assert (step.action, step.decision) == (Action.READMIT, 1) and "evicted again" in step.reason


def test_a_refused_readmission_escalates_and_a_failed_one_is_made_again(facts: Facts) -> None:
    j = decided(facts)
    j.intents.append(intent(IntentStatus.FAILED, "Rejected: TrainJob tj-1 has ended"))
    step = next_step(j, RULES, facts, T0 + 13)
    assert step.kind is StepKind.ESCALATE and step.close and "refused" in step.reason
    j.intents[-1] = intent(IntentStatus.FAILED, "by observation: failed after j.1.1.0.0; executions 1")
    assert next_step(j, RULES, facts, T0 + 50).action is Action.READMIT


def test_the_backoff_is_waited_out_before_readmitting(facts: Facts) -> None:
    rules = RuleSet.from_data({"rules": [{"cause": "preempted", "action": "readmit", "backoff": "30s"}]})
    j = record(preempted())
    out, _ = apply_record_step(j, next_step(j, rules, facts, T0 + 10), T0 + 10, "sup")
    assert next_step(out, rules, facts, T0 + 20).kind is StepKind.WAIT
    assert next_step(out, rules, facts, T0 + 41).action is Action.READMIT


def test_a_readmit_rule_is_not_applied_where_nothing_readmits(facts: Facts) -> None:
    reduced = Facts.of(restrict(backend(MemoryScheduler(FakeClock(), "kubeflow")), (Readmitter,)))
    step = next_step(record(preempted()), RULES, reduced, T0 + 10)
    assert step.rule == "unmatched" and "no Readmitter" in step.reason


# ----- fold --------------------------------------------------------------------------------------------------------


def evidence(at: float, state: State, *later: str) -> JobEvidence:
    ev = Evidence("memory:watch", at)
    execs = [ExecutionEvidence(FIRST, 0, preempted(), T0, T0 + 10)]
    execs += [ExecutionEvidence(x, 0, Outcome(State.RUNNING, None, ev), at) for x in later]
    cause = Cause.QUEUED if state is State.PENDING else Cause.PREEMPTED if state is State.FAILED else None
    return JobEvidence("tj-1", "dsp-j-1", Outcome(state, cause, ev), Gate.OPEN, executions=tuple(execs))


@pytest.mark.parametrize(
    ("seen", "status"),
    [
        (evidence(T0 + 50, State.FAILED), IntentStatus.FAILED),
        (evidence(T0 + 50, State.PENDING), IntentStatus.DONE),
        (evidence(T0 + 50, State.RUNNING, "j.1.2.0.0"), IntentStatus.DONE),
    ],
    ids=["still-evicted", "waiting-again", "a-later-execution"],
)
def test_an_open_readmission_is_resolved_by_what_the_object_shows(seen: JobEvidence, status: IntentStatus) -> None:
    j = record(preempted())
    j.intents.append(intent(IntentStatus.PENDING, resolved=None))
    early, _ = fold(j, evidence(T0 + 40, State.PENDING), T0 + 40)
    assert early.intents[0].status is IntentStatus.PENDING, "a read before the deadline resolves nothing"
    out, events = fold(j, seen, T0 + 50)
    assert out.intents[0].status is status
    assert any(e.kind == "resolved" and e.data["action"] == "readmit" for e in events)


# ----- the supervisor on the memory Kubeflow shape ------------------------------------------------------------


@dataclass
class Env:
    clock: FakeClock
    sched: MemoryScheduler
    records: MemoryRecords
    cluster: Cluster

    def submit(self) -> str:
        spec = JobSpec(command=("sleep", "100"), nodes=1, extensions=(Image("registry.example/x:1"),))
        return self.cluster.submit(spec, READMIT)

    def supervisor(self, b: Any = None, owner: str = "sup-a") -> Supervisor:
        return Supervisor(b or backend(self.sched), self.records, clock=self.clock, owner=owner, poll=10)

    def sid(self, job_id: str) -> str:
        sid = self.records.get(job_id).current.scheduler_id  # type: ignore[union-attr]
        assert sid is not None
        return sid

    def cycles(self, sup: Supervisor, n: int) -> None:
        for _ in range(n):
            sup.cycle()
            self.clock.advance(10)

    def readmit_calls(self) -> int:
        return sum(1 for c in self.sched.calls if c.method == "readmit" and c.applied)


@pytest.fixture
def env() -> Iterator[Env]:
    clock = FakeClock()
    sched = MemoryScheduler(clock, "kubeflow", nodes=4)
    records = MemoryRecords()
    yield Env(clock, sched, records, Cluster("memory", backend(sched), records, clock))


def test_preempted_by_the_queue_then_readmitted_runs_again_once_as_the_same_submission(env: Env) -> None:
    job_id = env.submit()
    sup = env.supervisor()
    env.cycles(sup, 1)
    sid = env.sid(job_id)
    env.sched.control.preempt(sid)
    env.cycles(sup, 3)
    job = env.records.get(job_id)
    assert job.state is State.RUNNING and len(job.submissions) == 1
    assert [e.identity.split(".")[2] for e in job.current.executions] == ["1", "2"]  # type: ignore[union-attr]
    assert [(d.action, d.rule, d.cause) for d in job.decisions] == [("readmit", "back", Cause.PREEMPTED)]
    readmits = [i for i in job.intents if i.action is Action.READMIT]
    assert [(i.status, i.decision) for i in readmits] == [(IntentStatus.DONE, 1)]
    assert env.sched.jobs[sid].readmissions == 1 and env.readmit_calls() == 1
    kinds = [(e.kind, e.data.get("action")) for e in env.records.events(job_id)]
    assert ("decided", "readmit") in kinds and kinds.index(("intent", "readmit")) < kinds.index(("call", "readmit"))
    env.cycles(sup, 15)
    job = env.records.get(job_id)
    assert job.closed and job.state is State.SUCCEEDED and env.readmit_calls() == 1


def test_a_readmission_counts_in_the_cycle_report_by_action_and_rule(env: Env) -> None:
    job_id = env.submit()
    sup = env.supervisor()
    env.cycles(sup, 1)
    env.sched.control.preempt(env.sid(job_id))
    assert sup.cycle().decisions == {("readmit", "back"): 1}


class Crash(BaseException):
    """The supervisor process dies inside the readmit call (not an Exception: nothing catches it)."""


def dying(sched: MemoryScheduler, *, landed: bool) -> Any:
    """The memory backend, but the process dies in ``readmit``: after the call took effect, or before."""
    b = backend(sched)
    view = restrict(b, ())

    def readmit(sid: str) -> None:
        if landed:
            b.readmit(sid)
        raise Crash("the supervisor died in the readmit call")

    view.readmit = readmit  # type: ignore[attr-defined]
    return view


@pytest.mark.parametrize("landed", [True, False], ids=["the-call-landed", "the-call-never-made"])
def test_a_crash_between_the_intent_and_the_call_neither_loses_nor_repeats_the_readmission(
    env: Env, landed: bool
) -> None:
    job_id = env.submit()
    first = env.supervisor(dying(env.sched, landed=landed))
    env.cycles(first, 1)
    sid = env.sid(job_id)
    env.sched.control.preempt(sid)
    with pytest.raises(Crash):
        first.cycle()
    job = env.records.get(job_id)
    assert [(i.action, i.status) for i in job.intents][-1] == (Action.READMIT, IntentStatus.PENDING)
    assert env.sched.jobs[sid].readmissions == (1 if landed else 0)
    second = env.supervisor(owner="sup-b")
    env.cycles(second, 30)  # the lease expires, the intent's deadline passes, it is resolved by observation
    job = env.records.get(job_id)
    readmits = [i for i in job.intents if i.action is Action.READMIT]
    if landed:
        assert [i.status for i in readmits] == [IntentStatus.DONE]
        assert readmits[0].result.startswith("by observation")
    else:
        assert [i.status for i in readmits] == [IntentStatus.FAILED, IntentStatus.DONE]
    assert env.sched.jobs[sid].readmissions == 1, "readmitted exactly once"
    assert len(job.decisions) == 1 and len(job.submissions) == 1
    assert job.closed and job.state is State.SUCCEEDED


def test_a_zero_call_bound_hands_out_no_readmitter_and_a_slurm_shape_refuses_the_rule() -> None:
    clock = FakeClock()
    zero = checked(backend(MemoryScheduler(clock, "kubeflow"), call_bound=0))
    assert not isinstance(zero, Readmitter)
    slurm = backend(MemoryScheduler(clock, "slurm"))
    with pytest.raises(Unsupported, match="action readmit is refused"):
        Supervisor(slurm, MemoryRecords(), clock=clock, poll=10, default_rules=READMIT)


def test_a_decision_record_round_trips_the_readmit_action() -> None:
    d = Decision(1, T0, 1, FIRST, Cause.PREEMPTED, "readmit", "back", "r", "sup")
    assert Decision.from_json(d.to_json()) == d
    i = intent(IntentStatus.DONE)
    assert Intent.from_json(i.to_json()) == i and i.action is Action.READMIT


def test_a_readmission_resolved_with_other_open_intents_leaves_them_to_their_own_evidence() -> None:
    """Found by the simulator's sweep (seed 831): resolving a readmit intent must not disturb the resolution of
    the intents after it in the same fold."""
    j = record(preempted())
    j.intents.append(intent(IntentStatus.PENDING, resolved=None))
    j.intents.append(Intent(2, Action.STOP, 1, "op", T0 + 12, T0 + 47, IntentStatus.UNKNOWN))
    out, _ = fold(j, evidence(T0 + 50, State.PENDING), T0 + 50)
    assert [i.status for i in out.intents] == [IntentStatus.DONE, IntentStatus.FAILED]


def test_a_readmission_shows_in_dispatch_show_and_the_timeline_like_any_decision(env: Env) -> None:
    from dispatch import timeline
    from dispatch.cli.views import render_show

    job_id = env.submit()
    sup = env.supervisor()
    env.cycles(sup, 1)
    env.sched.control.preempt(env.sid(job_id))
    env.cycles(sup, 3)
    job = env.records.get(job_id)
    text = render_show(job, env.records.events(job_id), env.clock.now())
    assert "ended preempted -> readmit  (rule back: rule 'back' matches preempted" in text
    assert "intent         seq=3, action=readmit, submission=1" in text
    assert "call           seq=3, action=readmit, status=done" in text
    lane = timeline.build(job, env.clock.now()).lanes
    markers = timeline.build(job, env.clock.now()).markers
    assert len(lane) == 1 and [(m.kind, m.label) for m in markers] == [("decision", "readmit")]


def test_a_readmission_is_counted_in_the_decisions_metric_by_action_and_rule(env: Env) -> None:
    import urllib.request

    from dispatch.supervise.metrics import Metrics

    job_id = env.submit()
    metrics = Metrics(stale_after=60)
    sup = env.supervisor()
    host, port = metrics.serve("127.0.0.1", 0)
    try:
        metrics.cycle(sup.cycle(), 0.01)
        env.clock.advance(10)
        env.sched.control.preempt(env.sid(job_id))
        metrics.cycle(sup.cycle(), 0.01)
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
        series = f'dispatch_supervisor_decisions_total{{action="readmit",cluster="{sup.cluster}",rule="back"}}'
        assert f"{series} 1.0" in text
    finally:
        metrics.close()
