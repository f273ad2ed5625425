"""The watch streams' transport: what an informer knows of its connection, from lightkube's public API only.

lightkube's ``Client.watch`` hides its requests and responses; a ``Client`` takes an httpx transport (a public
parameter), and :class:`WatchTransport` is the one the informers give it. For each watch request it

* asks for bookmarks (``allowWatchBookmarks=true``, which ``Client.watch`` has no parameter for), so a resumed
  watch starts from a recent resourceVersion;
* sets the stream's read timeout to :attr:`Liveness.silence` (lightkube sets none): a stream that shows no life
  for that long is dead (a half-open connection) and fails, instead of blocking forever;
* tells :class:`Liveness` when a stream opens (``200``), each time bytes arrive (an event or a bookmark), and
  how it ends (cleanly, at the server's ``timeoutSeconds``; or broken);
* keeps the open response, so :meth:`Liveness.shut` can wake the thread blocked reading it.

Every other request (lists, gets) passes through untouched.
"""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx2
from lightkube.config.client_adapter import verify_cluster
from lightkube.config.kubeconfig import SingleConfig


class Liveness:
    """What one informer's watch showed of the server: when it last showed life and whether a stream is open.

    Times are kept twice: in monotonic seconds (how long ago: the bound and the silence are real durations)
    and in the backend's clock (what the evidence is stamped with). An open stream that showed life within
    ``silence`` seconds is *in sync now*: the server sends every change on it, and at least a bookmark or the
    end of the stream (at its ``timeoutSeconds``) within ``silence``. Otherwise the cache is in sync as of the
    last sign of life: a completed list, a stream's ``200``, an event or a bookmark, a stream's clean end.
    A refused request (a 401, a 403, a 5xx) is no sign of life."""

    def __init__(self, silence: float, now: Callable[[], float], *, on_open: Callable[[], None] | None = None) -> None:
        self.silence = silence
        self._now = now
        self._on_open = on_open or (lambda: None)
        self._lock = threading.Lock()
        self._contact: float | None = None
        self._contact_at: float | None = None
        self._open = False
        self._response: httpx2.Response | None = None
        self.shut_down = False

    def heard(self) -> None:
        """The server showed life now (a list completed, bytes arrived)."""
        mono, at = time.monotonic(), self._now()
        with self._lock:
            self._contact, self._contact_at = mono, at

    def opened(self, response: httpx2.Response) -> None:
        with self._lock:
            self._open = True
            self._response = response
        self.heard()
        if self.shut_down:  # shut() ran before this stream's answer arrived
            _shut(response)
        self._on_open()

    def ended(self, *, clean: bool) -> None:
        """The open stream ended: ``clean`` (the server closed it: it had sent everything) or broken."""
        with self._lock:
            was_open = self._open
            self._open = False
            self._response = None
        if clean and was_open:
            self.heard()

    def age(self) -> float | None:
        """Seconds since the cache was last known in sync (0 while a live stream is open); None before the
        first sign of life."""
        with self._lock:
            if self._contact is None:
                return None
            silent = time.monotonic() - self._contact
            return 0.0 if self._open and silent <= self.silence else silent

    def synced_at(self) -> float | None:
        """The clock time the cache was last known in sync: now while a live stream is open, else the last sign
        of life; None before the first."""
        with self._lock:
            if self._contact is None or self._contact_at is None:
                return None
            live = self._open and time.monotonic() - self._contact <= self.silence
            at = self._contact_at
        return self._now() if live else at

    def shut(self) -> None:
        """Stop: shut the open stream's socket down (closing a client does not wake a thread blocked reading
        it; shutting the socket down does), and refuse every later watch request of this transport."""
        self.shut_down = True
        with self._lock:
            response = self._response
        if response is not None:
            _shut(response)


class WatchTransport(httpx2.BaseTransport):
    """An httpx transport that reports its watch streams to a :class:`Liveness` (see the module docstring)."""

    def __init__(self, inner: httpx2.BaseTransport, live: Liveness) -> None:
        self.inner = inner
        self.live = live

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.params.get("watch") != "true":
            return self.inner.handle_request(request)
        if self.live.shut_down:
            raise httpx2.ConnectError("the watch was stopped", request=request)
        request.url = request.url.copy_merge_params({"allowWatchBookmarks": "true"})
        timeout = dict(request.extensions.get("timeout") or {})
        timeout["read"] = self.live.silence
        request.extensions["timeout"] = timeout
        response = self.inner.handle_request(request)
        if response.status_code != 200:
            return response
        tracked = httpx2.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_Tracked(response.stream, self.live),
            extensions=response.extensions,
        )
        self.live.opened(tracked)
        return tracked

    def close(self) -> None:
        self.inner.close()


class _Tracked(httpx2.SyncByteStream):
    def __init__(self, inner: Any, live: Liveness) -> None:
        self._inner = inner
        self._live = live

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self._inner:
                self._live.heard()
                yield chunk
        except BaseException:
            self._live.ended(clean=False)
            raise
        self._live.ended(clean=True)

    def close(self) -> None:
        self._live.ended(clean=False)  # after a clean end: nothing left open, so nothing changes
        close = getattr(self._inner, "close", None)
        if close is not None:
            close()


def watch_transport(conf: SingleConfig, live: Liveness) -> WatchTransport:
    """The transport of a watching client for ``conf``: TLS as lightkube sets it up for that configuration
    (the cluster's CA, a client certificate), since a client given a transport builds none of its own."""
    return WatchTransport(httpx2.HTTPTransport(verify=_tls(conf), trust_env=False), live)


_TLS_LOCK = threading.Lock()
_TLS: dict[tuple[str, ...], ssl.SSLContext] = {}


def _tls(conf: SingleConfig) -> ssl.SSLContext | bool:
    """The TLS context for ``conf`` (none for a plain-http server). Building one loads the trusted CAs (a quarter
    of a second on a loaded machine), and every informer reconnects with a new client: the context is kept per
    server, CA and client certificate (files by path and modification time, so a rotated file is read again)."""
    cluster, user = conf.cluster, conf.user
    assert user is not None, "lightkube's configurations always name a user"
    if cluster.server.startswith("http://"):
        return False
    stamps = []
    for name in (cluster.certificate_auth, user.client_cert, user.client_key):
        if name:
            path = str(conf.abs_file(name))
            with contextlib.suppress(OSError):
                path += f"@{os.stat(path).st_mtime_ns}"
            stamps.append(path)
    key = (
        cluster.server,
        str(cluster.insecure),
        cluster.certificate_auth_data or "",
        user.client_cert_data or "",
        user.client_key_data or "",
        *stamps,
    )
    with _TLS_LOCK:
        ctx = _TLS.get(key)
        if ctx is None:
            ctx = _TLS[key] = verify_cluster(cluster, user, conf.abs_file, trust_env=False)
        return ctx


def _shut(response: httpx2.Response) -> None:
    """Shut down the socket under an httpx response (wakes a thread blocked reading it)."""
    with contextlib.suppress(Exception):
        response.extensions["network_stream"].get_extra_info("socket").shutdown(socket.SHUT_RDWR)
