"""The control surface tests drive a test cluster through (``server.control``), the same in both worlds.

Setup helpers create objects the way an administrator would, pod helpers play the kubelet, ``advance()`` moves the
injected clock, and each helper ends with ``reconcile()`` so the controllers have reacted before it returns:

- in-process world (``FakeAPIServer()``): the reactors run synchronously, in a fixed order (Kueue, Trainer, JobSet,
  Job, Pod) until a full round changes nothing; a round holds the store lock, so no HTTP write interleaves with it.
  Helpers act on the store directly;
- front world (``FakeAPIServer(crd_backend=...)``): the reactors are controllers (controllers.py): a background
  loop woken by watches, reading informer caches and writing over HTTP to the front, so custom resources go to the
  real apiextensions-apiserver and must pass its validation. Helpers act over HTTP too (an APIStore without
  caches, reading fresh), and ``reconcile()`` waits until the controllers are quiescent (``settle``).

Helpers default to ``namespace`` (``default`` unless the server was made with another one).
"""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from .clock import FakeClock
from .errors import StatusError
from .faults import Faults
from .logs import LogBook
from .patch import merge_patch
from .rbac import Authorizer, Rule
from .reactors import JobReactor, JobSetReactor, KueueReactor, PodReactor, Reactor, TrainerReactor
from .reactors.gc import GarbageCollector
from .reactors.pods import NOT_READY, UNREACHABLE
from .requestctx import internal
from .resources import (
    ADMISSION_CHECK,
    CLUSTER_QUEUE,
    CONFIGMAP,
    JOB,
    JOBSET,
    LOCAL_QUEUE,
    NAMESPACE,
    NODE,
    POD,
    RESOURCE_FLAVOR,
    TRAINING_RUNTIME,
    TRAINJOB,
    WORKLOAD,
    WORKLOAD_PRIORITY_CLASS,
    ResourceType,
)
from .selectors import labels_match, parse_label_selector
from .store import Store

if TYPE_CHECKING:
    from pathlib import Path

    from .apistore import APIStore
    from .controllers import ControllerLoop
    from .front import ExtensionBackend
    from .objectstore import ObjectStore
    from .resources import Catalogue
    from .watch import WatchHub

JSON = dict[str, Any]


class Served(Protocol):
    """What the control surface needs of the server it drives (:class:`~dispatch_kubetest.server.FakeAPIServer`,
    which builds it and sits above it)."""

    @property
    def store(self) -> Store: ...
    @property
    def clock(self) -> FakeClock: ...
    @property
    def logs(self) -> LogBook: ...
    @property
    def faults(self) -> Faults: ...
    @property
    def rbac(self) -> Authorizer: ...
    @property
    def catalogue(self) -> Catalogue: ...
    @property
    def watches(self) -> WatchHub: ...
    @property
    def crd_backend(self) -> ExtensionBackend | None: ...
    @property
    def ca_cert(self) -> Path | None: ...
    @property
    def url(self) -> str: ...


CONTROL = "fake-control"
WORLD_LABEL = "kubetest.dispatch.io/world"
"""Label on the cluster-scoped custom resources a front world creates: its controllers see only their own."""
CONTROLLER_TOKEN = "kubetest-controllers"
"""The bearer token the front world's controllers use (no rule table: allowed, as an in-cluster controller is)."""


class ReconcileLoopError(RuntimeError):
    """The reactors kept changing the store: a reactor bug, reported instead of spinning."""


