"""Records made by real runs, for the dashboard's tests, its benchmark and its screenshots.

Each scenario drives a real adapter and (where recovery is shown) the real supervisor, and leaves its records in
the store it is given; nothing here writes a record by hand. The memory adapter runs under a
:class:`~dispatch.clock.FakeClock` that starts ``back`` seconds before now, so the story lands in the recent past
of the wall clock and shows at its true scale.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace

from dispatch.clock import FakeClock
from dispatch.cluster import Cluster
from dispatch.memory import MemoryScheduler, backend
from dispatch.records.base import Records
from dispatch.records.model import JobRecord
from dispatch.spec import JobSpec
from dispatch.supervise import Supervisor

EVICTED = {"rules": [{"name": "evicted", "cause": ["preempted", "node-lost"], "action": "resubmit", "limit": 3}]}
"""Resubmit on preemption or node loss, three times at most."""
LONG = ("sleep", "86400")
"""To the memory scheduler: run for a day (until preempted, timed out or finished by the scenario)."""


@dataclass
class Memory:
    """A memory-adapter cluster named ``cluster`` over ``records``, with a supervisor, all on one fake clock."""

    clock: FakeClock
    sched: MemoryScheduler
    cluster: Cluster
    supervisor: Supervisor
    records: Records

    def cycles(self, n: int, step: float = 10.0) -> None:
        for _ in range(n):
            self.supervisor.cycle()
            self.clock.advance(step)

    def until_running(self, job_id: str, step: float = 10.0) -> None:
        """Cycle until the job's current submission runs (the scheduler's truth)."""
        for _ in range(60):
            sid = self.records.get(job_id).current
            if sid is not None and sid.scheduler_id is not None:
                truth = self.sched.jobs.get(sid.scheduler_id)
                if truth is not None and truth.executions and truth.current.live:
                    self.cycles(1, step)
                    return
            self.cycles(1, step)
        raise AssertionError(f"job {job_id} did not start running")

    def sid(self, job_id: str) -> str:
        cur = self.records.get(job_id).current
        assert cur is not None and cur.scheduler_id is not None
        return cur.scheduler_id


def memory(records: Records, *, cluster: str = "sim", back: float = 3600.0, owner: str = "supervisor-a") -> Memory:
    clock = FakeClock(time.time() - back)
    sched = MemoryScheduler(clock, "slurm", nodes=4, min_job_age=300, node_loss_window=60)
    b = backend(sched)
    c = Cluster(cluster, b, records, clock)
    sup = Supervisor(b, records, clock=clock, owner=owner, poll=10, cluster=c)
    return Memory(clock, sched, c, sup, records)


def preempted_then_resubmitted(m: Memory, *, name: str = "train-resnet", preemptions: int = 1) -> str:
    """A job preempted ``preemptions`` times, each time resubmitted by the supervisor's rule, then succeeding."""
    rules = EVICTED
    if preemptions > 3:
        rules = {"rules": [{**EVICTED["rules"][0], "limit": preemptions}]}
    job_id = m.cluster.submit(JobSpec(command=LONG, nodes=2, name=name), rules)
    for _ in range(preemptions):
        m.until_running(job_id, 20)
        m.cycles(3, 20)
        m.sched.control.preempt(m.sid(job_id))
        m.cycles(2, 15)
    m.until_running(job_id)
    m.cycles(6, 20)
    m.sched.control.finish(m.sid(job_id), 0)
    m.cycles(3)
    return job_id


def held_after_timeout(m: Memory, *, name: str = "eval-sweep") -> str:
    """A job that timed out; the supervisor's hold rule resubmits it under a hold and escalates to humans."""
    rules = {"rules": [{"name": "park-on-timeout", "cause": "timeout", "action": "hold"}]}
    job_id = m.cluster.submit(JobSpec(command=LONG, time_limit=60, name=name), rules)
    m.cycles(12, 10)
    return job_id


def escalated_after_limit(m: Memory, *, name: str = "flaky-node-job") -> str:
    """A job preempted more often than its rule allows: the supervisor gives up and escalates."""
    job_id = m.cluster.submit(JobSpec(command=LONG, name=name), EVICTED)
    for _ in range(4):
        m.until_running(job_id)
        m.cycles(2, 20)
        m.sched.control.preempt(m.sid(job_id))
        m.cycles(2, 10)
    return job_id


def suspended_by_an_operator(m: Memory, *, name: str = "paused-finetune") -> str:
    """A running job an administrator suspended (``scontrol suspend``): it reads running, cause suspended."""
    job_id = m.cluster.submit(JobSpec(command=LONG, name=name))
    m.until_running(job_id)
    m.sched.control.suspend(m.sid(job_id))
    m.cycles(2, 10)
    return job_id


def many(records: Records, templates: list[str], n: int, *, span: float = 86400.0, seed: int = 7) -> list[str]:
    """``n`` more jobs for scale tests: copies of the recorded jobs ``templates`` (each made by a real run) under
    fresh ids, created over the last ``span`` seconds, with their submissions and events shifted along.
    Returns the new ids, oldest first."""
    import random

    from dispatch.records.model import Event

    rng = random.Random(seed)
    now = time.time()
    sources = [(records.get(t), records.events(t)) for t in templates]
    ids: list[str] = []
    for k in range(n):
        job, events = sources[k % len(sources)]
        at = now - span + span * k / max(n, 1) + rng.random()
        shift = at - job.created_at
        doc = job.to_json()
        text = json.dumps(doc)
        copy = JobRecord.from_json(json.loads(text.replace(job.id, f"{int(at):08x}{k:06x}")))
        copy.created_at += shift
        copy.updated_at += shift
        for sub in copy.submissions:
            sub.created_at += shift
            for e in sub.executions:
                e.started_at = e.started_at + shift if e.started_at is not None else None
                e.ended_at = e.ended_at + shift if e.ended_at is not None else None
        copy.decisions = [replace(d, at=d.at + shift) for d in copy.decisions]
        copy.escalations = [replace(x, at=x.at + shift) for x in copy.escalations]
        copy.lease = None
        copy.version = 0
        records.create(copy, [Event(copy.id, e.at + shift, e.kind, e.data) for e in events])
        ids.append(copy.id)
    return ids
