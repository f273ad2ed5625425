"""Progress and stalls on the real control plane: the real Trainer (feature gate TrainJobStatus, as
scripts/k8s/controlplane-up.sh starts it) gives a TrainJob's trainer pods its status server's address, CA and a
projected token; rank 0's ``dispatch.job.progress`` (a real process with exactly that environment, run here
because kwok's pods run no program) posts there; the Trainer writes ``status.trainerStatus``; the supervisor reads
it from its watch; a silence past ``stalledAfter`` ends the TrainJob, and the resubmission's pods avoid the nodes
it ran on (a required node affinity the real scheduler honours).

Nothing is started here (scripts/k8s/controlplane-up.sh); the test has a namespace of its own.
"""

# ruff: noqa: F811  (the fixture control_plane is imported from test_controlplane)

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from dispatch.capabilities import Capability
from dispatch.clock import SYSTEM_CLOCK
from dispatch.cluster import Cluster
from dispatch.kubeflow import Mode
from dispatch.outcome import Cause, State
from dispatch.records import MemoryRecords
from dispatch.records.model import Action
from dispatch.supervise import Supervisor

from .controlplane_harness import ControlPlaneCluster, cluster_in, job_spec
from .test_controlplane import control_plane  # noqa: F401

pytestmark = pytest.mark.controlplane

SRC = str(Path(__file__).resolve().parents[2] / "src")
BOUND = 20.0
RULES = {
    "unmatched": "escalate",
    "rules": [
        {
            "name": "hang",
            "cause": ["stalled"],
            "stalledAfter": f"{BOUND:g}s",
            "action": "resubmit",
            "limit": 1,
            "excludeBlamedNodes": True,
        }
    ],
}
REPORT = (
    "import sys; from dispatch import job\n"
    "if not job.progress(int(sys.argv[1]), total=100, loss=0.25): sys.exit('progress was not queued')\n"
)


@pytest.fixture
def cluster(control_plane: dict[str, Any], tmp_path: Path) -> Iterator[ControlPlaneCluster]:
    if "trainer_status_server" not in control_plane:
        pytest.fail("control-plane.json names no trainer_status_server: restart it with scripts/k8s/controlplane-up.sh")
    yield from cluster_in(control_plane, tmp_path, Mode.PLAIN)


def _env_of(pod: dict[str, Any]) -> dict[str, str]:
    (container,) = [c for c in pod["spec"]["containers"] if c["name"] == "node"]
    return {e["name"]: e.get("value", "") for e in container.get("env") or []}


