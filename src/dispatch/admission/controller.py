"""The AdmissionCheck controller (``dispatch-admission``).

What it does, as the leader (a ``coordination.k8s.io`` Lease elects one replica):

1. Every AdmissionCheck whose ``spec.controllerName`` is its own gets ``Active=True`` (reason ``Active``).
2. Every Workload with quota reserved and a ``Pending`` entry for one of those checks is decided by
   :func:`decide`:

   * not owned by a TrainJob carrying ``dispatch.io/managed=true``: ``Ready`` at once (others go through);
   * dispatch-managed: admission number ``k`` = 1 + the Workload's evictions (``status.schedulingStats``).
     ``Ready`` only when the TrainJob's ``dispatch.io/admit`` >= k, it carries no dispatch hold
     (``dispatch.io/holds``) and was not stopped; the Ready entry carries ``podSetUpdates`` that put
     ``dispatch.io/attempt: k`` on every pod set's pods (the attempt the job sees as ``DISPATCH_ATTEMPT``).
     Otherwise the entry stays ``Pending`` with a message saying what it waits for.

   Kueue resets every check to Pending on each eviction, so each readmission passes here again.
3. It writes only its own entry of ``status.admissionChecks``, by server-side apply on the status
   subresource under its own field manager (``dispatch-admission``).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from lightkube import ALL_NS, ApiError, Client, KubeConfig
from lightkube.types import PatchType

from dispatch.kubeflow import client as k
from dispatch.kubeflow import names as n
from dispatch.kubeflow.mapping import annotations_of, condition, evictions, labels, meta
from dispatch.kubeflow.streams import Liveness, watch_transport
from dispatch.kubeflow.watch import Freshness, Informer

JSON = dict[str, Any]
FIELD_MANAGER = "dispatch-admission"
log = logging.getLogger("dispatch.admission")


PERMISSIONS: tuple[tuple[str, str, str, bool], ...] = (
    # (verb, group, resource[/subresource], in its own namespace only): everything the controller calls;
    # Workloads and TrainJobs are watched in every namespace, the Lease lives in the controller's
    *((v, "kueue.x-k8s.io", "admissionchecks", False) for v in ("list", "watch")),
    ("patch", "kueue.x-k8s.io", "admissionchecks/status", False),
    *((v, "kueue.x-k8s.io", "workloads", False) for v in ("list", "watch")),
    ("patch", "kueue.x-k8s.io", "workloads/status", False),
    *((v, "trainer.kubeflow.org", "trainjobs", False) for v in ("list", "watch")),
    *((v, "coordination.k8s.io", "leases", True) for v in ("get", "create", "update")),
)
"""The controller's RBAC needs (deploy/kubeflow/admission-rbac.yaml grants exactly these)."""


@dataclass(frozen=True)
class ControllerSettings:
    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool = False
    token: str | None = None
    controller_name: str = "dispatch.io/admission"
    lease_name: str = "dispatch-admission"
    lease_namespace: str = "kube-system"
    identity: str = "dispatch-admission"
    lease_duration: float = 15.0
    renew_every: float = 5.0
    request_timeout: float = 30.0

    def __repr__(self) -> str:
        return f"ControllerSettings(controller_name={self.controller_name!r}, identity={self.identity!r})"


@dataclass(frozen=True)
class Decision:
    state: str
    message: str
    pod_set_updates: tuple[JSON, ...] = ()


def decide(workload: JSON, owner: JSON | None, owner_known: bool) -> Decision:
    """The state of our check for ``workload`` (owner: its TrainJob if any; owner_known: the owner was looked
    for in a complete view)."""
    refs = [r for r in meta(workload).get("ownerReferences") or [] if r.get("kind") == "TrainJob"]
    if not refs:
        return Decision("Ready", "not a dispatch job")
    if owner is None:
        if owner_known:
            return Decision("Ready", "not a dispatch job (owner not found)")
        return Decision("Pending", "dispatch: waiting to see the owning TrainJob")
    if labels(owner).get(n.MANAGED) != "true":
        return Decision("Ready", "not a dispatch job")
    ann = annotations_of(owner)
    attempt = evictions(workload) + 1
    if n.STOP in ann:
        return Decision("Pending", "dispatch: the job was stopped")
    holds = n.split_list(ann.get(n.HOLDS))
    if holds:
        return Decision("Pending", f"dispatch: held ({', '.join(holds)})")
    raw = ann.get(n.ADMIT, "0")
    authorised = int(raw) if raw.isdigit() else 0
    if authorised < attempt:
        return Decision("Pending", f"dispatch: attempt {attempt} not authorised (authorised up to {authorised})")
    updates = tuple(
        {"name": ps.get("name"), "annotations": {n.ATTEMPT: str(attempt)}}
        for ps in (workload.get("spec") or {}).get("podSets") or []
    )
    return Decision("Ready", f"dispatch: attempt {attempt} admitted", updates)


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_micro(text: str | None) -> float:
    if not text:
        return 0.0
    for fmt in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return dt.datetime.strptime(text, fmt).replace(tzinfo=dt.UTC).timestamp()
        except ValueError:
            continue
    return 0.0


