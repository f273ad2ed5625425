"""Serving the dashboard: bind, print where, run uvicorn until interrupted.

Binding to a loopback address is the default. Any other address needs a token (``--no-token`` is for loopback
only), because the dashboard shows commands, names and output of every job in the records.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable

import uvicorn
from starlette.applications import Starlette

from dispatch.errors import ConfigError

LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse a non-loopback bind without a token (ConfigError naming the option)."""
    if not is_loopback(host) and not token:
        raise ConfigError(
            "--host",
            f"{host} is not a loopback address: the dashboard shows every job's command and output, so binding "
            "there needs a token (drop --no-token)",
        )


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise ConfigError("--port", f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def serve(app: Starlette, sock: socket.socket, announce: Callable[[str], None]) -> None:
    """Run ``app`` on the bound ``sock``; ``announce`` gets the base URL once listening is certain."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    announce(f"http://{shown}:{port}/")
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])
