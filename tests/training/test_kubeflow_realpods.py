"""The training proofs on real pods (tests/training/kubeflow.py): the two real kubelets, the real Kueue, JobSet,
Trainer and Job controllers, dispatch's Kubeflow adapter in Kueue mode. Fails when the real nodes are not up."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from . import kubeflow
from .harness import Result
from .kubeflow import RealPodsCluster

pytestmark = [pytest.mark.realpods, pytest.mark.training]


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealPodsCluster]:
    fixture = kubeflow.open_cluster(tmp_path_factory.mktemp("kubeflow-training"))
    try:
        yield next(fixture)
    finally:
        fixture.close()


@pytest.fixture(scope="module")
def ref(real: RealPodsCluster) -> Result:
    return kubeflow.reference(real)


def test_uninterrupted_reference(ref: Result) -> None:
    assert ref.interruptions() == [], ref.interruptions()
    print(f"reference: {ref.wall:.1f}s")


def test_kueue_preemption_mid_run_resumes_to_the_same_parameters(real: RealPodsCluster, ref: Result) -> None:
    kubeflow.preempted(real, ref.params)


def test_supervisor_killed_during_recovery_and_restarted(real: RealPodsCluster, ref: Result) -> None:
    kubeflow.supervisor_killed(real, ref.params)


def test_node_lost_while_a_rank_runs_on_it(real: RealPodsCluster, ref: Result) -> None:
    kubeflow.node_lost(real, ref.params)
