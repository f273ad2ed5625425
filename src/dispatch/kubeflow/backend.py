"""KubeflowBackend: the SPI over Kubeflow Trainer v2 (TrainJob -> JobSet -> Jobs -> Pods), with or without Kueue.

Implements Backend, Holder, Watcher, CessationSignal, IdentityWeakener, OutputReader, ExecutionOutput,
NodeInventory, ShapeCheck and OutputKeeper (no
Requeuer, MultiFinder or NativePolicyCompiler: Kubeflow has no requeue); in Kueue mode also Readmitter
(:class:`KueueBackend`). Reads (inspect, inspect_many, find, watch,
cessation, weakened) come from the watch cache: no request in steady state. Writes go to the apiserver.

The cache's age is honest: evidence is stamped with the time the cache was last known in sync (the stalest
informer's: now while every watch is open and live), and a read of a cache older than the CallBound raises
Unavailable (:class:`~dispatch.kubeflow.watch.Freshness`). Watch failures are logged and counted
(:meth:`KubeflowBackend.watch_failures`).

Gates and holds (names in :mod:`dispatch.kubeflow.names`):

* start: a runtime copy, then the TrainJob, gated (kueue: our entry in ``admission-gated-by``; plain:
  ``spec.suspend: true``), annotated ``dispatch.io/gate: closed``.
* open: kueue: remove our gate entry and authorise attempt 1 (``dispatch.io/admit``); plain: unsuspend with
  the next attempt number on the pods (a runtimePatch while still suspended).
* hold: record the instance in ``dispatch.io/holds``; kueue: deactivate the Workload; plain: suspend. A hold
  on a running execution ends it (cause held).
* release: remove the instance; when none is left, kueue: authorise the next attempt and reactivate the
  Workload; plain: unsuspend with the next attempt number.
* stop: annotate ``dispatch.io/stop-requested`` and stop the pods (kueue: deactivate; plain: suspend). The
  TrainJob stays, reading cancelled, until :meth:`KubeflowBackend.delete` (or an operator) removes it.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import yaml

from dispatch.accelerators import Inventory
from dispatch.capabilities import Capabilities, Capability, CapabilityAnswer, Provenance, no, unknown, yes
from dispatch.clock import Clock
from dispatch.declarations import Declarations
from dispatch.errors import DispatchError, NotFound, OutcomeUnknown, ReadOnly, Rejected, Unavailable, Unsupported
from dispatch.extensions import ExtensionPolicy
from dispatch.kubeflow import client as k
from dispatch.kubeflow import names as n
from dispatch.kubeflow import render as rd
from dispatch.kubeflow import shapes
from dispatch.kubeflow.accelerators import node_inventory
from dispatch.kubeflow.evidence import job_evidence
from dispatch.kubeflow.extensions import RuntimeRef
from dispatch.kubeflow.keeper import Followed, LogKeeper, PodState
from dispatch.kubeflow.mapping import (
    ExecKey,
    annotations_of,
    condition,
    current_key,
    evictions,
    labels,
    meta,
    node_ceasing,
    of_key,
    parse_time,
    pod_started,
    rank,
)
from dispatch.kubeflow.preflight import PreflightResult
from dispatch.kubeflow.progress import trainer_progress
from dispatch.kubeflow.settings import KubeflowSettings, Mode
from dispatch.kubeflow.watch import Cache, Freshness, Informer
from dispatch.outcome import Evidence, State
from dispatch.spec import JobSpec
from dispatch.spi import Cessation, Found, JobEvidence, StartRequest, WatchBatch

NAME = "kubeflow"
JSON = dict[str, Any]
EVICTIONS_REMEMBERED = 10_000
"""Evicted pods whose node :meth:`KubeflowBackend._on_event` has read, kept so each is read once."""

log = logging.getLogger("dispatch.kubeflow.backend")
DEFAULT_GRACE = 30.0
"""Kubernetes' default terminationGracePeriodSeconds: the longest a stopped pod keeps running."""
LINK_TRIES = 3
"""Tries of the patch that makes a TrainJob the owner of its runtime copy, before start undoes both."""
KEPT_WAIT = 5.0
"""Seconds ``execution_output`` waits at most for a follow of the log still ending (keeper.py)."""


