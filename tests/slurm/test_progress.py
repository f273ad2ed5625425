"""Slurm's progress reading: the batch script's progress directory and the snippet the observation script runs,
run by bash here on real files (the scheduler is not needed for either)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from dispatch.slurm import progress
from dispatch.spi import RankProgress


def _report(rank: int, step: int, execution: str, at: float = 1000.0) -> str:
    return json.dumps({"rank": rank, "step": step, "total": 9, "at": at, "execution": execution})


def test_the_snippet_prints_every_report_of_the_jobs_it_is_given(tmp_path: Path) -> None:
    out, pointers = tmp_path / "out", tmp_path / "out" / ".jobs"
    pointers.mkdir(parents=True)
    base = out / "dsp-j-1"
    (pointers / "c.41").write_text(f"{base}\n")
    (pointers / "c.42").write_text(f"{out / 'dsp-k-1'}\n")  # a job with no report yet
    d = Path(f"{base}.41.progress")
    d.mkdir()
    (d / "rank-0.json").write_text(_report(0, 7, "1.41.0") + "\n")
    (d / "rank-1.json").write_text(_report(1, 3, "1.41.0", 990.0) + "\n")
    (d / "rank-1.json.123.tmp").write_text("half")  # a report being written: not read
    (d / "notes.txt").write_text("x")
    done = subprocess.run(
        ["bash", "-c", progress.READ, "_", str(pointers / "c"), "41", "42", "43"],
        capture_output=True,
        text=True,
        check=True,
    )
    raw = progress.parse_reports(done.stdout)
    assert set(raw) == {"41"} and set(raw["41"]) == {0, 1}
    got = progress.reports_of(raw["41"], "1.41.0", offset=10.0)
    assert got == (RankProgress(0, 7, 990.0, 9), RankProgress(1, 3, 980.0, 9))
    assert progress.reports_of(raw["41"], "1.41.1", offset=0.0) == ()  # the next execution has not reported


def test_the_batch_script_gives_every_rank_a_directory_beside_the_output(tmp_path: Path) -> None:
    base = str(tmp_path / "it's dir" / "dsp-j-1")
    lines = progress.prelude(base)
    done = subprocess.run(
        ["bash", "-c", "\n".join([*lines, 'printf %s "$DISPATCH_PROGRESS_DIR"'])],
        env={"SLURM_JOB_ID": "77", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == f"{base}.77.progress"
    assert Path(done.stdout).is_dir()
