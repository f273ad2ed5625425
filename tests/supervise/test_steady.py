"""The steady path decides exactly as the whole way.

Two identical worlds (memory scheduler, records, a supervisor each) live through the same seeded events:
restarts in place, preemptions, holds (dispatch's and an admin's), exits, spurious unknowns and accounting lags,
on more jobs than the nodes run at once. One
supervisor lets settled quiet jobs take the steady path, the other sends every job the whole way
(``steady=False``). After every cycle the two stores must hold the same records and the two cycle reports must
agree; a steady path that missed a change (a restart that keeps the job running, a cause that changed under
the same state, a refresh due) would leave one record behind.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from dispatch.clock import FakeClock
from dispatch.cluster import Cluster
from dispatch.extensions import Image
from dispatch.memory import MemoryScheduler, Shape, backend
from dispatch.records import MemoryRecords
from dispatch.spec import JobSpec
from dispatch.supervise import Supervisor

RULES = {
    "rules": [
        {"name": "evicted", "cause": ["preempted", "node-lost"], "action": "resubmit", "limit": 2},
        {"name": "flaky", "cause": "exit", "exitCodes": [75], "action": "resubmit", "limit": 1},
    ]
}


class World:
    def __init__(self, shape: str, steady: bool) -> None:
        self.clock = FakeClock()
        self.sched = MemoryScheduler(self.clock, shape, nodes=20, min_job_age=300, node_loss_window=60)
        self.records = MemoryRecords()
        b = backend(self.sched)
        self.cluster = Cluster("memory", b, self.records, self.clock)
        ids = itertools.count()
        self.cluster.operator.new_id = lambda now: f"job{next(ids):03d}"  # the same ids in both worlds
        instances = itertools.count()
        self.cluster.operator.new_instance = lambda: f"h{next(instances)}"
        self.sup = Supervisor(
            b, self.records, clock=self.clock, owner="sup", poll=10, lease_ttl=40, refresh=30, steady=steady
        )
        ext = (Image("registry.example/x:1"),) if self.sched.shape is Shape.KUBEFLOW else ()
        for i in range(30):
            spec = JobSpec(command=("sleep", str(400 + 37 * i)), extensions=ext)
            self.cluster.submit(spec, RULES)
            self.clock.advance(1.0)

    def event(self, rng: random.Random) -> None:
        c = self.sched.control
        running = sorted(c.running())
        waiting = sorted(j.sid for j in self.sched.jobs.values() if j.waiting and not j.deleted)
        kind = rng.choice(["restart", "preempt", "exit", "admin", "hold", "blank", "lag", "none"])
        if kind == "admin" and waiting:
            sid = rng.choice(waiting)
            if self.sched.jobs[sid].admin_held:
                c.admin_release(sid)
            else:
                c.admin_hold(sid)
        elif kind == "hold" and waiting:
            job_id = self.sched.jobs[rng.choice(waiting)].job_id
            if self.records.get(job_id).active_holds():
                self.cluster.operator.release(job_id)
            else:
                self.cluster.operator.hold(job_id)
        elif running and kind != "none":
            sid = rng.choice(running)
            if kind == "restart":
                c.native_restart(sid)
            elif kind == "preempt":
                c.preempt(sid)
            elif kind == "exit":
                c.finish(sid, rng.choice([0, 3, 75]))
            elif kind == "blank":
                c.blank(sid, rng.choice([5.0, 25.0]))
            elif kind == "lag":
                c.lag(sid, 15.0)

    def cycle(self) -> dict[str, Any]:
        report = self.sup.cycle().to_json()
        self.clock.advance(10.0)
        return report

    def state(self) -> list[dict[str, Any]]:
        return [j.to_json() for j in self.records.jobs(active_only=False)]


@pytest.mark.parametrize("shape", ["slurm", "kubeflow"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_steady_path_leaves_the_same_records_as_the_whole_way(shape: str, seed: int) -> None:
    steady, whole = World(shape, steady=True), World(shape, steady=False)
    rng_a, rng_b = random.Random(seed), random.Random(seed)
    quiet_cycles = 0
    for n in range(80):
        for _ in range(rng_a.randint(0, 2)):
            steady.event(rng_a)
        for _ in range(rng_b.randint(0, 2)):
            whole.event(rng_b)
        a, b = steady.cycle(), whole.cycle()
        assert a == b, f"cycle {n}: the reports differ"
        assert steady.state() == whole.state(), f"cycle {n}: the records differ"
        quiet_cycles += a["steps"].get("nothing", 0)
    assert quiet_cycles > 500  # the steady path was taken, many times
    assert any(j["closed"] for j in steady.state()) and any(len(j["submissions"]) > 1 for j in steady.state())
