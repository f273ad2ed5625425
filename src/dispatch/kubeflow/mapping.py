"""Mapping: Kubernetes evidence (TrainJob, JobSet, Workload, Pods, Nodes) -> dispatch state and cause.

Pure functions of the objects they are given; no apiserver calls. The table (docs/adapters/kubeflow.md has
it in full, and tests/kubeflow/test_mapping.py has one test per row):

Ended executions (first match wins):

====================================================================  ===================================
evidence                                                              state / cause
====================================================================  ===================================
TrainJob annotation ``dispatch.io/stop-requested``                    cancelled / cancelled
TrainJob ``Complete=True``                                            succeeded / exit (0)
TrainJob ``Failed=True`` reason ``DeadlineExceeded``                  failed / timeout
TrainJob ``Failed=True`` reason ``TrainingRuntimeNotSupported``       failed / rejected
Workload ``Evicted=True`` ``Preempted`` (Kueue preemption)            failed / preempted
Workload ``Evicted=True`` ``Deactivated`` with a dispatch hold        cancelled / held
Workload ``Evicted=True`` ``Deactivated`` without one                 cancelled / admin-held
Workload ``Evicted=True`` ``DeactivatedDueToAdmissionCheck``          failed / rejected
Workload ``Evicted=True`` ``DeactivatedDueToMaximumExecutionTime...`` failed / timeout
Workload ``Evicted=True`` ``NodeFailures``                            failed / node-lost
Workload ``Evicted=True`` ``PodsReadyTimeout``                        failed / launch-failed
Workload ``Evicted=True`` ``ClusterQueueStopped``/``LocalQueueStopped`` cancelled / admin-held
Workload ``Evicted=True`` other (``AdmissionCheck`` retry, ...)       failed / unknown
plain: TrainJob suspended with a dispatch hold, after it ran          cancelled / held
plain: TrainJob suspended by someone else, after it ran               cancelled / admin-held
pod ``DisruptionTarget`` ``PreemptionByScheduler``                    failed / preempted
pod ``DisruptionTarget`` ``DeletionByTaintManager``/``DeletionByPodGC`` failed / node-lost
pod ``DisruptionTarget`` ``TerminationByKubelet``                     failed / node-lost
pod ``DisruptionTarget`` ``EvictionByEvictionAPI``, node cordoned      failed / cessation (a drain)
pod ``DisruptionTarget`` ``EvictionByEvictionAPI``, node in service   failed / preempted
container ``OOMKilled``, exit code not 0                              failed / out-of-memory
pod on a node NotReady/Unknown before any own exit code, or deleted   failed / node-lost
container waiting ``ErrImagePull``/``ImagePullBackOff``/``InvalidImageName``/``ErrImageNeverPull``
  (the image does not exist or cannot be named: the job's own)        failed / not-launchable
container waiting ``CreateContainerError``/``RunContainerError``/...   failed / launch-failed
  (the TrainJob not failed: ``ErrImageNeverPull``/``InvalidImageName`` alone, which no retry ends;
  real kubelets keep such a pod waiting, so nothing else ends the execution)
container exit 126 or 127 (program not found or not executable)       failed / not-launchable
container non-zero exit                                               failed / exit (code)
TrainJob ``Failed=True`` (``FailedJobs``, ``ReachedMaxRestarts``, ...) with none of the above  failed / unknown
====================================================================  ===================================

Waiting objects: stopped -> cancelled/cancelled; a foreign hold (another ``admission-gated-by`` entry, a
Workload deactivated by someone else, plain ``dispatch.io/admin-hold`` or a suspend dispatch did not make)
-> held/admin-held; a dispatch hold -> held/held; our gate closed -> pending/gated; Workload
``QuotaReserved=False`` that can never fit (:func:`quota_never_fits`: the request exceeds the ClusterQueue's and
its cohort's maximum capacity in every flavor, or no flavor matches) -> pending/unrunnable, until an administrator
changes the queue; for quota otherwise (``insufficient``, ``unavailable``) or ``Inadmissible`` ->
pending/no-capacity; a pod ``Unschedulable`` -> pending/no-capacity; otherwise pending/queued.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dispatch.kubeflow import names as n
from dispatch.outcome import Cause, Evidence, Outcome, State
from dispatch.spi import Gate

JSON = dict[str, Any]

LAUNCH_WAITING = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "ErrImageNeverPull",
    }
)
OWN_IMAGE_WAITING = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})
"""The waiting reasons of :data:`LAUNCH_WAITING` that are the job's own (its image), not the node's:
``not-launchable``, blaming no node."""


def own_launch_failure(waiting: Mapping[str, Any]) -> bool:
    """Whether a container's ``waiting`` state is the job's own launch failure (``not-launchable``, blaming no
    node): its image (:data:`OWN_IMAGE_WAITING`), or a Secret, ConfigMap or key its pods name that does not
    exist (``CreateContainerConfigError`` "... not found", "couldn't find key"): the same on every node."""
    reason, message = str(waiting.get("reason", "")), str(waiting.get("message", ""))
    if reason in OWN_IMAGE_WAITING:
        return True
    return reason == "CreateContainerConfigError" and ("not found" in message or "couldn't find key" in message)


NEVER_STARTS = frozenset({"ErrImageNeverPull", "InvalidImageName"})
"""Waiting reasons no retry ends: the image is not on the node and may not be pulled, or cannot be named. The other
reasons of :data:`LAUNCH_WAITING` (a pull the registry may yet answer, a Secret that may yet be made) can end in a
start at any time: an end read before it would be final in the records while the ranks then run unsupervised, so
those pods stay waiting, their reason shown."""


def stuck_launch(pods: Iterable[JSON]) -> tuple[Cause, str] | None:
    """The launch failure of an execution whose pod waits in :data:`NEVER_STARTS`: on real kubelets nothing else
    ends it (the pod waits, so the Job, the JobSet and the TrainJob never fail and Kueue keeps the quota), and
    waiting on it would wait for ever. The job's own (``not-launchable``, blaming no node); the detail carries
    the kubelet's reason and words."""
    for pod in pods:
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            reason = str(waiting.get("reason", ""))
            if reason in NEVER_STARTS:
                words = str(waiting.get("message", "")).strip()
                return Cause.NOT_LAUNCHABLE, f"{reason} ({meta(pod).get('name', '')}){': ' + words if words else ''}"
    return None


