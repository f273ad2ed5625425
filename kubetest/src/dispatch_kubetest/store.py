"""The object store: what etcd plus the generic apiserver registry do, in memory.

Contracts:
- every successful write bumps one global, etcd-like ``resourceVersion`` counter; a write that
  changes nothing (ignoring ``resourceVersion``/``managedFields``) is a no-op: no new version, no event;
- ``metadata.uid``, ``creationTimestamp`` (from the injected clock) and ``generation`` are set by
  the store; ``generation`` moves only when something outside ``metadata`` and ``status`` changes;
- for types with a status subresource, writes to the main resource keep the stored ``status`` and
  writes to ``/status`` change nothing but ``status`` (and create drops any ``status`` sent);
- an update carrying a ``resourceVersion`` that is not the stored one is a 409 Conflict;
- deleting an object with finalizers only sets ``deletionTimestamp`` (and ``deletionGracePeriodSeconds: 0``); it
  goes away when the last finalizer is removed; deleting an object deletes its dependents (ownerReferences) whose
  owners are all gone (background propagation; Orphan drops the ownerReferences instead; the handler refuses
  Foreground);
- pods are deleted gracefully, as the real pod strategy does: the grace period is the request's
  ``gracePeriodSeconds`` (negative counts as 1), else the pod's ``spec.terminationGracePeriodSeconds``, else 30, and 0
  for a pod not bound to a node or already Succeeded/Failed. A grace above 0 leaves the pod Terminating (a MODIFIED
  event): ``deletionTimestamp`` = now + grace (the time by which it goes), ``deletionGracePeriodSeconds`` = grace.
  A later delete may shorten the grace (the deadline moves to the first request's time + the new grace), never
  lengthen it; grace 0 removes the pod (once no finalizer holds it). Removal at the deadline is the kubelet's
  (``reactors/pods.py``), not the store's: the store never removes a Terminating pod by itself, and an update that
  drops its last finalizer keeps it while ``deletionGracePeriodSeconds`` is above 0. Dependents collected by
  cascade are deleted the same way (a Job's pods go Terminating);
- every change is recorded in a bounded history (``history_window`` events) that watches resume
  from; a resume point older than the retained history is 410 Expired.
"""

from __future__ import annotations

import base64
import builtins
import copy
import hashlib
import json
import re
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from . import errors
from .apply import Ownership
from .clock import FakeClock, format_time, parse_time
from .requestctx import field_validation, is_external
from .resources import NAMESPACE, Catalogue, ResourceType
from .schema import admit as schema_admit
from .schema import admit_builtin

JSON = dict[str, Any]
AdmissionHook = Callable[[ResourceType, JSON, "JSON | None"], None]

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_RFC1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

_IGNORED_FOR_NOOP = ("resourceVersion", "managedFields")

_DELETION_FIELDS = ("deletionTimestamp", "deletionGracePeriodSeconds")
"""Set only by a delete: an update can neither set nor change them."""

DEFAULT_GRACE_SECONDS = 30
"""The pod spec's default ``terminationGracePeriodSeconds``."""


def _is_pod(rt: ResourceType) -> bool:
    return rt.group == "" and rt.kind == "Pod"


def pod_grace_seconds(pod: JSON, requested: int | None) -> int:
    """The grace period a fresh delete of ``pod`` gets, as the pod strategy's ``CheckGracefulDelete`` decides:
    ``requested`` (negative counts as 1), else ``spec.terminationGracePeriodSeconds``, else 30; 0 for a pod not
    bound to a node or in a terminal phase."""
    spec = pod.get("spec") or {}
    if requested is not None:
        period = 1 if int(requested) < 0 else int(requested)
    else:
        default = spec.get("terminationGracePeriodSeconds")
        period = DEFAULT_GRACE_SECONDS if default is None else int(default)
    if not spec.get("nodeName") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return 0
    return period


