"""Graceful pod termination: a deleted pod stays Terminating for its grace period on the injected clock."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta
from typing import Any

import httpx
import pytest

from dispatch_kubetest import FakeAPIServer
from dispatch_kubetest.clock import format_time
from dispatch_kubetest.resources import JOB, NODE, POD

from .conftest import AUTH

PODS = "/api/v1/namespaces/default/pods"


def _running_pod(server: FakeAPIServer, name: str, grace: int | None = None) -> dict[str, Any]:
    """A pod bound to a node with its container running (the kubelet started it)."""
    control = server.control
    if control.get(NODE, "n0") is None:
        control.add_node("n0")
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    control.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}, with_status=False)
    return control.run_pod(name)


def _delete(server: FakeAPIServer, name: str, **params: str) -> httpx.Response:
    return httpx.delete(f"{server.url}{PODS}/{name}", params=params, headers=AUTH)


def _get(server: FakeAPIServer, name: str) -> httpx.Response:
    return httpx.get(f"{server.url}{PODS}/{name}", headers=AUTH)


def _events(server: FakeAPIServer, since: str, name: str) -> list[tuple[str, dict[str, Any]]]:
    """The watch events of pod ``name`` after version ``since``, as a client resuming a watch there receives them."""
    out = []
    params = {"watch": "true", "resourceVersion": since, "timeoutSeconds": "1"}
    with httpx.stream("GET", f"{server.url}{PODS}", params=params, headers=AUTH, timeout=10) as resp:
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if line.strip():
                event = json.loads(line)
                if event["object"]["metadata"]["name"] == name:
                    out.append((event["type"], event["object"]))
    return out


def test_a_deleted_running_pod_is_terminating_until_its_grace_runs_out(server: FakeAPIServer) -> None:
    _running_pod(server, "p", grace=20)
    since = str(server.store.resource_version)
    start = server.clock.now()
    r = _delete(server, "p")
    assert r.status_code == 200, r.text
    meta = r.json()["metadata"]
    assert meta["deletionGracePeriodSeconds"] == 20  # the pod's own terminationGracePeriodSeconds
    assert meta["deletionTimestamp"] == format_time(start + timedelta(seconds=20))
    server.control.advance(19)
    kept = _get(server, "p")
    assert kept.status_code == 200 and kept.json()["status"]["phase"] == "Running"
    server.control.advance(1)
    assert _get(server, "p").status_code == 404
    events = _events(server, since, "p")
    types = [t for t, _ in events]
    assert types[0] == "MODIFIED" and events[0][1]["metadata"]["deletionTimestamp"], types
    assert types[-1] == "DELETED" and types.count("DELETED") == 1, types
    # the kubelet killed the container when the grace ran out: what the last state shows
    last = events[-1][1]
    assert last["status"]["phase"] == "Failed"
    term = last["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 137 and term["startedAt"]


def test_the_grace_period_is_the_requests_else_the_pods_else_thirty_seconds(server: FakeAPIServer) -> None:
    _running_pod(server, "asked", grace=20)
    _running_pod(server, "own", grace=45)
    _running_pod(server, "default")
    assert _delete(server, "asked", gracePeriodSeconds="5").json()["metadata"]["deletionGracePeriodSeconds"] == 5
    assert _delete(server, "own").json()["metadata"]["deletionGracePeriodSeconds"] == 45
    assert _delete(server, "default").json()["metadata"]["deletionGracePeriodSeconds"] == 30
    body = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": -3}
    _running_pod(server, "negative")
    r = httpx.request("DELETE", f"{server.url}{PODS}/negative", json=body, headers=AUTH)
    assert r.json()["metadata"]["deletionGracePeriodSeconds"] == 1  # as the real apiserver: negative counts as 1
    server.control.advance(5)
    assert [_get(server, n).status_code for n in ("asked", "own", "default", "negative")] == [404, 200, 200, 404]
    server.control.advance(25)
    assert [_get(server, n).status_code for n in ("own", "default")] == [200, 404]
    server.control.advance(15)
    assert _get(server, "own").status_code == 404


def test_a_second_delete_may_shorten_the_grace_never_lengthen_it(server: FakeAPIServer) -> None:
    _running_pod(server, "p")
    first = _delete(server, "p", gracePeriodSeconds="60").json()["metadata"]
    server.control.advance(10)
    longer = _delete(server, "p", gracePeriodSeconds="90").json()["metadata"]
    assert (longer["deletionTimestamp"], longer["deletionGracePeriodSeconds"]) == (first["deletionTimestamp"], 60)
    plain = _delete(server, "p").json()["metadata"]  # no grace sent: the pending one stands
    assert plain["deletionGracePeriodSeconds"] == 60
    shorter = _delete(server, "p", gracePeriodSeconds="20").json()["metadata"]
    # the deadline moves to the first request's time + the new grace: 20 s after it, 10 s from now
    assert shorter["deletionGracePeriodSeconds"] == 20
    server.control.advance(9)
    assert _get(server, "p").status_code == 200
    server.control.advance(1)
    assert _get(server, "p").status_code == 404


def test_grace_zero_removes_a_pod_at_once_even_a_terminating_one(server: FakeAPIServer) -> None:
    _running_pod(server, "now")
    _running_pod(server, "later")
    assert _delete(server, "now", gracePeriodSeconds="0").status_code == 200
    assert _get(server, "now").status_code == 404
    assert _delete(server, "later").json()["metadata"]["deletionGracePeriodSeconds"] == 30
    assert _get(server, "later").status_code == 200
    assert _delete(server, "later", gracePeriodSeconds="0").status_code == 200  # kubectl delete --force
    assert _get(server, "later").status_code == 404


def test_an_unscheduled_or_finished_pod_goes_at_once(server: FakeAPIServer) -> None:
    control = server.control
    control.create(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pending"}, "spec": {"containers": [{"name": "c"}]}},
        with_status=False,
    )
    assert _delete(server, "pending", gracePeriodSeconds="30").status_code == 200
    assert _get(server, "pending").status_code == 404
    _running_pod(server, "done")
    control.succeed_pod("done")
    _delete(server, "done")
    assert _get(server, "done").status_code == 404


def test_a_terminating_pod_goes_once_its_containers_end(server: FakeAPIServer) -> None:
    """The kubelet removes a Terminating pod when its containers have exited, before the grace runs out."""
    _running_pod(server, "p")
    _delete(server, "p")
    server.control.advance(3)
    assert _get(server, "p").status_code == 200
    server.control.fail_pod("p", exit_code=143)  # the program exits on SIGTERM
    assert _get(server, "p").status_code == 404


def test_logs_stay_readable_while_the_pod_terminates(server: FakeAPIServer) -> None:
    _running_pod(server, "p")
    server.control.append_log("p", "step 1", "step 2", container="c")
    _delete(server, "p")
    server.control.advance(10)
    r = httpx.get(f"{server.url}{PODS}/p/log", headers=AUTH)
    assert r.status_code == 200 and r.text == "step 1\nstep 2\n"
    server.control.advance(20)
    assert httpx.get(f"{server.url}{PODS}/p/log", headers=AUTH).status_code == 404


def test_a_log_follow_goes_on_while_the_pod_terminates_and_ends_when_it_goes(server: FakeAPIServer) -> None:
    _running_pod(server, "p")
    server.control.append_log("p", "before", container="c")
    _delete(server, "p")
    got: list[str] = []
    done = threading.Event()

    def follow() -> None:
        params = {"follow": "true"}
        with httpx.stream("GET", f"{server.url}{PODS}/p/log", params=params, headers=AUTH, timeout=10) as resp:
            assert resp.status_code == 200
            for line in resp.iter_lines():
                got.append(line)
        done.set()

    threading.Thread(target=follow, daemon=True).start()
    deadline = time.monotonic() + 10
    while not got and time.monotonic() < deadline:  # the stream is open: it has sent the buffered line
        time.sleep(0.02)
    server.control.append_log("p", "saving a checkpoint", container="c")
    assert not done.wait(0.5), "a Terminating pod's log follow goes on"
    server.control.advance(30)
    assert done.wait(10), "the follow ends when the pod goes"
    assert got == ["before", "saving a checkpoint"]


def test_a_deleted_jobs_pods_terminate_and_are_not_counted_active(server: FakeAPIServer) -> None:
    control = server.control
    control.add_node("n0")
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {
            "completionMode": "Indexed",
            "completions": 2,
            "parallelism": 2,
            "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}},
        },
    }
    control.create(job, with_status=False)
    pods = control.pods(labels="batch.kubernetes.io/job-name=j")
    assert len(pods) == 2
    for p in pods:
        control.run_pod(p["metadata"]["name"])
    # one pod deleted: Terminating, not active; the Job controller replaces it
    victim = pods[0]["metadata"]["name"]
    _delete(server, victim)
    status = control.get(JOB, "j")["status"]  # type: ignore[index]
    assert (status["active"], status["terminating"]) == (2, 1), status
    gone = control.get(POD, victim)
    assert gone is not None and gone["metadata"]["deletionTimestamp"] and not gone["metadata"].get("finalizers")
    assert len(control.pods(labels="batch.kubernetes.io/job-name=j")) == 3
    # the Job deleted: its pods (found by the background cascade) go Terminating, then go after their grace
    control.delete(JOB, "j")
    left = control.pods(labels="batch.kubernetes.io/job-name=j")
    running = [p for p in left if (p.get("status") or {}).get("phase") == "Running"]
    assert running and all(p["metadata"].get("deletionTimestamp") for p in running), left
    control.advance(30)
    assert control.pods(labels="batch.kubernetes.io/job-name=j") == []


@pytest.mark.parametrize("grace", ["0", "30"])
def test_deletecollection_deletes_pods_gracefully_too(server: FakeAPIServer, grace: str) -> None:
    _running_pod(server, "a")
    r = httpx.request("DELETE", f"{server.url}{PODS}", params={"gracePeriodSeconds": grace}, headers=AUTH)
    assert r.status_code == 200
    assert _get(server, "a").status_code == (404 if grace == "0" else 200)
