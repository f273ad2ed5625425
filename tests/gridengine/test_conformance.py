"""Both conformance suites against the real Grid Engine 8.1.9 cell: the real clock, faults from the shipped
wrapper, the harness the package ships (dispatch.gridengine.harness)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dispatch.conformance import Check, backend_checks, run_check
from dispatch.conformance.core import CoreCheck, core_checks, run_core_check

from .cell import cell_harness

pytestmark = pytest.mark.gridengine

CANNOT = {
    "out_of_memory_cause": "the adapter offers no memory limit (h_vmem) yet",
    "preempted_cause": "Grid Engine preempts by suspending a job (subordinate queues): the job does not end",
    "node_lost_cause": "a one-host cell cannot lose its host without losing its scheduler",
    "preemption_is_resubmitted_by_rule": "Grid Engine preempts by suspending a job: the job does not end",
    "rule_limit_is_honoured": "the limit is shown on preemptions, which do not end a Grid Engine job",
}
"""Checks no harness can drive on this cell: the only ones allowed to skip. Checks that cannot apply to Grid
Engine (an unbounded NodeLossWindow with reschedule_unknown 0, no Requeuer, no Readmitter, qacct keeping every
ended job so no poll interval is too slow) report themselves not applicable, strict or not."""


@pytest.mark.parametrize("check", backend_checks(), ids=str)
def test_gridengine_backend_conformance(check: Check, tmp_path: Path) -> None:
    run_check(check, cell_harness(tmp_path).base, strict=check.name not in CANNOT)


@pytest.mark.parametrize("check", core_checks(), ids=str)
def test_gridengine_core_conformance(check: CoreCheck, tmp_path: Path) -> None:
    run_core_check(check, cell_harness(tmp_path), strict=check.name not in CANNOT)


def test_the_allowed_skips_name_real_checks() -> None:
    names = {c.name for c in backend_checks()} | {c.name for c in core_checks()}
    assert set(CANNOT) <= names, set(CANNOT) - names
