"""Progress on the local adapter: each rank's reports reach the evidence of its running execution, read with
the job's state."""

from __future__ import annotations

import sys
import time

from dispatch.capabilities import Capability
from dispatch.local import LocalBackend
from dispatch.outcome import State
from dispatch.spec import JobSpec
from dispatch.spi import JobEvidence, RankProgress, StartRequest

REPORTER = (
    "import os, time\n"
    "from dispatch import job\n"
    "rank = job.context().rank\n"
    "step = 0\n"
    "while True:\n"
    "    if rank == 0 or step == 0:\n"  # rank 1 reports once, then hangs
    "        job.progress(step, total=1000, loss=1.0 / (step + 1))\n"
    "    step += 1\n"
    "    time.sleep(0.05)\n"
)


def _progress(ev: JobEvidence) -> dict[int, RankProgress]:
    assert ev.current is not None
    return {p.rank: p for p in ev.current.progress}


def _wait(pred, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def test_every_rank_s_last_report_is_on_the_running_execution_s_evidence(backend: LocalBackend) -> None:
    assert backend.capabilities()[Capability.PROGRESS_REPORTING].yes
    spec = JobSpec(
        command=(sys.executable, "-c", REPORTER), nodes=2, procs_per_node=1, env={"DISPATCH_PROGRESS_INTERVAL": "0"}
    )
    sid = backend.start(StartRequest("job1", 1, "dsp-job1-1", spec))
    backend.open(sid)
    before = time.time()
    _wait(lambda: len(_progress(backend.inspect(sid))) == 2 and _progress(backend.inspect(sid))[0].step >= 3)
    first = _progress(backend.inspect(sid))
    assert first[1].step == 0 and first[1].total == 1000 and dict(first[1].metrics) == {"loss": 1.0}
    assert before - 5 <= first[1].at <= time.time()
    _wait(lambda: _progress(backend.inspect_many([sid])[sid])[0].step > first[0].step)
    later = _progress(backend.inspect_many([sid])[sid])
    assert later[0].at > first[0].at and later[1] == first[1]  # rank 1 stopped reporting: its report stays
    backend.stop_job(sid)
    ended = backend.wait_ended(sid, 15)
    assert ended.outcome.state is State.CANCELLED
    assert ended.current is not None and ended.current.progress == ()  # only a running execution's is read
