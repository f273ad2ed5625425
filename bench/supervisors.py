"""Benchmark: several supervisors sharing one cluster's jobs on one record store.

    python bench/supervisors.py --supervisors 1,2,4 --jobs 10000 --json

prints ``{"results": [{"supervisors", "jobs", "max_share", "min_share", "takeover_s", "decisions_per_s", ...}]}``,
one row per supervisor count. K supervisors (each its own store connection and backend view) supervise
``jobs`` running jobs of the memory adapter on a fake clock (poll 10 s, lease 120 s), cycling in rounds:

* ``max_share`` / ``min_share``: the most and fewest jobs one supervisor holds once the shares settle
  (``rounds_to_balance`` rounds after they all started together);
* ``takeover_s``: after the first supervisor is killed (it stops cycling), the simulated seconds until the
  others hold all its jobs (the bound is the lease plus one poll: 130 s); none for one supervisor;
* ``decisions_per_s``: 10% of the jobs are preempted at once (a resubmit rule); decisions recorded per second
  of the wall time of the rounds until every one is decided, less the time spent inside the simulated
  scheduler (``decision_backend_s``: the memory scheduler re-evaluates every job on each call, a cost a real
  scheduler does not put on the supervisor). The K supervisors run one after another in this process, so
  this is their combined throughput on one core, each resubmission's start and open intents, calls and
  records included, beside the steady cycles of all the other jobs.

``--store postgres`` (default; ``$DISPATCH_TEST_POSTGRES``, a schema dropped after) or ``memory``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cycle import POSTGRES_DSN, Meter, memory_setup, timed_backend

from dispatch.records import MemoryRecords
from dispatch.supervise import Supervisor

POLL, TTL = 10.0, 120.0
RULES = {"rules": [{"name": "evicted", "cause": ["preempted"], "action": "resubmit", "limit": 3}]}


def holders(records: Any, now: float) -> Counter[str]:
    """Jobs held under an unexpired lease, by supervisor."""
    return Counter(
        j.lease.owner for j in records.jobs(cluster="memory") if j.lease is not None and j.lease.expires_at > now
    )


def measure(k: int, jobs: int, store: str) -> dict[str, Any]:
    schema = f"bench_sup_{os.getpid()}_{k}"
    if store == "postgres":
        from dispatch.records.postgres import PostgresRecords

        def connect() -> Any:
            return PostgresRecords(POSTGRES_DSN, schema=schema)

        main = connect()
        main.drop()
        main.close()
        main = connect()
    else:
        main = MemoryRecords()

        def connect() -> Any:
            return main

    try:
        setup = memory_setup(jobs, records=main)
        from dispatch.memory import backend

        sched = setup.backend.scheduler
        conns = [connect() for _ in range(k)]
        meter = Meter()
        sups = [
            Supervisor(
                timed_backend(backend(sched), meter),
                conns[i],
                clock=setup.clock,
                owner=f"sup-{i}",
                poll=POLL,
                lease_ttl=TTL,
                cluster="memory",
                default_rules=RULES,
            )
            for i in range(k)
        ]

        def round_of(live: list[Supervisor]) -> float:
            t = time.perf_counter()
            for s in live:
                s.cycle()
            wall = time.perf_counter() - t
            setup.clock.advance(POLL)
            return wall

        rounds = 0
        while True:
            round_of(sups)
            rounds += 1
            shares = holders(main, setup.clock.now())
            if (sum(shares.values()) == jobs and len(shares) == k) or rounds >= 30:
                break
        # then a few more rounds: a share that moves after this is not settled
        for _ in range(2):
            round_of(sups)
        shares = holders(main, setup.clock.now())
        row: dict[str, Any] = {
            "supervisors": k,
            "jobs": jobs,
            "store": store,
            "max_share": max(shares.values()),
            "min_share": min(shares.values()) if len(shares) == k else 0,
            "held": sum(shares.values()),
            "rounds_to_balance": rounds,
        }
        # decisions: preempt 10% at once, run rounds until each has a decision
        victims = sorted(sched.control.running())[: max(1, jobs // 10)]
        for sid in victims:
            sched.control.preempt(sid)
        wall = 0.0
        decided = 0
        meter.seconds = 0.0
        row["decision_rounds"] = 0
        for _ in range(20):
            wall += round_of(sups)
            row["decision_rounds"] += 1
            decided = sum(len(j.decisions) for j in main.jobs(cluster="memory"))
            if decided >= len(victims):
                break
        row["decisions"] = decided
        row["decision_wall_s"] = round(wall, 2)
        row["decision_backend_s"] = round(meter.seconds, 2)
        rest = wall - meter.seconds
        row["decisions_per_s"] = round(decided / rest, 1) if rest > 0 else None
        # takeover: the first supervisor stops; the others cycle until they hold everything
        if k > 1:
            dead = sups[0].owner
            t0 = setup.clock.now()
            takeover = None
            for _ in range(int((TTL + 3 * POLL) / POLL) + 2):
                round_of(sups[1:])
                shares = holders(main, setup.clock.now())
                if dead not in shares and sum(shares.values()) == sum(
                    1 for _ in main.to_supervise(cluster="memory", owner="nobody", now=setup.clock.now() + 10 * TTL)
                ):
                    takeover = setup.clock.now() - POLL - t0  # the round that completed it started POLL earlier
                    break
            row["takeover_s"] = takeover
            after = holders(main, setup.clock.now())
            row["after_takeover_max_share"] = max(after.values())
            row["after_takeover_min_share"] = min(after.values())
        else:
            row["takeover_s"] = None
        for c in conns:
            if c is not main:
                c.close()
        return row
    finally:
        if hasattr(main, "drop"):
            main.drop()
            main.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--supervisors", default="1,2,4", help="comma-separated supervisor counts")
    p.add_argument("--jobs", type=int, default=10_000)
    p.add_argument("--store", choices=["postgres", "memory"], default="postgres")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    try:
        counts = [int(x) for x in args.supervisors.split(",") if x]
    except ValueError:
        p.error(f"--supervisors must be comma-separated whole numbers, got {args.supervisors!r}")
    if not counts or any(n < 1 for n in counts) or args.jobs < 1:
        p.error("--supervisors and --jobs need counts >= 1")
    results = [measure(k, args.jobs, args.store) for k in counts]
    if args.json:
        print(json.dumps({"results": results}, indent=2))
    else:
        for r in results:
            print(
                f"{r['supervisors']} supervisors, {r['jobs']} jobs: shares {r['min_share']}-{r['max_share']}, "
                f"takeover {r['takeover_s']} s, {r['decisions_per_s']} decisions/s"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