QUOTA_WORDS = ("insufficient", "maximum capacity", "unavailable")
NEVER_FITS_REASONS = frozenset({"ExceedsMaxQuota", "NoMatchingFlavor"})
"""Kueue's ``QuotaReserved=False`` reasons (feature gate ``UnadmittedWorkloadsObservability``) for a request no
flavor can ever hold: Kueue takes the least severe reason among a resource group's alternative flavors, so
these say every alternative fails for good."""
MAX_CAPACITY = "> maximum capacity"
WAITING_FOR_QUOTA = "insufficient unused quota"
LOST_TAINTS = frozenset({"node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"})
CEASING_TAINT = "node.kubernetes.io/out-of-service"


def parse_time(text: object) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def meta(obj: JSON) -> JSON:
    m: JSON = obj.get("metadata") or {}
    return m


def labels(obj: JSON) -> dict[str, str]:
    return dict(meta(obj).get("labels") or {})


def annotations_of(obj: JSON) -> dict[str, str]:
    return dict(meta(obj).get("annotations") or {})


def condition(obj: JSON | None, type_: str) -> JSON | None:
    if obj is None:
        return None
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            out: JSON = c
            return out
    return None


def is_true(obj: JSON | None, type_: str) -> bool:
    c = condition(obj, type_)
    return c is not None and c.get("status") == "True"


@dataclass(frozen=True, order=True)
class ExecKey:
    """An execution's place: the dispatch attempt, the JobSet restarts A and the per-Job restarts J."""

    attempt: int
    a: int
    j: int


@dataclass(frozen=True)
class Objects:
    """Everything known about one TrainJob. ``gone_pods`` are pods seen deleted (their last state)."""

    trainjob: JSON
    jobset: JSON | None = None
    workload: JSON | None = None
    pods: Sequence[JSON] = ()
    gone_pods: Sequence[JSON] = ()
    nodes: Mapping[str, JSON] = field(default_factory=dict)
    nodes_known: bool = False
    kueue: bool = False
    gate_name: str = "dispatch.io/start"


@dataclass(frozen=True)
class Reading:
    """What the objects say now. ``execution`` is the current execution's outcome (running or ended), None
    when it has not started; ``outcome`` is the object's."""

    gate: Gate
    holds: tuple[str, ...]
    foreign_holds: tuple[str, ...]
    marker: str | None
    key: ExecKey
    started_at: float | None
    ended_at: float | None
    nodes: tuple[str, ...]
    execution: Outcome | None
    waiting: Outcome | None
    awaiting_authorisation: bool


# ---- small readers -------------------------------------------------------------------------------------


