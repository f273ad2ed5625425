"""The state/cause table of dispatch.kubeflow.mapping, one test per row, on hand-built objects."""

from __future__ import annotations

from typing import Any

import pytest

from dispatch.kubeflow import names as n
from dispatch.kubeflow.mapping import ExecKey, Objects, Reading, last_eviction, read
from dispatch.outcome import Cause, State
from dispatch.spi import Gate

NOW = 1_800_000_000.0
T = "2027-01-15T08:00:00Z"


def cond(type_: str, status: str = "True", reason: str = "", message: str = "") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": T}


def trainjob(*conds: dict[str, Any], suspend: bool = False, **ann: str) -> dict[str, Any]:
    annotations = {n.GATE: "open", n.ATTEMPT: "1", n.JOB_ID: "j", n.SUBMISSION: "1", n.MARKER_FULL: "m", **ann}
    return {
        "metadata": {"name": "dj-j-1", "labels": {n.MANAGED: "true", n.MARKER: "m"}, "annotations": annotations},
        "spec": {"suspend": suspend},
        "status": {"conditions": list(conds)},
    }


def pod(
    name: str = "p0",
    *,
    phase: str = "Running",
    state: dict[str, Any] | None = None,
    disruption: str | None = None,
    node: str = "w0",
    index: int = 0,
    attempt: str = "1",
    last: dict[str, Any] | None = None,
) -> dict[str, Any]:
    cs: dict[str, Any] = {"name": "node", "state": state or {"running": {"startedAt": T}}}
    if last:
        cs["lastState"] = last
    conds = [cond("DisruptionTarget", "True", disruption)] if disruption else []
    return {
        "metadata": {
            "name": name,
            "labels": {
                n.JOBSET_NAME: "dj-j-1",
                n.RESTART_ATTEMPT: "0",
                n.JOB_INDEX: "0",
                n.COMPLETION_INDEX: str(index),
            },
            "annotations": {n.ATTEMPT: attempt},
        },
        "spec": {"nodeName": node},
        "status": {"phase": phase, "containerStatuses": [cs], "conditions": conds},
    }


def terminated(code: int, reason: str = "Error") -> dict[str, Any]:
    return {"terminated": {"exitCode": code, "reason": reason, "startedAt": T, "finishedAt": T}}


def workload(*conds: dict[str, Any], evictions: int = 0, active: bool = True, reserved: bool = True) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": list(conds)}
    if evictions:
        status["schedulingStats"] = {"evictions": [{"reason": "Preempted", "count": evictions}]}
    if reserved:
        status["admission"] = {"clusterQueue": "cq"}
    return {"metadata": {"name": "wl"}, "spec": {"active": active}, "status": status}


NODES = {"w0": {"metadata": {"name": "w0"}, "status": {"conditions": [cond("Ready")]}}}


def reading(
    tj: dict[str, Any],
    pods: list[dict[str, Any]] = (),
    gone: list[dict[str, Any]] = (),
    wl: Any = None,
    nodes: dict[str, Any] | None = None,
    kueue: bool = False,
) -> Reading:  # type: ignore[assignment]
    o = Objects(
        trainjob=tj,
        workload=wl,
        pods=list(pods),
        gone_pods=list(gone),
        nodes=nodes if nodes is not None else NODES,
        nodes_known=True,
        kueue=kueue,
    )
    return read(o, NOW)


def ended(r: Reading) -> tuple[State, Cause | None, int | None]:
    assert r.execution is not None, "the execution has not started"
    return r.execution.state, r.execution.cause, r.execution.exit_code


# ---- ended executions ------------------------------------------------------------------------------------


def test_stop_requested_reads_cancelled() -> None:
    r = reading(trainjob(suspend=True, **{n.STOP: T}), gone=[pod()])
    assert ended(r)[:2] == (State.CANCELLED, Cause.CANCELLED)
    assert r.waiting is not None and r.waiting.cause is Cause.CANCELLED


