"""The real test clusters (scripts/slurm/up.sh writes clusters.json): settings, admin actions, harnesses.

Nothing here skips: a missing clusters.json or a cluster that does not answer FAILS with the command to run.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from typing import Any

import pytest

import dispatch.slurm as slurm
from dispatch.clock import SYSTEM_CLOCK
from dispatch.conformance import Harness, Timings
from dispatch.extensions import Output
from dispatch.slurm.extensions import Resources
from dispatch.spec import JobSpec
from dispatch.spi import Backend

STATE = os.environ.get("DISPATCH_TEST_STATE", "/var/lib/dispatch-test")
HOW = "run `sudo scripts/slurm/up.sh` to start the test clusters"


def description(name: str) -> dict[str, Any]:
    path = os.path.join(STATE, "clusters.json")
    if not os.path.exists(path):
        pytest.fail(f"{path} is missing: {HOW}", pytrace=False)
    with open(path) as f:
        data = json.load(f)
    if name not in data:
        pytest.fail(f"cluster {name!r} is not in {path}: {HOW}", pytrace=False)
    return dict(data[name])


def settings_for(desc: dict[str, Any], **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "transport": desc["transport"],
        "defaults": {"partition": desc["partitions"]["default"], "account": desc["account"]},
        "env": dict(desc.get("env") or {}),
        "preflight": {"cacheDir": "/tmp/dispatch-slurm-test-cache"},
        "timeouts": {"call": 30, "script": 60},
    }
    if desc["transport"] == "ssh":
        out["ssh"] = {
            "host": desc["host"],
            "user": desc["user"],
            "port": desc["port"],
            "identityFile": desc["identity_file"],
            "knownHostsFile": desc["known_hosts"],
        }
    out.update(extra)
    return out


def open_backend(name: str, **kw: Any) -> slurm.SlurmBackend:
    desc = description(name)
    try:
        return slurm.new(settings_for(desc), **kw)
    except Exception as exc:
        pytest.fail(f"the {name} Slurm cluster did not answer ({type(exc).__name__}: {exc}): {HOW}", pytrace=False)


def admin(name: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    desc = description(name)
    return subprocess.run([*desc["admin"]["command"], *argv], capture_output=True, text=True, check=check, timeout=60)


def node_of(backend: Backend, sid: str) -> str:
    ev = backend.inspect(sid)
    nodes = ev.current.nodes if ev.current else ()
    node = nodes[0] if nodes else ""
    return node.split(",")[0].replace("[", "").split("-")[0] if "[" in node else node


def harness(name: str) -> Harness:
    desc = description(name)

    def spec(behaviour: str) -> JobSpec | None:
        if behaviour == "sleep":
            return JobSpec(("sleep", "600"))
        if behaviour == "succeed":
            return JobSpec(("true",))
        if behaviour == "fail":
            return JobSpec(("bash", "-c", "exit 3"))
        if behaviour == "timeout":
            return JobSpec(("sleep", "600"), time_limit=60)
        if behaviour == "oom":
            if not desc.get("memory_enforced"):
                return None
            return JobSpec(("tail", "/dev/zero"), extensions=(Resources(mem_per_node="100M"),))
        if behaviour == "echo":
            return JobSpec(("bash", "-c", "echo dispatch-conformance; echo dispatch-conformance-err >&2"))
        return None

    def preempt(backend: Backend, sid: str) -> None:
        node = node_of(backend, sid)
        admin(name, "sbatch", "-p", desc["partitions"]["preempt"], "--exclusive", "-w", node, "-J", "dsp-preemptor",
              "-o", "/dev/null", "--wrap", "sleep 20")  # fmt: skip

    def lose_node(backend: Backend, sid: str) -> None:
        node = node_of(backend, sid)
        admin(name, "scontrol", "update", f"NodeName={node}", "State=DOWN", "Reason=dispatch-test")
        threading.Timer(
            8.0, lambda: admin(name, "scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)
        ).start()

    def admin_hold(backend: Backend, sid: str) -> None:
        admin(name, "scontrol", "hold", sid)

    def cleanup(backend: Backend, sid: str) -> None:
        admin(name, "scancel", sid, check=False)

    return Harness(
        backend=lambda: open_backend(name),
        clock=SYSTEM_CLOCK,
        spec=spec,
        timings=Timings(wait=180.0, quiet=8.0, poll=1.0),
        read_only_backend=lambda: open_backend(name, read_only=True),
        preempt=preempt,
        lose_node=lose_node,
        admin_hold=admin_hold,
        cleanup=cleanup,
        name=f"slurm-{name}",
    )


_ = Output