def evictions(workload: JSON | None) -> int:
    stats = ((workload or {}).get("status") or {}).get("schedulingStats") or {}
    return sum(int(e.get("count", 0)) for e in stats.get("evictions") or [])


def admitted(workload: JSON | None) -> bool:
    """Admitted now (an eviction in progress shows ``Evicted=True`` while ``Admitted`` is still True)."""
    return is_true(workload, "Admitted") and not is_true(workload, "Evicted")


def holds_of(trainjob: JSON) -> tuple[str, ...]:
    return tuple(n.split_list(annotations_of(trainjob).get(n.HOLDS)))


def pod_key(pod: JSON) -> tuple[int | None, int, int]:
    lab, ann = labels(pod), annotations_of(pod)
    attempt = ann.get(n.ATTEMPT)
    a = lab.get(n.RESTART_ATTEMPT) or ann.get(n.RESTART_ATTEMPT) or "0"
    j = lab.get(n.JOB_RESTART_ATTEMPT) or ann.get(n.JOB_RESTART_ATTEMPT) or "0"
    return (int(attempt) if attempt and attempt.isdigit() else None, int(a), int(j))


def pod_started(pod: JSON) -> bool:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        state = cs.get("state") or {}
        if "running" in state:
            return True
        term = state.get("terminated")
        if term is not None and term.get("startedAt"):
            return True
        if cs.get("lastState", {}).get("terminated"):
            return True
    return False


def pod_running(pod: JSON) -> bool:
    if meta(pod).get("deletionTimestamp"):
        return False
    if (pod.get("status") or {}).get("phase") != "Running":
        return False
    return any("running" in (cs.get("state") or {}) for cs in (pod.get("status") or {}).get("containerStatuses") or [])


def pod_start_time(pod: JSON) -> float | None:
    times = []
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        state = cs.get("state") or {}
        for k in ("running", "terminated"):
            t = parse_time((state.get(k) or {}).get("startedAt"))
            if t is not None:
                times.append(t)
    if not times:
        t = parse_time((pod.get("status") or {}).get("startTime"))
        return t
    return min(times)


def pod_end_time(pod: JSON) -> float | None:
    times = []
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        t = parse_time(((cs.get("state") or {}).get("terminated") or {}).get("finishedAt"))
        if t is not None:
            times.append(t)
    return max(times) if times else None


def rank(pod: JSON) -> tuple[int, int, str]:
    lab = labels(pod)
    return (int(lab.get(n.JOB_INDEX, 0) or 0), int(lab.get(n.COMPLETION_INDEX, 0) or 0), str(meta(pod).get("name")))


def node_lost(node: JSON | None, known: bool) -> str | None:
    """Why a node counts as lost (deleted, Ready False/Unknown, unreachable/not-ready taint), or None."""
    if node is None:
        return "the node is gone" if known else None
    ready = condition(node, "Ready")
    if ready is not None and ready.get("status") != "True":
        return f"node Ready={ready.get('status')} ({ready.get('reason', '')})"
    for t in (node.get("spec") or {}).get("taints") or []:
        if t.get("key") in LOST_TAINTS:
            return f"node tainted {t.get('key')}"
    return None


def lost_since(node: JSON | None) -> float | None:
    """When the node was first seen lost (its Ready condition's or lost taint's time), None when unknown (a
    deleted node, a condition without a time) or when it is not lost."""
    if node is None:
        return None
    times = []
    ready = condition(node, "Ready")
    if ready is not None and ready.get("status") != "True":
        times.append(parse_time(ready.get("lastTransitionTime")))
    for t in (node.get("spec") or {}).get("taints") or []:
        if t.get("key") in LOST_TAINTS:
            times.append(parse_time(t.get("timeAdded")))
    known = [t for t in times if t is not None]
    return min(known) if known else None


def first_own_failure(pods: Iterable[JSON]) -> float | None:
    """When the first container of ``pods`` ended with a non-zero code of its own (not SIGTERM or SIGKILL, which
    stopping a pod sends): the kubelet that reported it was alive then."""
    times = []
    for pod in pods:
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            term = (cs.get("state") or {}).get("terminated") or {}
            code = term.get("exitCode")
            if isinstance(code, int) and code != 0 and code not in KILLED_CODES:
                t = parse_time(term.get("finishedAt"))
                if t is not None:
                    times.append(t)
    return min(times) if times else None


