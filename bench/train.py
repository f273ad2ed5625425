"""What interruptions cost a real training job: examples/train_ddp.py through dispatch on the real Slurm cluster.

    python bench/train.py --json [--cluster local] [--cases none,preempted,timeout,node-lost,supervisor-killed,hang]
        [--overhead-blocks N [--overhead-block-steps B]]
    python bench/train.py --json --cluster kubeflow [--cases none,preempted,supervisor-killed,node-lost]

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

``--overhead-blocks N`` adds a row with ``measure: progress_overhead``: what the ``dispatch.job.progress`` calls
cost an uninterrupted run, measured side by side within one run so the machine's load hits both arms alike. The
training (N blocks of B steps, default 10; no checkpoint; 2 ranks through plain ``sbatch`` + ``srun``, the reports
written beside the output at the default interval, as under dispatch) runs with the example's ``--progress-ab B``:
the blocks go in pairs, the calls made in one block of each pair (which one is drawn, seeded, per pair), and rank
0 logs each block's seconds. The first pairs (warm-up) are left out. Per measure (``cpu``: rank 0's process CPU
seconds, gloo's threads included; ``thread_cpu``: its training thread's, where the calls run; ``wall``): the
medians of the blocks with and without the calls and their ratio, the paired ratios (each block with the calls
over the other block of its pair) with their median, IQR and a bootstrap 95% interval of the median, and
``*_overhead_pct`` (the paired median, in percent); ``overhead_pct`` and ``overhead_pct_ci95`` are the training
thread's (the calls run there; gloo's threads add only noise). ``call_us`` is one call's cost measured in the
bench's own process (the fastest of 5 rounds of 100,000), and ``calls_pct_of_cpu`` a block's calls' share of a
block without them at that cost: what a tight loop says, for comparison. ``--cases ''`` runs that row alone.

``--cluster kubeflow``: the same job on real pods (tests/training/kubeflow.py): the two real kubelets of
scripts/k8s/nodes-up.sh, dispatch's Kubeflow adapter in Kueue mode, the interruptions a Kueue priority preemption,
the supervisor killed during its recovery and a node lost (rank 1's kubelet stopped); the same columns, with
``plain_wall_s`` a TrainJob of the same runtime created with kubectl (no dispatch, no Kueue), from its creation
to rank 0's "done" line. The control plane and the nodes are not brought up here: down, the run fails naming
the script.

Needs torch==2.13.0 (scripts/training-deps.sh) and the clusters (brought up when down). Faults are short and
always undone; the clusters may be shared, so a row can show someone else's interruption as an extra execution.
"""

from __future__ import annotations

import argparse
import json
import os
import random
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
    cluster: str, delay: float, *, steps: int = STEPS, every: int = EVERY, extra: tuple[str, ...] = ()
) -> tuple[float, list[dict[str, Any]]]:
    """The training with plain sbatch --wait + srun, uninterrupted, the ranks' progress reports written to a
    directory beside the output at the default interval, as under dispatch; ``extra``: more arguments for the
    example. Returns the submission's time and the JSON lines the ranks printed."""
    desc = description(cluster)
    with tempfile.TemporaryDirectory(prefix="dispatch-train-plain-", dir="/tmp") as d:
        os.chmod(d, 0o777)
        argv = [sys.executable, str(EXAMPLE), "--steps", str(steps), "--checkpoint-every", str(every),
                "--step-delay", str(delay), "--out", f"{d}/final.params", "--checkpoint-dir", f"{d}/ckpt",
                *extra]  # fmt: skip
        env = f"export PYTHONPATH={ROOT / 'src'}\nexport DISPATCH_PROGRESS_DIR={d}/progress\n"
        Path(d, "job.sh").write_text("#!/bin/bash\n" + env + "exec srun -- " + " ".join(argv) + "\n")
        t = time.time()
        subprocess.run(
            [*desc["admin"]["command"], "sbatch", "--wait", "-N2", "--ntasks-per-node=1",
             "-p", desc["partitions"]["default"], "-A", desc["account"], "-o", f"{d}/out", f"{d}/job.sh"],
            check=True, capture_output=True, timeout=900,
        )  # fmt: skip
        events = [json.loads(x) for x in Path(d, "out").read_text().splitlines() if x.startswith('{"t"')]
        reports = sorted(os.listdir(f"{d}/progress"))
        if reports != ["rank-0.json", "rank-1.json"]:
            raise AssertionError(f"the ranks wrote no progress reports: {reports}")
        return t, events


