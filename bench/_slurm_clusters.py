"""Shared by the Slurm benches: the test clusters from clusters.json, brought up when down."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.environ.get("DISPATCH_BENCH_SRC") or os.path.join(ROOT, "src"))  # the code measured

from dispatch.slurm import harness as shipped  # noqa: E402

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
    """The shipped harness's adapter settings, with the benches' own preflight cache."""
    return shipped.settings_for(desc, preflight={"cacheDir": "/tmp/dispatch-slurm-bench-cache"})


def admin(desc: dict[str, Any], *argv: str) -> None:
    """An administrator's Slurm command whose failure does not matter (clean-up)."""
    shipped.admin(desc, *argv, check=False)


def toml_table(prefix: str, data: dict[str, Any]) -> list[str]:
    """``data`` as TOML lines under table ``prefix`` (nested dicts become sub-tables)."""
    lines = [f"[{prefix}]"]
    subs = []
    for k, v in data.items():
        if isinstance(v, dict):
            subs.append((k, v))
        else:
            lines.append(f"{k} = {json.dumps(v)}")
    for k, v in subs:
        lines += toml_table(f"{prefix}.{k}", v)
    return lines


def cli_env(home: str, name: str, settings: dict[str, Any]) -> dict[str, str]:
    """The environment of a fresh ``dispatch`` process whose config (under ``home``) holds cluster ``name``."""
    conf = os.path.join(home, "config", "dispatch")
    os.makedirs(conf)
    with open(os.path.join(conf, "config.toml"), "w") as f:
        lines = [
            *toml_table(f"clusters.{name}", {"adapter": "slurm"}),
            *toml_table(f"clusters.{name}.settings", settings),
        ]
        f.write("\n".join(lines) + "\n")
    return dict(
        os.environ,
        XDG_CONFIG_HOME=os.path.join(home, "config"),
        XDG_STATE_HOME=os.path.join(home, "state"),
        PYTHONPATH=os.path.join(ROOT, "src"),
    )
