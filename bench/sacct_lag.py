"""Accounting lag: how long after a job ends can ``sacct`` still not find it by its name?

    python bench/sacct_lag.py --clusters local,trixie,sid --jobs 10 --json

On each cluster, submits ``--jobs`` one-second jobs one after another. For each, polls ``sacct -j ID`` (every
0.1 s) until accounting shows it ended, then at once asks what a finder asks: a window query by the job's name
(``-S`` two minutes back, ``-E now``, ``--name``). Then polls until accounting's row carries the job's name and
eligible time, and reports how long after the first ended reading that took.

On Slurm 22.05 a job that starts at once can end in accounting before slurmdbd has the job's own record: the
row is a stand-in named ``allocation`` with no eligible time, so no query by name (or by time window, which
selects by eligible time) returns it until the record arrives. The adapter's finder asks ``squeue`` as well,
which holds an ended job for ``MinJobAge``; docs/adapters/slurm.md ("Accounting lags") says why the gap is
harmless to the supervisor.

Prints ``{"results": [{cluster, release, jobs, ended_as_stand_in, by_name_missed, lag_max_s}, ...]}``.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from typing import Any

from _slurm_clusters import clusters

from dispatch.slurm.harness import admin

ACTIVE = ("PENDING", "RUNNING", "REQUEUED", "SUSPENDED")


def sacct(desc: dict[str, Any], *argv: str) -> str:
    return admin(desc, "sacct", "-a", "-X", "-D", "-n", "-P", *argv).stdout.strip()


def one_job(desc: dict[str, Any], name: str) -> dict[str, Any]:
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 120))
    out = admin(desc, "sbatch", "--parsable", "-J", name, "-A", desc["account"], "-o", "/dev/null", "--wrap", "sleep 1")
    jid = out.stdout.strip().split(";")[0]
    deadline = time.time() + 120
    row = ""
    while time.time() < deadline:
        row = sacct(desc, "-j", jid, "-o", "State,JobName%200,Eligible")
        state = row.split("|")[0]
        if state and state.split()[0] not in ACTIVE:
            break
        time.sleep(0.1)
    else:
        raise SystemExit(f"job {jid} on {desc['cluster_name']} had not ended in accounting after 120 s")
    ended_at = time.time()
    stand_in = row.split("|")[1] != name
    by_name = jid in sacct(desc, "-S", since, "-E", "now", f"--name={name}", "-o", "JobIDRaw").split()
    while row.split("|")[1] != name or row.split("|")[2] in ("", "Unknown"):
        if time.time() > deadline:
            raise SystemExit(f"job {jid} on {desc['cluster_name']}: accounting still shows {row!r} after 120 s")
        time.sleep(0.1)
        row = sacct(desc, "-j", jid, "-o", "State,JobName%200,Eligible")
    return {"stand_in": stand_in, "by_name": by_name, "lag_s": time.time() - ended_at if stand_in else 0.0}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clusters", default="local", help="comma-separated: local, trixie, sid")
    p.add_argument("--jobs", type=int, default=10)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    rows = []
    for name, desc in clusters(args.clusters.split(",")).items():
        tag = f"lag-{secrets.token_hex(4)}"
        runs = [one_job(desc, f"{tag}-{i}") for i in range(args.jobs)]
        rows.append(
            {
                "cluster": name,
                "release": desc["version"],
                "jobs": args.jobs,
                "ended_as_stand_in": sum(r["stand_in"] for r in runs),
                "by_name_missed": sum(not r["by_name"] for r in runs),
                "lag_max_s": round(max(r["lag_s"] for r in runs), 2),
            }
        )
    print(json.dumps({"results": rows}, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
