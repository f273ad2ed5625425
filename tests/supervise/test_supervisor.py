"""The supervisor on the memory adapter, both shapes, under a fake clock."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from dispatch.clock import FakeClock
from dispatch.cluster import Cluster
from dispatch.errors import ConfigError, Conflict, OutcomeUnknown
from dispatch.extensions import Image
from dispatch.memory import MemoryScheduler, Shape, backend
from dispatch.outcome import Cause, State
from dispatch.records import MemoryRecords
from dispatch.records.model import Action, IntentStatus
from dispatch.spec import JobSpec
from dispatch.spi import Backend
from dispatch.supervise import Supervisor

RESUBMIT = {"rules": [{"name": "evicted", "cause": ["preempted", "node-lost"], "action": "resubmit", "limit": 2}]}


@dataclass
class Env:
    clock: FakeClock
    sched: MemoryScheduler
    backend: Backend
    records: MemoryRecords
    cluster: Cluster

    def spec(self, *argv: str, nodes: int = 1, limit: float | None = None) -> JobSpec:
        ext = (Image("registry.example/x:1"),) if self.sched.shape is Shape.KUBEFLOW else ()
        return JobSpec(command=argv, nodes=nodes, time_limit=limit, extensions=ext)

    def supervisor(self, owner: str = "sup-a", **kw: object) -> Supervisor:
        return Supervisor(self.backend, self.records, clock=self.clock, owner=owner, poll=10, **kw)  # type: ignore[arg-type]

    def sid(self, job_id: str) -> str:
        sid = self.records.get(job_id).current.scheduler_id  # type: ignore[union-attr]
        assert sid is not None
        return sid

    def cycles(self, sup: Supervisor, n: int, step: float = 10.0) -> None:
        for _ in range(n):
            sup.cycle()
            self.clock.advance(step)


@pytest.fixture(params=["slurm", "kubeflow"])
def env(request: pytest.FixtureRequest) -> Iterator[Env]:
    clock = FakeClock()
    sched = MemoryScheduler(clock, request.param, nodes=4, min_job_age=300, node_loss_window=60)
    b = backend(sched)
    records = MemoryRecords()
    yield Env(clock, sched, b, records, Cluster("memory", b, records, clock))


def test_success_is_observed_and_closed(env: Env) -> None:
    job_id = env.cluster.submit(env.spec("sleep", "30"))
    sup = env.supervisor()
    env.cycles(sup, 5)
    job = env.records.get(job_id)
    assert job.closed and job.state is State.SUCCEEDED and job.cause is Cause.EXIT
    assert any(e.kind == "closed" for e in env.records.events(job_id))


def test_preemption_is_resubmitted_as_submission_two(env: Env) -> None:
    job_id = env.cluster.submit(env.spec("sleep", "100"), RESUBMIT)
    sup = env.supervisor()
    env.cycles(sup, 1)
    env.sched.control.preempt(env.sid(job_id))
    env.cycles(sup, 3)
    job = env.records.get(job_id)
    assert [s.n for s in job.submissions] == [1, 2]
    d = job.decisions[0]
    assert (d.rule, d.action, d.cause) == ("evicted", "resubmit", Cause.PREEMPTED) and "matches" in d.reason
    assert job.counters["rule:evicted"] == 1
    env.cycles(sup, 15)
    job = env.records.get(job_id)
    assert job.closed and job.state is State.SUCCEEDED


def test_unmatched_failure_is_escalated_with_a_reason(env: Env) -> None:
    job_id = env.cluster.submit(env.spec("exit", "3"), RESUBMIT)
    env.cycles(env.supervisor(), 4)
    job = env.records.get(job_id)
    assert job.closed and job.state is State.FAILED and job.outcome.exit_code == 3  # type: ignore[union-attr]
    assert job.escalations and job.escalations[0].cause is Cause.EXIT
    assert job.decisions[0].rule == "unmatched"


def test_unmatched_close_policy_closes_without_escalating(env: Env) -> None:
    job_id = env.cluster.submit(env.spec("oom", "5"), {"unmatched": "close"})
    env.cycles(env.supervisor(), 4)
    job = env.records.get(job_id)
    assert job.closed and job.cause is Cause.OUT_OF_MEMORY and not job.escalations


def test_rule_limit_then_escalation(env: Env) -> None:
    job_id = env.cluster.submit(env.spec("sleep", "500"), RESUBMIT)
    sup = env.supervisor()
    for _ in range(3):
        env.cycles(sup, 1)
        env.sched.control.preempt(env.sid(job_id))
        env.cycles(sup, 2)
    job = env.records.get(job_id)
    assert len(job.submissions) == 3  # the limit of 2 resubmits
    assert job.closed and "limit" in job.decisions[-1].reason


def test_admin_hold_is_escalated_and_never_lifted(env: Env) -> None:
    job_id = env.cluster.submit(env.spec("sleep", "50", nodes=4))
    env.cluster.submit(env.spec("sleep", "500", nodes=4))
    sup = env.supervisor()
    other = next(t.sid for t in env.sched.jobs.values() if t.job_id != job_id)
    env.sched.control.admin_hold(other)
    env.cycles(sup, 2)
    held = next(j for j in env.records.jobs() if j.current.scheduler_id == other)  # type: ignore[union-attr]
    assert held.state is State.HELD and held.cause is Cause.ADMIN_HELD
    assert [e.cause for e in held.escalations] == [Cause.ADMIN_HELD] and not held.closed
    assert env.sched.jobs[other].admin_held  # dispatch did not lift it
    env.sched.control.admin_release(other)
    env.cycles(sup, 2)
    held = env.records.get(held.id)
    assert held.escalations[0].resolved_at is not None


def test_a_failed_poll_is_not_a_job_failure(env: Env) -> None:
    job_id = env.cluster.submit(env.spec("sleep", "500"))
    sup = env.supervisor(refresh=5)
    env.cycles(sup, 1)
    seen = env.records.get(job_id).current.outcome  # type: ignore[union-attr]
    assert seen is not None and seen.state is State.RUNNING
    env.sched.control.inject("inspect_many", "unavailable")
    env.sched.control.inject("watch", "unavailable")
    report = sup.cycle()
    assert report.unavailable
    after = env.records.get(job_id).current.outcome  # type: ignore[union-attr]
    assert after == seen and not env.records.get(job_id).closed
    assert after.age(env.clock.now()) >= 10


def test_an_unknown_start_is_found_by_marker_after_the_deadline(env: Env) -> None:
    env.sched.control.inject("start", "unknown", landed=True)
    with pytest.raises(OutcomeUnknown):
        env.cluster.submit(env.spec("sleep", "20"))
    job = env.records.jobs()[0]
    assert job.intents[0].status is IntentStatus.UNKNOWN and job.current.scheduler_id is None  # type: ignore[union-attr]
    sup = env.supervisor()
    sup.cycle()  # before the deadline: waits, does not start again
    assert len(env.sched.jobs) == 1
    assert env.records.get(job.id).current.scheduler_id is None  # type: ignore[union-attr]
    env.clock.advance(40)
    env.cycles(sup, 6)
    job = env.records.get(job.id)
    assert len(env.sched.jobs) == 1 and job.current.scheduler_id == next(iter(env.sched.jobs))  # type: ignore[union-attr]
    assert job.closed and job.state is State.SUCCEEDED


def test_an_unknown_start_that_did_not_land_is_started_again_with_the_same_marker(env: Env) -> None:
    env.sched.control.inject("start", "unknown", landed=False)
    with pytest.raises(OutcomeUnknown):
        env.cluster.submit(env.spec("sleep", "20"))
    job = env.records.jobs()[0]
    sup = env.supervisor()
    env.clock.advance(40)
    env.cycles(sup, 5)
    job = env.records.get(job.id)
    assert [t.marker for t in env.sched.jobs.values()] == [job.current.marker]  # type: ignore[union-attr]
    starts = [i.status for i in job.intents if i.action is Action.START]
    assert starts == [IntentStatus.FAILED, IntentStatus.DONE]  # resolved by observation, then made again
    assert job.closed and job.state is State.SUCCEEDED


def test_polling_slower_than_the_polled_loss_window_is_refused() -> None:
    clock = FakeClock()
    sched = MemoryScheduler(clock, "slurm", min_job_age=60)
    with pytest.raises(ConfigError) as err:
        Supervisor(backend(sched), MemoryRecords(), clock=clock, poll=120)
    assert err.value.path == "poll"


def test_one_cycle_costs_a_constant_number_of_backend_calls(env: Env) -> None:
    calls = []
    for n in (1, 20):
        clock = FakeClock()
        sched = MemoryScheduler(clock, env.sched.shape, nodes=100)
        b = backend(sched)
        records = MemoryRecords()
        c = Cluster("memory", b, records, clock)
        ext = (Image("r/x:1"),) if sched.shape is Shape.KUBEFLOW else ()
        for _ in range(n):
            c.submit(JobSpec(command=("sleep", "1000"), extensions=ext))
        sup = Supervisor(b, records, clock=clock, owner="s", poll=10)
        sup.cycle()
        clock.advance(10)
        calls.append(sup.cycle().backend_calls)
    assert calls[0] == calls[1] <= 2


def test_a_watcher_backend_is_not_polled_in_steady_state() -> None:
    clock = FakeClock()
    sched = MemoryScheduler(clock, "kubeflow")
    b = backend(sched)
    records = MemoryRecords()
    Cluster("memory", b, records, clock).submit(JobSpec(command=("sleep", "1000"), extensions=(Image("r/x:1"),)))
    sup = Supervisor(b, records, clock=clock, owner="s", poll=10)
    sup.cycle()
    clock.advance(10)
    report = sup.cycle()
    assert report.observation_calls == 1 and report.observed == 0  # only the watch read


def test_a_second_supervisor_takes_over_after_the_lease_expires(env: Env) -> None:
    job_id = env.cluster.submit(env.spec("sleep", "1000"))
    a = env.supervisor("sup-a", lease_ttl=60)
    b = env.supervisor("sup-b", lease_ttl=60)
    a.cycle()
    assert env.records.get(job_id).lease.owner == "sup-a"  # type: ignore[union-attr]
    assert b.cycle().owned == 0
    env.clock.advance(61)  # sup-a died: it renews nothing
    assert b.cycle().owned == 1
    lease = env.records.get(job_id).lease
    assert lease is not None and lease.owner == "sup-b" and lease.token == 2


def test_an_overtaken_supervisor_cannot_write(env: Env) -> None:
    job_id = env.cluster.submit(env.spec("sleep", "1000"))
    a = env.supervisor("sup-a", lease_ttl=60)
    a.cycle()
    stale = env.records.get(job_id)
    env.clock.advance(61)
    env.supervisor("sup-b", lease_ttl=60).cycle()
    stale_token = stale.lease.token  # type: ignore[union-attr]
    fresh = env.records.get(job_id)
    fresh.closed = True
    with pytest.raises(Conflict):
        env.records.update(fresh, fence=stale_token)


def test_a_hold_rule_keeps_the_new_submission_under_the_supervisors_hold(env: Env) -> None:
    rules = {"rules": [{"cause": "timeout", "action": "hold"}]}
    job_id = env.cluster.submit(env.spec("sleep", "1000", limit=20), rules)
    sup = env.supervisor()
    env.cycles(sup, 5)
    job = env.records.get(job_id)
    assert len(job.submissions) == 2 and job.state is State.HELD and job.cause is Cause.HELD
    hold = job.active_holds()[0]
    assert hold.owner == "sup-a" and hold.submission == 2
    assert [e.cause for e in job.escalations] == [Cause.HELD] and hold.instance in job.escalations[0].reason
    assert env.cluster.operator.release(job_id) == []  # an operator does not lift the supervisor's hold
    assert env.cluster.operator.release(job_id, hold.instance) == [hold.instance]  # unless a human names it
    env.cycles(sup, 2)
    job = env.records.get(job_id)
    assert job.state is State.RUNNING and job.escalations[0].resolved_at is not None


def test_stop_is_followed_until_the_object_ended(env: Env) -> None:
    job_id = env.cluster.submit(env.spec("sleep", "1000"))
    sup = env.supervisor()
    env.cycles(sup, 1)
    env.sched.control.inject("stop_job", "unknown", landed=False)
    with pytest.raises(OutcomeUnknown):
        env.cluster.operator.stop(job_id)
    env.clock.advance(40)
    env.cycles(sup, 6)
    truth = {t.sid: t for t in env.sched.truth()}[env.sid(job_id)]
    assert truth.ended
    job = env.records.get(job_id)
    assert job.closed and job.state is State.CANCELLED


def test_an_unknown_shorter_than_the_bound_is_not_an_ending(env: Env) -> None:
    job_id = env.cluster.submit(env.spec("sleep", "500"))
    sup = env.supervisor()
    env.cycles(sup, 2)
    sid = env.sid(job_id)
    env.sched.control.blank(sid, 40)  # the queue loses the job for 40 s; the bound here is 60 s
    env.cycles(sup, 2)
    seen = env.records.get(job_id)
    assert seen.state is State.UNKNOWN and seen.current.unknown_since is not None  # type: ignore[union-attr]
    assert not seen.closed and not seen.decisions and not seen.escalations
    env.cycles(sup, 6)
    back = env.records.get(job_id)
    assert back.state is State.RUNNING and back.current.unknown_since is None  # type: ignore[union-attr]
    assert not back.closed and not back.decisions


def test_an_unknown_that_outlasts_the_bound_is_decided(env: Env) -> None:
    job_id = env.cluster.submit(env.spec("sleep", "5000"))
    sup = env.supervisor()
    env.cycles(sup, 2)
    env.sched.control.blank(env.sid(job_id), 1000)
    env.cycles(sup, 5)  # 50 s of unknown: still within the 60 s bound
    assert not env.records.get(job_id).decisions
    env.cycles(sup, 3)
    job = env.records.get(job_id)
    assert [d.cause for d in job.decisions] == [Cause.UNKNOWN] and job.closed  # unmatched: escalate


def test_an_unanswered_job_keeps_its_last_state_until_the_answer(env: Env) -> None:
    job_id = env.cluster.submit(env.spec("sleep", "500"))
    sup = env.supervisor()
    env.cycles(sup, 2)
    sid = env.sid(job_id)
    env.sched.control.lag(sid, 40)  # no answer for the job for 40 s; the bound here is 60 s
    env.cycles(sup, 2)
    seen = env.records.get(job_id)
    assert seen.state is State.RUNNING and seen.current.unknown_since is not None  # type: ignore[union-attr]
    assert not seen.closed and not seen.decisions and not seen.escalations
    assert any(e.kind == "unanswered" for e in env.records.events(job_id))
    env.cycles(sup, 6)
    back = env.records.get(job_id)
    assert back.state is State.RUNNING and back.current.unknown_since is None  # type: ignore[union-attr]
    assert not back.closed and not back.decisions


def test_an_unanswered_job_that_outlasts_the_bound_is_decided_as_unknown(env: Env) -> None:
    job_id = env.cluster.submit(env.spec("sleep", "5000"))
    sup = env.supervisor()
    env.cycles(sup, 2)
    env.sched.control.lag(env.sid(job_id), 1000)
    env.cycles(sup, 5)  # 50 s without an answer: still within the 60 s bound
    job = env.records.get(job_id)
    assert job.state is State.RUNNING and not job.decisions
    env.cycles(sup, 3)
    job = env.records.get(job_id)
    assert [d.cause for d in job.decisions] == [Cause.UNKNOWN] and job.closed  # unmatched: escalate


@pytest.mark.parametrize("shape", ["slurm", "kubeflow"])
def test_an_accounting_lag_delays_the_end_but_records_it_exactly(shape: str) -> None:
    clock = FakeClock()
    sched = MemoryScheduler(clock, shape, nodes=4, node_loss_window=60, accounting_lag=15)
    b = backend(sched)
    records = MemoryRecords()
    cluster = Cluster("memory", b, records, clock)
    ext = (Image("registry.example/x:1"),) if sched.shape is Shape.KUBEFLOW else ()
    job_id = cluster.submit(JobSpec(command=("sleep", "30", "exit", "3"), extensions=ext))
    sup = Supervisor(b, records, clock=clock, owner="sup-a", poll=5)
    seen_unanswered = False
    for _ in range(20):
        sup.cycle()
        clock.advance(5)
        job = records.get(job_id)
        assert job.state is not State.UNKNOWN
        seen_unanswered = seen_unanswered or (job.current is not None and job.current.unknown_since is not None)
    job = records.get(job_id)
    assert seen_unanswered
    assert job.outcome is not None and (job.state, job.cause, job.outcome.exit_code) == (State.FAILED, Cause.EXIT, 3)
    assert job.current.unknown_since is None  # type: ignore[union-attr]


def test_next_step_is_asked_again_only_for_records_that_changed(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    import dispatch.supervise.acting as module

    asked: list[str] = []
    real = module.next_step

    def counting(job, rules, facts, now, **kwargs):  # type: ignore[no-untyped-def]
        asked.append(job.id)
        return real(job, rules, facts, now, **kwargs)

    monkeypatch.setattr(module, "next_step", counting)
    ids = [env.cluster.submit(env.spec("sleep", "1000"), RESUBMIT) for _ in range(3)]
    sup = env.supervisor()
    env.cycles(sup, 3)  # started, opened, seen running
    asked.clear()
    report = sup.cycle()
    env.clock.advance(10)
    assert asked == [] and report.steps["nothing"] == 3 and report.observed == (3 if not sup.watcher else 0)
    env.sched.control.preempt(env.sid(ids[1]))
    env.cycles(sup, 3)
    assert set(asked) == {ids[1]}  # only the job whose record changed is asked again
    job = env.records.get(ids[1])
    assert [s.n for s in job.submissions] == [1, 2] and job.decisions[0].cause is Cause.PREEMPTED


def test_a_job_without_rules_adopts_the_supervisors_defaults_and_show_says_so(env: Env) -> None:
    """What ``dispatch show`` says of a job's rules is what the supervisor applies: a job submitted without
    rules is told the defaults of the supervisor that takes it apply; that supervisor writes its defaults into
    the record (a ``rules-adopted`` event), show names them and where they come from, and they decide."""
    from dispatch.cli.views import render_show
    from dispatch.rules import RuleSet

    job_id = env.cluster.submit(env.spec("sleep", "500"))
    own = env.cluster.submit(env.spec("sleep", "500"), RESUBMIT)
    before = render_show(env.records.get(job_id), env.records.events(job_id), env.clock.now())
    assert "  rules      none of its own: the default rules of the supervisor that takes the job apply" in before
    sup = env.supervisor(default_rules=RESUBMIT)
    env.cycles(sup, 1)
    job = env.records.get(job_id)
    assert job.rules == RuleSet.from_data(RESUBMIT).to_json()
    (adopted,) = [e for e in env.records.events(job_id) if e.kind == "rules-adopted"]
    assert adopted.data["by"] == "sup-a"
    text = render_show(job, env.records.events(job_id), env.clock.now())
    assert "  rules      1 rule: the default rules of sup-a, adopted " in text
    assert "  rules      1 rule, given at submission" in render_show(
        env.records.get(own), env.records.events(own), env.clock.now()
    )
    assert not [e for e in env.records.events(own) if e.kind == "rules-adopted"]  # its own rules stay
    env.sched.control.preempt(env.sid(job_id))
    env.cycles(sup, 2)
    job = env.records.get(job_id)
    assert [(d.rule, d.action) for d in job.decisions] == [("evicted", "resubmit")] and len(job.submissions) == 2


def test_a_supervisor_without_defaults_adopts_nothing(env: Env) -> None:
    job_id = env.cluster.submit(env.spec("sleep", "500"))
    env.cycles(env.supervisor(), 2)
    assert env.records.get(job_id).rules is None
    assert not [e for e in env.records.events(job_id) if e.kind == "rules-adopted"]
