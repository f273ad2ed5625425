"""Progress on the real Slurm 22.05 cluster: a 2-node job's ranks report, and the supervisor's observation reads
every rank's report in the same script as squeue; the capability names the directory the ranks write to. Fails
loudly when the cluster is down."""

from __future__ import annotations

import re
import sys
import time

import pytest

from dispatch.adapterkit.progress import parse_report
from dispatch.capabilities import Capability
from dispatch.outcome import State
from dispatch.spec import JobSpec
from dispatch.spi import JobEvidence, RankProgress, StartRequest

from . import integration as it
from .clusters import open_backend

pytestmark = pytest.mark.slurm_local

REPORTER = (
    "import time\n"
    "from dispatch import job\n"
    "rank = job.context().rank\n"
    "for step in range(100000):\n"
    "    if rank == 0 or step == 0:\n"  # rank 1 reports once, then keeps running without reporting
    "        job.progress(step, total=100000, loss=1.0 / (step + 1))\n"
    "    time.sleep(0.1)\n"
)


def _progress(ev: JobEvidence) -> dict[int, RankProgress]:
    return {p.rank: p for p in ev.current.progress} if ev.current is not None else {}


def test_every_rank_s_report_arrives_in_the_observation_script() -> None:
    b = open_backend("local")
    sid = ""
    try:
        assert b.capabilities()[Capability.PROGRESS_REPORTING].yes
        spec = JobSpec(
            (sys.executable, "-c", REPORTER),
            nodes=2,
            time_limit=600,
            env={"PYTHONPATH": it.SRC, "DISPATCH_PROGRESS_INTERVAL": "0.5"},
        )
        sid, _ = it.run(b, spec)
        started = time.time()
        first = it.wait(b, sid, lambda e: len(_progress(e)) == 2, "both ranks report", timeout=120)
        assert first.outcome.state is State.RUNNING
        it.wait(b, sid, lambda e: _progress(e)[0].step >= _progress(first)[0].step + 10, "rank 0 moves on", timeout=60)
        one = b.scripts_run
        ev = b.inspect_many([sid])[sid]
        assert b.scripts_run - one == 1, "state and progress in one script"
        p = _progress(ev)
        assert p[1].step == 0 and p[1].total == 100000 and p[1].at <= p[0].at
        assert started - 60 < p[0].at <= time.time() + 1
        assert dict(p[0].metrics) == {"loss": pytest.approx(1.0 / (p[0].step + 1))}
        assert ev.current is not None and ev.current.identity.endswith(f".{sid}.0")
    finally:
        try:
            if sid:
                b.stop_job(sid)
        finally:
            b.close()


def test_the_capability_names_the_directory_slurm_creates() -> None:
    """ProgressReporting's text names the progress directory as the job's ranks make it: the text's path, with
    the job's output directory, marker and id put in, is where the report is (22.05 creates it)."""
    b = open_backend("local")
    sid = ""
    try:
        said = b.capabilities()[Capability.PROGRESS_REPORTING].reason
        found = re.search(r"(<output dir>/.*?/rank-<r>\.json)", said)
        assert found is not None, said
        spec = JobSpec(
            (sys.executable, "-c", "from dispatch import job; job.progress(7, total=9)"),
            env={"PYTHONPATH": it.SRC, "DISPATCH_PROGRESS_INTERVAL": "0"},
        )
        request = StartRequest("pdir", 1, it.marker(), spec)
        output_dir = b.build(request).output_dir
        sid = b.start(request)
        b.open(sid)
        ev = it.wait(b, sid, lambda e: e.outcome.state.ended, "the job ends", timeout=120)
        assert ev.outcome.state is State.SUCCEEDED, ev.outcome
        path = (
            found.group(1)
            .replace("<output dir>", output_dir.rstrip("/"))
            .replace("<cluster>", re.sub(r"[^A-Za-z0-9_.-]", "_", b.facts.cluster_name) or "slurm")
            .replace("<marker>", request.marker)
            .replace("<job id>", sid)
            .replace("<r>", "0")
        )
        with open(path, encoding="utf-8") as f:
            report = parse_report(f.read(), 0)
        assert report is not None and (report.step, report.total) == (7, 9), path
    finally:
        try:
            if sid:
                b.stop_job(sid)
        finally:
            b.close()