def test_complete_reads_succeeded_exit_zero() -> None:
    r = reading(
        trainjob(cond("Complete", reason="AllJobsCompleted")),
        [pod(phase="Succeeded", state=terminated(0, "Completed"))],
    )
    assert ended(r) == (State.SUCCEEDED, Cause.EXIT, 0)


def test_deadline_exceeded_reads_timeout() -> None:
    r = reading(trainjob(cond("Failed", reason="DeadlineExceeded")), gone=[pod()])
    assert ended(r)[:2] == (State.FAILED, Cause.TIMEOUT)


def test_runtime_not_supported_reads_rejected() -> None:
    r = reading(trainjob(cond("Failed", reason="TrainingRuntimeNotSupported")), gone=[pod()])
    assert ended(r)[:2] == (State.FAILED, Cause.REJECTED)


@pytest.mark.parametrize(
    ("reason", "state", "cause"),
    [
        ("Preempted", State.FAILED, Cause.PREEMPTED),
        ("DeactivatedDueToAdmissionCheck", State.FAILED, Cause.REJECTED),
        ("DeactivatedDueToMaximumExecutionTimeExceeded", State.FAILED, Cause.TIMEOUT),
        ("NodeFailures", State.FAILED, Cause.NODE_LOST),
        ("PodsReadyTimeout", State.FAILED, Cause.LAUNCH_FAILED),
        ("ClusterQueueStopped", State.CANCELLED, Cause.ADMIN_HELD),
        ("LocalQueueStopped", State.CANCELLED, Cause.ADMIN_HELD),
        ("AdmissionCheck", State.FAILED, Cause.UNKNOWN),
    ],
)
def test_kueue_eviction_rows(reason: str, state: State, cause: Cause) -> None:
    r = reading(
        trainjob(suspend=True), gone=[pod()], wl=workload(cond("Evicted", reason=reason), evictions=1), kueue=True
    )
    assert ended(r)[:2] == (state, cause)


def test_deactivated_with_our_hold_reads_held() -> None:
    tj = trainjob(suspend=True, **{n.HOLDS: "h1"})
    r = reading(
        tj, gone=[pod()], wl=workload(cond("Evicted", reason="Deactivated"), evictions=1, active=False), kueue=True
    )
    assert ended(r)[:2] == (State.CANCELLED, Cause.HELD)
    assert r.waiting is not None and (r.waiting.state, r.waiting.cause) == (State.HELD, Cause.HELD)


def test_deactivated_by_someone_else_reads_admin_held() -> None:
    r = reading(
        trainjob(suspend=True),
        gone=[pod()],
        wl=workload(cond("Evicted", reason="Deactivated"), evictions=1, active=False),
        kueue=True,
    )
    assert ended(r)[:2] == (State.CANCELLED, Cause.ADMIN_HELD)
    assert "workload-deactivated" in r.foreign_holds


def test_plain_suspended_by_our_hold_reads_held() -> None:
    r = reading(trainjob(suspend=True, **{n.HOLDS: "h1"}), gone=[pod()])
    assert ended(r)[:2] == (State.CANCELLED, Cause.HELD)
    assert r.holds == ("h1",)


def test_plain_suspended_by_someone_else_reads_admin_held() -> None:
    r = reading(trainjob(suspend=True), gone=[pod()])
    assert ended(r)[:2] == (State.CANCELLED, Cause.ADMIN_HELD)
    assert r.foreign_holds == ("suspended",)


FAILED = cond("Failed", reason="FailedJobs", message="jobset failed (first failed job: dj-j-1-node-0)")


@pytest.mark.parametrize(
    ("reason", "cause"),
    [
        ("PreemptionByScheduler", Cause.PREEMPTED),
        ("DeletionByTaintManager", Cause.NODE_LOST),
        ("DeletionByPodGC", Cause.NODE_LOST),
        ("TerminationByKubelet", Cause.NODE_LOST),
        ("EvictionByEvictionAPI", Cause.PREEMPTED),
    ],
)
def test_pod_disruption_rows(reason: str, cause: Cause) -> None:
    r = reading(trainjob(FAILED), gone=[pod(phase="Failed", state=terminated(143), disruption=reason)])
    assert ended(r)[:2] == (State.FAILED, cause)


