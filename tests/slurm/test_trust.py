"""The checks of what the Slurm adapter reads back from shared storage, run in bash on real files (no cluster):
a pointer, an output file or a marker map that is a link, another user's, writable by others, too large, or
that holds something other than a files' prefix is refused or ignored, never followed; and what a script makes
is 0600/0700 whatever the umask (tests/slurm/test_trust_local.py does it with real jobs)."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dispatch.errors import Unavailable
from dispatch.slurm import arrays, backend, outputs, pruning, tasklines, trust
from dispatch.slurm.scripts import Script, parse_output

NOBODY = 65534


def bash(snippet: str, *args: str, umask: int | None = None) -> subprocess.CompletedProcess[str]:
    def set_umask() -> None:
        if umask is not None:
            os.umask(umask)

    return subprocess.run(
        ["bash", "-c", snippet, "_", *args], capture_output=True, text=True, timeout=30, preexec_fn=set_umask
    )


@pytest.fixture
def jobs(tmp_path: Path) -> Iterator[Path]:
    """A pointers' directory of the user's alone, with a real job's pointer (job 7) and its output file."""
    d = tmp_path / ".jobs"
    d.mkdir(mode=0o700)
    out = tmp_path / "out"
    out.mkdir(mode=0o700)
    (out / "dsp-j-1.7.0.out").write_text("real output\n")
    (d / "c.7").write_text(f"{out}/dsp-j-1\n")
    (d / "c.7").chmod(0o600)
    yield d


def pointed(d: Path, jid: str = "7") -> list[str]:
    return bash(backend.POINTED, str(d / f"c.{jid}"), jid).stdout.splitlines()


def test_a_pointer_of_the_users_alone_is_read(jobs: Path) -> None:
    assert pointed(jobs) == [f"{jobs.parent}/out/dsp-j-1", "0.out"]


def test_a_pointer_that_is_a_link_is_not_followed(jobs: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("/etc/passwd-ish\n")
    (jobs / "c.7").unlink()
    (jobs / "c.7").symlink_to(target)
    (got,) = pointed(jobs)
    assert got.startswith("UNTRUSTED ") and "passwd" not in got


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda p: p.chmod(0o620), "group-writable"),
        (lambda p: p.chmod(0o602), "world-writable"),
        (lambda p: os.chown(p, NOBODY, NOBODY), "another user's"),
        (lambda p: p.write_text("/x/" + "a" * trust.POINTER_MAX + "\n"), "too large"),
    ],
)
def test_a_pointer_others_could_have_written_is_refused(jobs: Path, change: object, why: str) -> None:
    change(jobs / "c.7")  # type: ignore[operator]
    (got,) = pointed(jobs)
    assert got.startswith("UNTRUSTED "), why


def test_a_pointer_in_a_directory_others_may_write_is_refused(jobs: Path) -> None:
    jobs.chmod(0o777)
    (got,) = pointed(jobs)
    assert got == "UNTRUSTED its directory is not yours alone (owner, mode, link)"


@pytest.mark.parametrize(
    "text",
    ["", "relative/dsp-j-1", "/a/../etc/passwd", "/a/./b/dsp", "//host/dsp-j-1", "/a/b c;rm", "/a/x\n/b/y", "/o/-x"],
)
def test_a_pointer_that_is_not_a_files_prefix_is_refused(text: str) -> None:
    base, why = trust.pointed_base(text)
    assert base is None and why


def test_the_files_prefix_dispatch_writes_is_accepted() -> None:
    assert trust.pointed_base("/home/ada/dispatch-output/dsp-abc-1\n") == ("/home/ada/dispatch-output/dsp-abc-1", "")
    assert trust.pointed_base("/o/dspa-0123456789abcdef")[0] == "/o/dspa-0123456789abcdef"


def test_an_output_file_others_could_have_written_or_a_link_is_not_read(tmp_path: Path) -> None:
    good = tmp_path / "x.out"
    good.write_text("mine\n")
    good.chmod(0o644)  # readable by others is a choice; writable by others is not
    assert outputs.parse_slice(bash(outputs.SLICE, str(good), "0", "100").stdout, 0).data == b"mine\n"
    link = tmp_path / "l.out"
    link.symlink_to(good)
    theirs = tmp_path / "t.out"
    theirs.write_text("planted\n")
    os.chown(theirs, NOBODY, NOBODY)
    loose = tmp_path / "w.out"
    loose.write_text("loose\n")
    loose.chmod(0o666)
    for f in (link, theirs, loose):
        with pytest.raises(Unavailable, match="not a file of yours alone"):
            outputs.parse_slice(bash(outputs.SLICE, str(f), "0", "100").stdout, 0)
        assert bash(outputs.WHOLE, str(f), "1").stdout.strip() == outputs.UNTRUSTED


def test_srun_lines_are_read_only_through_a_pointer_and_file_of_the_users_alone(jobs: Path) -> None:
    err = jobs.parent / "out" / "dsp-j-1.7.0.err"
    err.write_text("srun: error: n1: task 0: Exited with exit code 3\n")
    err.chmod(0o600)
    root = str(jobs / "c")
    assert tasklines.first_exit_codes(bash(tasklines.READ, root, "7:0").stdout) == {("7", 0): 3}
    err.chmod(0o666)
    assert bash(tasklines.READ, root, "7:0").stdout == ""
    err.chmod(0o600)
    (jobs / "c.7").write_text("/a/../" + str(err)[1 : -len(".7.0.err")] + "\n")
    assert bash(tasklines.READ, root, "7:0").stdout == ""


