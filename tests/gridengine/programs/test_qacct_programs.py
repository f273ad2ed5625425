"""Grid Engine's programs on their own: the qacct loops run by bash with a stand-in ``qacct`` that prints the
real bytes of Son of Grid Engine 8.1.9 (tests/gridengine/outputs/qacct-*.txt) and, where the cell is up, the
real ``qacct`` (marker ``gridengine``)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from dispatch.gridengine.backend import _QACCT_LOOP, _QACCT_MARKERS
from dispatch.gridengine.parse import parse_qacct

from ..cell import description

OUTPUTS = Path(__file__).resolve().parents[1] / "outputs"


def _qacct(where: Path) -> dict[str, str]:
    """A ``qacct -j <id>`` printing the captured record named ``<id>`` (``success``, ``h_rt``), else qacct's own
    error for a job it does not know (on stderr, exit 1)."""
    bin_dir = where / "bin"
    bin_dir.mkdir()
    (bin_dir / "qacct").write_text(
        "#!/bin/bash\n"
        f'f="{OUTPUTS}/qacct-$2.txt"\n'
        '[ -f "$f" ] && exec cat "$f"\n'
        'echo "error: job id $2 not found" >&2; exit 1\n'
    )
    (bin_dir / "qacct").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_the_loop_by_id_frames_each_jobs_records(tmp_path: Path) -> None:
    env = _qacct(tmp_path)
    p = subprocess.run(
        ["bash", "-c", _QACCT_LOOP, "_", "success", "gone", "h_rt"], env=env, capture_output=True, text=True
    )
    parts = {part.partition("\n")[0]: part.partition("\n")[2] for part in p.stdout.split("@@job ")[1:]}
    assert list(parts) == ["success", "gone", "h_rt"]
    assert [r.job_id for r in parse_qacct(parts["success"])] == ["2"]
    assert parts["gone"] == "error: job id gone not found\n" and parse_qacct(parts["gone"]) == []
    assert len(parse_qacct(parts["h_rt"])) == 1


def test_the_loop_by_name_keeps_stdout_only(tmp_path: Path) -> None:
    env = _qacct(tmp_path)
    p = subprocess.run(["bash", "-c", _QACCT_MARKERS, "_", "gone", "success"], env=env, capture_output=True, text=True)
    assert p.stdout == (OUTPUTS / "qacct-success.txt").read_text() and p.stderr == ""


@pytest.mark.gridengine
def test_the_loops_against_the_real_qacct() -> None:
    """A job the cell never ran: its frame and qacct's own error, which reads as no record."""
    desc = description()
    env = {**os.environ, "SGE_ROOT": desc["sge_root"], "SGE_CELL": desc["sge_cell"], "LC_ALL": "C"}
    argv = ["bash", "-c", _QACCT_LOOP, "_", "999999999"]
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    head, _, body = p.stdout.partition("\n")
    assert head == "@@job 999999999" and "999999999" in body and parse_qacct(body) == []
    p = subprocess.run(["bash", "-c", _QACCT_MARKERS, "_", "dsp-never-1"], env=env, capture_output=True, text=True)
    assert p.stdout == ""  # the status is the last qacct's (1: not found); the backend reads stdout only