def torch_runtime(
    name: str = "torch-distributed",
    *,
    namespace: str | None = None,
    num_nodes: int = 1,
    image: str = "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime",
    max_restarts: int | None = 0,
    backoff_limit: int | None = 0,
    restart_policy: str | None = "Never",
    failure_rules: builtins.list[JSON] | None = None,
    torch: bool = True,
) -> JSON:
    """A (Cluster)TrainingRuntime shaped like Trainer's torch-distributed runtime.

    ``namespace`` set → TrainingRuntime; None → ClusterTrainingRuntime. Pass ``None`` for
    ``max_restarts``/``backoff_limit``/``restart_policy`` to leave them out (stock runtime shape).
    """
    job_spec: JSON = {"template": {"spec": {"containers": [{"name": "node", "image": image}]}}}
    if backoff_limit is not None:
        job_spec["backoffLimit"] = backoff_limit
    if restart_policy is not None:
        job_spec["template"]["spec"]["restartPolicy"] = restart_policy
    js_spec: JSON = {
        "replicatedJobs": [
            {
                "name": "node",
                "template": {
                    "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                    "spec": job_spec,
                },
            }
        ]
    }
    if max_restarts is not None:
        js_spec["failurePolicy"] = {"maxRestarts": max_restarts}
        if failure_rules:
            js_spec["failurePolicy"]["rules"] = failure_rules
    meta: JSON = {"name": name, "labels": {"trainer.kubeflow.org/framework": "torch"}}
    if namespace is not None:
        meta["namespace"] = namespace
    ml: JSON = {"numNodes": num_nodes}
    if torch:
        ml["torch"] = {}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime" if namespace is not None else "ClusterTrainingRuntime",
        "metadata": meta,
        "spec": {"mlPolicy": ml, "template": {"spec": js_spec}},
    }


