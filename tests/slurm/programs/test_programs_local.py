"""The programs against the real 22.05 cluster (marker ``slurm_local``): a held array of three tasks that runs
``true``, read by observe.sh and opened by open-gates.sh with the real squeue and scontrol, then held and
released again by hold.sh and release-hold.sh, and cancelled by stop.sh."""

from __future__ import annotations

import subprocess
import time

import pytest

from dispatch.slurm import progress
from dispatch.slurm.backend import HOLD_SCRIPT, OPEN_GATES, RANGES, RELEASE_SCRIPT, STOP
from dispatch.slurm.holds import HOLD_BASE, HOLD_SPAN
from dispatch.slurm.parse import SQUEUE_TEXT_FIELDS, parse_squeue_text

from .standin import bash

pytestmark = pytest.mark.slurm_local
SPAN = (str(HOLD_BASE), str(HOLD_BASE + HOLD_SPAN))


def _sbatch(*argv: str) -> str:
    done = subprocess.run(
        ["sbatch", "--parsable", "--output=/dev/null", "--time=1", *argv, "--wrap=true"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout.strip().split(";")[0]


def test_observe_and_open_gates_on_a_held_array() -> None:
    array = _sbatch("--hold", "--array=0-2", "--job-name=dsp-programs-1")
    tasks = [f"{array}_{t}" for t in range(3)]
    try:
        p = bash(progress.OBSERVE, ",".join(tasks), SQUEUE_TEXT_FIELDS, "/nonexistent", "")
        assert p.returncode == 0, p.stderr
        rows = parse_squeue_text(p.stdout, "22.05.8")
        assert {j.job_id: (j.state, j.reason) for j in rows} == {t: ("PENDING", "JobHeldUser") for t in tasks}
        p = bash(OPEN_GATES, ",".join(tasks), RANGES)
        assert p.returncode == 0, p.stderr
        assert sorted(p.stdout.splitlines()) == [f"{t} release" for t in tasks]
        p = bash(OPEN_GATES, ",".join(tasks), RANGES)  # once more: each task is open, or gone once it ran
        assert set(p.stdout.split()[1::2]) <= {"open"}, p.stdout
    finally:
        subprocess.run(["scancel", array], capture_output=True, timeout=60)


def test_hold_release_and_stop_on_a_waiting_job() -> None:
    jid = _sbatch("--begin=now+1hour", "--job-name=dsp-programs-2")
    code = str(HOLD_BASE + 4242)
    try:
        p = bash(HOLD_SCRIPT, jid, code, *SPAN)
        assert p.returncode == 0, p.stderr
        p = bash(HOLD_SCRIPT, jid, str(HOLD_BASE + 4243), *SPAN)
        assert (p.returncode, p.stdout) == (5, f"{code}\n")  # another hold is there
        p = bash(RELEASE_SCRIPT, jid, code, *SPAN)
        assert p.returncode == 0, p.stderr
        p = bash(STOP, jid)
        assert p.returncode == 0, p.stderr
        for _ in range(30):
            line = subprocess.run(["squeue", "-h", "-t", "all", "-j", jid, "-o", "%T"], capture_output=True, text=True)
            if line.stdout.strip() in ("CANCELLED", ""):
                break
            time.sleep(0.5)
        assert line.stdout.strip() in ("CANCELLED", "")
        assert bash(STOP, "999999999").returncode == 1  # squeue does not know it
    finally:
        subprocess.run(["scancel", jid], capture_output=True, timeout=60)
