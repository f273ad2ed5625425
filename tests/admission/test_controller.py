"""dispatch-admission: the decision table, leader election, its RBAC, and the flags of its console script."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from dispatch.admission import Controller, ControllerSettings, decide
from dispatch.admission.controller import PERMISSIONS
from dispatch.admission.main import parse
from dispatch.kubeflow import names as n
from dispatch.kubeflow.settings import Mode
from dispatch_kubetest.resources import WORKLOAD

from ..kubeflow.harness import ADMISSION_TOKEN, FakeCluster
from ..kubeflow.rbac_util import DEPLOY, grants


def wl(evictions: int = 0, owner: bool = True) -> dict[str, Any]:
    refs = [{"kind": "TrainJob", "name": "dj-j-1", "uid": "u"}] if owner else [{"kind": "JobSet", "name": "x"}]
    status: dict[str, Any] = {"admission": {"clusterQueue": "cq"}}
    if evictions:
        status["schedulingStats"] = {"evictions": [{"reason": "Preempted", "count": evictions}]}
    return {
        "metadata": {"name": "w", "ownerReferences": refs},
        "spec": {"podSets": [{"name": "node"}]},
        "status": status,
    }


def tj(managed: bool = True, **ann: str) -> dict[str, Any]:
    return {"metadata": {"name": "dj-j-1", "labels": {n.MANAGED: "true"} if managed else {}, "annotations": ann}}


def test_others_go_through() -> None:
    assert decide(wl(owner=False), None, True).state == "Ready"
    assert decide(wl(), tj(managed=False), True).state == "Ready"
    assert decide(wl(), None, True).state == "Ready"
    assert decide(wl(), None, False).state == "Pending"


def test_dispatch_jobs_wait_for_authorisation_of_each_attempt() -> None:
    assert decide(wl(), tj(), True).state == "Pending"
    ok = decide(wl(), tj(**{n.ADMIT: "1"}), True)
    assert ok.state == "Ready" and ok.pod_set_updates == ({"name": "node", "annotations": {n.ATTEMPT: "1"}},)
    again = decide(wl(evictions=1), tj(**{n.ADMIT: "1"}), True)
    assert again.state == "Pending" and "attempt 2 not authorised" in again.message
    assert decide(wl(evictions=1), tj(**{n.ADMIT: "2"}), True).pod_set_updates[0]["annotations"][n.ATTEMPT] == "2"


def test_holds_and_stops_keep_it_pending() -> None:
    assert decide(wl(), tj(**{n.ADMIT: "1", n.HOLDS: "h1"}), True).state == "Pending"
    assert decide(wl(), tj(**{n.ADMIT: "1", n.STOP: "t"}), True).state == "Pending"


@pytest.mark.parametrize("world", ["inproc", pytest.param("front", marks=pytest.mark.apiserver)])
def test_only_its_own_entry_is_written_and_rbac_is_exact(tmp_path: Path, world: str) -> None:
    c = FakeCluster(tmp_path, Mode.KUEUE, admission=False, world=world)
    try:
        granted, rules = grants(DEPLOY / "admission-rbac.yaml", c.ns)
        assert granted == set(PERMISSIONS)
        c.control.set_rules(ADMISSION_TOKEN, rules)
        other = f"other-check-{c.ns}"  # cluster-scoped: a name of this world's own
        c.control.add_admission_check(other, controller_name="example.com/other")
        c.control.patch(
            __import__("dispatch_kubetest.resources", fromlist=["CLUSTER_QUEUE"]).CLUSTER_QUEUE,
            c.cluster_queue,
            {"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": c.check}, {"name": other}]}}},
            namespace="",
        )
        c.start_admission()
        c.control.create(
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "metadata": {"name": "plain-user", "labels": {n.QUEUE_LABEL: "lq"}},
                "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"image": "x:1", "numNodes": 1}},
            }
        )
        entries: dict[str, Any] = {}
        for _ in range(100):
            w = c.control.workload_for("plain-user")
            entries = {e["name"]: e for e in (w or {}).get("status", {}).get("admissionChecks") or []}
            if entries.get(c.check, {}).get("state") == "Ready":
                break
            time.sleep(0.05)
        assert entries[c.check]["state"] == "Ready"
        assert entries[other]["state"] == "Pending"  # not ours: never touched
        w = c.control.workload_for("plain-user")
        assert w is not None
        managers = {m["manager"] for m in w["metadata"].get("managedFields") or [] if m.get("subresource") == "status"}
        assert "dispatch-admission" in managers
        denied = [r for r in c.server.requests() if r.code == 403 and r.user == f"token:{ADMISSION_TOKEN}"]
        assert denied == []
        _ = WORKLOAD
    finally:
        c.close()


def test_it_admits_workloads_in_every_namespace_whatever_its_kubeconfig_context_names(tmp_path: Path) -> None:
    """The kubeconfig's context (or an in-cluster service account) names a namespace of its own; the controller
    still watches Workloads and TrainJobs in all of them."""
    c = FakeCluster(tmp_path, Mode.KUEUE, admission=False)
    elsewhere = c.server.write_kubeconfig(tmp_path / "admission.kubeconfig", token=ADMISSION_TOKEN, namespace="ops")
    ctrl = Controller(
        ControllerSettings(
            kubeconfig=str(elsewhere),
            controller_name=c.admission_controller,
            lease_namespace=c.ns,
            identity="elsewhere",
            renew_every=0.2,
        )
    )
    try:
        ctrl.start()
        c.control.create(
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "metadata": {"name": "plain-user", "labels": {n.QUEUE_LABEL: "lq"}},
                "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"image": "x:1", "numNodes": 1}},
            }
        )
        state = None
        for _ in range(200):
            w = c.control.workload_for("plain-user")
            entries = {e["name"]: e for e in (w or {}).get("status", {}).get("admissionChecks") or []}
            state = entries.get(c.check, {}).get("state")
            if state == "Ready":
                break
            time.sleep(0.05)
        assert state == "Ready", f"the Workload in {c.ns} was not admitted by a controller whose context names ops"
    finally:
        ctrl.stop()
        c.close()


def test_one_leader_at_a_time(tmp_path: Path) -> None:
    c = FakeCluster(tmp_path, Mode.KUEUE, admission=False)
    ctrls: list[Controller] = []
    try:
        for ident in ("a", "b"):
            s = ControllerSettings(
                kubeconfig=str(c.kubeconfig),
                controller_name="dispatch.io/admission",
                lease_namespace="default",
                identity=ident,
                lease_duration=2.0,
                renew_every=0.2,
            )
            ctrl = Controller(s)
            ctrls.append(ctrl)
            ctrl.start()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not any(x.leader for x in ctrls):
            time.sleep(0.05)
        time.sleep(0.5)
        assert sum(x.leader for x in ctrls) == 1
        leader = next(x for x in ctrls if x.leader)
        other = next(x for x in ctrls if not x.leader)
        leader.stop()
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline and not other.leader:
            time.sleep(0.1)
        assert other.leader, "the standby did not take over after the lease expired"
    finally:
        for x in ctrls:
            x.stop()
        c.close()


def test_console_flags() -> None:
    s = parse(
        ["--kubeconfig", "/k", "--controller-name", "example.com/adm", "--identity", "me", "--lease-namespace", "x"]
    )
    assert (s.kubeconfig, s.controller_name, s.identity, s.lease_namespace) == ("/k", "example.com/adm", "me", "x")
    with pytest.raises(SystemExit):
        parse(["--in-cluster", "--kubeconfig", "/k"])
    with pytest.raises(SystemExit):
        parse(["--lease-duration", "1", "--renew-every", "5"])
