"""Benchmark: what the supervisor's output archive adds to a cycle, measured side by side with it off.

    python bench/archive.py --jobs 1000 --store memory,sqlite --json

For each store, two identical worlds (the memory adapter's Kubeflow shape, ``jobs`` running jobs recorded, a
resubmit rule for preemption) are supervised, one with the archive on (1 MiB cap) and one with it off
(``ArchiveSettings(max_bytes=0)``). It measures, for each:

* ``steady_ms``: the mean wall time of a cycle while nothing ends (6 cycles after the leases are taken), where
  the archive must cost nothing;
* ``burst_ms``: the wall time of the one cycle that sees every job preempted at once (each rank 0 having
  written ``--lines`` lines of 80 bytes) and resubmits them all; with the archive on, that cycle also reads and
  stores every first execution's log.

and prints ``{"results": [{"store", "jobs", "lines", "archive", "steady_ms", "steady_cpu_ms", "burst_ms",
"burst_cpu_ms", "entries", "kept", "bytes_kept"}, ...], "ratios": [{"store", "steady_cpu_on_over_off",
"burst_cpu_on_over_off"}]}``. CPU time is the process's (the archive's reads run on a worker thread, counted
too); wall times on a shared machine mostly measure its load, so the ratios are of CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

from dispatch.clock import FakeClock
from dispatch.cluster import Cluster
from dispatch.extensions import Image
from dispatch.memory import MemoryScheduler, backend
from dispatch.records.memory import MemoryRecords
from dispatch.records.sqlite import SQLiteRecords
from dispatch.spec import JobSpec
from dispatch.supervise import Supervisor
from dispatch.supervise.archive import ArchiveSettings

RESUBMIT = {"rules": [{"cause": ["preempted"], "action": "resubmit", "limit": 1}]}
POSTGRES_DSN = os.environ.get("DISPATCH_TEST_POSTGRES", "host=127.0.0.1 dbname=dispatch_test user=postgres")


def open_store(kind: str, scratch: str, tag: str) -> Any:
    if kind == "memory":
        return MemoryRecords()
    if kind == "sqlite":
        return SQLiteRecords(os.path.join(scratch, f"{tag}.db"))
    if kind == "postgres":
        import secrets

        from dispatch.records.postgres import PostgresRecords

        return PostgresRecords(POSTGRES_DSN, schema=f"bench_archive_{secrets.token_hex(4)}")
    raise SystemExit(f"unknown store {kind!r}")


def one(store: str, jobs: int, lines: int, on: bool, scratch: str) -> dict[str, Any]:
    clock = FakeClock()
    sched = MemoryScheduler(clock, "kubeflow", nodes=jobs)
    b = backend(sched)
    records = open_store(store, scratch, f"{store}-{'on' if on else 'off'}")
    try:
        cluster = Cluster("memory", b, records, clock)
        spec = JobSpec(("sleep", "100000"), extensions=(Image("registry.example/x:1"),))
        ids = [cluster.submit(spec, RESUBMIT) for _ in range(jobs)]
        sup = Supervisor(
            b, records, clock=clock, poll=10, archive=ArchiveSettings() if on else ArchiveSettings(max_bytes=0)
        )
        for _ in range(2):  # leases taken, everything running
            sup.cycle()
            clock.advance(10)
        steady, steady_cpu = [], []
        for _ in range(6):
            t, c = time.perf_counter(), time.process_time()
            sup.cycle()
            steady.append((time.perf_counter() - t) * 1000)
            steady_cpu.append((time.process_time() - c) * 1000)
            clock.advance(10)
        line = "x" * 79
        for job_id in ids:
            sid = records.get(job_id).current.scheduler_id
            for _ in range(lines):
                sched.control.write(sid, line)
            sched.control.preempt(sid)
        t, c = time.perf_counter(), time.process_time()
        report = sup.cycle()
        burst, burst_cpu = (time.perf_counter() - t) * 1000, (time.process_time() - c) * 1000
        resubmitted = sum(1 for j in records.get_many(ids) if len(j.submissions) == 2)
        if resubmitted != jobs:
            raise SystemExit(f"{store}: only {resubmitted} of {jobs} jobs were resubmitted in the burst cycle")
        entries = records.outputs(ids)
        return {
            "store": store,
            "jobs": jobs,
            "lines": lines,
            "archive": on,
            "steady_ms": round(statistics.mean(steady), 2),
            "steady_cpu_ms": round(statistics.mean(steady_cpu), 2),
            "burst_ms": round(burst, 1),
            "burst_cpu_ms": round(burst_cpu, 1),
            "entries": len(entries),
            "kept": dict(report.archive),
            "bytes_kept": sum(e.size for e in entries),
        }
    finally:
        if store == "postgres":
            records.drop()
        records.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--lines", type=int, default=100, help="lines of 80 bytes rank 0 writes before the preemption")
    ap.add_argument("--store", default="memory,sqlite", help="comma-separated: memory, sqlite, postgres")
    ap.add_argument("--json", action="store_true", help="print JSON only")
    args = ap.parse_args(argv)
    results, ratios = [], []
    with tempfile.TemporaryDirectory() as scratch:
        for store in args.store.split(","):
            off = one(store, args.jobs, args.lines, False, scratch)
            on = one(store, args.jobs, args.lines, True, scratch)
            results += [off, on]
            ratios.append(
                {
                    "store": store,
                    "steady_cpu_on_over_off": round(on["steady_cpu_ms"] / off["steady_cpu_ms"], 2),
                    "burst_cpu_on_over_off": round(on["burst_cpu_ms"] / off["burst_cpu_ms"], 2),
                }
            )
            if not args.json:
                print(f"{store}: off {off}\n{store}: on  {on}", file=sys.stderr)
    print(json.dumps({"results": results, "ratios": ratios}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
