"""Test support: the Kubeflow Trainer's status server, over HTTPS, in front of the test cluster.

The test API server runs no Trainer, so this plays the part of the Trainer's ``TrainJobStatus`` status server
(``pkg/statusserver`` of Trainer v2.3): ``POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/<ns>/trainjobs/
<name>/status`` with a bearer token and an ``UpdateTrainJobStatusRequest`` body; a request without the right
token is 403, a body that is not one is 422, an unknown TrainJob 404; an accepted one replaces the TrainJob's
``status.trainerStatus`` (the Trainer applies it with its own field manager) and echoes the body.

:meth:`StatusServer.pod_env` is the environment the Trainer gives a trainer container (the URL, the CA file, the
token file), for :func:`dispatch.job.progress` to find.
"""

from __future__ import annotations

import json
import re
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from dispatch_kubetest.resources import TRAINJOB
from dispatch_kubetest.tls import make_self_signed_cert

from .harness import FakeCluster

PATH = re.compile(r"^/apis/trainer\.kubeflow\.org/v1alpha1/namespaces/([^/]+)/trainjobs/([^/]+)/status$")


class StatusServer:
    def __init__(self, cluster: FakeCluster, directory: Path, token: str = "pod-token") -> None:
        self.cluster = cluster
        self.token = token
        self.accepted: list[dict[str, Any]] = []
        cert, key = make_self_signed_cert(directory / "status-tls")
        self.ca = cert
        self.token_file = directory / "status-token"
        self.token_file.write_text(token + "\n")
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                match = PATH.match(self.path)
                if match is None:
                    return self._reply(404, {"message": "Not found"})
                if self.headers.get("Authorization") != f"Bearer {outer.token}":
                    return self._reply(403, {"message": "Forbidden"})
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                except ValueError:
                    return self._reply(422, {"message": "Invalid payload"})
                status = body.get("trainerStatus") if isinstance(body, dict) else None
                if status is None:
                    return self._reply(200, body)
                ns, name = match.groups()
                with outer.cluster._lock:
                    if outer.cluster.control.get(TRAINJOB, name, ns) is None:
                        return self._reply(404, {"message": "Train job not found"})
                    outer.cluster.control.patch(
                        TRAINJOB, name, {"status": {"trainerStatus": None}}, namespace=ns, subresource="status"
                    )
                    outer.cluster.control.patch(
                        TRAINJOB, name, {"status": {"trainerStatus": status}}, namespace=ns, subresource="status"
                    )
                outer.accepted.append(body)
                return self._reply(200, body)

            def _reply(self, code: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, trainjob: str) -> str:
        port = self.httpd.server_address[1]
        return f"https://127.0.0.1:{port}/apis/trainer.kubeflow.org/v1alpha1/namespaces/{self.cluster.ns}/trainjobs/{trainjob}/status"

    def pod_env(self, trainjob: str) -> dict[str, str]:
        return {
            "KUBEFLOW_TRAINER_SERVER_URL": self.url(trainjob),
            "KUBEFLOW_TRAINER_SERVER_CA_CERT": str(self.ca),
            "KUBEFLOW_TRAINER_SERVER_TOKEN": str(self.token_file),
        }

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
