"""Where ``Operator.submit_many`` of N alike jobs spends its time on each Slurm test cluster: wall seconds of the
whole call and of the pieces it is made of, measured by wrapping them (one batch per round, best round kept by
total):

* ``create_many_s`` / ``update_many_s``: the record store's batched writes (SQLite, a temporary file);
* ``build_s``: building the jobs' sbatch options and scripts; ``start_many_s``: the backend's whole start
  (build, ``sbatch --array``, its script's round trip); ``open_many_s``: opening every gate;
* ``scripts_s``: the round trips of the backend's scripts (inside ``start_many_s`` and ``open_many_s``);
* ``other_s``: the rest (the core's own work between the phases).

With ``--one``, ``Operator.submit`` one job at a time instead, in milliseconds per job: ``create_ms`` /
``update_ms`` (the record's writes), ``start_ms`` and ``open_ms`` (the backend's two calls), ``scripts_ms`` (their
scripts' round trips), ``other_ms`` (the rest: the core's own work).

    python bench/submit_phases.py --jobs 1000 --clusters local,trixie,sid --rounds 2 --json
    python bench/submit_phases.py --one --jobs 200 --clusters local,trixie,sid --rounds 3 --json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from typing import Any

from _slurm_clusters import admin, clusters, settings_for

SPENT: dict[str, float] = {}


def timed(owner: Any, name: str, label: str) -> None:
    """Wrap ``owner.name`` so its wall time adds up under ``label``."""
    orig: Callable[..., Any] = getattr(owner, name)

    def wrap(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return orig(*args, **kwargs)
        finally:
            SPENT[label] = SPENT.get(label, 0.0) + time.perf_counter() - t

    setattr(owner, name, wrap)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--clusters", default="local,trixie,sid")
    p.add_argument("--json", action="store_true")
    p.add_argument("--one", action="store_true", help="Operator.submit one job at a time (milliseconds per job)")
    a = p.parse_args()
    if a.one:
        one_by_one(a)
        return

    import dispatch
    from dispatch.records import SQLiteRecords
    from dispatch.records import sqlite as store_module
    from dispatch.slurm import backend as backend_module
    from dispatch.slurm.core import SlurmCore
    from dispatch.slurm.submission import Submission
    from dispatch.spec import JobSpec

    timed(store_module.SQLiteRecords, "create_many", "create_many_s")
    timed(store_module.SQLiteRecords, "update_many", "update_many_s")
    timed(Submission, "build", "build_s")
    timed(backend_module.SlurmBackend, "start_many", "start_many_s")
    timed(backend_module.SlurmBackend, "open_many", "open_many_s")
    timed(SlurmCore, "run", "scripts_s")
    results = []
    for name, desc in clusters(a.clusters.split(",")).items():
        best: dict[str, Any] | None = None
        for _ in range(a.rounds):
            with tempfile.TemporaryDirectory() as tmp:
                cluster = dispatch.open(
                    "slurm", adapter=settings_for(desc), records=SQLiteRecords(f"{tmp}/r.db"), name=f"bench-{name}"
                )
                arrays: list[str] = []
                try:
                    SPENT.clear()
                    t0 = time.perf_counter()
                    got = cluster.operator.submit_many([JobSpec(("true",))] * a.jobs)
                    total = time.perf_counter() - t0
                    assert all(g.ok for g in got), [g.error for g in got if not g.ok][:1]
                    sids = [str(getattr(cluster.get(g.job_id).current, "scheduler_id", "")) for g in got]
                    arrays = sorted({sid.split("_")[0] for sid in sids})
                    release = getattr(cluster.backend, "unrestricted", cluster.backend).slurm_release
                finally:
                    if arrays:
                        admin(desc, "scancel", *arrays)
                    cluster.close()
            row = {k: round(v, 3) for k, v in sorted(SPENT.items())}
            row["other_s"] = round(
                total
                - sum(SPENT.get(k, 0.0) for k in ("create_many_s", "update_many_s", "start_many_s", "open_many_s")),
                3,
            )
            row.update(cluster=name, release=release, jobs=a.jobs, arrays=len(arrays), total_s=round(total, 3))
            if best is None or row["total_s"] < best["total_s"]:
                best = row
        results.append(best)
    print(json.dumps({"results": results}, indent=None if a.json else 2))


def one_by_one(a: argparse.Namespace) -> None:
    """``--one``: where one submission at a time spends its time (best round by total)."""
    import dispatch
    from dispatch.records import SQLiteRecords
    from dispatch.records import sqlite as store_module
    from dispatch.slurm import backend as backend_module
    from dispatch.slurm.core import SlurmCore
    from dispatch.spec import JobSpec

    timed(store_module.SQLiteRecords, "create", "create")
    timed(store_module.SQLiteRecords, "update", "update")
    timed(backend_module.SlurmBackend, "start", "start")
    timed(backend_module.SlurmBackend, "open", "open")
    timed(SlurmCore, "run", "scripts")
    results = []
    for name, desc in clusters(a.clusters.split(",")).items():
        best: dict[str, Any] | None = None
        for _ in range(a.rounds):
            with tempfile.TemporaryDirectory() as tmp:
                cluster = dispatch.open(
                    "slurm", adapter=settings_for(desc), records=SQLiteRecords(f"{tmp}/r.db"), name=f"bench-{name}"
                )
                ids: list[str] = []
                try:
                    ids.append(cluster.operator.submit(JobSpec(("true",))))  # preflight, the admin level: not timed
                    SPENT.clear()
                    t0 = time.perf_counter()
                    ids += [cluster.operator.submit(JobSpec(("true",))) for _ in range(a.jobs)]
                    total = time.perf_counter() - t0
                    release = getattr(cluster.backend, "unrestricted", cluster.backend).slurm_release
                finally:
                    sids = [str(getattr(cluster.get(j).current, "scheduler_id", "")) for j in ids]
                    for i in range(0, len(sids), 500):
                        admin(desc, "scancel", *sids[i : i + 500])
                    cluster.close()
            row = {f"{k}_ms": round(1000 * v / a.jobs, 2) for k, v in sorted(SPENT.items())}
            spent = sum(SPENT.get(k, 0.0) for k in ("create", "update", "start", "open"))
            row["other_ms"] = round(1000 * (total - spent) / a.jobs, 2)
            row.update(cluster=name, release=release, jobs=a.jobs, total_ms=round(1000 * total / a.jobs, 2))
            if best is None or row["total_ms"] < best["total_ms"]:
                best = row
        results.append(best)
    print(json.dumps({"results": results}, indent=None if a.json else 2))


if __name__ == "__main__":
    main()
