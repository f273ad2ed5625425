"""Files on shared storage with real jobs on the 22.05 cluster: what dispatch and its jobs write is the user's
alone whatever the umask, and what another user of the machine (a second Unix account) plants or replaces is
refused or ignored, never trusted. tests/slurm/test_trust.py has the checks one by one."""

from __future__ import annotations

import logging
import os
import pwd
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import dispatch.slurm as slurm
from dispatch.errors import Unavailable
from dispatch.slurm import harness as shipped
from dispatch.spec import JobSpec
from dispatch.spi import StartRequest
from tests.peer import run_as_peer

from . import integration as it
from .clusters import admin, description

pytestmark = pytest.mark.slurm_local


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory every user may write to (1777, as /tmp, or a project directory others share), under /tmp so
    that the second account can reach it."""
    d = Path(tempfile.mkdtemp(prefix="dispatch-shared-", dir="/tmp"))
    d.chmod(0o1777)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def backend_at(output_dir: Path) -> slurm.SlurmBackend:
    return slurm.new(shipped.settings_for(description("local"), output={"dir": str(output_dir)}))


def mode(p: Path) -> int:
    return stat.S_IMODE(p.lstat().st_mode)


def test_pointers_maps_output_and_directories_are_the_users_alone_whatever_the_umask(shared: Path) -> None:
    root = shared / "ada" / "runs"
    old = os.umask(0)  # the local transport's scripts, sbatch and so the jobs inherit it
    try:
        b = backend_at(root)
        try:
            spec = JobSpec(("echo", "real-output"), time_limit=120)
            sid, m = it.run(b, spec)
            tasks = b.start_many([StartRequest(f"t{k}", 1, f"{it.marker()[:-2]}-{k}", spec) for k in (1, 2)])
            assert all(isinstance(t, str) and "_" in t for t in tasks), tasks
            for t in tasks:
                b.open(str(t))
            for each in (sid, *map(str, tasks)):
                ev = it.wait(b, each, lambda e: e.outcome.state.ended, "the job ends")
                assert ev.outcome.exit_code == 0, ev.outcome
        finally:
            b.close()
    finally:
        os.umask(old)
    jobs = root / ".jobs"
    made = [shared / "ada", root, jobs, jobs / "arrays"]
    assert {str(d): mode(d) for d in made} == {str(d): 0o700 for d in made}
    pointers = [p for p in jobs.iterdir() if p.is_file()]
    assert len(pointers) == 3 and {mode(p) for p in pointers} == {0o600}
    (array_map,) = (jobs / "arrays").iterdir()
    assert mode(array_map) == 0o600
    files = [p for p in root.iterdir() if p.is_file()]
    assert any(p.name == f"{m}.{sid}.0.out" for p in files) and len(files) >= 6, files
    assert {p.name: mode(p) for p in files} == {p.name: 0o600 for p in files}
    progress = [root / ".progress", *(root / ".progress").iterdir()]  # the cluster's progress directory in it
    assert len(progress) == 2 and {mode(p) for p in progress} == {0o700}


def test_the_program_makes_its_files_under_the_callers_umask_and_dispatchs_stay_private(tmp_path: Path) -> None:
    """A real job submitted under umask 022: the file the user's program makes is 0644, as under a bare
    ``sbatch``; the job's output and progress directory, dispatch's own, are 0600/0700."""
    root = tmp_path / "runs"
    made = tmp_path / "made"
    made.mkdir()
    old = os.umask(0o022)
    try:
        b = backend_at(root)
        try:
            sid, m = it.run(b, JobSpec(("touch", str(made / "checkpoint")), time_limit=120))
            ev = it.wait(b, sid, lambda e: e.outcome.state.ended, "the job ends")
            assert ev.outcome.exit_code == 0, ev.outcome
        finally:
            b.close()
    finally:
        os.umask(old)
    assert mode(made / "checkpoint") == 0o644
    outputs = [p for p in root.iterdir() if p.is_file() and p.name.startswith(f"{m}.{sid}.")]
    assert outputs and {mode(p) for p in outputs} == {0o600}, outputs
    assert {mode(p) for p in (root / ".progress").iterdir()} == {0o700}


def test_a_pointers_directory_another_user_made_is_refused_before_sbatch(shared: Path, peer: pwd.struct_passwd) -> None:
    """The other user makes ``.jobs`` first, in a directory both may write to, and plants a pointer there: dispatch
    submits nothing (a clear error naming the directory), so no pointer of its is ever written or read there."""
    planted = run_as_peer(
        peer, ["bash", "-c", 'mkdir -m 777 "$1/.jobs" && echo /etc/shadow >"$1/.jobs/x.1"', "_", str(shared)]
    )
    assert planted.returncode == 0, planted.stderr
    b = backend_at(shared)
    try:
        m = it.marker()
        with pytest.raises(Unavailable, match=rf"sbatch not run: {shared}/.jobs is not yours alone"):
            b.start(StartRequest(m.split("-")[1], 1, m, JobSpec(("true",))))
        listed = admin("local", "squeue", "-h", "-t", "all", f"--name={m}", "-o", "%i")
        assert listed.stdout.strip() == "", "nothing was submitted"
    finally:
        b.close()


def test_a_pointer_another_user_replaced_is_ignored_and_the_real_output_read(
    shared: Path, peer: pwd.struct_passwd, caplog: pytest.LogCaptureFixture
) -> None:
    """A real job's pointer, in a pointers' directory someone loosened (0777), replaced by the other user with one
    naming files of theirs: dispatch ignores it (the reason logged) and reads the job's own output through the
    scheduler's record of it, never the planted file."""
    b = backend_at(shared)
    try:
        sid, m = it.run(b, JobSpec(("echo", "real-output"), time_limit=120))
        it.wait(b, sid, lambda e: e.outcome.state.ended, "the job ends")
        pointer = Path(b._pointer(sid))
        assert pointer.read_text().strip() == f"{shared}/{m}"
        pointer.parent.chmod(0o777)
        forge = (
            'mkdir -p "$1/peer" && printf "forged\\n" >"$1/peer/$2.$3.0.out" && rm -f "$4" && '
            'printf "%s\\n" "$1/peer/$2" >"$4"'
        )
        done = run_as_peer(peer, ["bash", "-c", forge, "_", str(shared), m, sid, str(pointer)])
        assert done.returncode == 0, done.stderr
        assert pointer.stat().st_uid == peer.pw_uid
        fresh = backend_at(shared)  # no remembered prefix: the pointer is read again
        try:
            with caplog.at_level(logging.WARNING, logger="dispatch.slurm.backend"):
                text = b"".join(fresh.stdout(sid)).decode()
        finally:
            fresh.close()
        assert "forged" not in text and "real-output" in text
        assert f"the output pointer {pointer} of job {sid} is ignored" in caplog.text
    finally:
        b.close()


