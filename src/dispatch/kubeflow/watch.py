"""The watcher: list+watch of TrainJobs, JobSets, Pods, Workloads and Nodes into one cache, and the journal of
executions built from what the watches showed.

* Each kind has one :class:`Informer` thread of the adapter's own: it lists (keeping the list's
  resourceVersion), then watches from it with bookmarks (``allowWatchBookmarks``), resuming from the last
  version it saw when the stream ends or breaks, and re-listing on ``410 Gone`` (the cache then reports a
  reset to :meth:`Cache.changes` consumers). No polling: after the first list, the only requests are the
  open watches (and their resumptions).
* :class:`Cache` keeps the latest object of each kind, the last state of deleted pods (so a pod deleted by a
  preemption or a node's taint manager still explains how its execution ended), and a per-TrainJob
  :class:`Journal` of executions: each observed reading is folded in, so an execution that ended keeps its
  outcome after the objects that showed it are gone.
* ``close()`` stops every thread and closes its connection.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx2
from lightkube import ApiError, Client
from lightkube.types import OnErrorAction, OnErrorResult

from dispatch.kubeflow import names as n
from dispatch.kubeflow.mapping import ExecKey, Objects, Reading, labels, meta, of_key, pod_cause, read
from dispatch.kubeflow.streams import Liveness
from dispatch.outcome import Cause, Evidence, Outcome, State

JSON = dict[str, Any]

GONE_PODS_KEPT = 256
VAGUE = frozenset({Cause.UNKNOWN, Cause.ADMIN_HELD})
"""Causes read from the TrainJob alone: any later explanation of the same execution replaces them."""


def _weight(outcome: Outcome) -> int:
    """How specific an ended outcome is: vague 0, a bare exit code 1, a named cause 2."""
    if outcome.cause in VAGUE:
        return 0
    if outcome.cause is Cause.EXIT:
        return 1
    return 2


CHANGES_KEPT = 100_000

log = logging.getLogger("dispatch.kubeflow.watch")


@dataclass(frozen=True)
class Freshness:
    """The time bounds of the informers, from the request timeout (``timeouts.apiserverRequest``).

    * ``server_timeout``: each watch asks the server to end it after this many seconds (``timeoutSeconds``);
      the informer then resumes it from the last resourceVersion. A clean end is a sign of life, so a live
      stream shows one at least this often even when nothing changes (a real apiserver also sends a bookmark
      about once a minute, the project's server after each second of silence).
    * ``silence``: a stream that shows no life for this long is dead (its read timeout); the cache is then in
      sync only as of its last sign of life. Longer than ``server_timeout`` by at least 2 s.
    * ``bound``: a read of a cache older than this raises Unavailable: the backend's CallBound (a read is a
      call, and its answer may be no older than a call may take to land).
    """

    server_timeout: int
    silence: float
    bound: float

    @classmethod
    def of(cls, request_timeout: float, bound: float) -> Freshness:
        server_timeout = max(1, int(request_timeout / 2))
        return cls(server_timeout, max(request_timeout, server_timeout + 2.0), bound)


class WatchFailure(Exception):
    """A watch request the server refused or that broke; ``reason`` is its label in the failure counts."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


def status_code(exc: BaseException) -> int | None:
    """The HTTP status of a refused list or watch (lightkube raises ApiError, or, for the answer to a watch
    request, httpx's HTTPStatusError), None for anything else."""
    if isinstance(exc, ApiError):
        return int(exc.status.code or 0)
    if isinstance(exc, httpx2.HTTPStatusError):
        return exc.response.status_code
    return None