def rank0_posts(cluster: ControlPlaneCluster, trainjob: str, execution: str, step: int, tmp: Path) -> None:
    """Rank 0 of ``trainjob`` reports ``step``: a real process with the environment the real Trainer gave its pod,
    the server's address as this host reaches it, its CA from the ConfigMap the Trainer made, and a token of the
    pod's service account with the audience of the pod's projected token (what the kubelet would mount)."""
    pod = cluster.rank0(trainjob)
    env = _env_of(pod)
    url = urlsplit(env["KUBEFLOW_TRAINER_SERVER_URL"])
    here = urlsplit(cluster.cp["trainer_status_server"])
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "kubeflow-trainer-token"]
    sources = volume["projected"]["sources"]
    (projection,) = [s["serviceAccountToken"] for s in sources if "serviceAccountToken" in s]
    (configmap,) = [s["configMap"]["name"] for s in sources if "configMap" in s]
    ca = json.loads(cluster.k("get", "configmap", configmap, "-n", cluster.ns, "-o", "json"))["data"]["ca.crt"]
    account = pod["spec"].get("serviceAccountName") or "default"
    token = cluster.k("create", "token", account, "-n", cluster.ns, "--audience", projection["audience"]).strip()
    (tmp / "ca.crt").write_text(ca)
    (tmp / "token").write_text(token)
    child = {k: v for k, v in os.environ.items() if not k.startswith(("DISPATCH_", "KUBEFLOW_"))}
    child.update(
        KUBEFLOW_TRAINER_SERVER_URL=url._replace(netloc=here.netloc).geturl(),
        KUBEFLOW_TRAINER_SERVER_CA_CERT=str(tmp / "ca.crt"),
        KUBEFLOW_TRAINER_SERVER_TOKEN=str(tmp / "token"),
        DISPATCH_RANK="0",
        DISPATCH_EXECUTION=execution,
        PYTHONPATH=SRC,
    )
    argv = [sys.executable, "-c", REPORT, str(step)]
    p = subprocess.run(argv, env=child, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "RuntimeWarning" not in p.stderr, p.stderr  # a refused POST warns
    status = json.loads(cluster.k("get", "trainjob", trainjob, "-n", cluster.ns, "-o", "json"))["status"]
    metrics = {m["name"]: m["value"] for m in status["trainerStatus"]["metrics"]}
    assert metrics["dispatch.step"] == str(step) and metrics["dispatch.execution"] == execution, status


def test_a_stall_ends_the_trainjob_and_the_resubmission_avoids_its_nodes(
    cluster: ControlPlaneCluster, tmp_path: Path
) -> None:
    b = cluster.backend(trainerStatus=True)
    records = MemoryRecords()
    sup = Supervisor(b, records, clock=SYSTEM_CLOCK, owner="sup-cp", poll=1, cluster="cp")
    try:
        assert b.capabilities()[Capability.PROGRESS_REPORTING].yes
        job_id = Cluster("cp", b, records, SYSTEM_CLOCK).submit(job_spec("sleep", nodes=2), RULES)

        def until(pred: Callable[[], bool], what: str, within: float = 240.0) -> None:
            deadline = time.monotonic() + within
            while not pred():
                if time.monotonic() > deadline:
                    job = records.get(job_id)
                    raise AssertionError(f"not within {within:g}s: {what}: {job.state} {job.intents} {job.decisions}")
                sup.cycle()
                time.sleep(1)

        def sid(n: int) -> str:
            job = records.get(job_id)
            return (job.submission(n).scheduler_id or "") if len(job.submissions) >= n else ""

        def running_on(n: int) -> list[str]:
            pods = cluster.pods_of(sid(n)) if sid(n) else []
            return sorted(p["spec"]["nodeName"] for p in pods if p["status"].get("phase") == "Running")

        until(lambda: records.get(job_id).state is State.RUNNING and len(running_on(1)) == 2, "both ranks running")
        first_nodes = running_on(1)
        execution = records.get(job_id).submission(1).executions[-1].identity

        def progress() -> list[int]:
            ev = b.inspect(sid(1))
            return [p.step for p in ev.executions[-1].progress] if ev.executions else []

        rank0_posts(cluster, sid(1), execution, 7, tmp_path)
        until(lambda: progress() == [7], "the report read from the TrainJob's status", within=120.0)
        reported = time.time()

        until(lambda: len(records.get(job_id).submissions) >= 2, "the stall resubmitted", within=BOUND + 240.0)
        job = records.get(job_id)
        stop = next(i for i in job.intents if i.action is Action.STOP)
        assert stop.args["silentFor"] > BOUND and stop.args["ranks"] == [0], stop.args
        assert time.time() - reported > BOUND  # never before the bound
        first = job.submission(1).executions[-1]
        assert (first.outcome.state, first.outcome.cause) == (State.FAILED, Cause.STALLED)
        assert sorted(first.nodes) == first_nodes
        start = next(i for i in job.intents if i.action is Action.START and i.submission == 2)
        assert sorted(start.args["exclude"]) == first_nodes

        until(lambda: len(running_on(2)) == 2, "the resubmission runs")
        assert set(running_on(2)).isdisjoint(first_nodes), (running_on(2), first_nodes)
    finally:
        b.close()  # type: ignore[attr-defined]
