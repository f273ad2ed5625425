"""Progress on the real Slurm 22.05 cluster: a 2-node job's ranks report, and the supervisor's observation reads
every rank's report in the same script as squeue. Fails loudly when the cluster is down."""

from __future__ import annotations

import sys
import time

import pytest

from dispatch.capabilities import Capability
from dispatch.outcome import State
from dispatch.spec import JobSpec
from dispatch.spi import JobEvidence, RankProgress

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
