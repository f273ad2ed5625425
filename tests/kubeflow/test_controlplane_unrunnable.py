"""A TrainJob asking more than its ClusterQueue (and cohort) can ever hold, on the real control plane with real
Kueue: it reads pending/unrunnable with Kueue's own words, and ``Cluster.wait`` says so at once instead of waiting
for ever (docs/adapters/kubeflow.md). Nothing is started here (scripts/k8s/controlplane-up.sh)."""

# ruff: noqa: F811  (the fixture control_plane is imported from test_controlplane)

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dispatch.clock import SYSTEM_CLOCK
from dispatch.cluster import Cluster
from dispatch.errors import Unsupported
from dispatch.kubeflow import Mode
from dispatch.outcome import Cause, State
from dispatch.records import MemoryRecords

from .controlplane_harness import ControlPlaneCluster, cluster_in, job_spec
from .test_controlplane import control_plane  # noqa: F401

pytestmark = pytest.mark.controlplane


@pytest.fixture
def cluster(control_plane: dict[str, Any], tmp_path: Path) -> Iterator[ControlPlaneCluster]:
    yield from cluster_in(control_plane, tmp_path, Mode.KUEUE)


def test_more_than_the_queue_ever_holds_reads_unrunnable_and_wait_says_why(cluster: ControlPlaneCluster) -> None:
    """Nine ranks of one CPU each against a ClusterQueue of 8 CPUs: Kueue says "> maximum capacity (8)"."""
    b = cluster.backend()
    try:
        c = Cluster("cp", b, MemoryRecords(), SYSTEM_CLOCK)
        job_id = c.submit(job_spec("sleep", nodes=9))
        with pytest.raises(Unsupported, match=r"> maximum capacity \(8\)"):
            c.wait(job_id, timeout=90)  # a timeout would raise TimeoutError: not this
        record = c.get(job_id)
        assert (record.state, record.cause) == (State.PENDING, Cause.UNRUNNABLE), record.outcome
        c.operator.stop(job_id)
    finally:
        b.close()