@pytest.mark.parametrize(
    "spec",
    [{"unschedulable": True}, {"taints": [{"key": "node.kubernetes.io/out-of-service", "effect": "NoExecute"}]}],
    ids=["cordoned", "out-of-service"],
)
def test_an_eviction_from_a_node_taken_out_of_service_reads_cessation(spec: dict[str, Any]) -> None:
    """A drain cordons the node, then evicts its pods through the Eviction API: planned, not a preemption."""
    nodes = {"w0": {"metadata": {"name": "w0"}, "spec": spec, "status": {"conditions": [cond("Ready")]}}}
    evicted = pod(phase="Failed", state=terminated(143), disruption="EvictionByEvictionAPI")
    r = reading(trainjob(FAILED), gone=[evicted], nodes=nodes)
    assert ended(r)[:2] == (State.FAILED, Cause.CESSATION)
    assert r.execution is not None and "EvictionByEvictionAPI (w0: node " in (r.execution.detail or "")


@pytest.mark.parametrize("kueue", [True, False], ids=["kueue", "plain"])
def test_a_pod_evicted_from_a_lost_real_node_reads_node_lost_though_nothing_else_ends(kueue: bool) -> None:
    """Seen on the real nodes (tests/training/test_kubeflow_realpods.py, the node-lost case): rank 1's kubelet
    stops answering; the taint manager evicts its pod, which stays Terminating with its container still reported
    running (nobody on the node answers), so its Job stays FailureTarget, the JobSet and the TrainJob never fail
    and Kueue keeps the Workload admitted; rank 0's pod, deleted by the Job controller, is gone. Kueue mode waited
    for the Workload to say why, and both modes read the object pending (a restart of the JobSet) after the
    execution, for as long as the node stayed away; the pod's own condition says why."""
    stranded = pod("p1", index=1, node="w1", disruption="DeletionByTaintManager")
    stranded["metadata"]["deletionTimestamp"] = T
    rank0 = pod("p0", phase="Failed", state=terminated(143))
    nodes = {"w0": NODES["w0"], "w1": {"metadata": {"name": "w1"}, **unknown_since(EARLIER)}}
    wl = workload(cond("Admitted")) if kueue else None
    r = reading(trainjob(), [stranded], gone=[rank0], wl=wl, nodes=nodes, kueue=kueue)
    assert ended(r)[:2] == (State.FAILED, Cause.NODE_LOST)
    assert r.execution is not None and r.execution.detail == "DeletionByTaintManager (w1)"
    assert r.waiting is None  # the object's outcome is the execution's: no restart comes while the pod is stranded


def test_oom_killed_reads_out_of_memory() -> None:
    r = reading(trainjob(FAILED), [pod(phase="Failed", state=terminated(137, "OOMKilled"))])
    assert ended(r) == (State.FAILED, Cause.OUT_OF_MEMORY, 137)


def test_oom_killed_with_exit_0_does_not_explain_another_ranks_failure() -> None:
    """containerd marks a container OOMKilled when any process of its cgroup was, and the rank may go on and exit
    0 (seen on the real nodes: tests/kubeflow/test_realpods.py): the failure is the other rank's exit 3."""
    survived = pod("p0", phase="Succeeded", state=terminated(0, "OOMKilled"))
    failed = pod("p1", phase="Failed", state=terminated(3), index=1)
    r = reading(trainjob(FAILED), [survived, failed])
    assert ended(r) == (State.FAILED, Cause.EXIT, 3)


def test_oom_in_an_earlier_container_instance_counts() -> None:
    r = reading(trainjob(FAILED), [pod(phase="Failed", state=terminated(1), last=terminated(137, "OOMKilled"))])
    assert ended(r)[:2] == (State.FAILED, Cause.OUT_OF_MEMORY)


