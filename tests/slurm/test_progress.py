"""Slurm's progress reading: the batch script's progress directory and the observation's one call, run by bash
here on real files, with a stand-in ``squeue`` on PATH printing a fixed listing (the scheduler is needed for
neither)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from dispatch.slurm import progress
from dispatch.slurm.parse import SQUEUE_TEXT_FIELDS
from dispatch.spi import RankProgress


def _report(rank: int, step: int, execution: str, at: float = 1000.0) -> str:
    return json.dumps({"rank": rank, "step": step, "total": 9, "at": at, "execution": execution})


def _row(jid: str, state: str) -> str:
    return f"{jid}|{state}|None|0|N/A|N/A|n1|dsp-j-1"


def _listing(tmp_path: Path, rows: list[str]) -> dict[str, str]:
    """An environment whose ``squeue`` prints ``rows``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "squeue"
    fake.write_text("#!/bin/bash\ncat <<'ROWS'\n" + "\n".join(rows) + "\nROWS\n")
    fake.chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}


def _write(root: Path, jid: str, rank: int, text: str, mode: int = 0o600) -> Path:
    d = root / jid
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    f = d / f"rank-{rank}.json"
    f.write_text(text + "\n")
    f.chmod(mode)
    return f


def _observe(env: dict[str, str], root: Path, want: str, ids: str = "41,42,43,44") -> tuple[str, str]:
    done = subprocess.run(
        ["bash", "-c", progress.OBSERVE, "_", ids, SQUEUE_TEXT_FIELDS, str(root), want],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return progress.split(done.stdout)


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "out" / ".progress" / "c"
    root.mkdir(mode=0o700, parents=True)
    root.chmod(0o700)
    return root


def test_reports_are_read_only_for_running_jobs_that_have_them_and_are_wanted(tmp_path: Path) -> None:
    root = _root(tmp_path)
    env = _listing(
        tmp_path, [_row("41", "RUNNING"), _row("42", "PENDING"), _row("43", "RUNNING"), _row("44", "RUNNING")]
    )
    _write(root, "41", 0, _report(0, 7, "1.41.0"))
    _write(root, "41", 1, _report(1, 3, "1.41.0", 990.0))
    (root / "41" / "rank-1.json.123.tmp").write_text("half")  # a report being written: not read
    (root / "41" / "notes.txt").write_text("x")
    _write(root, "42", 0, _report(0, 5, "1.42.0"))  # pending: its directory is not read
    _write(root, "44", 0, _report(0, 2, "1.44.0"))
    listing, reports = _observe(env, root, progress.ALL)
    assert listing.splitlines() == [
        _row("41", "RUNNING"),
        _row("42", "PENDING"),
        _row("43", "RUNNING"),
        _row("44", "RUNNING"),
    ]
    raw = progress.parse_reports(reports)
    assert set(raw) == {"41", "44"} and set(raw["41"]) == {0, 1}  # 43 runs and never reported: nothing to read
    got = progress.reports_of(raw["41"], "1.41.0", offset=10.0)
    assert got == (RankProgress(0, 7, 990.0, 9), RankProgress(1, 3, 980.0, 9))
    assert progress.reports_of(raw["41"], "1.41.1", offset=0.0) == ()  # the next execution has not reported
    # only the jobs asked for; none asked: squeue's listing alone
    assert set(progress.parse_reports(_observe(env, root, progress.want(["44", "42"]))[1])) == {"44"}
    assert _observe(env, root, progress.want([])) == ("\n".join(listing.splitlines()) + "\n", "")


def test_a_report_that_is_not_safely_the_user_s_own_is_never_trusted(tmp_path: Path) -> None:
    root = _root(tmp_path)
    rows = [_row(j, "RUNNING") for j in ("41", "42", "43", "44", "45", "46")]
    env = _listing(tmp_path, rows)
    ids = "41,42,43,44,45,46"
    _write(root, "41", 0, _report(0, 7, "1.41.0"))  # the control: trusted
    _write(root, "42", 0, _report(0, 7, "1.42.0"), mode=0o620)  # group-writable
    _write(root, "43", 0, _report(0, 7, "1.43.0")).chmod(0o602)  # world-writable
    elsewhere = _write(tmp_path / "other", "44", 0, _report(0, 7, "1.44.0"))
    (root / "44").mkdir(mode=0o700)
    (root / "44" / "rank-0.json").symlink_to(elsewhere)  # a link to a report: not followed
    (root / "45").symlink_to(elsewhere.parent)  # a linked directory: not followed
    _write(root, "46", 0, _report(0, 7, "1.46.0") + " " * progress.MAX_REPORT)  # too large
    raw = progress.parse_reports(_observe(env, root, progress.ALL, ids)[1])
    assert set(raw) == {"41"}
    (root / "41").chmod(0o770)  # a directory others may write in: nothing in it is trusted
    assert progress.parse_reports(_observe(env, root, progress.ALL, ids)[1]) == {}
    (root / "41").chmod(0o700)
    root.chmod(0o755)  # readable by others is fine
    assert set(progress.parse_reports(_observe(env, root, progress.ALL, ids)[1])) == {"41"}
    root.chmod(0o775)  # the progress directory itself writable by others: nothing is read
    assert progress.parse_reports(_observe(env, root, progress.ALL, ids)[1]) == {}


def test_a_report_owned_by_another_user_is_not_trusted(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        raise AssertionError("this test changes a file's owner: run it as root (the project's test machine is)")
    root = _root(tmp_path)
    env = _listing(tmp_path, [_row("41", "RUNNING"), _row("42", "RUNNING")])
    _write(root, "41", 0, _report(0, 7, "1.41.0"))
    os.chown(_write(root, "42", 0, _report(0, 7, "1.42.0")), 65534, 65534)
    assert set(progress.parse_reports(_observe(env, root, progress.ALL, "41,42")[1])) == {"41"}
    os.chown(root / "41", 65534, 65534)  # another user's directory
    assert progress.parse_reports(_observe(env, root, progress.ALL, "41,42")[1]) == {}


def test_the_batch_script_gives_every_rank_a_directory_in_the_private_progress_directory(tmp_path: Path) -> None:
    root_dir = str(tmp_path / "it's dir" / ".progress" / "c")
    lines = progress.prelude(root_dir)
    done = subprocess.run(
        ["bash", "-c", "\n".join([*lines, 'printf %s "$DISPATCH_PROGRESS_DIR"'])],
        env={"SLURM_JOB_ID": "77", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == f"{root_dir}/77"
    assert not Path(done.stdout).exists()  # made by the first report: only a job that reports has one
    assert Path(root_dir).is_dir() and Path(root_dir).stat().st_mode & 0o777 == 0o700
