"""array-find.sh and task-lines.sh on real bytes: sacct's rows of a held array of three tasks as 22.05, 24.11 and
26.05 printed them (tests/slurm/transcripts), and srun's stderr files of a failed step
(tests/slurm/test_tasklines.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from dispatch.slurm import arrays, tasklines

from ..test_tasklines import ERR_2205, ERR_2411, ERR_2605
from .standin import RELEASES, bash, calls, commands, transcript


def _sacct_rows(release: str, name: str) -> str:
    """The array's ``JobID|JobName|Submit`` rows (``sacct -X``: no steps), cut from the captured text listing's
    columns, the array's name replaced by ``name`` (a marker map's)."""
    t = transcript("arrays", release)
    rows = []
    for line in t["sacct_text"].splitlines():
        cols = line.split("|")
        if "." not in cols[0]:
            rows.append(f"{cols[10]}|{name}|{cols[4]}\n")
    return "".join(rows)


@pytest.mark.parametrize("release", RELEASES)
def test_find_reads_the_markers_map_and_sacct_s_rows_of_its_array(release: str, tmp_path: Path) -> None:
    name = arrays.new_name()
    maps = tmp_path / "maps"
    maps.mkdir(mode=0o700)
    maps.chmod(0o700)
    (maps / name).write_text("dsp-a-1\ndsp-b-1\ndsp-c-1\n")
    (maps / name).chmod(0o600)
    env = commands(tmp_path, squeue="", sacct=_sacct_rows(release, name))
    since = str(int(time.time()) - 60)
    p = bash(arrays.FIND, "1", str(maps), since, "dsp-a-1", "dsp-b-1", "dsp-c-1", "dsp-z-1", env=env)
    assert p.returncode == 0, p.stderr
    a = transcript("arrays", release)["array_job_id"]
    found = {f.marker: f.scheduler_id for f in arrays.parse_find(p.stdout)}
    want = {"dsp-a-1": f"{a}_0", "dsp-b-1": f"{a}_1"}  # 26.05 names task 0 inside its array's record: 1489_[0]
    if release == "22.05.8":  # 24.11 and 26.05 had not accounted the task cancelled before it started
        want["dsp-c-1"] = f"{a}_2"
    assert found == want
    assert calls(tmp_path)[0] == f"squeue -h -r -t all --name={name} -O JobArrayID:|,Name:|,SubmitTime:"


def test_find_skips_an_old_map_and_one_of_the_wrong_name(tmp_path: Path) -> None:
    maps = tmp_path / "maps"
    maps.mkdir(mode=0o700)
    old = maps / arrays.new_name()
    old.write_text("dsp-a-1\n")
    os.utime(old, (1_000_000, 1_000_000))
    (maps / "other-name").write_text("dsp-a-1\n")
    env = commands(tmp_path, squeue="", sacct="")
    p = bash(arrays.FIND, "1", str(maps), str(int(time.time())), "dsp-a-1", env=env)
    assert (p.returncode, p.stdout, calls(tmp_path)) == (0, "", [])


def test_task_lines_reads_srun_s_lines_of_each_release(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir(mode=0o700)
    jobs = tmp_path / ".jobs"
    jobs.mkdir(mode=0o700)
    for jid, err in (("6900", ERR_2205), ("3408_2", ERR_2411), ("3890", ERR_2605)):
        (jobs / f"c.{jid}").write_text(f"{out}/dsp-x-1\n")
        (out / f"dsp-x-1.{jid}.0.err").write_text(err)
    p = bash(tasklines.READ, str(jobs / "c"), "6900:0", "3408_2:0", "3890:0", "3890:1")
    assert p.returncode == 0, p.stderr
    assert tasklines.first_exit_codes(p.stdout) == {("6900", 0): 3, ("3408_2", 0): 3, ("3890", 0): 3}
    assert p.stdout.splitlines()[1] == "6900:0 srun: error: n1: task 0: Exited with exit code 143"
