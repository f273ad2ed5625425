"""The backend conformance suite against the real Slurm 22.05 cluster over the local transport."""

import pytest

from dispatch.conformance import Check, backend_checks, run_check

from .clusters import harness

pytestmark = pytest.mark.slurm_local


@pytest.mark.parametrize("check", backend_checks(), ids=str)
def test_conformance_local(check: Check) -> None:
    run_check(check, harness("local"), strict=True)