def plain_wall(cluster: str, delay: float) -> float:
    """The same training with plain sbatch --wait + srun, uninterrupted: submission to end, seconds."""
    t, events = plain_run(cluster, delay)
    (done,) = [e for e in events if e.get("event") == "done"]
    return float(done["t"]) - t


WARMUP_PAIRS = 2
"""Pairs of blocks left out at the start of the overhead run: the first steps (DDP's first iterations, the first
progress call's setup) are slower in either arm."""

MEASURES = ("cpu", "thread_cpu", "wall")


def overhead(cluster: str, blocks: int, block: int) -> dict[str, Any]:
    """What ``dispatch.job.progress`` costs an uninterrupted run, measured inside one run so the machine's load
    hits both arms alike: the training (``blocks * block`` steps, no delay, no checkpoint) with the example's
    ``--progress-ab block`` (the calls in one block of each pair, in a seeded order), its blocks compared by
    :func:`block_overhead`. A shared cluster may end the run (someone else's preemption or fault): it is run
    again, at most twice, and ``runs_retried`` says so."""
    steps = blocks * block
    for attempt in range(3):
        try:
            t, events = plain_run(cluster, 0.0, steps=steps, every=steps, extra=("--progress-ab", str(block)))
            break
        except subprocess.CalledProcessError:
            if attempt == 2:
                raise
    (done,) = [e for e in events if e.get("event") == "done"]
    row: dict[str, Any] = {
        "cluster": cluster,
        "interruption": "none",
        "measure": "progress_overhead",
        "steps": steps,
        "block_steps": block,
        "run_wall_s": round(float(done["t"]) - t, 1),
        "runs_retried": attempt,
    }
    row.update(block_overhead([e for e in events if e.get("event") == "block"]))
    call_s = call_cost()
    row["call_us"] = round(call_s * 1e6, 2)
    row["calls_pct_of_cpu"] = round(100 * call_s * block / row["cpu_without_median_s"], 3)
    return row


