"""Test support: a test cluster (dispatch_kubetest) with a scripted kubelet, its clock, and backends on it.

:class:`FakeCluster` owns one FakeAPIServer, in one of two worlds:

- ``inproc``: the project's server alone; the controller roles are reactors run synchronously in-process;
- ``front``: the front of the real apiextensions-apiserver (custom resources: real API machinery; core resources:
  the project's server) with the controller roles running as controllers over HTTP (dispatch_kubetest.controllers).
  The real server is shared by every test, so each world has its own namespace and its own names for the
  cluster-scoped objects it creates (ClusterQueue, ResourceFlavor, AdmissionCheck and its controller name).

Tests read those per-world names from the cluster (``ns``, ``check``, ``admission_controller``), never the
constants, so what they assert does not depend on the world. :class:`ClusterClock` is the dispatch Clock of the
tests: ``now()`` is the injected clock, ``sleep(s)`` advances it by ``s`` (reactors fire: deadlines, taint
evictions; in front, after the controllers have settled), plays the kubelet script (pods whose command says
``succeed``/``fail``/``oom``/``echo`` finish after ``RUN_SECONDS`` of fake time) and then gives the watch threads a
moment of real time to deliver. In front the injected clock starts at the wall-clock time, since the real server
stamps ``creationTimestamp`` from the wall clock (the adapter's ``find`` horizon compares it with the clock).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from dispatch.conformance.harness import ECHO_STDERR, ECHO_STDOUT, FAIL_EXIT_CODE, Harness, Timings
from dispatch.extensions import Image
from dispatch.kubeflow import KubeflowSettings, Mode, open_backend
from dispatch.kubeflow.extensions import RuntimeRef
from dispatch.registry import OpenOptions
from dispatch.settings import decode
from dispatch.spec import JobSpec
from dispatch.spi import Backend
from dispatch_kubetest import FakeAPIServer, FakeClock
from dispatch_kubetest.crdserver import CRDAPIServer
from dispatch_kubetest.resources import POD, TRAINJOB

RUN_SECONDS = 5.0
LAG = 30.0
"""Real seconds :meth:`FakeCluster.until` waits, once its ticks are spent, for a watch to deliver."""
T = TypeVar("T")
ADMISSION_CONTROLLER = "dispatch.io/admission"
CHECK = "dispatch-readmission"
TOKEN = "adapter-token"
ADMISSION_TOKEN = "admission-token"


class ClusterClock:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster

    def now(self) -> float:
        return self.cluster.server.clock.now().timestamp()

    def sleep(self, seconds: float) -> None:
        self.cluster.tick(seconds)


class FakeCluster:
    """A fake Kubernetes cluster with Trainer, JobSet (and Kueue) for the Kubeflow adapter's tests."""

    def __init__(
        self,
        tmp: Path,
        mode: Mode = Mode.PLAIN,
        *,
        nodes: int = 4,
        admission: bool = True,
        runtime: dict[str, Any] | None = None,
        real_pause: float = 0.03,
        world: str = "inproc",
    ) -> None:
        self.mode = mode
        self.world = world
        if world == "front":
            suffix = uuid.uuid4().hex[:8]
            self.ns = f"kf-{suffix}"
            self.check = f"{CHECK}-{suffix}"
            self.admission_controller = f"{ADMISSION_CONTROLLER}-{suffix}"
            self.cluster_queue, flavor = f"cq-{suffix}", f"flavor-{suffix}"
            self.server = FakeAPIServer(
                bookmark_interval=0.5,
                strict_validation=True,
                crd_backend=crd_backend(),
                namespace=self.ns,
                clock=FakeClock(datetime.now(UTC).replace(microsecond=0)),
            )
        elif world == "inproc":
            self.ns, self.check, self.admission_controller = "default", CHECK, ADMISSION_CONTROLLER
            self.cluster_queue, flavor = "cq", "default"
            # strict_validation: every write is fieldValidation=Strict (an unknown field is a 400); every custom
            # resource is validated, pruned and defaulted against the CRD schemas the real server serves
            self.server = FakeAPIServer(bookmark_interval=0.5, strict_validation=True)
        else:
            raise ValueError(f"unknown world {world!r}: inproc or front")
        self.server.start()
        self.control = self.server.control
        self.clock = ClusterClock(self)
        self.real_pause = real_pause
        self.started: dict[str, float] = {}
        self._lock = threading.RLock()
        for i in range(nodes):
            self.control.add_node(f"worker-{i}")
        self.control.add_runtime(**(runtime or {"num_nodes": 1}))
        self.control.auto_run_pods = True
        self.kubeconfig = self.server.write_kubeconfig(
            tmp / f"kubeconfig-{self.server.port}", token=TOKEN, namespace=self.ns
        )
        self.controller: Any = None
        if mode is Mode.KUEUE:
            self.control.add_admission_check(self.check, controller_name=self.admission_controller, active=False)
            self.control.add_cluster_queue(self.cluster_queue, flavor=flavor, admission_checks=[self.check])
            self.control.add_local_queue("lq", cluster_queue=self.cluster_queue)
            if admission:
                self.start_admission()

    # ---- dispatch-admission ----------------------------------------------------------------------------

    def start_admission(self, token: str | None = ADMISSION_TOKEN) -> None:
        from dispatch.admission.controller import Controller, ControllerSettings

        settings = ControllerSettings(
            kubeconfig=str(self.kubeconfig),
            controller_name=self.admission_controller,
            lease_namespace=self.ns,
            identity="test-admission",
            lease_duration=15.0,
            renew_every=0.5,
            token=token,
        )
        self.controller = Controller(settings)
        self.controller.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            from dispatch_kubetest.resources import ADMISSION_CHECK

            ac = self.control.get(ADMISSION_CHECK, self.check, "")
            conds = (ac or {}).get("status", {}).get("conditions") or []
            if any(c.get("type") == "Active" and c.get("status") == "True" for c in conds):
                return
            time.sleep(0.05)
        raise RuntimeError("dispatch-admission did not mark its AdmissionCheck Active")

    # ---- backends ----------------------------------------------------------------------------------------

    def settings(self, **over: Any) -> KubeflowSettings:
        data: dict[str, Any] = {
            "kubeconfig": {"path": str(self.kubeconfig)},
            "namespace": self.ns,
            "mode": self.mode.value,
            "timeouts": {"apiserverRequest": "10s"},
            "preflight": {"probeWatch": "0.1s"},
        }
        if self.mode is Mode.KUEUE:
            data["localQueue"] = "lq"
            if self.admission_controller != ADMISSION_CONTROLLER:
                data["admissionCheckController"] = self.admission_controller
        data.update(over)
        return decode(KubeflowSettings, data)

    def backend(self, *, read_only: bool = False, **over: Any) -> Backend:
        return open_backend(self.settings(**over), OpenOptions(read_only=read_only, clock=self.clock))

    # ---- the kubelet script ----------------------------------------------------------------------------

    def tick(self, seconds: float) -> None:
        with self._lock:
            if seconds > 0:
                self.control.advance(seconds)
            self.play()
        time.sleep(self.real_pause)

    def until(self, read: Callable[[], T], pred: Callable[[T], bool], steps: int, dt: float = 1.0) -> T:
        """Tick ``dt`` of the cluster's clock up to ``steps`` times until ``pred`` holds for ``read()``, then wait
        up to LAG more real seconds without moving the clock: a watch may deliver late on a loaded machine, but
        nothing that needs more cluster time can happen then. Returns the last value read."""
        value = read()
        for _ in range(steps):
            if pred(value):
                return value
            self.tick(dt)
            value = read()
        deadline = time.monotonic() + LAG
        while not pred(value) and time.monotonic() < deadline:
            self.tick(0)
            value = read()
        return value

    def play(self) -> None:
        now = self.clock.now()
        for tj in self.control.list(TRAINJOB):
            name = tj["metadata"]["name"]
            for i, listed in enumerate(self.control.pods_of(name)):
                pname = listed["metadata"]["name"]
                pod = self.control.get(POD, pname) or {}
                if pod.get("status", {}).get("phase") != "Running" or pod["metadata"].get("deletionTimestamp"):
                    continue
                first = self.started.setdefault(pname, now)
                argv = _argv(pod)
                behaviour = argv[0] if argv else ""
                if now - first < RUN_SECONDS:
                    continue
                if behaviour in ("fail", "oom") and i > 0:
                    continue  # rank 0 fails; the Job controller ends the others
                if behaviour == "succeed":
                    self.control.succeed_pod(pname)
                elif behaviour == "fail":
                    self.control.fail_pod(pname, exit_code=FAIL_EXIT_CODE)
                elif behaviour == "oom":
                    self.control.oom_kill_pod(pname)
                elif behaviour == "echo":
                    self.control.append_log(pname, ECHO_STDOUT, ECHO_STDERR)
                    self.control.finish_log(pname)
                    self.control.succeed_pod(pname)

    def settled(self) -> Any:
        """The control surface once the controllers have reacted to everything written so far (in front they react
        asynchronously, by watch): read the cluster through this after the adapter acted."""
        self.control.reconcile()
        return self.control

    def rank0(self, trainjob: str) -> dict[str, Any]:
        self.control.reconcile()  # whatever the adapter just wrote has been reacted to
        pods = self.control.pods_of(trainjob)
        if not pods:
            raise AssertionError(f"{trainjob} has no live pods")
        return pods[0]

    def close(self) -> None:
        if self.controller is not None:
            self.controller.stop()
        self.server.stop()


