"""Array task ids in Slurm's real bytes (tests/slurm/transcripts/arrays-<release>.json, captured by
scripts/slurm/capture_arrays.py): one held array of three tasks, task 0 behind its gate inside the array's own
record, task 1 completed, task 2 cancelled before it started, on every release the adapter reads."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from dispatch.slurm.parse import parse_sacct, parse_sacct_text, parse_squeue, parse_squeue_text

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "transcripts")
RELEASES = ("22.05.8", "24.11.5", "26.05.5")


def load(release: str) -> dict[str, Any]:
    with open(os.path.join(HERE, f"arrays-{release}.json")) as f:
        return dict(json.load(f))


def states(jobs: list[Any]) -> dict[str, str]:
    return {j.job_id: j.state for j in jobs}


@pytest.mark.parametrize("release", RELEASES)
def test_squeue_names_every_task_by_its_array_id(release: str) -> None:
    t = load(release)
    a = t["array_job_id"]
    want = {f"{a}_0": "PENDING", f"{a}_1": "COMPLETED", f"{a}_2": "CANCELLED"}
    assert states(parse_squeue_text(t["squeue_text"], release)) == want
    assert states(parse_squeue(t["squeue_json"])[1]) == want
    gated = next(j for j in parse_squeue_text(t["squeue_text"], release) if j.job_id == f"{a}_0")
    assert gated.reason == "JobHeldUser" and gated.restart_cnt == 0


@pytest.mark.parametrize("release", RELEASES)
def test_sacct_names_every_task_by_its_array_id_text_and_json_alike(release: str) -> None:
    t = load(release)
    a = t["array_job_id"]
    text = states(parse_sacct_text(t["sacct_text"], release))
    assert text == states(parse_sacct(t["sacct_json"])[1])
    assert text[f"{a}_0"] == "PENDING", "the task still in the array's own record"
    assert text[f"{a}_1"] == "COMPLETED"
    # a task cancelled before it started: 22.05 accounts it; 24.11 and 26.05 had not (squeue shows it)
    assert text.get(f"{a}_2", "CANCELLED") == "CANCELLED"
    assert set(text) <= {f"{a}_0", f"{a}_1", f"{a}_2"}
    done = next(j for j in parse_sacct_text(t["sacct_text"], release) if j.job_id == f"{a}_1")
    assert done.exit_code == 0 and done.restart_cnt == 0
