"""The tools people already use, against real pods on the real nodes: kubectl (``logs -f``, ``exec``, ``delete
--wait``) and the Kubeflow SDK (``TrainerClient``: ``train``, ``wait_for_job_status``, ``get_job_logs``).

Like test_realpods.py these start nothing: the control plane and its two real nodes come from the set-up. The SDK
runs in a child process, because in this test tree the package ``tests/kubeflow`` would shadow the SDK's
``kubeflow``.
"""

# ruff: noqa: F811  (the fixtures control_plane, k and real_nodes are imported)

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .test_controlplane import KUBECTL, Kubectl, control_plane, k, wait_for  # noqa: F401
from .test_realpods import _created, host_torch_runtime, phase, pod, real_nodes  # noqa: F401

pytestmark = pytest.mark.realpods


def test_kubectl_follows_a_running_containers_log_to_its_end(
    control_plane: dict[str, Any], real_nodes: list[dict[str, Any]], k: Kubectl
) -> None:
    """``kubectl logs -f`` streams the lines as the container writes them (the first arrives while the pod still
    runs) and ends when the container does."""
    script = "for i in 1 2 3 4 5 6; do echo line $i; sleep 0.5; done"
    k.apply(pod(control_plane, "talker", real_nodes[0]["name"], script))
    wait_for("pod talker Running", lambda: phase(k, "talker", "Running", "Succeeded"), timeout=180)
    assert KUBECTL is not None
    follow = subprocess.Popen(
        [str(KUBECTL), "-n", k.ns, "logs", "-f", "talker"], stdout=subprocess.PIPE, text=True, env=k.env
    )
    try:
        assert follow.stdout is not None
        first = follow.stdout.readline().strip()
        running_then = k.get("pod", "talker")["status"]["phase"]
        rest = follow.stdout.read().split()
        follow.wait(timeout=60)
    finally:
        follow.kill()
    assert first == "line 1"
    assert running_then == "Running"  # the first line came while the container was still writing
    assert " ".join(rest) == "line 2 line 3 line 4 line 5 line 6"
    assert follow.returncode == 0
    wait_for("pod talker Succeeded", lambda: phase(k, "talker", "Succeeded"), timeout=60)  # the kubelet's status lags


def test_kubectl_exec_runs_a_command_inside_a_real_container_and_returns_its_status(
    control_plane: dict[str, Any], real_nodes: list[dict[str, Any]], k: Kubectl
) -> None:
    """``kubectl exec`` reaches the container through the API server and the kubelet's streaming server: the
    command runs in the container's namespaces (its hostname, its root file system) and its exit status comes
    back."""
    k.apply(pod(control_plane, "shell", real_nodes[1]["name"], "echo ready >/tmp/mark; sleep 300"))
    wait_for("pod shell Running", lambda: phase(k, "shell", "Running"), timeout=180)
    wait_for("the container's mark", lambda: _exec(k, "shell", "cat", "/tmp/mark")[1] == "ready\n", timeout=30)
    rc, out = _exec(k, "shell", "sh", "-c", "hostname; exit 7")
    assert (rc, out) == (7, "shell\n")


def _exec(k: Kubectl, name: str, *argv: str) -> tuple[int, str]:
    assert KUBECTL is not None
    done = subprocess.run(
        [str(KUBECTL), "-n", k.ns, "exec", name, "--", *argv], capture_output=True, text=True, env=k.env, timeout=60
    )
    return done.returncode, done.stdout


def test_kubectl_delete_wait_returns_once_the_pod_is_gone_from_the_node(
    control_plane: dict[str, Any], real_nodes: list[dict[str, Any]], k: Kubectl
) -> None:
    """``kubectl delete --wait`` of a pod whose process ends on SIGTERM returns when the kubelet has stopped the
    container and the object is gone, well before the grace period (30 s) would have forced it."""
    doc = pod(control_plane, "polite", real_nodes[0]["name"], "trap 'exit 0' TERM; while true; do sleep 0.2; done")
    doc["spec"]["terminationGracePeriodSeconds"] = 30
    k.apply(doc)
    wait_for("pod polite Running", lambda: phase(k, "polite", "Running"), timeout=180)
    t0 = time.monotonic()
    k.run("delete", "pod", "polite", "--wait=true", "--timeout=60s")
    took = time.monotonic() - t0
    assert took < 20, took
    assert KUBECTL is not None
    left = subprocess.run(
        [str(KUBECTL), "-n", k.ns, "get", "pod", "polite"], capture_output=True, text=True, env=k.env, timeout=60
    )
    assert left.returncode != 0 and "NotFound" in left.stderr, left.stderr


SDK_SCRIPT = r"""
import json, sys
from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import TrainerClient
from kubeflow.trainer.types.types import CustomTrainerContainer

kubeconfig, namespace, image = sys.argv[1:4]
out = {}
tc = TrainerClient(KubernetesBackendConfig(config_file=kubeconfig, namespace=namespace))
out["runtimes"] = [r.name for r in tc.list_runtimes()]
runtime = tc.get_runtime("host-torch")
name = tc.train(runtime=runtime, trainer=CustomTrainerContainer(image=image, num_nodes=2))
out["name"] = name
job = tc.wait_for_job_status(name, status={"Complete", "Failed"}, timeout=300, polling_interval=1)
out["final"] = [job.status, job.num_nodes, sorted(s.name for s in job.steps)]
out["logs"] = [line for line in tc.get_job_logs(name) if line.startswith("rank ")]
tc.delete_job(name)
print(json.dumps(out))
"""


