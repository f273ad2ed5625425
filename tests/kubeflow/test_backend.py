"""The backend against the fake API server over HTTP: modes, holds, readmission, watches, output, causes."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from dispatch.capabilities import Answer, Capability
from dispatch.errors import NotFound, ReadOnly, Rejected, Unavailable, Unsupported
from dispatch.kubeflow import names as n
from dispatch.kubeflow import preflight
from dispatch.kubeflow.backend import KubeflowBackend
from dispatch.outcome import Cause, State
from dispatch.spi import Gate, JobEvidence, StartRequest
from dispatch_kubetest import rule
from dispatch_kubetest.reactors.trainer import runtime_missing
from dispatch_kubetest.resources import ADMISSION_CHECK, NODE, TRAINING_RUNTIME, TRAINJOB, WORKLOAD

from .harness import TOKEN, FakeCluster, job_spec

pytestmark = pytest.mark.both_worlds


def kb(b: Any) -> KubeflowBackend:
    assert isinstance(b, KubeflowBackend)
    return b


def wait(
    c: FakeCluster, b: KubeflowBackend, sid: str, pred: Any, what: str, steps: int = 60, dt: float = 1.0
) -> JobEvidence:
    ev = c.until(lambda: b.inspect(sid), pred, steps, dt)
    if pred(ev):
        return ev
    raise AssertionError(
        f"{what}: last {ev.outcome} executions={[(x.identity, x.outcome.cause) for x in ev.executions]}"
    )


def running(ev: JobEvidence) -> bool:
    return ev.outcome.state is State.RUNNING


def start(b: KubeflowBackend, behaviour: str = "sleep", job: str = "j1", sub: int = 1, **kw: Any) -> str:
    return b.start(StartRequest(job, sub, f"dsp-{job}-{sub}", job_spec(behaviour, **kw)))


# ---- modes -----------------------------------------------------------------------------------------------


READ_RULES = [
    rule("get,list,watch", "trainer.kubeflow.org", "trainjobs,trainingruntimes,clustertrainingruntimes"),
    rule("get,list,watch", "jobset.x-k8s.io", "jobsets"),
    rule("get,list,watch", "", "pods,nodes"),
    rule("get,list,watch", "kueue.x-k8s.io", "workloads,localqueues,clusterqueues,admissionchecks"),
    rule("create", "authorization.k8s.io", "selfsubjectaccessreviews"),
]


@pytest.mark.parametrize("mode", ["plain", "kueue"])
def test_read_but_not_write_opens_observe_only(mode: str, plain: FakeCluster, kueue: FakeCluster) -> None:
    c = plain if mode == "plain" else kueue
    writer = kb(c.backend())
    sid = start(writer)
    c.control.set_rules(TOKEN, READ_RULES)
    b = kb(c.backend())
    try:
        assert b.read_only and b.observe_only
        caps = b.capabilities()
        assert caps.answer(Capability.HOLD) is Answer.NO
        assert caps.answer(Capability.OUTPUT_READ) is Answer.NO  # no pods/log either
        with pytest.raises(Unsupported, match="observe-only"):
            start(b, job="j2")
        for call in (
            lambda: b.open(sid),
            lambda: b.stop_job(sid),
            lambda: b.hold(sid, "h"),
            lambda: b.release(sid, "h"),
        ):
            with pytest.raises(ReadOnly):
                call()
        assert b.inspect(sid).gate is Gate.CLOSED
        assert [f.scheduler_id for f in b.find("dsp-j1-1", 0)] == [sid]
    finally:
        b.close()
        writer.close()


def test_unproven_gate_opens_observe_only(kueue: FakeCluster) -> None:
    kueue.controller.stop()
    kueue.controller = None
    kueue.control.patch(
        ADMISSION_CHECK,
        kueue.check,
        {
            "status": {
                "conditions": [
                    {
                        "type": "Active",
                        "status": "False",
                        "reason": "Inactive",
                        "message": "controller gone",
                        "lastTransitionTime": kueue.server.clock.rfc3339(),
                    }
                ]
            }
        },
        namespace="",
        subresource="status",
    )
    b = kb(kueue.backend())
    try:
        assert b.observe_only and "not proven" in b.preflight.reason
        assert b.capabilities().answer(Capability.READMISSION_GATE) is Answer.NO
        with pytest.raises(Unsupported):
            start(b)
    finally:
        b.close()


def test_gate_without_dispatch_check_is_not_proven(kueue: FakeCluster) -> None:
    b = kb(kueue.backend(admissionCheckController="example.com/other"))
    try:
        assert b.observe_only and "no AdmissionCheck of controller example.com/other" in b.preflight.reason
    finally:
        b.close()


def test_caller_read_only_runs_no_probe_and_holds_are_unknown(plain: FakeCluster) -> None:
    before = len(plain.server.requests("POST", "trainjobs"))
    b = kb(plain.backend(read_only=True))
    try:
        assert b.read_only and not b.observe_only
        assert b.capabilities().answer(Capability.HOLD) is Answer.UNKNOWN
        assert len(plain.server.requests("POST", "trainjobs")) == before
        with pytest.raises(ReadOnly):
            start(b)
    finally:
        b.close()


def test_writable_open_probes_and_cleans_up(plain: FakeCluster) -> None:
    b = kb(plain.backend())
    try:
        hold = b.capabilities()[Capability.HOLD]
        assert b.preflight.probed and hold.provenance.value == "probed" and "probed: a gated probe" in hold.reason
        assert [r for r in plain.server.requests("POST", "trainjobs")]
        # the probe ran on a runtime of its own (the Trainer refuses a TrainJob naming one that does not exist)
        assert len(plain.server.requests("POST", "/trainingruntimes")) == 1  # its own runtime (not cluster ones)
        assert plain.settled().list(TRAINJOB, labels=f"{n.PROBE}=true") == []
        assert plain.control.list(TRAINING_RUNTIME, plain.ns) == []
    finally:
        b.close()


def test_the_probe_is_created_again_while_the_webhook_has_not_seen_its_runtime(
    plain: FakeCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real Trainer's webhook reads runtimes from an informer cache and may refuse the probe TrainJob a moment
    after its runtime was made (as if the runtime did not exist; seen on the test control plane under load): the
    probe retries as a start does, and proves the gate."""
    monkeypatch.setattr(preflight, "secrets", SimpleNamespace(token_hex=lambda _: "0badcafe"))
    msg = runtime_missing("TrainingRuntime", "dispatch-probe-0badcafe")
    plain.control.faults.fail_next(2, 403, method="POST", path_contains="/trainjobs", message=msg)
    b = kb(plain.backend())
    try:
        assert b.preflight.probed and not b.observe_only, b.preflight.reason
        assert b.capabilities().answer(Capability.HOLD) is Answer.YES
        assert len(plain.server.requests("POST", "trainjobs")) == 3
    finally:
        b.close()


