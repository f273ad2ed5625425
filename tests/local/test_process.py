"""Starting the detached launcher: a start that is not confirmed in time never leads to a second launcher."""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from dispatch.clock import SystemClock
from dispatch.errors import Unavailable
from dispatch.local import LocalBackend, process
from dispatch.local.layout import JobFiles
from dispatch.outcome import State
from dispatch.spec import JobSpec
from dispatch.spi import StartRequest

SLOW_FORK = """
import os, runpy, sys, time
flag, delay, side = {flag!r}, {delay!r}, {side!r}
real_fork = os.fork
def slow_fork():
    first = not os.path.exists(flag)
    if first:
        open(flag, "w").close()
    pid = real_fork()
    if first and (pid == 0) == (side == "child"):
        time.sleep(delay)
    return pid
os.fork = slow_fork
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""

TIMEOUT = 0.5
DELAY = 2.0


def slow_python(tmp_path: Path, side: str) -> str:
    """An interpreter for the launcher whose first launch is slow right after its fork, on ``side`` (the
    launcher's child before it runs anything, or its parent before it confirms), past the spawn timeout."""
    script = tmp_path / "slow_fork.py"
    script.write_text(SLOW_FORK.format(flag=str(tmp_path / "forked-once"), delay=DELAY, side=side))
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


@pytest.mark.parametrize("side", ["child", "parent"])
def test_a_start_slow_past_the_timeout_never_runs_a_second_launcher(
    tmp_path: Path, side: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(process, "SPAWN_TIMEOUT", TIMEOUT)
    backend = LocalBackend(tmp_path / "state", SystemClock(), grace=1.0, python=slow_python(tmp_path, side))
    runs = tmp_path / "runs"
    spec = JobSpec(command=("sh", "-c", f"echo run >> {runs}"))
    sid = backend.start(StartRequest("job1", 1, "dsp-job1-1", spec))
    began = time.monotonic()
    first: Unavailable | None = None
    try:
        backend.open(sid)
    except Unavailable as exc:
        first = exc
    assert time.monotonic() - began >= TIMEOUT, "the start was slow past the timeout"
    with contextlib.suppress(Unavailable):
        backend.open(sid)  # what a supervisor does after a failed open: try again
    assert backend.wait_ended(sid, 15).outcome.state is State.SUCCEEDED
    time.sleep(max(0.0, began + DELAY + 1.5 - time.monotonic()))  # the slow side has long woken up
    assert runs.read_text().splitlines() == ["run"], "exactly one launcher ran the job"
    job = JobFiles.read(backend.job_dir(sid))
    assert job is not None and [e.restart for e in job.executions] == [0]
    if side == "child":  # the spawner won the claim: that launcher never runs, and the error says so
        assert first is not None and "never will" in str(first)
    else:  # the launcher claimed the start first: it runs, and the open succeeded
        assert first is None


def test_the_marker_goes_only_when_the_launcher_provably_never_runs(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path / "state", SystemClock(), grace=1.0, python=str(tmp_path / "no-such-python"))
    sid = backend.start(StartRequest("job1", 1, "dsp-job1-1", JobSpec(command=("true",))))
    with pytest.raises(Unavailable, match="cannot start the local launcher"):
        backend.open(sid)
    job = JobFiles.read(backend.job_dir(sid))
    assert job is not None and job.executions[0].spawned is None, "nothing started: it may be started again"
    claims = [n for n in os.listdir(job.executions[0].dir) if n.startswith("claim.")]
    assert len(claims) == 1, "the spawner took the claim of the start that failed"