def test_a_submission_prunes_pointers_and_maps_past_their_retention(shared: Path) -> None:
    """The submitting script deletes the pointers and marker maps written longer ago than their retention
    (``output.keepPointers``, 90 days; ``output.keepMaps``, 7 days), and leaves the recent ones and the job's own."""
    root = shared / "runs"
    b = backend_at(root)
    try:
        prefix = Path(b._pointer(""))
        jobs, cluster = prefix.parent, prefix.name[:-1]
        (jobs / "arrays").mkdir(mode=0o700, parents=True)
        aged = {jobs / f"{cluster}.999999": 91, jobs / "arrays" / "dspa-00000000000000aa": 8}
        kept = {jobs / f"{cluster}.999998": 89, jobs / "arrays" / "dspa-00000000000000bb": 6}
        for p, days in {**aged, **kept}.items():
            p.write_text("/o/dsp-x-1\n")
            t = time.time() - days * 86400
            os.utime(p, (t, t))
        sid, _ = it.run(b, JobSpec(("true",), time_limit=120))
        it.wait(b, sid, lambda e: e.outcome.state.ended, "the job ends")
        assert [p for p in aged if p.exists()] == []
        assert [p for p in kept if not p.exists()] == []
        assert Path(b._pointer(sid)).exists()
    finally:
        b.close()
