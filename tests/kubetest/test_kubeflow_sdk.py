"""The Kubeflow SDK (``kubeflow`` 0.5, TrainerClient; a client nobody here wrote) against dispatch.kubetest.

The SDK needs core resources (pods and their logs) besides the custom resources, so it runs against the
project's own server with its reactors playing Trainer, JobSet, the Job controller and the kubelet.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import TrainerClient
from kubeflow.trainer.types.types import CustomTrainerContainer

from dispatch.kubetest import FakeAPIServer
from dispatch.kubetest.resources import CONFIGMAP


def test_trainer_client_life(tmp_path: Path) -> None:
    with FakeAPIServer() as srv:
        c = srv.control
        c.add_node("worker-0")
        c.add_node("worker-1")
        c.add_runtime(num_nodes=2)
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
        tc = TrainerClient(KubernetesBackendConfig(config_file=str(kc), namespace="default"))

        assert [r.name for r in tc.list_runtimes()] == ["torch-distributed"]
        name = tc.train(
            runtime="torch-distributed", trainer=CustomTrainerContainer(image="registry.example/t:1", num_nodes=2)
        )
        c.run_pods(name)
        job = tc.get_job(name)
        assert job.status == "Running" and job.num_nodes == 2
        assert [(s.name, s.status) for s in job.steps] == [("node-0", "Running"), ("node-1", "Running")]
        assert [j.name for j in tc.list_jobs()] == [name]

        rank0 = c.pods_of(name)[0]["metadata"]["name"]
        c.append_log(rank0, "epoch 1")

        def finish() -> None:
            time.sleep(1.0)
            c.append_log(rank0, "epoch 2")
            c.finish_log(rank0)
            c.succeed_pods(name)

        t = threading.Thread(target=finish)
        t.start()
        try:
            assert list(tc.get_job_logs(name, follow=True)) == ["epoch 1", "epoch 2"]
        finally:
            t.join()
        assert tc.wait_for_job_status(name, status={"Complete"}, timeout=10, polling_interval=1).status == "Complete"
        tc.delete_job(name)
        assert tc.list_jobs() == []
        assert c.get(CONFIGMAP, "kubeflow-trainer-public", "kubeflow-system") is not None
