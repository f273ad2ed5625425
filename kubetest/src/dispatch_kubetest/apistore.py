"""An :class:`~dispatch_kubetest.objectstore.ObjectStore` over HTTP: how the controller roles reach the front world.

:class:`APIStore` does every read and write through one API endpoint (the front of front.py: core resources served
by the project's server, custom resources by the real apiextensions-apiserver), as a controller does:

- reads come from informer caches, one :class:`Reflector` per cached kind (list, then watch from the list's
  resourceVersion with bookmarks; a 410 re-lists; a dropped stream resumes from the last version seen); a kind
  that is not cached (or not synced yet) is read with a GET;
- writes are POST (create, ``fieldManager`` = the reactor's manager), PUT with ``metadata.resourceVersion`` (spec
  and metadata) or PUT on ``/status``, retried from a fresh GET on 409 Conflict, and DELETE with
  ``propagationPolicy=Background`` (and ``gracePeriodSeconds`` when given). A change that alters nothing sends
  nothing. What the server answers is put in the cache at once (write-through), so a controller sees its own
  writes before their watch events arrive;
- the scope is one test world: namespaced kinds in its namespace only, cluster-scoped custom resources only when
  they carry the world's label (``world_label``), since one real apiextensions-apiserver serves every world;
- every effective write (one the server stored: a new resourceVersion) is counted in :attr:`writes`, which the
  controller loop reads to know whether a reconcile round changed anything.

Time: the injected clock stays the project's (``clock``); the reactors stamp conditions with it. The real server
stamps ``creationTimestamp`` (and managedFields times, ``deletionTimestamp``) from the wall clock, so
:meth:`created_at` answers, for a custom resource, the injected-clock time at which this store first saw it.
"""

from __future__ import annotations

import contextlib
import copy
import http.client
import json
import logging
import secrets
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from .clock import FakeClock, parse_time
from .errors import StatusError
from .resources import ResourceType

JSON = dict[str, Any]
log = logging.getLogger(__name__)

_VOLATILE = ("resourceVersion", "managedFields", "generation", "creationTimestamp", "uid")
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def collection_path(rt: ResourceType, namespace: str | None) -> str:
    base = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
    if rt.namespaced and namespace:
        return f"{base}/namespaces/{quote(namespace)}/{rt.plural}"
    return f"{base}/{rt.plural}"


def object_path(rt: ResourceType, namespace: str, name: str, subresource: str = "") -> str:
    path = f"{collection_path(rt, namespace if rt.namespaced else None)}/{quote(name)}"
    return f"{path}/{subresource}" if subresource else path


def _rv(obj: JSON | None) -> int:
    text = str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "0")
    return int(text) if text.isdigit() else 0


def _key(rt: ResourceType, obj: JSON) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or "") if rt.namespaced else "", str(meta.get("name") or ""))


def _without_volatile(obj: JSON) -> JSON:
    """What a spec/metadata write can change: no status, no server-set metadata, no empty metadata maps or lists
    (the server stores an empty ``annotations: {}`` as absent, so writing one changes nothing)."""
    out = {k: v for k, v in obj.items() if k != "status"}
    out["metadata"] = {
        k: v for k, v in (obj.get("metadata") or {}).items() if k not in _VOLATILE and v not in ({}, [], None)
    }
    return out


class Endpoint:
    """Where the API is and how to authenticate: base URL, bearer token, TLS trust."""

    def __init__(self, url: str, token: str, ssl_context: ssl.SSLContext | None = None, user_agent: str = "") -> None:
        self.url, self.token, self.ssl_context = url, token, ssl_context
        self.user_agent = user_agent or "dispatch-kubetest-controllers"
        u = urlsplit(url)
        self.host, self.port, self.https = u.hostname or "127.0.0.1", u.port, u.scheme == "https"

    def connect(self, timeout: float | None = 30.0) -> http.client.HTTPConnection:
        if self.https:
            return http.client.HTTPSConnection(self.host, self.port, context=self.ssl_context, timeout=timeout)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def headers(self, content_type: str | None = None) -> dict[str, str]:
        out = {"Authorization": f"Bearer {self.token}", "Accept": "application/json", "User-Agent": self.user_agent}
        if content_type:
            out["Content-Type"] = content_type
        return out


