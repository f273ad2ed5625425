"""Benchmark: the cost of one supervisor cycle as the number of supervised jobs grows.

    python bench/cycle.py --adapter memory --jobs 1,100,1000,10000 --json

prints ``{"results": [{"jobs", "backend_calls_per_cycle", "cycle_cpu_ms", ...}, ...]}``. Each row is the mean
over one lease-renewal period of steady-state cycles (every job running, nothing to decide), after the cycles
that take the leases. ``backend_calls_per_cycle`` counts the calls the supervisor makes to the backend (must not
grow with the number of jobs); ``cycle_cpu_ms`` is the process CPU time of a cycle, of which
``backend_cpu_ms`` is spent inside the backend (for the memory adapter: the simulated scheduler itself);
``writes_per_cycle`` counts record writes (lease renewals, spread over the renewal period).

Adapters add a row source to :data:`ADAPTERS`: a function ``(jobs) -> Setup`` that builds a backend with that
many running jobs recorded in a store (``--adapter slurm|kubeflow`` are added by those adapters' owners).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dispatch.actions import marker_for
from dispatch.clock import FakeClock
from dispatch.extensions import Image
from dispatch.records.memory import MemoryRecords
from dispatch.records.model import GateState, JobRecord, Submission
from dispatch.sim.conductor import parked_backend
from dispatch.spec import JobSpec
from dispatch.supervise import Supervisor

POLL = 10.0
LEASE_TTL = 120.0


@dataclass
class Setup:
    """A backend with ``jobs`` running jobs, the store recording them, and the fake clock."""

    backend: Any
    records: MemoryRecords
    clock: FakeClock


class Meter:
    """Counts and times backend calls (it stands where the simulator parks calls)."""

    def __init__(self) -> None:
        self.calls = 0
        self.seconds = 0.0

    def park(self, kind: str, point: str) -> None:
        self.calls += 1


def memory_setup(jobs: int, shape: str = "slurm") -> Setup:
    from dispatch.memory import MemoryScheduler, backend

    clock = FakeClock()
    sched = MemoryScheduler(clock, shape, nodes=max(jobs, 1), min_job_age=300.0)
    records = MemoryRecords()
    ext = (Image("registry.example/train:1"),) if shape == "kubeflow" else ()
    spec = JobSpec(command=("sleep", "1000000"), extensions=ext)
    now = clock.now()
    for i in range(jobs):
        job_id = f"b{i:06d}"
        marker = marker_for(job_id, 1)
        sid = sched.create(job_id, 1, marker, spec)
        sched.jobs[sid].gate_open = True
        records.create(
            JobRecord(
                job_id,
                "memory",
                spec,
                now,
                submissions=[Submission(1, marker, now, scheduler_id=sid, gate=GateState.OPEN)],
            )
        )
    sched.advance()  # every job starts
    return Setup(backend(sched), records, clock)


ADAPTERS: dict[str, Callable[[int], Setup]] = {
    "memory": memory_setup,
    "memory-kubeflow": lambda n: memory_setup(n, "kubeflow"),
}


def timed_backend(inner: Any, meter: Meter) -> Any:
    """``inner`` with every call counted and its CPU time summed, implementing the same interfaces."""
    view = parked_backend(inner, meter)  # type: ignore[arg-type]
    cls = type(view)
    for name in list(vars(cls)):
        fn = vars(cls)[name]
        if (
            not callable(fn)
            or name.startswith("__")
            or name in ("capabilities", "declarations", "extension_policy", "close")
        ):
            continue

        def wrap(f: Any) -> Any:
            def method(self: Any, *args: Any, **kwargs: Any) -> Any:
                t = time.process_time()
                try:
                    return f(self, *args, **kwargs)
                finally:
                    meter.seconds += time.process_time() - t

            method.__name__ = f.__name__
            return method

        setattr(cls, name, wrap(fn))
    return view


def measure(adapter: str, jobs: int) -> dict[str, Any]:
    setup = ADAPTERS[adapter](jobs)
    meter = Meter()
    b = timed_backend(setup.backend, meter)
    sup = Supervisor(
        b, setup.records, clock=setup.clock, owner="bench", poll=POLL, cluster="memory", lease_ttl=LEASE_TTL
    )
    for _ in range(2):  # take the leases, fold the first evidence
        sup.cycle()
        setup.clock.advance(POLL)
    period = int(LEASE_TTL / 2 / POLL)  # one lease-renewal period of cycles
    calls = writes = 0
    cpu = backend_cpu = 0.0
    for _ in range(period):
        meter.calls, meter.seconds = 0, 0.0
        t = time.process_time()
        report = sup.cycle()
        cpu += time.process_time() - t
        backend_cpu += meter.seconds
        calls += meter.calls
        writes += report.writes
        if report.owned != jobs:
            raise SystemExit(f"the supervisor owned {report.owned} of {jobs} jobs")
        setup.clock.advance(POLL)
    return {
        "adapter": adapter,
        "jobs": jobs,
        "backend_calls_per_cycle": calls / period,
        "cycle_cpu_ms": round(cpu / period * 1000, 3),
        "backend_cpu_ms": round(backend_cpu / period * 1000, 3),
        "writes_per_cycle": round(writes / period, 2),
        "cycles": period,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--adapter", default="memory", choices=sorted(ADAPTERS))
    p.add_argument("--jobs", default="1,100,1000,10000", help="comma-separated job counts")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    try:
        counts = [int(x) for x in args.jobs.split(",") if x]
    except ValueError:
        p.error(f"--jobs must be comma-separated whole numbers, got {args.jobs!r}")
    if not counts or any(n < 1 for n in counts):
        p.error("--jobs needs at least one count, each >= 1")
    results = [measure(args.adapter, n) for n in counts]
    if args.json:
        print(json.dumps({"results": results}, indent=2))
    else:
        for r in results:
            print(
                f"{r['jobs']:>6} jobs: {r['backend_calls_per_cycle']:.1f} backend calls/cycle, "
                f"{r['cycle_cpu_ms']:.1f} ms CPU/cycle ({r['backend_cpu_ms']:.1f} ms in the backend), "
                f"{r['writes_per_cycle']} writes/cycle"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
