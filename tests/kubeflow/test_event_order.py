"""The watch cache folds events in the orders the real control plane delivers them (watches of different kinds
race), and no reading on the way names a wrong cause that the journal would keep.

Each test feeds :class:`dispatch.kubeflow.watch.Cache` the events seen with the real Trainer, JobSet, Job
controller, node lifecycle controller and kwok (docs/dev/k8s-control-plane.md), in that order, and reads the
execution after every one of them, as a supervisor cycle could.
"""

from __future__ import annotations

import copy
from typing import Any

from dispatch.kubeflow.evidence import job_evidence
from dispatch.kubeflow.mapping import ExecKey
from dispatch.kubeflow.watch import Cache
from dispatch.outcome import Cause, Evidence, State
from dispatch.records.model import GateState, JobRecord, Submission
from dispatch.spec import JobSpec
from dispatch.supervise import fold

from .test_mapping import EARLIER, NODES, NOW, cond, pod, terminated, trainjob, unknown_since

NAME = "dj-j-1"
KEY = ExecKey(1, 0, 0)
LATER = "2027-01-15T08:00:01Z"


Seen = tuple[State, Cause | None, int | None] | None


def execution(cache: Cache) -> Seen:
    """The journal's outcome of the execution (None before it started), read now as a cycle would."""
    got = cache.reading(NAME, NOW + 1)
    assert got is not None
    rec = got[2].execs.get(KEY)
    return None if rec is None else (rec.outcome.state, rec.outcome.cause, rec.outcome.exit_code)