def node_ceasing(node: JSON | None) -> str | None:
    """Why a node is being taken out of service on purpose (cordoned, out-of-service taint), or None."""
    if node is None:
        return None
    spec = node.get("spec") or {}
    for t in spec.get("taints") or []:
        if t.get("key") == CEASING_TAINT:
            return "node tainted out-of-service"
    if spec.get("unschedulable"):
        return "node cordoned (drain or maintenance)"
    return None


# ---- causes ---------------------------------------------------------------------------------------------


KILLED_CODES = frozenset({128 + 9, 128 + 15})
"""Container exit codes of a process ended by SIGKILL or SIGTERM (what stopping a pod sends)."""


NODE_LOST_DISRUPTIONS = ("DeletionByTaintManager", "DeletionByPodGC", "TerminationByKubelet")
"""The reasons of a pod's ``DisruptionTarget`` condition that mean its node was lost (or is shutting down)."""


def lost_node_disruption(pods: Iterable[JSON]) -> str | None:
    """The first (by rank) ``DisruptionTarget`` reason among ``pods`` that means a lost node, naming the pod's
    node, or None."""
    for pod in sorted(pods, key=rank):
        dt = condition(pod, "DisruptionTarget")
        if dt is not None and dt.get("status") == "True" and dt.get("reason") in NODE_LOST_DISRUPTIONS:
            return f"{dt.get('reason')} ({(pod.get('spec') or {}).get('nodeName') or 'no node'})"
    return None


def pod_cause(
    pods: Iterable[JSON], nodes: Mapping[str, JSON], nodes_known: bool
) -> tuple[Cause, int | None, str] | None:
    """The cause the pods of one execution show, by the table's pod rows, or None."""
    ordered = sorted(pods, key=rank)
    for pod in ordered:
        dt = condition(pod, "DisruptionTarget")
        if dt is not None and dt.get("status") == "True":
            reason = str(dt.get("reason", ""))
            if reason == "PreemptionByScheduler":
                return Cause.PREEMPTED, None, reason
            if reason in NODE_LOST_DISRUPTIONS:
                return Cause.NODE_LOST, None, reason
            if reason == "EvictionByEvictionAPI":
                # a drain cordons the node before it evicts; any other eviction (a descheduler, an operator's
                # or a disruption controller's) takes the resources back for other work
                host = str((pod.get("spec") or {}).get("nodeName") or "")
                ceasing = node_ceasing(nodes.get(host)) if host else None
                if ceasing is not None:
                    return Cause.CESSATION, None, f"{reason} ({host}: {ceasing})"
                return Cause.PREEMPTED, None, reason
    for pod in ordered:
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            for term in ((cs.get("state") or {}).get("terminated"), (cs.get("lastState") or {}).get("terminated")):
                # containerd reports OOMKilled for any OOM kill in the container's cgroup: with exit 0 only a
                # child was killed and the rank went on to succeed (seen on the real nodes)
                if term and term.get("reason") == "OOMKilled" and term.get("exitCode", 137) != 0:
                    return Cause.OUT_OF_MEMORY, int(term.get("exitCode", 137)), "OOMKilled"
    own = first_own_failure(ordered)
    for pod in ordered:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (pod.get("status") or {}).get("phase") not in ("Succeeded",):
            why = node_lost(nodes.get(node), nodes_known)
            since = lost_since(nodes.get(node))
            if own is not None and since is not None and since >= own:
                # the node was lost (a kubelet's heartbeat late, under load) only once a program had already
                # failed on its own: it does not explain the end, and a node that comes back must not turn an
                # exit code read a moment ago into node-lost
                continue
            if why is not None and (pod.get("status") or {}).get("phase") != "Running":
                return Cause.NODE_LOST, None, f"{node}: {why}"
    for pod in ordered:
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in LAUNCH_WAITING:
                own = own_launch_failure(waiting)
                return Cause.NOT_LAUNCHABLE if own else Cause.LAUNCH_FAILED, None, str(waiting.get("reason"))
    failures: list[tuple[float, bool, tuple[int, int, str], int, str]] = []
    for pod in ordered:
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            term = (cs.get("state") or {}).get("terminated") or {}
            code = term.get("exitCode")
            if isinstance(code, int) and code != 0:
                finished = parse_time(term.get("finishedAt")) or 0.0
                # finishedAt counts whole seconds: in the second a rank fails, the ranks the failure then stops
                # end by SIGTERM or SIGKILL; the program's own code is the first failure's
                killed = code in KILLED_CODES
                failures.append((finished, killed, rank(pod), code, str(term.get("reason", ""))))
    if failures:
        failures.sort()
        _, _, (_, node_rank, name), code, reason = failures[0]
        if code in (126, 127):
            return Cause.NOT_LAUNCHABLE, code, f"exit {code}: the program could not be run"
        # the kubelet's reason for any non-zero exit is "Error": the detail names whose exit it was
        return Cause.EXIT, code, f"exit {code}{f' ({reason})' if reason else ''} of node rank {node_rank} (pod {name})"
    return None


