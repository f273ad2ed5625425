"""Debian's prometheus and promtool, run by the tests as processes of their own.

:func:`prometheus` starts a ``prometheus`` server on a free loopback port, with its configuration and its data
directory under the test's temporary directory and a short scrape and evaluation interval, waits until it is
ready, and stops it (SIGTERM, then SIGKILL) when the test is done. No systemd unit and no shared daemon is
used. A missing program fails the test loudly with the install hint, never skips it.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "prometheus"
HINT = "install Debian's prometheus package, which brings promtool (scripts/prometheus-up.sh)"


def program(name: str) -> str:
    """The path of ``prometheus`` or ``promtool``; fails the test when it is not installed."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is missing: {HINT}")
    return path


def promtool(*args: str, cwd: Path = DEPLOY) -> subprocess.CompletedProcess[str]:
    """``promtool ARGS`` in ``cwd``, its output captured."""
    return subprocess.run([program("promtool"), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Prometheus:
    """A running prometheus server, asked over its HTTP API."""

    def __init__(self, url: str) -> None:
        self.url = url

    def get(self, path: str, **params: str) -> Any:
        """The ``data`` of a successful API answer (fails the test on an error answer)."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        try:
            with urllib.request.urlopen(self.url + path + query, timeout=10) as r:
                answer = json.load(r)
        except urllib.error.HTTPError as exc:
            pytest.fail(f"{path} {params}: HTTP {exc.code}: {exc.read().decode(errors='replace')}")
        assert answer["status"] == "success", answer
        return answer["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector ``expr`` evaluates to now (``/api/v1/query``)."""
        data = self.get("/api/v1/query", query=expr)
        assert data["resultType"] == "vector", (expr, data)
        return list(data["result"])

    def values(self, expr: str, *by: str) -> dict[tuple[str, ...], float]:
        """``expr``'s samples by the values of the labels ``by`` ("" for a label a sample does not carry)."""
        return {tuple(s["metric"].get(k, "") for k in by): float(s["value"][1]) for s in self.query(expr)}

    def alerts(self) -> list[dict[str, Any]]:
        """The alerts pending or firing now (``/api/v1/alerts``)."""
        return list(self.get("/api/v1/alerts")["alerts"])


@contextmanager
def prometheus(
    tmp: Path, targets: Sequence[str], *, rule_files: Sequence[Path] = (), interval: str = "1s"
) -> Iterator[Prometheus]:
    """A prometheus server scraping ``targets`` (``host:port``) as job ``dispatch-supervisor`` every
    ``interval``, evaluating ``rule_files`` as often; stopped on exit."""
    binary = program("prometheus")
    tmp.mkdir(parents=True, exist_ok=True)
    config = tmp / "prometheus.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": interval, "scrape_timeout": interval, "evaluation_interval": interval},
                "rule_files": [str(p) for p in rule_files],
                "scrape_configs": [{"job_name": "dispatch-supervisor", "static_configs": [{"targets": list(targets)}]}],
            }
        )
    )
    log = tmp / "prometheus.log"
    for _ in range(3):  # another process may take the free port before prometheus binds it
        port = free_port()
        argv = [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ]
        with log.open("w") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        try:
            if _ready(proc, f"http://127.0.0.1:{port}"):
                yield Prometheus(f"http://127.0.0.1:{port}")
                return
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    pytest.fail(f"prometheus did not start: {log.read_text(errors='replace')[-3000:]}")


def _ready(proc: subprocess.Popen[bytes], url: str, timeout: float = 60.0) -> bool:
    """Whether ``proc`` answers ``/-/ready``; False when it exited first (a port taken meanwhile)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url + "/-/ready", timeout=2) as r:
                if r.status == 200:
                    return True
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    pytest.fail(f"prometheus at {url} was not ready after {timeout:g}s")
