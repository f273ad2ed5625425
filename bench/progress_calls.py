"""What share of a training loop ``dispatch.job.progress`` takes, counted inside the training process.

    python bench/progress_calls.py --json [--runs 3] [--steps 2000] [--src DIR]

Runs examples/train_ddp.py as one rank (world size 1, gloo, no scheduler) in a child process whose
``dispatch.job.progress`` is wrapped to add up the time spent inside it (wall, and the thread's CPU), from the
first call to the last, with the reports written to a temporary directory at the default interval. Prints
``{"runs": [...], "median_wall_share_pct": ..., "median_cpu_share_pct": ...,
"median_cpu_share_less_wrapper_pct": ...}``: per run the calls, the seconds inside them and the loop's seconds.
The wrapper's own clock reads are counted as inside the calls, so the shares are upper bounds; after the run the
wrapper alone is timed over as many calls of a function that does nothing (``wrapper_cpu_s``) and taken off
(``cpu_share_less_wrapper_pct``). Like the blocks with and without the calls of one run (``bench/train.py
--overhead-blocks``), the share does not drown in the load of a shared machine: both parts of it are measured in
the same seconds.

Needs torch (scripts/training-deps.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "train_ddp.py"

CHILD = """
import json, os, runpy, sys, time
from dispatch import job
out, argv = sys.argv[1], sys.argv[2:]
inner = job.progress
acc = {"calls": 0, "wall": 0.0, "cpu": 0.0, "first": None, "last": None}
def counted(*args, **kwargs):
    c = time.thread_time()
    t = time.perf_counter()
    try:
        return inner(*args, **kwargs)
    finally:
        acc["wall"] += time.perf_counter() - t
        acc["cpu"] += time.thread_time() - c
        acc["calls"] += 1
        mark = (t, time.process_time())
        acc["first"] = acc["first"] or mark
        acc["last"] = mark
job.progress = counted
leave = os._exit
def report(code):
    (w0, c0), (w1, c1) = acc["first"], acc["last"]
    real = dict(acc)
    inner = lambda *args, **kwargs: False  # the wrapper alone, as many calls: what it adds to the count
    acc["cpu"] = 0.0
    for step in range(real["calls"]):
        counted(step, total=real["calls"], loss=0.25)
    with open(out, "w") as f:
        f.write(json.dumps([real["calls"], real["wall"], real["cpu"], w1 - w0, c1 - c0, acc["cpu"]]))
    leave(code)
os._exit = report
sys.argv = argv
runpy.run_path(argv[0], run_name="__main__")
"""


def one(steps: int, port: int, src: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="dispatch-progress-calls-", dir="/tmp") as d:
        env = dict(os.environ, RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        env["DISPATCH_PROGRESS_DIR"] = f"{d}/progress"
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
        argv = [str(EXAMPLE), "--steps", str(steps), "--checkpoint-every", str(steps // 4), "--out", f"{d}/p",
                "--checkpoint-dir", f"{d}/ckpt"]  # fmt: skip
        subprocess.run([sys.executable, "-c", CHILD, f"{d}/acc", *argv], env=env, check=True, capture_output=True)
        calls, wall, cpu, loop_wall, loop_cpu, wrapper_cpu = json.loads(Path(d, "acc").read_text())
    return {
        "calls": calls,
        "in_calls_s": round(wall, 4),
        "loop_s": round(loop_wall, 3),
        "wall_share_pct": round(100 * wall / loop_wall, 3),
        "in_calls_cpu_s": round(cpu, 4),
        "loop_cpu_s": round(loop_cpu, 3),
        "cpu_share_pct": round(100 * cpu / loop_cpu, 3),
        "wrapper_cpu_s": round(wrapper_cpu, 4),
        "cpu_share_less_wrapper_pct": round(100 * max(0.0, cpu - wrapper_cpu) / loop_cpu, 3),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--runs", type=int, default=3, help="runs (default 3)")
    p.add_argument("--steps", type=int, default=2000, help="steps per run (default 2000)")
    p.add_argument("--src", default=str(ROOT / "src"), help="the dispatch sources to measure (default this checkout's)")
    p.add_argument("--json", action="store_true", help="print JSON (the only output format)")
    args = p.parse_args(argv)
    runs = [one(args.steps, 29500 + (os.getpid() + i) % 1000, args.src) for i in range(args.runs)]
    doc = {
        "src": args.src,
        "runs": runs,
        "median_wall_share_pct": statistics.median(r["wall_share_pct"] for r in runs),
        "median_cpu_share_pct": statistics.median(r["cpu_share_pct"] for r in runs),
        "median_cpu_share_less_wrapper_pct": statistics.median(r["cpu_share_less_wrapper_pct"] for r in runs),
    }
    print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