EVICTION_CAUSES: dict[str, tuple[State, Cause]] = {
    "Preempted": (State.FAILED, Cause.PREEMPTED),
    "DeactivatedDueToAdmissionCheck": (State.FAILED, Cause.REJECTED),
    "DeactivatedDueToMaximumExecutionTimeExceeded": (State.FAILED, Cause.TIMEOUT),
    "NodeFailures": (State.FAILED, Cause.NODE_LOST),
    "PodsReadyTimeout": (State.FAILED, Cause.LAUNCH_FAILED),
    "DeactivatedDueToRequeuingLimitExceeded": (State.FAILED, Cause.LAUNCH_FAILED),
    "ClusterQueueStopped": (State.CANCELLED, Cause.ADMIN_HELD),
    "LocalQueueStopped": (State.CANCELLED, Cause.ADMIN_HELD),
}


def eviction_outcome(reason: str, message: str, dispatch_held: bool, ev: Evidence) -> Outcome:
    """The outcome of an execution ended by a Kueue eviction with ``reason``."""
    if reason == "Deactivated":
        if dispatch_held:
            return Outcome(State.CANCELLED, Cause.HELD, ev, detail="Deactivated: " + message)
        return Outcome(State.CANCELLED, Cause.ADMIN_HELD, ev, detail="Deactivated by someone else: " + message)
    state, cause = EVICTION_CAUSES.get(reason, (State.FAILED, Cause.UNKNOWN))
    return Outcome(state, cause, ev, detail=f"Evicted {reason}: {message}")


def last_eviction(workload: JSON | None) -> tuple[str, str] | None:
    """The most recent eviction's reason and message, from the Workload's conditions, where they still say."""
    ev = condition(workload, "Evicted")
    if ev is None:
        return None
    if ev.get("status") == "True":
        return str(ev.get("reason", "")), str(ev.get("message", ""))
    msg = str(ev.get("message", ""))
    prev = msg.removeprefix("Previously: ")
    pre = condition(workload, "Preempted")
    if pre is not None and str(pre.get("message", "")).removeprefix("Previously: ") == prev:
        return "Preempted", prev
    if prev.startswith("The workload is deactivated"):
        return "Deactivated", prev
    return None


# ---- the reading ----------------------------------------------------------------------------------------


SETTLE = 30.0
"""Seconds after a TrainJob's ``Failed`` during which its execution reads running while pods of it have not
ended yet: the pods' own evidence (a DisruptionTarget, an OOMKilled) names the cause, and it arrives on
another watch. After this the cause is read from whatever the pods show."""


def settling(live: Sequence[JSON], failed: JSON, now: float) -> bool:
    """True while some live pod of the execution has not ended, within SETTLE of the failure, unless a pod
    already shows ``DisruptionTarget=True`` (the first rows of the cause table: the evidence is in; its pods may
    stay Terminating for their whole grace period, and their end is not waited for)."""
    since = parse_time(failed.get("lastTransitionTime"))
    if since is None or now - since >= SETTLE:
        return False
    if any(str((condition(p, "DisruptionTarget") or {}).get("status")) == "True" for p in live):
        return False

    def ending(p: JSON) -> bool:
        status = p.get("status") or {}
        if status.get("phase") in ("Succeeded", "Failed"):
            return False
        stuck = [
            cs
            for cs in status.get("containerStatuses") or []
            if ((cs.get("state") or {}).get("waiting") or {}).get("reason") in LAUNCH_WAITING
        ]
        return not stuck  # a pod that cannot start will not end by itself

    return any(ending(p) for p in live)


def jobset_going(o: Objects, pods: Sequence[JSON], now: float) -> bool:
    """The execution's JobSet is gone or being deleted, within :data:`SETTLE` of its pods' end: someone (the
    Trainer at the deadline, the TrainJob's owner) is ending it and says why on the TrainJob."""
    if o.jobset is not None and not meta(o.jobset).get("deletionTimestamp"):
        return False
    end = max([t for t in (pod_end_time(p) for p in pods) if t is not None] or [now])
    return now - end < SETTLE


