"""The backend conformance suite against the real Slurm 26.05 cluster over SSH."""

import pytest

from dispatch.conformance import Check, backend_checks, run_check

from .clusters import harness

pytestmark = pytest.mark.slurm_sid


@pytest.mark.parametrize("check", backend_checks(), ids=str)
def test_conformance_sid(check: Check) -> None:
    run_check(check, harness("sid"), strict=True)