def test_hold_is_declared_not_probed_when_the_probe_is_off(plain: FakeCluster) -> None:
    before = len(plain.server.requests("POST", "trainjobs"))
    b = kb(plain.backend(preflight={"probe": False}))
    try:
        hold = b.capabilities()[Capability.HOLD]
        assert not b.preflight.probed and hold.answer is Answer.YES
        assert hold.provenance.value == "declared" and "not probed" in hold.reason
        assert len(plain.server.requests("POST", "trainjobs")) == before
    finally:
        b.close()


@pytest.mark.inproc_only("the front cannot stop serving a group the real server serves")
def test_missing_trainer_api_refuses_to_open(plain: FakeCluster) -> None:
    plain.control.unserve("trainer.kubeflow.org/v1alpha1")
    with pytest.raises(Unsupported, match="does not serve trainer.kubeflow.org/v1alpha1"):
        plain.backend()


# ---- holds -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["plain", "kueue"])
def test_hold_on_running_ends_it_held_and_release_is_a_new_attempt(
    mode: str, plain: FakeCluster, kueue: FakeCluster
) -> None:
    c = plain if mode == "plain" else kueue
    b = kb(c.backend())
    try:
        sid = start(b)
        b.open(sid)
        first = wait(c, b, sid, running, "runs")
        assert first.current is not None
        b.hold(sid, "h1")
        ev = wait(c, b, sid, lambda e: e.outcome.state is State.HELD, "held")
        assert ev.outcome.cause is Cause.HELD and ev.holds == ("h1",)
        assert ev.executions[-1].outcome.cause is Cause.HELD and ev.executions[-1].outcome.state is State.CANCELLED
        assert c.settled().pods_of(sid) == []
        with pytest.raises(Rejected):
            b.release(sid, "other")
        b.release(sid, "h1")
        ev = wait(c, b, sid, running, "runs again")
        ids = [x.identity for x in ev.executions]
        assert len(ids) == 2 and len(set(ids)) == 2, ids
        attempt = ev.executions[-1].identity.split(".")[2]
        assert int(attempt) > int(ids[0].split(".")[2])
        pods = c.settled().pods_of(sid)
        assert pods and all(p["metadata"]["annotations"][n.ATTEMPT] == attempt for p in pods)
    finally:
        b.close()