def node(name: str, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": copy.deepcopy(extra or NODES["w0"])["status"]}


def feed(cache: Cache, events: list[tuple[str, str, dict[str, Any]]]) -> list[Seen]:
    """Feed ``events`` one by one; the execution as read after each."""
    seen = []
    for kind, type_, obj in events:
        cache.event(kind, type_, obj)
        seen.append(execution(cache))
    return seen


def fresh(*nodes: dict[str, Any]) -> Cache:
    cache = Cache(kueue=False, gate_name="dispatch.io/start", clock_now=lambda: NOW + 1)
    for kind in ("trainjobs", "jobsets", "pods", "workloads"):
        cache.replace(kind, [])
    cache.replace("nodes", list(nodes))
    return cache


def test_a_node_flapping_unknown_as_a_rank_exits_3_leaves_exit_3() -> None:
    """Seen in 2 of 4 runs of failure_keeps_exit_code: kwok's heartbeat came late, the node lifecycle controller
    set rank 0's node (rank 0 still waiting to start there) Ready=Unknown for a moment just after rank 1 exited
    3 on another node, then kwok set it Ready again; the TrainJob's Failed came last. The reading at the moment
    of the Unknown named node-lost, and the journal kept it (a named cause outweighs an exit code)."""
    cache = fresh(node("w0"), node("w1"))
    waiting = pod(phase="Pending", state={"waiting": {"reason": "ContainerCreating"}})
    running = pod("p1", index=1, node="w1")
    failed = pod("p1", phase="Failed", index=1, node="w1", state=terminated(3))
    seen = feed(
        cache,
        [
            ("trainjobs", "ADDED", trainjob()),
            ("pods", "ADDED", waiting),
            ("pods", "ADDED", running),
            ("pods", "MODIFIED", failed),
            ("nodes", "MODIFIED", node("w0", **unknown_since(LATER))),
            ("nodes", "MODIFIED", node("w0")),
            ("pods", "DELETED", waiting),
            ("trainjobs", "MODIFIED", trainjob(cond("Failed", reason="FailedJobs", message="jobset failed"))),
        ],
    )
    assert seen[-1] == (State.FAILED, Cause.EXIT, 3), seen
    assert all(s is None or s[1] is not Cause.NODE_LOST for s in seen), seen


def test_a_node_lost_before_the_exit_still_reads_node_lost() -> None:
    cache = fresh(node("w0", **unknown_since(EARLIER)), node("w1"))
    seen = feed(
        cache,
        [
            ("trainjobs", "ADDED", trainjob()),
            ("pods", "ADDED", pod(phase="Failed", state={"waiting": {"reason": "ContainerCreating"}})),
            ("pods", "ADDED", pod("p1", phase="Failed", index=1, node="w1", state=terminated(3))),
            ("trainjobs", "MODIFIED", trainjob(cond("Failed", reason="FailedJobs", message="jobset failed"))),
        ],
    )
    assert seen[-1] is not None and seen[-1][:2] == (State.FAILED, Cause.NODE_LOST), seen


def with_deadline(tj: dict[str, Any]) -> dict[str, Any]:
    tj["spec"]["activeDeadlineSeconds"] = 15
    return tj


def deleting(p: dict[str, Any]) -> dict[str, Any]:
    p["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:30Z"
    return p


def test_pods_stopped_by_the_deadline_before_the_trainjob_says_so_read_timeout() -> None:
    """The real Trainer deletes the JobSet at activeDeadlineSeconds and sets Failed DeadlineExceeded; the JobSet's
    DELETED and the pods' ends (SIGTERM: 143) may reach the adapter before the TrainJob's Failed. Read then, the
    pods named exit 143, which a supervisor would have recorded; the execution is ending, not ended."""
    cache = fresh(node("w0"), node("w1"))
    jobset = {"metadata": {"name": NAME}, "status": {"restarts": 0}}
    ranks = [pod(), pod("p1", index=1, node="w1")]
    stopped = [deleting(pod(phase="Failed", state=terminated(143)))]
    stopped.append(deleting(pod("p1", phase="Failed", index=1, node="w1", state=terminated(143))))
    deadline = cond("Failed", reason="DeadlineExceeded", message="TrainJob exceeded its active deadline")
    seen = feed(
        cache,
        [
            ("trainjobs", "ADDED", with_deadline(trainjob())),
            ("jobsets", "ADDED", jobset),
            *[("pods", "ADDED", p) for p in ranks],
            ("jobsets", "DELETED", jobset),
            *[("pods", "MODIFIED", p) for p in stopped],
            *[("pods", "DELETED", p) for p in stopped],
            ("trainjobs", "MODIFIED", with_deadline(trainjob(deadline))),
        ],
    )
    assert all(s in (None, (State.RUNNING, None, None)) for s in seen[:-1]), seen
    assert seen[-1] is not None and seen[-1][:2] == (State.FAILED, Cause.TIMEOUT), seen


def test_pods_stopped_by_a_jobset_deleted_with_no_word_from_the_trainjob_read_their_exit_after_the_settle() -> None:
    cache = fresh(node("w0"))
    stopped = deleting(pod(phase="Failed", state=terminated(143)))  # ended at NOW: the settle counts from there
    feed(cache, [("trainjobs", "ADDED", trainjob()), ("pods", "ADDED", pod()), ("pods", "MODIFIED", stopped)])
    got = cache.reading(NAME, NOW + 31)
    assert got is not None
    assert got[1].execution is not None
    assert (got[1].execution.state, got[1].execution.cause, got[1].execution.exit_code) == (
        State.FAILED,
        Cause.EXIT,
        143,
    )


def test_an_end_read_once_then_read_running_while_a_rank_still_ends_reaches_the_record() -> None:
    """Seen in the journey on a loaded machine: rank 1 exited 3 while rank 0's pod was being deleted, so one
    reading named the end; the TrainJob's Failed came next with rank 0 still ending, and the readings said running
    (the settle) until it ended. A supervisor that missed the first reading and recorded a running one must
    still take the end once rank 0 is gone: each reading stamps the journal's outcome with its own time, never
    the time the end was first read (older evidence never rewinds a record, so that stamp was ignored for ever)."""
    cache = fresh(node("w0"), node("w1"))
    rank0, rank1 = pod(), pod("p1", index=1, node="w1")
    failed = cond("Failed", reason="ReachedMaxRestarts", message="jobset failed due to reaching max number of restarts")
    stopping = deleting(pod())
    events = [
        ("trainjobs", "ADDED", trainjob()),
        ("pods", "ADDED", rank0),
        ("pods", "ADDED", rank1),
        ("pods", "MODIFIED", pod("p1", phase="Failed", index=1, node="w1", state=terminated(3))),
        ("pods", "MODIFIED", stopping),
        ("trainjobs", "MODIFIED", trainjob(failed)),
        ("pods", "MODIFIED", deleting(pod(phase="Failed", state=terminated(143)))),
        ("pods", "DELETED", stopping),
    ]
    record = JobRecord(
        id="j",
        cluster="kubeflow",
        spec=JobSpec(command=("true",)),
        created_at=NOW - 60,
        submissions=[Submission(1, "m", NOW - 60, scheduler_id=NAME, gate=GateState.OPEN)],
    )
    shown = []
    for step, (kind, type_, obj) in enumerate(events, start=1):
        cache.event(kind, type_, obj)
        at = NOW + step
        got = cache.reading(NAME, at)
        assert got is not None
        evidence = job_evidence(NAME, *got, Evidence("kubernetes:watch", at), kueue=False)
        assert evidence.outcome.evidence.observed_at == at
        assert all(e.outcome.evidence.observed_at == at for e in evidence.executions)
        shown.append((evidence.outcome.state, evidence.executions[-1].outcome.state if evidence.executions else None))
        if step != 5:  # the supervisor's cycles come between the events, and one misses the first end
            record, _ = fold(record, evidence, at, refresh=0.0)
    # the order this test is about: the execution read ended, then the TrainJob read running while rank 0 ends
    assert shown[4][1] is State.FAILED and (State.RUNNING, State.FAILED) in shown[5:], shown
    assert record.outcome is not None
    assert (record.outcome.state, record.outcome.cause, record.outcome.exit_code) == (State.FAILED, Cause.EXIT, 3)
