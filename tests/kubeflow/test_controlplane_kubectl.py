# ruff: noqa: F811  (the fixtures control_plane and k are imported from test_controlplane)
"""kubectl as a client of the real control plane: what a real client sees that the project's model does not give
(docs/dev/k8s-control-plane.md lists the model's differences): authentication that refuses a made-up token,
authorisation that answers `auth can-i`, core objects validated and defaulted, Events, a clock that moves (Job
deadlines fire, creation times differ), namespace deletion that takes the custom resources with it, foreground
cascading deletion, the published Trainer CRD's condition rules and Kueue's webhook suspending a queued TrainJob.

Nothing is started here (scripts/k8s/controlplane-up.sh); each test has a namespace of its own.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from .test_controlplane import KUBECTL, Kubectl, condition, control_plane, job, k, needs, trainjob, wait_for  # noqa: F401

pytestmark = pytest.mark.controlplane


def kubectl_raw(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    return subprocess.run([KUBECTL, *args], input=stdin, capture_output=True, text=True, timeout=60)


def pod(name: str, **container: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "registry.example/train:1", **container}]},
    }


def test_a_made_up_bearer_token_is_unauthorized(control_plane: dict[str, Any], k: Kubectl) -> None:
    p = kubectl_raw(
        "--kubeconfig=/dev/null",
        "--server",
        control_plane["server"],
        "--certificate-authority",
        control_plane["ca"],
        "--token",
        "made-up-token",
        "get",
        "pods",
        "-n",
        k.ns,
    )
    assert p.returncode != 0
    # a 401: kubectl words it "Unauthorized", or "asked for the client to provide credentials" when discovery
    # meets it first
    assert "Unauthorized" in p.stderr or "provide credentials" in p.stderr, p.stderr


def test_auth_can_i_answers_for_the_administrator_and_a_service_account_without_roles(k: Kubectl) -> None:
    assert k.run("auth", "can-i", "create", "trainjobs.trainer.kubeflow.org").strip() == "yes"
    nobody = f"system:serviceaccount:{k.ns}:nobody"
    with pytest.raises(AssertionError, match=r"\(1\)"):  # kubectl auth can-i exits 1 for "no"
        k.run("auth", "can-i", "create", "trainjobs.trainer.kubeflow.org", "--as", nobody)


def test_core_objects_are_validated_a_bad_quantity_and_an_unknown_field_are_refused(k: Kubectl) -> None:
    with pytest.raises(AssertionError, match="quantities must match the regular expression"):
        k.apply(pod("bad-cpu", resources={"requests": {"cpu": "lots"}}))
    bad = pod("typo")
    bad["spec"]["containers"][0]["imagePullPolcy"] = "Always"
    with pytest.raises(AssertionError, match=r"unknown field.*imagePullPolcy"):
        k.run("create", "--validate=strict", "-f", "-", stdin=json.dumps(bad))
    assert not k.items("pods"), "nothing stored"


def test_a_created_pod_is_defaulted_and_pods_made_apart_have_their_own_creation_time(k: Kubectl) -> None:
    k.run("create", "-f", "-", stdin=json.dumps(pod("a")))
    time.sleep(1.5)
    k.run("create", "-f", "-", stdin=json.dumps(pod("b")))
    a, b = k.get("pod", "a"), k.get("pod", "b")
    assert a["spec"]["schedulerName"] == "default-scheduler"
    assert a["spec"]["terminationGracePeriodSeconds"] == 30
    assert a["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert a["status"]["phase"] in ("Pending", "Running")
    assert a["metadata"]["creationTimestamp"] < b["metadata"]["creationTimestamp"]


def test_the_scheduler_records_an_event_for_the_pod_it_binds(k: Kubectl) -> None:
    k.apply(pod("p"))
    events = wait_for(
        "a Scheduled event",
        lambda: [
            e for e in k.items("events") if e["involvedObject"].get("name") == "p" and e.get("reason") == "Scheduled"
        ],
    )
    assert "Successfully assigned" in events[0]["message"]


def test_a_jobs_active_deadline_fires_on_the_real_clock(k: Kubectl) -> None:
    doc = job("late", annotations={"pod-complete.stage.kwok.x-k8s.io/delay": "600s"})
    doc["spec"]["activeDeadlineSeconds"] = 3
    k.apply(doc)
    failed = wait_for("Job late Failed", lambda: condition(k.get("job", "late"), "Failed"))
    assert failed["reason"] == "DeadlineExceeded"


def test_deleting_a_namespace_deletes_its_trainjobs_and_everything_they_made(
    control_plane: dict[str, Any], k: Kubectl
) -> None:
    needs(control_plane, "jobset", "trainer-controller-manager")
    other = Kubectl(control_plane["kubeconfig"], f"cp-gone-{uuid.uuid4().hex[:8]}", Path(k.env["HOME"]))
    other.run("create", "namespace", other.ns, namespaced=False)
    other.apply(trainjob("tj"))
    wait_for("JobSet tj", lambda: other.items("jobsets"))
    other.run("delete", "namespace", other.ns, "--wait=true", "--timeout=120s", namespaced=False)
    left = json.loads(k.run("get", "trainjobs,jobsets,jobs,pods", "-A", "-o", "json", namespaced=False))["items"]
    assert not [o for o in left if o["metadata"]["namespace"] == other.ns]


def test_foreground_deletion_of_a_trainjob_removes_its_jobset_and_jobs_first(
    control_plane: dict[str, Any], k: Kubectl
) -> None:
    """The TrainJob stays until its JobSet and Jobs are gone. The Trainer (v2.3.0) reconciles a TrainJob that is
    being deleted as any other (it does not look at its deletionTimestamp): each time the GC removes the JobSet,
    the Trainer applies a new one, so a foreground deletion may never end. The test follows the first JobSet by
    its uid, then ends the deletion as a user would, by deleting again in the background (which drops the
    foregroundDeletion finalizer); dispatch always deletes in the background."""
    needs(control_plane, "jobset", "trainer-controller-manager")
    k.apply(trainjob("tj"))
    wait_for("the Jobs of JobSet tj", lambda: k.items("jobs"))
    (first,) = k.items("jobsets")
    first_uid = first["metadata"]["uid"]
    first_jobs = {j["metadata"]["uid"] for j in k.items("jobs")}
    k.run("delete", "trainjob", "tj", "--cascade=foreground", "--wait=false")

    def first_ones_gone() -> bool:
        # listed in this order, so a TrainJob missing before a first JobSet or Job still listed is a real breach
        listed = k.items("trainjobs,jobsets,jobs")
        uids = {o["metadata"]["uid"] for o in listed}
        if not any(o["kind"] == "TrainJob" for o in listed):
            assert first_uid not in uids and not first_jobs & uids, "the TrainJob went before its JobSet or Jobs"
        return first_uid not in uids and not first_jobs & uids

    wait_for("the GC to remove the first JobSet and its Jobs", first_ones_gone)
    k.run("delete", "trainjob", "tj", "--cascade=background", "--ignore-not-found", "--wait=true", "--timeout=60s")
    assert not k.items("trainjobs")
    wait_for("the GC to remove a JobSet the Trainer applied during the deletion", lambda: not k.items("jobsets"))
    wait_for("the GC to remove its Jobs", lambda: not k.items("jobs"))


@pytest.mark.parametrize(
    ("status", "reason"), [("Maybe", "Running"), ("True", "")], ids=["status-maybe", "empty-reason"]
)
def test_the_published_trainjob_crd_refuses_a_malformed_condition(
    control_plane: dict[str, Any], k: Kubectl, status: str, reason: str
) -> None:
    needs(control_plane, "trainer-controller-manager")
    tj = trainjob("held")
    tj["spec"]["suspend"] = True
    k.apply(tj)
    cond = {
        "type": "Complete",
        "status": status,
        "reason": reason,
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    with pytest.raises(AssertionError, match="Invalid value|Unsupported value|should be at least 1 chars long"):
        k.run(
            "patch",
            "trainjob",
            "held",
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": {"conditions": [cond]}}),
        )
    assert condition(k.get("trainjob", "held"), "Complete") is None


def test_kueues_webhook_suspends_a_queued_trainjob_when_it_is_created(
    control_plane: dict[str, Any], k: Kubectl
) -> None:
    needs(control_plane, "kueue", "trainer-controller-manager")
    tj = trainjob("queued", labels={"kueue.x-k8s.io/queue-name": "nowhere"})
    created = json.loads(k.run("create", "-o", "json", "-f", "-", stdin=json.dumps(tj)))
    assert created["spec"].get("suspend") is True, "suspended by Kueue's mutating webhook in the create itself"
    # the real Trainer makes the JobSet of a suspended TrainJob suspended, and nothing runs
    jobsets = wait_for("JobSet queued", lambda: k.items("jobsets"))
    assert jobsets[0]["spec"].get("suspend") is True
    time.sleep(3)
    assert not k.items("pods"), "a TrainJob no queue admits runs no pod"
