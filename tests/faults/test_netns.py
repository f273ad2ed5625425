"""The namespace kit (tests/faults/netns.py) does what it says: a process inside reaches a loopback-only service on
the host through the relay, a cut (both ways, one way) stops it, a heal lets it through again, and a loss of all
packets is a cut. Needs root; a few seconds."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
from tests.faults.netns import NetemMissing, Netns, available

PROBE = """
import socket, sys
try:
    s = socket.create_connection(("{host}", {port}), timeout=1.5)
    s.settimeout(1.5)
    s.sendall(b"ping")
    print(s.recv(16).decode())
except OSError as exc:
    print("unreachable", type(exc).__name__)
"""


@pytest.fixture(scope="module")
def echo() -> Iterator[int]:
    """An echo server on the host's loopback only."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(2)
                with contextlib.suppress(OSError):
                    conn.sendall(conn.recv(16))

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield server.getsockname()[1]
    stop.set()
    t.join()
    server.close()


@pytest.fixture
def ns() -> Iterator[Netns]:
    why = available()
    if why is not None:
        pytest.fail(f"network namespaces do not work here: {why}")
    with Netns("kit") as n:
        yield n


def probe(ns: Netns, port: int) -> str:
    code = PROBE.format(host=ns.host_ip, port=port)
    r = subprocess.run(ns.command([sys.executable, "-c", code]), capture_output=True, text=True, timeout=20)
    return r.stdout.strip() or r.stderr.strip()


def test_a_process_inside_reaches_the_host_through_the_relay_until_cut(ns: Netns, echo: int) -> None:
    port = ns.relay(echo)
    assert probe(ns, port) == "ping"
    ns.cut(port)
    assert probe(ns, port).startswith("unreachable")
    ns.heal()
    assert probe(ns, port) == "ping"
    for direction in ("out", "in"):  # one way is enough to stop a TCP exchange
        ns.cut(port, direction)
        assert probe(ns, port).startswith("unreachable"), direction
        ns.heal()
    ns.loss(1.0, port)
    assert probe(ns, port).startswith("unreachable")
    ns.heal()
    assert probe(ns, port) == "ping"


def test_delay_needs_netem_and_says_so_where_the_kernel_has_none(ns: Netns) -> None:
    try:
        ns.delay(50)
    except NetemMissing as exc:
        assert "netem" in str(exc)
        return
    ns.heal()
