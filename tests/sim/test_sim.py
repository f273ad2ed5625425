"""The simulator: clean seeds in both shapes, determinism, replay dumps, the CLI, and the checks themselves."""

from __future__ import annotations

import json

import pytest

from dispatch.clock import FakeClock
from dispatch.memory import MemoryScheduler, backend
from dispatch.records.model import JobRecord, Submission
from dispatch.sim import Config, check, run
from dispatch.sim.__main__ import main
from dispatch.spec import JobSpec


@pytest.mark.parametrize("shape", ["slurm", "kubeflow"])
def test_seeds_run_clean_and_settle(shape: str) -> None:
    for seed in range(12):
        result = run(Config(seed=seed, shape=shape))
        assert result.violations == [], (seed, result.violations[:3])
        assert result.settled, (seed, result.unsettled)
        assert result.steps > 150


def test_a_seed_replays_identically() -> None:
    a = run(Config(seed=7, shape="kubeflow", supervisors=3))
    b = run(Config(seed=7, shape="kubeflow", supervisors=3))
    assert a.trace == b.trace and len(a.trace) > 100


@pytest.mark.parametrize("shape", ["slurm", "kubeflow"])
def test_the_steady_path_decides_exactly_as_the_whole_way(shape: str) -> None:
    # every step, fault, crash and takeover of these runs is in the trace: one difference in what a supervisor
    # read, wrote or called shows
    for seed in range(8):
        steady = run(Config(seed=seed, shape=shape, supervisors=3))
        whole = run(Config(seed=seed, shape=shape, supervisors=3, steady=False))
        assert steady.trace == whole.trace, seed
        assert steady.violations == whole.violations == [], seed


def test_stop_at_dumps_the_trace_records_and_truth() -> None:
    result = run(Config(seed=3, shape="slurm", stop_at=60))
    assert result.steps == 60 and result.dump is not None
    assert set(result.dump) >= {"records", "truth", "calls", "workers"}
    assert result.dump["records"] and result.dump["truth"]
    assert result.trace[-1].split()[0] == "60" or int(result.trace[-1].split()[0]) <= 60


def test_the_runs_exercise_faults_crashes_and_recovery() -> None:
    counts: dict[str, int] = {}
    for seed in range(10):
        for k, v in run(Config(seed=seed, shape="slurm" if seed % 2 else "kubeflow")).counts.items():
            counts[k] = counts.get(k, 0) + v
    for kind in ("crash", "restart", "fault", "preempt", "admin-hold", "run", "tick", "spurious-unknown", "no-answer"):
        assert counts.get(kind, 0) > 0, kind


def test_the_liveness_bound_is_enforced() -> None:
    result = run(Config(seed=1, shape="slurm", quiet=1))
    assert not result.settled
    assert any(v.startswith("liveness") for v in result.violations)


def test_cli_json_reports_seeds_steps_violations_and_a_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--seeds", "0-3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["seeds"] == 4 and out["steps"] > 0 and out["violations"] == 0
    assert out["summary"]["shapes"] == {"slurm": 2, "kubeflow": 2}


def test_cli_replay_prints_the_trace_and_dump(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--seed", "2", "--stop-at", "40", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["steps"] == 40 and out["trace"] and out["dump"]["truth"]


def _record(job_id: str, n: int, marker: str, sid: str | None) -> JobRecord:
    return JobRecord(
        job_id, "memory", JobSpec(command=("x",)), 0.0, submissions=[Submission(n, marker, 0.0, scheduler_id=sid)]
    )


def test_the_checks_catch_an_object_without_a_record_and_two_live_executions() -> None:
    clock = FakeClock()
    sched = MemoryScheduler(clock, "slurm", nodes=4)
    b = backend(sched)
    spec = JobSpec(command=("sleep", "100"))
    a = sched.create("j1", 1, "dsp-j1-1", spec)
    c = sched.create("j1", 1, "dsp-j1-1", spec)
    sched.open_gate(a)
    sched.open_gate(c)
    found = check({"j1": _record("j1", 1, "dsp-j1-1", a)}, sched, b)
    names = {v.split(":")[0] for v in found}
    assert {
        "one-live-execution",
        "no-object-without-record",
        "gate-opened-only-when-recorded",
        "no-action-twice",
    } <= names
    assert any("has no recorded submission" in v for v in check({}, sched, b))


def test_actors_lists_every_writer_of_the_records(capsys: pytest.CaptureFixture[str]) -> None:
    from dispatch.sim.__main__ import main

    assert main(["--actors"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert names == [
        "supervisor",
        "scheduler",
        "submit",
        "submit-many",
        "stop",
        "hold",
        "release",
        "status",
        "narrow-status",
        "outage",
    ]


def test_the_other_writers_act_in_a_run() -> None:
    """Over a few seeds every writer beside the supervisors writes: the read commands' refresh (both users),
    submit_many, a submit that met a taken id, and an outage that leaves the records to the read commands."""
    counts: dict[str, int] = {}
    for seed in range(8):
        result = run(Config(seed=seed, shape="slurm" if seed % 2 == 0 else "kubeflow"))
        for key, n in result.counts.items():
            counts[key] = counts.get(key, 0) + n
    for writer in ("status", "narrow-status", "submit-many", "outage", "submit", "stop", "user-hold"):
        assert counts.get(writer, 0) > 0, (writer, counts)


def test_a_failed_batch_must_name_the_jobs_it_recorded() -> None:
    from dispatch.cluster import Submitted
    from dispatch.errors import Conflict, OutcomeUnknown
    from dispatch.sim.invariants import check_batch_call

    assert check_batch_call(Conflict("taken"), ["j1", "j2"]) == [
        "batch-once: a failed submit_many (Conflict) recorded ['j1', 'j2'] without naming them"
    ]
    named = OutcomeUnknown("stopped halfway")
    named.submitted = [Submitted("j1"), Submitted("j2")]  # type: ignore[attr-defined]
    assert check_batch_call(named, ["j1", "j2"]) == []
    assert check_batch_call(Conflict("taken before anything was recorded"), []) == []


def test_the_simulators_store_offers_every_store_interface_the_records_do() -> None:
    """A store interface the wrapper lacks is a feature the simulated supervisors silently go without (the
    supervisor checks each with isinstance): node blames were so once, when pruning joined their interface."""
    from dispatch.records import MemoryRecords
    from dispatch.records.nodes import NodeBlames
    from dispatch.sim.conductor import Conductor, ParkedRecords

    inner = MemoryRecords()
    assert isinstance(inner, NodeBlames)
    parked = ParkedRecords(inner, Conductor(lambda: 0.0), lambda: 0.0)
    assert isinstance(parked, NodeBlames)