def test_foreign_gate_is_admin_held_and_never_lifted(kueue: FakeCluster) -> None:
    b = kb(kueue.backend())
    try:
        body = job_spec("sleep")
        sid = b.start(StartRequest("j9", 1, "dsp-j9-1", body))
        # an administrator's gate can only be there from creation: recreate with two gates (and the runtime
        # copy, which went with the TrainJob: the Trainer refuses a TrainJob whose runtime does not exist)
        tj, copy = kueue.control.get(TRAINJOB, sid), kueue.control.get(TRAINING_RUNTIME, sid, kueue.ns)
        assert tj is not None and copy is not None
        tj["metadata"]["annotations"][n.GATED_BY] = "dispatch.io/start,example.com/ops"
        for obj in (tj, copy):
            for key in (
                "uid",
                "resourceVersion",
                "creationTimestamp",
                "generation",
                "managedFields",
                "ownerReferences",
            ):
                obj["metadata"].pop(key, None)
            obj.pop("status", None)
        kueue.control.delete(TRAINJOB, sid)
        if kueue.control.get(TRAINING_RUNTIME, sid, kueue.ns) is None:
            kueue.control.create(copy)
        kueue.control.create(tj)
        kueue.tick(0.5)
        b.open(sid)
        ev = wait(kueue, b, sid, lambda e: e.gate is Gate.OPEN, "our gate opens")
        assert ev.outcome.cause is Cause.ADMIN_HELD and ev.foreign_holds == ("admission-gated-by:example.com/ops",)
        kueue.tick(5)
        assert kueue.settled().pods_of(sid) == []
    finally:
        b.close()


# ---- dispatch-admission ----------------------------------------------------------------------------------


def test_admission_gates_readmission_after_preemption(kueue: FakeCluster) -> None:
    b = kb(kueue.backend())
    try:
        sid = start(b)
        b.open(sid)
        wait(kueue, b, sid, running, "runs")
        wl = kueue.settled().workload_for(sid)
        assert wl is not None
        kueue.control.preempt_workload(wl["metadata"]["name"])
        ev = wait(kueue, b, sid, lambda e: e.outcome.state.ended, "preempted")
        assert (ev.outcome.state, ev.outcome.cause) == (State.FAILED, Cause.PREEMPTED)
        for _ in range(5):
            kueue.tick(2)
        wl = kueue.settled().workload_for(sid)
        assert wl is not None
        entry = next(e for e in wl["status"]["admissionChecks"] if e["name"] == kueue.check)
        assert entry["state"] == "Pending" and "attempt 2 not authorised" in entry["message"]
        assert kueue.settled().pods_of(sid) == []
        b.readmit(sid)
        ev = wait(kueue, b, sid, running, "readmitted")
        assert [x.identity.split(".")[2] for x in ev.executions] == ["1", "2"]
        assert [x.outcome.cause for x in ev.executions][:1] == [Cause.PREEMPTED]
    finally:
        b.close()


