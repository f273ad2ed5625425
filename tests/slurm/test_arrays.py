"""Job arrays without a cluster: task ids in every form Slurm prints them, grouping and chunking a batch, the
array's batch script, finding tasks by marker, and ``start_many`` over a transcript."""

from __future__ import annotations

import subprocess

import pytest

from dispatch.errors import OutcomeUnknown, Rejected, Unavailable
from dispatch.extensions import Output
from dispatch.resources import Resources
from dispatch.slurm import arrayids, arrays
from dispatch.slurm.submit import SbatchJob
from dispatch.slurmtest import RELEASE_2205, Exchange, fail, ok, wrapped
from dispatch.spec import JobSpec
from dispatch.spi import StartRequest

from .test_backend_transcript import backend


@pytest.mark.parametrize(
    ("text", "tasks"),
    [
        ("0-1,3", [0, 1, 3]),
        ("0-6:2", [0, 2, 4, 6]),
        ("5", [5]),
        ("0-3%2", [0, 1, 2, 3]),
        ("0x1", [0]),
        ("0x2D", [0, 2, 3, 5]),
        ("", []),
    ],
)
def test_task_lists(text: str, tasks: list[int]) -> None:
    assert arrayids.tasks(text) == tasks


@pytest.mark.parametrize("bad", ["a-b", "3-1", "0-", "1,,2", "0xZZ", "0-4:0"])
def test_a_task_list_that_is_none_is_refused(bad: str) -> None:
    with pytest.raises(arrayids.ArrayIdError):
        arrayids.tasks(bad)


def test_ids() -> None:
    assert arrayids.is_scheduler_id("12") and arrayids.is_scheduler_id("12_3")
    assert not arrayids.is_scheduler_id("12_") and not arrayids.is_scheduler_id("12_[0-3]")
    assert arrayids.split("12_3") == ("12", 3) and arrayids.split("12") == ("12", None)
    assert arrayids.text_ids("1574_[0-1,3]") == ["1574_0", "1574_1", "1574_3"]
    assert arrayids.text_ids("1574_2") == ["1574_2"] and arrayids.text_ids("1576") == ["1576"]


def test_json_ids_both_dialects() -> None:
    # 22.05: plain numbers, an unset task id is null; later: {"set", "number"} objects
    assert arrayids.json_ids("1575", 1574, 2, "") == ["1574_2"]
    assert arrayids.json_ids("1574", 1574, None, "0-1,3") == ["1574_0", "1574_1", "1574_3"]
    assert arrayids.json_ids("1576", 0, None, "") == ["1576"]
    unset = {"set": False, "infinite": False, "number": 0}
    assert arrayids.json_ids("1406", {"set": True, "number": 1405}, {"set": True, "number": 1}, "") == ["1405_1"]
    assert arrayids.json_ids("1405", {"set": True, "number": 1405}, unset, "0x5") == ["1405_0", "1405_2"]
    assert arrayids.json_ids("7", {"set": False, "number": 0}, unset, "") == ["7"]


def _job(argv: tuple[str, ...], size: int = 10) -> SbatchJob:
    return SbatchJob(argv, "#!/bin/bash\n" + "x" * size, "/out", "/out/" + arrays.PROVISIONAL)


def test_groups_by_sbatch_options_and_cuts_at_the_array_size() -> None:
    a, b = ("--time=5",), ("--time=9",)
    built = [(0, _job(a)), (1, _job(b)), (2, _job(a)), (3, _job(a)), (4, _job(b)), (5, _job(("--mem=1M",)))]
    markers = {i: f"dsp-m{i}-1" for i in range(6)}
    planned, singles = arrays.plan(built, markers, lambda i, name: dict(built)[i], max_tasks=2)
    assert [[t.index for t in p.tasks] for p in planned] == [[0, 2], [3], [1, 4]]
    assert [[t.task for t in p.tasks] for p in planned] == [[0, 1], [0], [0, 1]]
    assert singles == [5], "a job alone in its group is a plain job"
    assert len({p.name for p in planned}) == 3 and all(p.name.startswith("dspa-") for p in planned)
    assert planned[0].argv() == ("--time=5", "--array=0-1")
    rebuilt: list[tuple[int, str]] = []
    kept, _ = arrays.plan(
        built, markers, lambda i, name: rebuilt.append((i, name)) or dict(built)[i], 2, built_as="dspa-x"
    )
    assert kept[0].name == "dspa-x" and kept[0].jobs == (built[0][1], built[2][1]), "the first array keeps its build"
    assert [i for i, _ in rebuilt] == [3, 1, 4] and "dspa-x" not in {n for _, n in rebuilt}


def test_chunks_at_script_bytes_too() -> None:
    assert arrays.chunks([10, 10, 10, 10], max_tasks=100, max_bytes=25) == [range(0, 2), range(2, 4)]
    assert arrays.chunks([30, 5], max_tasks=100, max_bytes=25) == [range(0, 1), range(1, 2)]


