"""From a JobSpec to a launch plan (what the launcher runs), and the plan as text for ``--dry-run``."""

from __future__ import annotations

import os
import shlex
from typing import Any

from dispatch.adapterkit.identity import execution_identity
from dispatch.extensions import CessationWarning, SharedCheckpoint
from dispatch.local.launcher import execution_dir, rank_devices, rank_env
from dispatch.local.limits import Limits
from dispatch.spec import JobSpec


def build_plan(manifest: dict[str, Any], job_dir: str, restart: int, grace: float) -> dict[str, Any]:
    """The plan of execution ``restart`` of the job whose manifest is given. Output files go to the execution's
    directory: ``rank-<r>.out`` and ``rank-<r>.err``. GPUs: ``gpusPerNode`` and the host's devices
    (``gpuPool``, the manifest's); which of them the ranks get is decided by the launcher when it starts."""
    spec = JobSpec.from_json(manifest["spec"])
    sid = str(manifest["schedulerId"])
    exec_dir = execution_dir(job_dir, restart)
    limits = spec.extension(Limits)
    ckpt = spec.extension(SharedCheckpoint)
    warning = spec.extension(CessationWarning)
    # a job made before the ledger recorded its first devices as gpuDevices: they are its pool now
    pool = [str(d) for d in manifest.get("gpuPool", manifest.get("gpuDevices", []))]
    gpus = spec.resources.gpus_per_node if pool else 0
    ranks = []
    for node in range(spec.nodes):
        for local in range(spec.procs_per_node):
            rank = node * spec.procs_per_node + local
            entry: dict[str, Any] = {
                "rank": rank,
                "localRank": local,
                "nodeRank": node,
                "stdout": os.path.join(exec_dir, f"rank-{rank}.out"),
                "stderr": os.path.join(exec_dir, f"rank-{rank}.err"),
            }
            ranks.append(entry)
    return {
        "jobId": manifest["jobId"],
        "submission": manifest["submission"],
        "schedulerId": sid,
        "restart": restart,
        "execution": execution_identity(int(manifest["submission"]), sid, restart),
        "argv": list(spec.command),
        "cwd": spec.working_dir or manifest["cwd"],
        "env": dict(spec.env),
        "nodes": spec.nodes,
        "procsPerNode": spec.procs_per_node,
        "timeLimit": spec.time_limit,
        "memoryMb": limits.memory_mb if limits else None,
        "grace": grace,
        "checkpointDir": ckpt.path if ckpt else None,
        "warning": {"signal": warning.signal, "seconds": warning.seconds} if warning else None,
        "gpusPerNode": gpus,
        "gpuPool": pool if gpus else [],
        "ranks": ranks,
        "umask": spec.umask,  # None: the launcher's own, which the submitting process passed on
    }


def render_plan(plan: dict[str, Any], state_dir: str) -> str:
    """The plan as shell-quoted commands a human can read (and could paste): one line per rank."""
    lines = [
        f"# local launch plan: job {plan['jobId']}, submission {plan['submission']}, "
        f"execution {plan['execution']} (nothing was started)",
        f"# state directory: {state_dir}",
        f"# {plan['nodes']} node(s) x {plan['procsPerNode']} rank(s); each node's ranks share one process group",
    ]
    if plan.get("timeLimit"):
        lines.append(f"# time limit: {plan['timeLimit']:g}s, then SIGTERM, SIGKILL after {plan['grace']:g}s")
    if plan.get("memoryMb"):
        lines.append(f"# memory limit: {plan['memoryMb']} MiB resident per rank (SIGKILL over it)")
    ranks = plan["ranks"]
    per_node = int(plan.get("gpusPerNode") or 0)
    if per_node:
        # a preview: the launcher takes the first free devices of the pool when it starts (dispatch.local.ledger)
        first = list(plan["gpuPool"])[: per_node * int(plan["nodes"])]
        ranks = [
            {**r, "gpus": rank_devices(first, per_node, int(plan["procsPerNode"]), r["nodeRank"], r["localRank"])}
            for r in ranks
        ]
        shares = " | ".join(",".join(r["gpus"]) or "-" for r in ranks)
        lines.append(
            f"# GPUs: CUDA_VISIBLE_DEVICES per rank {shares} when those are free; the launcher takes the first "
            f"{len(first)} free of {','.join(plan['gpuPool'])} when it starts, and waits while too few are free"
        )
    if plan.get("warning"):
        w = plan["warning"]
        lines.append(f"# cessation warning: SIG{w['signal']} {w['seconds']:g}s before SIGTERM (stop, requeue, limit)")
    lines.append("# MASTER_PORT is chosen free when the execution starts")
    for rank in ranks:
        env = dict(plan.get("env") or {})
        env.update(rank_env(plan, rank, "<free port>"))
        assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        argv = " ".join(shlex.quote(a) for a in plan["argv"])
        lines.append(
            f"(cd {shlex.quote(plan['cwd'])} && env {assigns} {argv}"
            f" >{shlex.quote(rank['stdout'])} 2>{shlex.quote(rank['stderr'])}) &"
        )
    return "\n".join(lines) + "\n"