def test_admission_lets_other_workloads_through(kueue: FakeCluster) -> None:
    kueue.control.create(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "someone-else", "labels": {n.QUEUE_LABEL: "lq"}},
            "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"image": "x:1", "numNodes": 1}},
        }
    )
    pods = kueue.until(lambda: kueue.settled().pods_of("someone-else"), bool, 20, 0.5)
    assert pods, "a non-dispatch TrainJob was not admitted"


def test_admission_rejection_reads_rejected(kueue: FakeCluster) -> None:
    b = kb(kueue.backend())
    try:
        sid = start(b)
        b.open(sid)
        wait(kueue, b, sid, running, "runs")
        wl = kueue.settled().workload_for(sid)
        assert wl is not None
        kueue.control.set_admission_check_state(wl["metadata"]["name"], kueue.check, "Rejected", "no")
        ev = wait(kueue, b, sid, lambda e: e.outcome.state.ended, "rejected")
        assert (ev.outcome.state, ev.outcome.cause) == (State.FAILED, Cause.REJECTED)
    finally:
        b.close()


# ---- causes end to end -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("disrupt", "cause"),
    [
        ("PreemptionByScheduler", Cause.PREEMPTED),
        ("TerminationByKubelet", Cause.NODE_LOST),
        ("EvictionByEvictionAPI", Cause.PREEMPTED),
        ("drain", Cause.CESSATION),
    ],
)
def test_pod_disruptions_end_to_end(disrupt: str, cause: Cause, plain: FakeCluster) -> None:
    b = kb(plain.backend())
    try:
        sid = start(b)
        b.open(sid)
        wait(plain, b, sid, running, "runs")
        rank0 = plain.rank0(sid)
        if disrupt == "drain":  # as `kubectl drain` does: cordon the node, then evict through the Eviction API
            plain.control.patch(NODE, rank0["spec"]["nodeName"], {"spec": {"unschedulable": True}}, namespace="")
            disrupt = "EvictionByEvictionAPI"
        plain.control.preempt_pod(rank0["metadata"]["name"], reason=disrupt)
        ev = wait(plain, b, sid, lambda e: e.outcome.state.ended, "ends")
        assert ev.outcome.cause is cause
    finally:
        b.close()


def test_deleted_node_reads_node_lost(kueue: FakeCluster) -> None:
    b = kb(kueue.backend())
    try:
        sid = start(b)
        b.open(sid)
        wait(kueue, b, sid, running, "runs")
        kueue.control.delete_node(kueue.rank0(sid)["spec"]["nodeName"])
        ev = wait(kueue, b, sid, lambda e: e.outcome.state.ended, "ends")
        assert ev.outcome.cause is Cause.NODE_LOST
    finally:
        b.close()


def test_cessation_from_a_cordoned_node(plain: FakeCluster) -> None:
    b = kb(plain.backend())
    try:
        sid = start(b)
        b.open(sid)
        wait(plain, b, sid, running, "runs")
        assert b.cessation([sid]) == {}
        node = plain.rank0(sid)["spec"]["nodeName"]
        plain.control.patch(NODE, node, {"spec": {"unschedulable": True}}, namespace="")
        got = plain.until(lambda: b.cessation([sid, "nope"]), bool, 20, 0)
        assert set(got) == {sid} and node in got[sid].nodes and "cordoned" in got[sid].reason
    finally:
        b.close()


# ---- runtime checks and identity ------------------------------------------------------------------------


def test_rank_restart_runtime_refused_unless_allowed(plain: FakeCluster) -> None:
    plain.control.add_runtime(name="stock", max_restarts=None, backoff_limit=None, restart_policy=None)
    from dispatch.extensions import Image
    from dispatch.kubeflow.extensions import RuntimeRef
    from dispatch.spec import JobSpec

    spec = JobSpec(command=("sleep", "1"), extensions=(Image("i:1"), RuntimeRef("stock")))
    b = kb(plain.backend())
    try:
        with pytest.raises(Unsupported, match="allowRankRestart"):
            b.start(StartRequest("j5", 1, "dsp-j5-1", spec))
        assert b.find("dsp-j5-1", 0) == []
        plain_sid = start(b)
        assert b.weakened(plain_sid) is None
    finally:
        b.close()
    b = kb(plain.backend(allowRankRestart=True))
    try:
        sid = b.start(StartRequest("j5", 1, "dsp-j5-1", spec))
        reason = b.weakened(sid)
        assert reason is not None and "ClusterTrainingRuntime/stock" in reason
        with pytest.raises(Rejected, match="does not exist"):
            b.start(
                StartRequest(
                    "j6", 1, "dsp-j6-1", JobSpec(command=("x",), extensions=(Image("i:1"), RuntimeRef("missing")))
                )
            )
    finally:
        b.close()


