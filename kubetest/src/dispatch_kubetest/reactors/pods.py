"""Pods and nodes: a tiny scheduler, the kubelet's status writes, taint eviction and pod GC.

What runs on its own (each reconcile):
- scheduling: a Pending pod without ``spec.nodeName`` is bound to a Ready node without
  NoSchedule/NoExecute taints that the pod's ``nodeSelector`` and required node affinity admit
  (:func:`affinity_allows`), the node with the fewest bound pods first (ties by name). No resources,
  preferred affinity or tolerations are considered.
  Unschedulable pods get ``PodScheduled=False`` reason ``Unschedulable``;
- taint eviction: a pod bound to a node carrying a NoExecute taint (``node.kubernetes.io/unreachable``
  or ``not-ready``, set by ``Cluster.set_node_ready``) is deleted once ``tolerationSeconds`` (default
  300, what DefaultTolerationSeconds gives every pod) have passed on the injected clock since the
  taint's ``timeAdded``, after getting ``DisruptionTarget=True`` reason ``DeletionByTaintManager``;
- pod GC: a pod bound to a node that no longer exists is marked ``phase: Failed`` with
  ``DisruptionTarget=True`` reason ``DeletionByPodGC`` and deleted (immediately; the real 40 s
  quarantine is not modelled);
- graceful termination: a Terminating pod (deleted with a grace period, store.py) keeps running until
  the kubelet ends it: once the injected clock reaches its ``deletionTimestamp`` (the grace has run out:
  running containers are killed, ``terminated`` exit 137 reason ``Error``, and a pod not yet terminal
  becomes ``Failed``), or at once when no container of it runs any more (all exited, or none started),
  the kubelet deletes it with grace 0 and it goes (a DELETED event). Not modelled: SIGTERM (a test ends
  containers early with ``fail_pod``/``succeed_pod``), and a kubelet that cannot end its pods (an
  unreachable node's pods go at their deadline too, where a real cluster leaves them Terminating).

What the test drives (the kubelet): ``PodReactor.run/terminate/wait/disrupt`` via the control
surface; bound pods show ``waiting: ContainerCreating`` until then (or start at once when
``auto_run`` is set).
A container failure under ``restartPolicy`` OnFailure/Always restarts the container in place
(``restartCount`` + 1, ``lastState.terminated``), as the kubelet does; under Never the pod fails.
"""

from __future__ import annotations

import copy
from typing import Any

from ..clock import parse_time
from ..errors import StatusError
from ..resources import NODE, POD
from ..store import grace_deadline
from .base import Reactor, find_condition, set_condition

JSON = dict[str, Any]

UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"
DEFAULT_TOLERATION_SECONDS = 300


def node_is_ready(node: JSON) -> bool:
    cond = find_condition(node, "Ready")
    return cond is not None and cond.get("status") == "True"


def _blocking_taints(node: JSON) -> list[JSON]:
    return [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]


def _terminal(pod: JSON) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


