"""TLS for the fake server: a throwaway self-signed certificate and in-cluster service-account files.

Real in-cluster clients always build ``https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT``
and trust ``ca.crt`` from the service-account directory, so testing that path needs TLS. The
certificate is made with the ``openssl`` command (present on the dev/CI image), valid for
127.0.0.1 and localhost for one day.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def make_self_signed_cert(directory: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Write ``tls.crt`` and ``tls.key`` (EC P-256) into ``directory``; return their paths."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("TLS for the fake server needs the openssl command")
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    cert, key = target / "tls.crt", target / "tls.key"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=fake-apiserver",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def write_service_account(
    directory: str | os.PathLike[str], ca_cert: str | os.PathLike[str], token: str, namespace: str
) -> Path:
    """Write ``token``, ``namespace`` and ``ca.crt`` as a pod's service-account mount has them."""
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    (target / "token").write_text(token)
    (target / "namespace").write_text(namespace)
    shutil.copyfile(ca_cert, target / "ca.crt")
    return target
