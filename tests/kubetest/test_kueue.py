"""Kueue mode: gates, AdmissionChecks, preemption, deactivation and quota, through lightkube."""

from __future__ import annotations

import pytest
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import Pod
from lightkube.types import PatchType

from dispatch_kubetest import FakeAPIServer

from .conftest import ClusterQueue, JobSet, LocalQueue, TrainJob, Workload, conditions, trainjob

GATE = "dispatch.example/start"


def _setup(
    server: FakeAPIServer, checks: list[str] | None = None, gpus: int = 64, preemption: str | None = None
) -> None:
    cluster = server.control
    for i in range(4):
        cluster.add_node(f"worker-{i}")
    cluster.add_runtime(max_restarts=1)
    for check in checks or []:
        cluster.add_admission_check(check)
    cluster.add_cluster_queue("cq", quotas={"nvidia.com/gpu": gpus}, admission_checks=checks, preemption=preemption)
    cluster.add_local_queue("lq", cluster_queue="cq")


def _workload(client: Client, job: str) -> Workload:
    tj = client.get(TrainJob, job, namespace="default")
    [wl] = client.list(Workload, namespace="default", labels={"kueue.x-k8s.io/job-uid": tj.metadata.uid})
    return wl


def _live_pods(client: Client, job: str) -> list[Pod]:
    return [
        p
        for p in client.list(Pod, namespace="default", labels={"jobset.sigs.k8s.io/jobset-name": job})
        if not p.metadata.deletionTimestamp
    ]


def test_admission_gated_by_annotation(server: FakeAPIServer, client: Client) -> None:
    _setup(server)
    created = client.create(TrainJob(trainjob("tj-gate", queue="lq", gate=GATE, suspend=False)))
    assert created["spec"]["suspend"] is True, "Kueue's webhook suspends a queued job at creation"

    wl = _workload(client, "tj-gate")
    assert wl.metadata.name.startswith("trainjob-tj-gate-")
    assert wl.metadata.ownerReferences[0].kind == "TrainJob" and wl.metadata.ownerReferences[0].controller
    assert wl.metadata.annotations["kueue.x-k8s.io/admission-gated-by"] == GATE
    assert wl["spec"]["queueName"] == "lq" and wl["spec"]["active"] is True
    assert wl["spec"]["podSets"][0]["name"] == "node" and wl["spec"]["podSets"][0]["count"] == 2
    reserved = conditions(wl)["QuotaReserved"]
    assert (reserved["status"], reserved["reason"], reserved["message"]) == (
        "False",
        "AdmissionGated",
        f"Admission is gated by: {GATE}",
    )
    assert _live_pods(client, "tj-gate") == []

    with pytest.raises(ApiError) as err:  # gates can only be removed
        client.patch(
            TrainJob,
            "tj-gate",
            {"metadata": {"annotations": {"kueue.x-k8s.io/admission-gated-by": f"{GATE},other.example/gate"}}},
            namespace="default",
            patch_type=PatchType.MERGE,
        )
    assert err.value.status.code == 403
    assert "denied the request" in err.value.status.message

    client.patch(
        TrainJob,
        "tj-gate",
        {"metadata": {"annotations": {"kueue.x-k8s.io/admission-gated-by": None}}},
        namespace="default",
        patch_type=PatchType.MERGE,
    )
    wl = _workload(client, "tj-gate")
    assert conditions(wl)["QuotaReserved"]["reason"] == "QuotaReserved"
    assert (conditions(wl)["Admitted"]["status"], conditions(wl)["Admitted"]["reason"]) == (
        "True",
        "Admitted",
    )
    assert wl["status"]["admission"]["clusterQueue"] == "cq"
    assert wl["status"]["admission"]["podSetAssignments"][0]["resourceUsage"] == {"nvidia.com/gpu": "8"}
    assert client.get(TrainJob, "tj-gate", namespace="default")["spec"]["suspend"] is False
    assert len(_live_pods(client, "tj-gate")) == 2


def test_gate_annotation_cannot_be_added_later(server: FakeAPIServer, client: Client) -> None:
    _setup(server)
    client.create(TrainJob(trainjob("tj-late", queue="lq")))
    with pytest.raises(ApiError) as err:
        client.patch(
            TrainJob,
            "tj-late",
            {"metadata": {"annotations": {"kueue.x-k8s.io/admission-gated-by": GATE}}},
            namespace="default",
            patch_type=PatchType.MERGE,
        )
    assert err.value.status.code == 403


