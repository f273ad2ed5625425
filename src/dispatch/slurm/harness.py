"""The Slurm adapter's conformance harness for a real cluster, described by one mapping.

``dispatch conformance --harness dispatch.slurm.harness:harness --harness-config cluster.json`` runs both suites
on a site's cluster; the project's Slurm tests build their harnesses here from the test clusters' description
(``clusters.json``, written by ``scripts/slurm/up.sh``). The description's keys:

* ``transport`` (``local`` or ``ssh``; with ``ssh``: ``host``, ``user``, ``port``, ``identity_file``,
  ``known_hosts``), ``env`` (exported to every Slurm command), ``account``;
* ``partitions``: ``default`` (where jobs run) and ``preempt`` (a higher-priority partition on the same nodes
  whose jobs preempt the default's; without it the preemption checks skip);
* ``admin``: ``command``, the argv prefix that runs a Slurm command as an administrator (``["sudo"]``, or an
  ssh into the controller): used to preempt, drain a node, place and lift an admin hold, and clean up;
* ``memory_enforced``: whether the cluster kills a job over its memory (without it the oom checks skip);
* ``settings`` (optional): the cluster's ``scontrol show config`` as a mapping; without it the harness asks
  the cluster (``scontrol show config`` through ``admin``) for what it needs: OverTimeLimit and KillWait.

Timings. The ``timeout`` job asks for one minute, Slurm's shortest time limit (``--time`` counts minutes), and
the checks that wait for it add that minute to the wait. Slurm ends a job past its limit only when slurmctld's
periodic check sees it (every 30 s), after OverTimeLimit more minutes, then gives it KillWait to die: the
wait is 180 s for anything to happen on a shared cluster plus that enforcement lag (:func:`enforcement_lag`).
With ``OverTimeLimit=UNLIMITED`` no job ever times out, and the timeout checks skip with that reason.

Hooks act on the real cluster: a preemptor job on the victim's node, a node set DOWN for eight seconds and
resumed, ``scontrol hold``/``release``. Run the suites on a cluster where that is allowed.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from dispatch.clock import SYSTEM_CLOCK
from dispatch.conformance.core import CoreHarness
from dispatch.conformance.faults import with_faults
from dispatch.conformance.harness import Harness, Timings
from dispatch.errors import ConfigError
from dispatch.slurm.extensions import Resources
from dispatch.slurm.parse import config_seconds, parse_config
from dispatch.spec import JobSpec
from dispatch.spi import Backend

_REQUIRED = ("transport", "partitions", "admin")
WAIT = 180.0
"""How long a check waits for something that must happen on a shared cluster, before any time limit."""
TIME_LIMIT = 60.0
"""The ``timeout`` job's limit: Slurm's shortest."""
LIMIT_CHECK_PERIOD = 30.0
"""How often slurmctld compares running jobs with their time limits (a fixed period of its background loop)."""


def enforcement_lag(config: Mapping[str, str]) -> float | None:
    """How long past its time limit a job may still read running on a cluster with this ``scontrol show
    config``: the controller's check period, OverTimeLimit, and KillWait (Slurm's defaults when absent); None
    when OverTimeLimit is UNLIMITED (no job ever times out)."""
    if config.get("OverTimeLimit", "").strip().upper() == "UNLIMITED":
        return None
    return LIMIT_CHECK_PERIOD + config_seconds(config, "OverTimeLimit", 0.0) + config_seconds(config, "KillWait", 30.0)


def cluster_config(desc: Mapping[str, Any]) -> dict[str, str]:
    """The cluster's configuration: the description's ``settings``, or ``scontrol show config`` asked now."""
    if desc.get("settings"):
        return {str(k): str(v) for k, v in desc["settings"].items()}
    return parse_config(admin(desc, "scontrol", "show", "config").stdout)


def settings_for(desc: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """The adapter settings (camelCase, as a config file holds them) for a described cluster."""
    for key in _REQUIRED:
        if key not in desc:
            raise ConfigError(key, "is required in a Slurm cluster description")
    out: dict[str, Any] = {
        "transport": desc["transport"],
        "defaults": {"partition": desc["partitions"]["default"], "account": desc.get("account")},
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


def open_backend(desc: Mapping[str, Any], **kw: Any) -> Backend:
    import dispatch.slurm as slurm

    return slurm.new(settings_for(desc), **kw)


def admin(desc: Mapping[str, Any], *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a Slurm command as the cluster's administrator."""
    prefix: Sequence[str] = desc["admin"]["command"]
    return subprocess.run([*prefix, *argv], capture_output=True, text=True, check=check, timeout=60)