EARLIER = "2027-01-15T07:59:50Z"
"""Ten seconds before ``T``."""


def unknown_since(at: str) -> dict[str, Any]:
    lost = cond("Ready", "Unknown", "NodeStatusUnknown")
    lost["lastTransitionTime"] = at
    return {"status": {"conditions": [lost]}}


@pytest.mark.parametrize("node", [None, unknown_since(EARLIER)])
def test_pod_on_a_lost_node_reads_node_lost(node: Any) -> None:
    nodes = {} if node is None else {"w0": {"metadata": {"name": "w0"}, **node}}
    r = reading(trainjob(FAILED), [pod(phase="Failed", state=terminated(1))], nodes=nodes)
    assert ended(r)[:2] == (State.FAILED, Cause.NODE_LOST)


@pytest.mark.parametrize("lost", [T, "2027-01-15T08:00:01Z"], ids=["same-second", "after"])
def test_a_node_lost_once_a_program_failed_on_its_own_does_not_explain_the_failure(lost: str) -> None:
    """Seen on the real control plane under load: kwok's heartbeat came late, the node lifecycle controller set
    a node Ready=Unknown for a moment just as a rank on another node exited 3 (its kubelet reported the code),
    while rank 0 still waited to start on the flapping node; the exit code is the answer, not node-lost."""
    failed = pod("p1", phase="Failed", index=1, node="w1", state=terminated(3))
    waiting = pod(phase="Pending", state={"waiting": {"reason": "ContainerCreating"}})
    nodes = {"w0": {"metadata": {"name": "w0"}, **unknown_since(lost)}, "w1": NODES["w0"]}
    assert ended(reading(trainjob(), [waiting, failed], nodes=nodes)) == (State.FAILED, Cause.EXIT, 3)
    # the JobSet's failure deletes the waiting pod; the TrainJob fails
    after = reading(trainjob(FAILED), [failed], gone=[waiting], nodes=nodes)
    assert ended(after) == (State.FAILED, Cause.EXIT, 3)
    # a node lost before the program's own exit still explains it
    nodes["w0"] = {"metadata": {"name": "w0"}, **unknown_since(EARLIER)}
    after = reading(trainjob(FAILED), [failed], gone=[waiting], nodes=nodes)
    assert ended(after)[:2] == (State.FAILED, Cause.NODE_LOST)


@pytest.mark.parametrize("why", ["ImagePullBackOff", "ErrImagePull", "InvalidImageName"])
def test_an_image_that_cannot_be_pulled_reads_not_launchable(why: str) -> None:
    """The job's own image (it does not exist, or cannot be named): no node's fault, blames none."""
    stuck = pod("p1", phase="Pending", state={"waiting": {"reason": why}}, index=1)
    r = reading(trainjob(FAILED), [pod(phase="Failed", state=terminated(0, "Completed")), stuck])
    assert ended(r)[:2] == (State.FAILED, Cause.NOT_LAUNCHABLE)


def waiting_since(reason: str, made: str, message: str = "") -> dict[str, Any]:
    stuck = pod("p0", phase="Pending", state={"waiting": {"reason": reason, "message": message}})
    stuck["metadata"]["creationTimestamp"] = made
    return stuck


def test_pods_that_never_start_end_their_execution_though_nothing_else_fails() -> None:
    """On real kubelets a pod whose image is not there waits for ever: its Job, JobSet and TrainJob never fail (seen
    on the real nodes), so the wait itself is the evidence. A reason no retry ends reads failed at once; a rank
    that started does not change it."""
    never = [waiting_since("ErrImageNeverPull", T, 'Container image "x" is not present with pull policy of Never')]
    r = reading(trainjob(), never)
    assert ended(r)[:2] == (State.FAILED, Cause.NOT_LAUNCHABLE)
    assert r.execution is not None and "ErrImageNeverPull (p0): Container image" in r.execution.detail
    started = pod("p1", index=1)
    assert ended(reading(trainjob(), [*never, started]))[:2] == (State.FAILED, Cause.NOT_LAUNCHABLE)
    young = reading(trainjob(), [waiting_since("ImagePullBackOff", "2027-01-15T07:59:00Z")])  # a minute
    assert young.execution is None and young.waiting is not None and young.waiting.state is State.PENDING
    stopped = reading(trainjob(**{n.STOP: "1"}), never)
    assert stopped.execution is None or stopped.execution.cause is not Cause.NOT_LAUNCHABLE