def test_start_is_idempotent_for_the_same_marker_and_find_honours_the_horizon(plain: FakeCluster) -> None:
    b = kb(plain.backend())
    try:
        sid = start(b)
        assert start(b) == sid
        with pytest.raises(Rejected):
            b.start(StartRequest("j1", 1, "dsp-other", job_spec("sleep")))
        # the horizon is judged against the object's own creationTimestamp (the real server stamps it from the wall
        # clock, which runs on while the injected clock stands still): just before it, found; just after, not
        (found,) = b.find("dsp-j1-1", plain.clock.now() - 10)
        assert found.scheduler_id == sid and found.created_at is not None
        assert [f.scheduler_id for f in b.find("dsp-j1-1", found.created_at - 1)] == [sid]
        assert b.find("dsp-j1-1", found.created_at + 1) == []
        yaml_text = b.render(StartRequest("j2", 1, "dsp-j2-1", job_spec("sleep")))
        assert "kind: TrainJob" in yaml_text and "kind: TrainingRuntime" in yaml_text
    finally:
        b.close()


def _owners(c: FakeCluster, name: str) -> list[str]:
    copy = c.control.get(TRAINING_RUNTIME, name, c.ns)
    assert copy is not None, f"no runtime copy {name}"
    return [str(r.get("name")) for r in copy["metadata"].get("ownerReferences") or [] if r.get("kind") == "TrainJob"]


def test_a_failed_owner_link_of_the_runtime_copy_is_retried(plain: FakeCluster) -> None:
    b = kb(plain.backend())
    try:
        plain.server.faults.fail_next(1, 503, method="PATCH", path_contains="/trainingruntimes/")
        sid = start(b)
        assert _owners(plain, sid) == [sid]  # linked: the copy goes with its TrainJob
    finally:
        plain.server.faults.clear()
        b.close()


def test_an_owner_link_that_keeps_failing_leaves_nothing_behind(plain: FakeCluster) -> None:
    b = kb(plain.backend())
    try:
        plain.server.faults.fail_next(10, 500, method="PATCH", path_contains="/trainingruntimes/")
        with pytest.raises(Unavailable, match="runtime copy"):
            start(b)
        plain.server.faults.clear()
        leftovers = [
            (rt.kind, o["metadata"]["name"])
            for rt in (TRAINJOB, TRAINING_RUNTIME)
            for o in plain.control.list(rt, plain.ns)
            if o["metadata"]["name"] == "dj-j1-1"
        ]
        assert leftovers == []  # neither a gated TrainJob nor an orphaned copy
        sid = start(b)  # the next try starts it, linked
        assert _owners(plain, sid) == [sid]
    finally:
        plain.server.faults.clear()
        b.close()


# ---- watches ---------------------------------------------------------------------------------------------


def test_dropped_watch_resumes_without_missing_a_transition(plain: FakeCluster) -> None:
    b = kb(plain.backend())
    try:
        sid = start(b)  # it runs until the test succeeds its pods: a late watch still sees it running
        b.open(sid)
        wait(plain, b, sid, running, "runs")
        cursor = b.watch(None, 0).cursor
        plain.control.drop_watches(abrupt=True)
        plain.control.succeed_pods(sid)
        ev = wait(plain, b, sid, lambda e: e.outcome.state.ended, "success seen after the drop", dt=0.2)
        assert ev.outcome.state is State.SUCCEEDED
        batch = b.watch(cursor, 1.0)
        assert sid in batch.changed
        assert sum(i.resumes + i.relists for i in b.informers) >= 1
    finally:
        b.close()


