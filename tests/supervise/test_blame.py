"""Bad nodes: blame, exclusion by rule, suspects across jobs, and the escalation of an unrunnable resubmission."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dispatch.capabilities import Capability
from dispatch.clock import FakeClock, SystemClock
from dispatch.cluster import Cluster
from dispatch.errors import ConfigError
from dispatch.extensions import Image
from dispatch.memory import MemoryScheduler, Shape, backend
from dispatch.outcome import Cause, State
from dispatch.records import MemoryRecords
from dispatch.records.model import Action
from dispatch.records.nodes import NodeBlame
from dispatch.rules import RuleSet
from dispatch.spec import JobSpec
from dispatch.spi import Backend
from dispatch.supervise import Supervisor
from dispatch.supervise.blame import BLAMING_CAUSES, PRUNE_EVERY, SuspectPolicy, blames_of, suspects

EXCLUDING = {
    "rules": [
        {
            "name": "lost",
            "cause": ["node-lost", "launch-failed"],
            "action": "resubmit",
            "limit": 3,
            "excludeBlamedNodes": True,
        }
    ]
}
PLAIN = {"rules": [{"name": "lost", "cause": ["node-lost"], "action": "resubmit", "limit": 3}]}


@dataclass
class Env:
    clock: FakeClock
    sched: MemoryScheduler
    backend: Backend
    records: MemoryRecords
    cluster: Cluster

    def spec(self, nodes: int = 1) -> JobSpec:
        ext = (Image("registry.example/x:1"),) if self.sched.shape is Shape.KUBEFLOW else ()
        return JobSpec(command=("train",), nodes=nodes, extensions=ext)

    def supervisor(self, **kw: object) -> Supervisor:
        return Supervisor(self.backend, self.records, clock=self.clock, owner="sup", poll=10, **kw)  # type: ignore[arg-type]

    def nodes_of(self, job_id: str, n: int) -> list[str]:
        sub = self.records.get(job_id).submission(n)
        return [node for ex in sub.executions for node in ex.nodes]

    def excluded(self, job_id: str, n: int) -> list[str]:
        job = self.records.get(job_id)
        starts = [i for i in job.intents if i.action is Action.START and i.submission == n]
        return list(starts[-1].args.get("exclude", [])) if starts else []

    def cycles(self, sup: Supervisor, n: int) -> None:
        for _ in range(n):
            sup.cycle()
            self.clock.advance(10)

    def lose(self, sup: Supervisor, job_id: str) -> str:
        """Lose the node the job's current submission runs on and cycle until the supervisor resubmits."""
        self.cycles(sup, 2)
        sub = self.records.get(job_id).current
        assert sub is not None and sub.executions and sub.executions[-1].nodes, "the job should run"
        node = sub.executions[-1].nodes[0]
        self.sched.control.lose_node(node)
        self.cycles(sup, 10)
        return node


@pytest.fixture(params=["slurm", "kubeflow"])
def env(request: pytest.FixtureRequest) -> Iterator[Env]:
    clock = FakeClock()
    sched = MemoryScheduler(clock, request.param, nodes=3, min_job_age=300, node_loss_window=30)
    b = backend(sched)
    records = MemoryRecords()
    yield Env(clock, sched, b, records, Cluster("memory", b, records, clock))


def test_the_blaming_causes_are_node_lost_launch_failed_and_stalled() -> None:
    assert {Cause.NODE_LOST, Cause.LAUNCH_FAILED, Cause.STALLED} == BLAMING_CAUSES
    assert Cause.NOT_LAUNCHABLE not in BLAMING_CAUSES  # the job's own: a program, directory or image missing


def test_a_resubmission_avoids_the_node_its_rule_blamed(env: Env) -> None:
    job = env.cluster.submit(env.spec(), EXCLUDING)
    sup = env.supervisor()
    lost = env.lose(sup, job)
    assert env.records.get(job).submission(1).outcome.cause is Cause.NODE_LOST  # type: ignore[union-attr]
    assert env.excluded(job, 2) == [lost]
    env.sched.control.restore_node(lost)  # back, and free: only the exclusion keeps the job off it
    env.cycles(sup, 3)
    ran = env.nodes_of(job, 2)
    assert ran and lost not in ran
    assert [b.node for b in env.records.node_blames("memory", 0.0)] == [lost]


def test_without_the_option_nothing_is_excluded_but_the_blame_is_recorded(env: Env) -> None:
    job = env.cluster.submit(env.spec(), PLAIN)
    sup = env.supervisor()
    lost = env.lose(sup, job)
    assert env.excluded(job, 2) == []
    blames = env.records.node_blames("memory", 0.0)
    assert [(b.node, b.job_id, b.cause) for b in blames] == [(lost, job, Cause.NODE_LOST)]