def test_the_array_script_runs_its_own_task_only(tmp_path: object) -> None:
    script = arrays.compose(["#!/bin/bash\necho zero\n", "#!/bin/bash\ncat <<'E'\none $x\nE\n"])
    for task, want in (("0", "zero\n"), ("1", "one $x\n")):
        got = subprocess.run(["bash", "-c", script], env={"SLURM_ARRAY_TASK_ID": task}, capture_output=True, text=True)
        assert got.returncode == 0 and got.stdout == want
    bad = subprocess.run(["bash", "-c", script], env={"SLURM_ARRAY_TASK_ID": "2"}, capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stdout == "" and "no task 2" in bad.stderr


def test_parse_find_needs_the_task_listed() -> None:
    out = (
        "M /o/.jobs/arrays/dspa-1:1:dsp-a-1\n"
        "M /o/.jobs/arrays/dspa-1:3:dsp-c-1\n"
        "M /o/.jobs/arrays/dspa-1:2:dsp-b-1\n"
        "Q 40_0|dspa-1|1799999990\n"
        "S 40_[1]|dspa-1|1799999990\n"
    )
    found = {f.marker: (f.scheduler_id, f.created) for f in arrays.parse_find(out)}
    # task 2 was cancelled inside the array's record: Slurm kept no trace of it, so it is not found
    assert found == {"dsp-a-1": ("40_0", 1799999990.0), "dsp-b-1": ("40_1", 1799999990.0)}


def _requests(n: int, spec: JobSpec) -> list[StartRequest]:
    return [StartRequest(f"j{i}", 1, f"dsp-j{i}-1", spec) for i in range(n)]


def test_start_many_sends_one_array_and_answers_task_ids() -> None:
    b, ex = backend(RELEASE_2205, Exchange("--array=0-2", wrapped(ok(), ok("77\n"))))
    spec = JobSpec(("true",), extensions=(Output(dir="/o"),))
    assert b.start_many(_requests(3, spec)) == ["77_0", "77_1", "77_2"]
    script = ex.scripts[-1]
    assert script.count("sbatch") == 1 and "dsp-j0-1\ndsp-j1-1\ndsp-j2-1" in script
    assert "--job-name=dspa-" in script and "%A_%a" in script and "dsp-j1-1" in script
    ex.assert_done()


def test_a_lost_array_answer_is_unknown_for_every_task_and_a_refusal_is_each_ones() -> None:
    b, ex = backend(
        RELEASE_2205,
        Exchange("--array=0-1", wrapped(ok(), ok(), cut_after=1)),  # cut before sbatch's status: it may have run
        Exchange("--array=0-1", wrapped(ok(), fail("sbatch: error: Batch job submission failed: Invalid qos"))),
        Exchange(
            "rm -f -- /home/ada/dispatch-output/.jobs/arrays/dspa-", wrapped(ok())
        ),  # a refused array's map is removed
        Exchange("--array=0-1", wrapped(ok(), fail("cannot write the marker map /o/x", status=3))),
    )
    spec = JobSpec(("true",), resources=Resources(cpus_per_proc=1), extensions=(Output(dir="/o"),))
    lost = b.start_many(_requests(2, spec))
    assert all(isinstance(a, OutcomeUnknown) for a in lost) and lost[0] is not lost[1]
    refused = b.start_many(_requests(2, spec))
    assert all(isinstance(a, Exception) and "Invalid qos" in str(a) for a in refused)
    unmapped = b.start_many(_requests(2, spec))
    assert all(isinstance(a, Unavailable) for a in unmapped)
    ex.assert_done()  # a lost answer keeps its map (the tasks may exist): only the refusal removed one


def test_a_throttled_batch_is_one_array_with_its_cap() -> None:
    b, ex = backend(RELEASE_2205, Exchange("--array=0-3%2", wrapped(ok(), ok("78\n"))))
    spec = JobSpec(("true",), extensions=(Output(dir="/o"),))
    assert b.start_many(_requests(4, spec), max_running=2) == ["78_0", "78_1", "78_2", "78_3"]
    assert ex.scripts[-1].count("sbatch") == 1
    ex.assert_done()


def test_a_throttled_batch_that_needs_two_sbatch_calls_is_refused_and_nothing_is_sent() -> None:
    b, ex = backend(RELEASE_2205)
    one, other = JobSpec(("true",), extensions=(Output(dir="/o"),)), JobSpec(("true",), nodes=2)
    answers = b.start_many([*_requests(2, one), StartRequest("k", 1, "dsp-k-1", other)], max_running=1)
    assert all(isinstance(a, Rejected) and "need 2 sbatch calls (different sbatch options" in str(a) for a in answers)
    ex.assert_done()  # no script ran