def test_expired_version_relists_and_reports_a_reset(plain: FakeCluster) -> None:
    b = kb(plain.backend())
    try:
        sid = start(b)
        cursor = b.watch(None, 0).cursor
        plain.control.compact()
        plain.control.drop_watches()
        b.open(sid)
        ev = wait(plain, b, sid, running, "runs after the re-list", dt=0.2)
        assert ev.outcome.state is State.RUNNING
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(i.relists for i in b.informers):
            plain.tick(0.2)
        assert any(i.relists for i in b.informers), "no informer re-listed after 410"
        assert b.watch(cursor, 0.5).reset
    finally:
        b.close()


def test_steady_state_reads_make_no_requests(plain: FakeCluster) -> None:
    b = kb(plain.backend())
    try:
        sids = [start(b, job=f"s{i}") for i in range(3)]
        for sid in sids:
            b.open(sid)
        plain.tick(1)
        before = len(plain.server.requests())
        for _ in range(20):
            b.inspect_many(sids)
            b.inspect(sids[0])
            b.find("dsp-s0-1", 0)
            b.cessation(sids)
            b.watch(b.watch(None, 0).cursor, 0)
        # the adapter's own requests (in front, the controllers also talk to the server, with their own token)
        after = [
            r for r in plain.server.requests()[before:] if "watch" not in str(r.query) and r.user == f"token:{TOKEN}"
        ]
        assert after == [], after
    finally:
        b.close()


def test_close_stops_every_watch_thread(plain: FakeCluster) -> None:
    b = kb(plain.backend())
    names = {t.name for t in threading.enumerate() if t.name.startswith("dispatch-kubeflow-watch")}
    assert len(names) >= 4
    b.close()  # returns once every watch thread has ended (within one call's bound)
    assert [inf.name for inf in b.informers if inf.alive] == []


# ---- output ----------------------------------------------------------------------------------------------


def test_stdout_follows_rank0_and_stderr_is_unsupported(plain: FakeCluster) -> None:
    b = kb(plain.backend())
    try:
        sid = start(b)
        b.open(sid)
        wait(plain, b, sid, running, "runs")
        pod = plain.rank0(sid)["metadata"]["name"]
        plain.control.append_log(pod, "line 1")
        got: list[bytes] = []
        reader = threading.Thread(target=lambda: got.extend(b.stdout(sid, follow=True)))
        reader.start()
        time.sleep(0.3)
        plain.control.append_log(pod, "line 2")
        plain.control.finish_log(pod)
        reader.join(10)
        assert b"".join(got).splitlines() == [b"line 1", b"line 2"]
        with pytest.raises(Unsupported):
            b.stderr(sid)
        with pytest.raises(Unsupported):
            list(b.stdout(sid, execution=7))
    finally:
        b.close()


def test_stdout_follow_waits_for_rank0s_container_when_another_rank_started_first(plain: FakeCluster) -> None:
    """Real kubelets start the ranks' containers seconds apart (seen on the real nodes: `dispatch run` showed no
    output once): the execution runs as soon as rank 1's has started, while rank 0's log still answers 400
    ``ContainerCreating``. A follow opened then waits for rank 0's container, and a plain read finds nothing yet."""
    plain.control.auto_run_pods = False
    b = kb(plain.backend())
    try:
        sid = start(b)
        b.open(sid)
        pods = plain.until(lambda: plain.control.pods_of(sid), lambda ps: len(ps) == 2, 20)
        by_index = {p["metadata"]["labels"][n.COMPLETION_INDEX]: p["metadata"]["name"] for p in pods}
        plain.control.run_pod(by_index["1"])
        wait(plain, b, sid, running, "runs")
        assert list(b.stdout(sid)) == []
        got: list[bytes] = []
        reader = threading.Thread(target=lambda: got.extend(b.stdout(sid, follow=True)))
        reader.start()
        time.sleep(0.5)
        plain.control.run_pod(by_index["0"])
        plain.control.append_log(by_index["0"], "line 1")
        plain.control.finish_log(by_index["0"])
        reader.join(15)
        assert b"".join(got).splitlines() == [b"line 1"]
    finally:
        b.close()