def test_a_node_blamed_by_two_jobs_is_a_suspect_excluded_from_every_resubmission(env: Env) -> None:
    policy = SuspectPolicy(after=2, window=3600, ttl=3600)
    sup = env.supervisor(suspects=policy)
    first = env.cluster.submit(env.spec(), PLAIN)
    lost = env.lose(sup, first)
    assert env.excluded(first, 2) == []  # blamed once: not a suspect yet
    env.sched.control.restore_node(lost)
    second = env.cluster.submit(env.spec(), PLAIN)  # the node is free again, and first in line
    env.cycles(sup, 2)
    assert env.nodes_of(second, 1) == [lost]
    env.sched.control.lose_node(lost)
    env.cycles(sup, 10)
    env.sched.control.restore_node(lost)
    assert {b.job_id for b in env.records.node_blames("memory", 0.0)} == {first, second}
    (suspect,) = sup.exclusions.current_suspects(env.clock.now())
    assert suspect.node == lost and len(suspect.blames) == 2
    # the second job's rule does not exclude blamed nodes; its resubmission avoids the suspect all the same
    assert env.excluded(second, 2) == [lost]
    env.cycles(sup, 3)
    assert lost not in env.nodes_of(second, 2)
    # until its time to live runs out
    env.clock.advance(3600)
    assert sup.exclusions.current_suspects(env.clock.now()) == []


def test_a_cleared_node_is_no_suspect(env: Env) -> None:
    sup = env.supervisor(suspects=SuspectPolicy(after=1))
    env.records.add_node_blames(
        [_b("node1", "a", env.clock.now(), "memory"), _b("node1", "b", env.clock.now(), "memory")]
    )
    assert [s.node for s in sup.exclusions.current_suspects(env.clock.now())] == ["node1"]
    assert env.records.clear_node_blames("memory", "node1") == 2
    assert sup.exclusions.current_suspects(env.clock.now()) == []


def test_blames_past_the_window_and_time_to_live_are_pruned_by_the_supervisor(env: Env) -> None:
    """Blames too old to count are deleted from the records, by the supervisor's cycles, at most hourly."""
    policy = SuspectPolicy(after=2, window=7200, ttl=7200)
    sup = env.supervisor(suspects=policy)
    job = env.cluster.submit(env.spec(), PLAIN)
    env.lose(sup, job)
    (blame,) = env.records.node_blames("memory", 0.0)
    old = NodeBlame("memory", "gone-node", "j-old", "1.1.0", blame.cause, blame.at - 14401)
    other = dataclasses.replace(old, cluster="elsewhere")
    env.records.add_node_blames([old, other])
    env.clock.advance(PRUNE_EVERY)
    env.cycles(sup, 1)
    assert env.records.node_blames("memory", 0.0) == [blame]  # the one that can still count stays
    assert env.records.node_blames("elsewhere", 0.0) == [other]  # another cluster's are its supervisor's
    env.records.add_node_blames([old])
    env.cycles(sup, 1)
    assert old in env.records.node_blames("memory", 0.0), "not again within the hour"


def test_a_resubmission_the_exclusions_make_unrunnable_is_escalated(env: Env) -> None:
    job = env.cluster.submit(env.spec(nodes=3), EXCLUDING)
    sup = env.supervisor()
    env.lose(sup, job)
    rec = env.records.get(job)
    assert rec.closed and len(rec.submissions) == 1, "no submission that could never start"
    assert rec.escalations[-1].cause is Cause.NODE_LOST
    assert "could never start" in rec.escalations[-1].reason


def test_a_start_made_again_keeps_its_exclusion(env: Env) -> None:
    job = env.cluster.submit(env.spec(), EXCLUDING)
    sup = env.supervisor()
    env.cycles(sup, 2)
    node = env.nodes_of(job, 1)[0]
    env.sched.control.inject("start", "unavailable")  # the resubmission's start fails for certain, once
    env.sched.control.lose_node(node)
    env.cycles(sup, 12)
    starts = [i for i in env.records.get(job).intents if i.action is Action.START and i.submission == 2]
    assert len(starts) == 2 and all(i.args.get("exclude") == [node] for i in starts)
    assert node not in env.nodes_of(job, 2)


def test_a_rule_that_excludes_nodes_is_refused_at_load_where_the_cluster_cannot(tmp_path: Path) -> None:
    from dispatch.local.backend import LocalBackend

    rules = RuleSet.from_data(EXCLUDING)
    assert rules.rules[0].exclude_blamed_nodes and rules.to_json()["rules"][0]["excludeBlamedNodes"] is True
    local = LocalBackend(tmp_path / "state", SystemClock())
    try:
        caps = local.capabilities()
        assert caps[Capability.NODE_EXCLUSION].answer.value == "no"
        with pytest.raises(ConfigError, match=r"rules\[0\]\.excludeBlamedNodes.*NodeExclusion is no.*one host"):
            rules.check_against(local, caps)
        with pytest.raises(ConfigError, match=r"excludeBlamedNodes"):
            Supervisor(local, MemoryRecords(), clock=SystemClock(), default_rules=EXCLUDING)
    finally:
        local.close()


def test_the_option_is_checked_when_rules_are_read() -> None:
    with pytest.raises(ConfigError, match=r"rules\[0\]\.excludeBlamedNodes.*true or false"):
        RuleSet.from_data({"rules": [{"cause": "node-lost", "action": "resubmit", "excludeBlamedNodes": "yes"}]})
    with pytest.raises(ConfigError, match=r"only a resubmit or hold rule.*not requeue"):
        RuleSet.from_data({"rules": [{"cause": "node-lost", "action": "requeue", "excludeBlamedNodes": True}]})