def test_admission_check_gates_admission(server: FakeAPIServer, client: Client) -> None:
    _setup(server, checks=["dispatch-readmission"])
    client.create(TrainJob(trainjob("tj-ac", queue="lq")))
    wl = _workload(client, "tj-ac")
    assert conditions(wl)["QuotaReserved"]["status"] == "True"
    assert (conditions(wl)["Admitted"]["status"], conditions(wl)["Admitted"]["reason"]) == (
        "False",
        "UnsatisfiedAdmissionChecks",
    )
    assert [(c["name"], c["state"]) for c in wl["status"]["admissionChecks"]] == [("dispatch-readmission", "Pending")]
    assert _live_pods(client, "tj-ac") == []

    # the AdmissionCheck controller (e.g. dispatch-admission) writes its state through workloads/status
    checks = wl["status"]["admissionChecks"]
    checks[0]["state"] = "Ready"
    client.patch(
        Workload.Status,
        wl.metadata.name,
        {"status": {"admissionChecks": checks}},
        namespace="default",
        patch_type=PatchType.MERGE,
    )
    wl = _workload(client, "tj-ac")
    assert conditions(wl)["Admitted"]["status"] == "True"
    assert len(_live_pods(client, "tj-ac")) == 2


def test_preemption_resets_check_states_and_suspends(server: FakeAPIServer, client: Client) -> None:
    _setup(server, checks=["dispatch-readmission"])
    cluster = server.control
    client.create(TrainJob(trainjob("tj-pre", queue="lq")))
    name = _workload(client, "tj-pre").metadata.name
    cluster.set_admission_check_state(name, "dispatch-readmission", "Ready")
    cluster.run_pods("tj-pre")

    cluster.preempt_workload(name)
    wl = _workload(client, "tj-pre")
    evicted, preempted = conditions(wl)["Evicted"], conditions(wl)["Preempted"]
    # requeued and quota reserved again at once (nothing else wants it), so both are reset
    assert (evicted["status"], evicted["reason"]) == ("False", "QuotaReserved")
    assert evicted["message"].startswith("Previously: Preempted to accommodate")
    assert (preempted["status"], preempted["reason"]) == ("False", "QuotaReserved")
    assert (conditions(wl)["Requeued"]["status"], conditions(wl)["Requeued"]["reason"]) == (
        "True",
        "Preempted",
    )
    check = wl["status"]["admissionChecks"][0]
    assert (check["state"], check["message"]) == (
        "Pending",
        "Reset to Pending after eviction. Previously: Ready",
    )
    assert wl["status"]["schedulingStats"]["evictions"] == [{"reason": "Preempted", "underlyingCause": "", "count": 1}]
    tj = client.get(TrainJob, "tj-pre", namespace="default")
    assert tj["spec"]["suspend"] is True and conditions(tj)["Suspended"]["status"] == "True"
    assert _live_pods(client, "tj-pre") == []
    assert client.get(JobSet, "tj-pre", namespace="default")["status"]["restarts"] == 0

    cluster.set_admission_check_state(name, "dispatch-readmission", "Ready")
    assert len(_live_pods(client, "tj-pre")) == 2


