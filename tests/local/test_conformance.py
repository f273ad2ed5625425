"""The backend conformance suite passes on the local adapter (real processes, the system clock), through the
harness the package ships (dispatch.local.harness)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dispatch.conformance import Check, backend_checks, run_check
from dispatch.local.harness import base_harness

CANNOT = {
    "preempted_cause": "nothing on this machine preempts a job",
    "node_lost_cause": "the nodes are process groups on this machine; losing one is losing the machine",
    "admin_hold_is_foreign": "there is no administrator's hold on this machine",
}
"""Checks that apply to the local backend but that no harness can drive here: the only ones allowed to skip."""


@pytest.mark.parametrize("check", backend_checks(), ids=str)
def test_local_backend_conformance(check: Check, tmp_path: Path) -> None:
    run_check(check, base_harness(tmp_path / "state"), strict=check.name not in CANNOT)


def test_the_allowed_skips_name_real_checks() -> None:
    assert set(CANNOT) <= {c.name for c in backend_checks()}, set(CANNOT) - {c.name for c in backend_checks()}
