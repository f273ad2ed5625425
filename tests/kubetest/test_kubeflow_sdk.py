"""The Kubeflow SDK (``kubeflow`` 0.5, TrainerClient; a client nobody here wrote) against dispatch_kubetest.

The SDK needs core resources (pods and their logs) besides the custom resources, so it runs against the
project's own server with its reactors playing Trainer, JobSet, the Job controller and the kubelet. It runs in a
child process: in this test tree the package ``tests/kubeflow`` would shadow the SDK's ``kubeflow``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

from dispatch_kubetest import FakeAPIServer
from dispatch_kubetest.resources import TRAINJOB

SDK_SCRIPT = r"""
import json, sys
from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import TrainerClient
from kubeflow.trainer.types.types import CustomTrainerContainer

out = {}
tc = TrainerClient(KubernetesBackendConfig(config_file=sys.argv[1], namespace="default"))
out["runtimes"] = [r.name for r in tc.list_runtimes()]
name = tc.train(runtime="torch-distributed", trainer=CustomTrainerContainer(image="registry.example/t:1", num_nodes=2))
out["name"] = name
job = tc.wait_for_job_status(name, status={"Running"}, timeout=30, polling_interval=1)
out["running"] = [job.status, job.num_nodes, [(s.name, s.status) for s in job.steps]]
out["jobs"] = [j.name for j in tc.list_jobs()]
out["logs"] = list(tc.get_job_logs(name, follow=True))
out["final"] = tc.wait_for_job_status(name, status={"Complete"}, timeout=30, polling_interval=1).status
tc.delete_job(name)
out["after_delete"] = [j.name for j in tc.list_jobs()]
print(json.dumps(out))
"""


def test_trainer_client_life(tmp_path: Path) -> None:
    with FakeAPIServer() as srv:
        c = srv.control
        c.add_node("worker-0")
        c.add_node("worker-1")
        c.add_runtime(num_nodes=2)
        c.auto_run_pods = True
        # what a Trainer installation publishes; the SDK reads it to report the control plane's version
        c.add_namespace("kubeflow-system")
        c.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "kubeflow-trainer-public", "namespace": "kubeflow-system"},
                "data": {"kubeflow_trainer_version": "v2.3.0"},
            }
        )
        kc = srv.write_kubeconfig(tmp_path / "kc", token="sdk", namespace="default")
        stop = threading.Event()

        def listed() -> bool:
            """Whether the SDK has listed the TrainJobs: it saw the job Running (``list_jobs`` comes after)."""
            return any(r.path.endswith("/trainjobs") for r in srv.requests("GET"))

        def kubelet() -> None:
            """Once the SDK has seen the job Running (a pod that succeeded at once would never be seen so), rank 0
            logs two lines, one second apart, then every pod succeeds."""
            while not stop.wait(0.1):
                for tj in c.list(TRAINJOB, "default"):
                    name = tj["metadata"]["name"]
                    pods = c.pods_of(name)
                    if len(pods) < 2 or any(p["status"].get("phase") != "Running" for p in pods) or not listed():
                        continue
                    rank0 = pods[0]["metadata"]["name"]
                    c.append_log(rank0, "epoch 1")
                    if stop.wait(1.0):
                        return
                    c.append_log(rank0, "epoch 2")
                    c.finish_log(rank0)
                    c.succeed_pods(name)

        t = threading.Thread(target=kubelet, daemon=True)
        t.start()
        try:
            r = subprocess.run(
                [sys.executable, "-c", SDK_SCRIPT, str(kc)], capture_output=True, text=True, timeout=120, cwd=tmp_path
            )
        finally:
            stop.set()
            t.join(timeout=10)
        assert r.returncode == 0, r.stderr[-3000:]
        out = json.loads(r.stdout.strip().splitlines()[-1])
        assert out["runtimes"] == ["torch-distributed"]
        assert out["running"] == ["Running", 2, [["node-0", "Running"], ["node-1", "Running"]]]
        assert out["jobs"] == [out["name"]]
        assert out["logs"] == ["epoch 1", "epoch 2"]
        assert out["final"] == "Complete"
        assert out["after_delete"] == []