def test_priority_preemption_in_cluster_queue(server: FakeAPIServer, client: Client) -> None:
    _setup(server, gpus=8, preemption="LowerPriority")
    cluster = server.control
    cluster.add_priority_class("low", 10)
    cluster.add_priority_class("high", 100)
    low = trainjob("tj-low", queue="lq")
    low["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "low"
    client.create(TrainJob(low))
    cluster.run_pods("tj-low")
    high = trainjob("tj-high", queue="lq")
    high["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
    client.create(TrainJob(high))

    low_wl = _workload(client, "tj-low")
    assert (conditions(low_wl)["Evicted"]["status"], conditions(low_wl)["Evicted"]["reason"]) == (
        "True",
        "Preempted",
    )
    assert conditions(low_wl)["Preempted"]["reason"] == "InClusterQueue"
    assert "due to prioritization in the ClusterQueue" in conditions(low_wl)["Preempted"]["message"]
    assert conditions(low_wl)["QuotaReserved"]["status"] == "False"
    assert "insufficient unused quota" in conditions(low_wl)["QuotaReserved"]["message"]
    assert _live_pods(client, "tj-low") == []
    assert conditions(_workload(client, "tj-high"))["Admitted"]["status"] == "True"
    assert len(_live_pods(client, "tj-high")) == 2


def test_deactivation_evicts_and_reactivation_requeues(server: FakeAPIServer, client: Client) -> None:
    _setup(server)
    cluster = server.control
    client.create(TrainJob(trainjob("tj-hold", queue="lq")))
    cluster.run_pods("tj-hold")
    name = _workload(client, "tj-hold").metadata.name

    client.patch(Workload, name, {"spec": {"active": False}}, namespace="default", patch_type=PatchType.MERGE)
    wl = _workload(client, "tj-hold")
    assert (conditions(wl)["Evicted"]["status"], conditions(wl)["Evicted"]["reason"]) == (
        "True",
        "Deactivated",
    )
    assert conditions(wl)["Evicted"]["message"] == "The workload is deactivated"
    assert (conditions(wl)["Requeued"]["status"], conditions(wl)["Requeued"]["reason"]) == (
        "False",
        "Deactivated",
    )
    assert "admission" not in wl["status"]
    assert client.get(TrainJob, "tj-hold", namespace="default")["spec"]["suspend"] is True
    assert _live_pods(client, "tj-hold") == []

    client.patch(Workload, name, {"spec": {"active": True}}, namespace="default", patch_type=PatchType.MERGE)
    wl = _workload(client, "tj-hold")
    assert (conditions(wl)["Requeued"]["status"], conditions(wl)["Requeued"]["reason"]) == (
        "True",
        "Reactivated",
    )
    assert conditions(wl)["Admitted"]["status"] == "True"
    assert len(_live_pods(client, "tj-hold")) == 2


def test_rejected_check_deactivates(server: FakeAPIServer, client: Client) -> None:
    _setup(server, checks=["dispatch-readmission"])
    client.create(TrainJob(trainjob("tj-rej", queue="lq")))
    name = _workload(client, "tj-rej").metadata.name
    server.control.set_admission_check_state(name, "dispatch-readmission", "Ready")
    server.control.set_admission_check_state(name, "dispatch-readmission", "Rejected", "no more attempts")
    wl = _workload(client, "tj-rej")
    assert wl["spec"]["active"] is False
    evicted = conditions(wl)["Evicted"]
    assert (evicted["reason"], evicted["message"]) == (
        "DeactivatedDueToAdmissionCheck",
        "The workload is deactivated due to Admission check(s): dispatch-readmission, were rejected",
    )
    requeued = conditions(wl)["Requeued"]
    assert (requeued["status"], requeued["reason"]) == ("False", "DeactivatedDueToAdmissionCheck")
    assert "DeactivationTarget" not in conditions(wl)
    assert client.get(TrainJob, "tj-rej", namespace="default")["spec"]["suspend"] is True
    assert wl["status"]["schedulingStats"]["evictions"] == [
        {"reason": "Deactivated", "underlyingCause": "AdmissionCheck", "count": 1}
    ]


def test_quota_and_queue_problems_keep_workloads_pending(server: FakeAPIServer, client: Client) -> None:
    _setup(server, gpus=4)
    client.create(TrainJob(trainjob("tj-big", queue="lq")))
    reserved = conditions(_workload(client, "tj-big"))["QuotaReserved"]
    assert (reserved["status"], reserved["reason"]) == ("False", "Pending")
    assert reserved["message"] == (
        "couldn't assign flavors to pod set node: insufficient quota for nvidia.com/gpu "
        "in flavor default, request > maximum capacity (8 > 4)"
    )
    client.create(TrainJob(trainjob("tj-noq", queue="missing")))
    reserved = conditions(_workload(client, "tj-noq"))["QuotaReserved"]
    assert (reserved["reason"], reserved["message"]) == ("Inadmissible", "LocalQueue missing doesn't exist")
    assert conditions(client.get(ClusterQueue, "cq"))["Active"]["status"] == "True"
    assert client.get(LocalQueue, "lq", namespace="default")["status"]["pendingWorkloads"] == 1


def test_inactive_admission_check_makes_the_queue_inactive(server: FakeAPIServer, client: Client) -> None:
    cluster = server.control
    cluster.add_admission_check("off", active=False)
    cluster.add_cluster_queue("cq", admission_checks=["off"])
    active = conditions(client.get(ClusterQueue, "cq"))["Active"]
    assert (active["status"], active["reason"]) == ("False", "AdmissionCheckInactive")


def test_deleting_the_trainjob_collects_everything(server: FakeAPIServer, client: Client) -> None:
    _setup(server)
    client.create(TrainJob(trainjob("tj-del", queue="lq")))
    server.control.run_pods("tj-del")
    [wl] = client.list(Workload, namespace="default")
    assert wl.metadata.finalizers == ["kueue.x-k8s.io/resource-in-use"]
    client.delete(TrainJob, "tj-del", namespace="default")
    assert list(client.list(Workload, namespace="default")) == []
    assert list(client.list(JobSet, namespace="default")) == []
    terminating = list(client.list(Pod, namespace="default"))
    assert terminating and all(p.metadata.deletionTimestamp is not None for p in terminating)
    server.control.advance(30)  # their grace period
    assert list(client.list(Pod, namespace="default")) == []


def test_finished_trainjob_finishes_its_workload_and_frees_quota(server: FakeAPIServer, client: Client) -> None:
    _setup(server, gpus=8)
    cluster = server.control
    client.create(TrainJob(trainjob("tj-first", queue="lq")))
    client.create(TrainJob(trainjob("tj-second", queue="lq")))
    assert conditions(_workload(client, "tj-second"))["QuotaReserved"]["status"] == "False"
    cluster.run_pods("tj-first")
    cluster.succeed_pods("tj-first")
    finished = conditions(_workload(client, "tj-first"))["Finished"]
    assert (finished["status"], finished["reason"]) == ("True", "Succeeded")
    assert conditions(_workload(client, "tj-second"))["Admitted"]["status"] == "True"
    assert client.get(ClusterQueue, "cq")["status"]["admittedWorkloads"] == 1


def test_standalone_jobset_is_queued_too(server: FakeAPIServer, client: Client) -> None:
    _setup(server)
    body = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "plain-js",
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
            "annotations": {"kueue.x-k8s.io/admission-gated-by": GATE},
        },
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "parallelism": 1,
                            "completions": 1,
                            "backoffLimit": 0,
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [{"name": "w", "image": "busybox"}],
                                }
                            },
                        }
                    },
                }
            ]
        },
    }
    created = client.create(JobSet(body))
    assert created["spec"]["suspend"] is True
    [wl] = client.list(Workload, namespace="default")
    assert wl.metadata.name.startswith("jobset-plain-js-")
    assert wl["spec"]["podSets"] == [
        {
            "name": "workers",
            "count": 2,
            "template": body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"],
        }
    ]
    client.patch(
        JobSet,
        "plain-js",
        {"metadata": {"annotations": {"kueue.x-k8s.io/admission-gated-by": None}}},
        namespace="default",
        patch_type=PatchType.MERGE,
    )
    assert client.get(JobSet, "plain-js", namespace="default")["spec"]["suspend"] is False
    pods = list(client.list(Pod, namespace="default", labels={"jobset.sigs.k8s.io/jobset-name": "plain-js"}))
    assert sorted(p.metadata.labels["jobset.sigs.k8s.io/job-global-index"] for p in pods) == ["0", "1"]


