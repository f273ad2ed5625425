"""Starting the detached launcher: a start that is not confirmed in time never leads to a second launcher."""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dispatch.clock import SystemClock
from dispatch.errors import Unavailable
from dispatch.local import LocalBackend
from dispatch.local.layout import JobFiles
from dispatch.outcome import State
from dispatch.spec import JobSpec
from dispatch.spi import StartRequest

SLOW_FORK = """
import os, runpy, sys, time
state, side = {state!r}, {side!r}
def wait_for(name):
    while not os.path.exists(os.path.join(state, name)):
        time.sleep(0.02)
first = [False]
real_fork, real_setsid = os.fork, os.setsid
def slow_fork():
    first[0] = not os.path.exists(os.path.join(state, "forked"))
    pid = real_fork()
    if first[0] and pid != 0:
        open(os.path.join(state, "forked"), "w").close()
        if side == "parent":
            wait_for("release")  # the launcher runs; its parent is stuck before it confirms the start
    return pid
def slow_setsid():
    real_setsid()  # the launcher's own session: a kill of its parent's group does not reach it
    if first[0] and side == "child":
        wait_for("release")  # the launcher is stuck before it runs anything
os.fork, os.setsid = slow_fork, slow_setsid
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def slow_python(state: Path, side: str) -> str:
    """An interpreter for the launcher whose first launch gets stuck after its fork on ``side`` (the launcher
    in its own session before it runs anything, or its parent before it confirms) until the file
    ``state/release`` exists; ``state/forked`` says the fork happened."""
    script = state / "slow_fork.py"
    script.write_text(SLOW_FORK.format(state=str(state), side=side))
    wrapper = state / "python"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


def launchers(job_dir: str) -> list[int]:
    """The live (not zombie) processes running a launcher for ``job_dir``."""
    found = []
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        with contextlib.suppress(OSError):
            args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if job_dir in args and any(a.endswith("launcher.py") for a in args) and state != "Z":
                found.append(pid)
    return found


def wait_for(pred: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


@pytest.mark.parametrize("side", ["child", "parent"])
def test_a_start_unconfirmed_past_the_timeout_never_runs_a_second_launcher(
    tmp_path: Path, side: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = tmp_path / "slow"
    slow.mkdir()
    backend = LocalBackend(tmp_path / "state", SystemClock(), grace=1.0, python=slow_python(slow, side))
    runs = tmp_path / "runs"
    sid = backend.start(StartRequest("job1", 1, "dsp-job1-1", JobSpec(command=("sh", "-c", f"echo run >> {runs}"))))
    job_dir = backend.job_dir(sid)
    claimed = Path(job_dir, "executions", "0", "launcher.json")  # the launcher writes it once it runs

    # the spawn timeout fires once the slow side is stuck: the launcher before it runs (child), or its parent
    # after the launcher runs (parent)
    real_wait = subprocess.Popen.wait

    def wait_timing_out(self: subprocess.Popen[bytes], timeout: float | None = None) -> int:
        if timeout is None:
            return real_wait(self)
        wait_for(lambda: (slow / "forked").exists() and (side == "child" or claimed.exists()))
        raise subprocess.TimeoutExpired(self.args, timeout)

    monkeypatch.setattr(subprocess.Popen, "wait", wait_timing_out)
    first: Unavailable | None = None
    try:
        backend.open(sid)
    except Unavailable as exc:
        first = exc
    monkeypatch.setattr(subprocess.Popen, "wait", real_wait)
    (slow / "release").touch()
    with contextlib.suppress(Unavailable):
        backend.open(sid)  # what a supervisor does after a failed open: try again
    assert backend.wait_ended(sid, 20).outcome.state is State.SUCCEEDED
    wait_for(lambda: not launchers(job_dir))  # every launcher that was started has ended: count the runs
    assert runs.read_text().splitlines() == ["run"], "exactly one launcher ran the job"
    job = JobFiles.read(job_dir)
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
