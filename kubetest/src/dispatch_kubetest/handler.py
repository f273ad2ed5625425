"""HTTP request handling: routing, authorisation, faults, and the verbs on the store.

Contracts: every answer is JSON with ``Content-Type: application/json`` (what lightkube requires
to build an ``ApiError``), except log text; failures are ``Status`` objects; query booleans are
parsed like Go's ``strconv.ParseBool``; a write request runs the reactors before it is answered
when the server's ``auto_reconcile`` is on.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qs, urlsplit

import yaml

from . import errors
from .discovery import VERSION_INFO, api_versions, group_list, resource_list
from .errors import StatusError
from .params import parse_bool
from .patch import json_patch, merge_patch
from .podlog import serve_pod_log
from .rbac import Identity
from .requestctx import external_request
from .resources import SSAR, Catalogue, ResourceType
from .selectors import make_filter, parse_field_selector, parse_label_selector
from .watch import WatchDropped, WatchRequest, run_watch

if TYPE_CHECKING:
    from .control import Cluster
    from .faults import Faults
    from .front import ExtensionBackend
    from .logs import LogBook
    from .rbac import Authorizer
    from .store import Store
    from .watch import WatchHub

JSON = dict[str, Any]


@dataclass(frozen=True)
class RequestRecord:
    """One request the server answered (for tests asserting on client behaviour)."""

    method: str
    path: str
    query: str
    user: str
    code: int


@dataclass
class Target:
    """What a resource path names."""

    rt: ResourceType
    namespace: str
    name: str
    subresource: str


def _status_error_for(exc: Exception) -> StatusError:
    if isinstance(exc, StatusError):
        return exc
    return StatusError(500, f"Internal error occurred: {type(exc).__name__}: {exc}", "InternalError")


class Served(Protocol):
    """What answering a request needs of the server (:class:`~dispatch_kubetest.server.FakeAPIServer`, which makes
    the handler class and sits above it)."""

    @property
    def store(self) -> Store: ...
    @property
    def catalogue(self) -> Catalogue: ...
    @property
    def control(self) -> Cluster: ...
    @property
    def crd_backend(self) -> ExtensionBackend | None: ...
    @property
    def faults(self) -> Faults: ...
    @property
    def logs(self) -> LogBook: ...
    @property
    def rbac(self) -> Authorizer: ...
    @property
    def watches(self) -> WatchHub: ...
    @property
    def auto_reconcile(self) -> bool: ...
    @property
    def strict_validation(self) -> bool: ...
    @property
    def strategic_merge_on_crds(self) -> bool: ...
    def _record(self, rec: RequestRecord) -> None: ...


def make_handler(server: Served) -> type[BaseHTTPRequestHandler]:
    class Handler(RequestHandler):
        fake = server

    return Handler


class RequestHandler(BaseHTTPRequestHandler):
    """One connection; every request becomes a Status or a JSON answer, never a dropped connection."""

    protocol_version = "HTTP/1.1"
    server_version = "dispatch-fake-apiserver"
    fake: Served
    query: dict[str, str]
    """The request's query parameters (last value wins)."""
    code: int
    """The status code sent so far (0 before the response starts)."""
    _dry: bool
    _recorded: bool
    _method: str
    _path: str
    _raw_query: str
    _user: str

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

    def _record(self, code: int) -> None:
        """Log this request once. Plain answers are logged before their bytes leave, so a client
        that has its answer can rely on ``server.requests()``; streams when they end."""
        if not self._recorded:
            self._recorded = True
            self.fake._record(RequestRecord(self._method, self._path, self._raw_query, self._user, code))

    def _send_json(self, code: int, body: JSON, headers: dict[str, str] | None = None) -> None:
        self.send_body(code, json.dumps(body, separators=(",", ":")).encode(), "application/json", headers)

    def send_body(self, code: int, data: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        """A complete (non-streamed) answer."""
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.code = code
        self._record(code)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, err: StatusError) -> None:
        self._send_json(err.code, err.status(), err.headers)

    def start_stream(self, content_type: str, code: int = 200, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.flush()
        self.code = code

    def chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _handle(self, method: str) -> None:
        parts = urlsplit(self.path)
        self.query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        self.code = 0
        self._dry = False
        self._recorded = False
        self._method, self._path, self._raw_query, self._user = method, parts.path, parts.query, ""
        body = self._read_body() if method in ("POST", "PUT", "PATCH", "DELETE") else b""
        ident: Identity | None = None
        is_watch = False
        try:
            is_watch = method == "GET" and parse_bool(self.query.get("watch"))
            delay, fault = self.fake.faults.check(method, parts.path, is_watch)
            if delay:
                time.sleep(delay)
            ident = self.fake.rbac.identify(self.headers.get("Authorization"))
            self._user = ident.user if ident else ""
            if ident is None:
                raise StatusError(401, "Unauthorized", "Unauthorized")
            if fault is not None:
                raise fault
            backend = self.fake.crd_backend
            segs = [s for s in parts.path.split("/") if s]
            if backend is not None and backend.owns(segs):
                self._proxy(method, segs, body, ident)
                return
            mode = self.query.get("fieldValidation", "") or ("Strict" if self.fake.strict_validation else "")
            with external_request(mode):
                self._route(method, parts.path, body, ident)
        except WatchDropped:
            self._record(self.code)
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # every failure becomes a Status, never a dropped connection
            if self.code:
                self.close_connection = True
            else:
                self._send_error(_status_error_for(exc))
        finally:
            self._record(self.code)

    # ---- routing --------------------------------------------------------------------------
    def _route(self, method: str, path: str, body: bytes, ident: Identity) -> None:
        segs = [s for s in path.split("/") if s]
        cat = self.fake.catalogue
        if method == "GET" and segs in (["version"], ["version", ""]):
            self._send_json(200, VERSION_INFO)
            return
        if method == "GET" and segs == ["api"]:
            self._send_json(200, api_versions(cat))
            return
        if method == "GET" and segs == ["apis"]:
            doc = group_list(self.fake.catalogue)
            if self.fake.crd_backend is not None:
                doc["groups"].extend(self.fake.crd_backend.groups_document())
            self._send_json(200, doc)
            return
        if segs[:1] == ["api"] and len(segs) >= 2:
            group, version, rest = "", segs[1], segs[2:]
        elif segs[:1] == ["apis"] and len(segs) >= 2:
            if len(segs) == 2:
                groups = [g for g in group_list(self.fake.catalogue)["groups"] if g["name"] == segs[1]]
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
            self._send_json(200, resource_list(self.fake.catalogue, group, version))
            return
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            inner = cat.lookup(group, version, rest[2])
            if inner is not None and inner.namespaced:
                namespace, rest = rest[1], rest[2:]
        rt = cat.lookup(group, version, rest[0])
        if rt is None or len(rest) > 3:
            raise StatusError(404, "the server could not find the requested resource", "NotFound")
        target = Target(rt, namespace, rest[1] if len(rest) > 1 else "", rest[2] if len(rest) > 2 else "")
        if target.subresource and target.subresource not in rt.subresources:
            raise StatusError(404, "the server could not find the requested resource", "NotFound")
        self._dispatch(method, target, body, ident)

    def _proxy(self, method: str, segs: list[str], body: bytes, ident: Identity) -> None:
        """A request for the real server (front.py): authorised here, then forwarded as its administrator."""
        backend = self.fake.crd_backend
        assert backend is not None
        t = backend.target(segs)
        if t is not None:
            verb = self._verb_for(method, bool(t.name))
            if not self.fake.rbac.allowed(ident, verb, t.group, t.plural, t.subresource, t.namespace, t.name):
                key = f"{t.plural}/{t.subresource}" if t.subresource else t.plural
                raise errors.forbidden(ident.user, verb, f"{key}.{t.group}", t.group, t.namespace, t.name)
        backend.forward(self, method, self.path, body)

    # ---- verbs ----------------------------------------------------------------------------
    def _verb(self, method: str, target: Target) -> str:
        return self._verb_for(method, bool(target.name))

    def _verb_for(self, method: str, named: bool) -> str:
        if method == "GET":
            if named:
                return "get"
            return "watch" if parse_bool(self.query.get("watch")) else "list"
        if method == "POST":
            return "create"
        if method == "PUT":
            return "update"
        if method == "PATCH":
            return "patch"
        return "delete" if named else "deletecollection"

    def _dispatch(self, method: str, t: Target, body: bytes, ident: Identity) -> None:
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
        if not self.fake.rbac.allowed(ident, base_verb, t.rt.group, t.rt.plural, t.subresource, t.namespace, t.name):
            key = f"{t.rt.plural}/{t.subresource}" if t.subresource else t.rt.plural
            if t.rt.group:
                key = f"{key}.{t.rt.group}"
            raise errors.forbidden(ident.user, base_verb, key, t.rt.group, t.namespace, t.name)
        if t.subresource == "log":
            serve_pod_log(self, t)
            return
        self._dry = False
        dry = self.query.get("dryRun")
        if dry is not None and verb in ("create", "update", "patch", "delete", "deletecollection"):
            if dry != "All":
                raise errors.bad_request(f'dryRun: Unsupported value: "{dry}": supported values: "All"')
            self._dry = True
        with self.fake.store.dry_run() if self._dry else contextlib.nullcontext():
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
                policy = opts.get("propagationPolicy") or self.query.get("propagationPolicy") or "Background"
                if opts.get("orphanDependents") is True or parse_bool(self.query.get("orphanDependents")):
                    policy = "Orphan"
                if policy == "Foreground":
                    raise StatusError(
                        400,
                        "propagationPolicy Foreground is not modelled by dispatch_kubetest (Background and Orphan are)",
                        "BadRequest",
                    )
                grace = self._grace(opts)
                if policy not in ("Background", "Orphan"):
                    raise StatusError(
                        400, f'invalid propagationPolicy "{policy}": must be one of Orphan, Foreground, Background'
                    )
                gone = self.fake.store.delete(
                    t.rt,
                    t.namespace,
                    t.name,
                    pre.get("uid"),
                    pre.get("resourceVersion"),
                    orphan=policy == "Orphan",
                    grace_seconds=grace,
                )
                self._after_write()
                self._send_json(200, gone)
            else:  # deletecollection
                grace = self._grace(self._decode(body) if body else {})
                predicate = self._predicate(t)
                items, _ = self.fake.store.list(
                    t.rt, t.namespace if t.rt.namespaced and t.namespace else None, predicate
                )
                for item in items:
                    meta = item["metadata"]
                    try:
                        self.fake.store.delete(t.rt, meta.get("namespace", ""), meta["name"], grace_seconds=grace)
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

    def _grace(self, opts: JSON) -> int | None:
        """A delete's ``gracePeriodSeconds`` (DeleteOptions body, else query), or None when not sent."""
        raw = opts.get("gracePeriodSeconds", self.query.get("gracePeriodSeconds"))
        if raw in (None, ""):
            return None
        try:
            return int(raw)
        except (TypeError, ValueError):
            raise errors.bad_request(f'gracePeriodSeconds: Invalid value: "{raw}": must be an integer') from None

    def _after_write(self) -> None:
        # in front of the real server the controllers react on their own, by watch (controllers.py)
        if self.fake.auto_reconcile and not self._dry and self.fake.crd_backend is None:
            self.fake.control.reconcile()

    def _manager(self) -> str:
        manager = self.query.get("fieldManager")
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

    def _predicate(self, t: Target) -> Callable[[JSON], bool]:
        labels = parse_label_selector(self.query.get("labelSelector"))
        fields = parse_field_selector(self.query.get("fieldSelector"), t.rt)
        return make_filter(labels, fields, None)

    def _invalid_query(self, field: str, value: str, message: str) -> StatusError:
        cause = {"reason": "FieldValueInvalid", "message": f'Invalid value: "{value}": {message}', "field": field}
        return StatusError(
            422,
            f'ListOptions.meta.k8s.io "" is invalid: {field}: {cause["message"]}',
            "Invalid",
            {"group": "meta.k8s.io", "kind": "ListOptions", "causes": [cause]},
        )

    def _check_list_version(self) -> None:
        """``resourceVersionMatch`` on a list: NotOlderThan is served from the current state (never older);
        Exact is served at the current version, 410 below the kept history, and refused in between, because
        this server keeps no snapshots (a real one reads etcd's history)."""
        match = self.query.get("resourceVersionMatch", "")
        rv_text = self.query.get("resourceVersion", "")
        if not match:
            return
        if match not in ("NotOlderThan", "Exact"):
            raise self._invalid_query("resourceVersionMatch", match, 'supported values: "Exact", "NotOlderThan"')
        if not rv_text:
            raise self._invalid_query(
                "resourceVersionMatch", match, "resourceVersionMatch is forbidden unless resourceVersion is provided"
            )
        store = self.fake.store
        try:
            rv = int(rv_text)
        except ValueError:
            raise self._invalid_query("resourceVersion", rv_text, "must be an integer") from None
        if rv > store.resource_version:
            raise StatusError(504, f"Too large resource version: {rv}, current: {store.resource_version}", "Timeout")
        if match == "Exact" and rv != store.resource_version:
            if rv < store.oldest_resource_version:
                raise StatusError(410, f"too old resource version: {rv} ({store.oldest_resource_version})", "Expired")
            raise StatusError(
                400,
                f"resourceVersionMatch=Exact at a past resourceVersion ({rv}, current {store.resource_version}) is "
                "not modelled by dispatch_kubetest: it keeps no snapshots",
                "BadRequest",
            )

    def _list(self, t: Target) -> None:
        self._check_list_version()
        predicate = self._predicate(t)
        limit_text = self.query.get("limit")
        limit = int(limit_text) if limit_text and int(limit_text) > 0 else None
        ns = t.namespace if t.rt.namespaced and t.namespace else None
        items, rv, token = self.fake.store.list_page(t.rt, ns, predicate, limit, self.query.get("continue"))
        meta: JSON = {"resourceVersion": str(rv)}
        if token:
            meta["continue"] = token
        self._send_json(
            200,
            {"kind": f"{t.rt.kind}List", "apiVersion": t.rt.api_version, "metadata": meta, "items": items},
        )

    def _watch(self, t: Target) -> None:
        timeout = self.query.get("timeoutSeconds")
        send_initial = parse_bool(self.query.get("sendInitialEvents"))
        match = self.query.get("resourceVersionMatch", "")
        if send_initial and match != "NotOlderThan":
            raise self._invalid_query(
                "resourceVersionMatch", match, "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
            )
        if send_initial and not parse_bool(self.query.get("allowWatchBookmarks")):
            raise self._invalid_query("allowWatchBookmarks", "false", "sendInitialEvents requires allowWatchBookmarks")
        if match and not send_initial:
            raise self._invalid_query(
                "resourceVersionMatch",
                match,
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            )
        req = WatchRequest(
            rt=t.rt,
            namespace=t.namespace if t.rt.namespaced and t.namespace else None,
            predicate=self._predicate_with_ns(t),
            resource_version=self.query.get("resourceVersion"),
            allow_bookmarks=parse_bool(self.query.get("allowWatchBookmarks")),
            timeout_seconds=float(timeout) if timeout else None,
            send_initial_events=send_initial,
        )
        self.start_stream("application/json")
        self.fake.watches.opened()
        try:
            run_watch(self.fake.store, self.fake.watches, self.fake.faults, req, self.chunk)
        finally:
            self.fake.watches.closed()
        self.end_stream()

    def end_stream(self) -> None:
        """Finish a chunked answer; the request is logged before the client can see the end."""
        self._record(self.code)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _predicate_with_ns(self, t: Target) -> Callable[[JSON], bool]:
        base = self._predicate(t)
        if not (t.rt.namespaced and t.namespace):
            return base
        ns = t.namespace
        return lambda obj: (obj.get("metadata") or {}).get("namespace") == ns and base(obj)

    def _patch(self, t: Target, body: bytes) -> None:
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        store = self.fake.store
        if ctype == "application/apply-patch+yaml":
            manager = self.query.get("fieldManager")
            if not manager:
                raise StatusError(
                    422,
                    'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
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
                parse_bool(self.query.get("force")),
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