def current_key(o: Objects) -> ExecKey:
    tj = o.trainjob
    a = int(((o.jobset or {}).get("status") or {}).get("restarts", 0) or 0)
    pods_a = [p for p in o.pods if pod_key(p)[1] == a]
    j = max([pod_key(p)[2] for p in pods_a] or [0])
    if o.kueue:
        from_pods = [k for k in (pod_key(p)[0] for p in pods_a) if k is not None]
        # the Workload counts the admissions: once it is admitted again after an eviction, the current attempt is
        # the new one even while the evicted attempt's pods still terminate (they would read it as running)
        from_workload = evictions(o.workload) + (1 if admitted(o.workload) else 0)
        attempt = max([*from_pods, from_workload])
    else:
        raw = annotations_of(tj).get(n.ATTEMPT, "0")
        attempt = int(raw) if raw.isdigit() else 0
    return ExecKey(attempt, a, j)


def of_key(pods: Iterable[JSON], key: ExecKey) -> list[JSON]:
    out = []
    for p in pods:
        attempt, a, j = pod_key(p)
        if a == key.a and j == key.j and (attempt is None or attempt == key.attempt):
            out.append(p)
    return out


def quota_never_fits(reason: str, message: str) -> bool:
    """Whether Kueue's ``QuotaReserved=False`` says the workload can never be admitted as the queue stands: the
    granular reason (:data:`NEVER_FITS_REASONS`), or, without that feature gate (reason ``Pending``), a message
    whose every flavor's verdict is "request > maximum capacity" (the nominal quota plus what the cohort could
    lend) and none is "insufficient unused quota", which frees up as other workloads end."""
    if reason in NEVER_FITS_REASONS:
        return True
    return MAX_CAPACITY in message and WAITING_FOR_QUOTA not in message


def kueue_deactivation(workload: JSON | None) -> tuple[str, str] | None:
    """Kueue's own deactivation (``DeactivatedDueTo...``: a rejected check, a time or requeue limit), or None."""
    ev = condition(workload, "Evicted")
    if ev is not None and str(ev.get("reason", "")).startswith("DeactivatedDueTo"):
        return str(ev.get("reason")), str(ev.get("message", ""))
    return None


def gate_and_holds(o: Objects) -> tuple[Gate, tuple[str, ...], tuple[str, ...]]:
    tj = o.trainjob
    ann = annotations_of(tj)
    holds = holds_of(tj)
    foreign: list[str] = []
    stopped = n.STOP in ann
    if o.kueue:
        gates = n.split_list(ann.get(n.GATED_BY))
        gate = Gate.CLOSED if o.gate_name in gates else Gate.OPEN
        foreign.extend(f"admission-gated-by:{g}" for g in gates if g != o.gate_name)
        wl_active = ((o.workload or {}).get("spec") or {}).get("active", True)
        if (
            o.workload is not None
            and wl_active is False
            and not holds
            and not stopped
            and kueue_deactivation(o.workload) is None
        ):
            foreign.append("workload-deactivated")
    else:
        gate = Gate.OPEN if ann.get(n.GATE) == "open" else Gate.CLOSED
        if n.ADMIN_HOLD in ann:
            foreign.append(f"admin-hold:{ann[n.ADMIN_HOLD]}")
        suspended = bool((tj.get("spec") or {}).get("suspend"))
        if gate is Gate.OPEN and suspended and not holds and not stopped and n.ADMIN_HOLD not in ann:
            foreign.append("suspended")
    return gate, holds, tuple(foreign)


