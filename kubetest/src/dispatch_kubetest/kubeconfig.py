"""Write a kubeconfig that points a real client at a fake server."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml


def kubeconfig_dict(
    server_url: str,
    token: str | None = None,
    namespace: str = "default",
    context: str = "fake",
    certificate_authority: str | None = None,
) -> dict[str, Any]:
    """A kubeconfig with one cluster, user and context (current), using a bearer token if given
    and trusting ``certificate_authority`` (a PEM file path) for an https server."""
    user: dict[str, Any] = {"token": token} if token else {}
    cluster: dict[str, Any] = {"server": server_url}
    if certificate_authority:
        cluster["certificate-authority"] = certificate_authority
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": cluster}],
        "users": [{"name": context, "user": user}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context, "namespace": namespace}}],
        "current-context": context,
        "preferences": {},
    }


def write_kubeconfig(
    path: str | os.PathLike[str],
    server_url: str,
    token: str | None = None,
    namespace: str = "default",
    context: str = "fake",
    certificate_authority: str | None = None,
) -> Path:
    """Write the kubeconfig to ``path`` (mode 0600) and return the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    config = kubeconfig_dict(server_url, token, namespace, context, certificate_authority)
    target.write_text(yaml.safe_dump(config, sort_keys=False))
    target.chmod(0o600)
    return target
