"""read-hold.sh with hold.sh or release-hold.sh, and observe.sh, on real squeue bytes (tests/slurm/transcripts:
the text listings 22.05, 24.11 and 26.05 printed for a running job, a job held by a dispatch hold and one pending
for resources)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dispatch.slurm import progress
from dispatch.slurm.backend import HOLD_SCRIPT, RELEASE_SCRIPT
from dispatch.slurm.holds import HOLD_BASE, HOLD_SPAN
from dispatch.slurm.parse import SQUEUE_TEXT_FIELDS, parse_squeue_text

from .standin import RELEASES, bash, calls, commands, transcript

SPAN = (str(HOLD_BASE), str(HOLD_BASE + HOLD_SPAN))


def _state(release: str, name: str) -> tuple[str, str]:
    """The job id and its ``State:|,EligibleTime:|`` line, cut from the captured listing's columns."""
    state = transcript("slurm", release)["states"][name]
    cols = state["captures"][0]["squeue_text"].rstrip("\n").split("|")
    return state["job_id"], f"{cols[1]}|{cols[4]}|\n"


@pytest.mark.parametrize("release", RELEASES)
def test_hold_sets_the_code_on_a_waiting_job_and_refuses_a_running_one(release: str, tmp_path: Path) -> None:
    jid, line = _state(release, "pending-resources")
    env = commands(tmp_path, squeue=line, scontrol="")
    p = bash(HOLD_SCRIPT, jid, str(HOLD_BASE + 7), *SPAN, env=env)
    assert p.returncode == 0 and calls(tmp_path)[-1] == f"scontrol update JobId={jid} StartTime=uts{HOLD_BASE + 7}"
    jid, line = _state(release, "running")
    p = bash(HOLD_SCRIPT, jid, str(HOLD_BASE + 7), *SPAN, env=commands(tmp_path / "r", squeue=line))
    assert (p.returncode, p.stdout) == (4, "RUNNING\n")


@pytest.mark.parametrize("release", RELEASES)
def test_a_held_job_is_released_by_its_own_hold_only(release: str, tmp_path: Path) -> None:
    jid, line = _state(release, "dispatch-held")
    code = line.split("|")[1]
    assert SPAN[0] <= code < SPAN[1]
    p = bash(RELEASE_SCRIPT, jid, str(int(code) + 1), *SPAN, env=commands(tmp_path / "other", squeue=line))
    assert (p.returncode, p.stdout) == (5, f"{code}\n")  # another instance's hold
    p = bash(HOLD_SCRIPT, jid, str(int(code) + 1), *SPAN, env=commands(tmp_path / "again", squeue=line))
    assert (p.returncode, p.stdout) == (5, f"{code}\n")
    env = commands(tmp_path, squeue=line, scontrol="")
    assert bash(RELEASE_SCRIPT, jid, code, *SPAN, env=env).returncode == 0
    assert calls(tmp_path)[-1] == f"scontrol update JobId={jid} StartTime=now"


@pytest.mark.parametrize("release", RELEASES)
def test_observe_lists_the_jobs_and_reads_the_running_ones_reports(release: str, tmp_path: Path) -> None:
    states = transcript("slurm", release)["states"]
    # captured with JobID where the adapter asks for JobArrayID: the same column for a job that is no array's task
    listing = "".join(states[n]["captures"][0]["squeue_text"] for n in ("running", "pending-resources", "gated"))
    running, pending = states["running"]["job_id"], states["pending-resources"]["job_id"]
    root = tmp_path / "progress"
    for jid in (running, pending):
        (root / jid).mkdir(mode=0o700, parents=True)
        report = json.dumps({"rank": 0, "step": 3, "total": 9, "at": 1000.0, "execution": f"1.{jid}.0"})
        (root / jid / "rank-0.json").write_text(report + "\n")
        (root / jid / "rank-0.json").chmod(0o600)
    root.chmod(0o700)
    env = commands(tmp_path, squeue=listing)
    ids = ",".join(states[n]["job_id"] for n in ("running", "pending-resources", "gated"))
    p = bash(progress.OBSERVE, ids, SQUEUE_TEXT_FIELDS, str(root), progress.ALL, env=env)
    assert p.returncode == 0, p.stderr
    rows, reports = progress.split(p.stdout)
    assert [j.job_id for j in parse_squeue_text(rows, release)] == ids.split(",")
    got = progress.parse_reports(reports)
    assert list(got) == [running] and list(got[running]) == [0]  # the pending job's directory is not read
    p = bash(progress.OBSERVE, ids, SQUEUE_TEXT_FIELDS, str(root), "", env=env)
    assert p.stdout == listing  # no progress wanted: squeue's listing alone
