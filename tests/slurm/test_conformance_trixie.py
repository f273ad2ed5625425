"""The backend conformance suite against the real Slurm 24.11 cluster (Debian 13) over SSH."""

import pytest

from dispatch.conformance import Check, backend_checks, run_check

from .clusters import harness

pytestmark = pytest.mark.slurm_trixie


@pytest.mark.parametrize("check", backend_checks(), ids=str)
def test_conformance_trixie(check: Check) -> None:
    run_check(check, harness("trixie"))