class PodReactor(Reactor):
    manager = "kubelet"
    auto_run = False
    """When True, a pod is started (Running, Ready) as soon as it is bound to a node."""

    def reconcile(self) -> None:
        nodes, _ = self.store.list(NODE)
        by_name = {n["metadata"]["name"]: n for n in nodes}
        pods, _ = self.store.list(POD)
        self._end_terminating(pods)
        self._garbage_collect(pods, by_name)
        self._evict_tainted(pods, by_name)
        self._schedule(pods, nodes)

    # ---- scheduler ------------------------------------------------------------------------
    def _schedule(self, pods: list[JSON], nodes: list[JSON]) -> None:
        load: dict[str, int] = {n["metadata"]["name"]: 0 for n in nodes}
        for pod in pods:
            node_name = (pod.get("spec") or {}).get("nodeName")
            if node_name in load and not _terminal(pod):
                load[node_name] += 1
        for pod in pods:
            spec = pod.get("spec") or {}
            if spec.get("nodeName") or pod["metadata"].get("deletionTimestamp") or _terminal(pod):
                continue
            if spec.get("schedulingGates"):
                continue
            selector = spec.get("nodeSelector") or {}
            fits = [
                n
                for n in nodes
                if node_is_ready(n)
                and not _blocking_taints(n)
                and not (n.get("spec") or {}).get("unschedulable")
                and all((n["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())
                and affinity_allows(spec, n)
            ]
            if not fits:
                status = copy.deepcopy(pod.get("status") or {})
                status.setdefault("phase", "Pending")
                set_condition(
                    status,
                    "PodScheduled",
                    "False",
                    "Unschedulable",
                    f"0/{len(nodes)} nodes are available: no node matches the pod's requirements.",
                    self.now(),
                )
                self.write_status(POD, pod, status)
                continue
            chosen = min(fits, key=lambda n: (load[n["metadata"]["name"]], n["metadata"]["name"]))
            name = chosen["metadata"]["name"]
            load[name] += 1

            def bind(cur: JSON, node: str = name) -> None:
                cur["spec"]["nodeName"] = node

            bound = self.edit(POD, pod, bind)
            if bound is None:
                continue
            status = copy.deepcopy(bound.get("status") or {})
            status.setdefault("phase", "Pending")
            status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            set_condition(status, "PodScheduled", "True", "", "", self.now())
            status["hostIP"] = _node_ip(chosen)
            status["containerStatuses"] = [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": "",
                    "ready": False,
                    "started": False,
                    "restartCount": 0,
                    "state": {"waiting": {"reason": "ContainerCreating"}},
                }
                for c in bound["spec"].get("containers") or []
            ]
            bound = self.write_status(POD, bound, status)
            if self.auto_run:
                self.run(bound)

    # ---- graceful termination -------------------------------------------------------------
    def _end_terminating(self, pods: list[JSON]) -> None:
        """End each Terminating pod whose grace has run out or whose containers no longer run (module docstring)."""
        now = self.store.clock.now()
        for pod in pods:
            deadline = grace_deadline(pod)
            if deadline is None:
                continue
            if now >= deadline:
                if not _terminal(pod):
                    status = copy.deepcopy(pod.get("status") or {})
                    _terminate_all(status, pod, 137, "Error", self.now(), only_running=True)
                    status["phase"] = "Failed"
                    for type_ in ("Ready", "ContainersReady"):
                        set_condition(status, type_, "False", "PodFailed", "", self.now())
                    pod = self.write_status(POD, pod, status)
            elif not _terminal(pod) and _some_container_runs(pod):
                continue
            self.delete(POD, pod, grace_seconds=0)

    # ---- node lifecycle -------------------------------------------------------------------
    def _evict_tainted(self, pods: list[JSON], nodes: dict[str, JSON]) -> None:
        now = self.store.clock.now()
        for pod in pods:
            node = nodes.get((pod.get("spec") or {}).get("nodeName") or "")
            if node is None or pod["metadata"].get("deletionTimestamp") or _terminal(pod):
                continue
            for taint in (node.get("spec") or {}).get("taints") or []:
                if taint.get("effect") != "NoExecute":
                    continue
                seconds = _toleration_seconds(pod, taint.get("key", ""))
                if seconds is None:
                    continue
                added = parse_time(taint.get("timeAdded") or self.now())
                if (now - added).total_seconds() >= seconds:
                    self.disrupt(pod, "DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint")
                    break

    def _garbage_collect(self, pods: list[JSON], nodes: dict[str, JSON]) -> None:
        for pod in pods:
            node_name = (pod.get("spec") or {}).get("nodeName")
            if not node_name or node_name in nodes:
                continue
            if _terminal(pod) and pod["metadata"].get("deletionTimestamp"):
                continue
            status = copy.deepcopy(pod.get("status") or {})
            set_condition(
                status,
                "DisruptionTarget",
                "True",
                "DeletionByPodGC",
                "PodGC: node no longer exists",
                self.now(),
            )
            if not _terminal(pod):
                status["phase"] = "Failed"
                _terminate_all(status, pod, 137, "Error", self.now(), only_running=True)
            written = self.write_status(POD, pod, status)
            self.delete(POD, written)

    # ---- kubelet actions driven by tests --------------------------------------------------
    def disrupt(self, pod: JSON, reason: str, message: str, grace_seconds: int | None = None) -> None:
        """Add ``DisruptionTarget=True`` with ``reason`` and delete the pod, gracefully: it stays Terminating
        until its grace period runs out on the injected clock or its containers end."""
        status = copy.deepcopy(pod.get("status") or {})
        set_condition(status, "DisruptionTarget", "True", reason, message, self.now())
        written = self.write_status(POD, pod, status)
        self.delete(POD, written, grace_seconds)

    def wait(self, pod: JSON, reason: str, message: str, container: str | None = None) -> JSON:
        """Container(s) stuck waiting (``ErrImagePull``, ``ImagePullBackOff``,
        ``CreateContainerConfigError``...); the pod stays Pending."""
        status = copy.deepcopy(pod.get("status") or {})
        for c in pod["spec"].get("containers") or []:
            if container and c["name"] != container:
                continue
            cs = _find_status(status, c["name"])
            if cs is None:
                cs = {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": "",
                    "ready": False,
                    "started": False,
                    "restartCount": 0,
                }
                status.setdefault("containerStatuses", []).append(cs)
            cs["state"] = {"waiting": {"reason": reason, "message": message}}
        return self.write_status(POD, pod, status)

    def run(self, pod: JSON) -> JSON:
        """Containers started and Ready; phase Running. The pod must be bound to a node."""
        if not (pod.get("spec") or {}).get("nodeName"):
            raise StatusError(409, f'pod "{pod["metadata"]["name"]}" is not scheduled on a node yet', "Conflict")
        now = self.now()
        status = copy.deepcopy(pod.get("status") or {})
        status["phase"] = "Running"
        status.setdefault("startTime", now)
        status.setdefault("podIP", f"10.244.0.{1 + sum(map(ord, pod['metadata']['name'])) % 250}")
        statuses = []
        for c in pod["spec"].get("containers") or []:
            prev = _find_status(status, c["name"]) or {}
            statuses.append(
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": "",
                    "containerID": f"fake://{c['name']}",
                    "ready": True,
                    "started": True,
                    "restartCount": prev.get("restartCount", 0),
                    "state": {"running": {"startedAt": now}},
                    **({"lastState": prev["lastState"]} if prev.get("lastState") else {}),
                }
            )
        status["containerStatuses"] = statuses
        for type_ in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready", "PodScheduled"):
            set_condition(status, type_, "True", "", "", now)
        return self.write_status(POD, pod, status)

    def terminate(
        self, pod: JSON, exit_code: int, reason: str, message: str = "", container: str | None = None
    ) -> JSON:
        """Container(s) exited with ``exit_code``. Under restartPolicy Never (or exit 0 under
        OnFailure), or when the pod is Terminating, the pod becomes Succeeded/Failed; otherwise the
        container restarts in place."""
        now = self.now()
        policy = (pod.get("spec") or {}).get("restartPolicy", "Always")
        status = copy.deepcopy(pod.get("status") or {})
        names = [container] if container else [c["name"] for c in pod["spec"].get("containers") or []]
        restart = policy == "Always" or (policy == "OnFailure" and exit_code != 0)
        restart = restart and not pod["metadata"].get("deletionTimestamp")  # a Terminating pod restarts nothing
        for name in names:
            cs = _find_status(status, name)
            if cs is None:
                cs = {
                    "name": name,
                    "image": "",
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": {},
                }
                status.setdefault("containerStatuses", []).append(cs)
            terminated: JSON = {
                "exitCode": exit_code,
                "reason": reason,
                "finishedAt": now,
                "startedAt": ((cs.get("state") or {}).get("running") or {}).get("startedAt", now),
                "containerID": f"fake://{name}",
            }
            if message:
                terminated["message"] = message
            if restart:
                cs["lastState"] = {"terminated": terminated}
                cs["restartCount"] = int(cs.get("restartCount", 0)) + 1
                cs["state"] = {"running": {"startedAt": now}}
                cs["ready"] = True
            else:
                cs["state"] = {"terminated": terminated}
                cs["ready"] = False
                cs["started"] = False
        if not restart:
            all_done = all("terminated" in (cs.get("state") or {}) for cs in status.get("containerStatuses") or [])
            if all_done:
                codes = [cs["state"]["terminated"]["exitCode"] for cs in status["containerStatuses"]]
                status["phase"] = "Succeeded" if all(c == 0 for c in codes) else "Failed"
                reason_ready = "PodCompleted" if status["phase"] == "Succeeded" else "PodFailed"
                for type_ in ("Ready", "ContainersReady"):
                    set_condition(status, type_, "False", reason_ready, "", now)
        return self.write_status(POD, pod, status)


def _find_status(status: JSON, name: str) -> JSON | None:
    for cs in status.get("containerStatuses") or []:
        if cs.get("name") == name:
            found: JSON = cs  # the live dict: callers edit it in place
            return found
    return None


def _some_container_runs(pod: JSON) -> bool:
    return any("running" in (cs.get("state") or {}) for cs in (pod.get("status") or {}).get("containerStatuses") or [])


def _terminate_all(status: JSON, pod: JSON, code: int, reason: str, now: str, only_running: bool) -> None:
    for c in pod["spec"].get("containers") or []:
        cs = _find_status(status, c["name"])
        if cs is None:
            continue
        if only_running and "running" not in (cs.get("state") or {}):
            continue
        terminated: JSON = {"exitCode": code, "reason": reason, "finishedAt": now}
        started = ((cs.get("state") or {}).get("running") or {}).get("startedAt")
        if started:
            terminated["startedAt"] = started
        if cs.get("containerID"):
            terminated["containerID"] = cs["containerID"]
        cs["state"] = {"terminated": terminated}
        cs["ready"] = False


def _toleration_seconds(pod: JSON, key: str) -> float | None:
    """Seconds the pod tolerates a NoExecute taint ``key``; None = forever. Pods without an explicit
    toleration get DefaultTolerationSeconds' 300 s for not-ready/unreachable and 0 otherwise."""
    for tol in (pod.get("spec") or {}).get("tolerations") or []:
        if tol.get("effect") not in (None, "", "NoExecute"):
            continue
        if (tol.get("operator") == "Exists" and not tol.get("key")) or tol.get("key") == key:
            seconds = tol.get("tolerationSeconds")
            return None if seconds is None else float(seconds)
    if key in (UNREACHABLE, NOT_READY):
        return DEFAULT_TOLERATION_SECONDS
    return 0.0


def _node_ip(node: JSON) -> str:
    for addr in (node.get("status") or {}).get("addresses") or []:
        if addr.get("type") == "InternalIP":
            return str(addr.get("address"))
    return "192.168.0.1"


def affinity_allows(pod_spec: JSON, node: JSON) -> bool:
    """Whether the pod's required node affinity admits ``node``: one of its ``nodeSelectorTerms`` (ORed) whose
    ``matchExpressions`` (on the node's labels) and ``matchFields`` (``metadata.name`` only, as in Kubernetes) all
    hold; operators In, NotIn, Exists, DoesNotExist. No required affinity admits every node."""
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return True
    labels = node["metadata"].get("labels") or {}
    fields = {"metadata.name": node["metadata"]["name"]}

    def holds(req: JSON, values: dict[str, str]) -> bool:
        key, op, want = req.get("key"), req.get("operator"), req.get("values") or []
        if op == "In":
            return key in values and values[key] in want
        if op == "NotIn":
            return key not in values or values[key] not in want
        if op == "Exists":
            return key in values
        if op == "DoesNotExist":
            return key not in values
        return False

    return any(
        all(holds(r, labels) for r in t.get("matchExpressions") or [])
        and all(holds(r, fields) for r in t.get("matchFields") or [])
        for t in terms
    )
