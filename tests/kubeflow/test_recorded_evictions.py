"""Rank 0 of a plain-mode TrainJob evicted through the Eviction API, replayed from what the real control plane
wrote (kube-apiserver and kube-controller-manager 1.36.3, JobSet 0.12.0, Trainer 2.3.0, kwok 0.8.0), event by
event, into the adapter's watch cache; the job's evidence is read after every event, as a supervisor cycle could.

The recordings in ``recorded/`` are the watch events of the TrainJob, its JobSet, its pods and the nodes, as
``kubectl get KIND --watch --output-watch-events -o json`` received them (with the time each arrived; only
``metadata.managedFields`` left out), for a ``sleep`` job of 2 ranks on a private control plane
(scripts/k8s/controlplane-up.sh), rank 0 evicted by a POST to its ``pods/eviction`` subresource; in
``drain-plain.json`` rank 0's node was cordoned (``kubectl cordon``) first, as ``kubectl drain`` does.

What the control plane does, in this order (asserted below on the recordings): kube-apiserver writes the
DisruptionTarget condition (``EvictionByEvictionAPI``) on the pod, then marks it deleted; the Job controller
(``backoffLimit: 0``) deletes the other rank's pod without a DisruptionTarget; kwok removes both pods still
reporting their containers running (no exit code ever shows); only after the last pod is gone does the Job fail,
then the JobSet and the TrainJob (``Failed``, reason ``FailedJobs``), 15 to 30 s after the eviction.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dispatch.kubeflow.evidence import job_evidence
from dispatch.kubeflow.watch import Cache
from dispatch.outcome import Cause, Evidence, State

RECORDED = Path(__file__).parent / "recorded"

Seen = tuple[State, Cause | None]


def recording(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((RECORDED / name).read_text())
    return doc


def replay(doc: dict[str, Any]) -> list[tuple[float, str, Seen | None, Seen]]:
    """Feed the recorded events; after each: (time, kind, the execution as the journal has it, the object)."""
    now = [doc["events"][0]["at"]]
    cache = Cache(kueue=False, gate_name="dispatch.io/start", clock_now=lambda: now[0])
    for kind in ("trainjobs", "jobsets", "pods", "workloads", "nodes"):
        cache.replace(kind, [])
    out: list[tuple[float, str, Seen | None, Seen]] = []
    for e in doc["events"]:
        now[0] = e["at"]
        cache.event(e["kind"], e["type"], e["object"])
        got = cache.reading(doc["trainjob"], e["at"])
        if got is None:  # the TrainJob not seen yet
            continue
        o, r, journal = got
        ev = job_evidence(doc["trainjob"], o, r, journal, Evidence("kubernetes:watch", e["at"]), kueue=False)
        execution = (ev.executions[-1].outcome.state, ev.executions[-1].outcome.cause) if ev.executions else None
        out.append((e["at"], e["kind"], execution, (ev.outcome.state, ev.outcome.cause)))
    return out


def pod_events(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in doc["events"] if e["kind"] == "pods"]


def conditions(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return list((obj.get("status") or {}).get("conditions") or [])


def disruption(pod: dict[str, Any]) -> str | None:
    for c in conditions(pod):
        if c["type"] == "DisruptionTarget" and c["status"] == "True":
            return str(c["reason"])
    return None


@pytest.mark.parametrize("name", ["eviction-plain.json", "drain-plain.json"])
def test_the_recorded_order_of_an_eviction(name: str) -> None:
    doc = recording(name)
    pods = pod_events(doc)
    evicted = next(e for e in pods if disruption(e["object"]))
    victim = evicted["object"]["metadata"]["name"]
    assert disruption(evicted["object"]) == "EvictionByEvictionAPI"
    assert not evicted["object"]["metadata"].get("deletionTimestamp"), "the condition is written before the delete"
    others = [e for e in pods if e["object"]["metadata"]["name"] != victim and e["at"] > evicted["at"]]
    assert others and all(disruption(e["object"]) is None for e in others), "the other rank has no DisruptionTarget"
    gone = [e for e in pods if e["type"] == "DELETED"]
    assert len(gone) == 2
    for e in gone:
        states = [cs["state"] for cs in e["object"]["status"]["containerStatuses"]]
        assert all("running" in s for s in states), "kwok deletes the pods with their containers running"
    failed = [(e["at"], c) for e in doc["events"] if e["kind"] == "trainjobs" for c in conditions(e["object"])]
    failed = [(at, c) for at, c in failed if c["type"] == "Failed" and c["status"] == "True"]
    assert failed and failed[0][0] > max(e["at"] for e in gone), "the TrainJob fails after its pods are gone"
    assert failed[0][1]["reason"] == "FailedJobs"
    cordoned = [
        e["at"]
        for e in doc["events"]
        if e["kind"] == "nodes"
        and e["object"]["metadata"]["name"] == evicted["object"]["spec"]["nodeName"]
        and e["object"]["spec"].get("unschedulable")
    ]
    assert bool(cordoned and min(cordoned) < evicted["at"]) is (name == "drain-plain.json")


@pytest.mark.parametrize(
    ("name", "cause"), [("eviction-plain.json", Cause.PREEMPTED), ("drain-plain.json", Cause.CESSATION)]
)
def test_an_evicted_rank_reads_its_cause_at_every_step(name: str, cause: Cause) -> None:
    """Evicted from a node in service: preempted (the resubmission rule applies); from a cordoned node (a drain):
    cessation. No reading on the way names another cause, and the job ends once with it."""
    doc = recording(name)
    seen = replay(doc)
    before = [s for s in seen if s[0] < doc["evicted_at"]]
    assert before and before[-1][2] == (State.RUNNING, None) and before[-1][3] == (State.RUNNING, None)
    after = [s for s in seen if s[0] >= doc["evicted_at"]]
    executions = {s[2] for s in after}
    assert executions <= {(State.RUNNING, None), (State.FAILED, cause)}, executions
    objects = [s[3] for s in after]
    assert objects[-1] == (State.FAILED, cause)
    ended = [o for o in objects if o[0].ended]
    assert set(ended) == {(State.FAILED, cause)}
    # between the execution's end and the TrainJob's Failed the object waits (pending: its JobSet could restart)
    assert set(objects) <= {(State.RUNNING, None), (State.PENDING, Cause.QUEUED), (State.FAILED, cause)}
    first_end = objects.index((State.FAILED, cause))
    assert all(o == (State.FAILED, cause) for o in objects[first_end:]), "the end is never taken back"
