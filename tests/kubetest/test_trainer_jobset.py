"""TrainJob → JobSet → Jobs → Pods through the reactors, observed with the real lightkube client."""

from __future__ import annotations

import queue
import threading

import httpx
import pytest
from lightkube import ApiError, Client
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import ConfigMap, Pod
from lightkube.types import PatchType

from dispatch_kubetest import FakeAPIServer
from dispatch_kubetest.resources import CLUSTER_TRAINING_RUNTIME, JOB, JOBSET

from .conftest import AUTH, JobSet, TrainJob, conditions, trainjob


def _setup(server: FakeAPIServer, nodes: int = 2, **runtime: object) -> None:
    for i in range(nodes):
        server.control.add_node(f"worker-{i}")
    server.control.add_runtime(**runtime)  # type: ignore[arg-type]


def _pods(client: Client, name: str, attempt: int | None = None) -> list[Pod]:
    labels = {"jobset.sigs.k8s.io/jobset-name": name}
    if attempt is not None:
        labels["jobset.sigs.k8s.io/restart-attempt"] = str(attempt)
    pods = [p for p in client.list(Pod, namespace="default", labels=labels) if not p.metadata.deletionTimestamp]
    return sorted(pods, key=lambda p: int(p.metadata.labels["batch.kubernetes.io/job-completion-index"]))


