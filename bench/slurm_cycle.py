"""Slurm rows of the cycle bench: the cost of one supervisor observation (inspect_many of every job).

    python bench/slurm_cycle.py --jobs 1,100,1000 --json

Brings the project's clusters up if they are down, creates N gated jobs on each cluster, then times one
batched observation of all of them and counts the Slurm commands and transport round trips it took.
Prints {"results": [{cluster, jobs, slurm_commands_per_cycle, ssh_round_trips_per_cycle, cycle_ms}, ...]}.
(The lead's bench/cycle.py may call :func:`rows` for its shared frame.)
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from _slurm_clusters import admin, clusters, settings_for


class CountingExecutor:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.scripts = 0
        self.calls = 0

    def run(self, script: str, timeout: float) -> Any:
        self.scripts += 1
        self.calls += sum(1 for line in script.splitlines() if line.startswith("_dsp_call "))
        return self.inner.run(script, timeout)

    def close(self) -> None:
        self.inner.close()


def rows(job_counts: list[int], names: list[str], cycles: int = 3) -> list[dict[str, Any]]:
    import dispatch.slurm as slurm
    from dispatch.settings import decode
    from dispatch.slurm.settings import SlurmSettings
    from dispatch.slurm.transport import make_transport
    from dispatch.spec import JobSpec
    from dispatch.spi import StartRequest

    out = []
    for name, desc in clusters(names).items():
        settings = decode(SlurmSettings, settings_for(desc))
        counter = CountingExecutor(make_transport(settings))
        b = slurm.new(settings, executor=counter)
        ids: list[str] = []
        tag = f"bc{int(time.time())}"
        try:
            for n in job_counts:
                while len(ids) < n:
                    k = len(ids) + 1
                    ids.append(b.start(StartRequest(tag, k, f"dsp-{tag}-{k}", JobSpec(("true",)))))
                best = None
                for _ in range(cycles):
                    s0, c0 = counter.scripts, counter.calls
                    t0 = time.perf_counter()
                    got = b.inspect_many(ids[:n])
                    ms = (time.perf_counter() - t0) * 1000
                    assert len(got) == n, f"saw {len(got)} of {n} jobs"
                    row = {
                        "cluster": name,
                        "jobs": n,
                        "slurm_commands_per_cycle": counter.calls - c0,
                        "ssh_round_trips_per_cycle": (counter.scripts - s0) if desc["transport"] == "ssh" else 0,
                        "scripts_per_cycle": counter.scripts - s0,
                        "cycle_ms": round(ms, 1),
                    }
                    best = row if best is None or row["cycle_ms"] < best["cycle_ms"] else best
                out.append(best)
        finally:
            for i in range(0, len(ids), 500):
                admin(desc, "scancel", *ids[i : i + 500])
            b.close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Slurm commands and SSH round trips per supervisor cycle")
    p.add_argument("--jobs", default="1,100,1000")
    p.add_argument("--clusters", default="local,sid")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    res = rows([int(x) for x in a.jobs.split(",")], a.clusters.split(","))
    print(json.dumps({"results": res}, indent=None if a.json else 2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