@pytest.mark.parametrize(
    "why", ["ImagePullBackOff", "ErrImagePull", "CreateContainerError", "CreateContainerConfigError"]
)
def test_a_launch_that_may_yet_succeed_never_ends_the_execution_however_long_it_waits(why: str) -> None:
    """A registry down for an hour, a Secret made late: the kubelet retries, and the pod starts once it can. An end
    read meanwhile would be final in the records (the fold keeps the first end) while the ranks then run
    unsupervised, and a resubmission beside them would run the job twice. It stays waiting, its reason shown."""
    hour = reading(trainjob(), [waiting_since(why, "2027-01-15T07:00:00Z", "rpc error: connection refused")])
    assert hour.execution is None and hour.waiting is not None and hour.waiting.state is State.PENDING
    assert f"waiting to start: {why} (p0): rpc error: connection refused" == hour.waiting.detail


@pytest.mark.parametrize(
    ("message", "cause"),
    [
        ('secret "wandb-key" not found', Cause.NOT_LAUNCHABLE),
        ('configmap "train-config" not found', Cause.NOT_LAUNCHABLE),
        ("couldn't find key token in Secret ns/wandb-key", Cause.NOT_LAUNCHABLE),
        ("failed to sync configmap cache: timed out waiting for the condition", Cause.LAUNCH_FAILED),
    ],
)
def test_a_missing_secret_or_configmap_is_the_jobs_own_failure(message: str, cause: Cause) -> None:
    """``CreateContainerConfigError`` naming what the pods ask that does not exist is the same on every node: the
    job's own (blames none); a node that could not read what exists is the node's."""
    waiting = {"waiting": {"reason": "CreateContainerConfigError", "message": message}}
    stuck = pod("p1", phase="Pending", state=waiting, index=1)
    r = reading(trainjob(FAILED), [pod(phase="Failed", state=terminated(0, "Completed")), stuck])
    assert ended(r)[:2] == (State.FAILED, cause)


def test_a_container_that_cannot_be_created_reads_launch_failed() -> None:
    stuck = pod("p1", phase="Pending", state={"waiting": {"reason": "RunContainerError"}}, index=1)
    r = reading(trainjob(FAILED), [pod(phase="Failed", state=terminated(0, "Completed")), stuck])
    assert ended(r)[:2] == (State.FAILED, Cause.LAUNCH_FAILED)


@pytest.mark.parametrize("code", [126, 127])
def test_program_not_found_reads_not_launchable(code: int) -> None:
    r = reading(trainjob(FAILED), [pod(phase="Failed", state=terminated(code))])
    assert ended(r) == (State.FAILED, Cause.NOT_LAUNCHABLE, code)


def test_non_zero_exit_reads_exit_with_the_first_failures_code() -> None:
    early = pod(
        "p1",
        phase="Failed",
        index=1,
        state={"terminated": {"exitCode": 3, "startedAt": T, "finishedAt": "2027-01-15T08:00:05Z"}},
    )
    late = pod(
        "p0",
        phase="Failed",
        state={"terminated": {"exitCode": 143, "startedAt": T, "finishedAt": "2027-01-15T08:00:09Z"}},
    )
    r = reading(trainjob(FAILED), [late, early])
    assert ended(r) == (State.FAILED, Cause.EXIT, 3)