def test_marker_maps_are_read_only_when_they_and_their_directory_are_the_users_alone(tmp_path: Path) -> None:
    maps = tmp_path / "arrays"
    maps.mkdir(mode=0o700)
    mine = maps / "dspa-00000000000000aa"
    mine.write_text("dsp-a-1\n")
    mine.chmod(0o600)
    planted = maps / "dspa-00000000000000bb"
    planted.write_text("dsp-b-1\n")
    os.chown(planted, NOBODY, NOBODY)
    linked = maps / "dspa-00000000000000cc"
    linked.symlink_to(mine)
    loose = maps / "dspa-00000000000000dd"
    loose.write_text("dsp-d-1\n")
    loose.chmod(0o622)
    # accounting off (no sacct); squeue knows none of these names, so only the M lines tell what was read
    out = bash(arrays.FIND, "0", str(maps), "0", "dsp-a-1", "dsp-b-1", "dsp-d-1").stdout
    assert [line for line in out.splitlines() if line.startswith("M ")] == [f"M {mine}:1:dsp-a-1"]
    maps.chmod(0o777)
    assert bash(arrays.FIND, "0", str(maps), "0", "dsp-a-1").stdout.startswith(f"U {maps} is not yours alone")


def test_every_script_makes_its_files_the_users_alone_whatever_the_umask(tmp_path: Path) -> None:
    s = Script()
    s.shell(trust.PREPARE, str(tmp_path / "root" / ".jobs"), str(tmp_path / "out" / "deep"))
    s.shell('printf x >"$1"', str(tmp_path / "out" / "deep" / "f"))
    done = subprocess.run(["bash"], input=s.render(), capture_output=True, text=True, preexec_fn=lambda: os.umask(0))
    calls = parse_output(s.nonce, done.stdout).calls
    assert calls[0].ok and calls[1].ok, done
    for d in ("root", "root/.jobs", "out", "out/deep"):
        assert stat.S_IMODE((tmp_path / d).stat().st_mode) == 0o700, d
    assert stat.S_IMODE((tmp_path / "out" / "deep" / "f").stat().st_mode) == 0o600


def test_prepare_sets_an_existing_pointers_directory_of_the_users_to_0700(tmp_path: Path) -> None:
    d = tmp_path / ".jobs"
    d.mkdir(mode=0o755)
    d.chmod(0o755)
    assert bash(trust.PREPARE, str(d)).returncode == 0
    assert stat.S_IMODE(d.stat().st_mode) == 0o700


def _aged(p: Path, days: float) -> Path:
    t = time.time() - days * 86400
    os.utime(p, (t, t), follow_symlinks=False)
    return p


def test_prune_deletes_pointers_and_maps_past_their_retention_and_nothing_else(jobs: Path, tmp_path: Path) -> None:
    maps = jobs / "arrays"
    maps.mkdir(mode=0o700)
    old_pointer = _aged(jobs / "c.7", 100)
    fresh_pointer = jobs / "c.8"
    fresh_pointer.write_text("/o/dsp-x-1\n")
    other_cluster = jobs / "d.7"
    other_cluster.write_text("/o/dsp-x-1\n")
    _aged(other_cluster, 100)
    pointed_at = tmp_path / "out" / "dsp-j-1.7.0.out"
    old_map = maps / "dspa-00000000000000aa"
    old_map.write_text("dsp-a-1\n")
    _aged(old_map, 8)
    fresh_map = maps / "dspa-00000000000000bb"
    fresh_map.write_text("dsp-b-1\n")
    theirs = maps / "dspa-00000000000000cc"
    theirs.write_text("dsp-c-1\n")
    os.chown(theirs, NOBODY, NOBODY)
    _aged(theirs, 8)
    link = jobs / "c.9"
    link.symlink_to(pointed_at)
    _aged(link, 100)
    done = bash(pruning.PRUNE, str(jobs), "c", str(maps), pruning.minutes(90 * 86400), pruning.minutes(7 * 86400))
    assert sorted(done.stdout.split()) == sorted([str(old_pointer), str(old_map)]), done
    assert not old_pointer.exists() and not old_map.exists()
    for kept in (fresh_pointer, other_cluster, fresh_map, theirs, pointed_at):
        assert kept.exists(), kept
    assert link.is_symlink()  # a link is never followed nor taken for a pointer
    assert pruning.minutes(0) == "0"
    _aged(fresh_pointer, 1000)
    assert bash(pruning.PRUNE, str(jobs), "c", str(maps), "0", "0").stdout == "" and fresh_pointer.exists()
    jobs.chmod(0o777)  # a directory others may write to: nothing in it is deleted
    assert bash(pruning.PRUNE, str(jobs), "c", str(maps), "1", "1").stdout == "" and fresh_pointer.exists()


def test_a_find_reads_only_the_maps_written_since_its_horizon(tmp_path: Path) -> None:
    maps = tmp_path / "arrays"
    maps.mkdir(mode=0o700)
    (maps / "dspa-00000000000000aa").write_text("dsp-a-1\n")
    old = maps / "dspa-00000000000000bb"
    old.write_text("dsp-a-1\n")
    _aged(old, 2)
    since = str(int(time.time()) - 86400)  # a day ago: the map of two days ago is not read
    out = bash(arrays.FIND, "0", str(maps), since, "dsp-a-1").stdout
    assert [line for line in out.splitlines() if line.startswith("M ")] == [f"M {maps}/dspa-00000000000000aa:1:dsp-a-1"]
