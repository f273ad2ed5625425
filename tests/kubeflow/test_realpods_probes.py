"""What only a real kubelet can tell, read through dispatch's Kubeflow adapter on the real nodes: a rank killed by
its memory cgroup is out-of-memory, and an image that is not there is the job's own launch failure
(not-launchable, blaming no node) with the kubelet's reason.

The cluster: tests/kubeflow/realpods_harness.py (the real control plane, the two real kubelets, the ``host-torch``
runtime); the pod-level facts behind these readings: tests/kubeflow/test_realpods.py.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dispatch
from dispatch.extensions import Image
from dispatch.kubeflow import Mode
from dispatch.kubeflow.extensions import RuntimeRef
from dispatch.outcome import Cause, State
from dispatch.records import MemoryRecords
from dispatch.resources import Resources
from dispatch.spec import JobSpec

from .realpods_harness import RUNTIME, RealPodsCluster, read_control_plane, real_cluster_in, until

pytestmark = pytest.mark.realpods

# rank 1 holds 400 MiB under a 128 MiB limit; rank 0 waits to be stopped
GREEDY = (
    "import os, time\n"
    "if os.environ['RANK'] == '1':\n"
    "    hoard = [bytearray(1 << 20) for _ in range(400)]\n"
    "time.sleep(300)\n"
)


@pytest.fixture
def real(tmp_path: Path) -> Iterator[RealPodsCluster]:
    yield from real_cluster_in(read_control_plane(), tmp_path, Mode.PLAIN)


def spec(real: RealPodsCluster, command: tuple[str, ...], image: str, **kw: Any) -> JobSpec:
    return JobSpec(
        command,
        nodes=2,
        extensions=(Image(image), RuntimeRef(RUNTIME, runtime_kind="TrainingRuntime")),
        **kw,
    )


def test_a_rank_over_its_memory_limit_is_out_of_memory(real: RealPodsCluster) -> None:
    """The memory cgroup kills rank 1 (exit 137, OOMKilled, as the real kubelet reports it): the job's outcome
    is failed / out-of-memory, not a plain exit, and rank 0 is stopped with it."""
    image = real.base.cp["real_images"]["host_usr"]
    job_spec = spec(real, (sys.executable, "-c", GREEDY), image, resources=Resources(mem_per_node=128))
    with dispatch.open("kubeflow", adapter=real.settings(), records=MemoryRecords(), name="probes") as cluster:
        job = cluster.operator.submit(job_spec)
        record = cluster.wait(job, timeout=240)
    out = record.outcome
    assert out is not None
    assert (out.state, out.cause) == (State.FAILED, Cause.OUT_OF_MEMORY), out


def test_an_image_that_is_not_there_is_the_jobs_own_launch_failure_with_the_kubelets_reason(
    real: RealPodsCluster,
) -> None:
    """Never pulled (the runtime's pull policy): the kubelet's ErrImageNeverPull is the job's own launch failure,
    not-launchable, which blames no node and no rule resubmits."""
    job_spec = spec(real, ("true",), "dispatch.local/not-there:1")
    with dispatch.open("kubeflow", adapter=real.settings(), records=MemoryRecords(), name="probes") as cluster:
        job = cluster.operator.submit(job_spec)
        record = cluster.wait(job, timeout=240)
    out = record.outcome
    assert out is not None
    assert (out.state, out.cause) == (State.FAILED, Cause.NOT_LAUNCHABLE), out
    assert "ErrImageNeverPull" in (out.detail or ""), out


SAYS = "import os, sys, time\nprint(f'hello from rank {os.environ[\"RANK\"]}', flush=True)\ntime.sleep(300)\n"


def test_the_dashboard_shows_rank_0s_output_of_a_job_on_real_pods(real: RealPodsCluster, tmp_path: Path) -> None:
    """The dashboard's job page and its output endpoint over the records, reading rank 0's log from its real
    container through the adapter (the same read ``dispatch logs`` makes) while the job runs."""
    from starlette.testclient import TestClient

    from dispatch.cli.observe import refresh
    from dispatch.errors import ConfigError
    from dispatch.records import SQLiteRecords
    from dispatch.ui.app import create_app
    from dispatch.ui.source import Source

    image = real.base.cp["real_images"]["host_usr"]
    path = tmp_path / "records.db"
    records = SQLiteRecords(path)
    with dispatch.open("kubeflow", adapter=real.settings(), records=records, name="real") as cluster:
        job = cluster.operator.submit(spec(real, (sys.executable, "-c", SAYS), image))

        def open_cluster(name: str) -> dispatch.Cluster:
            if name != "real":
                raise ConfigError("cluster", f"no cluster named {name!r}")
            return dispatch.open("kubeflow", dispatch.Config(adapter=real.settings(), read_only=True, name=name))

        source = Source(SQLiteRecords(path, read_only=True), open_cluster, str(path))
        with TestClient(create_app(source), base_url="http://127.0.0.1") as client:

            def said() -> str:
                refresh(records, cluster.backend, [records.get(job)], time.time())  # what `dispatch status` does
                got = client.get(f"/jobs/{job}/output", params={"submission": 1, "rank": 0})
                return str(got.json().get("text", "")) if got.status_code == 200 else ""

            text = until(said, "rank 0's output on the dashboard", 180, every=2)
            assert text == "hello from rank 0\n", text
            page = client.get(f"/jobs/{job}").text
            assert job in page
        cluster.operator.stop(job)