def test_no_pods_log_permission_answers_no(plain: FakeCluster) -> None:
    rules = [*READ_RULES, rule("create,patch,delete", "trainer.kubeflow.org", "trainjobs,trainingruntimes")]
    plain.control.set_rules(TOKEN, rules)
    b = kb(plain.backend())
    try:
        assert not b.observe_only
        caps = b.capabilities()
        assert caps.answer(Capability.OUTPUT_READ) is Answer.NO and caps.answer(Capability.OUTPUT_FOLLOW) is Answer.NO
        with pytest.raises(Unsupported):
            b.stdout("anything")
    finally:
        b.close()


def test_unknown_id_is_not_found(plain: FakeCluster) -> None:
    b = kb(plain.backend())
    try:
        with pytest.raises(NotFound):
            b.inspect("dj-none-1")
        assert b.inspect_many(["dj-none-1"]) == {}
    finally:
        b.close()


def test_workload_objects_exist_in_kueue_mode(kueue: FakeCluster) -> None:
    b = kb(kueue.backend())
    try:
        sid = start(b)
        wl = kueue.settled().workload_for(sid)
        assert wl is not None and wl["metadata"]["annotations"][n.GATED_BY] == "dispatch.io/start"
        assert kueue.settled().list(WORKLOAD)
    finally:
        b.close()


def test_output_and_foreign_extensions_are_refused_before_any_call(plain: FakeCluster) -> None:
    from dispatch.extensions import Image, Output
    from dispatch.kubeflow.extensions import RuntimeRef
    from dispatch.spec import JobSpec

    b = kb(plain.backend())
    try:
        before = len(plain.server.requests())
        for exts in (
            (Image("i:1"), RuntimeRef("torch-distributed"), Output("/out")),
            (RuntimeRef("torch-distributed"),),
            (Image("i:1"),),
        ):
            with pytest.raises(Unsupported):
                b.start(StartRequest("jx", 1, "dsp-jx-1", JobSpec(command=("x",), extensions=exts)))
        assert len(plain.server.requests()) == before
    finally:
        b.close()


def test_release_counts_an_eviction_kueue_has_not_recorded_yet(kueue: FakeCluster) -> None:
    from dispatch.kubeflow import client as k

    b = kb(kueue.backend())
    try:
        sid = start(b)
        b.open(sid)
        wait(kueue, b, sid, running, "runs")
        tj = b.kube.get(k.TrainJob, sid)
        wl = kueue.settled().workload_for(sid)
        assert wl is not None
        # what the apiserver shows in the moment after a deactivation, before Kueue evicts
        wl["spec"]["active"] = False
        from unittest import mock

        with mock.patch.object(b, "_workload", return_value=wl):
            assert b._authorise_kueue(tj) == "2"
        assert b._authorise_kueue(tj) == "1"
    finally:
        b.close()


def test_stop_after_a_hold_reads_cancelled(plain: FakeCluster) -> None:
    b = kb(plain.backend())
    try:
        sid = start(b)
        b.open(sid)
        wait(plain, b, sid, running, "runs")
        b.hold(sid, "h")
        wait(plain, b, sid, lambda e: e.outcome.state is State.HELD, "held")
        b.stop_job(sid)
        ev = wait(plain, b, sid, lambda e: e.outcome.state.ended, "stopped")
        assert (ev.outcome.state, ev.outcome.cause) == (State.CANCELLED, Cause.CANCELLED)
        assert ev.executions[-1].outcome.cause is Cause.HELD
    finally:
        b.close()


def test_stop_after_success_keeps_success(plain: FakeCluster) -> None:
    b = kb(plain.backend())
    try:
        sid = start(b, "succeed")
        b.open(sid)
        wait(plain, b, sid, lambda e: e.outcome.state.ended, "ends")
        b.stop_job(sid)
        plain.tick(1)
        assert b.inspect(sid).outcome.state is State.SUCCEEDED
    finally:
        b.close()
