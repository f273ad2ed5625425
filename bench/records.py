"""Record store throughput: 10,000 jobs with 5 executions each, written then read, per store.

    python bench/records.py [--jobs N] [--executions E] [--stores sqlite,memory,postgres] [--json]

Prints {"results": [{"store", "jobs", "executions_per_job", "create_per_s", "update_per_s",
"intent_update_per_s", "get_per_s", "summaries_ms"}...]}. ``intent_update_per_s`` is the rate of writes that
carry an intent (an ``intent`` event: what precedes every backend call), which the SQLite store commits with
``synchronous=FULL``; ``update_per_s`` is the rate of the other writes (``synchronous=NORMAL``). Stores run
side by side in one process, so compare them as ratios, not absolute figures.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from dispatch import JobSpec
from dispatch.outcome import Cause, Evidence, Outcome, State
from dispatch.records import Event, ExecutionRecord, JobRecord, MemoryRecords, Records, SQLiteRecords, Submission


def job(i: int, executions: int) -> JobRecord:
    now = 1_800_000_000.0 + i
    ev = Evidence("bench", now)
    sub = Submission(1, f"dsp-b{i}-1", now, scheduler_id=str(100000 + i))
    for r in range(executions):
        cause = Cause.PREEMPTED if r < executions - 1 else Cause.EXIT
        state = State.FAILED if r < executions - 1 else State.SUCCEEDED
        code = 0 if state is State.SUCCEEDED else None
        sub.executions.append(ExecutionRecord(f"1.{100000 + i}.{r}", r, Outcome(state, cause, ev, exit_code=code)))
    sub.outcome = sub.executions[-1].outcome
    return JobRecord(
        id=f"b{i:06d}",
        cluster="bench",
        spec=JobSpec(command=("torchrun", "train.py", "--epochs", "10"), nodes=4, env={"A": "1"}),
        created_at=now,
        updated_at=now,
        submissions=[sub],
    )


def measure(name: str, store: Records, jobs: int, executions: int) -> dict[str, Any]:
    records = [job(i, executions) for i in range(jobs)]
    t0 = time.perf_counter()
    for r in records:
        store.create(r)
    t1 = time.perf_counter()
    for i in range(jobs):
        rec = store.get(f"b{i:06d}")
        rec.counters["total"] = 1
        store.update(rec)
    t2 = time.perf_counter()
    durable = max(1, jobs // 10)  # each one syncs the disk: fewer of them
    for i in range(durable):
        rec = store.get(f"b{i:06d}")
        rec.counters["total"] = 2
        store.update(rec, [Event(rec.id, 0.0, "intent", {"seq": 1})])
    t2b = time.perf_counter()
    for i in range(jobs):
        store.get(f"b{i:06d}")
    t3 = time.perf_counter()
    rows = store.summaries()
    t4 = time.perf_counter()
    assert len(rows) == jobs
    return {
        "store": name,
        "jobs": jobs,
        "executions_per_job": executions,
        "create_per_s": round(jobs / (t1 - t0), 1),
        "update_per_s": round(jobs / (t2 - t1), 1),
        "intent_update_per_s": round(durable / (t2b - t2), 1),
        "get_per_s": round(jobs / (t3 - t2b), 1),
        "summaries_ms": round((t4 - t3) * 1000, 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--executions", type=int, default=5)
    ap.add_argument("--stores", default="sqlite,memory")
    ap.add_argument("--json", action="store_true", help="print JSON (the default; kept for symmetry)")
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.stores.split(","):
            if name == "sqlite":
                store: Records = SQLiteRecords(Path(tmp) / "bench.db")
            elif name == "memory":
                store = MemoryRecords()
            elif name == "postgres":
                from dispatch.records.postgres import PostgresRecords

                dsn = os.environ.get("DISPATCH_TEST_POSTGRES", "host=127.0.0.1 dbname=dispatch_test user=postgres")
                store = PostgresRecords(dsn, schema=f"bench_{secrets.token_hex(4)}")
            else:
                ap.error(f"unknown store {name!r}")
            try:
                results.append(measure(name, store, args.jobs, args.executions))
            finally:
                drop = getattr(store, "drop", None)
                if drop:
                    drop()
                store.close()
    print(json.dumps({"results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