def grace_deadline(obj: JSON) -> datetime | None:
    """When a Terminating pod is due to go (its ``deletionTimestamp``), or None when it is not terminating
    gracefully (not deleting, or deleting with grace 0, held only by finalizers)."""
    meta = obj.get("metadata") or {}
    if not meta.get("deletionTimestamp") or not meta.get("deletionGracePeriodSeconds"):
        return None
    return parse_time(meta["deletionTimestamp"])


@dataclass(frozen=True)
class Event:
    """One change: ``type`` is ADDED, MODIFIED or DELETED; ``old`` is the previous state."""

    rv: int
    type: str
    rt: ResourceType
    obj: JSON
    old: JSON | None


def _strip_volatile(obj: JSON) -> JSON:
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    for key in _IGNORED_FOR_NOOP:
        meta.pop(key, None)
    out["metadata"] = meta
    return out


def _spec_part(obj: JSON) -> JSON:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


class Store:
    """Thread-safe in-memory storage with watch history. All public methods copy in and out."""

    def __init__(self, clock: FakeClock, catalogue: Catalogue, history_window: int = 10_000) -> None:
        self.clock = clock
        self.catalogue = catalogue
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        """Notified on every commit (and by log appends); watches and log follows wait on it."""
        self._objects: dict[ResourceType, dict[tuple[str, str], JSON]] = {}
        self._ownership: dict[str, Ownership] = {}
        self._events: deque[Event] = deque()
        self._rv = 1
        self._oldest_rv = 1
        self._window = history_window
        self._uid_counter = 0
        self._suffix_counter = 0
        self.admission_hooks: builtins.list[AdmissionHook] = []
        """Called as ``hook(rt, new_obj, old_obj)`` before create/update commits; may mutate the
        new object (mutating webhook) or raise ``StatusError`` (validating webhook)."""

    # ---- versions and history -------------------------------------------------------------
    @property
    def resource_version(self) -> int:
        with self.lock:
            return self._rv

    @property
    def oldest_resource_version(self) -> int:
        """The oldest version a watch can still resume from."""
        with self.lock:
            return self._oldest_rv

    def set_history_window(self, events: int) -> None:
        """Keep at most ``events`` history entries (0 = keep none: every resume point expires)."""
        with self.lock:
            self._window = events
            self._trim()

    def compact(self) -> None:
        """Forget all history, as etcd compaction does: every resume point a client holds now answers 410, even one
        as new as the last change (a bookmark can bring a watcher there), so a test's compaction always expires."""
        with self.lock:
            self._events.clear()
            self._rv += 1
            self._oldest_rv = self._rv

    def _trim(self) -> None:
        while len(self._events) > self._window:
            self._oldest_rv = self._events.popleft().rv
        if self._window == 0:
            self._oldest_rv = self._rv

    def events_since(self, rv: int) -> builtins.list[Event]:
        """Events with a version above ``rv``; raises 410 when ``rv`` is older than the history."""
        with self.lock:
            if rv < self._oldest_rv:
                raise errors.gone(f"too old resource version: {rv} ({self._oldest_rv})")
            return [e for e in self._events if e.rv > rv]

    def _record(self, type_: str, rt: ResourceType, obj: JSON, old: JSON | None) -> None:
        self._events.append(Event(self._rv, type_, rt, obj, old))
        self._trim()
        self.changed.notify_all()

    def notify(self) -> None:
        with self.lock:
            self.changed.notify_all()

    @contextmanager
    def dry_run(self) -> Iterator[None]:
        """Writes inside the block are validated and answered but rolled back on exit, as with
        ``dryRun=All``. The lock is held throughout, so no reader ever sees the intermediate state."""
        with self.lock:
            saved = (
                copy.deepcopy(self._objects),
                {uid: own.copy() for uid, own in self._ownership.items()},
                deque(self._events),
                self._rv,
                self._oldest_rv,
                self._uid_counter,
                self._suffix_counter,
            )
            try:
                yield
            finally:
                (
                    self._objects,
                    self._ownership,
                    self._events,
                    self._rv,
                    self._oldest_rv,
                    self._uid_counter,
                    self._suffix_counter,
                ) = saved

    # ---- names and ids --------------------------------------------------------------------
    def _new_uid(self) -> str:
        self._uid_counter += 1
        return str(uuid.UUID(int=(0x6B756265 << 96) | self._uid_counter, version=4))

    def random_suffix(self, seed: str, length: int = 5) -> str:
        """A deterministic stand-in for the apiserver's random ``generateName`` suffix."""
        with self.lock:
            self._suffix_counter += 1
            digest = hashlib.sha256(f"{seed}/{self._suffix_counter}".encode()).digest()
        return "".join(_SUFFIX_ALPHABET[b % len(_SUFFIX_ALPHABET)] for b in digest[:length])

    def created_at(self, obj: JSON) -> datetime:
        """``metadata.creationTimestamp``: this store stamps it from the injected clock."""
        return parse_time(obj["metadata"]["creationTimestamp"])

    # ---- reads ----------------------------------------------------------------------------
    def _bucket(self, rt: ResourceType) -> dict[tuple[str, str], JSON]:
        return self._objects.setdefault(rt, {})

    def try_get(self, rt: ResourceType, namespace: str, name: str) -> JSON | None:
        with self.lock:
            obj = self._bucket(rt).get((namespace if rt.namespaced else "", name))
            return copy.deepcopy(obj) if obj is not None else None

    def get(self, rt: ResourceType, namespace: str, name: str) -> JSON:
        obj = self.try_get(rt, namespace, name)
        if obj is None:
            raise errors.not_found(rt, name)
        return obj

    def list(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        predicate: Callable[[JSON], bool] | None = None,
    ) -> tuple[builtins.list[JSON], int]:
        """Objects sorted by (namespace, name), and the store version they were read at."""
        with self.lock:
            items = [
                copy.deepcopy(o)
                for (ns, _), o in sorted(self._bucket(rt).items())
                if (namespace is None or ns == namespace) and (predicate is None or predicate(o))
            ]
            return items, self._rv

    def list_page(
        self,
        rt: ResourceType,
        namespace: str | None,
        predicate: Callable[[JSON], bool],
        limit: int | None,
        continue_token: str | None,
    ) -> tuple[builtins.list[JSON], int, str | None]:
        """One page of a list. Continue tokens carry the last key and the list's version; a token
        whose version has left the history is 410 Expired (as after etcd compaction)."""
        with self.lock:
            start_after: tuple[str, str] | None = None
            rv = self._rv
            if continue_token:
                try:
                    decoded = json.loads(base64.urlsafe_b64decode(continue_token.encode()))
                    start_after = (decoded["ns"], decoded["name"])
                    rv = int(decoded["rv"])
                except (ValueError, KeyError, TypeError) as exc:
                    raise errors.bad_request("continue key is not valid") from exc
                if rv < self._oldest_rv:
                    raise errors.gone(
                        "The provided continue parameter is too old to display a consistent list result. "
                        "You can start a new list without the continue parameter."
                    )
            keys = sorted(self._bucket(rt))
            out: builtins.list[JSON] = []
            last: tuple[str, str] | None = None
            more = False
            for key in keys:
                if start_after is not None and key <= start_after:
                    continue
                obj = self._bucket(rt)[key]
                if namespace is not None and key[0] != namespace:
                    continue
                if not predicate(obj):
                    continue
                if limit is not None and len(out) >= limit:
                    more = True
                    break
                out.append(copy.deepcopy(obj))
                last = key
            token = None
            if more and last is not None:
                raw = json.dumps({"rv": rv, "ns": last[0], "name": last[1]}).encode()
                token = base64.urlsafe_b64encode(raw).decode()
            return out, rv, token

    def ownership(self, uid: str) -> Ownership:
        with self.lock:
            return self._ownership.setdefault(uid, Ownership())

    # ---- writes ---------------------------------------------------------------------------
    def _validate_name(self, rt: ResourceType, name: str) -> None:
        causes = []
        if not name:
            causes.append(
                {
                    "reason": "FieldValueRequired",
                    "message": "name or generateName is required",
                    "field": "metadata.name",
                }
            )
        elif rt.kind == "TrainJob":
            if len(name) > 63 or not _RFC1035_LABEL.match(name):
                causes.append(
                    {
                        "reason": "FieldValueInvalid",
                        "message": "must be a valid RFC 1035 label (lowercase alphanumerics and '-', "
                        "starting with a letter, at most 63 characters)",
                        "field": "metadata.name",
                    }
                )
        elif rt.kind == "Namespace":
            if len(name) > 63 or not _DNS_LABEL.match(name):
                causes.append(
                    {
                        "reason": "FieldValueInvalid",
                        "message": "a lowercase RFC 1123 label must "
                        "consist of lower case alphanumeric characters or '-'",
                        "field": "metadata.name",
                    }
                )
        elif len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "message": "a lowercase RFC 1123 subdomain must "
                    "consist of lower case alphanumeric characters, '-' or '.'",
                    "field": "metadata.name",
                }
            )
        if causes:
            raise errors.invalid(rt, name, causes)

    def create(
        self,
        rt: ResourceType,
        namespace: str,
        obj: JSON,
        manager: str = "",
        *,
        keep_status: bool = False,
    ) -> JSON:
        """Create ``obj``; ``keep_status`` lets the control surface seed a status in one write."""
        with self.lock:
            obj = copy.deepcopy(obj)
            meta = obj.setdefault("metadata", {})
            if not rt.namespaced:
                namespace = ""
                meta.pop("namespace", None)
            else:
                body_ns = meta.get("namespace")
                if body_ns and body_ns != namespace:
                    raise errors.bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request"
                    )
                meta["namespace"] = namespace
                if self.try_get(NAMESPACE, "", namespace) is None:
                    raise errors.namespace_not_found(namespace)
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = meta["generateName"] + self.random_suffix(meta["generateName"])
            name = meta.get("name") or ""
            self._validate_name(rt, name)
            if (namespace, name) in self._bucket(rt):
                raise errors.already_exists(rt, name)
            obj["apiVersion"] = rt.api_version
            obj["kind"] = rt.kind
            if rt.has_status and not keep_status:
                obj.pop("status", None)
            schema_admit(rt, obj, strict=field_validation() == "Strict")
            if rt.builtin and is_external():
                admit_builtin(rt, obj, strict=field_validation() == "Strict")
            if keep_status and "status" in obj:
                schema_admit(rt, obj, strict=False, subresource="status")
            for hook in self.admission_hooks:
                hook(rt, obj, None)
            now = self.clock.rfc3339()
            meta["uid"] = self._new_uid()
            if rt.group == "batch" and rt.kind == "Job":
                _default_job_selector(obj)
            meta["creationTimestamp"] = now
            meta["generation"] = 1
            for field in _DELETION_FIELDS:
                meta.pop(field, None)
            if rt.kind == "Namespace":
                obj.setdefault("spec", {"finalizers": ["kubernetes"]})
                obj["status"] = {"phase": "Active"}
            self._rv += 1
            meta["resourceVersion"] = str(self._rv)
            own = self.ownership(meta["uid"])
            if manager:
                own.record_update(None, obj, manager, "", now)
                if keep_status and rt.has_status and "status" in obj:
                    own.record_update(None, obj, manager, "status", now)
            meta["managedFields"] = own.managed_fields(rt.api_version)
            if not meta["managedFields"]:
                del meta["managedFields"]
            self._bucket(rt)[(namespace, name)] = obj
            self._record("ADDED", rt, copy.deepcopy(obj), None)
            return copy.deepcopy(obj)

    def _commit(
        self,
        rt: ResourceType,
        key: tuple[str, str],
        old: JSON,
        new: JSON,
        manager: str,
        subresource: str,
        own: Ownership | None = None,
    ) -> JSON:
        """Store ``new`` as the successor of ``old`` (both full objects); the single write path."""
        new = copy.deepcopy(new)
        old_meta = old["metadata"]
        if subresource == "status":
            status = new.get("status")
            new = copy.deepcopy(old)
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
        elif rt.has_status:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        meta = new.setdefault("metadata", {})
        for fixed in ("uid", "creationTimestamp", "name", "namespace", *_DELETION_FIELDS):
            if fixed in old_meta:
                meta[fixed] = old_meta[fixed]
            else:
                meta.pop(fixed, None)
        new["apiVersion"] = rt.api_version
        new["kind"] = rt.kind
        # custom resources: prune, default, validate against the CRD schema before anything is stored
        schema_admit(rt, new, strict=field_validation() == "Strict", subresource=subresource)
        if rt.builtin and is_external():
            admit_builtin(rt, new, strict=field_validation() == "Strict")
        meta["generation"] = old_meta.get("generation", 1) + (1 if _spec_part(new) != _spec_part(old) else 0)
        if subresource != "status":
            for hook in self.admission_hooks:
                hook(rt, new, copy.deepcopy(old))
        if _strip_volatile(new) == _strip_volatile(old):
            return copy.deepcopy(old)
        now = self.clock.rfc3339()
        ownership = own if own is not None else self.ownership(old_meta["uid"])
        if own is None and manager:
            ownership.record_update(old, new, manager, subresource, now)
        self._ownership[old_meta["uid"]] = ownership
        managed = ownership.managed_fields(rt.api_version)
        if managed:
            meta["managedFields"] = managed
        else:
            meta.pop("managedFields", None)
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and not meta.get("deletionGracePeriodSeconds"):
            self._bucket(rt).pop(key, None)
            self._record("DELETED", rt, copy.deepcopy(new), copy.deepcopy(old))
            self._collect_dependents(meta["uid"])
            return new
        self._bucket(rt)[key] = new
        self._record("MODIFIED", rt, copy.deepcopy(new), copy.deepcopy(old))
        return copy.deepcopy(new)

    def _current(self, rt: ResourceType, namespace: str, name: str) -> tuple[tuple[str, str], JSON]:
        key = (namespace if rt.namespaced else "", name)
        old = self._bucket(rt).get(key)
        if old is None:
            raise errors.not_found(rt, name)
        return key, old

    def update(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        obj: JSON,
        manager: str = "",
        subresource: str = "",
    ) -> JSON:
        """PUT semantics: replace the object (or its status); a stale resourceVersion is a 409."""
        with self.lock:
            key, old = self._current(rt, namespace, name)
            body_meta = obj.get("metadata") or {}
            if body_meta.get("name") not in (None, name):
                raise errors.bad_request("the name of the object does not match the name on the URL")
            rv = body_meta.get("resourceVersion")
            if rv in (None, "") and not rt.builtin and is_external():
                # custom resources do not allow unconditional updates (built-in types mostly do)
                raise errors.invalid(
                    rt,
                    name,
                    [
                        {
                            "reason": "FieldValueInvalid",
                            "field": "metadata.resourceVersion",
                            "message": "Invalid value: 0x0: must be specified for an update",
                        }
                    ],
                )
            if rv not in (None, "") and rv != old["metadata"]["resourceVersion"]:
                raise errors.conflict(rt, name)
            return self._commit(rt, key, old, obj, manager, subresource)

    def mutate(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        change: Callable[[JSON], JSON],
        manager: str = "",
        subresource: str = "",
        expected_rv: str | None = None,
    ) -> JSON:
        """Read-modify-write under the store lock: ``change(current_copy)`` returns the new object.

        This is how patches and the reactors write: no conflict is possible unless
        ``expected_rv`` is given and differs from the stored version."""
        with self.lock:
            key, old = self._current(rt, namespace, name)
            if expected_rv not in (None, "") and expected_rv != old["metadata"]["resourceVersion"]:
                raise errors.conflict(rt, name)
            return self._commit(rt, key, old, change(copy.deepcopy(old)), manager, subresource)

    def apply(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        applied: JSON,
        manager: str,
        force: bool,
        subresource: str = "",
    ) -> tuple[JSON, bool]:
        """Server-side apply; returns the object and whether it was created."""
        with self.lock:
            key = (namespace if rt.namespaced else "", name)
            old = self._bucket(rt).get(key)
            if old is None:
                if subresource:
                    raise errors.not_found(rt, name)
                body = copy.deepcopy(applied)
                body.setdefault("metadata", {})["name"] = name
                created = self.create(rt, namespace, body)
                own = self.ownership(created["metadata"]["uid"])
                now = self.clock.rfc3339()
                own.apply(created, applied, manager, force, subresource, now)
                return self._publish_ownership(rt, key), True
            expected = (applied.get("metadata") or {}).get("resourceVersion")
            if expected not in (None, "") and expected != old["metadata"]["resourceVersion"]:
                raise errors.conflict(rt, name)
            own = self.ownership(old["metadata"]["uid"]).copy()
            merged = own.apply(copy.deepcopy(old), applied, manager, force, subresource, self.clock.rfc3339())
            result = self._commit(rt, key, old, merged, manager, subresource, own=own)
            if result["metadata"]["resourceVersion"] == old["metadata"]["resourceVersion"]:
                self._ownership[old["metadata"]["uid"]] = own
                return self._publish_ownership(rt, key), False
            return result, False

    def _publish_ownership(self, rt: ResourceType, key: tuple[str, str]) -> JSON:
        """Write managedFields of a just-created/unchanged object without bumping its version."""
        obj = self._bucket(rt)[key]
        managed = self.ownership(obj["metadata"]["uid"]).managed_fields(rt.api_version)
        if managed:
            obj["metadata"]["managedFields"] = managed
        return copy.deepcopy(obj)

    def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        expected_uid: str | None = None,
        expected_rv: str | None = None,
        *,
        orphan: bool = False,
        grace_seconds: int | None = None,
    ) -> JSON:
        """Delete (or mark deleting, when finalizers exist, or Terminating, for a pod given a grace period: see
        the module docstring). Preconditions mismatch is a 409. ``orphan`` (propagationPolicy Orphan): dependents
        lose their ownerReference to it instead of being collected, at once (a real garbage collector does it
        asynchronously behind an ``orphan`` finalizer). ``grace_seconds`` (the request's ``gracePeriodSeconds``)
        matters for pods only."""
        with self.lock:
            key, old = self._current(rt, namespace, name)
            if orphan:
                self._orphan_dependents(old["metadata"]["uid"])
            if expected_uid and expected_uid != old["metadata"]["uid"]:
                raise errors.StatusError(
                    409,
                    f"Precondition failed: UID in precondition: {expected_uid}, "
                    f"UID in object meta: {old['metadata']['uid']}",
                    "Conflict",
                )
            if expected_rv and expected_rv != old["metadata"]["resourceVersion"]:
                raise errors.conflict(rt, name)
            if _is_pod(rt):
                return self._delete_pod(rt, key, old, grace_seconds)
            if old["metadata"].get("finalizers"):
                if old["metadata"].get("deletionTimestamp"):
                    return copy.deepcopy(old)
                return self._mark_deleting(rt, key, old, self.clock.rfc3339(), 0)
            return self._remove(rt, key, old)

    def _mark_deleting(self, rt: ResourceType, key: tuple[str, str], old: JSON, when: str, grace: int) -> JSON:
        marked = copy.deepcopy(old)
        marked["metadata"]["deletionTimestamp"] = when
        marked["metadata"]["deletionGracePeriodSeconds"] = grace
        self._rv += 1
        marked["metadata"]["resourceVersion"] = str(self._rv)
        self._bucket(rt)[key] = marked
        self._record("MODIFIED", rt, copy.deepcopy(marked), copy.deepcopy(old))
        return copy.deepcopy(marked)

    def _delete_pod(self, rt: ResourceType, key: tuple[str, str], old: JSON, requested: int | None) -> JSON:
        """Graceful deletion of a pod (the module docstring): start it, shorten it, or remove the pod."""
        meta = old["metadata"]
        if meta.get("deletionTimestamp"):
            current = meta.get("deletionGracePeriodSeconds")
            if current is None or requested is None:
                return copy.deepcopy(old)  # graceful deletion already pending: nothing to change
            period = 1 if int(requested) < 0 else int(requested)
            if period >= int(current):
                return copy.deepcopy(old)  # a grace period may only be shortened
            deadline = parse_time(meta["deletionTimestamp"]) - timedelta(seconds=int(current) - period)
        else:
            period = pod_grace_seconds(old, requested)
            deadline = self.clock.now() + timedelta(seconds=period)
        if period == 0 and not meta.get("finalizers"):
            return self._remove(rt, key, old)
        return self._mark_deleting(rt, key, old, format_time(deadline), period)

    def _remove(self, rt: ResourceType, key: tuple[str, str], old: JSON) -> JSON:
        del self._bucket(rt)[key]
        self._rv += 1
        gone = copy.deepcopy(old)
        gone["metadata"]["resourceVersion"] = str(self._rv)
        self._record("DELETED", rt, copy.deepcopy(gone), copy.deepcopy(old))
        self._ownership.pop(old["metadata"]["uid"], None)
        if rt.kind == "Namespace":
            for other in list(self._objects):
                if other.namespaced:
                    for k in [k for k in self._bucket(other) if k[0] == key[1]]:
                        if k in self._bucket(other):
                            self._remove(other, k, self._bucket(other)[k])
        self._collect_dependents(old["metadata"]["uid"])
        return gone

    def _orphan_dependents(self, owner_uid: str) -> None:
        for rt, bucket in list(self._objects.items()):
            for key, obj in list(bucket.items()):
                refs = obj["metadata"].get("ownerReferences") or []
                if any(r.get("uid") == owner_uid for r in refs):
                    meta = {k: v for k, v in obj["metadata"].items() if k != "ownerReferences"}
                    kept = [r for r in refs if r.get("uid") != owner_uid]
                    if kept:
                        meta["ownerReferences"] = kept
                    self._commit(rt, key, obj, {**obj, "metadata": meta}, "", "")

    def _live_uids(self) -> set[str]:
        return {o["metadata"]["uid"] for bucket in self._objects.values() for o in bucket.values()}

    def _collect_dependents(self, owner_uid: str) -> None:
        """Background garbage collection of dependents whose owners are all gone. Dependents with
        finalizers are only marked deleting (their controllers remove the finalizers); pods are deleted
        gracefully with their own default grace period (they go Terminating)."""
        live = self._live_uids()
        for rt, bucket in list(self._objects.items()):
            for key, obj in list(bucket.items()):
                refs = obj["metadata"].get("ownerReferences") or []
                uids = {r.get("uid") for r in refs}
                if owner_uid in uids and not (uids & live) and key in bucket:
                    if _is_pod(rt):
                        self._delete_pod(rt, key, obj, None)
                    elif obj["metadata"].get("finalizers"):
                        if not obj["metadata"].get("deletionTimestamp"):
                            self._mark_deleting(rt, key, obj, self.clock.rfc3339(), 0)
                    else:
                        self._remove(rt, key, obj)

    def all_objects(self) -> Iterable[tuple[ResourceType, JSON]]:
        with self.lock:
            return [(rt, copy.deepcopy(o)) for rt, b in self._objects.items() for o in b.values()]


def _default_job_selector(job: JSON) -> None:
    """What the real apiserver's Job strategy does on create unless ``spec.manualSelector``: select the Job's own
    pods by its uid, and put those labels (and the job name) on the pod template."""
    spec = job.setdefault("spec", {})
    if spec.get("manualSelector"):
        return
    uid, name = job["metadata"]["uid"], job["metadata"].get("name", "")
    spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    labels = spec.setdefault("template", {}).setdefault("metadata", {}).setdefault("labels", {})
    labels.update(
        {
            "batch.kubernetes.io/controller-uid": uid,
            "batch.kubernetes.io/job-name": name,
            "controller-uid": uid,
            "job-name": name,
        }
    )
