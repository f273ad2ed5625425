"""What a rank leaves running is ended with its execution, before its GPUs go to the next job
(dispatch.local.launcher: the launcher is the ranks' child subreaper).

A rank that starts a process with Python's ``subprocess`` (descriptors closed by default: it holds no lock of
the GPU ledger) and exits 0 makes the execution ``succeeded``; that process is killed before the device is
released, as Slurm's step end kills the step's cgroup, so the next job never shares the device with it."""

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
        assert one_gpu.inspect(b).outcome.state is State.RUNNING, "job b got the device"
        assert not _alive(child), "job b holds device 0 while job a's process still runs on it"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, 9)
