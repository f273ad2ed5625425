"""``FakeAPIServer``: a Kubernetes API server over real HTTP, in a thread, on 127.0.0.1.

Start it as a context manager; point a real client at ``server.url`` (or at the kubeconfig
``server.write_kubeconfig(path)`` writes); drive and inspect the cluster through
``server.control`` (see control.py). Reactors playing Trainer, JobSet, Kueue and the Job
controller run synchronously after every successful write request, before the response is sent
(``auto_reconcile=True``), or only when the test calls ``server.control.reconcile()``.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import yaml

from . import errors
from .clock import FakeClock
from .errors import StatusError
from .faults import Faults
from .kubeconfig import write_kubeconfig
from .logs import LogBook
from .patch import json_patch, merge_patch
from .rbac import Authorizer, Identity
from .requestctx import external_request, field_validation, is_external
from .resources import POD, SSAR, Catalogue, ResourceType, default_catalogue
from .selectors import make_filter, parse_field_selector, parse_label_selector
from .store import Store
from .validation import validate_trainjob
from .watch import WatchDropped, WatchHub, WatchRequest, run_watch

if TYPE_CHECKING:
    from .control import Cluster

JSON = dict[str, Any]

VERSION_INFO = {
    "major": "1",
    "minor": "37",
    "gitVersion": "v1.37.0-dispatch-fake",
    "gitCommit": "",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.25",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def parse_bool(text: str | None) -> bool:
    """Go's ``strconv.ParseBool`` (clients send ``true``, ``True``, ``1``...)."""
    if text is None:
        return False
    if text in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False", ""):
        return False
    raise errors.bad_request(f"invalid boolean value {text!r}")


@dataclass(frozen=True)
class RequestRecord:
    """One request the server answered (for tests asserting on client behaviour)."""

    method: str
    path: str
    query: str
    user: str
    code: int


@dataclass
class _Target:
    rt: ResourceType
    namespace: str
    name: str
    subresource: str


class FakeAPIServer:
    """The fake apiserver. Construct, then ``start()`` or use ``with``.

    Parameters:
        clock: the clock every timestamp comes from (a fresh ``FakeClock`` by default).
        history_window: how many change events watches can resume from (older → 410).
        strict_validation: validate TrainJob create/update against ``kubeflow-trainer-api``
            models, unknown fields included (per request, ``fieldValidation=Strict`` does the same).
        strategic_merge_on_crds: accept strategic merge patch on custom resources as a merge
            patch. A real apiserver answers 415 (the default here).
        bookmark_interval: seconds of silence after which a watch with bookmarks sends one.
        auto_reconcile: run the reactors after every successful write request.
        reactors: install the Trainer/JobSet/Job/Kueue/Pod reactors (False: a bare apiserver).
    """

    def __init__(
        self,
        *,
        clock: FakeClock | None = None,
        history_window: int = 10_000,
        strict_validation: bool = False,
        strategic_merge_on_crds: bool = False,
        bookmark_interval: float = 1.0,
        auto_reconcile: bool = True,
        reactors: bool = True,
        catalogue: list[ResourceType] | None = None,
    ) -> None:
        from .control import Cluster

        self.clock = clock or FakeClock()
        self.catalogue = Catalogue(catalogue or default_catalogue())
        self.store = Store(self.clock, self.catalogue, history_window)
        self.logs = LogBook(self.store)
        self.rbac = Authorizer()
        self.faults = Faults()
        self.faults.on_drop = self.store.notify
        self.watches = WatchHub(bookmark_interval)
        self.strict_validation = strict_validation
        self.strategic_merge_on_crds = strategic_merge_on_crds
        self.auto_reconcile = auto_reconcile
        self._requests: list[RequestRecord] = []
        self._requests_lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.store.admission_hooks.append(self._validate)
        self.control: Cluster = Cluster(self, install_reactors=reactors)

    # ---- lifecycle ------------------------------------------------------------------------
    def start(self) -> FakeAPIServer:
        handler = _make_handler(self)
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-apiserver", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self.faults.drop_watches()
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeAPIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def write_kubeconfig(
        self, path: str | Path, token: str | None = None, namespace: str = "default"
    ) -> Path:
        """Write a kubeconfig for this server (bearer ``token`` if given) and return its path."""
        return write_kubeconfig(path, self.url, token=token, namespace=namespace)

    # ---- request log ----------------------------------------------------------------------
    def _record(self, rec: RequestRecord) -> None:
        with self._requests_lock:
            self._requests.append(rec)

    def requests(self, method: str | None = None, path_contains: str | None = None) -> list[RequestRecord]:
        """Requests answered so far, optionally filtered."""
        with self._requests_lock:
            return [
                r
                for r in self._requests
                if (method is None or r.method == method)
                and (path_contains is None or path_contains in r.path)
            ]

    # ---- admission ------------------------------------------------------------------------
    def _validate(self, rt: ResourceType, obj: JSON, old: JSON | None) -> None:
        strict = self.strict_validation or field_validation() == "Strict"
        if rt.kind == "TrainJob" and strict and is_external():
            validate_trainjob(rt, obj, reject_unknown=True)