def _b(node: str, job: str, at: float, cluster: str = "c", execution: str = "") -> NodeBlame:
    return NodeBlame(cluster, node, job, execution or f"{job}.1", Cause.NODE_LOST, at)


def test_suspects_need_the_count_within_the_window_and_last_their_time_to_live() -> None:
    policy = SuspectPolicy(after=2, window=100, ttl=50)
    assert suspects([_b("n1", "a", 0)], policy, 10) == []
    assert suspects([_b("n1", "a", 0), _b("n1", "b", 150)], policy, 160) == []  # too far apart
    found = suspects([_b("n1", "a", 0), _b("n1", "b", 90), _b("n2", "c", 90)], policy, 100)
    assert [(s.node, s.until, len(s.blames)) for s in found] == [("n1", 140, 2)]
    assert suspects([_b("n1", "a", 0), _b("n1", "b", 90)], policy, 140) == []  # the time to live ran out
    assert suspects([_b("n1", "a", 0), _b("n1", "b", 90)], SuspectPolicy(after=0), 100) == []  # turned off
    assert found[0].to_json()["count"] == 2


def test_suspects_count_one_jobs_repeated_executions_once_and_the_latest_run_decides() -> None:
    policy = SuspectPolicy(after=3, window=10, ttl=100)
    # job a's three executions on n1 within the window (a resubmit rule retrying it) are one job: no suspect
    repeated = [_b("n1", "a", t, execution=f"{n}.100{n}.0") for n, t in [(1, 0), (2, 5), (3, 9)]]
    assert suspects(repeated, policy, 20) == []
    # a run of three distinct jobs makes one, counted from the latest such run
    blames = [*repeated, *[_b("n1", j, t) for j, t in [("b", 200), ("c", 205), ("d", 209)]]]
    (s,) = suspects(blames, policy, 250)
    assert s.until == 309 and [b.job_id for b in s.blames] == ["b", "c", "d"]
    # the run that decides may mix one job's repeats with other jobs: only the distinct jobs count
    mixed = [_b("n1", "a", 300, execution="1.1.0"), _b("n1", "a", 302, execution="2.2.0"), _b("n1", "b", 305)]
    assert suspects(mixed, policy, 306) == []
    (s,) = suspects([*mixed, _b("n1", "c", 308)], policy, 309)
    assert s.until == 408 and len({b.job_id for b in s.blames}) == 3


def test_one_job_alone_never_makes_a_suspect_whatever_the_policy_says() -> None:
    one = [_b("n1", "a", t, execution=f"{t}.{t}.0") for t in (0, 1, 2, 3)]
    assert suspects(one, SuspectPolicy(after=1), 10) == []
    assert [s.node for s in suspects([*one, _b("n1", "b", 4)], SuspectPolicy(after=1), 10)] == ["n1"]
    # the simulator's planted bug counts blames, as the product once did: then one job makes a suspect
    assert [s.node for s in suspects(one, SuspectPolicy(after=3), 10, distinct_jobs=False)] == ["n1"]


def test_a_jobs_own_launch_failure_blames_no_node() -> None:
    from dispatch.outcome import Evidence, Outcome
    from dispatch.records.model import ExecutionRecord, JobRecord, Submission

    def ended(cause: Cause) -> JobRecord:
        out = Outcome(State.FAILED, cause, Evidence("sacct", 10.0), exit_code=125)
        sub = Submission(1, "dsp-j-1", 0.0, scheduler_id="101", outcome=out)
        sub.executions.append(ExecutionRecord("1.101.0", 0, out, 1.0, 2.0, ["node1", "node2"]))
        return JobRecord("j", "memory", JobSpec(command=("trian.py",)), 0.0, submissions=[sub])

    assert blames_of(ended(Cause.NOT_LAUNCHABLE), "memory") == []
    assert [b.node for b in blames_of(ended(Cause.LAUNCH_FAILED), "memory")] == ["node1", "node2"]


def test_stalls_by_a_jobs_own_bound_make_no_suspect_while_lost_nodes_do() -> None:
    """Three jobs of one sweep that go quiet past their own ``stalledAfter`` on one node blame it (each job's own
    resubmission avoids it) but make no suspect every job avoids; the scheduler's evidence (the node lost under
    three jobs) does."""
    from dispatch.cluster import batch_job_id

    ids = [batch_job_id("sweep-1", i, 0) for i in range(3)]

    def blames(cause: Cause) -> list[NodeBlame]:
        return [NodeBlame("c", "node-7", job, f"{job}/1/0", cause, 100.0 + i) for i, job in enumerate(ids)]

    assert suspects(blames(Cause.STALLED), SuspectPolicy(), now=200.0) == []
    (lost,) = suspects(blames(Cause.NODE_LOST), SuspectPolicy(), now=200.0)
    assert lost.node == "node-7" and len(lost.blames) == 3
