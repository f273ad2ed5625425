"""Submission throughput on the real clusters, same cluster, same run:

* ``dispatch_jobs_per_s``: ``Operator.submit`` one job at a time (record, start gated, record, open: two
  scripts per job over the shared connection);
* ``batched_jobs_per_s``: ``Operator.submit_many`` of all of them (one script per phase; on Slurm the jobs,
  alike but for their commands, go as one job array per ``MaxArraySize`` tasks);
* ``plain_jobs_per_s``: a loop of bare ``sbatch --hold`` (``ssh host sbatch`` for an SSH cluster: a new
  connection each time, as a shell loop does);
* ``local_loop_jobs_per_s``: a bare ``sbatch --hold`` loop run by one shell on the login node itself (over one
  ``ssh`` for an SSH cluster): what a user logged in there gets.

    python bench/submit.py --jobs 100 --json [--clusters local,trixie,sid] [--rounds 3] [--ways one,batched,plain,loop]

``--ways`` picks the rows measured (default: all; ``one`` is the slowest at a thousand jobs); ``--plain-jobs``
sets the plain loop's count apart (over SSH each of its jobs opens its own connection, so its rate does not
depend on the count, and a thousand take minutes). Records go to a
temporary SQLite store. Prints {"results": [{cluster, release, jobs, <way>_jobs_per_s..., batched_over_plain,
batched_over_local_loop, dispatch_over_plain}, ...]} (a ratio is null when a way was not measured).
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import tempfile
import time
from typing import Any

from _slurm_clusters import admin, clusters, settings_for


def plain_argv(desc: dict[str, Any], partition: str) -> list[str]:
    cmd = ["sbatch", "--parsable", "--hold", "-p", partition, "-o", "/dev/null", "--wrap", "true"]
    if desc["transport"] == "ssh":
        return ["ssh", *desc["ssh_options"], f"{desc['user']}@{desc['host']}", shlex.join(cmd)]
    return ["env", *(f"{k}={v}" for k, v in (desc.get("env") or {}).items()), *cmd]


def loop_argv(desc: dict[str, Any], partition: str, jobs: int) -> list[str]:
    """One shell on the login node running ``jobs`` bare ``sbatch --hold`` calls, printing their ids."""
    one = shlex.join(["sbatch", "--parsable", "--hold", "-p", partition, "-o", "/dev/null", "--wrap", "true"])
    script = f'i=0; while [ "$i" -lt {int(jobs)} ]; do {one} || exit 1; i=$((i+1)); done'
    if desc["transport"] == "ssh":
        return ["ssh", *desc["ssh_options"], f"{desc['user']}@{desc['host']}", shlex.join(["bash", "-c", script])]
    return ["env", *(f"{k}={v}" for k, v in (desc.get("env") or {}).items()), "bash", "-c", script]


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 2) if a and b else None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=100)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--clusters", default="local,trixie,sid")
    p.add_argument("--json", action="store_true")
    p.add_argument("--ways", default="one,batched,plain,loop")
    p.add_argument("--plain-jobs", type=int, default=0, help="jobs of the plain loop (default --jobs)")
    a = p.parse_args()
    ways = set(a.ways.split(","))

    import dispatch
    from dispatch.records import SQLiteRecords
    from dispatch.spec import JobSpec

    spec = JobSpec(("true",))
    results = []
    for name, desc in clusters(a.clusters.split(",")).items():
        with tempfile.TemporaryDirectory() as tmp:
            store = SQLiteRecords(f"{tmp}/records.db")
            cluster = dispatch.open("slurm", adapter=settings_for(desc), records=store, name=f"bench-{name}")
            sids: list[str] = []
            d_rate = b_rate = p_rate = l_rate = 0.0
            try:
                # rounds interleave the three ways, so the shared machine's load hits them alike; best of each
                for _ in range(a.rounds):
                    one: list[str] = []
                    if "one" in ways:
                        t0 = time.perf_counter()
                        one = [cluster.operator.submit(spec) for _ in range(a.jobs)]
                        d_rate = max(d_rate, a.jobs / (time.perf_counter() - t0))
                    many = []
                    if "batched" in ways:
                        t0 = time.perf_counter()
                        many = cluster.operator.submit_many([spec] * a.jobs)
                        b_rate = max(b_rate, a.jobs / (time.perf_counter() - t0))
                        failed = [m for m in many if not m.ok]
                        assert not failed, f"{len(failed)} batched submissions failed: {failed[0].error}"
                    for job_id in [*one, *(m.job_id for m in many)]:
                        sub = cluster.get(job_id).current
                        if sub is not None and sub.scheduler_id:
                            sids.append(sub.scheduler_id.split("_")[0])
                    if "plain" in ways:
                        argv = plain_argv(desc, desc["partitions"]["default"])
                        plain = a.plain_jobs or a.jobs
                        t0 = time.perf_counter()
                        for _ in range(plain):
                            sids.append(subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip())
                        p_rate = max(p_rate, plain / (time.perf_counter() - t0))
                    if "loop" in ways:
                        argv = loop_argv(desc, desc["partitions"]["default"], a.jobs)
                        t0 = time.perf_counter()
                        out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
                        l_rate = max(l_rate, a.jobs / (time.perf_counter() - t0))
                        sids.extend(line.split(";")[0] for line in out.split() if line.strip())
                release = getattr(cluster.backend, "unrestricted", cluster.backend).slurm_release
            finally:
                sids = list(dict.fromkeys(sids))  # an array's tasks are cancelled with the array
                for i in range(0, len(sids), 500):
                    admin(desc, "scancel", *sids[i : i + 500])
                cluster.close()
        results.append(
            {
                "cluster": name,
                "release": release,
                "transport": desc["transport"],
                "jobs": a.jobs,
                "plain_jobs": a.plain_jobs or a.jobs,
                "dispatch_jobs_per_s": round(d_rate, 2),
                "batched_jobs_per_s": round(b_rate, 2),
                "plain_jobs_per_s": round(p_rate, 2),
                "local_loop_jobs_per_s": round(l_rate, 2),
                "batched_over_plain": _ratio(b_rate, p_rate),
                "batched_over_local_loop": _ratio(b_rate, l_rate),
                "dispatch_over_plain": _ratio(d_rate, p_rate),
            }
        )
    print(json.dumps({"results": results}, indent=None if a.json else 2))


if __name__ == "__main__":
    main()