def failure_reason(exc: BaseException) -> tuple[str, str]:
    """(reason, detail) of a failed list or watch: ``"401 Unauthorized"`` and the Status message for an API
    answer, the exception's type for a transport error (``ReadTimeout``, ``ConnectError``, ...)."""
    if isinstance(exc, ApiError):
        code, reason = int(exc.status.code or 0), str(exc.status.reason or "")
        return f"{code} {reason}".strip(), str(exc.status.message or "")
    if isinstance(exc, httpx2.HTTPStatusError):
        code = exc.response.status_code
        reason, message = "", ""
        with contextlib.suppress(Exception):  # a Status body, when there is one
            body = json.loads(exc.response.read())
            reason, message = str(body.get("reason") or ""), str(body.get("message") or "")
        return f"{code} {reason or exc.response.reason_phrase}".strip(), message
    return type(exc).__name__, str(exc)


class Informer:
    """list+watch one resource kind (in a namespace, or cluster-wide) into ``sink``, on its own thread.

    Only lightkube's public API: ``Client.list`` and ``Client.watch`` (from the list's resourceVersion, with a
    server timeout), the client given a :class:`~dispatch.kubeflow.streams.WatchTransport` by ``make_client``.
    Every failure (a refused or broken list or watch) is logged with its status and reason (the first of a
    run of failures, then the 2nd, 4th, 8th, ...; and the recovery) and counted in :attr:`failures`; the
    informer retries with a backoff of up to 5 s. :attr:`live` says how fresh the cache is."""

    def __init__(
        self,
        name: str,
        make_client: Callable[[Liveness], Client],
        res: Any,
        sink: Callable[[str, str, JSON], None],
        reset: Callable[[str, list[JSON]], None],
        *,
        namespace: str | None = None,
        labels: dict[str, Any] | None = None,
        on_request: Callable[[str], None] | None = None,
        freshness: Freshness | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.name = name
        self._make_client = make_client
        self.res = res
        self.sink = sink
        self.reset = reset
        self.namespace = namespace
        self.labels = labels
        self.on_request = on_request or (lambda what: None)
        self.freshness = freshness or Freshness.of(60.0, 65.0)
        self.live = Liveness(self.freshness.silence, now, on_open=self._recovered)
        self.synced = threading.Event()
        self.stopping = threading.Event()
        self.relists = 0
        self.resumes = 0
        self.resource_version: str | None = None
        self.failures: Counter[str] = Counter()
        """Failed lists and watch requests, by reason."""
        self.last_failure = ""
        self._streak = 0
        self._lock = threading.Lock()
        self._client: Client | None = None
        self._thread = threading.Thread(target=self._run, name=f"dispatch-kubeflow-watch-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop now, even while the watch is silent (see :meth:`Liveness.shut`)."""
        self.stopping.set()
        self.live.shut()
        client = self._client
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()

    def join(self, timeout: float = 5.0) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        """The informer's thread is still running."""
        return self._thread.is_alive()

    def failure_counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self.failures)

    def _failed(self, exc: BaseException) -> float:
        """Log and count one failure; the backoff before the next try."""
        reason, detail = failure_reason(exc)
        with self._lock:
            self.failures[reason] += 1
            self._streak += 1
            streak = self._streak
            self.last_failure = f"{reason}: {detail}" if detail else reason
        if streak & (streak - 1) == 0:  # 1, 2, 4, 8, ...: a long outage stays readable
            age = self.live.age()
            log.warning(
                "watch of %s failed (%s, failure %d in a row; cache in sync %s): %s",
                self.name,
                reason,
                streak,
                "never" if age is None else f"{age:.0f}s ago",
                detail or type(exc).__name__,
            )
        return float(min(5.0, 0.2 * 2 ** min(streak - 1, 5)))

    def _recovered(self) -> None:
        with self._lock:
            streak, self._streak = self._streak, 0
        if streak:
            log.info("watch of %s recovered after %d failures", self.name, streak)

    def _list(self, client: Client) -> tuple[list[JSON], str]:
        self.on_request("list")
        if self.namespace is not None:
            it = client.list(self.res, namespace=self.namespace, labels=self.labels, chunk_size=500)
        else:
            it = client.list(self.res, labels=self.labels, chunk_size=500)
        items = [o.to_dict() for o in it]
        return items, str(it.resourceVersion)

    def _run(self) -> None:
        while not self.stopping.is_set():
            backoff = 0.0
            try:
                self._client = self._make_client(self.live)
                while not self.stopping.is_set():
                    if self.resource_version is None:
                        items, rv = self._list(self._client)
                        self.live.heard()
                        self._recovered()
                        self.resource_version = rv
                        self.reset(self.name, items)
                        self.synced.set()
                    else:
                        self.resumes += 1
                    if self._watch(self._client):
                        self.relists += 1
                        self.resource_version = None
            except Exception as exc:
                if self.stopping.is_set():
                    break
                backoff = self._failed(exc)
            finally:
                if self._client is not None:
                    with contextlib.suppress(Exception):
                        self._client.close()
            self.stopping.wait(backoff)

    def _watch(self, client: Client) -> bool:
        """Watch from ``resource_version`` until stopped (False), told the version is gone (True), or a failure
        (raised: the caller counts it, backs off and resumes from the last version seen)."""
        failure: Exception | None = None
        gone = False

        def on_error(exc: Exception, count: int) -> OnErrorResult:
            nonlocal failure, gone
            self.live.ended(clean=False)
            if status_code(exc) == 410:
                gone = True
            elif not self.stopping.is_set():
                failure = exc
            return OnErrorResult(OnErrorAction.STOP)

        self.on_request("watch")
        kwargs: dict[str, Any] = {"labels": self.labels} if self.labels else {}
        if self.namespace is not None:
            kwargs["namespace"] = self.namespace
        events = client.watch(
            self.res,
            server_timeout=self.freshness.server_timeout,
            resource_version=self.resource_version,
            on_error=on_error,
            **kwargs,
        )
        for kind, obj in events:
            if self.stopping.is_set():
                return False
            data = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
            rv = (data.get("metadata") or {}).get("resourceVersion")
            if rv:
                self.resource_version = str(rv)
            if kind == "BOOKMARK":
                continue
            self.sink(self.name, kind, data)
        if failure is not None:
            raise failure
        return gone


@dataclass
class ExecRecord:
    key: ExecKey
    started_at: float | None
    outcome: Outcome
    ended_at: float | None = None
    nodes: tuple[str, ...] = ()


@dataclass
class Journal:
    """The executions of one TrainJob as the watches showed them, by key."""

    execs: dict[ExecKey, ExecRecord] = field(default_factory=dict)

    def fold(self, r: Reading, gone_pods: Iterable[JSON], ev: Evidence) -> None:
        if r.execution is not None:
            rec = self.execs.get(r.key)
            if rec is None:
                self.execs[r.key] = ExecRecord(r.key, r.started_at, r.execution, r.ended_at, r.nodes)
            elif not rec.outcome.ended or (r.execution.ended and _weight(r.execution) > _weight(rec.outcome)):
                # the watches of different kinds race: a TrainJob's Failed (or a pod's exit code) can arrive
                # before the pod condition that explains it, so a later, more specific reading wins
                rec.outcome = r.execution
                rec.ended_at = r.ended_at
                rec.nodes = tuple(sorted(set(rec.nodes) | set(r.nodes)))
        for key, rec in self.execs.items():
            if key < r.key and not rec.outcome.ended:
                # superseded (a JobSet restart, a new attempt) before we saw it end: explain it from its pods
                found = pod_cause(of_key(gone_pods, key), {}, False)
                if found is not None:
                    cause, code, detail = found
                    rec.outcome = Outcome(State.FAILED, cause, ev, exit_code=code, detail=detail)
                else:
                    rec.outcome = Outcome(State.FAILED, Cause.UNKNOWN, ev, detail="superseded by a new execution")
                rec.ended_at = ev.observed_at


class Cache:
    """The watched objects of one namespace (nodes: cluster-wide), and the journals."""

    def __init__(self, *, kueue: bool, gate_name: str, clock_now: Callable[[], float]) -> None:
        self.kueue = kueue
        self.gate_name = gate_name
        self.now = clock_now
        self.lock = threading.Condition()
        self.trainjobs: dict[str, JSON] = {}
        self.jobsets: dict[str, JSON] = {}
        self.workloads: dict[str, JSON] = {}
        self.pods: dict[str, JSON] = {}
        self.nodes: dict[str, JSON] = {}
        self.gone: dict[str, deque[JSON]] = {}
        self.journals: dict[str, Journal] = {}
        self.pods_by_jobset: dict[str, set[str]] = {}
        self.workload_of: dict[str, str] = {}
        """TrainJob name -> its Workload's name (indexes, so a read is O(its own objects))."""
        self.synced: set[str] = set()
        self.seq = 0
        self.reset_seq = 0
        self.changes: deque[tuple[int, str]] = deque(maxlen=CHANGES_KEPT)
        self.events = 0
        self.last_event_at = 0.0
        self.deleted_uids: deque[str] = deque(maxlen=GONE_PODS_KEPT)
        """UIDs of objects this process deleted: a late event or list of one never brings it back."""

    # ---- feeding ---------------------------------------------------------------------------------------

    def _table(self, kind: str) -> dict[str, JSON]:
        return {
            "trainjobs": self.trainjobs,
            "jobsets": self.jobsets,
            "workloads": self.workloads,
            "pods": self.pods,
            "nodes": self.nodes,
        }[kind]

    def replace(self, kind: str, items: list[JSON]) -> None:
        """A (re-)list: the objects of ``kind`` are now exactly ``items``; every TrainJob counts as changed."""
        with self.lock:
            table = self._table(kind)
            if kind == "pods":
                fresh = {meta(p).get("name") for p in items}
                for name, pod in list(table.items()):
                    if name not in fresh:
                        self._bury(pod)
            table.clear()
            if kind == "pods":
                self.pods_by_jobset.clear()
            if kind == "workloads":
                self.workload_of.clear()
            for obj in items:
                if meta(obj).get("uid") in self.deleted_uids:
                    continue
                table[str(meta(obj).get("name"))] = obj
                self._index(kind, obj, deleted=False)
            if kind in self.synced:
                self.reset_seq = self.seq + 1
            self.synced.add(kind)
            for name in list(self.trainjobs):
                self._touch(name)
            self.seq += 1
            self.lock.notify_all()

    def event(self, kind: str, type_: str, obj: JSON) -> None:
        with self.lock:
            self.events += 1
            self.last_event_at = self.now()
            table = self._table(kind)
            name = str(meta(obj).get("name"))
            if type_ == "DELETED":
                table.pop(name, None)
                self._index(kind, obj, deleted=True)
                if kind == "pods":
                    self._bury(obj)
            else:
                old = table.get(name)
                if (old is not None and _rv(old) > _rv(obj)) or meta(obj).get("uid") in self.deleted_uids:
                    return
                table[name] = obj
                self._index(kind, obj, deleted=False)
            for tj in self._affected(kind, obj):
                self._touch(tj)
            self.lock.notify_all()

    def put(self, kind: str, obj: JSON) -> None:
        """An object a write returned: newer than what the watch showed, so take it now."""
        self.event(kind, "MODIFIED", obj)

    def drop(self, kind: str, obj: JSON) -> None:
        """An object this process deleted: gone from the cache now, and an event or a list that the watch
        delivers late (an ADDED or MODIFIED of it) never brings it back."""
        with self.lock:
            uid = meta(obj).get("uid")
            if uid:
                self.deleted_uids.append(str(uid))
            self.event(kind, "DELETED", obj)

    def _index(self, kind: str, obj: JSON, *, deleted: bool) -> None:
        name = str(meta(obj).get("name"))
        if kind == "pods":
            js = labels(obj).get(n.JOBSET_NAME)
            if js:
                members = self.pods_by_jobset.setdefault(js, set())
                if deleted:
                    members.discard(name)
                else:
                    members.add(name)
        elif kind == "workloads":
            for ref in meta(obj).get("ownerReferences") or []:
                if ref.get("kind") == "TrainJob":
                    if deleted:
                        if self.workload_of.get(str(ref.get("name"))) == name:
                            self.workload_of.pop(str(ref.get("name")), None)
                    else:
                        self.workload_of[str(ref.get("name"))] = name

    def _bury(self, pod: JSON) -> None:
        js = labels(pod).get(n.JOBSET_NAME)
        if js:
            self.gone.setdefault(js, deque(maxlen=GONE_PODS_KEPT)).append(pod)

    def _affected(self, kind: str, obj: JSON) -> list[str]:
        if kind in ("trainjobs", "jobsets"):
            return [str(meta(obj).get("name"))]
        if kind == "workloads":
            return [str(r.get("name")) for r in meta(obj).get("ownerReferences") or [] if r.get("kind") == "TrainJob"]
        if kind == "pods":
            js = labels(obj).get(n.JOBSET_NAME)
            return [js] if js else []
        if kind == "nodes":
            node = meta(obj).get("name")
            return sorted(
                {
                    labels(p).get(n.JOBSET_NAME, "")
                    for p in list(self.pods.values()) + [q for d in self.gone.values() for q in d]
                    if (p.get("spec") or {}).get("nodeName") == node
                }
                - {""}
            )
        return []

    def _touch(self, name: str) -> None:
        self.seq += 1
        self.changes.append((self.seq, name))
        if name in self.trainjobs:
            self.reading(name)

    # ---- reading ---------------------------------------------------------------------------------------

    def objects(self, name: str) -> Objects | None:
        tj = self.trainjobs.get(name)
        if tj is None:
            return None
        wl_name = self.workload_of.get(name)
        wl = self.workloads.get(wl_name) if wl_name else None
        pods = [self.pods[p] for p in self.pods_by_jobset.get(name, ()) if p in self.pods]
        return Objects(
            trainjob=tj,
            jobset=self.jobsets.get(name),
            workload=wl,
            pods=pods,
            gone_pods=list(self.gone.get(name, ())),
            nodes=self.nodes,
            nodes_known="nodes" in self.synced,
            kueue=self.kueue,
            gate_name=self.gate_name,
        )

    def reading(self, name: str, at: float | None = None) -> tuple[Objects, Reading, Journal] | None:
        """The objects, their reading as of ``at`` (default now: an event just arrived), and the journal with
        the reading folded in (under the lock)."""
        with self.lock:
            o = self.objects(name)
            if o is None:
                return None
            now = self.now() if at is None else at
            r = read(o, now, "kubernetes:watch")
            journal = self.journals.setdefault(name, Journal())
            journal.fold(r, o.gone_pods, Evidence("kubernetes:watch", now))
            return o, r, journal

    def wait_synced(self, kinds: Iterable[str], timeout: float) -> bool:
        want = set(kinds)
        with self.lock:
            return self.lock.wait_for(lambda: want <= self.synced, timeout)

    def changes_since(self, cursor: int) -> tuple[int, list[str], bool]:
        with self.lock:
            reset = cursor < self.reset_seq or (bool(self.changes) and self.changes[0][0] > cursor + 1)
            names = list(dict.fromkeys(name for seq, name in self.changes if seq > cursor))
            return self.seq, names, reset

    def wait_change(self, cursor: int, timeout: float) -> None:
        with self.lock:
            self.lock.wait_for(lambda: self.seq > cursor, timeout)


def _rv(obj: JSON) -> int:
    raw = str(meta(obj).get("resourceVersion") or "0")
    return int(raw) if raw.isdigit() else 0


def is_transport_error(exc: BaseException) -> bool:
    return isinstance(exc, httpx2.HTTPError)
