"""``dispatch run`` of a short two-node job against ``sbatch -W`` of the same job, per real cluster.

    python bench/run_latency.py --json [--clusters local,trixie,sid] [--repeat 3] [--seconds 1]

Both run ``sleep SECONDS`` on every rank of two nodes: ``dispatch -c NAME run -N 2 -q -- sleep 1`` as a
fresh process (config in a temporary XDG directory, records in a temporary SQLite store) against
``sbatch -W -N 2 --wrap 'srun sleep 1'`` (``ssh host sbatch -W ...`` for an SSH cluster). Median of
``--repeat`` runs each, interleaved. Prints {"results": [{cluster, release, dispatch_run_s, sbatch_w_s,
run_latency_ratio}, ...]}.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from _slurm_clusters import cli_env, clusters, settings_for

ENTRY = "import sys; from dispatch.cli.main import main; sys.exit(main())"


def sbatch_w(desc: dict[str, Any], seconds: float) -> list[str]:
    cmd = [
        "sbatch",
        "-W",
        "-N",
        "2",
        "-p",
        desc["partitions"]["default"],
        "-o",
        "/dev/null",
        "--wrap",
        f"srun sleep {seconds:g}",
    ]
    if desc["transport"] == "ssh":
        return ["ssh", *desc["ssh_options"], f"{desc['user']}@{desc['host']}", shlex.join(cmd)]
    return ["env", *(f"{k}={v}" for k, v in (desc.get("env") or {}).items()), *cmd]


def wall(argv: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)[:200]}: rc={proc.returncode} {proc.stderr.strip()[-500:]}")
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clusters", default="local,trixie,sid")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seconds", type=float, default=1.0)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    results = []
    for name, desc in clusters(a.clusters.split(",")).items():
        with tempfile.TemporaryDirectory() as home:
            env = cli_env(home, name, settings_for(desc))
            run = [sys.executable, "-c", ENTRY, "-c", name, "run", "-N", "2", "-q", "--", "sleep", f"{a.seconds:g}"]
            wall(run, env)  # warm: preflight cache, SSH connection
            d, s = [], []
            for _ in range(a.repeat):
                d.append(wall(run, env))
                s.append(wall(sbatch_w(desc, a.seconds)))
        dm, sm = statistics.median(d), statistics.median(s)
        results.append(
            {
                "cluster": name,
                "release": desc["version"],
                "transport": desc["transport"],
                "dispatch_run_s": round(dm, 2),
                "sbatch_w_s": round(sm, 2),
                "run_latency_ratio": round(dm / sm, 2),
                "dispatch_runs_s": [round(x, 2) for x in d],
                "sbatch_w_runs_s": [round(x, 2) for x in s],
            }
        )
    print(json.dumps({"results": results}, indent=None if a.json else 2))


if __name__ == "__main__":
    main()