def test_trainjob_runs_to_complete(server: FakeAPIServer, client: Client) -> None:
    _setup(server, max_restarts=0)
    cluster = server.control
    client.create(TrainJob(trainjob("tj-ok", num_nodes=2)))

    snapshot = client.get(ConfigMap, "tj-ok-runtime-snapshot", namespace="default")
    assert "kind: ClusterTrainingRuntime" in snapshot.data["runtime"]
    js = client.get(JobSet, "tj-ok", namespace="default")
    assert js.metadata.ownerReferences[0].kind == "TrainJob"
    rj = js["spec"]["replicatedJobs"][0]
    assert rj["replicas"] == 1
    assert (rj["template"]["spec"]["parallelism"], rj["template"]["spec"]["completions"]) == (2, 2)
    container = rj["template"]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.example/train:1.0"
    assert container["command"] == ["torchrun", "train.py"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["PET_NNODES"] == "2" and env["PET_MASTER_ADDR"] == "tj-ok-node-0-0.tj-ok"

    job = client.get(Job, "tj-ok-node-0", namespace="default")
    assert job.metadata.labels["jobset.sigs.k8s.io/restart-attempt"] == "0"
    pods = _pods(client, "tj-ok")
    assert [p.metadata.labels["batch.kubernetes.io/job-completion-index"] for p in pods] == ["0", "1"]
    rank0 = pods[0]
    assert rank0.metadata.name.startswith("tj-ok-node-0-0-")
    assert rank0.spec.hostname == "tj-ok-node-0-0" and rank0.spec.subdomain == "tj-ok"
    assert rank0.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"] == "node"
    assert rank0.metadata.labels["jobset.sigs.k8s.io/job-index"] == "0"
    assert rank0.metadata.labels["jobset.sigs.k8s.io/jobset-uid"] == js.metadata.uid
    assert rank0.metadata.labels["jobset.sigs.k8s.io/global-replicas"] == "1"
    assert rank0.metadata.annotations["batch.kubernetes.io/job-completion-index"] == "0"
    assert {p.spec.nodeName for p in pods} == {"worker-0", "worker-1"}
    assert rank0.status.phase == "Pending"

    cluster.run_pods("tj-ok")
    running = client.get(TrainJob, "tj-ok", namespace="default")
    assert running["status"]["jobsStatus"] == [
        {"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}
    ]

    done: queue.Queue[dict] = queue.Queue()
    threading.Thread(
        target=lambda: done.put(
            client.wait(TrainJob, "tj-ok", namespace="default", for_conditions=["Complete"])["status"]
        ),
        daemon=True,
    ).start()
    assert cluster.wait_for_watches(1)
    cluster.succeed_pods("tj-ok")
    status = done.get(timeout=10)
    complete = {c["type"]: c for c in status["conditions"]}["Complete"]
    assert (complete["reason"], complete["message"]) == ("AllJobsCompleted", "jobset completed successfully")
    js = client.get(JobSet, "tj-ok", namespace="default")
    assert js["status"]["terminalState"] == "Completed"
    job = client.get(Job, "tj-ok-node-0", namespace="default")
    assert {c.type: c.reason for c in job.status.conditions}["Complete"] == "CompletionsReached"
    assert job.status.succeeded == 2 and job.status.completedIndexes == "0-1"


def test_suspend_and_resume(server: FakeAPIServer, client: Client) -> None:
    _setup(server)
    cluster = server.control
    client.create(TrainJob(trainjob("tj-sus", suspend=True)))
    tj = client.get(TrainJob, "tj-sus", namespace="default")
    assert conditions(tj)["Suspended"]["reason"] == "Suspended"
    assert client.get(JobSet, "tj-sus", namespace="default")["spec"]["suspend"] is True
    assert _pods(client, "tj-sus") == []

    client.patch(TrainJob, "tj-sus", {"spec": {"suspend": False}}, namespace="default", patch_type=PatchType.MERGE)
    tj = client.get(TrainJob, "tj-sus", namespace="default")
    assert (conditions(tj)["Suspended"]["status"], conditions(tj)["Suspended"]["reason"]) == (
        "False",
        "Resumed",
    )
    assert conditions(client.get(JobSet, "tj-sus", namespace="default"))["Suspended"]["reason"] == "ResumeJobs"
    assert len(_pods(client, "tj-sus")) == 2
    cluster.run_pods("tj-sus")

    client.patch(TrainJob, "tj-sus", {"spec": {"suspend": True}}, namespace="default", patch_type=PatchType.MERGE)
    assert _pods(client, "tj-sus") == [], "suspending deletes the running pods"
    job = client.get(Job, "tj-sus-node-0", namespace="default")
    assert {c.type: c.reason for c in job.status.conditions}["Suspended"] == "JobSuspended"
    assert job.status.failed == 0, "pods deleted by suspension are not failures"

    # a hold and release starts new pods of the same Jobs: the restart attempt does not move
    client.patch(TrainJob, "tj-sus", {"spec": {"suspend": False}}, namespace="default", patch_type=PatchType.MERGE)
    again = _pods(client, "tj-sus")
    assert len(again) == 2
    assert {p.metadata.labels["jobset.sigs.k8s.io/restart-attempt"] for p in again} == {"0"}
    assert client.get(JobSet, "tj-sus", namespace="default")["status"]["restarts"] == 0


def test_runtime_patches_changed_while_suspended_reach_new_pods(server: FakeAPIServer, client: Client) -> None:
    _setup(server)
    body = trainjob("tj-rp", suspend=True)
    body["spec"]["runtimePatches"] = [
        {
            "manager": "dispatch.example/adapter",
            "trainingRuntimeSpec": {
                "template": {
                    "spec": {
                        "replicatedJobs": [
                            {
                                "name": "node",
                                "template": {
                                    "spec": {
                                        "template": {"metadata": {"annotations": {"dispatch.example/attempt": "1"}}}
                                    }
                                },
                            }
                        ]
                    }
                }
            },
        }
    ]
    client.create(TrainJob(body))
    client.patch(TrainJob, "tj-rp", {"spec": {"suspend": False}}, namespace="default", patch_type=PatchType.MERGE)
    assert {p.metadata.annotations["dispatch.example/attempt"] for p in _pods(client, "tj-rp")} == {"1"}
    client.patch(TrainJob, "tj-rp", {"spec": {"suspend": True}}, namespace="default", patch_type=PatchType.MERGE)
    patches = client.get(TrainJob, "tj-rp", namespace="default")["spec"]["runtimePatches"]
    patches[0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
        "metadata"
    ]["annotations"]["dispatch.example/attempt"] = "2"
    client.patch(
        TrainJob,
        "tj-rp",
        {"spec": {"runtimePatches": patches, "suspend": False}},
        namespace="default",
        patch_type=PatchType.MERGE,
    )
    assert {p.metadata.annotations["dispatch.example/attempt"] for p in _pods(client, "tj-rp")} == {"2"}


def test_failure_restarts_the_jobset_then_fails_at_max_restarts(server: FakeAPIServer, client: Client) -> None:
    _setup(server, max_restarts=1)
    cluster = server.control
    client.create(TrainJob(trainjob("tj-fail")))
    cluster.run_pods("tj-fail")
    first = _pods(client, "tj-fail", attempt=0)
    cluster.fail_pod(first[1].metadata.name, exit_code=3)

    js = client.get(JobSet, "tj-fail", namespace="default")
    assert js["status"]["restarts"] == 1 and js["status"]["restartsCountTowardsMax"] == 1
    restarting = conditions(js)["RestartingJobSet"]
    assert restarting["status"] == "True"
    assert restarting["message"].endswith("(first failed job: tj-fail-node-0)")
    assert _pods(client, "tj-fail", attempt=0) == [], "the old attempt's pods are gone"
    second = _pods(client, "tj-fail", attempt=1)
    assert len(second) == 2
    assert (
        client.get(Job, "tj-fail-node-0", namespace="default").metadata.labels["jobset.sigs.k8s.io/restart-attempt"]
        == "1"
    )
    cluster.run_pods("tj-fail")
    js = client.get(JobSet, "tj-fail", namespace="default")
    assert (conditions(js)["RestartingJobSet"]["status"], conditions(js)["RestartingJobSet"]["reason"]) == (
        "False",
        "JobsReady",
    )

    cluster.fail_pod(second[0].metadata.name, exit_code=1)
    tj = client.get(TrainJob, "tj-fail", namespace="default")
    failed = conditions(tj)["Failed"]
    assert failed["reason"] == "ReachedMaxRestarts"
    assert failed["message"] == (
        "jobset failed due to reaching max number of restarts (first failed job: tj-fail-node-0)"
    )
    job = client.get(Job, "tj-fail-node-0", namespace="default")
    assert {c.type: c.reason for c in job.status.conditions}["Failed"] == "BackoffLimitExceeded"
    rank0 = client.get(Pod, second[0].metadata.name, namespace="default")
    term = rank0.status.containerStatuses[0].state.terminated
    assert (rank0.status.phase, term.exitCode, term.reason) == ("Failed", 1, "Error")


def test_oom_killed_fails_without_failure_policy(server: FakeAPIServer, client: Client) -> None:
    _setup(server, max_restarts=None)
    cluster = server.control
    client.create(TrainJob(trainjob("tj-oom")))
    pods = cluster.run_pods("tj-oom")
    cluster.oom_kill_pod(pods[0]["metadata"]["name"])
    pod = client.get(Pod, pods[0]["metadata"]["name"], namespace="default")
    term = pod.status.containerStatuses[0].state.terminated
    assert (term.reason, term.exitCode) == ("OOMKilled", 137)
    tj = client.get(TrainJob, "tj-oom", namespace="default")
    assert conditions(tj)["Failed"]["reason"] == "FailedJobs"
    assert conditions(tj)["Failed"]["message"] == (
        "jobset failed due to one or more job failures (first failed job: tj-oom-node-0)"
    )


def test_pod_failure_policy_fail_job_on_oom_exit_code(server: FakeAPIServer, client: Client) -> None:
    runtime = {
        "max_restarts": 3,
        "failure_rules": [{"name": "oom", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}],
    }
    _setup(server, **runtime)
    cluster = server.control
    body = trainjob("tj-pfp")
    client.create(TrainJob(body))
    # the runtime has no podFailurePolicy; add one to the Job as a runtime author would
    js = client.get(JobSet, "tj-pfp", namespace="default")
    assert js["spec"]["failurePolicy"]["rules"][0]["name"] == "oom"
    cluster.patch(
        JOB,
        "tj-pfp-node-0",
        {
            "spec": {
                "podFailurePolicy": {
                    "rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [137]}}]
                }
            }
        },
    )
    pods = cluster.run_pods("tj-pfp")
    cluster.oom_kill_pod(pods[0]["metadata"]["name"])
    job = client.get(Job, "tj-pfp-node-0", namespace="default")
    assert {c.type: c.reason for c in job.status.conditions}["Failed"] == "PodFailurePolicy"
    tj = client.get(TrainJob, "tj-pfp", namespace="default")
    assert conditions(tj)["Failed"]["reason"] == "FailJobSetFailurePolicyAction"
    assert client.get(JobSet, "tj-pfp", namespace="default")["status"]["restarts"] == 0


def test_restart_policy_on_failure_restarts_the_container_in_place(server: FakeAPIServer, client: Client) -> None:
    _setup(server, restart_policy="OnFailure", backoff_limit=None)
    cluster = server.control
    client.create(TrainJob(trainjob("tj-inplace")))
    pods = cluster.run_pods("tj-inplace")
    cluster.fail_pod(pods[0]["metadata"]["name"], exit_code=2)
    pod = client.get(Pod, pods[0]["metadata"]["name"], namespace="default")
    cs = pod.status.containerStatuses[0]
    assert pod.status.phase == "Running" and cs.restartCount == 1
    assert cs.lastState.terminated.exitCode == 2
    assert client.get(JobSet, "tj-inplace", namespace="default")["status"]["restarts"] == 0


def test_active_deadline_fails_the_trainjob(server: FakeAPIServer, client: Client) -> None:
    _setup(server)
    body = trainjob("tj-deadline")
    body["spec"]["activeDeadlineSeconds"] = 60
    client.create(TrainJob(body))
    server.control.advance(59)
    assert "Failed" not in conditions(client.get(TrainJob, "tj-deadline", namespace="default"))
    server.control.advance(1)
    failed = conditions(client.get(TrainJob, "tj-deadline", namespace="default"))["Failed"]
    assert (failed["reason"], failed["message"]) == (
        "DeadlineExceeded",
        "TrainJob exceeded its active deadline",
    )
    assert list(client.list(JobSet, namespace="default")) == []


@pytest.mark.parametrize("how", ["unreachable", "notready", "deleted"])
def test_node_lost(server: FakeAPIServer, client: Client, how: str) -> None:
    _setup(server, max_restarts=1)
    cluster = server.control
    client.create(TrainJob(trainjob("tj-node")))
    pods = cluster.run_pods("tj-node")
    victim = next(p for p in pods if p["spec"]["nodeName"] == "worker-1")
    seen: queue.Queue[tuple[str, Pod]] = queue.Queue()
    rv = client.get(Pod, victim["metadata"]["name"], namespace="default").metadata.resourceVersion

    def watch() -> None:
        for event, pod in client.watch(
            Pod,
            namespace="default",
            resource_version=rv,
            fields={"metadata.name": victim["metadata"]["name"]},
        ):
            seen.put((event, pod))
            if event == "DELETED":
                return

    threading.Thread(target=watch, daemon=True).start()
    assert cluster.wait_for_watches(1)
    if how in ("unreachable", "notready"):
        node = cluster.set_node_ready("worker-1", None if how == "unreachable" else False)
        taint = "node.kubernetes.io/unreachable" if how == "unreachable" else "node.kubernetes.io/not-ready"
        reason = "NodeStatusUnknown" if how == "unreachable" else "KubeletNotReady"
        assert node["spec"]["taints"][0] == {
            "key": taint,
            "effect": "NoExecute",
            "timeAdded": node["spec"]["taints"][0]["timeAdded"],
        }
        assert node["status"]["conditions"][0]["reason"] == reason
        cluster.advance(299)
        assert client.get(Pod, victim["metadata"]["name"], namespace="default").metadata.deletionTimestamp is None
        cluster.advance(1)
        evicted = client.get(Pod, victim["metadata"]["name"], namespace="default")
        assert evicted.metadata.deletionTimestamp is not None, "evicted: Terminating for its grace period"
        cluster.advance(30)
        expected = "DeletionByTaintManager"
    else:
        cluster.delete_node("worker-1")
        expected = "DeletionByPodGC"
    events = []
    while True:
        event, pod = seen.get(timeout=10)
        events.append(event)
        if event == "DELETED":
            break
    disruption = {c.type: c for c in pod.status.conditions}["DisruptionTarget"]
    assert (disruption.status, disruption.reason) == ("True", expected)
    assert events[0] == "MODIFIED"
    js = client.get(JobSet, "tj-node", namespace="default")
    assert js["status"]["restarts"] == 1, "the lost pod failed its Job and the JobSet restarted"


def test_pod_start_states_preemption_and_auto_run(server: FakeAPIServer, client: Client) -> None:
    _setup(server)
    cluster = server.control
    client.create(TrainJob(trainjob("tj-pods")))
    first, second = _pods(client, "tj-pods")
    assert first.status.containerStatuses[0].state.waiting.reason == "ContainerCreating"
    cluster.set_pod_waiting(first.metadata.name, "ErrImagePull", "pull access denied")
    waiting = client.get(Pod, first.metadata.name, namespace="default").status.containerStatuses[0].state.waiting
    assert (waiting.reason, waiting.message) == ("ErrImagePull", "pull access denied")

    cluster.run_pods("tj-pods")
    cluster.preempt_pod(second.metadata.name)
    disrupted = client.get(Pod, second.metadata.name, namespace="default")
    assert disrupted.metadata.deletionTimestamp is not None, "a disrupted pod is deleted: Terminating"
    cluster.advance(30)
    gone = [p for p in client.list(Pod, namespace="default") if p.metadata.name == second.metadata.name]
    assert gone == [], "a disrupted pod goes when its grace period runs out"
    job = client.get(Job, "tj-pods-node-0", namespace="default")
    assert {c.type: c.reason for c in job.status.conditions}["Failed"] == "BackoffLimitExceeded"

    cluster.auto_run_pods = True
    client.create(TrainJob(trainjob("tj-auto")))
    assert {p.status.phase for p in _pods(client, "tj-auto")} == {"Running"}


def test_reactors_can_be_stepped_by_hand() -> None:
    with FakeAPIServer(auto_reconcile=False) as server:
        cluster = server.control
        cluster.add_node("worker-0")
        cluster.add_runtime()
        url = f"{server.url}/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs"
        assert httpx.post(headers=AUTH, url=url, json=trainjob("tj-step")).status_code == 201
        assert cluster.get(JOBSET, "tj-step") is None, "nothing reacts until the test steps the reactors"
        rounds = cluster.reconcile()
        assert rounds >= 2
        assert len(cluster.pods_of("tj-step")) == 2


def test_runtime_changes_do_not_reach_existing_trainjobs(server: FakeAPIServer, client: Client) -> None:
    _setup(server, max_restarts=0)
    cluster = server.control
    client.create(TrainJob(trainjob("tj-snap", suspend=True)))
    cluster.patch(
        CLUSTER_TRAINING_RUNTIME,
        "torch-distributed",
        {"spec": {"template": {"spec": {"failurePolicy": {"maxRestarts": 5}}}}},
        namespace="",
    )
    client.patch(TrainJob, "tj-snap", {"spec": {"suspend": False}}, namespace="default", patch_type=PatchType.MERGE)
    assert client.get(JobSet, "tj-snap", namespace="default")["spec"]["failurePolicy"] == {"maxRestarts": 0}
    client.create(TrainJob(trainjob("tj-new")))
    assert client.get(JobSet, "tj-new", namespace="default")["spec"]["failurePolicy"] == {"maxRestarts": 5}


def test_trainjob_update_rules(server: FakeAPIServer, client: Client) -> None:
    _setup(server)
    client.create(TrainJob(trainjob("tj-rules")))
    with pytest.raises(ApiError) as err:
        client.patch(
            TrainJob,
            "tj-rules",
            {"spec": {"trainer": {"image": "other:2"}}},
            namespace="default",
            patch_type=PatchType.MERGE,
        )
    assert (err.value.status.code, err.value.status.reason) == (422, "Invalid")
    assert err.value.status.details.causes[0].field == "spec.trainer"
    patch = {"spec": {"runtimePatches": [{"manager": "dispatch.example/adapter"}]}}
    with pytest.raises(ApiError) as err:
        client.patch(TrainJob, "tj-rules", patch, namespace="default", patch_type=PatchType.MERGE)
    assert err.value.status.code == 403 and "admission webhook" in err.value.status.message
    patch["spec"]["suspend"] = True  # allowed together with (or while) suspending
    out = client.patch(TrainJob, "tj-rules", patch, namespace="default", patch_type=PatchType.MERGE)
    assert out["spec"]["runtimePatches"] == [{"manager": "dispatch.example/adapter"}]


def test_a_trainjob_naming_a_runtime_that_does_not_exist_is_refused(server: FakeAPIServer, client: Client) -> None:
    """As the Trainer's validating webhook does (v2.3): on create, and on update once the runtime is gone."""
    _setup(server)
    missing = trainjob("tj-nort", suspend=True)
    missing["spec"]["runtimeRef"] = {"name": "nope", "kind": "TrainingRuntime", "apiGroup": "trainer.kubeflow.org"}
    with pytest.raises(ApiError) as err:
        client.create(TrainJob(missing))
    assert (err.value.status.code, err.value.status.reason) == (403, "Forbidden")
    assert err.value.status.message == (
        'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: spec.runtimeRef: Invalid '
        'value: {"name":"nope","apiGroup":"trainer.kubeflow.org","kind":"TrainingRuntime"}: '
        'TrainingRuntime.trainer.kubeflow.org "nope" not found: specified trainingRuntime must be created before the '
        "TrainJob is created"
    )  # word for word as the real Trainer 2.3.0 answered on the control plane
    missing["spec"]["runtimeRef"] = {"name": "nope"}  # kind defaults to ClusterTrainingRuntime
    with pytest.raises(ApiError) as err:
        client.create(TrainJob(missing))
    assert "specified clusterTrainingRuntime must be created" in err.value.status.message
    missing["spec"]["runtimeRef"] = {"name": "torch-distributed", "kind": "Other", "apiGroup": "example.com"}
    with pytest.raises(ApiError) as err:
        client.create(TrainJob(missing))
    assert err.value.status.code == 403 and "unsupported runtime: Other.example.com" in err.value.status.message
    assert list(client.list(TrainJob, namespace="default")) == []

    client.create(TrainJob(trainjob("tj-rt", suspend=True)))
    server.control.delete(CLUSTER_TRAINING_RUNTIME, "torch-distributed", "")
    with pytest.raises(ApiError) as err:
        client.patch(TrainJob, "tj-rt", {"spec": {"suspend": False}}, namespace="default", patch_type=PatchType.MERGE)
    assert err.value.status.code == 403 and "must be created before" in err.value.status.message


def test_jobs_get_a_defaulted_selector_matching_only_their_own_pods(server: FakeAPIServer, client: Client) -> None:
    """As the real apiserver defaults it: ``kubectl logs job/X`` must find X's pods, not another TrainJob's."""
    _setup(server)
    for name in ("tj-a", "tj-b"):
        client.create(TrainJob(trainjob(name)))
        server.control.run_pods(name)
    for name in ("tj-a", "tj-b"):
        job = client.get(Job, f"{name}-node-0", namespace="default")
        selector = job.spec.selector.matchLabels
        assert selector == {"batch.kubernetes.io/controller-uid": job.metadata.uid}
        pods = list(client.list(Pod, namespace="default", labels=selector))
        assert pods and {p.metadata.labels["jobset.sigs.k8s.io/jobset-name"] for p in pods} == {name}