class Controller:
    """Runs the controller on its own threads: ``start()``, ``stop()``; ``run()`` blocks."""

    def __init__(self, settings: ControllerSettings) -> None:
        self.settings = settings
        self.checks: dict[str, JSON] = {}
        self.workloads: dict[str, JSON] = {}
        self.trainjobs: dict[str, JSON] = {}
        self._lock = threading.Condition()
        self._dirty = True
        self._stop = threading.Event()
        self.leader = False
        self.informers: list[Informer] = []
        self.writes = 0
        self._thread = threading.Thread(target=self.run, name="dispatch-admission", daemon=True)
        self.client = self._client(stream=False)

    def _client(self, *, stream: bool, live: Liveness | None = None) -> Client:
        """A client; with ``live``, a watching one (its watch streams report to ``live``)."""
        import httpx2

        s = self.settings
        if s.in_cluster:
            conf = KubeConfig.from_service_account().get()
        else:
            conf = (KubeConfig.from_file(s.kubeconfig) if s.kubeconfig else KubeConfig.from_env()).get(s.context)
        assert conf is not None
        if s.token:
            from lightkube.config.models import User

            conf = conf._replace(user=User(token=s.token))
        timeout = httpx2.Timeout(s.request_timeout, read=None) if stream else httpx2.Timeout(s.request_timeout)
        transport = watch_transport(conf, live) if live is not None else None
        return Client(conf, timeout=timeout, field_manager=FIELD_MANAGER, trust_env=False, transport=transport)

    # ---- informers ----------------------------------------------------------------------------------------

    def _key(self, obj: JSON) -> str:
        return f"{meta(obj).get('namespace', '')}/{meta(obj).get('name')}"

    def _sink(self, kind: str, type_: str, obj: JSON) -> None:
        table = {"admissionchecks": self.checks, "workloads": self.workloads, "trainjobs": self.trainjobs}[kind]
        with self._lock:
            if type_ == "DELETED":
                table.pop(self._key(obj), None)
            else:
                table[self._key(obj)] = obj
            self._dirty = True
            self._lock.notify_all()

    def _reset(self, kind: str, items: list[JSON]) -> None:
        table = {"admissionchecks": self.checks, "workloads": self.workloads, "trainjobs": self.trainjobs}[kind]
        with self._lock:
            table.clear()
            for obj in items:
                table[self._key(obj)] = obj
            self._dirty = True
            self._lock.notify_all()

    def _start_informers(self) -> None:
        # cluster-wide: the namespaced kinds are listed and watched across all namespaces (ALL_NS; without it the
        # client would use its kubeconfig context's or service account's namespace and see no other)
        kinds = (("admissionchecks", k.AdmissionCheck, None), ("trainjobs", k.TrainJob, ALL_NS))
        for kind, res, namespace in (*kinds, ("workloads", k.Workload, ALL_NS)):
            inf = Informer(
                kind,
                lambda live: self._client(stream=False, live=live),
                res,
                self._sink,
                self._reset,
                namespace=namespace,
                freshness=Freshness.of(self.settings.request_timeout, self.settings.request_timeout + 5.0),
            )
            self.informers.append(inf)
            inf.start()

    # ---- leader election ----------------------------------------------------------------------------------

    def _lead(self) -> bool:
        s = self.settings
        now = time.time()
        body: JSON = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": s.lease_name, "namespace": s.lease_namespace},
            "spec": {
                "holderIdentity": s.identity,
                "leaseDurationSeconds": int(s.lease_duration),
                "renewTime": _micro(now),
            },
        }
        try:
            try:
                cur = k.as_dict(self.client.get(k.Lease, s.lease_name, namespace=s.lease_namespace))
            except ApiError as exc:
                if exc.status.code != 404:
                    raise
                body["spec"]["acquireTime"] = _micro(now)
                self.client.create(k.build(k.Lease, body), namespace=s.lease_namespace)
                return True
            spec = cur.get("spec") or {}
            holder = spec.get("holderIdentity")
            expires = _parse_micro(spec.get("renewTime")) + float(spec.get("leaseDurationSeconds") or s.lease_duration)
            if holder != s.identity and now < expires:
                return False
            body["metadata"]["resourceVersion"] = meta(cur).get("resourceVersion")
            body["spec"]["acquireTime"] = spec.get("acquireTime") if holder == s.identity else _micro(now)
            self.client.replace(k.build(k.Lease, body))
            return True
        except ApiError as exc:
            log.warning("lease: %s", exc.status.message)
            return False
        except Exception as exc:
            log.warning("lease: %s", type(exc).__name__)
            return False

    # ---- reconcile ----------------------------------------------------------------------------------------

    def reconcile(self) -> None:
        with self._lock:
            checks = list(self.checks.values())
            workloads = list(self.workloads.values())
            trainjobs = dict(self.trainjobs)
            synced = all(i.synced.is_set() for i in self.informers)
        ours = {
            str(meta(ac).get("name"))
            for ac in checks
            if (ac.get("spec") or {}).get("controllerName") == self.settings.controller_name
        }
        for ac in checks:
            if str(meta(ac).get("name")) in ours:
                active = condition(ac, "Active")
                if active is None or active.get("status") != "True":
                    self._activate(ac)
        if not synced:
            return
        for wl in workloads:
            status = wl.get("status") or {}
            if status.get("admission") is None:
                continue
            for entry in status.get("admissionChecks") or []:
                if entry.get("name") not in ours:
                    continue
                if entry.get("state") not in ("Pending", None):
                    continue
                ns = meta(wl).get("namespace", "")
                refs = [r for r in meta(wl).get("ownerReferences") or [] if r.get("kind") == "TrainJob"]
                owner = trainjobs.get(f"{ns}/{refs[0].get('name')}") if refs else None
                d = decide(wl, owner, owner_known=True)
                if d.state == entry.get("state") and d.message == entry.get("message"):
                    continue
                self._write(wl, str(entry.get("name")), d)

    def _activate(self, ac: JSON) -> None:
        patch = {
            "status": {
                "conditions": [
                    {
                        "type": "Active",
                        "status": "True",
                        "reason": "Active",
                        "message": "The admission check is active",
                        "lastTransitionTime": _now(),
                    }
                ]
            }
        }
        try:
            self.client.patch(k.AdmissionCheck.Status, meta(ac)["name"], patch, patch_type=PatchType.MERGE)
            self.writes += 1
        except ApiError as exc:
            log.warning("activating %s: %s", meta(ac).get("name"), exc.status.message)

    def _write(self, wl: JSON, check: str, d: Decision) -> None:
        entry: JSON = {"name": check, "state": d.state, "message": d.message, "lastTransitionTime": _now()}
        if d.pod_set_updates:
            entry["podSetUpdates"] = list(d.pod_set_updates)
        body = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": meta(wl)["name"], "namespace": meta(wl)["namespace"]},
            "status": {"admissionChecks": [entry]},
        }
        try:
            self.client.apply(
                k.build(k.Workload.Status, body),
                name=meta(wl)["name"],
                namespace=meta(wl)["namespace"],
                field_manager=FIELD_MANAGER,
                force=True,
            )
            self.writes += 1
        except ApiError as exc:
            log.warning("workload %s: %s", meta(wl).get("name"), exc.status.message)

    # ---- running ------------------------------------------------------------------------------------------

    def run(self) -> None:
        """Elect, watch, reconcile until :meth:`stop`."""
        next_renew = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_renew:
                was = self.leader
                self.leader = self._lead()
                next_renew = now + self.settings.renew_every
                if self.leader and not was:
                    log.info("leading as %s", self.settings.identity)
                    if not self.informers:
                        self._start_informers()
                    with self._lock:
                        self._dirty = True
                if was and not self.leader:
                    log.warning("lost the lease")
            if self.leader:
                with self._lock:
                    self._lock.wait_for(
                        lambda: self._dirty or self._stop.is_set(), timeout=max(0.0, next_renew - time.monotonic())
                    )
                    dirty, self._dirty = self._dirty, False
                if dirty and not self._stop.is_set():
                    try:
                        self.reconcile()
                    except Exception:
                        log.exception("reconcile failed")
                        with self._lock:
                            self._dirty = True
            else:
                self._stop.wait(max(0.0, next_renew - time.monotonic()))

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            self._lock.notify_all()
        for inf in self.informers:
            inf.stop()
        for inf in self.informers:
            inf.join()
        if self._thread.is_alive():
            self._thread.join(5)
        self.client.close()
