"""The backend conformance suite for the Kubeflow adapter (plain mode) on the real control plane: kube-apiserver,
the Job controller, scheduler and garbage collector, kwok's kubelets and the real Trainer and JobSet controllers
(scripts/k8s/controlplane-up.sh; nothing is started here, a missing control-plane.json fails).

The checks run are those whose situations the control plane makes by itself with kwok's stages (see
controlplane_harness); the checks that need a preemption, a node loss, an administrator's hold or output are
not selected yet (docs/dev/k8s-control-plane.md says what each still needs).

Checks that fail on the real controllers, for differences not fixed yet (docs/dev/k8s-control-plane.md lists
them), are marked as expected to fail: strictly when they always fail (a fix shows as a pass that fails until the
mark goes), not strictly for the one that fails intermittently (a race still to be found).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dispatch.conformance import backend_checks, run_check
from dispatch.conformance.checks import Check

from .controlplane_harness import ControlPlaneCluster, harness
from .test_controlplane import KUBECTL, control_plane, needs  # noqa: F401  (control_plane is a fixture)

pytestmark = pytest.mark.controlplane

SELECTED = (
    "declarations_follow_the_rules",
    "capabilities_complete",
    "start_is_gated",
    "open_runs_and_is_idempotent",
    "success_needs_exit_zero",
    "failure_keeps_exit_code",
    "timeout_cause",
    "out_of_memory_cause",
    "unknown_id_is_not_found",
    "inspect_many_is_one_view",
    "find_by_marker",
    "stop_running",
    "stop_gated_never_runs",
    "refuses_unaccepted_extension",
    "read_only_refuses_writes",
    "find_many",
    "watch_reports_changes",
)


@pytest.fixture
def cluster(control_plane: dict[str, Any], tmp_path: Path) -> Iterator[ControlPlaneCluster]:  # noqa: F811
    needs(control_plane, "jobset", "trainer-controller-manager")
    assert KUBECTL is not None
    c = ControlPlaneCluster(control_plane, KUBECTL, tmp_path)
    try:
        yield c
    finally:
        c.close()


KNOWN_FAILURES: dict[str, str] = {}
INTERMITTENT: dict[str, str] = {}


def _param(check: Check) -> Any:
    name = str(check)
    marks = []
    if name in KNOWN_FAILURES:
        marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[name]))
    if name in INTERMITTENT:  # not strict: it passes more often than not, and that pass must not fail the run
        marks.append(pytest.mark.xfail(strict=False, reason=INTERMITTENT[name]))
    return pytest.param(check, id=name, marks=marks)


@pytest.mark.parametrize("check", [_param(c) for c in backend_checks() if str(c) in SELECTED])
def test_conformance_plain(check: Check, cluster: ControlPlaneCluster) -> None:
    run_check(check, harness(cluster), strict=True)
