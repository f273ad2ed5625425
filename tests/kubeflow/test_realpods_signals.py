"""What a rank's process receives when its pod is deleted (preemption, eviction, ``dispatch stop``), on the real
kubelets: the facts behind the Kubeflow adapter's ``PreTerminationSignal`` answer.

The adapter's prologue ``exec``\\ s the job's command, so the command is the container's first process, PID 1 of
its PID namespace. The kernel delivers a signal to such a process only when it has a handler for it: a rank that
handles SIGTERM (``dispatch.job``'s cessation handling, torchrun's agent) gets it at once and has the grace period
to checkpoint; one that does not is not ended by it, and dies by SIGKILL when ``terminationGracePeriodSeconds``
have passed. Both run the host's Python in the host-usr image (mounted read-only, as the training runtime does).
"""

# ruff: noqa: F811  (the fixtures control_plane, k and real_nodes are imported)

from __future__ import annotations

import sys
import time
from typing import Any

import pytest

from .test_controlplane import Kubectl, control_plane, k, wait_for  # noqa: F401
from .test_realpods import TAINT, phase, real_nodes  # noqa: F401

pytestmark = pytest.mark.realpods

GRACE = 6
IGNORES = "import time\nprint('up', flush=True)\ntime.sleep(300)\n"
HANDLES = (
    "import signal, sys, time\n"
    "def term(signum, frame):\n"
    "    print('TERM', flush=True)\n"
    "    sys.exit(143)\n"
    "signal.signal(signal.SIGTERM, term)\n"
    "print('up', flush=True)\n"
    "time.sleep(300)\n"
)


def python_pod(control_plane: dict[str, Any], name: str, node: str, program: str) -> dict[str, Any]:
    prefixes = sorted({sys.base_prefix, sys.prefix})
    mounts = [("usr", "/usr"), *((f"python{i}", p) for i, p in enumerate(prefixes))]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}],
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": GRACE,
            "containers": [
                {
                    "name": "rank",
                    "image": control_plane["real_images"]["host_usr"],
                    "imagePullPolicy": "Never",
                    "command": [sys.executable, "-u", "-c", program],
                    "volumeMounts": [{"name": n, "mountPath": p, "readOnly": True} for n, p in mounts],
                }
            ],
            "volumes": [{"name": n, "hostPath": {"path": p, "type": "Directory"}} for n, p in mounts],
        },
    }


def deletion_time(k: Kubectl, name: str) -> float:
    wait_for(f"pod {name} up", lambda: phase(k, name, "Running") and "up" in k.run("logs", name), timeout=180)
    t0 = time.monotonic()
    k.run("delete", "pod", name, "--wait=true", "--timeout=60s")
    return time.monotonic() - t0


def test_a_rank_that_is_pid_1_and_handles_sigterm_gets_it_at_once(
    control_plane: dict[str, Any], real_nodes: list[dict[str, Any]], k: Kubectl
) -> None:
    """The handler runs at the delete (it exits 143) and the pod is gone long before the grace."""
    k.apply(python_pod(control_plane, "handles", real_nodes[0]["name"], HANDLES))
    took = deletion_time(k, "handles")
    assert took < GRACE - 2, took


def test_a_rank_that_is_pid_1_without_a_handler_is_not_ended_by_sigterm_but_killed_after_the_grace(
    control_plane: dict[str, Any], real_nodes: list[dict[str, Any]], k: Kubectl
) -> None:
    """Python's default for SIGTERM is to die; as PID 1 of the container it is not delivered, so the rank runs on
    through the whole grace period and ends by SIGKILL: the time a warning would have given is lost."""
    k.apply(python_pod(control_plane, "ignores", real_nodes[1]["name"], IGNORES))
    took = deletion_time(k, "ignores")
    assert GRACE <= took < GRACE + 10, took
