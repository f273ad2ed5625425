"""ranges.awk and open-gates.sh on real squeue bytes: the ids and reasons of a held array of three tasks (task 0
behind its gate in the array's record, task 1 completed, task 2 cancelled) and of plain jobs, as 22.05, 24.11
and 26.05 printed them (tests/slurm/transcripts)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from dispatch.slurm.backend import OPEN_GATES, RANGES, _release_failures
from dispatch.slurm.gates import RELEASE_GATES

from .standin import RELEASES, bash, calls, commands, transcript

PLAIN = ("gated", "running", "dispatch-held")


def _rows(release: str) -> list[tuple[str, str]]:
    """(id, reason) of the array's tasks and of three plain jobs, from the captured text listings."""
    rows = [tuple(line.split("|")[0:3:2]) for line in transcript("arrays", release)["squeue_text"].splitlines()]
    states = transcript("slurm", release)["states"]
    for name in PLAIN:
        line = states[name]["captures"][0]["squeue_text"]
        rows.append(tuple(line.split("|")[0:3:2]))
    return [(a, b) for a, b in rows]


@pytest.mark.parametrize("release", RELEASES)
def test_ranges_names_each_array_once_then_the_plain_jobs(release: str) -> None:
    ids = [i for i, _ in _rows(release)]
    ordered = subprocess.run(
        ["sort", "-t_", "-k1,1n", "-k2,2n"], input="\n".join(ids) + "\n", capture_output=True, text=True
    )
    out = subprocess.run(["awk", "-F_", RANGES], input=ordered.stdout, capture_output=True, text=True, check=True)
    array = transcript("arrays", release)["array_job_id"]
    plain = sorted((i for i in ids if "_" not in i), key=int)
    assert out.stdout.splitlines() == [f"{array}_[0-2]", ",".join(plain)]


@pytest.mark.parametrize("release", RELEASES)
def test_open_gates_releases_the_held_tasks_as_one_expression(release: str, tmp_path: Path) -> None:
    rows = _rows(release)
    env = commands(tmp_path, squeue="".join(f"{i} {r}\n" for i, r in rows), scontrol="")
    ids = ",".join(i for i, _ in rows)
    p = bash(OPEN_GATES, ids, RANGES, env=env, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    want = {i: "release" if r == "JobHeldUser" else "open" for i, r in rows}
    assert dict(line.split() for line in p.stdout.splitlines()) == want
    array = transcript("arrays", release)["array_job_id"]
    gated = transcript("slurm", release)["states"]["gated"]["job_id"]
    assert calls(tmp_path)[1:] == [f"scontrol release {array}_[0,2]", f"scontrol release {gated}"]


def test_open_gates_reports_a_failed_release_under_the_ids_it_named(tmp_path: Path) -> None:
    rows = _rows("26.05.5")
    message = "slurm_suspend error: Access/permission denied\n"
    env = commands(tmp_path, squeue="".join(f"{i} {r}\n" for i, r in rows), scontrol="!1" + message)
    p = bash(OPEN_GATES, ",".join(i for i, _ in rows), RANGES, env=env, cwd=tmp_path)
    assert p.returncode == 2
    failed = _release_failures(p.stderr)
    assert set(failed) == {i for i, r in rows if r == "JobHeldUser"}
    assert set(failed.values()) == {message.strip()}


def test_open_gates_takes_an_unknown_id_as_none_and_passes_other_errors_on(tmp_path: Path) -> None:
    env = commands(tmp_path, squeue="!1slurm_load_jobs error: Invalid job id specified\n")
    p = bash(OPEN_GATES, "999999", RANGES, env=env, cwd=tmp_path)
    assert (p.returncode, p.stdout) == (0, "")
    env = commands(tmp_path / "down", squeue="!1slurm_load_jobs error: Unable to contact slurm controller\n")
    p = bash(OPEN_GATES, "7", RANGES, env=env, cwd=tmp_path)
    assert p.returncode == 1 and "Unable to contact" in p.stderr


@pytest.mark.parametrize("release", RELEASES)
def test_release_gates_releases_without_reading_the_holds_first(release: str, tmp_path: Path) -> None:
    rows = _rows(release)
    env = commands(tmp_path, scontrol="")
    p = bash(RELEASE_GATES, ",".join(i for i, _ in rows), RANGES, env=env, cwd=tmp_path)
    assert (p.returncode, p.stdout) == (0, "")
    array = transcript("arrays", release)["array_job_id"]
    plain = ",".join(sorted((i for i, _ in rows if "_" not in i), key=int))
    assert calls(tmp_path) == [f"scontrol release {array}_[0-2]", f"scontrol release {plain}"]
    p = bash(RELEASE_GATES, "7", RANGES, env=commands(tmp_path / "one", scontrol=""), cwd=tmp_path)
    assert calls(tmp_path / "one") == ["scontrol release 7"]


def test_release_gates_reports_slurms_refusals_under_the_jobs_they_name(tmp_path: Path) -> None:
    refusal = "Access/permission denied for job 8\nslurm_suspend error:Access/permission denied\n"  # 26.05's words
    p = bash(RELEASE_GATES, "7,8", RANGES, env=commands(tmp_path, scontrol="!1" + refusal), cwd=tmp_path)
    assert p.returncode == 2
    assert _release_failures(p.stderr) == {"8": "Access/permission denied for job 8"}


# scontrol release <array>_[1-5] of a held array of tasks 1-3, as each release answered it (2026-12-08, the test
# clusters; exit status 1 on all three)
RANGE_ANSWERS = {
    "22.05.8": "{a}_1-3: No error\n{a}_4-5: Invalid job id specified\n",
    "24.11.5": "{a}_1-3: No error\n{a}_4-5: Invalid job id specified\n",
    "26.05.5": "{a}_[1-3]: No error\n{a}_[4-5]: Invalid job id specified\n",
}


@pytest.mark.parametrize("release", sorted(RANGE_ANSWERS))
@pytest.mark.parametrize("program", [OPEN_GATES, RELEASE_GATES])
def test_an_array_expressions_answer_per_range_reads_released_and_unknown_tasks_apart(
    release: str, program: str, tmp_path: Path
) -> None:
    """``No error`` is a range scontrol released; the others' message is theirs alone, never spread over the
    released tasks of the same expression."""
    answer = RANGE_ANSWERS[release].format(a="20261")
    ids = [f"20261_{t}" for t in range(1, 6)]
    squeue = "".join(f"20261_{t} JobHeldUser\n" for t in range(1, 4))
    env = commands(tmp_path, squeue=squeue, scontrol="!1" + answer)
    p = bash(program, ",".join(ids), RANGES, env=env, cwd=tmp_path)
    assert p.returncode == 2
    assert _release_failures(p.stderr) == {
        "20261_4": "Invalid job id specified",
        "20261_5": "Invalid job id specified",
    }