class KubeflowBackend:
    """The Kubeflow adapter's backend. Build it with :func:`dispatch.kubeflow.open_backend` (runs preflight)."""

    def __init__(
        self,
        settings: KubeflowSettings,
        kube: k.Kube,
        preflight: PreflightResult,
        clock: Clock,
        *,
        read_only: bool = False,
        watch: bool = True,
    ) -> None:
        self.settings = settings
        self.kube = kube
        self.preflight = preflight
        self.clock = clock
        self._read_only = read_only
        self.kueue = settings.mode is Mode.KUEUE
        self.cache = Cache(kueue=self.kueue, gate_name=settings.gate_name, clock_now=clock.now)
        self.informers: list[Informer] = []
        self.freshness = Freshness.of(settings.timeouts.api_server_request, settings.call_bound)
        self.watch_requests = 0
        self._lock = threading.Lock()
        self._evictions_read: set[str] = set()
        """UIDs of evicted pods whose node was read (:meth:`_on_event`)."""
        self._closed = False
        self.keeper: LogKeeper | None = None
        """Follows rank 0's log of executions a deadline will end, once :meth:`keep_output` was called."""
        if watch:
            self._start_informers()

    # ---- watches -----------------------------------------------------------------------------------------

    def _count(self, what: str) -> None:
        with self._lock:
            self.watch_requests += 1

    def _start_informers(self) -> None:
        ns = self.settings.namespace
        specs: list[tuple[str, Any, str | None, dict[str, Any] | None]] = [
            ("trainjobs", k.TrainJob, ns, {n.MANAGED: "true"}),
            ("jobsets", k.JobSet, ns, None),
            ("pods", k.Pod, ns, {n.JOBSET_NAME: k_exists()}),
            ("nodes", k.Node, None, None),
        ]
        if self.kueue and not (self.preflight.observe_only and "does not serve kueue" in self.preflight.reason):
            specs.append(("workloads", k.Workload, ns, None))
        for name, res, namespace, sel in specs:
            inf = Informer(
                name,
                lambda live: k.make_client(self.settings, live=live),
                res,
                self._on_event,
                self.cache.replace,
                namespace=namespace,
                labels=sel,
                on_request=self._count,
                freshness=self.freshness,
                now=self.clock.now,
            )
            self.informers.append(inf)
            inf.start()
        # each list is one call (or a page each); all of them, made at once, within the CallBound
        timeout = self.settings.call_bound
        if not self.cache.wait_synced([s[0] for s in specs], timeout):
            failed = "; ".join(f"{i.name}: {i.last_failure}" for i in self.informers if i.last_failure)
            self.close()
            raise Unavailable(
                f"the watches did not list everything within {timeout:g}s" + (f" ({failed})" if failed else "")
            )

    def _on_event(self, kind: str, type_: str, obj: JSON) -> None:
        """Feed one watch event to the cache; an eviction first brings its node up to date.

        Each kind has its own watch, so a drain's cordon can reach the cache after the eviction that followed it,
        and the eviction would read as preemption. A GET is a consistent read (it sees the cordon made before the
        eviction): once per evicted pod, its node is read and fed to the cache (which keeps the newer object)
        before the pod event is. A failed read leaves the node as the watch shows it."""
        if kind == "pods" and type_ != "DELETED":
            node = self._evicted_from(obj)
            if node is not None:
                try:
                    fresh = self.kube.get(k.Node, node)
                except DispatchError as exc:
                    log.warning("could not read node %s of an evicted pod: %s", node, exc)
                else:
                    self.cache.event("nodes", "MODIFIED", fresh)
        self.cache.event(kind, type_, obj)

    def _evicted_from(self, pod: JSON) -> str | None:
        """The node of a pod the Eviction API evicted, the first time its event is seen, else None."""
        dt = condition(pod, "DisruptionTarget")
        if dt is None or dt.get("status") != "True" or dt.get("reason") != "EvictionByEvictionAPI":
            return None
        node = (pod.get("spec") or {}).get("nodeName")
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        with self._lock:
            if not node or uid in self._evictions_read:
                return None
            if len(self._evictions_read) >= EVICTIONS_REMEMBERED:  # at worst, one more read of a node
                self._evictions_read.clear()
            self._evictions_read.add(uid)
        return str(node)

    def watch_failures(self) -> dict[tuple[str, str], int]:
        """Failed lists and watch requests since the backend opened, by (watch, reason), e.g.
        ``("pods", "401 Unauthorized")``: what the supervisor exports as ``dispatch_supervisor_watch_failures``."""
        return {(i.name, reason): count for i in self.informers for reason, count in i.failure_counts().items()}

    def watch_age(self) -> float:
        """Seconds since the watch cache was last known in sync (0 while every watch is open and live)."""
        ages = [i.live.age() for i in self.informers]
        return max((a if a is not None else float("inf") for a in ages), default=0.0)

    def _synced_at(self) -> float:
        """The time the cache was last known in sync (the stalest watch's), to stamp evidence with; Unavailable
        when it is older than the bound (a watch that cannot resume: revoked credentials, lost RBAC, ...)."""
        if not self.informers:
            return self.clock.now()
        worst = max(self.informers, key=lambda i: _age(i.live.age()))
        age = _age(worst.live.age())
        if age > self.freshness.bound:
            why = f": {worst.last_failure}" if worst.last_failure else ""
            raise Unavailable(
                f"the watch cache is {age:.0f}s old, past its bound of {self.freshness.bound:g}s "
                f"(the watch of {worst.name} cannot resume{why})"
            )
        return min((i.live.synced_at() or 0.0) for i in self.informers)

    # ---- identity ----------------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return NAME

    @property
    def read_only(self) -> bool:
        return self._read_only or self.preflight.observe_only

    @property
    def observe_only(self) -> bool:
        return self.preflight.observe_only and not self._read_only

    def _write(self, what: str) -> None:
        if self._read_only:
            raise ReadOnly(f"kubeflow backend opened read-only: {what} refused")
        if self.preflight.observe_only:
            if what == "start":
                raise Unsupported(f"this cluster is observe-only ({self.preflight.reason}): start is not possible")
            raise ReadOnly(f"this cluster is observe-only ({self.preflight.reason}): {what} refused")

    def declarations(self) -> Declarations:
        return Declarations(self.settings.node_loss_window, self.settings.call_bound, None)

    def extension_policy(self) -> ExtensionPolicy:
        return ExtensionPolicy(
            required=frozenset({"dispatch.Image", RuntimeRef.kind}),
            accepted=frozenset(
                {"dispatch.Image", RuntimeRef.kind, "dispatch.SharedCheckpoint", "dispatch.CessationWarning"}
            ),
        )

    def capabilities(self) -> Capabilities:
        p = self.preflight
        if self._read_only:
            hold: CapabilityAnswer = unknown("read-only open: the preflight probe did not run")
        elif p.observe_only:
            # the access reviews (and, in kueue mode, the gate check) ran against this cluster
            hold = no(f"observe-only: {p.reason}", Provenance.PROBED)
        else:
            how = ("Workload deactivation" if self.kueue else "TrainJob suspension") + (
                "; a hold on a running execution ends it with cause held"
            )
            if p.probed:
                hold = yes(f"{how}; probed: {p.probe_reason}", Provenance.PROBED)
            else:  # preflight.probe is off: nothing tried a hold here
                hold = yes(f"{how}; declared, not probed (preflight.probe is off)", Provenance.DECLARED)
        if not self.kueue:
            attempt = yes("the adapter writes the attempt on the pods before it unsuspends (plain mode)")
            readmission = yes("plain mode: only dispatch unsuspends the TrainJob")
        elif self._read_only:
            attempt = unknown("read-only open: the readmission gate was not proven")
            readmission = unknown("read-only open: the readmission gate was not proven")
        elif p.gate_proven:
            attempt = yes("dispatch-admission writes the attempt on the pods at each admission", Provenance.PROBED)
            readmission = yes(p.gate_reason, Provenance.PROBED)
        else:
            attempt = no(f"the readmission gate is not proven: {p.gate_reason or p.reason}", Provenance.PROBED)
            readmission = no(f"not proven: {p.gate_reason or p.reason}", Provenance.PROBED)
        logs = (
            yes("rank 0's log of the current execution (pods/log)", Provenance.PROBED)
            if p.can_log
            else no("the adapter may not get pods/log here", Provenance.PROBED)
        )
        follow = (
            yes("pods/log with follow=true", Provenance.PROBED)
            if p.can_log
            else no("the adapter may not get pods/log here", Provenance.PROBED)
        )
        return Capabilities(
            {
                Capability.CONTAINER_IMAGE: yes("TrainJobs run container images (dispatch.Image is required)"),
                Capability.NATIVE_REQUEUE: no("Kubeflow has no requeue"),
                Capability.NATIVE_RESTART: no("dispatch does not compile rules into JobSet failure policies"),
                Capability.HOLD: hold,
                Capability.PRE_TERMINATION_SIGNAL: yes(
                    "the kubelet sends SIGTERM to each rank's command at once (the prologue execs it), SIGKILL after "
                    "the pod's terminationGracePeriodSeconds (dispatch.CessationWarning sets it on the trainer pods; "
                    "else the runtime's, 30 s by default); as its container's PID 1 the command gets SIGTERM only if "
                    "it handles it (dispatch.job's cessation handling and torchrun do)"
                ),
                Capability.ACCOUNTING_HISTORY: no("a deleted TrainJob is gone"),
                Capability.ATTEMPT_INJECTION: attempt,
                Capability.WORKING_DIRECTORY: yes("through the prologue (/bin/sh in the image)"),
                Capability.PROCS_PER_NODE: unknown(
                    "per runtime: yes for a torch or mpi runtime, no for one with no ML policy"
                ),
                Capability.OUTPUT_PATH: no("Kubernetes keeps container logs, not output files"),
                Capability.OUTPUT_READ: logs,
                Capability.OUTPUT_FOLLOW: follow,
                Capability.OUTPUT_RETAINED: self._retained(),
                Capability.READMISSION_GATE: readmission,
                Capability.NODE_EXCLUSION: yes(
                    "a required node affinity (metadata.name NotIn the excluded nodes) on the trainer pods of the "
                    "submission's runtime copy"
                ),
                Capability.ACCELERATORS: self._accelerators_answer(),
                Capability.SHARED_STORAGE: no(
                    "a pod shares no directory with this process (no volume is configured for function calls)"
                ),
                Capability.PROGRESS_REPORTING: self._progress_answer(),
                Capability.BATCH_THROTTLE: no("each job of a batch is a TrainJob of its own: none caps the others"),
            }
        )

    def _progress_answer(self) -> CapabilityAnswer:
        if self.settings.trainer_status:
            return yes(
                "rank 0 posts its reports to the Trainer's status server, which writes the TrainJob's "
                "status.trainerStatus, read from the watch (declared: trainerStatus is set)"
            )
        return no(
            "the Trainer's status server is not declared (set trainerStatus where the Trainer runs with the "
            "TrainJobStatus feature gate): the pods share no storage the supervisor reads"
        )

    def accelerators(self) -> Inventory | None:
        """The GPUs of the watched nodes (:mod:`dispatch.kubeflow.accelerators`); None until the node watch
        has listed them."""
        with self.cache.lock:
            if "nodes" not in self.cache.synced:
                return None
            nodes = list(self.cache.nodes.values())
        return node_inventory(nodes, self.settings.gpu_resource, self.settings.gpu_type_label)

    def never_runs(self, spec: JobSpec) -> str | None:
        """ShapeCheck: why no watched node (whatever its state now) could hold one pod of ``spec`` (its CPUs and
        memory against the nodes' allocatable, :mod:`dispatch.kubeflow.shapes`); None until the node watch has
        listed the nodes."""
        with self.cache.lock:
            if "nodes" not in self.cache.synced:
                return None
            nodes = list(self.cache.nodes.values())
        return shapes.never_runs(spec, nodes)

    def schedulable_nodes(self, spec: JobSpec) -> frozenset[str] | None:
        """NodeInventory: the watched nodes that could run ``spec`` whatever their state now (a node NotReady or
        cordoned may come back), those whose ``gpuTypeLabel`` is the asked GPU type where one is asked; None until
        the node watch has listed them, or when it lists none."""
        with self.cache.lock:
            if "nodes" not in self.cache.synced:
                return None
            nodes = list(self.cache.nodes.values())
        kind, label = spec.resources.gpu_type, self.settings.gpu_type_label
        names = {
            str(meta(node).get("name"))
            for node in nodes
            if kind is None or label is None or (meta(node).get("labels") or {}).get(label) == kind
        }
        return frozenset(names) or None

    def _accelerators_answer(self) -> CapabilityAnswer:
        inventory = self.accelerators()
        if inventory is None:
            return unknown("the node watch has not listed the nodes yet", Provenance.PROBED)
        return inventory.answer()

    def _retained(self) -> CapabilityAnswer:
        """OutputRetained: the cluster keeps no log after its pod goes; the supervisor's archive keeps rank 0's
        log of each execution, and whether a supervisor runs for this cluster is a deployment fact the
        ``supervised`` setting declares."""
        if not self.preflight.can_log:
            return no("logs go with the pods, and the adapter may not read pods/log here", Provenance.PROBED)
        if self.settings.supervised:
            return yes(
                "the supervisor archives rank 0's log of each execution into the job's records when it sees it end "
                "(declared: supervised is set; a log the cluster deleted before then is recorded as gone)"
            )
        return no(
            "logs go with the pods; a dispatch supervisor archives rank 0's log of each execution "
            "(set supervised: true where one runs for this cluster)"
        )

    # ---- start -------------------------------------------------------------------------------------------

    def _runtime(self, ref: RuntimeRef) -> JSON:
        res = k.ClusterTrainingRuntime if ref.runtime_kind == "ClusterTrainingRuntime" else k.TrainingRuntime
        try:
            return self.kube.get(res, ref.name)
        except NotFound:
            raise Rejected(f"the runtime {ref.runtime_kind}/{ref.name} does not exist on this cluster") from None

    def _prepare(self, request: StartRequest) -> tuple[JSON, JSON, rd.RuntimeReport]:
        self.extension_policy().check(request.spec.extensions, NAME)
        ref = request.spec.extension(RuntimeRef)
        assert ref is not None
        runtime = self._runtime(ref)
        report = rd.check_runtime(runtime)
        if report.rank_restart is not None and not self.settings.allow_rank_restart:
            raise Unsupported(
                f"{ref.runtime_kind}/{ref.name}: {report.rank_restart} (set allowRankRestart to accept it)"
            )
        name = n.trainjob_name(request.job_id, request.submission)
        copy = rd.runtime_copy(runtime, name, self.settings, request)
        body = rd.render_trainjob(request, self.settings, report, name, name)
        return copy, body, report

    def render(self, request: StartRequest) -> str:
        """The YAML of what :meth:`start` would create (the runtime copy and the TrainJob), for --dry-run."""
        copy, body, _ = self._prepare(request)
        return str(yaml.safe_dump_all([copy, body], sort_keys=False))

    def start(self, request: StartRequest) -> str:
        self._write("start")
        copy, body, _ = self._prepare(request)
        name = body["metadata"]["name"]
        existing = self.cache.trainjobs.get(name)
        if existing is not None:
            if annotations_of(existing).get(n.MARKER_FULL) == request.marker:
                self._ensure_linked(name, existing)
                return str(name)
            raise Rejected(f"TrainJob {name} already exists for another submission")
        try:
            self.kube.create(k.TrainingRuntime, copy)
        except Rejected:
            current = self.kube.get(k.TrainingRuntime, name)
            if labels(current).get(n.MARKER) != n.marker_label(request.marker):
                raise
        try:
            created = self.kube.create_trainjob(body, name, sleep=time.sleep)
        except Rejected as refused:
            try:
                current = self.kube.get(k.TrainJob, name)
            except NotFound:  # refused, and nothing was made: the copy would be an orphan
                with contextlib.suppress(NotFound):
                    self.kube.delete(k.TrainingRuntime, name)
                raise refused from None
            if annotations_of(current).get(n.MARKER_FULL) != request.marker:
                raise
            created = current
        self.cache.put("trainjobs", created)
        self._link(name, created)
        return str(name)

    def _link(self, name: str, trainjob: JSON) -> None:
        """Make the TrainJob the owner of its runtime copy, so the copy goes when the TrainJob goes (whoever
        deletes it). The copy cannot name its owner when it is created (the TrainJob, which names the copy,
        comes after it), so a patch links them: tried LINK_TRIES times; if it still fails, the gated TrainJob
        (it never ran) and the copy are deleted and start raises Unavailable (nothing was left), or
        OutcomeUnknown if that cleaning failed too (the TrainJob may exist: the supervisor finds it by marker,
        and a retried start links it)."""
        owner = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": name,
            "uid": meta(trainjob).get("uid"),
        }
        patch = {"metadata": {"ownerReferences": [owner]}}
        failure: DispatchError | None = None
        for attempt in range(LINK_TRIES):
            try:
                self.kube.merge_patch(k.TrainingRuntime, name, patch)
                return
            except (Unavailable, OutcomeUnknown) as exc:  # a lost or refused-for-now patch: the same patch again
                failure = exc
                time.sleep(0.1 * 2**attempt)
            except DispatchError as exc:
                failure = exc
                break
        try:
            self.kube.delete(k.TrainJob, name)
            self.cache.drop("trainjobs", trainjob)  # a retried start must not find it in the cache
            with contextlib.suppress(NotFound):
                self.kube.delete(k.TrainingRuntime, name)
        except DispatchError as exc:
            raise OutcomeUnknown(
                f"TrainJob {name}: its runtime copy could not be linked to it ({failure}), and deleting them "
                f"failed ({exc}): the gated TrainJob may exist"
            ) from exc
        raise Unavailable(
            f"TrainJob {name}: its runtime copy could not be linked to it ({failure}); both were deleted, nothing "
            "was started"
        )

    def _ensure_linked(self, name: str, trainjob: JSON) -> None:
        """On a retried start: link the runtime copy if an earlier try left it without its owner."""
        try:
            copy = self.kube.get(k.TrainingRuntime, name)
        except NotFound:
            return
        if not any(r.get("kind") == "TrainJob" for r in meta(copy).get("ownerReferences") or []):
            self._link(name, trainjob)

    # ---- gate, holds, stop -------------------------------------------------------------------------------

    def _fresh(self, sid: str) -> JSON:
        tj = self.kube.get(k.TrainJob, sid)
        self.cache.put("trainjobs", tj)
        return tj

    def _workload(self, tj: JSON) -> JSON | None:
        uid = meta(tj).get("uid")
        try:
            items, _ = self.kube.list(k.Workload, labels={n.JOB_UID_LABEL: uid})
        except NotFound:
            return None
        return items[0] if items else None

    def _patch(self, sid: str, patch: JSON) -> JSON:
        out = self.kube.merge_patch(k.TrainJob, sid, patch)
        self.cache.put("trainjobs", out)
        return out

    def _set_workload_active(self, tj: JSON, active: bool) -> None:
        wl = self._workload(tj)
        if wl is None:
            return
        out = self.kube.merge_patch(k.Workload, str(meta(wl).get("name")), {"spec": {"active": active}})
        self.cache.put("workloads", out)

    def _unsuspend_plain(self, sid: str, tj: JSON, extra_annotations: dict[str, Any]) -> None:
        raw = annotations_of(tj).get(n.ATTEMPT, "0")
        attempt = (int(raw) if raw.isdigit() else 0) + 1
        patches = [p for p in (tj.get("spec") or {}).get("runtimePatches") or [] if p.get("manager") != n.PATCH_MANAGER]
        patches.append(rd.attempt_patch(attempt))
        self._patch(
            sid,
            {
                "metadata": {"annotations": {**extra_annotations, n.ATTEMPT: str(attempt)}},
                "spec": {"suspend": False, "runtimePatches": patches},
            },
        )

    def _authorise_kueue(self, tj: JSON) -> str:
        """The attempt to authorise next: 1 + the Workload's evictions, counting an eviction Kueue has yet to
        record (a deactivated Workload that still holds its quota reservation will be evicted)."""
        wl = self._workload(tj)
        raw = annotations_of(tj).get(n.ADMIT, "0")
        current = int(raw) if raw.isdigit() else 0
        pending = 0
        if wl is not None:
            inactive = (wl.get("spec") or {}).get("active", True) is False
            reserved = (wl.get("status") or {}).get("admission") is not None
            pending = 1 if inactive and reserved else 0
        return str(max(current, evictions(wl) + 1 + pending))

    def open(self, scheduler_id: str) -> None:
        self._write("open")
        tj = self._fresh(scheduler_id)
        ann = annotations_of(tj)
        if n.STOP in ann:
            raise Rejected(f"TrainJob {scheduler_id} was stopped; it cannot be opened")
        holds = n.split_list(ann.get(n.HOLDS))
        if self.kueue:
            gates = n.split_list(ann.get(n.GATED_BY))
            if ann.get(n.GATE) == "open" and self.settings.gate_name not in gates:
                return
            rest = [g for g in gates if g != self.settings.gate_name]
            patch_ann: dict[str, Any] = {
                n.GATE: "open",
                n.GATED_BY: ",".join(rest) if rest else None,
                n.ADMIT: self._authorise_kueue(tj),
            }
            self._patch(scheduler_id, {"metadata": {"annotations": patch_ann}})
            return
        suspended = bool((tj.get("spec") or {}).get("suspend"))
        if holds or n.ADMIN_HOLD in ann or (ann.get(n.GATE) == "open" and not suspended):
            if ann.get(n.GATE) != "open":
                self._patch(scheduler_id, {"metadata": {"annotations": {n.GATE: "open"}}})
            return
        if ann.get(n.GATE) == "open" and suspended:
            return  # suspended by someone else after we opened: a foreign hold, never lifted by us
        self._unsuspend_plain(scheduler_id, tj, {n.GATE: "open"})

    def hold(self, scheduler_id: str, instance: str) -> None:
        self._write("hold")
        if not instance or "," in instance:
            raise Rejected(f"bad hold instance {instance!r}")
        tj = self._fresh(scheduler_id)
        ann = annotations_of(tj)
        if n.STOP in ann or condition(tj, "Complete") or _failed(tj):
            raise Rejected(f"TrainJob {scheduler_id} has ended; nothing to hold")
        holds = n.split_list(ann.get(n.HOLDS))
        if instance not in holds:
            holds.append(instance)
        patch: JSON = {"metadata": {"annotations": {n.HOLDS: ",".join(holds)}}}
        if not self.kueue:
            patch["spec"] = {"suspend": True}
        tj = self._patch(scheduler_id, patch)
        if self.kueue:
            self._set_workload_active(tj, False)

    def release(self, scheduler_id: str, instance: str) -> None:
        self._write("release")
        tj = self._fresh(scheduler_id)
        ann = annotations_of(tj)
        holds = n.split_list(ann.get(n.HOLDS))
        if instance not in holds:
            if holds:
                raise Rejected(f"TrainJob {scheduler_id} is held under another instance ({', '.join(holds)})")
            return
        holds.remove(instance)
        if holds:
            self._patch(scheduler_id, {"metadata": {"annotations": {n.HOLDS: ",".join(holds)}}})
            return
        if self.kueue:
            tj = self._patch(
                scheduler_id, {"metadata": {"annotations": {n.HOLDS: None, n.ADMIT: self._authorise_kueue(tj)}}}
            )
            self._set_workload_active(tj, True)
            return
        if ann.get(n.GATE) == "open" and n.ADMIN_HOLD not in ann and n.STOP not in ann:
            self._unsuspend_plain(scheduler_id, tj, {n.HOLDS: None})
        else:
            self._patch(scheduler_id, {"metadata": {"annotations": {n.HOLDS: None}}})

    def stop_job(self, scheduler_id: str) -> float:
        self._write("stop")
        tj = self._fresh(scheduler_id)
        bound = DEFAULT_GRACE + self.settings.call_bound
        if n.STOP in annotations_of(tj):
            return bound
        stamp = _dt.datetime.fromtimestamp(self.clock.now(), _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        patch: JSON = {"metadata": {"annotations": {n.STOP: stamp}}}
        if not self.kueue:
            patch["spec"] = {"suspend": True}
        tj = self._patch(scheduler_id, patch)
        if self.kueue:
            self._set_workload_active(tj, False)
        return bound

    def delete(self, scheduler_id: str) -> None:
        """Delete the TrainJob and its runtime copy (everything it owns goes with it)."""
        self._write("delete")
        self.kube.delete(k.TrainJob, scheduler_id)
        with contextlib.suppress(NotFound):
            self.kube.delete(k.TrainingRuntime, scheduler_id)

    # ---- reading -----------------------------------------------------------------------------------------

    def _evidence(self, name: str, at: float | None = None) -> JobEvidence | None:
        """The evidence of TrainJob ``name`` as the cache shows it, stamped ``at`` (default: when the cache was
        last known in sync; Unavailable past the bound)."""
        at = self._synced_at() if at is None else at
        got = self.cache.reading(name, at)
        if got is None:
            return None
        o, r, journal = got
        ev = job_evidence(name, o, r, journal, Evidence("kubernetes:watch", at), kueue=self.kueue)
        return self._with_progress(ev, o.trainjob) if self.settings.trainer_status else ev

    def _with_progress(self, ev: JobEvidence, trainjob: JSON) -> JobEvidence:
        """``ev`` with rank 0's progress (:mod:`dispatch.kubeflow.progress`) on its running last execution."""
        if not ev.executions or ev.executions[-1].outcome.state is not State.RUNNING:
            return ev
        last = ev.executions[-1]
        reports = trainer_progress(trainjob, last.identity, last.started_at)
        if not reports:
            return ev
        return replace(ev, executions=(*ev.executions[:-1], replace(last, progress=reports)))

    def _reporting(self) -> set[str]:
        """The TrainJobs whose running execution carries progress: their silence grows with every reading."""
        if not self.settings.trainer_status:
            return set()
        with self.cache.lock:
            names = [name for name, tj in self.cache.trainjobs.items() if (tj.get("status") or {}).get("trainerStatus")]
        out = set()
        for name in names:
            ev = self._evidence(name, self.clock.now())
            if ev is not None and ev.executions and ev.executions[-1].progress:
                out.add(name)
        return out

    def inspect(self, scheduler_id: str) -> JobEvidence:
        out = self._evidence(scheduler_id)
        if out is None:
            raise NotFound(f"no TrainJob {scheduler_id} in namespace {self.settings.namespace}")
        return out

    def inspect_many(self, scheduler_ids: Sequence[str]) -> Mapping[str, JobEvidence]:
        out: dict[str, JobEvidence] = {}
        at = self._synced_at()
        for sid in scheduler_ids:
            ev = self._evidence(sid, at)
            if ev is not None:
                out[sid] = ev
        return out

    def find(self, marker: str, since: float) -> list[Found]:
        self._synced_at()
        want = n.marker_label(marker)
        found = []
        with self.cache.lock:
            items = list(self.cache.trainjobs.values())
        for tj in items:
            if labels(tj).get(n.MARKER) != want or annotations_of(tj).get(n.MARKER_FULL, marker) != marker:
                continue
            created = parse_time(meta(tj).get("creationTimestamp"))
            if created is not None and created < since:
                continue
            found.append(Found(str(meta(tj).get("name")), marker, created))
        return sorted(found, key=lambda f: (f.created_at or 0.0, f.scheduler_id))

    def watch(self, cursor: str | None, timeout: float) -> WatchBatch:
        self._synced_at()  # a watch that cannot resume reports no change: say so instead
        if cursor is None:
            seq, _, _ = self.cache.changes_since(self.cache.seq)
            return WatchBatch(str(seq), (), reset=True)
        try:
            position = int(cursor)
        except ValueError:
            return WatchBatch(str(self.cache.seq), (), reset=True)
        self.cache.wait_change(position, max(0.0, timeout))
        self._synced_at()
        seq, names, reset = self.cache.changes_since(position)
        # a stall is the absence of change: a job that reports progress is read at every watch read, so its
        # silence is judged each cycle (from the cache: no request)
        reporting = sorted(self._reporting() - set(names)) if not reset else []
        return WatchBatch(str(seq), (*names, *reporting), reset)

    def cessation(self, scheduler_ids: Sequence[str]) -> Mapping[str, Cessation]:
        out: dict[str, Cessation] = {}
        at = self._synced_at()
        for sid in scheduler_ids:
            ev = self._evidence(sid, at)
            if ev is None:
                continue
            nodes = {x for e in ev.executions for x in e.nodes}
            with self.cache.lock:
                nodes |= {
                    str((p.get("spec") or {}).get("nodeName"))
                    for p in self.cache.pods.values()
                    if labels(p).get(n.JOBSET_NAME) == sid and (p.get("spec") or {}).get("nodeName")
                }
                ceasing = [(x, node_ceasing(self.cache.nodes.get(x))) for x in sorted(nodes)]
            hit = [(x, why) for x, why in ceasing if why is not None]
            if hit:
                out[sid] = Cessation(hit[0][1] or "", self.clock.now(), tuple(x for x, _ in hit))
        return out

    def weakened(self, scheduler_id: str) -> str | None:
        self._synced_at()
        tj = self.cache.trainjobs.get(scheduler_id)
        if tj is None:
            raise NotFound(f"no TrainJob {scheduler_id}")
        if annotations_of(tj).get(n.RANK_RESTART) == "allowed":
            src = annotations_of(tj).get(n.RUNTIME_SOURCE, "its runtime")
            return f"{src} can restart a rank inside an execution (accepted under allowRankRestart)"
        return None

    # ---- output ------------------------------------------------------------------------------------------

    def stdout(
        self, scheduler_id: str, execution: int | None = None, follow: bool = False, offset: int = 0
    ) -> Iterator[bytes]:
        """Rank 0's container log of the current execution. The pod log API reads from the start (it has no
        byte offset), so ``offset`` bytes are read and dropped here."""
        if not self.preflight.can_log:
            raise Unsupported("the adapter may not read pods/log on this cluster (OutputRead is no)")
        got = self.cache.reading(scheduler_id)
        if got is None:
            raise NotFound(f"no TrainJob {scheduler_id}")
        o, r, _ = got
        if execution is not None and execution != r.key.a + r.key.j:
            raise Unsupported("only the current execution's log exists on Kubernetes (logs go with the pods)")
        live = sorted(of_key(o.pods, r.key), key=rank)
        rank0 = [p for p in live if rank(p)[:2] == (0, 0)]
        if not rank0:
            raise NotFound(f"TrainJob {scheduler_id}: rank 0 of the current execution has no pod (its log is gone)")
        pod = str(meta(rank0[0]).get("name"))
        if not pod_started(rank0[0]) and not follow:
            return iter(())  # its container has not started: nothing written yet (the kubelet would answer 400)
        return _skip(self._started(scheduler_id, pod, follow), offset)

    def _started(self, scheduler_id: str, pod: str, follow: bool) -> Iterator[bytes]:
        """Rank 0's log once its container has started. An execution counts as started when any rank's container
        has, and on real nodes the kubelets start them seconds apart: a follow opened meanwhile would get the
        kubelet's 400 (``is waiting to start: ContainerCreating``) and never show rank 0's output. So the follow
        waits, reading the cache, until the container has started, the pod has gone (NotFound: its log went with
        it) or the CallBound has passed (then the read says why)."""
        deadline = time.monotonic() + self.settings.call_bound
        while time.monotonic() < deadline:
            got = self.cache.reading(scheduler_id)
            now = [p for p in (got[0].pods if got is not None else []) if meta(p).get("name") == pod]
            if not now:
                raise NotFound(f"TrainJob {scheduler_id}: rank 0's pod {pod} went before its container started")
            if pod_started(now[0]) or (now[0].get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                break
            time.sleep(0.2)
        yield from self._lines(pod, follow)

    def _lines(self, pod: str, follow: bool) -> Iterator[bytes]:
        client = k.make_client(self.settings, stream=True) if follow else None
        kube = k.Kube(self.settings, client) if client is not None else self.kube
        try:
            for line in kube.log(pod, container=n.TRAINER_CONTAINER, follow=follow):
                yield line.encode() if isinstance(line, str) else bytes(line)
        finally:
            if client is not None:
                client.close()

    def execution_output(self, scheduler_id: str, identity: str) -> Iterator[bytes]:
        """Rank 0's log of execution ``identity`` (its attempt, A and J): as the keeper followed it to its end
        (an execution its deadline ended, :mod:`~dispatch.kubeflow.keeper`), else from its pod while the pod is
        there, else what the keeper read before the pod went. NotFound once the pod is gone otherwise: its log
        went with it."""
        if not self.preflight.can_log:
            raise Unsupported("the adapter may not read pods/log on this cluster (OutputRead is no)")
        parts = identity.rsplit(".", 3)[-3:]
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise NotFound(f"{identity!r} is not an execution identity of the Kubeflow adapter")
        key = ExecKey(int(parts[0]), int(parts[1]), int(parts[2]))
        followed = self._followed(scheduler_id, key)
        if followed is not None and followed.done:
            return iter([followed.data])
        got = self.cache.reading(scheduler_id)
        o = got[0] if got is not None else None
        rank0 = [] if o is None else [p for p in sorted(of_key(o.pods, key), key=rank) if rank(p)[:2] == (0, 0)]
        if rank0:
            return self._pod_or_followed(str(meta(rank0[0]).get("name")), scheduler_id, key)
        if followed is not None:
            return iter([followed.data])
        if o is None:
            raise NotFound(f"no TrainJob {scheduler_id}")
        raise NotFound(f"TrainJob {scheduler_id}: rank 0 of execution {identity} has no pod (its log is gone)")

    def _followed(self, scheduler_id: str, key: ExecKey) -> Followed | None:
        """The keeper's log of that execution, its follow waited for a moment (None: never followed)."""
        if self.keeper is None:
            return None
        wait = min(KEPT_WAIT, self.settings.call_bound / 3)
        return self.keeper.kept((scheduler_id, (key.attempt, key.a, key.j)), wait)

    def _pod_or_followed(self, pod: str, scheduler_id: str, key: ExecKey) -> Iterator[bytes]:
        """The pod's log; when the pod went before the read reached it (the cache still listed it), what the
        keeper read of it."""
        lines = self._lines(pod, False)
        try:
            first = next(lines)
        except StopIteration:
            return
        except NotFound:
            followed = self._followed(scheduler_id, key)
            if followed is None:
                raise
            yield followed.data
            return
        yield first
        yield from lines

    # ---- keeping the logs a deadline will end (keeper.py) -------------------------------------------------

    def keep_output(self) -> None:
        """OutputKeeper: from now on, follow rank 0's log of each execution of a TrainJob with
        ``activeDeadlineSeconds`` from the moment its container runs, so that :meth:`execution_output` serves it
        after the deadline deleted its pods (:mod:`dispatch.kubeflow.keeper`). Idempotent; nothing on a
        backend that does not watch or may not read logs."""
        with self._lock:
            if self.keeper is not None or not self.informers or not self.preflight.can_log or self._closed:
                return
            self.keeper = LogKeeper(lambda pod: self._lines(pod, True), self._pod_state)
        threading.Thread(target=self._keep_loop, name="dispatch-kubeflow-keep", daemon=True).start()

    def _keep_loop(self) -> None:
        keeper = self.keeper
        assert keeper is not None
        with self.cache.lock:
            cursor = self.cache.seq
            names = list(self.cache.trainjobs)
        while not self._closed:
            for name in names:
                self._keep(keeper, name)
            self.cache.wait_change(cursor, 1.0)
            cursor, names, reset = self.cache.changes_since(cursor)
            if reset:
                with self.cache.lock:
                    names = list(self.cache.trainjobs)

    def _keep(self, keeper: LogKeeper, name: str) -> None:
        """Follow rank 0 of TrainJob ``name``'s current execution when it has a deadline and its container ran."""
        with self.cache.lock:
            o = self.cache.objects(name)
            if o is None or not isinstance((o.trainjob.get("spec") or {}).get("activeDeadlineSeconds"), int):
                return
            key = current_key(o)
            rank0 = [p for p in sorted(of_key(o.pods, key), key=rank) if rank(p)[:2] == (0, 0) and pod_started(p)]
        if rank0:
            m = meta(rank0[0])
            keeper.follow((name, (key.attempt, key.a, key.j)), str(m.get("name")), str(m.get("uid")))

    def _pod_state(self, pod: str, uid: str) -> PodState:
        with self.cache.lock:
            p = self.cache.pods.get(pod)
        if p is None or str(meta(p).get("uid")) != uid:
            return PodState.GONE
        statuses = (p.get("status") or {}).get("containerStatuses") or []
        ended = any("terminated" in (cs.get("state") or {}) for cs in statuses if cs.get("name") == n.TRAINER_CONTAINER)
        return PodState.ENDING if ended or meta(p).get("deletionTimestamp") else PodState.RUNNING

    def stderr(
        self, scheduler_id: str, execution: int | None = None, follow: bool = False, offset: int = 0
    ) -> Iterator[bytes]:
        raise Unsupported("Kubernetes keeps one log per container: stdout holds it, stderr is not separate")

    # ---- life --------------------------------------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.keeper is not None:
            self.keeper.close()
        for inf in self.informers:
            inf.stop()
        # a thread in the middle of a list request ends when the request does: at most one call's bound
        deadline = time.monotonic() + self.settings.call_bound
        for inf in self.informers:
            inf.join(max(0.0, deadline - time.monotonic()))
        self.kube.close()

    def __repr__(self) -> str:
        mode = "observe-only" if self.observe_only else "read-only" if self._read_only else "writable"
        return f"KubeflowBackend(namespace={self.settings.namespace!r}, mode={self.settings.mode.value}, {mode})"


def _skip(chunks: Iterator[bytes], n: int) -> Iterator[bytes]:
    """``chunks`` less their first ``n`` bytes."""
    for chunk in chunks:
        if n >= len(chunk):
            n -= len(chunk)
            continue
        yield chunk[n:] if n > 0 else chunk
        n = 0


class KueueBackend(KubeflowBackend):
    """The Kubeflow adapter in Kueue mode: KubeflowBackend plus Readmitter. :func:`dispatch.kubeflow.open_backend`
    hands it out for ``mode: kueue``; plain mode has no readmission gate (a failed JobSet ends the TrainJob, and
    nothing evicts one to wait for dispatch), so its backend does not implement Readmitter."""

    def readmit(self, scheduler_id: str) -> None:
        """Authorise the next admission of a Workload evicted (preempted, ...) while it waits at the readmission
        gate: ``dispatch.io/admit`` = 1 + the Workload's evictions, which dispatch-admission compares with the
        attempt it would admit. Kueue then admits the same Workload again and the TrainJob is unsuspended: its
        pods are created anew, a new execution (the next attempt) of the same submission.

        Idempotent per eviction (the annotation only grows to 1 + evictions, never past it). Rejected when the
        TrainJob was stopped or has ended for good (Complete, Failed): nothing waits to be readmitted."""
        self._write("readmit")
        tj = self._fresh(scheduler_id)
        if n.STOP in annotations_of(tj):
            raise Rejected(f"TrainJob {scheduler_id} was stopped; nothing to readmit")
        complete = condition(tj, "Complete")
        if (complete is not None and complete.get("status") == "True") or _failed(tj):
            raise Rejected(f"TrainJob {scheduler_id} has ended; only a Workload Kueue evicted waits for readmission")
        self._patch(scheduler_id, {"metadata": {"annotations": {n.ADMIT: self._authorise_kueue(tj)}}})


def _age(age: float | None) -> float:
    return float("inf") if age is None else age


def _failed(tj: JSON) -> bool:
    c = condition(tj, "Failed")
    return c is not None and c.get("status") == "True"


def k_exists() -> Any:
    from lightkube.operators import exists

    return exists()