def test_pod_set_updates_and_flavor_node_labels_reach_the_pods(server: FakeAPIServer, client: Client) -> None:
    cluster = server.control
    cluster.add_node("cpu-0")
    cluster.add_node("gpu-0", labels={"pool": "h100"})
    cluster.add_node("gpu-1", labels={"pool": "h100"})
    cluster.add_runtime()
    cluster.add_resource_flavor("h100", node_labels={"pool": "h100"})
    cluster.add_admission_check("dispatch-readmission")
    cluster.add_cluster_queue(
        "cq", quotas={"nvidia.com/gpu": 16}, flavor="h100", admission_checks=["dispatch-readmission"]
    )
    cluster.add_local_queue("lq")
    client.create(TrainJob(trainjob("tj-psu", queue="lq")))
    name = _workload(client, "tj-psu").metadata.name
    cluster.set_admission_check_state(
        name,
        "dispatch-readmission",
        "Ready",
        pod_set_updates=[
            {
                "name": "node",
                "annotations": {"dispatch.example/attempt": "3"},
                "labels": {"dispatch.example/run": "r1"},
            }
        ],
    )

    tj = client.get(TrainJob, "tj-psu", namespace="default")
    [patch] = [p for p in tj["spec"]["runtimePatches"] if p["manager"] == "kueue.x-k8s.io/manager"]
    template = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert template["spec"]["nodeSelector"] == {"pool": "h100"}
    pods = _live_pods(client, "tj-psu")
    assert {p.metadata.annotations["dispatch.example/attempt"] for p in pods} == {"3"}
    assert {p.metadata.labels["dispatch.example/run"] for p in pods} == {"r1"}
    assert sorted(p.spec.nodeName for p in pods) == ["gpu-0", "gpu-1"]

    cluster.preempt_workload(name)
    tj = client.get(TrainJob, "tj-psu", namespace="default")
    assert all(p["manager"] != "kueue.x-k8s.io/manager" for p in tj["spec"].get("runtimePatches") or [])
