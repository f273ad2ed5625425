"""Job arrays in the memory scheduler's Slurm shape: a batch that can share an array becomes one, each task its
own object ``<array>_<task>``, and anything addressed to one task's id touches that task alone."""

from __future__ import annotations

import pytest

from dispatch import Cause, FakeClock, JobSpec, NotFound, OutcomeUnknown, State, Unavailable
from dispatch.identity import RestartId
from dispatch.memory import MemoryScheduler, backend
from dispatch.memory.backend import SlurmShapedBackend
from dispatch.spi import BatchStarter, Gate, JobEvidence, StartRequest

SLEEP = JobSpec(command=("sleep", "100"))


def requests(n: int, spec: JobSpec = SLEEP, tag: str = "j") -> list[StartRequest]:
    return [StartRequest(f"{tag}{i}", 1, f"dsp-{tag}{i}-1", spec) for i in range(n)]


def cluster(nodes: int = 4) -> tuple[FakeClock, MemoryScheduler, SlurmShapedBackend]:
    clock = FakeClock()
    s = MemoryScheduler(clock, "slurm", nodes=nodes, min_job_age=300)
    b = backend(s)
    assert isinstance(b, SlurmShapedBackend)
    return clock, s, b


def started_array(n: int = 3) -> tuple[FakeClock, MemoryScheduler, SlurmShapedBackend, list[str]]:
    clock, s, b = cluster()
    sids = b.start_many(requests(n))
    assert all(isinstance(x, str) for x in sids)
    return clock, s, b, [str(x) for x in sids]


def evidence(b: SlurmShapedBackend, sids: list[str]) -> dict[str, JobEvidence]:
    got = b.inspect_many(sids)
    assert all(isinstance(ev, JobEvidence) for ev in got.values()) and set(got) == set(sids)
    return {sid: ev for sid, ev in got.items() if isinstance(ev, JobEvidence)}


def states(b: SlurmShapedBackend, sids: list[str]) -> list[State]:
    got = evidence(b, sids)
    return [got[sid].outcome.state for sid in sids]


def test_a_batch_that_can_share_an_array_is_one_array_of_gated_tasks() -> None:
    _, s, b, sids = started_array(3)
    assert isinstance(b, BatchStarter)
    array = sids[0].split("_")[0]
    assert sids == [f"{array}_0", f"{array}_1", f"{array}_2"] and s.arrays[array] == sids
    got = evidence(b, sids)
    for i, sid in enumerate(sids):
        ev = got[sid]
        assert ev.marker == f"dsp-j{i}-1" and ev.gate is Gate.CLOSED and ev.outcome.cause is Cause.GATED
    assert [c.method for c in s.calls] == ["start_many"], "one scheduler call for the whole batch"


def test_requests_that_differ_in_more_than_their_command_are_not_one_array() -> None:
    _, s, b = cluster()
    two_nodes = JobSpec(command=("sleep", "5"), nodes=2)
    reqs = [*requests(2), StartRequest("k", 1, "dsp-k-1", two_nodes), *requests(1, tag="x")]
    reqs.append(StartRequest("e", 1, "dsp-e-1", SLEEP, exclude=("node1",)))
    sids = [str(x) for x in b.start_many(reqs)]
    array = sids[0].split("_")[0]
    assert sids[:2] == [f"{array}_0", f"{array}_1"] and sids[3] == f"{array}_2", "same spec but the command: one array"
    assert "_" not in sids[2] and "_" not in sids[4], "alone in its group: a plain job"
    assert s.jobs[sids[4]].exclude == frozenset({"node1"})


def test_open_many_of_a_range_opens_those_tasks_alone() -> None:
    _, s, b, sids = started_array(4)
    assert b.open_many(sids[1:3]) == [None, None]
    assert [s.jobs[sid].gate_open for sid in sids] == [False, True, True, False]
    assert states(b, sids) == [State.PENDING, State.RUNNING, State.RUNNING, State.PENDING]
    missing = b.open_many([sids[0], "9999_0"])
    assert missing[0] is None and isinstance(missing[1], NotFound)


def test_a_task_requeued_alone_runs_again_its_siblings_untouched() -> None:
    clock, _, b, sids = started_array(3)
    b.open_many(sids)
    clock.advance(10)
    b.requeue(sids[1])
    clock.advance(1)
    got = evidence(b, sids)
    again = got[sids[1]]
    assert [RestartId.parse(e.identity).restart for e in again.executions] == [0, 1]
    assert again.executions[0].outcome.state is State.CANCELLED and again.outcome.state is State.RUNNING
    for sid in (sids[0], sids[2]):
        assert len(got[sid].executions) == 1 and got[sid].outcome.state is State.RUNNING