def block_overhead(blocks: list[dict[str, Any]], warmup_pairs: int = WARMUP_PAIRS) -> dict[str, Any]:
    """The example's ``block`` lines (rank 0's seconds per block, ``progress``: whether its steps called
        ``dispatch.job.progress``) compared, the first ``warmup_pairs`` pairs left out. For each measure (``cpu``:
        the process's CPU seconds, gloo's threads included; ``thread_cpu``: the training thread's, where the calls
        run; ``wall``): the medians of the blocks with and without the calls and their ratio; the paired ratios (each
        block with the calls over the other block of its pair, its neighbour), their median, IQR and a 95% bootstrap
        interval of that median (seeded, 2,000 resamples of the pairs); ``*_overhead_pct``: the paired median as a
        percentage. ``overhead_pct`` (with ``overhead_pct_ci95``) is the training thread's: the calls run there, and
    gloo's threads, whose CPU follows the other rank's timing, add noise and nothing of the calls'. Raises
    AssertionError unless every pair has one block of each kind."""
    by_index = {b["block"]: b for b in blocks}
    pairs = []
    for first in range(2 * warmup_pairs, max(by_index, default=-1), 2):
        a, b = by_index[first], by_index[first + 1]
        if a["progress"] == b["progress"]:
            raise AssertionError(f"blocks {first} and {first + 1} both have progress={a['progress']}")
        pairs.append((a, b) if a["progress"] else (b, a))
    if len(pairs) < 2:
        raise AssertionError(f"{len(pairs)} pair(s) of blocks past the warm-up: too few to compare")
    out: dict[str, Any] = {"pairs": len(pairs), "warmup_pairs": warmup_pairs}
    rng = random.Random(0)
    for m in MEASURES:
        with_s, without_s = [w[m] for w, _ in pairs], [wo[m] for _, wo in pairs]
        ratios = [w / wo for w, wo in zip(with_s, without_s, strict=True)]
        median = statistics.median(ratios)
        q = statistics.quantiles(ratios, n=4)
        boot = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(2000))
        out[f"{m}_with_median_s"] = round(statistics.median(with_s), 6)
        out[f"{m}_without_median_s"] = round(statistics.median(without_s), 6)
        out[f"{m}_ratio_of_medians"] = round(statistics.median(with_s) / statistics.median(without_s), 4)
        out[f"{m}_paired_ratio_median"] = round(median, 4)
        out[f"{m}_paired_ratio_iqr"] = round(q[2] - q[0], 4)
        out[f"{m}_paired_ratio_ci95"] = [round(boot[49], 4), round(boot[1949], 4)]
        out[f"{m}_overhead_pct"] = round(100 * (median - 1), 2)
    out["overhead_pct"] = out["thread_cpu_overhead_pct"]
    out["overhead_pct_ci95"] = [round(100 * (r - 1), 2) for r in out["thread_cpu_paired_ratio_ci95"]]
    return out


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
        choices=["local", "kubeflow"],
        help="the host's Slurm 22.05 cluster (the plain baseline runs the host's paths, so no chroot cluster), or"
        " kubeflow: the real pods of scripts/k8s/nodes-up.sh",
    )
    p.add_argument("--cases", help="comma-separated interruptions (default: every one the cluster has)")
    p.add_argument("--json", action="store_true", help="print JSON (the only output format)")
    p.add_argument(
        "--overhead-blocks",
        type=int,
        default=0,
        help="also measure the progress calls' cost: one run of this many blocks, half with the calls (0: not)",
    )
    p.add_argument("--overhead-block-steps", type=int, default=10, help="steps per block (default 10)")
    args = p.parse_args(argv)
    if args.cluster == "kubeflow":
        return kubeflow_main(p, args)
    clusters([args.cluster])
    wanted = [c.strip() for c in (args.cases or "none," + ",".join(CASES)).split(",") if c.strip()]
    unknown = [c for c in wanted if c != "none" and c not in CASES]
    if unknown:
        p.error(f"unknown case(s) {', '.join(unknown)}; known: none, {', '.join(CASES)}")
    plain: dict[float, float] = {}

    def plain_for(delay: float) -> float:
        if delay not in plain:
            plain[delay] = plain_wall(args.cluster, delay)
        return plain[delay]

    rows = []
    if args.overhead_blocks:
        rows.append(overhead(args.cluster, args.overhead_blocks, args.overhead_block_steps))
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


def kubeflow_main(p: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """``--cluster kubeflow``: the rows on real pods (module docstring)."""
    from tests.training import kubeflow

    cases = {
        "preempted": (kubeflow.preempted, 0.1),
        "supervisor-killed": (kubeflow.supervisor_killed, 0.1),
        "node-lost": (kubeflow.node_lost, kubeflow.NODE_LOST_DELAY),
    }
    wanted = [c.strip() for c in (args.cases or "none," + ",".join(cases)).split(",") if c.strip()]
    unknown = [c for c in wanted if c != "none" and c not in cases]
    if unknown or args.overhead_blocks:
        p.error(f"on kubeflow: unknown case(s) {', '.join(unknown)}; known: none, {', '.join(cases)}; no overhead row")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="dispatch-train-kubeflow-") as tmp:
        fixture = kubeflow.open_cluster(Path(tmp))
        try:
            real = next(fixture)
            plain: dict[float, float] = {}

            def plain_for(delay: float) -> float:
                if delay not in plain:
                    plain[delay] = kubeflow.plain_wall(real, delay)
                return plain[delay]

            ref = kubeflow.reference(real)
            if "none" in wanted:
                rows.append(row("kubeflow", "none", ref, ref.params, plain_for(0.0)))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
            for name in wanted:
                if name == "none":
                    continue
                run, delay = cases[name]
                try:
                    res = run(real, ref.params)
                except AssertionError as exc:
                    rows.append({"cluster": "kubeflow", "interruption": name, "error": str(exc).splitlines()[0]})
                    continue
                rows.append(row("kubeflow", name, res, ref.params, plain_for(delay)))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        finally:
            fixture.close()
    print(json.dumps({"runs": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
