"""Benchmark: the cost of one supervisor cycle as the number of supervised jobs grows.

    python bench/cycle.py --adapter memory --jobs 1000,10000 --closed 0,100000 --store memory,sqlite,postgres --json

prints ``{"results": [{"store", "jobs", "closed", "backend_calls_per_cycle", "cycle_cpu_ms", ...}, ...]}``, one
row per (store, jobs, closed). Each row is the mean over one lease-renewal period of steady-state cycles (every
job running, nothing to decide), after the cycles that take the leases. The cycles run as ``dispatch supervise``
runs them: the service's garbage-collector policy (:class:`dispatch.supervise.collector.Collector`) runs after
each one, and its time counts in the cycle's. ``--collector default`` runs them with Python's default collector
instead (what the service did before it had a policy), for comparison. ``backend_calls_per_cycle`` counts the
calls the supervisor makes to the backend (must not grow with the number of jobs); ``cycle_cpu_ms`` is the
process CPU time of a cycle, of which ``backend_cpu_ms`` is spent inside the backend (for the memory adapter: the
simulated scheduler itself) and ``supervisor_cpu_ms`` is the rest; ``record_writes_per_cycle`` counts record
writes (the batched lease renewal: one write per renewal period). ``closed`` closed jobs of the same cluster sit
in the store beside the running ones (history the supervisor must not pay for). The PostgreSQL store uses
``$DISPATCH_TEST_POSTGRES`` (default: the test database on 127.0.0.1), in a schema it drops after.

``--repeat N`` measures each row N times (a fresh setup each) and keeps the run with the least CPU (other work on
a shared machine only adds to a process's CPU time), listing all of them in ``cycle_cpu_ms_runs``.

``--instructions`` also measures each row under ``valgrind --tool=callgrind`` (a child process per row, the
count switched on only around the measured cycles) and adds ``cycle_instructions``: the instructions a cycle
executes, a figure that does not move with the load of a shared machine (CPU time does: cache misses and the
neighbours' work are in it). It needs valgrind and is slow (about 50x). ``--cache-sim BYTES`` (with
``--instructions``) also simulates a last-level cache of that size (16-way, 64-byte lines; this machine's L2 is
4 MiB per core: ``lscpu``) and adds ``cycle_ll_misses``: the cycle's memory reads and writes that miss it, the
cost that CPU time shows and instructions do not.

``--phases`` adds ``phase_cpu_ms``: the cycle's CPU time by phase (the supervisor's own steps, each called once
a cycle, timed around the call): ``heads`` (the store's heads and the liveness write), ``divide`` (ours and
takeable), ``steady`` (marking the steady jobs), ``load`` (records read), ``order``, ``observe`` (building the
batched call and reading its answer, less ``backend``: the backend's own work), ``per_job`` (the loop over the
jobs: the steady comparison, folds, decisions; what is left of the cycle) and ``collector`` (the collector's
work after the cycle). Comparing two sizes phase by phase shows whether one step grows faster than the others.

Adapters add a row source to :data:`ADAPTERS`: a function ``(jobs) -> Setup`` that builds a backend with that
many running jobs recorded in a store (``--adapter slurm|kubeflow`` are added by those adapters' owners).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from dispatch.actions import marker_for
from dispatch.clock import FakeClock
from dispatch.extensions import Image
from dispatch.records.memory import MemoryRecords
from dispatch.records.model import GateState, JobRecord, Submission
from dispatch.sim.conductor import parked_backend
from dispatch.spec import JobSpec
from dispatch.supervise import Supervisor
from dispatch.supervise.collector import Collector

POLL = 10.0
LEASE_TTL = 120.0


@dataclass
class Setup:
    """A backend with ``jobs`` running jobs, the store recording them, and the fake clock."""

    backend: Any
    records: Any
    clock: FakeClock


POSTGRES_DSN = os.environ.get("DISPATCH_TEST_POSTGRES", "host=127.0.0.1 dbname=dispatch_test user=postgres")


def open_store(kind: str, scratch: str) -> Any:
    """A fresh, empty store of ``kind`` (memory, sqlite or postgres)."""
    if kind == "memory":
        return MemoryRecords()
    if kind == "sqlite":
        from dispatch.records import SQLiteRecords

        return SQLiteRecords(Path(scratch) / f"cycle-{time.monotonic_ns()}.db")
    from dispatch.records.postgres import PostgresRecords

    return PostgresRecords(POSTGRES_DSN, schema=f"bench_cycle_{os.getpid()}_{time.monotonic_ns() % 10**9}")


def add_closed(records: Any, count: int, at: float) -> None:
    """``count`` closed jobs (ended, with their submission and outcome) of the ``memory`` cluster. SQL stores get
    them in one transaction: the history is the setting here, not what is measured."""
    from dispatch.outcome import Cause, Evidence, Outcome, State

    spec = JobSpec(command=("python", "train.py", "--epochs", "10"), name="history")
    jobs = []
    for i in range(count):
        job_id = f"h{i:07d}"
        sub = Submission(1, marker_for(job_id, 1), at, scheduler_id=f"{i + 10**7}", gate=GateState.OPEN)
        sub.outcome = Outcome(State.SUCCEEDED, Cause.EXIT, Evidence("bench", at), exit_code=0)
        jobs.append(JobRecord(job_id, "memory", spec, at - 1.0, submissions=[sub], closed=True, version=1))
    if isinstance(records, MemoryRecords):
        for j in jobs:
            records.create(j)
        return
    from dispatch.records.model import ROW_COLUMNS, row_values

    rows = [(j.id, *row_values(j)) for j in jobs]
    with records._tx() as db:  # bench-only bulk load
        if type(records).__name__ == "SQLiteRecords":
            marks = ",".join("?" * len(rows[0])) if rows else ""
            db.executemany(f"INSERT INTO jobs (id, {ROW_COLUMNS}) VALUES ({marks})", rows)
        else:
            marks = ",".join(["%s"] * len(rows[0])) if rows else ""
            db.executemany(records._q("INSERT INTO {s}.jobs (id, " + ROW_COLUMNS + ") VALUES (" + marks + ")"), rows)


class Meter:
    """Counts and times backend calls (it stands where the simulator parks calls)."""

    def __init__(self) -> None:
        self.calls = 0
        self.seconds = 0.0

    def park(self, kind: str, point: str) -> None:
        self.calls += 1

    def current(self) -> None:
        """The worker a call is made for, which the simulator's network faults ask: none here."""
        return None


