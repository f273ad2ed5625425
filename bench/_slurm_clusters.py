"""Shared by the Slurm benches: the test clusters from clusters.json, brought up when down."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "src"))
STATE = os.environ.get("DISPATCH_TEST_STATE", "/var/lib/dispatch-test")


def clusters(names: list[str]) -> dict[str, dict[str, Any]]:
    """The descriptions of ``names``; runs scripts/slurm/up.sh first if clusters.json is missing or a cluster
    does not answer."""
    path = os.path.join(STATE, "clusters.json")

    def load() -> dict[str, Any]:
        with open(path) as f:
            return dict(json.load(f))

    if not os.path.exists(path) or not all(_answers(load().get(n, {})) for n in names):
        subprocess.run([os.path.join(ROOT, "scripts", "slurm", "up.sh")], check=True, stdout=sys.stderr)
    data = load()
    return {n: data[n] for n in names}


def _answers(desc: dict[str, Any]) -> bool:
    if not desc:
        return False
    cmd = [*desc["admin"]["command"], "squeue", "-h", "-o", "%i"]
    return subprocess.run(cmd, capture_output=True, timeout=60).returncode == 0


def settings_for(desc: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "transport": desc["transport"],
        "defaults": {"partition": desc["partitions"]["default"], "account": desc["account"]},
        "env": dict(desc.get("env") or {}),
        "preflight": {"cacheDir": "/tmp/dispatch-slurm-bench-cache"},
    }
    if desc["transport"] == "ssh":
        out["ssh"] = {
            "host": desc["host"],
            "user": desc["user"],
            "port": desc["port"],
            "identityFile": desc["identity_file"],
            "knownHostsFile": desc["known_hosts"],
        }
    return out


def admin(desc: dict[str, Any], *argv: str) -> None:
    subprocess.run([*desc["admin"]["command"], *argv], capture_output=True, timeout=120, check=False)
