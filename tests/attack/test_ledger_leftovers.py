"""ATTACK finding: the local adapter leaves a rank's children running after the job ended, and the GPU ledger then
gives their device to the next job.

A rank that starts a process with Python's ``subprocess`` (descriptors closed by default: it holds no lock) and
exits 0 makes the execution ``succeeded``; the launcher releases the device, and nothing kills what is left in
the node's process group (Slurm's step end kills the step's cgroup). The next job is given the device while the
first job's process still runs on it. Marked xfail(strict): it fails today; it passes once the launcher ends
what is left of each node's process group when the execution ends."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dispatch.clock import SystemClock
from dispatch.local import LocalBackend
from dispatch.outcome import State
from dispatch.resources import Resources
from dispatch.spec import JobSpec
from dispatch.spi import StartRequest


@pytest.fixture
def one_gpu(tmp_path: Path) -> Iterator[LocalBackend]:
    b = LocalBackend(tmp_path / "state", SystemClock(), grace=1.0, gpus=["0"])
    yield b
    for sid in (p.name for p in (tmp_path / "state" / "jobs").iterdir()):
        with contextlib.suppress(Exception):
            b.stop_job(sid)


def _open(b: LocalBackend, spec: JobSpec, job: str) -> str:
    sid = b.start(StartRequest(job, 1, f"m-{job}", spec))
    b.open(sid)
    return sid


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.xfail(strict=True, reason="ATTACK: a rank's leftover child outlives the job and its device is reused")
def test_a_ranks_leftover_child_does_not_outlive_the_job_on_its_device(one_gpu: LocalBackend, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    code = (
        f"import subprocess, sys; p = subprocess.Popen(['sleep', '60']); open({str(pidfile)!r}, 'w').write(str(p.pid))"
    )
    a = _open(one_gpu, JobSpec((sys.executable, "-c", code), resources=Resources(gpus_per_node=1)), "job-a")
    assert one_gpu.wait_ended(a, 60).outcome.state is State.SUCCEEDED
    child = int(pidfile.read_text())
    try:
        b = _open(one_gpu, JobSpec(("sleep", "30"), resources=Resources(gpus_per_node=1)), "job-b")
        deadline = time.monotonic() + 30
        while one_gpu.inspect(b).outcome.state is not State.RUNNING and time.monotonic() < deadline:
            time.sleep(0.1)
        running_b = one_gpu.inspect(b).outcome.state is State.RUNNING
        assert not (running_b and _alive(child)), "job b holds device 0 while job a's process still runs on it"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, 9)
