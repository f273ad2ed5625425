"""Kubeflow's MODEL for the journey, with a kubelet that runs the pods: dispatch_kubetest's in-process API server
and controllers (Trainer, JobSet, Job, scheduler), plus a thread that plays the kubelet, so the journey's script
runs unchanged on the Kubeflow adapter as on the others. Not a cluster: no Kubernetes, no container runtime, no
real pod; each "pod" is a process of this machine.

The kubelet starts each pod's ``node`` container command (the adapter's prologue, then the user's argv) as a
process of this machine, with the environment the pod spec gives it (plain values and the ``fieldRef`` values
the Job and Trainer controllers set: completion index, node rank), streams its output into the pod's log, and
reports its exit as the container's termination (``Completed``, or the code). A pod being deleted gets SIGTERM
and ends when its process does. The server's clock follows the wall clock, so deadlines (a time limit) fall
when they would on a real cluster.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dispatch_kubetest import FakeAPIServer, FakeClock

JSON = dict[str, Any]
_FIELD = re.compile(r"metadata\.(annotations|labels)\['([^']+)'\]")


def container_env(pod: JSON) -> dict[str, str]:
    """The ``node`` container's environment as the kubelet resolves it (values and metadata fieldRefs)."""
    meta = pod.get("metadata") or {}
    env: dict[str, str] = {}
    for c in (pod.get("spec") or {}).get("containers") or []:
        if c.get("name") != "node":
            continue
        for e in c.get("env") or []:
            if "value" in e:
                env[e["name"]] = str(e["value"])
                continue
            path = ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath", "")
            m = _FIELD.fullmatch(path)
            if m:
                env[e["name"]] = str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
            elif path in ("metadata.name", "metadata.namespace"):
                env[e["name"]] = str(meta.get(path.split(".")[1], ""))
            elif path == "status.podIP":
                env[e["name"]] = "127.0.0.1"
    return env


def container_argv(pod: JSON) -> list[str]:
    for c in (pod.get("spec") or {}).get("containers") or []:
        if c.get("name") == "node":
            return [*(c.get("command") or []), *(c.get("args") or [])]
    return []


class ProcessKubelet:
    """A kubetest cluster (the in-process world) whose pods run as real processes; see the module docstring."""

    def __init__(self, tmp: Path, nodes: int = 4) -> None:
        self.server = FakeAPIServer(
            bookmark_interval=0.5,
            strict_validation=True,
            clock=FakeClock(datetime.now(UTC).replace(microsecond=0)),
        )
        self.server.start()
        self.control = self.server.control
        for i in range(nodes):
            self.control.add_node(f"worker-{i}")
        self.control.add_runtime(num_nodes=1)
        self.control.auto_run_pods = True
        self.kubeconfig = self.server.write_kubeconfig(tmp / "kubeconfig", token="journey", namespace="default")
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.pumps: dict[str, threading.Thread] = {}
        self.done: set[str] = set()
        self.lock = threading.RLock()
        self.stopped = threading.Event()
        self.error: BaseException | None = None
        self._last = time.time()
        self.thread = threading.Thread(target=self._loop, name="process-kubelet", daemon=True)
        self.thread.start()

    def settings(self) -> JSON:
        return {
            "kubeconfig": {"path": str(self.kubeconfig)},
            "namespace": "default",
            "mode": "plain",
            "timeouts": {"apiserverRequest": "10s"},
            "preflight": {"probeWatch": "0.1s"},
        }

    def forgotten(self, trainjob: str) -> bool:
        """Delete the TrainJob (as an administrator's clean-up or a TTL would); True once it and its pods are gone."""
        from dispatch_kubetest.resources import TRAINJOB

        with self.lock:
            if self.control.get(TRAINJOB, trainjob) is not None:
                with contextlib.suppress(Exception):
                    self.control.delete(TRAINJOB, trainjob)
            return self.control.get(TRAINJOB, trainjob) is None and not self.control.pods_of(trainjob, live=False)

    # ---- the loop ------------------------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self.stopped.is_set():
            try:
                with self.lock:
                    now = time.time()
                    self.control.advance(max(0.0, now - self._last))
                    self._last = now
                    self._step()
            except Exception as exc:  # surfaced by close(): a kubelet bug must fail the test
                self.error = exc
                return
            time.sleep(0.1)

    def _step(self) -> None:
        for pod in self.control.pods():
            name = pod["metadata"]["name"]
            phase = (pod.get("status") or {}).get("phase")
            deleting = bool(pod["metadata"].get("deletionTimestamp"))
            proc = self.procs.get(name)
            if proc is None:
                if phase == "Running" and not deleting and name not in self.done:
                    self._start(pod)
                continue
            if deleting and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            code = proc.poll()
            if code is None:
                continue
            self.pumps.pop(name).join(5)
            del self.procs[name]
            self.done.add(name)
            self.control.finish_log(name)
            if phase == "Running":
                if code == 0:
                    self.control.succeed_pod(name)
                else:
                    self.control.fail_pod(name, exit_code=code if code > 0 else 128 - code)

    def _start(self, pod: JSON) -> None:
        name = pod["metadata"]["name"]
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/"),
            **container_env(pod),
        }
        proc = subprocess.Popen(
            container_argv(pod), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs[name] = proc
        self.pumps[name] = threading.Thread(target=self._pump, args=(name, proc), daemon=True)
        self.pumps[name].start()

    def _pump(self, name: str, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            with self.lock:
                self.control.append_log(name, line.decode(errors="replace").rstrip("\n"))

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(10)
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        self.server.stop()
        if self.error is not None:
            raise self.error