def test_a_task_held_alone_waits_while_its_siblings_run() -> None:
    _, s, b, sids = started_array(3)
    b.hold(sids[0], "u1")
    b.open_many(sids)
    assert states(b, sids) == [State.HELD, State.RUNNING, State.RUNNING]
    assert s.jobs[sids[1]].holds == [] and s.jobs[sids[2]].holds == []
    b.release(sids[0], "u1")
    assert states(b, sids)[0] is State.RUNNING


def test_a_task_cancelled_alone_ends_its_siblings_run_on() -> None:
    clock, _, b, sids = started_array(3)
    b.open_many(sids)
    clock.advance(5)
    wait = b.stop_job(sids[2])
    clock.advance(wait)
    assert states(b, sids) == [State.RUNNING, State.RUNNING, State.CANCELLED]


def test_the_admins_act_on_one_task_alone() -> None:
    clock, s, b, sids = started_array(4)
    b.open_many(sids[:3])
    clock.advance(5)
    s.control.requeue(sids[0])
    s.control.cancel(sids[1])
    s.control.admin_hold(sids[3])
    got = evidence(b, sids)
    assert len(got[sids[0]].executions) == 2 and s.jobs[sids[0]].admin_requeues == 1
    assert got[sids[0]].outcome.state is State.RUNNING, "requeued: it runs again"
    assert got[sids[1]].outcome.state is State.CANCELLED and s.jobs[sids[1]].admin_cancelled
    assert got[sids[2]].outcome.state is State.RUNNING and len(got[sids[2]].executions) == 1
    assert got[sids[3]].outcome.cause is Cause.ADMIN_HELD and not s.jobs[sids[2]].admin_held
    assert not s.jobs[sids[2]].admin_cancelled and s.jobs[sids[2]].admin_requeues == 0


def test_an_admin_cannot_requeue_an_ended_task() -> None:
    """Slurm refuses to requeue an ended ``--no-requeue`` job ("Job has already finished"), and dispatch submits
    every job so: a task that ended stays ended, so a resubmission dispatch made of it is the only one to run."""
    clock, s, b, sids = started_array(2)
    b.open_many(sids)
    clock.advance(5)
    s.control.cancel(sids[0])
    with pytest.raises(ValueError, match="cannot be requeued"):
        s.control.requeue(sids[0])
    assert evidence(b, sids)[sids[0]].outcome.state is State.CANCELLED and s.jobs[sids[0]].admin_requeues == 0


def test_a_task_is_found_by_its_own_marker() -> None:
    _, _, b, sids = started_array(3)
    found = b.find_many(["dsp-j1-1", "dsp-nope-1"], 0.0)
    assert [f.scheduler_id for f in found["dsp-j1-1"]] == [sids[1]] and found["dsp-nope-1"] == []
    assert [f.scheduler_id for f in b.find("dsp-j2-1", 0.0)] == [sids[2]]


def test_each_task_is_purged_by_itself() -> None:
    clock, s, b, sids = started_array(2)
    b.open_many(sids[:1])
    clock.advance(100)  # the opened task ends; its sibling still waits behind its gate
    clock.advance(300)
    b.inspect_many(sids)
    assert s.jobs[sids[0]].purged and not s.jobs[sids[1]].purged


@pytest.mark.parametrize(("kind", "landed"), [("unknown", True), ("unknown", False), ("unavailable", False)])
def test_a_fault_on_start_many_is_the_whole_calls_answer(kind: str, landed: bool) -> None:
    _, s, b = cluster()
    s.control.inject("start_many", kind, landed=landed)
    answers = b.start_many(requests(3))
    expected = OutcomeUnknown if kind == "unknown" else Unavailable
    assert len(answers) == 3 and all(type(a) is expected for a in answers)
    assert len({id(a) for a in answers}) == 3, "each answer its own copy"
    assert len(s.jobs) == (3 if landed else 0)
    if landed:  # the array exists, gated: each task is found by its marker
        assert all(not t.gate_open for t in s.jobs.values())
        assert [f.marker for f in b.find("dsp-j0-1", 0.0)] == ["dsp-j0-1"]


@pytest.mark.parametrize(("kind", "landed"), [("unknown", True), ("unknown", False), ("unavailable", False)])
def test_a_fault_on_open_many_is_the_whole_calls_answer(kind: str, landed: bool) -> None:
    _, s, b, sids = started_array(2)
    s.control.inject("open_many", kind, landed=landed)
    answers = b.open_many(sids)
    expected = OutcomeUnknown if kind == "unknown" else Unavailable
    assert all(type(a) is expected for a in answers)
    assert [s.jobs[sid].gate_open for sid in sids] == [landed, landed]


def test_the_kubeflow_shape_has_no_arrays() -> None:
    s = MemoryScheduler(FakeClock(), "kubeflow")
    assert not isinstance(backend(s), BatchStarter)
