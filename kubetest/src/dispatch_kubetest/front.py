"""The front: one API endpoint in front of the real apiextensions-apiserver, the way kube-apiserver's aggregator
fronts an extension server.

A :class:`FakeAPIServer` made with ``crd_backend=`` serves the core resources itself (pods and their logs, nodes,
namespaces, batch Jobs, Leases, Events, ConfigMaps, SelfSubjectAccessReview) and hands every request for the
custom-resource groups (``trainer.kubeflow.org``, ``jobset.x-k8s.io``, ``kueue.x-k8s.io``) and for
``apiextensions.k8s.io`` to the real server (crdserver.py). Contracts:

- the caller is authenticated and authorised by the front (its bearer tokens and rule tables, rbac.py), as the
  aggregator does before it proxies; the request then goes to the real server as its administrator (client
  certificate). The real server's own checks (validation, pruning, defaulting, SSA, resourceVersion, watch) all
  apply; only its authorisation decision is the front's.
- status code, body and the headers a client reads (``Content-Type``, ``Warning``, ``Retry-After``, ``Audit-Id``)
  are passed through unchanged; the answer to a watch or a followed log, when it has no ``Content-Length``, is
  forwarded chunk by chunk as it arrives, never buffered; any other answer (a large one comes chunked too) is read
  whole and sent with its length.
- discovery is merged: ``/apis`` lists the front's groups and the real server's; ``/apis/<group>[/<version>]`` of a
  proxied group is the real server's document. ``/openapi/v2`` and ``/openapi/v3...`` are the real server's, so
  they describe the custom resources only (the front publishes no schemas of core types).
- the front's faults (faults.py) apply to proxied requests too: an injected failure is answered by the front, and
  ``drop_watches()`` ends proxied watch streams (cleanly, or by dropping the connection when abrupt).
- a relaying thread notices that its client went away only when it next writes (the real server's next event
  or bookmark, about once a minute) or when the front stops; until then it holds its upstream connection.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import json
import socket
import threading
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qs, urlsplit

from .crdserver import CRDAPIServer, crd_manifests

if TYPE_CHECKING:
    from email.message import Message

    from .faults import Faults

JSON = dict[str, Any]


class _Faulted(Protocol):
    @property
    def faults(self) -> Faults: ...


class _Writable(Protocol):
    def write(self, data: bytes, /) -> object: ...
    def flush(self) -> object: ...


class Relay(Protocol):
    """What forwarding needs of the request it answers (handler.py's RequestHandler, which calls it)."""

    @property
    def fake(self) -> _Faulted: ...
    @property
    def headers(self) -> Message: ...
    @property
    def wfile(self) -> _Writable: ...
    def send_body(self, code: int, data: bytes, content_type: str, headers: dict[str, str] | None = None) -> None: ...
    def start_stream(self, content_type: str, code: int = 200, headers: dict[str, str] | None = None) -> None: ...
    def chunk(self, data: bytes) -> None: ...


PASSED_HEADERS = ("Content-Type", "Warning", "Retry-After", "Audit-Id", "Location")
"""Response headers forwarded from the real server (hop-by-hop ones such as Transfer-Encoding never are)."""

EXTENSIONS_GROUP = "apiextensions.k8s.io"


@functools.cache
def _crd_groups() -> frozenset[str]:
    """The groups of the project's CRDs (parsing the CRD files takes seconds: once per process)."""
    return frozenset(crd["spec"]["group"] for crd in crd_manifests())


def _is_stream(path_and_query: str) -> bool:
    """Whether a request asks for a stream: ``watch`` or ``follow`` set true."""
    query = parse_qs(urlsplit(path_and_query).query)
    return any(v.lower() in ("true", "1") for key in ("watch", "follow") for v in query.get(key, []))


class ProxyTarget:
    """What a proxied resource path names, for the front's authorisation (the real server does the rest)."""

    def __init__(self, group: str, namespace: str, plural: str, name: str, subresource: str) -> None:
        self.group, self.namespace, self.plural, self.name, self.subresource = (
            group,
            namespace,
            plural,
            name,
            subresource,
        )


class ExtensionBackend:
    """The real apiextensions-apiserver as the front's backend for the custom-resource groups."""

    def __init__(self, server: CRDAPIServer) -> None:
        self.server = server
        self.groups: frozenset[str] = _crd_groups() | {EXTENSIONS_GROUP}
        self._streams: set[http.client.HTTPSConnection] = set()
        self._lock = threading.Lock()

    # ---- routing ----------------------------------------------------------------------------
    def owns(self, segs: list[str]) -> bool:
        """Whether a path (split on ``/``) is the real server's: a proxied group or OpenAPI."""
        if segs[:1] == ["openapi"]:
            return True
        return len(segs) >= 2 and segs[0] == "apis" and segs[1] in self.groups

    @staticmethod
    def target(segs: list[str]) -> ProxyTarget | None:
        """The resource a ``/apis/<group>/<version>/...`` path names; None for discovery and OpenAPI paths."""
        if segs[:1] != ["apis"] or len(segs) < 4:
            return None
        group, rest = segs[1], segs[3:]
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        return ProxyTarget(
            group,
            namespace,
            rest[0],
            rest[1] if len(rest) > 1 else "",
            rest[2] if len(rest) > 2 else "",
        )

    def groups_document(self) -> list[JSON]:
        """The APIGroupList entries of the proxied groups. The real server's own ``/apis`` lists only
        ``apiextensions.k8s.io`` (the aggregator learns the custom groups from the CRDs); each custom group's
        ``/apis/<group>`` document is served by it once a CRD of the group is established."""
        out: list[JSON] = []
        for group in sorted(self.groups):
            code, body = self.server.request("GET", f"/apis/{group}")
            if code == 404:
                continue  # no established CRD of this group (yet)
            if code != 200:
                raise RuntimeError(f"{self.server.url}/apis/{group} answered {code}: {body[:200]!r}")
            doc = json.loads(body)
            out.append({k: doc[k] for k in ("name", "versions", "preferredVersion") if k in doc})
        return out

    # ---- forwarding -------------------------------------------------------------------------
    def forward(self, handler: Relay, method: str, path_and_query: str, body: bytes) -> None:
        """Send one request to the real server as its administrator and relay the answer through ``handler``."""
        u = urlsplit(self.server.url)
        conn = http.client.HTTPSConnection(
            u.hostname or "127.0.0.1", u.port, context=self.server.ssl_context(), timeout=None
        )
        headers = {"Accept": handler.headers.get("Accept") or "application/json"}
        for name in ("Content-Type", "User-Agent"):
            value = handler.headers.get(name)
            if value:
                headers[name] = value
        epoch = handler.fake.faults.drop_epoch
        try:
            conn.request(method, path_and_query, body=body if body or method != "GET" else None, headers=headers)
            resp = conn.getresponse()
            passed = {k: v for k in PASSED_HEADERS if (v := resp.getheader(k)) is not None and k != "Content-Type"}
            ctype = resp.getheader("Content-Type") or "application/json"
            if resp.getheader("Content-Length") is not None or not _is_stream(path_and_query):
                # a large answer comes chunked too: only a watch or a followed log is relayed as a stream (and
                # ended by a dropped-watch fault); anything else is read whole, never cut short
                handler.send_body(resp.status, resp.read(), ctype, passed)
                return
            self._relay_stream(handler, conn, resp, ctype, passed, epoch)
        finally:
            conn.close()

    def _relay_stream(
        self,
        handler: Relay,
        conn: http.client.HTTPSConnection,
        resp: http.client.HTTPResponse,
        ctype: str,
        headers: dict[str, str],
        epoch: int,
    ) -> None:
        from .watch import WatchDropped

        faults = handler.fake.faults
        with self._lock:
            self._streams.add(conn)
        try:
            handler.start_stream(ctype, resp.status, headers)
            while True:
                if faults.drop_epoch != epoch:
                    break
                try:
                    data = resp.read1(65536)
                except (OSError, ValueError, http.client.HTTPException):
                    data = b""
                if not data:
                    break
                handler.chunk(data)
            if faults.drop_epoch != epoch and faults.drop_is_abrupt:
                raise WatchDropped()
            handler.wfile.write(b"0\r\n\r\n")
            handler.wfile.flush()
        finally:
            with self._lock:
                self._streams.discard(conn)

    def drop_streams(self) -> None:
        """End every relayed stream now (the front's ``drop_watches()``): closing the upstream socket wakes the
        relaying thread, which then ends or drops its client's stream."""
        with self._lock:
            conns = list(self._streams)
        for conn in conns:
            sock = conn.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