def _status_error_for(exc: Exception) -> StatusError:
    if isinstance(exc, StatusError):
        return exc
    return StatusError(500, f"Internal error occurred: {type(exc).__name__}: {exc}", "InternalError")


def _make_handler(server: FakeAPIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        fake = server

    return Handler


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "dispatch-fake-apiserver"
    fake: FakeAPIServer

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        return

    # ---- plumbing -------------------------------------------------------------------------
    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send_json(self, code: int, body: JSON, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self._code = code

    def _send_error(self, err: StatusError) -> None:
        self._send_json(err.code, err.status(), err.headers)

    def _start_stream(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self.wfile.flush()
        self._code = 200

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _handle(self, method: str) -> None:
        parts = urlsplit(self.path)
        self._query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        self._code = 0
        body = self._read_body() if method in ("POST", "PUT", "PATCH", "DELETE") else b""
        ident: Identity | None = None
        is_watch = False
        try:
            is_watch = method == "GET" and parse_bool(self._query.get("watch"))
            delay, fault = self.fake.faults.check(method, parts.path, is_watch)
            if delay:
                time.sleep(delay)
            ident = self.fake.rbac.identify(self.headers.get("Authorization"))
            if ident is None:
                raise StatusError(401, "Unauthorized", "Unauthorized")
            if fault is not None:
                raise fault
            with external_request(self._query.get("fieldValidation", "")):
                self._route(method, parts.path, body, ident)
        except WatchDropped:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # every failure becomes a Status, never a dropped connection
            if self._code:
                self.close_connection = True
            else:
                self._send_error(_status_error_for(exc))
        finally:
            self.fake._record(
                RequestRecord(method, parts.path, parts.query, ident.user if ident else "", self._code)
            )

    # ---- routing --------------------------------------------------------------------------
    def _route(self, method: str, path: str, body: bytes, ident: Identity) -> None:
        segs = [s for s in path.split("/") if s]
        cat = self.fake.catalogue
        if method == "GET" and segs in (["version"], ["version", ""]):
            self._send_json(200, VERSION_INFO)
            return
        if method == "GET" and segs == ["api"]:
            self._send_json(
                200,
                {
                    "kind": "APIVersions",
                    "versions": ["v1"] if cat.is_served("v1") else [],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
                },
            )
            return
        if method == "GET" and segs == ["apis"]:
            self._send_json(200, self._group_list())
            return
        if segs[:1] == ["api"] and len(segs) >= 2:
            group, version, rest = "", segs[1], segs[2:]
        elif segs[:1] == ["apis"] and len(segs) >= 2:
            if len(segs) == 2:
                groups = [g for g in self._group_list()["groups"] if g["name"] == segs[1]]
                if not groups or method != "GET":
                    raise StatusError(404, "the server could not find the requested resource", "NotFound")
                self._send_json(200, {"kind": "APIGroup", "apiVersion": "v1", **groups[0]})
                return
            group, version, rest = segs[1], segs[2], segs[3:]
        else:
            raise StatusError(404, "the server could not find the requested resource", "NotFound")
        gv = f"{group}/{version}" if group else version
        if not cat.is_served(gv):
            raise StatusError(404, "the server could not find the requested resource", "NotFound")
        if not rest:
            if method != "GET":
                raise StatusError(405, "method not allowed", "MethodNotAllowed")
            self._send_json(200, self._resource_list(group, version))
            return
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            inner = cat.lookup(group, version, rest[2])
            if inner is not None and inner.namespaced:
                namespace, rest = rest[1], rest[2:]
        rt = cat.lookup(group, version, rest[0])
        if rt is None or len(rest) > 3:
            raise StatusError(404, "the server could not find the requested resource", "NotFound")
        target = _Target(rt, namespace, rest[1] if len(rest) > 1 else "", rest[2] if len(rest) > 2 else "")
        if target.subresource and target.subresource not in rt.subresources:
            raise StatusError(404, "the server could not find the requested resource", "NotFound")
        self._dispatch(method, target, body, ident)

    def _group_list(self) -> JSON:
        groups = []
        for group, versions in self.fake.catalogue.group_versions().items():
            if not group:
                continue
            entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
            groups.append({"name": group, "versions": entries, "preferredVersion": entries[0]})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def _resource_list(self, group: str, version: str) -> JSON:
        resources: list[JSON] = []
        for rt in self.fake.catalogue.served():
            if rt.group != group or rt.version != version:
                continue
            entry: JSON = {
                "name": rt.plural,
                "singularName": rt.singular,
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": list(rt.verbs),
            }
            if rt.short_names:
                entry["shortNames"] = list(rt.short_names)
            resources.append(entry)
            for sub in sorted(rt.subresources):
                verbs = ["get"] if sub == "log" else ["get", "patch", "update"]
                kind = "Pod" if sub == "log" else rt.kind
                resources.append(
                    {
                        "name": f"{rt.plural}/{sub}",
                        "singularName": "",
                        "namespaced": rt.namespaced,
                        "kind": kind,
                        "verbs": verbs,
                    }
                )
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}

    # ---- verbs ----------------------------------------------------------------------------
    def _verb(self, method: str, target: _Target) -> str:
        if method == "GET":
            if target.name:
                return "get"
            return "watch" if parse_bool(self._query.get("watch")) else "list"
        if method == "POST":
            return "create"
        if method == "PUT":
            return "update"
        if method == "PATCH":
            return "patch"
        return "delete" if target.name else "deletecollection"

    def _dispatch(self, method: str, t: _Target, body: bytes, ident: Identity) -> None:
        verb = self._verb(method, t)
        if (method == "POST" and t.name) or (not t.name and method in ("PUT", "PATCH")):
            raise StatusError(
                405,
                f"the server does not allow this method on the requested resource ({verb})",
                "MethodNotAllowed",
            )
        if t.rt.kind == "SelfSubjectAccessReview":
            if verb != "create":
                raise StatusError(
                    405, "the server does not allow this method on the requested resource", "MethodNotAllowed"
                )
            self._ssar(body, ident)
            return
        base_verb = "get" if t.subresource == "log" else verb
        if not self.fake.rbac.allowed(
            ident, base_verb, t.rt.group, t.rt.plural, t.subresource, t.namespace, t.name
        ):
            key = f"{t.rt.plural}/{t.subresource}" if t.subresource else t.rt.plural
            if t.rt.group:
                key = f"{key}.{t.rt.group}"
            raise errors.forbidden(ident.user, base_verb, key, t.rt.group, t.namespace, t.name)
        if t.subresource == "log":
            self._pod_log(t)
            return
        if verb == "get":
            self._send_json(200, self.fake.store.get(t.rt, t.namespace, t.name))
        elif verb == "list":
            self._list(t)
        elif verb == "watch":
            self._watch(t)
        elif verb == "create":
            obj = self._decode(body)
            created = self.fake.store.create(t.rt, t.namespace, obj, self._manager())
            self._after_write()
            self._send_json(201, created)
        elif verb == "update":
            obj = self._decode(body)
            updated = self.fake.store.update(t.rt, t.namespace, t.name, obj, self._manager(), t.subresource)
            self._after_write()
            self._send_json(200, updated)
        elif verb == "patch":
            self._patch(t, body)
        elif verb == "delete":
            opts = self._decode(body) if body else {}
            pre = opts.get("preconditions") or {}
            gone = self.fake.store.delete(
                t.rt, t.namespace, t.name, pre.get("uid"), pre.get("resourceVersion")
            )
            self._after_write()
            self._send_json(200, gone)
        else:  # deletecollection
            predicate = self._predicate(t)
            items, _ = self.fake.store.list(
                t.rt, t.namespace if t.rt.namespaced and t.namespace else None, predicate
            )
            for item in items:
                meta = item["metadata"]
                try:
                    self.fake.store.delete(t.rt, meta.get("namespace", ""), meta["name"])
                except StatusError as exc:
                    if exc.code != 404:
                        raise
            self._after_write()
            self._send_json(
                200,
                {
                    "kind": f"{t.rt.kind}List",
                    "apiVersion": t.rt.api_version,
                    "metadata": {"resourceVersion": str(self.fake.store.resource_version)},
                    "items": items,
                },
            )

    def _after_write(self) -> None:
        if self.fake.auto_reconcile:
            self.fake.control.reconcile()

    def _manager(self) -> str:
        manager = self._query.get("fieldManager")
        if manager:
            return manager
        agent = self.headers.get("User-Agent") or "unknown"
        return agent.split("/", 1)[0]

    def _decode(self, body: bytes, allow_yaml: bool = False) -> Any:
        ctype = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip()
        if "protobuf" in ctype or "cbor" in ctype:
            raise StatusError(
                415,
                "the body of the request was in an unknown format - accepted media types "
                "include: application/json, application/yaml",
                "UnsupportedMediaType",
            )
        try:
            if allow_yaml or ctype == "application/yaml":
                return yaml.safe_load(body.decode() or "{}")
            return json.loads(body.decode() or "{}")
        except (ValueError, yaml.YAMLError) as exc:
            raise errors.bad_request(f"the request body could not be decoded: {exc}") from exc

    def _predicate(self, t: _Target) -> Callable[[JSON], bool]:
        labels = parse_label_selector(self._query.get("labelSelector"))
        fields = parse_field_selector(self._query.get("fieldSelector"), t.rt)
        return make_filter(labels, fields, None)

    def _list(self, t: _Target) -> None:
        predicate = self._predicate(t)
        limit_text = self._query.get("limit")
        limit = int(limit_text) if limit_text and int(limit_text) > 0 else None
        ns = t.namespace if t.rt.namespaced and t.namespace else None
        items, rv, token = self.fake.store.list_page(t.rt, ns, predicate, limit, self._query.get("continue"))
        meta: JSON = {"resourceVersion": str(rv)}
        if token:
            meta["continue"] = token
        self._send_json(
            200,
            {"kind": f"{t.rt.kind}List", "apiVersion": t.rt.api_version, "metadata": meta, "items": items},
        )

    def _watch(self, t: _Target) -> None:
        timeout = self._query.get("timeoutSeconds")
        req = WatchRequest(
            rt=t.rt,
            namespace=t.namespace if t.rt.namespaced and t.namespace else None,
            predicate=self._predicate_with_ns(t),
            resource_version=self._query.get("resourceVersion"),
            allow_bookmarks=parse_bool(self._query.get("allowWatchBookmarks")),
            timeout_seconds=float(timeout) if timeout else None,
        )
        self._start_stream("application/json")
        self.fake.watches.opened()
        try:
            run_watch(self.fake.store, self.fake.watches, self.fake.faults, req, self._chunk)
        finally:
            self.fake.watches.closed()
        self._end_stream()

    def _predicate_with_ns(self, t: _Target) -> Callable[[JSON], bool]:
        base = self._predicate(t)
        if not (t.rt.namespaced and t.namespace):
            return base
        ns = t.namespace
        return lambda obj: (obj.get("metadata") or {}).get("namespace") == ns and base(obj)

    def _patch(self, t: _Target, body: bytes) -> None:
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        store = self.fake.store
        if ctype == "application/apply-patch+yaml":
            manager = self._query.get("fieldManager")
            if not manager:
                raise StatusError(
                    422,
                    'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
                    "is required for apply patch",
                    "Invalid",
                )
            applied = self._decode(body, allow_yaml=True)
            if not isinstance(applied, dict):
                raise errors.bad_request("apply patch body must be an object")
            obj, created = store.apply(
                t.rt,
                t.namespace,
                t.name,
                applied,
                manager,
                parse_bool(self._query.get("force")),
                t.subresource,
            )
            self._after_write()
            self._send_json(201 if created else 200, obj)
            return
        if ctype == "application/merge-patch+json":
            patcher: Callable[[JSON, Any], JSON] = merge_patch
        elif ctype == "application/json-patch+json":
            patcher = json_patch
        elif ctype == "application/strategic-merge-patch+json":
            if not t.rt.builtin and not self.fake.strategic_merge_on_crds:
                raise StatusError(
                    415,
                    "the body of the request was in an unknown format - accepted media types "
                    "include: application/json-patch+json, application/merge-patch+json, "
                    "application/apply-patch+yaml",
                    "UnsupportedMediaType",
                )
            patcher = merge_patch
        else:
            raise StatusError(
                415,
                f"the body of the request was in an unknown format - accepted media types "
                f"include: application/json-patch+json, application/merge-patch+json, "
                f"application/apply-patch+yaml (got {ctype!r})",
                "UnsupportedMediaType",
            )
        try:
            patch_doc = json.loads(body.decode() or "null")
        except ValueError as exc:
            raise errors.bad_request(f"the request body could not be decoded: {exc}") from exc
        expected = None
        if isinstance(patch_doc, dict):
            expected = (patch_doc.get("metadata") or {}).get("resourceVersion")
        result = store.mutate(
            t.rt,
            t.namespace,
            t.name,
            lambda cur: patcher(cur, patch_doc),
            self._manager(),
            t.subresource,
            expected_rv=expected,
        )
        self._after_write()
        self._send_json(200, result)

    def _ssar(self, body: bytes, ident: Identity) -> None:
        review = self._decode(body)
        spec = review.get("spec") or {}
        attrs = spec.get("resourceAttributes")
        if attrs is None:
            allowed = self.fake.rbac.allowed(
                ident,
                spec.get("nonResourceAttributes", {}).get("verb", "get"),
                "",
                "nonresource:" + spec.get("nonResourceAttributes", {}).get("path", ""),
            )
        else:
            allowed = self.fake.rbac.allowed(
                ident,
                attrs.get("verb", ""),
                attrs.get("group", ""),
                attrs.get("resource", ""),
                attrs.get("subresource", ""),
                attrs.get("namespace", ""),
                attrs.get("name", ""),
            )
        status: JSON = {"allowed": allowed}
        if not allowed:
            status["reason"] = "no RBAC rule of the fake server's table allows it"
        out = {
            "kind": SSAR.kind,
            "apiVersion": SSAR.api_version,
            "metadata": {"creationTimestamp": None},
            "spec": spec,
            "status": status,
        }
        self._send_json(201, out)

    def _pod_log(self, t: _Target) -> None:
        store = self.fake.store
        pod = store.get(POD, t.namespace, t.name)
        containers = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
        container = self._query.get("container")
        if not container:
            if len(containers) != 1:
                raise errors.bad_request(
                    f"a container name must be specified for pod {t.name}, "
                    f"choose one of: [{' '.join(containers)}]"
                )
            container = containers[0]
        if container not in containers:
            raise errors.bad_request(f"container {container} is not valid for pod {t.name}")
        if not _container_started(pod, container):
            raise errors.bad_request(
                f'container "{container}" in pod "{t.name}" is waiting to start: ContainerCreating'
            )
        if parse_bool(self._query.get("previous")):
            restarts = int((_container_status(pod, container) or {}).get("restartCount", 0))
            if restarts == 0:
                raise errors.bad_request(
                    f'previous terminated container "{container}" in pod "{t.name}" not found'
                )
            raise errors.bad_request("previous=true (logs of an earlier container instance) is not modelled")
        follow = parse_bool(self._query.get("follow"))
        stamps = parse_bool(self._query.get("timestamps"))
        tail_text = self._query.get("tailLines")
        lines, finished = self.fake.logs.read(t.namespace, t.name, container)
        if tail_text:
            lines = lines[-int(tail_text) :] if int(tail_text) > 0 else []
        start = len(self.fake.logs.read(t.namespace, t.name, container)[0])

        def render(items: list[tuple[str, str]]) -> bytes:
            return "".join(f"{ts} {text}\n" if stamps else f"{text}\n" for ts, text in items).encode()

        if not follow:
            data = render(lines)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self._code = 200
            return
        self._start_stream("text/plain")
        if lines:
            self._chunk(render(lines))
        epoch = self.fake.faults.drop_epoch
        uid = pod["metadata"]["uid"]
        while True:
            with store.lock:
                while True:
                    new, finished = self.fake.logs.read(t.namespace, t.name, container, start)
                    current = store.try_get(POD, t.namespace, t.name)
                    ended = (
                        finished
                        or current is None
                        or current["metadata"]["uid"] != uid
                        or _container_terminated(current, container)
                    )
                    if new or ended or self.fake.faults.drop_epoch != epoch:
                        break
                    store.changed.wait(0.25)
            if new:
                start += len(new)
                self._chunk(render(new))
            if self.fake.faults.drop_epoch != epoch:
                if self.fake.faults.drop_is_abrupt:
                    raise WatchDropped()
                break
            if ended and not new:
                break
        self._end_stream()


def _container_status(pod: JSON, container: str) -> JSON | None:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == container:
            return dict(cs)
    return None


def _container_started(pod: JSON, container: str) -> bool:
    cs = _container_status(pod, container)
    state = (cs or {}).get("state") or {}
    return "running" in state or "terminated" in state


def _container_terminated(pod: JSON, container: str) -> bool:
    cs = _container_status(pod, container)
    return "terminated" in ((cs or {}).get("state") or {})