class Phases:
    """CPU time of a supervisor's once-a-cycle steps (``--phases``), each timed around its call."""

    STEPS = {
        "heads": ("records", ("to_supervise", "peers")),
        "divide": ("sup", ("_divide",)),
        "steady": ("sup", ("_steady",)),
        "load": ("sup", ("_load",)),
        "order": ("sup", ("_in_order",)),
        "observe": ("sup", ("_observe",)),
    }

    def __init__(self, sup: Supervisor) -> None:
        self.seconds: dict[str, float] = dict.fromkeys(self.STEPS, 0.0)
        for phase, (owner, names) in self.STEPS.items():
            target = sup.records if owner == "records" else sup
            for name in names:
                setattr(target, name, self._timed(phase, getattr(target, name)))

    def _timed(self, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[phase] += time.process_time() - t

        return timed

    def row(self, cpu: float, backend: float, collector: float, cycles: int) -> dict[str, float]:
        """Milliseconds a cycle by phase; ``observe`` less the backend's time, ``per_job`` what is left."""
        own = dict(self.seconds, observe=self.seconds["observe"] - backend)
        out = own | {"backend": backend, "collector": collector}
        out["per_job"] = cpu - sum(out.values())
        return {k: round(v / cycles * 1000, 3) for k, v in out.items()}


def memory_setup(jobs: int, shape: str = "slurm", records: Any = None) -> Setup:
    from dispatch.memory import MemoryScheduler, backend

    clock = FakeClock()
    sched = MemoryScheduler(clock, shape, nodes=max(jobs, 1), min_job_age=300.0)
    records = MemoryRecords() if records is None else records
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


ADAPTERS: dict[str, Callable[..., Setup]] = {
    "memory": memory_setup,
    "memory-kubeflow": lambda n, records=None: memory_setup(n, "kubeflow", records),
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


def measure(
    adapter: str,
    jobs: int,
    store: str = "memory",
    closed: int = 0,
    scratch: str = ".",
    count: bool = False,
    policy: str = "service",
    phases: bool = False,
) -> dict[str, Any]:
    """One row. ``count``: this process runs under callgrind, whose count is switched on around the measured
    cycles only (see :func:`instructions`)."""
    records = open_store(store, scratch)
    try:
        if closed:
            add_closed(records, closed, FakeClock().now())
        row = _measure(adapter, jobs, ADAPTERS[adapter](jobs, records=records), count, policy, phases)
        return row | {"store": store, "closed": closed, "collector": policy}
    finally:
        if hasattr(records, "drop"):
            records.drop()
        records.close()


def _callgrind(switch: str) -> None:
    import subprocess

    subprocess.run(["callgrind_control", "-i", switch, str(os.getpid())], check=True, capture_output=True)


def instructions(
    adapter: str, jobs: int, store: str, closed: int, policy: str = "service", cache: int | None = None
) -> dict[str, int]:
    """The instructions one steady cycle executes (with the collector's work after it), counted by callgrind in
    a child process that runs this row with ``--count-child``: ``{"cycle_instructions": N}``, and with
    ``cache`` (bytes of a simulated last-level cache) ``cycle_ll_misses`` too."""
    import re
    import subprocess

    argv = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=/dev/null"]
    if cache is not None:
        argv += ["--cache-sim=yes", f"--LL={cache},16,64"]
    argv += [sys.executable, __file__, "--adapter", adapter, "--jobs", str(jobs), "--store", store]
    argv += ["--closed", str(closed), "--collector", policy, "--json", "--count-child"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    found = re.search(r"Collected :((?: \d+)+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"callgrind run failed ({done.returncode}): {done.stderr[-2000:]}")
    cycles = json.loads(done.stdout)["results"][0]["cycles"]
    counts = [int(x) for x in found.group(1).split()]
    out = {"cycle_instructions": round(counts[0] / cycles)}
    if cache is not None:  # Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
        out["cycle_ll_misses"] = round(sum(counts[6:9]) / cycles)
    return out


class _DefaultCollector:
    """Python's default collector, untouched (``--collector default``)."""

    def start(self) -> None:
        pass

    def after_cycle(self) -> None:
        pass

    def stop(self) -> None:
        pass


def _measure(
    adapter: str, jobs: int, setup: Setup, count: bool = False, policy: str = "service", phases: bool = False
) -> dict[str, Any]:
    meter = Meter()
    b = timed_backend(setup.backend, meter)
    sup = Supervisor(
        b, setup.records, clock=setup.clock, owner="bench", poll=POLL, cluster="memory", lease_ttl=LEASE_TTL
    )
    # as dispatch supervise runs it (see dispatch.supervise.service.serve), or Python's default
    collector: Collector | _DefaultCollector = Collector() if policy == "service" else _DefaultCollector()
    collector.start()
    for _ in range(2):  # take the leases, fold the first evidence
        sup.cycle()
        collector.after_cycle()
        setup.clock.advance(POLL)
    period = int(LEASE_TTL / 2 / POLL)  # one lease-renewal period of cycles
    calls = writes = 0
    cpu = backend_cpu = collector_cpu = 0.0
    timer = Phases(sup) if phases else None
    if count:
        _callgrind("on")
    for _ in range(period):
        meter.calls, meter.seconds = 0, 0.0
        t = time.process_time()
        report = sup.cycle()
        c = time.process_time()
        collector.after_cycle()
        collector_cpu += time.process_time() - c
        cpu += time.process_time() - t
        backend_cpu += meter.seconds
        calls += meter.calls
        writes += report.writes
        if report.owned != jobs:
            raise SystemExit(f"the supervisor owned {report.owned} of {jobs} jobs")
        setup.clock.advance(POLL)
    if count:
        _callgrind("off")
    collector.stop()  # the next row starts from a process as it was
    extra = {"phase_cpu_ms": timer.row(cpu, backend_cpu, collector_cpu, period)} if timer else {}
    return extra | {
        "adapter": adapter,
        "jobs": jobs,
        "backend_calls_per_cycle": calls / period,
        "cycle_cpu_ms": round(cpu / period * 1000, 3),
        "backend_cpu_ms": round(backend_cpu / period * 1000, 3),
        "supervisor_cpu_ms": round((cpu - backend_cpu) / period * 1000, 3),
        "record_writes_per_cycle": round(writes / period, 2),
        "cycles": period,
    }


DELEGATES = {"kubeflow": "kubeflow_cycle.py", "slurm": "slurm_cycle.py"}
"""Adapters whose rows come from their own script beside this one (same flags, same JSON shape)."""


def delegate(adapter: str, argv: list[str]) -> int:
    """Run ``bench/<script>`` for ``adapter`` with the remaining arguments."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).with_name(DELEGATES[adapter])
    if not path.exists():
        print(f"bench/cycle.py: no benchmark for the {adapter} adapter ({path.name} is missing)", file=sys.stderr)
        return 2
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return int(module.main(argv))


def best_of(times: int, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The run of ``run()`` with the least ``cycle_cpu_ms`` out of ``times``, with every run's figure in
    ``cycle_cpu_ms_runs``. On a shared machine other work only adds to a process's CPU time (cache misses,
    contention), so the least is the closest to the cycle's own cost."""
    runs = [run() for _ in range(max(1, times))]
    best = min(runs, key=lambda r: r["cycle_cpu_ms"])
    return best | {"cycle_cpu_ms_runs": [r["cycle_cpu_ms"] for r in runs]}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    first = argparse.ArgumentParser(add_help=False)
    first.add_argument("--adapter", default="memory")
    known, rest = first.parse_known_args(argv)
    if known.adapter in DELEGATES:
        return delegate(known.adapter, rest)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--adapter", default="memory", choices=sorted([*ADAPTERS, *DELEGATES]))
    p.add_argument("--jobs", default="1,100,1000,10000", help="comma-separated job counts")
    p.add_argument("--closed", default="0", help="comma-separated counts of closed jobs in the store")
    p.add_argument("--store", default="memory", help="comma-separated stores: memory, sqlite, postgres")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="measure each row this many times (a fresh setup each) and keep the run with the least CPU",
    )
    p.add_argument("--instructions", action="store_true", help="also count each row's instructions (valgrind)")
    p.add_argument(
        "--cache-sim",
        type=int,
        metavar="BYTES",
        help="with --instructions: also count misses of a simulated last-level cache of BYTES",
    )
    p.add_argument(
        "--collector",
        choices=["service", "default"],
        default="service",
        help="the garbage-collector policy: the service's (default) or Python's defaults, for comparison",
    )
    p.add_argument("--phases", action="store_true", help="also give each row's CPU time by phase of the cycle")
    p.add_argument("--count-child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    try:
        counts = [int(x) for x in args.jobs.split(",") if x]
        closed = [int(x) for x in args.closed.split(",") if x]
    except ValueError:
        p.error(f"--jobs and --closed must be comma-separated whole numbers, got {args.jobs!r}, {args.closed!r}")
    if not counts or any(n < 1 for n in counts):
        p.error("--jobs needs at least one count, each >= 1")
    if not closed or any(n < 0 for n in closed):
        p.error("--closed needs at least one count, each >= 0")
    stores = [x for x in args.store.split(",") if x]
    if args.cache_sim is not None and (not args.instructions or args.cache_sim < 65536):
        p.error("--cache-sim needs --instructions and a size of at least 65536 bytes")
    bad = [x for x in stores if x not in ("memory", "sqlite", "postgres")]
    if bad or not stores:
        p.error(f"--store takes memory, sqlite, postgres; got {args.store!r}")
    with tempfile.TemporaryDirectory(prefix="dispatch-bench-") as scratch:
        results = [
            best_of(
                args.repeat,
                partial(measure, args.adapter, n, st, c, scratch, args.count_child, args.collector, args.phases),
            )
            for st in stores
            for n in counts
            for c in closed
        ]
        if args.instructions:
            for r in results:
                r |= instructions(args.adapter, r["jobs"], r["store"], r["closed"], args.collector, args.cache_sim)
    if args.json:
        print(json.dumps({"results": results}, indent=2))
    else:
        for r in results:
            print(
                f"{r['store']:>8} {r['jobs']:>6} jobs {r['closed']:>7} closed: "
                f"{r['backend_calls_per_cycle']:.1f} backend calls/cycle, "
                f"{r['cycle_cpu_ms']:.1f} ms CPU/cycle ({r['backend_cpu_ms']:.1f} ms in the backend), "
                f"{r['record_writes_per_cycle']} record writes/cycle"
                + (f", {r['cycle_instructions']:,} instructions/cycle" if "cycle_instructions" in r else "")
                + (f", {r['cycle_ll_misses']:,} LL misses/cycle" if "cycle_ll_misses" in r else "")
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
