"""Judging stalls (pure): never before the bound, never for a job that never reported, once per execution; and
recording the cause once the execution ended."""

from __future__ import annotations

import pytest

from dispatch.outcome import Cause, Evidence, Outcome, State
from dispatch.records.model import Action, ExecutionRecord, Intent, IntentStatus, JobRecord, Submission
from dispatch.rules import RuleSet
from dispatch.spec import JobSpec
from dispatch.spi import ExecutionEvidence, Gate, JobEvidence, RankProgress
from dispatch.supervise import stall
from dispatch.supervise.step import StepKind

T0 = 1_800_000_000.0
BOUND = 600.0
RULES = RuleSet.from_data({"rules": [{"cause": ["stalled"], "stalledAfter": "10m", "action": "resubmit", "limit": 3}]})
IDENTITY = "1.101.0"


def running(at: float) -> Outcome:
    return Outcome(State.RUNNING, None, Evidence("memory", at))


def job() -> JobRecord:
    sub = Submission(1, "dsp-j-1", T0, scheduler_id="101", outcome=running(T0))
    sub.executions.append(ExecutionRecord(IDENTITY, 0, running(T0), T0))
    return JobRecord("j", "memory", JobSpec(command=("x",)), T0, submissions=[sub])


def evidence(seen: float, *reports: RankProgress, state: State = State.RUNNING) -> JobEvidence:
    out = running(seen) if state is State.RUNNING else Outcome(state, Cause.CANCELLED, Evidence("memory", seen))
    ex = ExecutionEvidence(IDENTITY, 0, out, T0, progress=reports)
    return JobEvidence("101", "dsp-j-1", out, Gate.OPEN, executions=(ex,))


def report(rank: int, at: float, step: int = 5) -> RankProgress:
    return RankProgress(rank, step, at, 100)


@pytest.mark.parametrize("silence", [0.0, 1.0, BOUND - 1e-6, BOUND])
def test_never_judged_at_or_before_the_bound(silence: float) -> None:
    last = T0 + 100
    assert stall.judge(job(), evidence(last + silence, report(0, last)), RULES) is None


def test_judged_just_after_the_bound_with_the_silent_ranks() -> None:
    last = T0 + 100
    ev = evidence(last + BOUND + 0.5, report(0, last + BOUND), report(1, last), report(2, last - 5))
    step = stall.judge(job(), ev, RULES)
    assert step is not None and step.kind is StepKind.ACT and step.action is Action.STOP and step.submission == 1
    assert step.args["stalled"] == IDENTITY and step.args["ranks"] == [1, 2]
    assert step.args["silentFor"] == pytest.approx(BOUND + 5.5) and step.args["bound"] == BOUND
    assert "ranks 1, 2" in step.reason


def test_a_job_that_never_reports_is_never_stalled() -> None:
    assert stall.judge(job(), evidence(T0 + 10 * BOUND), RULES) is None


def test_without_a_stall_rule_nothing_is_judged() -> None:
    rules = RuleSet.from_data({"rules": [{"cause": "node-lost", "action": "resubmit"}]})
    assert rules.stall_bound is None
    assert stall.judge(job(), evidence(T0 + 10 * BOUND, report(0, T0)), rules) is None


def test_an_execution_that_is_not_running_is_not_judged() -> None:
    assert stall.judge(job(), evidence(T0 + 10 * BOUND, report(0, T0), state=State.CANCELLED), RULES) is None


def _with_stop(status: IntentStatus) -> JobRecord:
    j = job()
    args = {"stalled": IDENTITY, "ranks": [1], "silentFor": 700.0, "bound": BOUND}
    j.intents.append(Intent(1, Action.STOP, 1, "sv", T0, T0 + 30, status=status, args=args))
    return j


@pytest.mark.parametrize("status", [IntentStatus.PENDING, IntentStatus.UNKNOWN, IntentStatus.DONE])
def test_once_a_stall_stop_is_open_or_landed_it_is_not_judged_again(status: IntentStatus) -> None:
    assert stall.judge(_with_stop(status), evidence(T0 + 2 * BOUND, report(1, T0)), RULES) is None


def test_a_stall_stop_that_certainly_failed_is_judged_again() -> None:
    step = stall.judge(_with_stop(IntentStatus.FAILED), evidence(T0 + 2 * BOUND, report(1, T0)), RULES)
    assert step is not None and step.action is Action.STOP


def test_the_ended_execution_is_recorded_stalled_and_rules_see_the_cause() -> None:
    j = _with_stop(IntentStatus.DONE)
    sub = j.submissions[0]
    cancelled = Outcome(State.CANCELLED, Cause.CANCELLED, Evidence("memory", T0 + 2 * BOUND), signal=15)
    sub.outcome = sub.executions[0].outcome = cancelled
    marked, events = stall.mark(j, T0 + 2 * BOUND)
    out = marked.submissions[0].outcome
    assert out is not None and (out.state, out.cause, out.signal) == (State.FAILED, Cause.STALLED, 15)
    assert marked.submissions[0].executions[0].outcome.cause is Cause.STALLED
    assert "rank(s) 1 reported no progress for 700s" in out.detail and "cancelled/cancelled" in out.detail
    assert [e.kind for e in events] == ["stalled"]
    assert stall.mark(marked, T0 + 2 * BOUND) == (marked, [])  # once
    rule, _ = RULES.find(out.state, Cause.STALLED, None, 1, {})
    assert rule is not None and rule.action.value == "resubmit"


