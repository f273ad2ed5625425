"""The core conformance suite against the real Slurm 24.11 cluster over SSH (core_suite: skips, selection)."""

import pytest

from dispatch.conformance.core import CoreCheck

from . import core_suite

pytestmark = pytest.mark.slurm_trixie


@pytest.mark.parametrize("check", core_suite.checks("trixie"), ids=str)
def test_core_conformance_trixie(check: CoreCheck) -> None:
    core_suite.run("trixie", check)