def read(o: Objects, now: float, source: str = "kubernetes") -> Reading:
    """Fold the objects into a :class:`Reading` (the table in this module's docstring)."""
    ev = Evidence(source, now)
    tj = o.trainjob
    ann = annotations_of(tj)
    gate, holds, foreign = gate_and_holds(o)
    key = current_key(o)
    live = of_key(o.pods, key)
    gone = of_key(o.gone_pods, key)
    everything = live + gone
    started = [p for p in everything if pod_started(p)]
    started_at = min([t for t in (pod_start_time(p) for p in started) if t is not None] or [now]) if started else None
    nodes = tuple(
        sorted({str((p.get("spec") or {}).get("nodeName")) for p in started if (p.get("spec") or {}).get("nodeName")})
    )
    running = any(pod_running(p) for p in live)
    stopped = n.STOP in ann
    suspended = bool((tj.get("spec") or {}).get("suspend"))
    complete = condition(tj, "Complete")
    failed = condition(tj, "Failed")
    execution: Outcome | None = None
    ended_at: float | None = None

    def ended(outcome: Outcome, at: float | None = None) -> None:
        nonlocal execution, ended_at
        execution = outcome
        ended_at = at or max([t for t in (pod_end_time(p) for p in everything) if t is not None] or [now])

    wl_evicted = condition(o.workload, "Evicted")
    stranded = False
    if started:
        if complete is not None and complete.get("status") == "True":
            ended(Outcome(State.SUCCEEDED, Cause.EXIT, ev, exit_code=0, detail=str(complete.get("reason", ""))))
        elif failed is not None and failed.get("status") == "True":
            reason, message = str(failed.get("reason", "")), str(failed.get("message", ""))
            if stopped:
                ended(Outcome(State.CANCELLED, Cause.CANCELLED, ev, detail="stopped on request"))
            elif reason == "DeadlineExceeded":
                ended(Outcome(State.FAILED, Cause.TIMEOUT, ev, detail=f"{reason}: {message}"))
            elif reason == "TrainingRuntimeNotSupported":
                ended(Outcome(State.FAILED, Cause.REJECTED, ev, detail=f"{reason}: {message}"))
            elif settling(live, failed, now):
                # the pods that explain the failure are still ending (or their watch lags): wait for them
                execution = Outcome(State.RUNNING, None, ev, detail=f"ending ({reason}); waiting for the pods to end")
            else:
                found = pod_cause(everything, o.nodes, o.nodes_known)
                if found is None:
                    ended(Outcome(State.FAILED, Cause.UNKNOWN, ev, detail=f"{reason}: {message}"))
                else:
                    cause, code, detail = found
                    ended(Outcome(State.FAILED, cause, ev, exit_code=code, detail=f"{reason}: {detail}"))
        elif running and not stopped and not (suspended and (holds or foreign)):
            execution = Outcome(State.RUNNING, None, ev, detail="Running")
        elif stopped:
            ended(Outcome(State.CANCELLED, Cause.CANCELLED, ev, detail="stopped on request"))
        elif o.kueue and wl_evicted is not None and wl_evicted.get("status") == "True":
            ended(
                eviction_outcome(
                    str(wl_evicted.get("reason", "")), str(wl_evicted.get("message", "")), bool(holds), ev
                ),
                parse_time(wl_evicted.get("lastTransitionTime")),
            )
        elif not suspended and (lost := lost_node_disruption(everything)) is not None:
            # a pod the node lifecycle controller evicted from a lost node: Kueue will not evict the Workload, and
            # on a real node whose kubelet stopped answering the pod stays Terminating, so the Job never fails and
            # neither does the TrainJob (seen on the real nodes); the pod's own condition says why, and the object
            # does not wait for a restart either: none can come while that pod is Terminating
            ended(Outcome(State.FAILED, Cause.NODE_LOST, ev, detail=lost))
            stranded = True
        elif o.kueue and admitted(o.workload):
            # the Workload (watched apart from the TrainJob) has not shown why the pods stop yet
            execution = Outcome(State.RUNNING, None, ev, detail="stopping; waiting for the Workload to say why")
        elif suspended and holds:
            ended(Outcome(State.CANCELLED, Cause.HELD, ev, detail="suspended by a dispatch hold"))
        elif suspended and foreign:
            ended(
                Outcome(
                    State.CANCELLED, Cause.ADMIN_HELD, ev, detail="suspended by someone else: " + ", ".join(foreign)
                )
            )
        elif o.kueue and suspended and not admitted(o.workload):
            last = last_eviction(o.workload)
            if last is not None:
                ended(eviction_outcome(last[0], last[1], bool(holds), ev))
            else:
                ended(Outcome(State.FAILED, Cause.UNKNOWN, ev, detail="suspended after it ran; cause not shown"))
        else:
            found = pod_cause(everything, o.nodes, o.nodes_known)
            if found is not None and not any(pod_running(p) for p in live):
                cause, code, detail = found
                if cause is Cause.EXIT and code in KILLED_CODES and jobset_going(o, everything, now):
                    # the Trainer deletes the JobSet at activeDeadlineSeconds and only then (on another watch)
                    # is its Failed seen: pods stopped by that deletion do not name the cause
                    execution = Outcome(
                        State.RUNNING, None, ev, detail="ending (its JobSet was deleted); waiting for the TrainJob"
                    )
                elif cause is not Cause.EXIT or code:
                    ended(Outcome(State.FAILED, cause, ev, exit_code=code, detail=detail))
            if execution is None:
                execution = Outcome(State.RUNNING, None, ev, detail="started")
    if (
        (execution is None or execution.state is State.RUNNING)
        and not stopped
        and not suspended
        and (stuck := stuck_launch(live)) is not None
    ):
        ended(Outcome(State.FAILED, stuck[0], ev, detail=stuck[1]))
        stranded = True  # no restart comes while the pod waits, and the object does not end by itself
    running_now = started and execution is not None and execution.state is State.RUNNING
    waiting = None if running_now or stranded else _waiting(o, ev)
    awaiting = False
    if o.kueue and o.workload is not None and not holds and not foreign and n.STOP not in ann:
        raw = ann.get(n.ADMIT, "0")
        authorised = int(raw) if raw.isdigit() else 0
        awaiting = evictions(o.workload) + 1 > authorised and evictions(o.workload) > 0 and not admitted(o.workload)
    marker = ann.get(n.MARKER_FULL) or labels(tj).get(n.MARKER)
    return Reading(
        gate,
        holds,
        foreign,
        marker,
        key,
        started_at,
        ended_at,
        nodes,
        execution,
        waiting,
        awaiting,
    )


