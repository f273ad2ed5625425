"""Benchmark: the Kubeflow adapter's steady-state cost and event latency against the fake API server.

For each job count N: N TrainJobs are started and opened (plain mode) on a fake cluster over HTTP; then, for
a steady-state window, a supervisor-like loop calls ``inspect_many`` on all of them every 0.5 s.

* ``requests_per_job_per_minute``: apiserver requests made during the window, other than the open watch
  streams, per job per minute (the design says 0: reads come from the watch cache).
* ``event_to_record_ms``: median time from a change being written to the apiserver (an annotation patched on
  a TrainJob by another client) to the adapter's cache showing it through ``inspect``, over a sample of jobs.

The fake's reactors are switched off (``auto_reconcile=False``): its Trainer/JobSet/Kueue model costs
O(objects) per write and makes 1000 running jobs impractical, so the jobs stay waiting (gate open, no JobSet).
The adapter's read path (watch -> cache -> inspect) is the same for running jobs.

Usage: ``PYTHONPATH=src python bench/kubeflow_cycle.py --jobs 1,100,1000 --json``. Prints ``{"results": [...]}``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lightkube import Client, KubeConfig
from lightkube.types import PatchType

from dispatch.clock import SYSTEM_CLOCK
from dispatch.extensions import Image
from dispatch.kubeflow import KubeflowSettings, open_backend
from dispatch.kubeflow import names as n
from dispatch.kubeflow.backend import KubeflowBackend
from dispatch.kubeflow.client import TrainJob
from dispatch.kubeflow.extensions import RuntimeRef
from dispatch.registry import OpenOptions
from dispatch.settings import decode
from dispatch.spec import JobSpec
from dispatch.spi import StartRequest
from dispatch_kubetest import FakeAPIServer

WINDOW = 5.0
SAMPLE = 20


def run(jobs: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp())
    server = FakeAPIServer(bookmark_interval=1.0, auto_reconcile=False)
    server.start()
    c = server.control
    try:
        c.add_node("worker-0")
        c.add_runtime(num_nodes=1)
        kubeconfig = server.write_kubeconfig(tmp / "kubeconfig", token="bench", namespace="default")
        settings = decode(
            KubeflowSettings,
            {
                "kubeconfig": {"path": str(kubeconfig)},
                "preflight": {"probe": False},
                "timeouts": {"apiserverRequest": "120s"},
            },
        )
        b = open_backend(settings, OpenOptions(clock=SYSTEM_CLOCK))
        assert isinstance(b, KubeflowBackend)
        spec = JobSpec(
            command=("sleep", "inf"), nodes=1, extensions=(Image("bench:1"), RuntimeRef("torch-distributed"))
        )
        sids = [b.start(StartRequest(f"b{i:05d}", 1, f"dsp-b{i:05d}-1", spec)) for i in range(jobs)]
        for sid in sids:
            b.open(sid)
        deadline = time.monotonic() + 120
        while len(b.inspect_many(sids)) < jobs or any(ev.gate.value != "open" for ev in b.inspect_many(sids).values()):
            if time.monotonic() > deadline:
                raise RuntimeError("the cache did not show every job open within 120 s")
            time.sleep(0.1)
        # steady state: a supervisor's reads, no writes
        before = len(server.requests())
        t0 = time.monotonic()
        cycles = 0
        while time.monotonic() - t0 < WINDOW:
            b.inspect_many(sids)
            cycles += 1
            time.sleep(0.5)
        elapsed = time.monotonic() - t0
        t1 = time.perf_counter()
        b.inspect_many(sids)
        inspect_ms = (time.perf_counter() - t1) * 1000.0
        extra = [r for r in server.requests()[before:] if "watch=" not in r.query]
        per_job_minute = len(extra) / jobs / (elapsed / 60.0)
        # event -> record latency: another client writes, the adapter's cache must show it
        other = Client(KubeConfig.from_file(str(kubeconfig)), namespace="default")
        other.patch(TrainJob, sids[0], {"metadata": {"annotations": {"bench/warm": "1"}}}, patch_type=PatchType.MERGE)
        latencies = []
        for i in range(SAMPLE):
            sid = sids[i % jobs]
            mark = f"bench{i}"
            start = time.perf_counter()
            other.patch(TrainJob, sid, {"metadata": {"annotations": {n.HOLDS: mark}}}, patch_type=PatchType.MERGE)
            while mark not in b.inspect(sid).holds:
                if time.perf_counter() - start > 30:
                    raise RuntimeError(f"{sid}: the change never reached the cache")
                time.sleep(0.0002)
            latencies.append((time.perf_counter() - start) * 1000.0)
        other.close()
        b.close()
        return {
            "jobs": jobs,
            "requests_per_job_per_minute": round(per_job_minute, 3),
            "event_to_record_ms": round(statistics.median(latencies), 2),
            "event_to_record_ms_max": round(max(latencies), 2),
            "inspect_many_cycles": cycles,
            "inspect_many_ms": round(inspect_ms, 2),
            "window_s": round(elapsed, 2),
        }
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--jobs", default="1,100,1000")
    p.add_argument("--json", action="store_true", help="print JSON (the only output format)")
    a = p.parse_args(argv)
    counts = [int(x) for x in a.jobs.split(",") if x.strip()]
    results = [run(n) for n in counts]
    print(json.dumps({"adapter": "kubeflow", "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