def test_the_kubeflow_sdk_trains_waits_and_reads_rank_0s_log_on_real_pods(
    control_plane: dict[str, Any], real_nodes: list[dict[str, Any]], k: Kubectl, tmp_path: Path
) -> None:
    """The Kubeflow SDK, a client nobody here wrote, through the real Trainer on the two real nodes: it lists the
    runtime, creates a TrainJob of two nodes, waits for it to complete and reads rank 0's log from the real
    container (``get_job_logs`` reads the pod of step ``node-0``)."""
    runtime = host_torch_runtime(control_plane)
    runtime["metadata"]["labels"] = {"trainer.kubeflow.org/framework": "torch"}  # the SDK lists only these
    container = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"
    ][0]
    container["command"] = [sys.executable, "-m", "torch.distributed.run", "/examples/hello_ranks.py"]
    k.apply(runtime)
    script = tmp_path / "sdk.py"
    script.write_text(SDK_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), control_plane["kubeconfig"], k.ns, control_plane["real_images"]["host_usr"]],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=420,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert "host-torch" in out["runtimes"]
    assert out["final"][0] == "Complete", out
    assert out["final"][1] == 2
    assert out["logs"] == [
        *(f"rank 0/2 on {out['name']}-node-0-0 execution ?: step {step}" for step in range(3)),
        f"rank 0: done (rendezvous {out['name']}-node-0-0.{out['name']}:29500)",
    ], out["logs"]


SRC = Path(__file__).resolve().parents[2] / "src"
PROGRESS_RANK = (
    "import os, time\n"
    "from dispatch import job\n"
    "rank = int(os.environ['PET_NODE_RANK'])\n"
    "for step in range(1, 6):\n"
    "    job.progress(step, 5, loss=1.0 / step)\n"
    "    time.sleep(0.3)\n"
    "print(f'rank {rank}: reported', flush=True)\n"
)


def test_rank_0_in_a_real_pod_posts_its_progress_to_the_trainers_status_server(
    control_plane: dict[str, Any], real_nodes: list[dict[str, Any]], k: Kubectl
) -> None:
    """The real Trainer (feature gate TrainJobStatus) gives the TrainJob's pods its status server's address by
    name, its CA and a projected token that the real kubelet mints; rank 0's ``dispatch.job.progress``, in its
    container, resolves the name through cluster DNS (the Service nodes-up.sh makes), trusts the server's
    certificate for it, and posts; the Trainer writes ``status.trainerStatus``, which the adapter reads from its
    watch. The other rank posts nothing."""
    runtime = host_torch_runtime(control_plane)
    pod_spec = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod_spec["volumes"].append({"name": "src", "hostPath": {"path": str(SRC), "type": "Directory"}})
    container = pod_spec["containers"][0]
    container["volumeMounts"].append({"name": "src", "mountPath": "/dispatch-src", "readOnly": True})
    container["env"] = [
        {"name": "PYTHONPATH", "value": "/dispatch-src"},
        {"name": "DISPATCH_PROGRESS_INTERVAL", "value": "0"},
    ]
    k.apply(runtime)
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "reporter"},
        "spec": {
            "runtimeRef": {"name": "host-torch", "kind": "TrainingRuntime", "apiGroup": "trainer.kubeflow.org"},
            "trainer": {"numNodes": 2, "command": [sys.executable, "-c", PROGRESS_RANK]},
        },
    }
    wait_for("the TrainJob admitted", lambda: _created(k, trainjob), timeout=30)
    done = wait_for("TrainJob reporter ended", lambda: _ended(k, "reporter"), timeout=300)
    pods = sorted(k.items("pods", "jobset.sigs.k8s.io/jobset-name=reporter"), key=lambda p: p["metadata"]["name"])
    logs = {p["metadata"]["name"]: k.run("logs", p["metadata"]["name"]) for p in pods}
    assert done == "Complete", logs
    assert all("RuntimeWarning" not in log for log in logs.values()), logs  # a refused or unreachable POST warns
    env = {e["name"]: e.get("value", "") for e in pods[0]["spec"]["containers"][0]["env"]}
    assert env["KUBEFLOW_TRAINER_SERVER_URL"].startswith(
        "https://kubeflow-trainer-controller-manager.kubeflow-system.svc:"
    ), env
    status = k.get("trainjob", "reporter")["status"]["trainerStatus"]
    metrics = {m["name"]: m["value"] for m in status["metrics"]}
    assert metrics["dispatch.step"] == "5" and metrics["dispatch.total"] == "5", status
    assert metrics["loss"] == "0.2", status
    assert status["progressPercentage"] == 100, status


def _ended(k: Kubectl, name: str) -> str | None:
    for c in k.get("trainjob", name).get("status", {}).get("conditions", []) or []:
        if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return str(c["type"])
    return None