_CRD_SERVER: list[CRDAPIServer] = []


def crd_backend() -> CRDAPIServer:
    """The real apiextensions-apiserver with the project's CRDs installed (once per process). Raises
    CRDAPIServerMissing, naming scripts/k8s/up.sh, when it is not running: a front-world test fails, never skips."""
    if not _CRD_SERVER:
        srv = CRDAPIServer.from_state()
        srv.install_crds()
        _CRD_SERVER.append(srv)
    return _CRD_SERVER[0]


def _argv(pod: dict[str, Any]) -> list[str]:
    for c in pod.get("spec", {}).get("containers", []):
        if c.get("name") == "node":
            cmd = list(c.get("command") or []) + list(c.get("args") or [])
            # /bin/sh -c PROLOGUE dispatch-prologue <workdir> argv...
            return cmd[5:] if len(cmd) > 5 and cmd[0] == "/bin/sh" else cmd
    return []


def job_spec(behaviour: str, *, nodes: int = 2, time_limit: float | None = None, **kw: Any) -> JobSpec:
    return JobSpec(
        command=(behaviour, "x"),
        nodes=nodes,
        time_limit=time_limit,
        extensions=(Image("registry.example/train:1"), RuntimeRef("torch-distributed")),
        **kw,
    )


def harness(cluster: FakeCluster) -> Harness:
    def spec(behaviour: str) -> JobSpec | None:
        if behaviour == "timeout":
            return job_spec("sleep", time_limit=10.0)
        return job_spec(behaviour)

    def preempt(b: Backend, sid: str) -> None:
        cluster.control.reconcile()
        if cluster.mode is Mode.KUEUE:
            wl = cluster.control.workload_for(sid)
            assert wl is not None
            cluster.control.preempt_workload(wl["metadata"]["name"])
        else:
            cluster.control.preempt_pod(cluster.rank0(sid)["metadata"]["name"])

    def lose_node(b: Backend, sid: str) -> None:
        cluster.control.set_node_ready(cluster.rank0(sid)["spec"]["nodeName"], None)

    def admin_hold(b: Backend, sid: str) -> None:
        from dispatch_kubetest.resources import WORKLOAD

        # the adapter just wrote: let the controllers react first (in front, Kueue makes the Workload by watch)
        cluster.control.reconcile()
        if cluster.mode is Mode.KUEUE:
            wl = cluster.control.workload_for(sid)
            assert wl is not None
            cluster.control.patch(WORKLOAD, wl["metadata"]["name"], {"spec": {"active": False}})
        else:
            cluster.control.patch(
                TRAINJOB, sid, {"metadata": {"annotations": {"dispatch.io/admin-hold": "maintenance"}}}
            )

    def cleanup(b: Backend, sid: str) -> None:
        from dispatch.kubeflow.backend import KubeflowBackend

        inner = getattr(b, "unrestricted", b)
        if isinstance(inner, KubeflowBackend):
            inner.delete(sid)

    return Harness(
        backend=cluster.backend,
        clock=cluster.clock,
        spec=spec,
        timings=Timings(wait=900.0, quiet=10.0, poll=5.0),
        read_only_backend=lambda: cluster.backend(read_only=True),
        preempt=preempt,
        lose_node=lose_node,
        admin_hold=admin_hold,
        cleanup=cleanup,
        name=f"kubeflow-{cluster.mode.value}",
    )