def test_in_the_same_second_the_programs_own_code_beats_the_stopped_ranks_sigterm() -> None:
    """finishedAt counts whole seconds: rank 1 exits 3 and rank 0, stopped by the failure, ends by SIGTERM."""
    at = "2027-01-15T08:00:05Z"
    own = pod("p1", phase="Failed", index=1, state={"terminated": {"exitCode": 3, "startedAt": T, "finishedAt": at}})
    stopped = pod("p0", phase="Failed", state={"terminated": {"exitCode": 143, "startedAt": T, "finishedAt": at}})
    assert ended(reading(trainjob(FAILED), [stopped, own])) == (State.FAILED, Cause.EXIT, 3)


def test_failed_without_explanation_reads_unknown() -> None:
    r = reading(trainjob(FAILED), gone=[pod(phase="Failed", state=terminated(0, "Completed"))])
    assert ended(r)[:2] == (State.FAILED, Cause.UNKNOWN)


def test_running_reads_running_with_identity_key_and_nodes() -> None:
    r = reading(trainjob(), [pod(), pod("p1", index=1, node="w1")], nodes={**NODES, "w1": NODES["w0"]})
    assert r.execution is not None and r.execution.state is State.RUNNING
    assert r.key == ExecKey(1, 0, 0) and r.nodes == ("w0", "w1") and r.gate is Gate.OPEN


# ---- waiting objects -------------------------------------------------------------------------------------


def waiting(r: Reading) -> tuple[State, Cause | None]:
    assert r.execution is None and r.waiting is not None
    return r.waiting.state, r.waiting.cause


def test_closed_gate_reads_gated_in_both_modes() -> None:
    assert waiting(reading(trainjob(suspend=True, **{n.GATE: "closed", n.ATTEMPT: "0"}))) == (
        State.PENDING,
        Cause.GATED,
    )
    tj = trainjob(suspend=True, **{n.GATED_BY: "dispatch.io/start"})
    r = reading(tj, wl=workload(cond("QuotaReserved", "False", "AdmissionGated"), reserved=False), kueue=True)
    assert waiting(r) == (State.PENDING, Cause.GATED) and r.gate is Gate.CLOSED


def test_another_admission_gate_reads_admin_held() -> None:
    tj = trainjob(suspend=True, **{n.GATED_BY: "dispatch.io/start,example.com/ops"})
    r = reading(tj, wl=workload(reserved=False), kueue=True)
    assert waiting(r) == (State.HELD, Cause.ADMIN_HELD) and r.foreign_holds == ("admission-gated-by:example.com/ops",)


def test_plain_admin_hold_annotation_reads_admin_held() -> None:
    r = reading(trainjob(suspend=True, **{n.ADMIN_HOLD: "maintenance", n.ATTEMPT: "0"}))
    assert waiting(r) == (State.HELD, Cause.ADMIN_HELD)


def test_dispatch_hold_reads_held() -> None:
    assert waiting(reading(trainjob(suspend=True, **{n.HOLDS: "a,b", n.ATTEMPT: "0"}))) == (State.HELD, Cause.HELD)


@pytest.mark.parametrize(
    ("reason", "message", "cause"),
    [
        (
            "Pending",
            "couldn't assign flavors to pod set node: insufficient unused quota for cpu in flavor default, "
            "2 more needed",
            Cause.NO_CAPACITY,
        ),
        (  # Kueue 0.19's words, without the granular reasons: more than the queue and its cohort ever hold
            "Pending",
            "couldn't assign flavors to pod set node: insufficient quota for cpu in flavor default, previously "
            "considered podsets requests (0) + current podset request (64) > maximum capacity (8)",
            Cause.UNRUNNABLE,
        ),
        (  # one flavor can never hold it, another can once others end: it waits
            "Pending",
            "couldn't assign flavors to pod set node: insufficient quota for cpu in flavor small, previously "
            "considered podsets requests (0) + current podset request (64) > maximum capacity (8), insufficient "
            "unused quota for cpu in flavor big, 2 more needed",
            Cause.NO_CAPACITY,
        ),
        ("ExceedsMaxQuota", "couldn't assign flavors to pod set node: ...", Cause.UNRUNNABLE),
        ("NoMatchingFlavor", "couldn't assign flavors to pod set node: ...", Cause.UNRUNNABLE),
        ("WaitingForQuota", "couldn't assign flavors to pod set node: ...", Cause.NO_CAPACITY),
        ("Inadmissible", "ClusterQueue cq is inactive", Cause.NO_CAPACITY),
        ("Pending", "waiting", Cause.QUEUED),
    ],
)
def test_kueue_quota_rows(reason: str, message: str, cause: Cause) -> None:
    r = reading(
        trainjob(suspend=True, **{n.ADMIT: "1"}),
        wl=workload(cond("QuotaReserved", "False", reason, message), reserved=False),
        kueue=True,
    )
    assert waiting(r) == (State.PENDING, cause)