class Cluster:
    """Control surface of one ``FakeAPIServer`` (also usable without HTTP for unit tests, in-process)."""

    def __init__(self, server: Served, install_reactors: bool = True, namespace: str = "default") -> None:
        self.server = server
        self.store: Store = server.store
        self.clock: FakeClock = server.clock
        self.logs: LogBook = server.logs
        self.faults: Faults = server.faults
        self.rbac: Authorizer = server.rbac
        self.namespace = namespace
        self.front = server.crd_backend is not None
        self.objects: ObjectStore = server.store
        """What the helpers read and write through: the store in-process, a cache-less APIStore in front."""
        self.reactor_store: ObjectStore = server.store
        """What the reactors read and write through: the store in-process, the controllers' APIStore in front."""
        self.loop: ControllerLoop | None = None
        self.kueue = KueueReactor(self)
        self.trainer = TrainerReactor(self)
        self.jobset = JobSetReactor(self)
        self.jobs = JobReactor(self)
        self.pods_reactor = PodReactor(self)
        self.reactors: builtins.list[Reactor] = (
            [self.kueue, self.trainer, self.jobset, self.jobs, self.pods_reactor] if install_reactors else []
        )
        self.max_rounds = 100
        self.settle_timeout = 300.0  # a stuck loop; controllers that never stop writing end it by rounds
        if not self.front:
            self.store.admission_hooks.append(self._admit)
        self.store.create(NAMESPACE, "", {"metadata": {"name": "default"}})
        if namespace != "default":
            self.store.create(NAMESPACE, "", {"metadata": {"name": namespace}})

    def _admit(self, rt: ResourceType, obj: JSON, old: JSON | None) -> None:
        for reactor in self.reactors:
            reactor.admit(rt, obj, old)

    # ---- the front world: controllers over HTTP -----------------------------------------------------------
    def attach(self) -> None:
        """Front world, once the server listens: the helpers' and the controllers' API clients, and the controllers
        started (informers synced). Called by ``FakeAPIServer.start``."""
        from .apistore import APIStore, Endpoint
        from .controllers import ControllerLoop

        assert self.server.crd_backend is not None
        ctx = None
        if self.server.ca_cert is not None:
            import ssl

            ctx = ssl.create_default_context(cafile=str(self.server.ca_cert))
        groups = frozenset(self.server.crd_backend.groups)
        world = (WORLD_LABEL, self.namespace)
        self.objects = APIStore(
            Endpoint(self.server.url, CONTROLLER_TOKEN, ctx, "kubetest-control"),
            self.clock,
            namespace=self.namespace,
            world_label=world,
            wall_clock_groups=groups,
        )
        if not self.reactors:
            self.reactor_store = self.objects  # the kubelet helpers still write, through the API
            return
        cached = [
            TRAINJOB,
            TRAINING_RUNTIME,
            JOBSET,
            WORKLOAD,
            LOCAL_QUEUE,
            CLUSTER_QUEUE,
            JOB,
            POD,
            NODE,
            CONFIGMAP,
        ]
        store: APIStore = APIStore(
            Endpoint(self.server.url, CONTROLLER_TOKEN, ctx, "kubetest-controllers"),
            self.clock,
            namespace=self.namespace,
            cached=cached,
            world_label=world,
            wall_clock_groups=groups,
        )
        # the helpers write through the controllers' store too (its caches see a helper's write at once) and read
        # fresh (fetch, fetch_list)
        self.reactor_store = self.objects = store
        gc = GarbageCollector(self, [TRAINING_RUNTIME, JOBSET, WORKLOAD, JOB, POD, CONFIGMAP], groups)
        self.loop = ControllerLoop(store, [*self.reactors, gc], external=(TRAINJOB, TRAINING_RUNTIME, WORKLOAD))
        self.loop.start()

    def detach(self) -> None:
        """Front world, before the server stops: delete what this world put in the shared real server (its
        namespace's custom resources, its labelled ClusterQueues, AdmissionChecks and ResourceFlavors), letting the
        controllers release Workloads, then stop them. Best effort: a leftover never fails a test."""
        if not self.front or not hasattr(self.objects, "fetch_list"):
            return
        from .controllers import SettleTimeout

        with contextlib.suppress(StatusError, OSError, SettleTimeout):
            for rt in (TRAINJOB, JOBSET, TRAINING_RUNTIME, LOCAL_QUEUE):
                for obj in self.list(rt):
                    self.objects.delete(rt, self.namespace, obj["metadata"]["name"])
            if self.loop is not None:
                self.loop.settle(5.0)
        if self.loop is not None:
            self.loop.stop()
            self.loop = None
        labelled = f"{WORLD_LABEL}={self.namespace}"
        with contextlib.suppress(StatusError, OSError):
            for wl in self.list(WORKLOAD):
                name = wl["metadata"]["name"]
                self.objects.mutate(WORKLOAD, self.namespace, name, _without_finalizers, CONTROL)
                with contextlib.suppress(StatusError):
                    self.objects.delete(WORKLOAD, self.namespace, name)
            for rt in (CLUSTER_QUEUE, ADMISSION_CHECK, RESOURCE_FLAVOR):
                for obj in self.list(rt, labels=labelled):
                    self.objects.delete(rt, "", obj["metadata"]["name"])

    def _acting(self) -> Any:
        """Held while a helper plays a controller role itself (the kubelet, Kueue's preemption)."""
        if self.loop is not None:
            return self.loop.round_lock
        if self.front:
            return contextlib.nullcontext()
        return _Both(self.store.lock, internal())

    # ---- reactors and time ----------------------------------------------------------------------------------
    def reconcile(self) -> int:
        """Let the controllers react: in-process, run all reactors until a round changes nothing; in front, wait
        until the controllers are quiescent (``ControllerLoop.settle``). Returns the number of rounds."""
        if self.front:
            return self.loop.settle(self.settle_timeout) if self.loop is not None else 0
        with self.store.lock, internal():
            for rounds in range(1, self.max_rounds + 1):
                before = self.store.resource_version
                for reactor in self.reactors:
                    reactor.reconcile()
                if self.store.resource_version == before:
                    return rounds
        raise ReconcileLoopError(f"reactors still changing the store after {self.max_rounds} rounds")

    step = reconcile
    settle = reconcile

    def advance(self, seconds: float) -> None:
        """Move the injected clock forward, then reconcile (time-based reactions fire here)."""
        self.clock.advance(seconds)
        self.reconcile()

    # ---- generic object access ------------------------------------------------------------
    def _rt_for(self, obj: JSON) -> ResourceType:
        rt = self.server.catalogue.by_kind(obj.get("apiVersion", ""), obj.get("kind", ""))
        if rt is None:
            from .resources import default_catalogue

            rt = next(
                (t for t in default_catalogue() if (t.api_version, t.kind) == (obj.get("apiVersion"), obj.get("kind"))),
                None,
            )
        if rt is None:
            raise ValueError(f"unknown kind {obj.get('apiVersion')}/{obj.get('kind')}")
        return rt

    def _ns(self, rt: ResourceType, namespace: str | None) -> str:
        return (namespace or self.namespace) if rt.namespaced else ""

    def _fresh(self, rt: ResourceType, namespace: str, name: str) -> JSON | None:
        fetch = getattr(self.objects, "fetch", None)
        if fetch is not None:
            got: JSON | None = fetch(rt, namespace, name)
            return got
        return self.objects.try_get(rt, namespace, name)

    def create(self, obj: JSON, *, with_status: bool = True) -> JSON:
        """Create any object from a manifest (status kept when ``with_status``), then reconcile."""
        rt = self._rt_for(obj)
        ns = self._ns(rt, (obj.get("metadata") or {}).get("namespace"))
        with internal():
            try:
                created = self.objects.create(rt, ns, obj, CONTROL, keep_status=with_status)
            except StatusError as exc:
                if not (self.front and exc.code == 409 and not rt.namespaced):
                    raise
                created = self._replace_shared(rt, obj)
        self.reconcile()
        return self._fresh(rt, ns, created["metadata"]["name"]) or created

    def _replace_shared(self, rt: ResourceType, obj: JSON) -> JSON:
        """Front world: a cluster-scoped object another world made already (a ClusterTrainingRuntime, a
        WorkloadPriorityClass of the same name) is brought to this manifest, as ``kubectl apply`` would."""

        def replace(cur: JSON) -> JSON:
            new = {k: v for k, v in obj.items() if k not in ("metadata", "status")}
            new["metadata"] = dict(cur["metadata"], labels={**(obj.get("metadata") or {}).get("labels", {})})
            return new

        return self.objects.mutate(rt, "", obj["metadata"]["name"], replace, CONTROL)

    def get(self, rt: ResourceType, name: str, namespace: str | None = None) -> JSON | None:
        return self._fresh(rt, self._ns(rt, namespace), name)

    def list(self, rt: ResourceType, namespace: str | None = None, labels: str | None = None) -> builtins.list[JSON]:
        ns = self._ns(rt, namespace) or None
        fetch_list = getattr(self.objects, "fetch_list", None)
        if fetch_list is not None:
            got: builtins.list[JSON] = fetch_list(rt, ns, labels)
            return got
        reqs = parse_label_selector(labels)
        items, _ = self.objects.list(rt, ns)
        return [o for o in items if labels_match(reqs, o)]

    def patch(
        self, rt: ResourceType, name: str, patch: JSON, namespace: str | None = None, subresource: str = ""
    ) -> JSON:
        """JSON-merge-patch an object (``subresource="status"`` for status), then reconcile."""
        ns = self._ns(rt, namespace)
        with internal():
            self.objects.mutate(rt, ns, name, lambda cur: merge_patch(cur, patch), CONTROL, subresource)
        self.reconcile()
        got = self._fresh(rt, ns, name)
        if got is None:
            raise StatusError(404, f'{rt.key} "{name}" not found', "NotFound")
        return got

    def delete(self, rt: ResourceType, name: str, namespace: str | None = None) -> None:
        with internal():
            self.objects.delete(rt, self._ns(rt, namespace), name)
        self.reconcile()

    # ---- setup helpers --------------------------------------------------------------------
    def add_namespace(self, name: str) -> JSON:
        return self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}, with_status=False)

    def add_node(
        self, name: str, labels: dict[str, str] | None = None, allocatable: dict[str, str] | None = None
    ) -> JSON:
        """A Ready node (with ``kubernetes.io/hostname`` and any extra labels)."""
        now = self.clock.rfc3339()
        alloc = allocatable or {"cpu": "64", "memory": "512Gi", "pods": "110"}
        return self.create(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
                "spec": {},
                "status": {
                    "capacity": dict(alloc),
                    "allocatable": dict(alloc),
                    "addresses": [
                        {"type": "InternalIP", "address": f"192.168.0.{1 + len(self.list(NODE)) % 250}"},
                        {"type": "Hostname", "address": name},
                    ],
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "True",
                            "reason": "KubeletReady",
                            "message": "kubelet is posting ready status",
                            "lastHeartbeatTime": now,
                            "lastTransitionTime": now,
                        }
                    ],
                },
            }
        )

    def set_node_ready(self, name: str, ready: bool | None) -> JSON:
        """Ready (True), NotReady (False) or unreachable (None: kubelet stopped posting).

        False/None add the NoExecute taint ``node.kubernetes.io/not-ready``/``unreachable`` with
        ``timeAdded`` = now; pods on the node are evicted once their toleration (300 s by default)
        has elapsed on the injected clock (see ``advance``). True removes those taints."""
        now = self.clock.rfc3339()
        if ready is True:
            cond = {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
            }
            taint_key = None
        elif ready is False:
            cond = {
                "type": "Ready",
                "status": "False",
                "reason": "KubeletNotReady",
                "message": "container runtime network not ready",
            }
            taint_key = NOT_READY
        else:
            cond = {
                "type": "Ready",
                "status": "Unknown",
                "reason": "NodeStatusUnknown",
                "message": "Kubelet stopped posting node status.",
            }
            taint_key = UNREACHABLE

        def spec_change(cur: JSON) -> JSON:
            taints = [
                t for t in (cur.get("spec") or {}).get("taints") or [] if t.get("key") not in (NOT_READY, UNREACHABLE)
            ]
            if taint_key:
                taints.append({"key": taint_key, "effect": "NoExecute", "timeAdded": now})
            cur.setdefault("spec", {})["taints"] = taints
            if not taints:
                cur["spec"].pop("taints")
            return cur

        def status_change(cur: JSON) -> JSON:
            conds = [c for c in (cur.get("status") or {}).get("conditions") or [] if c.get("type") != "Ready"]
            old: JSON = next(
                (c for c in (cur.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), {}
            )
            changed = old.get("status") != cond["status"]
            conds.append(
                {
                    **cond,
                    "lastHeartbeatTime": old.get("lastHeartbeatTime", now) if ready is None else now,
                    "lastTransitionTime": now if changed else old.get("lastTransitionTime", now),
                }
            )
            cur.setdefault("status", {})["conditions"] = conds
            return cur

        with internal():
            self.objects.mutate(NODE, "", name, spec_change, "node-lifecycle-controller")
            self.objects.mutate(NODE, "", name, status_change, "node-lifecycle-controller", "status")
        self.reconcile()
        return self._fresh(NODE, "", name) or {}

    def delete_node(self, name: str) -> None:
        """Delete the Node object: pods bound to it are failed and removed by pod GC."""
        self.delete(NODE, name, "")

    def add_runtime(self, runtime: JSON | None = None, **kwargs: Any) -> JSON:
        """Create a (Cluster)TrainingRuntime: a manifest, or ``torch_runtime(**kwargs)``."""
        return self.create(runtime if runtime is not None else torch_runtime(**kwargs), with_status=False)

    def add_resource_flavor(self, name: str = "default", node_labels: dict[str, str] | None = None) -> JSON:
        spec: JSON = {"nodeLabels": node_labels} if node_labels else {}
        return self.create(
            {
                "apiVersion": RESOURCE_FLAVOR.api_version,
                "kind": "ResourceFlavor",
                "metadata": {"name": name},
                "spec": spec,
            },
            with_status=False,
        )

    def add_admission_check(
        self, name: str, controller_name: str = "dispatch.example/admission", active: bool = True
    ) -> JSON:
        """An AdmissionCheck whose controller has set ``Active`` (True reason Active, or False)."""
        status = {
            "conditions": [
                {
                    "type": "Active",
                    "status": "True" if active else "False",
                    "reason": "Active" if active else "Inactive",
                    "message": "The admission check is active" if active else "The admission check is inactive",
                    "lastTransitionTime": self.clock.rfc3339(),
                }
            ]
        }
        return self.create(
            {
                "apiVersion": ADMISSION_CHECK.api_version,
                "kind": "AdmissionCheck",
                "metadata": {"name": name},
                "spec": {"controllerName": controller_name},
                "status": status,
            }
        )

    def add_cluster_queue(
        self,
        name: str = "cq",
        quotas: dict[str, str | int] | None = None,
        flavor: str = "default",
        admission_checks: builtins.list[str] | None = None,
        preemption: str | None = None,
    ) -> JSON:
        """A ClusterQueue with one resource group (``quotas``: resource → nominalQuota) on ``flavor``
        (created if missing), optional AdmissionChecks and ``withinClusterQueue`` preemption."""
        quotas = quotas if quotas is not None else {"cpu": 100, "memory": "1Ti", "nvidia.com/gpu": 64}
        if self._fresh(RESOURCE_FLAVOR, "", flavor) is None:
            self.add_resource_flavor(flavor)
        spec: JSON = {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": list(quotas),
                    "flavors": [
                        {
                            "name": flavor,
                            "resources": [{"name": r, "nominalQuota": q} for r, q in quotas.items()],
                        }
                    ],
                }
            ],
        }
        if admission_checks:
            spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": n} for n in admission_checks]}
        if preemption:
            spec["preemption"] = {"withinClusterQueue": preemption}
        return self.create(
            {
                "apiVersion": CLUSTER_QUEUE.api_version,
                "kind": "ClusterQueue",
                "metadata": {"name": name},
                "spec": spec,
            },
            with_status=False,
        )

    def add_local_queue(self, name: str = "lq", namespace: str | None = None, cluster_queue: str = "cq") -> JSON:
        namespace = namespace or self.namespace
        return self.create(
            {
                "apiVersion": LOCAL_QUEUE.api_version,
                "kind": "LocalQueue",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"clusterQueue": cluster_queue},
            },
            with_status=False,
        )

    def add_priority_class(self, name: str, value: int) -> JSON:
        return self.create(
            {
                "apiVersion": WORKLOAD_PRIORITY_CLASS.api_version,
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": name},
                "value": value,
            },
            with_status=False,
        )

    # ---- Kueue ----------------------------------------------------------------------------
    def workload_for(self, name: str, namespace: str | None = None, kind: str = "TrainJob") -> JSON | None:
        """The Workload owned by the TrainJob (or JobSet) ``name``."""
        rt = TRAINJOB if kind == "TrainJob" else JOBSET
        namespace = namespace or self.namespace
        job = self._fresh(rt, namespace, name)
        if job is None:
            return None
        for wl in self.list(WORKLOAD, namespace):
            if any(r.get("uid") == job["metadata"]["uid"] for r in wl["metadata"].get("ownerReferences") or []):
                return wl
        return None

    def set_admission_check_state(
        self,
        workload: str,
        check: str,
        state: str,
        message: str = "",
        namespace: str | None = None,
        pod_set_updates: builtins.list[JSON] | None = None,
    ) -> JSON:
        """Write one check's state on a Workload, as its AdmissionCheck controller would."""
        now = self.clock.rfc3339()
        ns = namespace or self.namespace

        def change(cur: JSON) -> JSON:
            checks = (cur.get("status") or {}).get("admissionChecks") or []
            for c in checks:
                if c.get("name") == check:
                    if c.get("state") != state:
                        c["lastTransitionTime"] = now
                    c["state"] = state
                    c["message"] = message
                    if pod_set_updates is not None:
                        c["podSetUpdates"] = pod_set_updates
                    break
            else:
                raise StatusError(409, f"workload {workload} has no admission check {check}", "Conflict")
            return cur

        with internal():
            self.objects.mutate(WORKLOAD, ns, workload, change, "admission-check-controller", "status")
        self.reconcile()
        return self._fresh(WORKLOAD, ns, workload) or {}

    def preempt_workload(self, workload: str, namespace: str | None = None, reason: str = "InClusterQueue") -> JSON:
        """Evict an admitted Workload as preempted (Evicted ``Preempted``, Preempted ``reason``)."""
        ns = namespace or self.namespace
        with self._acting():
            wl = self._fresh(WORKLOAD, ns, workload)
            if wl is None:
                raise StatusError(404, f'workload "{workload}" not found', "NotFound")
            self.kueue.preempt(wl, reason)
        self.reconcile()
        return self._fresh(WORKLOAD, ns, workload) or {}

    # ---- pods (the kubelet) ---------------------------------------------------------------
    def pods(self, namespace: str | None = None, labels: str | None = None) -> builtins.list[JSON]:
        return self.list(POD, namespace, labels)

    def pods_of(self, trainjob: str, namespace: str | None = None, live: bool = True) -> builtins.list[JSON]:
        """The pods of a TrainJob's JobSet, by completion index (``live``: not terminal/deleting)."""
        pods = self.pods(namespace, f"jobset.sigs.k8s.io/jobset-name={trainjob}")
        if live:
            pods = [
                p
                for p in pods
                if not p["metadata"].get("deletionTimestamp")
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            ]
        return sorted(
            pods,
            key=lambda p: (
                int((p["metadata"].get("labels") or {}).get("jobset.sigs.k8s.io/job-global-index", 0)),
                int((p["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-completion-index", 0)),
                p["metadata"]["name"],
            ),
        )

    def _pod_action(self, name: str, namespace: str | None, action: Callable[[JSON], object]) -> JSON:
        ns = namespace or self.namespace
        with self._acting():
            pod = self._fresh(POD, ns, name)
            if pod is None:
                raise StatusError(404, f'pods "{name}" not found', "NotFound")
            action(pod)
        self.reconcile()
        return self._fresh(POD, ns, name) or {}

    def run_pod(self, name: str, namespace: str | None = None) -> JSON:
        """Containers started and Ready (phase Running). The pod must already be scheduled."""
        return self._pod_action(name, namespace, self.pods_reactor.run)

    def set_pod_waiting(
        self,
        name: str,
        reason: str = "ImagePullBackOff",
        message: str = "",
        namespace: str | None = None,
        container: str | None = None,
    ) -> JSON:
        """Leave the pod Pending with its container(s) waiting for ``reason``."""
        return self._pod_action(name, namespace, lambda p: self.pods_reactor.wait(p, reason, message, container))

    @property
    def auto_run_pods(self) -> bool:
        """When True the kubelet starts every pod as soon as it is scheduled."""
        return self.pods_reactor.auto_run

    @auto_run_pods.setter
    def auto_run_pods(self, value: bool) -> None:
        self.pods_reactor.auto_run = value

    def succeed_pod(self, name: str, namespace: str | None = None) -> JSON:
        """All containers exit 0 (reason Completed): phase Succeeded."""
        return self._pod_action(name, namespace, lambda p: self.pods_reactor.terminate(p, 0, "Completed"))

    def fail_pod(
        self,
        name: str,
        namespace: str | None = None,
        exit_code: int = 1,
        reason: str = "Error",
        message: str = "",
        container: str | None = None,
    ) -> JSON:
        """A container exits non-zero (restarted in place unless restartPolicy is Never)."""
        return self._pod_action(
            name, namespace, lambda p: self.pods_reactor.terminate(p, exit_code, reason, message, container)
        )

    def oom_kill_pod(self, name: str, namespace: str | None = None, container: str | None = None) -> JSON:
        """The kernel OOM-kills a container: terminated reason ``OOMKilled``, exit code 137."""
        return self.fail_pod(name, namespace, 137, "OOMKilled", "", container)

    def preempt_pod(
        self,
        name: str,
        namespace: str | None = None,
        reason: str = "PreemptionByScheduler",
        message: str = "Preempted by a higher priority pod",
        grace_seconds: int | None = None,
    ) -> None:
        """Delete the pod with ``DisruptionTarget=True`` and ``reason`` (``PreemptionByScheduler``,
        ``EvictionByEvictionAPI``, ``TerminationByKubelet``, ...): it stays Terminating for ``grace_seconds``
        (None: its own ``terminationGracePeriodSeconds``, else 30; 0: it goes at once)."""
        self._pod_action(name, namespace, lambda p: self.pods_reactor.disrupt(p, reason, message, grace_seconds))

    def run_pods(self, trainjob: str, namespace: str | None = None) -> builtins.list[JSON]:
        """Run every live pod of a TrainJob; returns them."""
        for pod in self.pods_of(trainjob, namespace):
            if (pod.get("status") or {}).get("phase") != "Running":
                self.run_pod(pod["metadata"]["name"], namespace)
        return self.pods_of(trainjob, namespace)

    def succeed_pods(self, trainjob: str, namespace: str | None = None) -> None:
        for pod in self.pods_of(trainjob, namespace):
            self.succeed_pod(pod["metadata"]["name"], namespace)

    def append_log(self, pod: str, *lines: str, namespace: str | None = None, container: str = "node") -> None:
        """Append lines to a container's log (streamed to ``follow`` readers)."""
        self.logs.append(namespace or self.namespace, pod, container, *lines)

    def finish_log(self, pod: str, namespace: str | None = None, container: str = "node") -> None:
        """End a container's log: follow streams close after the buffered lines."""
        self.logs.finish(namespace or self.namespace, pod, container)

    # ---- API server knobs -----------------------------------------------------------------
    def set_rules(self, token: str, rules: builtins.list[Rule], user: str | None = None) -> None:
        """Authorise ``token`` by ``rules`` only (403 on anything else)."""
        self.rbac.set_rules(token, rules, user)

    def revoke_token(self, token: str) -> None:
        """Refuse ``token`` with 401 on every request from now on (open watches run until they end)."""
        self.rbac.revoke(token)

    def restore_token(self, token: str) -> None:
        self.rbac.restore(token)

    def unserve(self, group_version: str) -> None:
        """Stop serving a group-version (discovery and its paths answer 404)."""
        self.server.catalogue.unserve(group_version)

    def serve(self, group_version: str) -> None:
        self.server.catalogue.serve(group_version)

    def compact(self) -> None:
        """Forget the watch history: resuming from any earlier version answers 410 Expired."""
        self.store.compact()

    def set_history_window(self, events: int) -> None:
        self.store.set_history_window(events)

    def bookmark_now(self) -> None:
        self.server.watches.bookmark_now(self.store)

    def wait_for_watches(self, count: int = 1, timeout: float = 5.0) -> bool:
        """Block until ``count`` watch streams are open (True) or ``timeout`` passes (False)."""
        return self.server.watches.wait_for_open(count, timeout)

    def drop_watches(self, abrupt: bool = False) -> None:
        """End every open watch (and log follow) stream now; see ``Faults.drop_watches``."""
        self.faults.drop_watches(abrupt)


__all__ = ["JOB", "Cluster", "ReconcileLoopError", "torch_runtime"]


def _without_finalizers(cur: JSON) -> JSON:
    cur["metadata"].pop("finalizers", None)
    return cur


class _Both:
    """Two context managers entered in order (the store lock, then ``internal()``)."""

    def __init__(self, first: Any, second: Any) -> None:
        self.first, self.second = first, second

    def __enter__(self) -> None:
        self.first.__enter__()
        self.second.__enter__()

    def __exit__(self, *exc: object) -> None:
        try:
            self.second.__exit__(*exc)
        finally:
            self.first.__exit__(*exc)
