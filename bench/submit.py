"""Submission throughput: dispatch (start + open, one script each over a shared connection) versus a plain
loop of ``sbatch`` (``ssh host sbatch`` for an SSH cluster, a new connection each time), same cluster, same run.

    python bench/submit.py --json [--count 20] [--clusters local,sid]

Prints {"results": [{cluster, count, dispatch_jobs_per_s, plain_jobs_per_s, ratio}, ...]}.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import time
from typing import Any

from _slurm_clusters import admin, clusters, settings_for


def plain_argv(desc: dict[str, Any], partition: str) -> list[str]:
    cmd = ["sbatch", "--parsable", "--hold", "-p", partition, "-o", "/dev/null", "--wrap", "true"]
    if desc["transport"] == "ssh":
        return ["ssh", *desc["ssh_options"], f"{desc['user']}@{desc['host']}", shlex.join(cmd)]
    return ["env", *(f"{k}={v}" for k, v in (desc.get("env") or {}).items()), *cmd]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--count", type=int, default=20)
    p.add_argument("--clusters", default="local,sid")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()

    import dispatch.slurm as slurm
    from dispatch.spec import JobSpec
    from dispatch.spi import StartRequest

    results = []
    for name, desc in clusters(a.clusters.split(",")).items():
        b = slurm.new(settings_for(desc))
        ids: list[str] = []
        tag = f"bs{int(time.time())}"
        try:
            t0 = time.perf_counter()
            for k in range(1, a.count + 1):
                sid = b.start(StartRequest(tag, k, f"dsp-{tag}-{k}", JobSpec(("true",))))
                ids.append(sid)
            d_rate = a.count / (time.perf_counter() - t0)
            argv = plain_argv(desc, desc["partitions"]["default"])
            t0 = time.perf_counter()
            for _ in range(a.count):
                ids.append(subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip())
            p_rate = a.count / (time.perf_counter() - t0)
        finally:
            for i in range(0, len(ids), 500):
                admin(desc, "scancel", *ids[i : i + 500])
            b.close()
        results.append(
            {
                "cluster": name,
                "count": a.count,
                "dispatch_jobs_per_s": round(d_rate, 2),
                "plain_jobs_per_s": round(p_rate, 2),
                "ratio": round(d_rate / p_rate, 3),
            }
        )
    print(json.dumps({"results": results}, indent=None if a.json else 2))


if __name__ == "__main__":
    main()
