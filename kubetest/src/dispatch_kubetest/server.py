"""``FakeAPIServer``: a Kubernetes API server over real HTTP, in a thread, on 127.0.0.1.

Start it as a context manager; point a real client at ``server.url`` (or at the kubeconfig
``server.write_kubeconfig(path)`` writes); drive and inspect the cluster through
``server.control`` (see control.py). In-process, reactors playing Trainer, JobSet, Kueue and the Job
controller run synchronously after every successful write request, before the response is sent
(``auto_reconcile=True``), or only when the test calls ``server.control.reconcile()``. In front of the real
apiextensions-apiserver (``crd_backend=``) they run as controllers instead: a background loop that watches the
front and writes through it (controllers.py), started by ``start()`` and stopped by ``stop()``.
"""

from __future__ import annotations

import ssl
import sys
import tempfile
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .clock import FakeClock
from .control import Cluster
from .crdserver import CRDAPIServer
from .faults import Faults
from .front import ExtensionBackend
from .handler import RequestRecord, make_handler
from .kubeconfig import write_kubeconfig
from .logs import LogBook
from .rbac import Authorizer
from .resources import Catalogue, ResourceType, default_catalogue
from .store import Store
from .tls import make_self_signed_cert, write_service_account
from .watch import WatchHub

JSON = dict[str, Any]


class FakeAPIServer:
    """The fake apiserver. Construct, then ``start()`` or use ``with``.

    Parameters:
        clock: the clock every timestamp comes from (a fresh ``FakeClock`` by default).
        history_window: how many change events watches can resume from (older → 410).
        strict_validation: handle every client write as ``fieldValidation=Strict`` (unknown fields of a
            custom resource are a 400 instead of being pruned) unless the request names another mode.
            Schema validation, pruning and defaulting of custom resources always run (``schema.py``).
        strategic_merge_on_crds: accept strategic merge patch on custom resources as a merge
            patch. A real apiserver answers 415 (the default here).
        bookmark_interval: seconds of silence after which a watch with bookmarks sends one.
        auto_reconcile: run the reactors after every successful write request.
        reactors: install the Trainer/JobSet/Job/Kueue/Pod reactors (False: a bare apiserver).
        tls: serve HTTPS with a throwaway self-signed certificate (``ca_cert`` is its path), for
            in-cluster service-account clients (see ``write_service_account``).
        crd_backend: the real apiextensions-apiserver (``CRDAPIServer.from_state()``): this server becomes the
            front of front.py, serving the core resources and proxying the custom-resource groups to it; the
            store then holds no custom resources. The reactors then run as controllers over HTTP (controllers.py);
            ``auto_reconcile`` does not apply (they react asynchronously; ``control.reconcile()`` waits for them).
        namespace: the namespace the control surface defaults to (created here). In front of the real server,
            which every test shares, give each world its own: its controllers watch only that namespace and only
            the cluster-scoped custom resources labelled with it (``control.WORLD_LABEL``).
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
        tls: bool = False,
        crd_backend: CRDAPIServer | None = None,
        namespace: str = "default",
    ) -> None:
        self.crd_backend: ExtensionBackend | None = None
        if crd_backend is not None:
            self.crd_backend = ExtensionBackend(crd_backend)
            catalogue = [t for t in (catalogue or default_catalogue()) if t.group not in self.crd_backend.groups]
        self.clock = clock or FakeClock()
        self.catalogue = Catalogue(catalogue or default_catalogue())
        self.store = Store(self.clock, self.catalogue, history_window)
        self.logs = LogBook(self.store)
        self.rbac = Authorizer()
        self.faults = Faults()
        self.faults.on_drop = self._on_drop
        self.watches = WatchHub(bookmark_interval)
        self.strict_validation = strict_validation
        self.strategic_merge_on_crds = strategic_merge_on_crds
        self.auto_reconcile = auto_reconcile
        self._requests: list[RequestRecord] = []
        self._requests_lock = threading.Lock()
        self.tls = tls
        self._tls_dir: tempfile.TemporaryDirectory[str] | None = None
        self.ca_cert: Path | None = None
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.control: Cluster = Cluster(self, install_reactors=reactors, namespace=namespace)

    def _on_drop(self) -> None:
        self.store.notify()
        if self.crd_backend is not None:
            self.crd_backend.drop_streams()

    # ---- lifecycle ------------------------------------------------------------------------
    def start(self) -> FakeAPIServer:
        handler = make_handler(self)
        httpd = _HTTPServer(("127.0.0.1", 0), handler)
        if self.tls:
            self._tls_dir = tempfile.TemporaryDirectory(prefix="fake-apiserver-tls-")
            cert, key = make_self_signed_cert(self._tls_dir.name)
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(cert, key)
            # handshakes happen in the handler threads, not in the accept loop
            httpd.socket = context.wrap_socket(httpd.socket, server_side=True, do_handshake_on_connect=False)
            self.ca_cert = cert
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-apiserver", daemon=True
        )
        self._thread.start()
        if self.crd_backend is not None:
            try:
                self.control.attach()
            except BaseException:
                self.stop()
                raise
        return self

    def stop(self) -> None:
        self.control.detach()
        if self._httpd is not None:
            self.faults.drop_watches()
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._tls_dir is not None:
            self._tls_dir.cleanup()
            self._tls_dir = None

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
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def write_kubeconfig(self, path: str | Path, token: str | None = None, namespace: str = "default") -> Path:
        """Write a kubeconfig for this server with bearer ``token`` (default ``kubetest-admin``, a token without
        a rule table: governed by ``rbac.default_allow``) and return its path."""
        token = token or "kubetest-admin"
        ca = str(self.ca_cert) if self.ca_cert is not None else None
        return write_kubeconfig(path, self.url, token=token, namespace=namespace, certificate_authority=ca)

    def write_service_account(self, directory: str | Path, token: str, namespace: str = "default") -> dict[str, str]:
        """Write an in-cluster service-account directory for a TLS server; returns the
        ``KUBERNETES_SERVICE_HOST``/``KUBERNETES_SERVICE_PORT`` environment a pod would have."""
        if self.ca_cert is None:
            raise RuntimeError("in-cluster clients need FakeAPIServer(tls=True)")
        write_service_account(directory, self.ca_cert, token, namespace)
        return {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(self.port)}

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
                if (method is None or r.method == method) and (path_contains is None or path_contains in r.path)
            ]


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client closing its keep-alive connection is routine, not a server error
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)
