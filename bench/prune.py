"""Benchmark: what the output archive's retention costs (``prune_outputs``), on a store holding many entries.

    python bench/prune.py --entries 20000 --jobs 2000 --store sqlite,postgres --json

For each store, ``jobs`` jobs (one in ten open, the others closed) hold ``entries`` archive entries of
``--bytes`` bytes each, archived evenly over the last 100 days. With a keep of 30 days, 70% of the entries are
old, and those of closed jobs (about 63% of all) may go. It measures:

* ``count_ms``: a dry run counting them (``prune_outputs(before, dry_run=True)``, no limit);
* ``batch_ms``: the median wall time of one call deleting a batch of ``--limit`` entries (what a supervisor's
  cycle pays while a backlog lasts), and ``drain_s``: the whole backlog, batch after batch;
* ``idle_ms``: the median of 20 calls once nothing is left to delete (what a supervisor pays each hour after),
  where the index must keep the call from reading the entries that stay;
* ``plan``: the store's query plan of the delete (SQLite ``EXPLAIN QUERY PLAN``, PostgreSQL ``EXPLAIN``).

and prints ``{"results": [{"store", "entries", "jobs", "bytes", "limit", "deleted", "left", "count_ms",
"batch_ms", "batches", "drain_s", "idle_ms", "plan"}, ...]}``. Wall times on a shared machine include its load.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from typing import Any

from dispatch.records import archive
from dispatch.records.archive import ArchivedOutput, ArchiveStatus
from dispatch.records.model import JobRecord, Submission
from dispatch.records.sqlite import SQLiteRecords
from dispatch.spec import JobSpec

POSTGRES_DSN = os.environ.get("DISPATCH_TEST_POSTGRES", "host=127.0.0.1 dbname=dispatch_test user=postgres")
DAY = 86400.0


def open_store(kind: str, scratch: str) -> Any:
    if kind == "sqlite":
        return SQLiteRecords(os.path.join(scratch, "prune.db"))
    if kind == "postgres":
        from dispatch.records.postgres import PostgresRecords

        return PostgresRecords(POSTGRES_DSN, schema=f"bench_prune_{secrets.token_hex(4)}")
    raise SystemExit(f"unknown store {kind!r}")


def fill(records: Any, kind: str, entries: int, jobs: int, size: int, now: float) -> None:
    """The jobs (every tenth open), then the entries in one transaction (the archive's own upsert)."""
    for j in range(jobs):
        job = JobRecord(
            id=f"j{j:06d}",
            cluster="bench",
            spec=JobSpec(command=("true",)),
            created_at=now - 100 * DAY,
            updated_at=now,
            submissions=[Submission(1, f"dsp-j{j:06d}-1", now - 100 * DAY)],
            closed=j % 10 != 0,
        )
        records.create(job)
    data = os.urandom(size)
    rows = [
        archive.values(
            ArchivedOutput(
                job_id=f"j{i % jobs:06d}",
                execution=f"j{i % jobs:06d}.{i}",
                submission=1,
                restart=i // jobs,
                status=ArchiveStatus.KEPT,
                archived_at=now - 100 * DAY * (i + 0.5) / entries,
                data=data,
                size=size,
            )
        )
        for i in range(entries)
    ]
    if kind == "sqlite":
        with records._tx() as db:
            db.executemany(archive.UPSERT.format(table="outputs", marks=",".join("?" * 13)), rows)
    else:
        with records._tx() as cur:
            cur.executemany(records._q(archive.UPSERT.format(table="{s}.outputs", marks=",".join(["%s"] * 13))), rows)


def plan(records: Any, kind: str, before: float, limit: int) -> list[str]:
    """The query plan of the delete ``prune_outputs`` runs (the statement as the store builds it)."""
    if kind == "sqlite":
        ran: list[str] = []
        records._db.set_trace_callback(ran.append)
        records.prune_outputs(before, limit=limit, dry_run=False)  # nothing is left to delete by now
        records._db.set_trace_callback(None)
        delete = next(q for q in ran if q.startswith("DELETE"))
        return [str(r[-1]) for r in records._db.execute("EXPLAIN QUERY PLAN " + delete)]
    from dispatch.records.postgres import PRUNE

    prunable = archive.PRUNABLE.format(jobs="{s}.jobs", mark="%s")
    with records._tx() as cur:
        cur.execute(records._q("EXPLAIN " + PRUNE.format(prunable=prunable)), (before, limit))
        return [r[0] for r in cur.fetchall()]


def one(kind: str, entries: int, jobs: int, size: int, limit: int, scratch: str) -> dict[str, Any]:
    records = open_store(kind, scratch)
    try:
        now = time.time()
        fill(records, kind, entries, jobs, size, now)
        if kind == "postgres":
            with records._tx() as cur:
                cur.execute(records._q("ANALYZE {s}.outputs"))
                cur.execute(records._q("ANALYZE {s}.jobs"))
        before = now - 30 * DAY
        t = time.perf_counter()
        due = records.prune_outputs(before, dry_run=True)
        count_ms = (time.perf_counter() - t) * 1000
        batches: list[float] = []
        deleted = 0
        start = time.perf_counter()
        while True:
            t = time.perf_counter()
            n = records.prune_outputs(before, limit=limit)
            batches.append((time.perf_counter() - t) * 1000)
            deleted += n
            if n < limit:
                break
        drain = time.perf_counter() - start
        if deleted != due:
            raise SystemExit(f"{kind}: the dry run counted {due}, the prune deleted {deleted}")
        idle = []
        for _ in range(20):
            t = time.perf_counter()
            records.prune_outputs(before, limit=limit)
            idle.append((time.perf_counter() - t) * 1000)
        left = len(records.outputs([f"j{j:06d}" for j in range(jobs)]))
        return {
            "store": kind,
            "entries": entries,
            "jobs": jobs,
            "bytes": size,
            "limit": limit,
            "deleted": deleted,
            "left": left,
            "count_ms": round(count_ms, 1),
            "batch_ms": round(statistics.median(batches[:-1] or batches), 1),
            "batches": len(batches),
            "drain_s": round(drain, 2),
            "idle_ms": round(statistics.median(idle), 2),
            "plan": plan(records, kind, before, limit),
        }
    finally:
        if kind == "postgres":
            records.drop()
        records.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entries", type=int, default=20000)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--bytes", type=int, default=4096, help="bytes of each entry")
    ap.add_argument("--limit", type=int, default=1000, help="entries per call (the supervisor's batch)")
    ap.add_argument("--store", default="sqlite", help="comma-separated: sqlite, postgres")
    ap.add_argument("--json", action="store_true", help="print JSON only")
    args = ap.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        for kind in args.store.split(","):
            r = one(kind, args.entries, args.jobs, args.bytes, args.limit, scratch)
            results.append(r)
            if not args.json:
                print(f"{kind}: {r}", file=sys.stderr)
    print(json.dumps({"results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