def _waiting(o: Objects, ev: Evidence) -> Outcome:
    tj = o.trainjob
    ann = annotations_of(tj)
    gate, holds, foreign = gate_and_holds(o)
    complete, failed = condition(tj, "Complete"), condition(tj, "Failed")
    if complete is not None and complete.get("status") == "True":
        return Outcome(State.SUCCEEDED, Cause.EXIT, ev, exit_code=0, detail=str(complete.get("reason", "")))
    if failed is not None and failed.get("status") == "True":
        reason = str(failed.get("reason", ""))
        cause = (
            Cause.TIMEOUT
            if reason == "DeadlineExceeded"
            else Cause.REJECTED
            if reason == "TrainingRuntimeNotSupported"
            else Cause.UNKNOWN
        )
        if n.STOP in ann:
            return Outcome(State.CANCELLED, Cause.CANCELLED, ev, detail="stopped on request")
        return Outcome(State.FAILED, cause, ev, detail=f"{reason}: {failed.get('message', '')}")
    if n.STOP in ann:
        return Outcome(State.CANCELLED, Cause.CANCELLED, ev, detail="stopped on request")
    deactivated = kueue_deactivation(o.workload) if o.kueue else None
    if deactivated is not None:
        return eviction_outcome(deactivated[0], deactivated[1], bool(holds), ev)
    if foreign:
        return Outcome(State.HELD, Cause.ADMIN_HELD, ev, detail="held by someone else: " + ", ".join(foreign))
    if holds:
        return Outcome(State.HELD, Cause.HELD, ev, detail="held by dispatch: " + ", ".join(holds))
    if gate is Gate.CLOSED:
        return Outcome(State.PENDING, Cause.GATED, ev, detail="start gate closed")
    wl = o.workload
    if o.kueue and wl is not None:
        qr = condition(wl, "QuotaReserved")
        if qr is not None and qr.get("status") != "True":
            msg, reason = str(qr.get("message", "")), str(qr.get("reason", ""))
            if quota_never_fits(reason, msg):
                return Outcome(State.PENDING, Cause.UNRUNNABLE, ev, detail=f"{reason}: {msg}")
            if reason in ("Inadmissible", "WaitingForQuota") or any(w in msg for w in QUOTA_WORDS):
                return Outcome(State.PENDING, Cause.NO_CAPACITY, ev, detail=f"{reason}: {msg}")
            return Outcome(State.PENDING, Cause.QUEUED, ev, detail=f"{reason}: {msg}")
        if qr is not None and not admitted(wl):
            return Outcome(State.PENDING, Cause.QUEUED, ev, detail="quota reserved; waiting for admission checks")
    for pod in o.pods:
        sched = condition(pod, "PodScheduled")
        if sched is not None and sched.get("status") == "False" and sched.get("reason") == "Unschedulable":
            return Outcome(State.PENDING, Cause.NO_CAPACITY, ev, detail=str(sched.get("message", "Unschedulable")))
    for pod in o.pods:  # a pull the registry may yet answer, a Secret that may yet be made: the kubelet retries
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in LAUNCH_WAITING:
                words = str(waiting.get("message", "")).strip()[:200]
                why = f"{waiting['reason']} ({meta(pod).get('name', '')}){': ' + words if words else ''}"
                return Outcome(State.PENDING, Cause.QUEUED, ev, detail=f"waiting to start: {why}")
    return Outcome(State.PENDING, Cause.QUEUED, ev, detail="waiting to start")
