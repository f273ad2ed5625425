#!/usr/bin/env python3
"""Wall time of the ``dispatch`` command: ``--help``, and ``status`` over 10,000 jobs in the record store.

The store is a temporary SQLite file filled through the records API (jobs that ended with a mix of states and
causes, closed, as a long-used store holds). Each command runs as a fresh process, as a user runs it; the
figures are the median and the spread of ``--repeat`` runs. Usage: ``python bench/cli.py --json``.

``--records sqlite,postgres`` also fills a PostgreSQL schema (``$DISPATCH_TEST_POSTGRES``, dropped after) with
the same jobs and times the same commands with ``DISPATCH_RECORDS`` naming it: ``stores`` then holds the
figures of each, side by side (``seconds`` stays the SQLite figures).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from dispatch.outcome import Cause, Evidence, Outcome, State  # noqa: E402
from dispatch.records import ExecutionRecord, JobRecord, SQLiteRecords, Submission  # noqa: E402
from dispatch.records.model import GateState  # noqa: E402
from dispatch.spec import JobSpec  # noqa: E402

ENTRY = "import sys; from dispatch.cli.main import main; sys.exit(main())"
ENDINGS = [
    (State.SUCCEEDED, Cause.EXIT, 0),
    (State.FAILED, Cause.EXIT, 3),
    (State.FAILED, Cause.TIMEOUT, None),
    (State.FAILED, Cause.OUT_OF_MEMORY, None),
    (State.CANCELLED, Cause.CANCELLED, None),
    (State.FAILED, Cause.PREEMPTED, None),
]


def populate(records: Any, n: int) -> float:
    t0 = time.perf_counter()
    base = time.time() - n
    for i in range(n):
        now = base + i
        state, cause, code = ENDINGS[i % len(ENDINGS)]
        out = Outcome(state, cause, Evidence("bench", now + 1), exit_code=code)
        sid = f"b{i:07d}"
        sub = Submission(
            1,
            f"dsp-{i}-1",
            now,
            scheduler_id=sid,
            gate=GateState.OPEN,
            outcome=out,
            executions=[ExecutionRecord(f"1.{sid}.0", 0, out, now, now + 1, ["local-0"])],
        )
        records.create(
            JobRecord(
                id=f"{int(now):08x}{i:06x}",
                cluster="local",
                created_at=now,
                updated_at=now + 1,
                spec=JobSpec(command=("python", "train.py"), nodes=2, name=f"job-{i % 97}"),
                submissions=[sub],
                closed=True,
            )
        )
    return time.perf_counter() - t0


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(argv: list[str], env: dict[str, str], repeat: int) -> dict[str, float]:
    """Wall time (median, min, max) and CPU time (median; user + system) of ``repeat`` fresh processes. On a
    shared, loaded machine the CPU time is the steadier figure."""
    runs, cpu = [], []
    for _ in range(repeat):
        c0 = _children_cpu()
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-c", ENTRY, *argv], env=env, capture_output=True)
        runs.append(time.perf_counter() - t0)
        cpu.append(_children_cpu() - c0)
        if p.returncode != 0:
            raise SystemExit(f"dispatch {' '.join(argv)} failed: {p.stderr.decode()}")
    return {
        "median": round(statistics.median(runs), 4),
        "min": round(min(runs), 4),
        "max": round(max(runs), 4),
        "cpuMedian": round(statistics.median(cpu), 4),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", action="store_true", help="print JSON (the only output format)")
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--records", default="sqlite", help="comma-separated: sqlite, postgres")
    args = ap.parse_args()
    stores = [x for x in args.records.split(",") if x]
    if not stores or any(x not in ("sqlite", "postgres") for x in stores):
        ap.error(f"--records takes sqlite and/or postgres, got {args.records!r}")
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "DISPATCH_"))}
        env.update(
            {
                "XDG_STATE_HOME": f"{tmp}/state",
                "XDG_CONFIG_HOME": f"{tmp}/config",
                "NO_COLOR": "1",
                "PYTHONPATH": str(ROOT / "src"),
            }
        )
        sqlite = SQLiteRecords(Path(tmp) / "state" / "dispatch" / "records.db")
        fill = populate(sqlite, args.jobs)
        sqlite.close()
        figures: dict[str, Any] = {}
        for store in stores:
            run_env = dict(env)
            pg = None
            if store == "postgres":
                from dispatch.records.postgres import PostgresRecords

                dsn = os.environ.get("DISPATCH_TEST_POSTGRES", "host=127.0.0.1 dbname=dispatch_test user=postgres")
                schema = f"bench_cli_{os.getpid()}"
                pg = PostgresRecords(dsn, schema=schema)
                populate(pg, args.jobs)
                run_env["DISPATCH_RECORDS"] = f"{dsn} schema={schema}"
            try:
                figures[store] = {
                    "dispatch --help": timed(["--help"], run_env, args.repeat),
                    "dispatch status": timed(["status"], run_env, args.repeat),
                    "dispatch status --all": timed(["status", "--all"], run_env, args.repeat),
                    "dispatch status --all --json": timed(["status", "--all", "--json"], run_env, args.repeat),
                }
            finally:
                if pg is not None:
                    pg.drop()
                    pg.close()
        result = {
            "jobs": args.jobs,
            "repeat": args.repeat,
            "populateSeconds": round(fill, 2),
            "seconds": figures.get("sqlite", next(iter(figures.values()))),
            "stores": figures,
            "python": sys.version.split()[0],
            "loadAverage": [round(x, 2) for x in os.getloadavg()],
        }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