def test_kueue_waiting_for_checks_reads_queued() -> None:
    wl = workload(
        cond("QuotaReserved", reason="QuotaReserved"), cond("Admitted", "False", "UnsatisfiedAdmissionChecks")
    )
    assert waiting(reading(trainjob(suspend=True, **{n.ADMIT: "1"}), wl=wl, kueue=True)) == (
        State.PENDING,
        Cause.QUEUED,
    )


def test_unschedulable_pod_reads_no_capacity() -> None:
    p = pod(phase="Pending", state={"waiting": {"reason": "ContainerCreating"}})
    p["status"]["conditions"] = [cond("PodScheduled", "False", "Unschedulable", "0/4 nodes are available")]
    assert waiting(reading(trainjob(), [p])) == (State.PENDING, Cause.NO_CAPACITY)


def test_readmission_not_authorised_is_flagged() -> None:
    wl = workload(
        cond("QuotaReserved", reason="QuotaReserved"),
        cond("Admitted", "False", "UnsatisfiedAdmissionChecks"),
        cond("Evicted", "False", "QuotaReserved", "Previously: Preempted to accommodate a workload"),
        cond("Preempted", "False", "QuotaReserved", "Previously: Preempted to accommodate a workload"),
        evictions=1,
    )
    r = reading(trainjob(suspend=True, **{n.ADMIT: "1"}), gone=[pod()], wl=wl, kueue=True)
    assert r.awaiting_authorisation
    assert ended(r)[:2] == (State.FAILED, Cause.PREEMPTED)  # from the durable "Previously:" conditions
    assert last_eviction(wl) == ("Preempted", "Preempted to accommodate a workload")


def test_a_failure_waits_for_its_pods_to_end_before_naming_a_cause() -> None:
    failed_now = cond("Failed", reason="FailedJobs", message="x")
    failed_now["lastTransitionTime"] = "2027-01-15T08:00:00Z"  # == NOW
    still_running = pod("p1", index=1)
    r = reading(trainjob(failed_now), [still_running], gone=[pod(phase="Failed", state=terminated(143))])
    assert r.execution is not None and r.execution.state is State.RUNNING and "ending" in r.execution.detail
    later = Objects(
        trainjob=trainjob(failed_now),
        pods=[still_running],
        gone_pods=[pod(phase="Failed", state=terminated(143))],
        nodes=NODES,
        nodes_known=True,
    )
    r = read(later, NOW + 31)
    assert ended(r)[:2] == (State.FAILED, Cause.EXIT)


def test_a_failure_whose_terminating_pod_shows_a_disruption_does_not_wait_for_the_pods() -> None:
    failed_now = cond("Failed", reason="FailedJobs", message="x")
    failed_now["lastTransitionTime"] = "2027-01-15T08:00:00Z"  # == NOW
    preempted = pod(disruption="PreemptionByScheduler")
    preempted["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:30Z"  # Terminating: still running
    other = pod("p1", index=1)
    other["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:30Z"
    r = reading(trainjob(failed_now), [preempted, other])
    assert ended(r)[:2] == (State.FAILED, Cause.PREEMPTED)
