"""What interruptions cost a real training job: examples/train_ddp.py through dispatch on the real Slurm cluster.

    python bench/train.py --json [--cluster local] [--cases none,preempted,timeout,node-lost,supervisor-killed,hang]
        [--overhead-pairs N [--overhead-steps S]]

Runs the proof scenarios of tests/training (same job, same faults, same checks) and prints
``{"runs": [...]}``, one row per (cluster, interruption):

* ``executions``: executions the job needed; ``params_equal``: final parameters bit-identical to the
  uninterrupted run's;
* ``steps_redone``: steps an interrupted execution had done past the checkpoint the next one resumed from;
* ``recovery_s``: from the interruption (the preemptor's submission, the slurmd stop, the TIMEOUT's end in
  sacct) to the first step of the next execution;
* ``wall_ratio``: the job's wall time through dispatch (from the submit call to the training's last step, its
  "done" line) over the same for the same training launched with plain ``sbatch`` + ``srun`` and no
  interruption, measured in the same run with the same step delay. For ``none`` it is dispatch's pure overhead.
* ``hang`` (rank 1 stops without a word at step 45, a ``stalledAfter: 10s`` rule) adds ``stall_detected_s``: the
  seconds from the stalled execution's last progress report to the supervisor's judgement that ended it (at
  least the bound, at most a cycle more), and ``excluded_nodes``: the nodes the resubmission was kept off (the
  rule says ``excludeBlamedNodes``: both nodes of the stalled execution, whose ranks both fell silent; the job
  runs in the cluster's ``wide`` partition, whose two spare nodes take the resubmission).

``--overhead-pairs N`` adds a row with ``measure: progress_overhead``: the same uninterrupted training with and
without its ``dispatch.job.progress`` calls (the example's ``--no-progress``), both through plain ``sbatch`` +
``srun`` (the reports written beside the output at the default interval, as under dispatch), alternating, N pairs;
the times are the training's own (rank 0's first step to its last), as CPU seconds of rank 0's process
(``cpu_*``) and as wall seconds (``wall_*``), and ``cpu_ratio_median`` (with ``_min``, ``_max``, ``_iqr`` over the
pairs) is with over without. ``call_us`` is one call's cost measured in the bench's own process (the fastest of
5 rounds of 100,000), and ``calls_pct_of_cpu`` those calls' share of a run without them (``steps`` calls over
the median ``cpu_without_progress_s``): the same question, answered without the machine's noise. ``--cases ''``
runs that row alone.

Needs torch==2.13.0 (scripts/training-deps.sh) and the clusters (brought up when down). Faults are short and
always undone; the clusters may be shared, so a row can show someone else's interruption as an extra execution.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))  # the proof scenarios are the package tests.training
sys.path.insert(0, str(ROOT / "bench"))

from _slurm_clusters import clusters  # noqa: E402
from tests.training import scenarios  # noqa: E402
from tests.training.harness import EVERY, EXAMPLE, STEPS, Result, description  # noqa: E402

CASES = {
    "preempted": (scenarios.preempted, 0.1),
    "timeout": (scenarios.timed_out, 0.6),
    "node-lost": (scenarios.node_lost, 0.4),
    "supervisor-killed": (scenarios.supervisor_killed, 0.1),
    "hang": (scenarios.hung, 0.1),
}


def plain_run(
    cluster: str, delay: float, *, steps: int = STEPS, every: int = EVERY, progress: bool = True
) -> tuple[float, float, float]:
    """The training with plain sbatch --wait + srun, uninterrupted: (submission to end, first step to end, rank
    0's CPU seconds from its first step to its end). ``progress``: the ranks call ``dispatch.job.progress`` every
    step and it writes (to a directory beside the output, at its default interval), as under dispatch; else the
    calls are left out (``--no-progress``)."""
    desc = description(cluster)
    with tempfile.TemporaryDirectory(prefix="dispatch-train-plain-", dir="/tmp") as d:
        os.chmod(d, 0o777)
        argv = [sys.executable, str(EXAMPLE), "--steps", str(steps), "--checkpoint-every", str(every),
                "--step-delay", str(delay), "--out", f"{d}/final.params", "--checkpoint-dir", f"{d}/ckpt",
                *([] if progress else ["--no-progress"])]  # fmt: skip
        env = f"export PYTHONPATH={ROOT / 'src'}\n" + (
            f"export DISPATCH_PROGRESS_DIR={d}/progress\n" if progress else ""
        )
        Path(d, "job.sh").write_text("#!/bin/bash\n" + env + "exec srun -- " + " ".join(argv) + "\n")
        t = time.time()
        subprocess.run(
            [*desc["admin"]["command"], "sbatch", "--wait", "-N2", "--ntasks-per-node=1",
             "-p", desc["partitions"]["default"], "-A", desc["account"], "-o", f"{d}/out", f"{d}/job.sh"],
            check=True, capture_output=True, timeout=900,
        )  # fmt: skip
        events = [json.loads(x) for x in Path(d, "out").read_text().splitlines() if x.startswith('{"t"')]
        (done,) = [e for e in events if e.get("event") == "done"]
        (first,) = [e for e in events if e.get("event") == "first-step" and e.get("rank") == 0]
        reports = os.listdir(f"{d}/progress") if progress else []
        if progress and sorted(reports) != ["rank-0.json", "rank-1.json"]:
            raise AssertionError(f"the ranks wrote no progress reports: {reports}")
        return done["t"] - t, done["t"] - first["t"], done["cpu"] - first["cpu"]


def plain_wall(cluster: str, delay: float) -> float:
    """The same training with plain sbatch --wait + srun, uninterrupted: submission to end, seconds."""
    return plain_run(cluster, delay)[0]


def overhead(cluster: str, pairs: int, steps: int) -> dict[str, Any]:
    """What ``dispatch.job.progress`` costs an uninterrupted run: the same training (``steps`` steps, no delay,
    a checkpoint every ``steps // 4``) with and without the calls, alternating (which goes first alternates too),
    ``pairs`` times; the ratios of each pair's training times (first step to end: what the calls can slow), as
    rank 0's CPU seconds (``cpu_*``: what the calls cost the process, little moved by other load) and as wall
    seconds (``wall_*``: on a shared machine mostly the others' load)."""
    runs: dict[bool, list[tuple[float, float, float]]] = {True: [], False: []}
    retried = 0
    for i in range(pairs):
        for on in (True, False) if i % 2 == 0 else (False, True):
            for attempt in range(3):  # a shared cluster: someone else's test may end a run (preemption, a fault)
                try:
                    runs[on].append(plain_run(cluster, 0.0, steps=steps, every=steps // 4, progress=on))
                    break
                except subprocess.CalledProcessError:
                    if attempt == 2:
                        raise
                    retried += 1
    row: dict[str, Any] = {
        "cluster": cluster,
        "interruption": "none",
        "measure": "progress_overhead",
        "pairs": pairs,
        "steps": steps,
        "runs_retried": retried,
    }
    call_s = call_cost()
    row["call_us"] = round(call_s * 1e6, 2)
    row["calls_pct_of_cpu"] = round(100 * call_s * steps / statistics.median(r[2] for r in runs[False]), 3)
    for name, k in (("cpu", 2), ("wall", 1)):
        with_s, without_s = [r[k] for r in runs[True]], [r[k] for r in runs[False]]
        ratios = sorted(w / wo for w, wo in zip(with_s, without_s, strict=True))
        median = statistics.median(ratios)
        quartiles = statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else [median, median, median]
        row[f"{name}_with_progress_s"] = [round(x, 3) for x in with_s]
        row[f"{name}_without_progress_s"] = [round(x, 3) for x in without_s]
        row[f"{name}_ratio_median"] = round(median, 4)
        row[f"{name}_ratio_min"] = round(ratios[0], 4)
        row[f"{name}_ratio_max"] = round(ratios[-1], 4)
        row[f"{name}_ratio_iqr"] = round(quartiles[2] - quartiles[0], 4)
        row[f"{name}_overhead_pct_median"] = round(100 * (median - 1), 2)
    return row


def call_cost(calls: int = 100_000) -> float:
    """Seconds one ``dispatch.job.progress(step, total=..., loss=...)`` call takes in this process, writing to a
    directory at the default interval (the fastest of 5 rounds of ``calls`` calls)."""
    import timeit

    from dispatch import job

    with tempfile.TemporaryDirectory(prefix="dispatch-progress-cost-", dir="/tmp") as d:
        os.environ[job.PROGRESS_DIR_VARIABLE] = d
        try:
            job.reset_for_tests()
            best = min(timeit.repeat(lambda: job.progress(7, total=2000, loss=0.25), number=calls, repeat=5))
        finally:
            del os.environ[job.PROGRESS_DIR_VARIABLE]
            job.reset_for_tests()
    return best / calls


def row(cluster: str, interruption: str, res: Result, ref: bytes, plain: float) -> dict[str, Any]:
    return {
        "cluster": cluster,
        "interruption": interruption,
        "executions": len(res.executions),
        "params_equal": res.params == ref,
        "steps_redone": res.steps_redone(),
        "recovery_s": res.recovery_s(),
        "wall_ratio": round(res.wall / plain, 3),
        "wall_s": round(res.wall, 1),
        "plain_wall_s": round(plain, 1),
        "causes": res.causes,
        **(
            {"stall_detected_s": scenarios.stall_detected_s(res), "excluded_nodes": scenarios.excluded_nodes(res)}
            if interruption == "hang"
            else {}
        ),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument(
        "--cluster",
        default="local",
        choices=["local"],
        help="the host's Slurm 22.05 cluster (the plain baseline runs the host's paths, so no chroot cluster)",
    )
    p.add_argument("--cases", default="none," + ",".join(CASES), help="comma-separated interruptions")
    p.add_argument("--json", action="store_true", help="print JSON (the only output format)")
    p.add_argument(
        "--overhead-pairs",
        type=int,
        default=0,
        help="also measure the progress calls' cost: this many pairs of runs with and without them (0: not)",
    )
    p.add_argument("--overhead-steps", type=int, default=2000, help="steps of each overhead run (default 2000)")
    args = p.parse_args(argv)
    clusters([args.cluster])
    wanted = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in wanted if c != "none" and c not in CASES]
    if unknown:
        p.error(f"unknown case(s) {', '.join(unknown)}; known: none, {', '.join(CASES)}")
    plain: dict[float, float] = {}

    def plain_for(delay: float) -> float:
        if delay not in plain:
            plain[delay] = plain_wall(args.cluster, delay)
        return plain[delay]

    rows = []
    if args.overhead_pairs:
        rows.append(overhead(args.cluster, args.overhead_pairs, args.overhead_steps))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    if not wanted:
        print(json.dumps({"runs": rows}, indent=2))
        return 0
    ref = scenarios.reference(args.cluster)
    if "none" in wanted:
        rows.append(row(args.cluster, "none", ref, ref.params, plain_for(0.0)))
    for name in wanted:
        if name == "none":
            continue
        run, delay = CASES[name]
        try:
            res = run(args.cluster, ref.params)
        except AssertionError as exc:  # a shared cluster: someone else's fault can spoil a case; say so, go on
            rows.append({"cluster": args.cluster, "interruption": name, "error": str(exc).splitlines()[0]})
            continue
        rows.append(row(args.cluster, name, res, ref.params, plain_for(delay)))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(json.dumps({"runs": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
