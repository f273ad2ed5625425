"""A network namespace for one test: processes inside it reach the host over a veth pair the test can cut.

:class:`Netns` makes a namespace ``dspnf-<tag>`` and a veth pair (``dnf<tag>h`` on the host, ``dnf<tag>n``
inside) on a /30 of its own in 10.213.0.0/16, and removes both on :meth:`Netns.close` (deleting the namespace
deletes the pair). Nothing of the host's own networking is touched: every rule the cuts add lives in the
namespace's own netfilter tables (iptables, nf_tables backend), and the host side only gains the veth's address.

How a process inside reaches the host's services:

* :meth:`Netns.forward` for a service listening on every address of the host (slurmctld, slurmdbd): connections
  the process makes to ``127.0.0.1:PORT`` inside are sent to the host's end of the veth (DNAT in the namespace,
  with ``route_localnet`` set in the namespace only), so a ``slurm.conf`` naming ``localhost`` works unchanged;
* :meth:`Netns.relay` for a service listening on the host's loopback only (the test PostgreSQL): a TCP relay in
  the test process listens on the host's end of the veth and connects to ``127.0.0.1:PORT``; the service sees a
  loopback client, as it would from the host.

The faults, each on the namespace's traffic to one host port or to all of it:

* :meth:`Netns.cut` drops packets both ways, or one way (``out``: what the process sends is lost; ``in``: what
  it is sent is lost), until :meth:`Netns.heal`. A connection open across a cut hangs (TCP retransmits) and
  carries on after the heal if it did not time out meanwhile;
* :meth:`Netns.loss` drops that share of packets each way at random (``-m statistic``);
* :meth:`Netns.delay` needs the kernel's ``netem`` qdisc; it raises :class:`NetemMissing` where the kernel has
  none (this test machine's: ``CONFIG_NET_SCH_NETEM`` is not set).

Needs root and Debian's iproute2 and iptables. :func:`available` says whether namespaces work here, and why not.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import subprocess
import threading
import zlib
from collections.abc import Sequence

SUBNET = "10.213"


class NetnsError(RuntimeError):
    """A command that sets up or changes the namespace failed (the message names it and what it printed)."""


class NetemMissing(NetnsError):
    """The kernel has no ``netem`` qdisc: delay (and netem's loss) cannot be applied."""


def run(*argv: str) -> str:
    """Run ``argv``; its standard output, or NetnsError naming the command and its error."""
    r = subprocess.run(argv, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise NetnsError(f"`{' '.join(argv)}` failed ({r.returncode}): {r.stderr.strip() or r.stdout.strip()}")
    return r.stdout


def available() -> str | None:
    """None when a namespace with a veth pair can be made here; otherwise why not (for a skip or a failure)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "iptables"):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode != 0:
            return f"{tool} is not installed (Debian: iproute2, iptables)"
    try:
        with Netns("probe"):
            pass
    except NetnsError as exc:
        return str(exc)
    return None


class Netns:
    """One namespace and its veth pair (see the module docstring). ``tag``: a short name (the interface names
    take at most 15 characters); two namespaces made at once need different tags."""

    def __init__(self, tag: str) -> None:
        tag = tag[:6]
        self.name = f"dspnf-{tag}"
        self.host_if, self.ns_if = f"dnf{tag}h", f"dnf{tag}n"
        block = zlib.crc32(tag.encode()) % 16000 * 4  # a /30 per tag
        self.host_ip = f"{SUBNET}.{block // 256}.{block % 256 + 1}"
        self.ns_ip = f"{SUBNET}.{block // 256}.{block % 256 + 2}"
        self._relays: list[_Relay] = []
        self._open = False

    def __enter__(self) -> Netns:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> None:
        with contextlib.suppress(NetnsError):  # left over by a test that was killed
            run("ip", "netns", "del", self.name)
        run("ip", "netns", "add", self.name)
        self._open = True
        try:
            run("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
            run("ip", "link", "set", self.ns_if, "netns", self.name)
            run("ip", "addr", "add", f"{self.host_ip}/30", "dev", self.host_if)
            run("ip", "link", "set", self.host_if, "up")
            self.ip("addr", "add", f"{self.ns_ip}/30", "dev", self.ns_if)
            self.ip("link", "set", self.ns_if, "up")
            self.ip("link", "set", "lo", "up")
            self.exec("sysctl", "-q", "-w", "net.ipv4.conf.all.route_localnet=1")
            # a forwarded loopback connection leaves with the namespace's own address, so answers come back
            self.iptables("-t", "nat", "-A", "POSTROUTING", "-d", self.host_ip, "-j", "SNAT", "--to-source", self.ns_ip)
        except NetnsError:
            self.close()
            raise

    def close(self) -> None:
        for relay in self._relays:
            relay.close()
        self._relays = []
        if self._open:
            with contextlib.suppress(NetnsError):
                run("ip", "netns", "del", self.name)  # takes the veth pair with it
            self._open = False
        with contextlib.suppress(NetnsError):
            run("ip", "link", "del", self.host_if)  # only if the namespace went without it

    # ----- commands inside ----------------------------------------------------------------------------------

    def ip(self, *args: str) -> str:
        return run("ip", "-n", self.name, *args)

    def exec(self, *argv: str) -> str:
        return run("ip", "netns", "exec", self.name, *argv)

    def iptables(self, *args: str) -> str:
        return self.exec("iptables", "-w", *args)

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside the namespace (for ``subprocess.Popen``; the environment passes through)."""
        return ["ip", "netns", "exec", self.name, *argv]

    # ----- reaching the host ----------------------------------------------------------------------------------

    def forward(self, port: int) -> None:
        """Send connections to ``127.0.0.1:port`` inside to the host's ``port`` (a service listening on every
        address of the host)."""
        to = f"{self.host_ip}:{port}"
        self.iptables("-t", "nat", "-A", "OUTPUT", "-d", "127.0.0.1", "-p", "tcp", "--dport", str(port), "-j", "DNAT",
                      "--to-destination", to)  # fmt: skip

    def relay(self, port: int) -> int:
        """Relay connections made inside to the host's end of the veth, on the port returned, to the host's
        ``127.0.0.1:port`` (a service listening on the loopback only)."""
        relay = _Relay(self.host_ip, port)
        self._relays.append(relay)
        return relay.port

    # ----- faults -----------------------------------------------------------------------------------------------

    def _match(self, port: int | None, direction: str) -> list[list[str]]:
        """The iptables rule heads (chain and match) for the namespace's traffic with the host (on ``port``)."""
        out, back = ["OUTPUT", "-d", self.host_ip], ["INPUT", "-s", self.host_ip]
        if port is not None:
            out += ["-p", "tcp", "--dport", str(port)]
            back += ["-p", "tcp", "--sport", str(port)]
        if direction not in ("both", "out", "in"):
            raise ValueError(f"direction {direction!r}: both, out or in")
        return [r for r, d in ((out, "out"), (back, "in")) if direction in ("both", d)]

    def cut(self, port: int | None = None, direction: str = "both") -> None:
        """Drop the namespace's packets to (``out``), from (``in``) or to and from (``both``) the host, on
        ``port`` (a host port: the relay's for a relayed service) or all of them, until :meth:`heal`."""
        for head in self._match(port, direction):
            self.iptables("-I", *head, "-j", "DROP")

    def loss(self, share: float, port: int | None = None, direction: str = "both") -> None:
        """Drop ``share`` (0..1) of the packets at random, as :meth:`cut` names them, until :meth:`heal`."""
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"a loss of {share} is not a share")
        for head in self._match(port, direction):
            self.iptables("-I", *head, "-m", "statistic", "--mode", "random", "--probability", f"{share:.4f}",
                          "-j", "DROP")  # fmt: skip

    def delay(self, ms: float) -> None:
        """Delay every packet the namespace sends by ``ms`` (netem); NetemMissing where the kernel has none."""
        try:
            self.exec("tc", "qdisc", "replace", "dev", self.ns_if, "root", "netem", "delay", f"{ms:g}ms")
        except NetnsError as exc:
            if "unknown" in str(exc).lower():
                raise NetemMissing(f"no netem qdisc in this kernel: {exc}") from None
            raise

    def heal(self) -> None:
        """Undo every cut, loss and delay."""
        self.iptables("-F", "INPUT")
        self.iptables("-F", "OUTPUT")
        with contextlib.suppress(NetnsError):  # no qdisc was set
            self.exec("tc", "qdisc", "del", "dev", self.ns_if, "root")


class _Relay:
    """A TCP relay in this process: accepts on ``host:<free port>``, connects each to ``127.0.0.1:target``."""

    def __init__(self, host: str, target: int) -> None:
        self.target = target
        self._server = socket.create_server((host, 0))
        self.port: int = self._server.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=f"relay-{self.port}", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self._server, selectors.EVENT_READ)
        peers: dict[socket.socket, socket.socket] = {}
        while not self._stop.is_set():
            for key, _ in sel.select(timeout=0.2):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._server:
                    client, _addr = self._server.accept()
                    try:
                        upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
                    except OSError:
                        client.close()
                        continue
                    peers[client], peers[upstream] = upstream, client
                    sel.register(client, selectors.EVENT_READ)
                    sel.register(upstream, selectors.EVENT_READ)
                    continue
                other = peers.get(sock)
                try:
                    data = sock.recv(65536)
                except OSError:
                    data = b""
                if data and other is not None:
                    with contextlib.suppress(OSError):
                        other.sendall(data)
                        continue
                for s in (sock, other):
                    if s is not None and s in peers:
                        sel.unregister(s)
                        peers.pop(s, None)
                        s.close()
        for s in list(peers):
            s.close()
        self._server.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


__all__ = ["NetemMissing", "Netns", "NetnsError", "available", "run"]