@pytest.mark.parametrize(
    ("state", "cause", "code"),
    [
        (State.SUCCEEDED, Cause.EXIT, 0),
        (State.FAILED, Cause.OUT_OF_MEMORY, None),
        (State.FAILED, Cause.NODE_LOST, None),
    ],
)
def test_an_execution_that_ended_otherwise_before_the_stop_landed_keeps_its_cause(
    state: State, cause: Cause, code: int | None
) -> None:
    j = _with_stop(IntentStatus.DONE)
    end = Outcome(state, cause, Evidence("memory", T0 + 2 * BOUND), exit_code=code)
    j.submissions[0].outcome = j.submissions[0].executions[0].outcome = end
    assert stall.mark(j, T0 + 2 * BOUND) == (j, [])


def suspended(at: float) -> Outcome:
    return Outcome(State.RUNNING, Cause.SUSPENDED, Evidence("memory", at), detail="SUSPENDED")


def _suspended_evidence(seen: float, *reports: RankProgress) -> JobEvidence:
    ex = ExecutionEvidence(IDENTITY, 0, suspended(seen), T0, progress=reports)
    return JobEvidence("101", "dsp-j-1", suspended(seen), Gate.OPEN, executions=(ex,))


def test_a_suspended_execution_is_never_judged_however_long_its_silence() -> None:
    ev = _suspended_evidence(T0 + 10 * BOUND, report(0, T0))
    assert stall.judge(job(), ev, RULES) is None
    # the simulator's planted bug turns the seam off: the same reading is then judged stalled
    assert stall.judge(job(), ev, RULES, suspensions=False) is not None


def test_the_first_reading_after_a_resume_counts_the_silence_from_itself() -> None:
    j = job()
    j.current.executions[0].outcome = suspended(T0 + 5 * BOUND)  # type: ignore[union-attr]
    assert stall.judge(j, evidence(T0 + 10 * BOUND, report(0, T0)), RULES) is None


@pytest.mark.parametrize(("after", "stalled"), [(BOUND, False), (BOUND + 1, True)])
def test_after_a_resume_the_bound_runs_from_the_resume(after: float, stalled: bool) -> None:
    j = job()
    resumed = T0 + 5 * BOUND
    j.current.executions[0].resumed_at = resumed  # type: ignore[union-attr]
    step = stall.judge(j, evidence(resumed + after, report(0, T0)), RULES)
    assert (step is not None) is stalled
    if step is not None:
        assert step.args["silentFor"] == pytest.approx(after) and step.args["observedAt"] == resumed + after


def test_a_report_after_the_resume_is_what_the_bound_runs_from() -> None:
    j = job()
    resumed = T0 + 5 * BOUND
    j.current.executions[0].resumed_at = resumed  # type: ignore[union-attr]
    assert stall.judge(j, evidence(resumed + 50 + BOUND, report(0, resumed + 50)), RULES) is None
    assert stall.judge(j, evidence(resumed + 51 + BOUND, report(0, resumed + 50)), RULES) is not None


def test_a_job_suspended_past_its_bound_is_not_stopped_and_succeeds_once_resumed() -> None:
    """Through the supervisor on the memory scheduler (Slurm shape, ProgressReporting yes): a reporting job is
    suspended for ten times its stalledAfter, read suspended, never stopped; resumed, it runs to success. The
    record keeps when it resumed, and the silence before counts for nothing."""
    from dispatch.clock import FakeClock
    from dispatch.cluster import Cluster
    from dispatch.memory import MemoryScheduler, backend
    from dispatch.records import MemoryRecords
    from dispatch.supervise import Supervisor

    clock = FakeClock(T0)
    sched = MemoryScheduler(clock, "slurm", nodes=2)
    b = backend(sched)
    records = MemoryRecords()
    rules = {"rules": [{"cause": "stalled", "stalledAfter": "20s", "action": "resubmit", "limit": 1}]}
    job_id = Cluster("memory", b, records, clock).submit(JobSpec(command=("sleep", "60", "report")), rules)
    sup = Supervisor(b, records, clock=clock, owner="sup", poll=5)

    def cycles(n: int) -> None:
        for _ in range(n):
            sup.cycle()
            clock.advance(5)

    cycles(4)
    (sid,) = sched.control.running()
    sched.control.suspend(sid)
    cycles(40)  # 200 s suspended
    rec = records.get(job_id)
    assert rec.current is not None and rec.current.outcome is not None
    assert (rec.current.outcome.state, rec.current.outcome.cause) == (State.RUNNING, Cause.SUSPENDED)
    assert not [i for i in rec.intents if i.action is Action.STOP]
    sched.control.resume(sid)
    cycles(30)
    rec = records.get(job_id)
    assert rec.state is State.SUCCEEDED and len(rec.submissions) == 1
    assert not [i for i in rec.intents if i.action is Action.STOP]
    ex = rec.submissions[0].executions[0]
    assert ex.resumed_at is not None and T0 + 220 <= ex.resumed_at <= T0 + 230