def node_of(backend: Backend, sid: str) -> str:
    """The first node the job's current execution runs on."""
    ev = backend.inspect(sid)
    nodes = ev.current.nodes if ev.current else ()
    node = nodes[0] if nodes else ""
    return node.split(",")[0].replace("[", "").split("-")[0] if "[" in node else node


def base_harness(desc: Mapping[str, Any], name: str = "slurm") -> Harness:
    """The backend-suite harness of a described cluster."""
    lag = enforcement_lag(cluster_config(desc))

    def spec(behaviour: str) -> JobSpec | None:
        if behaviour == "sleep":
            return JobSpec(("sleep", "600"))
        if behaviour == "succeed":
            return JobSpec(("true",))
        if behaviour == "fail":
            return JobSpec(("bash", "-c", "exit 3"))
        if behaviour == "timeout":
            return None if lag is None else JobSpec(("sleep", "600"), time_limit=TIME_LIMIT)
        if behaviour == "oom":
            if not desc.get("memory_enforced"):
                return None
            return JobSpec(("tail", "/dev/zero"), extensions=(Resources(mem_per_node="100M"),))
        if behaviour == "echo":
            return JobSpec(("bash", "-c", "echo dispatch-conformance; echo dispatch-conformance-err >&2"))
        return None

    preempt_partition = desc["partitions"].get("preempt")

    def preempt(backend: Backend, sid: str) -> None:
        node = node_of(backend, sid)
        admin(desc, "sbatch", "-p", preempt_partition, "--exclusive", "-w", node, "-J", "dsp-preemptor",
              "-o", "/dev/null", "--wrap", "sleep 20")  # fmt: skip

    def lose_node(backend: Backend, sid: str) -> None:
        node = node_of(backend, sid)
        admin(desc, "scontrol", "update", f"NodeName={node}", "State=DOWN", "Reason=dispatch-test")
        threading.Timer(
            8.0, lambda: admin(desc, "scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)
        ).start()

    def admin_hold(backend: Backend, sid: str) -> None:
        admin(desc, "scontrol", "hold", sid)

    def cleanup(backend: Backend, sid: str) -> None:
        admin(desc, "scancel", sid, check=False)

    return Harness(
        backend=lambda: open_backend(desc),
        clock=SYSTEM_CLOCK,
        spec=spec,
        timings=Timings(wait=WAIT + (lag or 0.0), quiet=8.0, poll=1.0),
        read_only_backend=lambda: open_backend(desc, read_only=True),
        preempt=preempt if preempt_partition else None,
        lose_node=lose_node,
        admin_hold=admin_hold,
        cleanup=cleanup,
        name=name,
    )


def harness(desc: Mapping[str, Any]) -> CoreHarness:
    """The factory ``dispatch conformance`` calls: both suites, faults from the shipped wrapper."""
    base = base_harness(desc, f"slurm-{desc.get('cluster_name', 'cluster')}")

    def exit_spec(code: int) -> JobSpec:
        return JobSpec(("bash", "-c", f"sleep 2; exit {code}"))

    def admin_release(sid: str) -> None:
        admin(desc, "scontrol", "release", sid)

    return with_faults(CoreHarness(base=base, exit_spec=exit_spec, admin_release=admin_release))