def raise_for(code: int, data: bytes, what: str) -> None:
    if code < 400:
        return
    try:
        status = json.loads(data)
    except ValueError:
        status = {}
    message = status.get("message") if isinstance(status, dict) else None
    raise StatusError(
        code, f"{what}: {message or data[:300].decode(errors='replace')}", status.get("reason"), status.get("details")
    )


class Reflector:
    """One kind's informer: a cache kept by list + watch, in a daemon thread."""

    def __init__(
        self, endpoint: Endpoint, rt: ResourceType, namespace: str | None, selector: str, on_event: Callable[[], object]
    ) -> None:
        self.endpoint, self.rt, self.namespace, self.selector = endpoint, rt, namespace, selector
        self.on_event = on_event
        self.lock = threading.Lock()
        self.items: dict[tuple[str, str], JSON] = {}
        self.gone: set[str] = set()  # uids deleted by our own writes: late events about them are stale
        self.synced = threading.Event()
        self.relists = 0
        self._stop = threading.Event()
        self._conn: http.client.HTTPConnection | None = None
        self._thread = threading.Thread(target=self._run, name=f"kubetest-reflector-{rt.plural}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        conn = self._conn
        if conn is not None and conn.sock is not None:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(2)
        self._thread.join(timeout=5)

    # ---- the cache ----------------------------------------------------------------------------------------
    def put(self, obj: JSON) -> bool:
        """Store ``obj`` unless the cache holds a newer version of it; True when it changed the cache."""
        if not (obj.get("metadata") or {}).get("name"):
            log.warning("reflector %s: not an object, not cached: %.300s", self.rt.key, obj, stack_info=True)
            return False
        key = _key(self.rt, obj)
        with self.lock:
            if (obj.get("metadata") or {}).get("uid") in self.gone:
                return False
            old = self.items.get(key)
            if old is not None and old["metadata"].get("uid") == obj["metadata"].get("uid") and _rv(old) >= _rv(obj):
                return False
            self.items[key] = obj
            return True

    def remove(self, obj: JSON, *, ours: bool = False) -> None:
        key = _key(self.rt, obj)
        with self.lock:
            old = self.items.get(key)
            if old is not None and old["metadata"].get("uid") == obj["metadata"].get("uid"):
                del self.items[key]
            if ours:
                self.gone.add(str(obj["metadata"].get("uid")))

    def snapshot(self) -> list[JSON]:
        with self.lock:
            return [copy.deepcopy(o) for _, o in sorted(self.items.items())]

    def find(self, namespace: str, name: str) -> JSON | None:
        with self.lock:
            obj = self.items.get((namespace if self.rt.namespaced else "", name))
            return copy.deepcopy(obj) if obj is not None else None

    # ---- list and watch -----------------------------------------------------------------------------------
    def _query(self, **extra: str) -> str:
        params = {"labelSelector": self.selector} if self.selector else {}
        params.update(extra)
        return collection_path(self.rt, self.namespace) + ("?" + urlencode(params) if params else "")

    def _fetch(self) -> tuple[list[JSON], str]:
        conn = self.endpoint.connect()
        try:
            conn.request("GET", self._query(), headers=self.endpoint.headers())
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        raise_for(resp.status, data, f"list {self.rt.key}")
        body = json.loads(data)
        items = body.get("items") or []
        for o in items:
            o.setdefault("apiVersion", self.rt.api_version)
            o.setdefault("kind", self.rt.kind)
        return items, str((body.get("metadata") or {}).get("resourceVersion") or "")

    def _list(self) -> str:
        items, rv = self._fetch()
        bad = [o for o in items if not (o.get("metadata") or {}).get("name")]
        if bad:
            log.warning("reflector %s: list items that are not objects: %.300s", self.rt.key, bad)
            items = [o for o in items if o not in bad]
        with self.lock:
            self.items = {_key(self.rt, o): o for o in items}
        return rv

    def resync(self) -> bool:
        """Bring the cache up to a fresh LIST (objects newer than the cache's, deletions the list shows) without
        waiting for their watch events; True when the cache changed. Used by ``settle()`` as a barrier: what
        another client wrote before it is in the cache before the controllers' quiescent round."""
        items, rv = self._fetch()
        list_rv = int(rv) if rv.isdigit() else 0
        changed = False
        for obj in items:
            changed = self.put(obj) or changed
        listed = {_key(self.rt, o) for o in items}
        with self.lock:
            for key in [k for k, o in self.items.items() if k not in listed and _rv(o) <= list_rv]:
                del self.items[key]
                changed = True
        return changed

    def _watch(self, rv: str) -> str | None:
        """Follow one watch stream from ``rv``; answers the version to resume from (None: re-list)."""
        conn = self.endpoint.connect(timeout=None)
        self._conn = conn
        try:
            path = self._query(watch="true", resourceVersion=rv, allowWatchBookmarks="true", timeoutSeconds="300")
            conn.request("GET", path, headers=self.endpoint.headers())
            resp = conn.getresponse()
            if resp.status == 410:
                return None
            if resp.status >= 400:
                raise_for(resp.status, resp.read(), f"watch {self.rt.key}")
            while not self._stop.is_set():
                line = resp.readline()
                if not line:
                    return rv
                if not line.strip():
                    continue
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    return None if obj.get("code") == 410 else rv
                if event.get("type") not in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK") or "metadata" not in obj:
                    log.warning("reflector %s: unexpected watch event %.300s", self.rt.key, line)
                    return None
                rv = str(obj["metadata"].get("resourceVersion") or rv)
                if event.get("type") == "BOOKMARK":
                    continue
                obj.setdefault("apiVersion", self.rt.api_version)
                obj.setdefault("kind", self.rt.kind)
                if event.get("type") == "DELETED":
                    self.remove(obj)
                else:
                    self.put(obj)
                self.on_event()
            return rv
        finally:
            self._conn = None
            conn.close()

    def _run(self) -> None:
        rv: str | None = None
        while not self._stop.is_set():
            try:
                if rv is None:
                    rv = self._list()
                    if self.synced.is_set():
                        self.relists += 1
                    self.synced.set()
                    self.on_event()
                rv = self._watch(rv)
            except (OSError, ValueError, http.client.HTTPException, StatusError) as exc:
                if self._stop.is_set():
                    return
                log.debug("reflector %s: %s", self.rt.key, exc)
                time.sleep(0.05)
            except Exception:  # never die silently with a stale cache: say so, then start over from a list
                log.exception("reflector %s failed; re-listing", self.rt.key)
                rv = None
                time.sleep(0.05)


class APIStore:
    """The ObjectStore of the front world: reads from informer caches (or GET), writes over HTTP.

    ``cached``: the kinds kept by reflectors (start them with :meth:`start`); ``namespace``: the world's namespace
    (namespaced kinds are read and watched there only); ``world_label``: ``(key, value)`` a cluster-scoped custom
    resource must carry to be cached (None: every one); ``wall_clock_groups``: the API groups whose objects the
    real server stamps (see :meth:`created_at`); ``on_event``: called after every watch event applied."""

    def __init__(
        self,
        endpoint: Endpoint,
        clock: FakeClock,
        *,
        namespace: str,
        cached: Iterable[ResourceType] = (),
        world_label: tuple[str, str] | None = None,
        wall_clock_groups: frozenset[str] = frozenset(),
        on_event: Callable[[], object] | None = None,
    ) -> None:
        self.endpoint, self.clock, self.namespace = endpoint, clock, namespace
        self.world_label = world_label
        self.wall_clock_groups = wall_clock_groups
        self.on_event = on_event or (lambda: None)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._first_seen: dict[str, datetime] = {}
        self.writes: list[str] = []
        """Effective writes since the caller last cleared it: ``"<verb> <kind> <namespace>/<name>"``."""
        self.reflectors: dict[ResourceType, Reflector] = {}
        for rt in cached:
            selector = ""
            if not rt.namespaced and not rt.builtin and world_label is not None:
                selector = f"{world_label[0]}={world_label[1]}"
            self.reflectors[rt] = Reflector(endpoint, rt, namespace if rt.namespaced else None, selector, self._event)

    def _event(self) -> None:
        self.on_event()

    # ---- lifecycle ----------------------------------------------------------------------------------------
    def start(self) -> None:
        for r in self.reflectors.values():
            r.start()

    def resync(self, kinds: Iterable[ResourceType]) -> None:
        """Resync the reflectors of ``kinds`` from fresh LISTs (see ``Reflector.resync``)."""
        if any(self.reflectors[rt].resync() for rt in kinds if rt in self.reflectors):
            self.on_event()

    def wait_synced(self, timeout: float) -> list[str]:
        """Wait for every reflector's first list; answers the kinds still not synced."""
        deadline = time.monotonic() + timeout
        for r in self.reflectors.values():
            r.synced.wait(max(0.0, deadline - time.monotonic()))
        return [r.rt.key for r in self.reflectors.values() if not r.synced.is_set()]

    def stop(self) -> None:
        for r in self.reflectors.values():
            r.stop()
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()

    # ---- HTTP ---------------------------------------------------------------------------------------------
    def request(self, method: str, path: str, body: JSON | None = None, what: str = "") -> JSON:
        """One request on this thread's keep-alive connection; a StatusError for any 4xx/5xx answer."""
        data = None if body is None else json.dumps(body).encode()
        for attempt in range(2):
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = self._local.conn = self.endpoint.connect()
            try:
                conn.request(
                    method, path, body=data, headers=self.endpoint.headers("application/json" if data else None)
                )
                resp = conn.getresponse()
                raw = resp.read()
                break
            except (OSError, http.client.HTTPException):
                conn.close()
                self._local.conn = None
                if attempt:
                    raise
        raise_for(resp.status, raw, what or f"{method} {path}")
        out: JSON = json.loads(raw) if raw else {}
        return out

    def _remember(self, rt: ResourceType, obj: JSON) -> None:
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        if uid:
            with self._lock:
                self._first_seen.setdefault(uid, self.clock.now())
        r = self.reflectors.get(rt)
        if r is not None:
            r.put(copy.deepcopy(obj))

    def _wrote(self, verb: str, rt: ResourceType, obj: JSON) -> None:
        meta = obj.get("metadata") or {}
        with self._lock:
            self.writes.append(f"{verb} {rt.kind} {meta.get('namespace') or ''}/{meta.get('name')}".replace(" /", " "))

    def take_writes(self) -> list[str]:
        with self._lock:
            out, self.writes = self.writes, []
        return out

    # ---- reads --------------------------------------------------------------------------------------------
    def fetch(self, rt: ResourceType, namespace: str, name: str) -> JSON | None:
        """A GET, bypassing the cache (None when it does not exist)."""
        try:
            obj = self.request("GET", object_path(rt, namespace or self.namespace, name), what=f"get {rt.key} {name}")
        except StatusError as exc:
            if exc.code == 404:
                return None
            raise
        self._remember(rt, obj)
        return obj

    def fetch_list(self, rt: ResourceType, namespace: str | None = None, labels: str | None = None) -> list[JSON]:
        """A LIST, bypassing the cache; ``namespace`` None means the world's namespace."""
        path = collection_path(rt, namespace or self.namespace)
        if labels:
            path += "?" + urlencode({"labelSelector": labels})
        body = self.request("GET", path, what=f"list {rt.key}")
        items = body.get("items") or []
        for o in items:
            o.setdefault("apiVersion", rt.api_version)
            o.setdefault("kind", rt.kind)
        return sorted(items, key=lambda o: _key(rt, o))

    def try_get(self, rt: ResourceType, namespace: str, name: str) -> JSON | None:
        r = self.reflectors.get(rt)
        if r is not None and r.synced.is_set():
            return r.find(namespace or self.namespace, name)
        return self.fetch(rt, namespace, name)

    def get(self, rt: ResourceType, namespace: str, name: str) -> JSON:
        obj = self.try_get(rt, namespace, name)
        if obj is None:
            raise StatusError(404, f'{rt.key} "{name}" not found', "NotFound")
        return obj

    def list(self, rt: ResourceType, namespace: str | None = None) -> tuple[list[JSON], Any]:
        r = self.reflectors.get(rt)
        if r is not None and r.synced.is_set():
            items = r.snapshot()
            if namespace and rt.namespaced:
                items = [o for o in items if o["metadata"].get("namespace") == namespace]
            return items, None
        return self.fetch_list(rt, namespace), None

    def created_at(self, obj: JSON) -> datetime:
        group = str(obj.get("apiVersion") or "").rpartition("/")[0]
        if group not in self.wall_clock_groups:
            return parse_time(obj["metadata"]["creationTimestamp"])
        uid = str(obj["metadata"].get("uid") or "")
        with self._lock:
            return self._first_seen.setdefault(uid, self.clock.now())

    def random_suffix(self, seed: str, length: int = 5) -> str:
        return "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(length))

    # ---- writes -------------------------------------------------------------------------------------------
    def _scoped(self, rt: ResourceType, obj: JSON) -> None:
        if self.world_label is not None and not rt.namespaced and not rt.builtin:
            labels = obj.setdefault("metadata", {}).setdefault("labels", {})
            labels.setdefault(*self.world_label)

    def create(
        self, rt: ResourceType, namespace: str, obj: JSON, manager: str = "", *, keep_status: bool = False
    ) -> JSON:
        body = copy.deepcopy(obj)
        body["apiVersion"], body["kind"] = rt.api_version, rt.kind
        meta = body.setdefault("metadata", {})
        ns = (namespace or self.namespace) if rt.namespaced else ""
        if rt.namespaced:
            meta["namespace"] = ns
        self._scoped(rt, body)
        status = body.pop("status", None) if rt.has_status else None
        path = collection_path(rt, ns) + ("?" + urlencode({"fieldManager": manager}) if manager else "")
        created = self.request("POST", path, body, what=f"create {rt.key} {meta.get('name', '')}")
        self._remember(rt, created)
        self._wrote("create", rt, created)
        if keep_status and status is not None:
            created = self._put(rt, created, dict(created, status=status), manager, "status")
        return created

    def _put(self, rt: ResourceType, cur: JSON, new: JSON, manager: str, subresource: str) -> JSON:
        meta = cur["metadata"]
        body = copy.deepcopy(new)
        body["metadata"]["resourceVersion"] = meta["resourceVersion"]
        path = object_path(rt, meta.get("namespace", ""), meta["name"], subresource)
        if manager:
            path += "?" + urlencode({"fieldManager": manager})
        stored = self.request(
            "PUT", path, body, what=f"update {rt.key} {meta['name']}{'/' + subresource if subresource else ''}"
        )
        self._remember(rt, stored)
        if _rv(stored) != _rv(cur):
            self._wrote("status" if subresource else "update", rt, stored)
        return stored

    def mutate(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        change: Callable[[JSON], JSON],
        manager: str = "",
        subresource: str = "",
    ) -> JSON:
        ns = (namespace or self.namespace) if rt.namespaced else ""
        cur = self.try_get(rt, ns, name) or self.fetch(rt, ns, name)  # a cache miss may be an object not seen yet
        for _ in range(10):
            if cur is None:
                raise StatusError(404, f'{rt.key} "{name}" not found', "NotFound")
            new = change(copy.deepcopy(cur))
            if subresource == "status":
                if new.get("status") == cur.get("status"):
                    return cur
            elif _without_volatile(new) == _without_volatile(cur):
                return cur
            try:
                return self._put(rt, cur, new, manager, subresource)
            except StatusError as exc:
                if exc.code != 409:
                    raise
            cur = self.fetch(rt, ns, name)
        raise StatusError(409, f"{rt.key} {name}: still conflicting after 10 attempts", "Conflict")

    def delete(self, rt: ResourceType, namespace: str, name: str, *, grace_seconds: int | None = None) -> JSON:
        ns = (namespace or self.namespace) if rt.namespaced else ""
        query = {"propagationPolicy": "Background"}
        if grace_seconds is not None:
            query["gracePeriodSeconds"] = str(grace_seconds)
        path = object_path(rt, ns, name) + "?" + urlencode(query)
        r = self.reflectors.get(rt)
        before = r.find(ns, name) if r is not None else None
        out = self.request("DELETE", path, what=f"delete {rt.key} {name}")
        out_meta = out.get("metadata") or {}
        held = out_meta.get("finalizers") or out_meta.get("deletionGracePeriodSeconds")
        kept = bool(out_meta.get("deletionTimestamp")) and bool(held)
        if out.get("kind") == rt.kind and kept:
            self._remember(rt, out)  # kept by a finalizer, marked deleting, or a pod Terminating
            if before is not None and _rv(before) == _rv(out):
                return out  # it was deleting already: nothing changed
        elif r is not None and before is not None:
            r.remove(before, ours=True)
        self._wrote("delete", rt, {"metadata": {"namespace": ns, "name": name}})
        return out
