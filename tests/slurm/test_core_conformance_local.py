"""The core conformance suite against the real Slurm 22.05 cluster, local transport (core_suite: skips, selection)."""

import pytest

from dispatch.conformance.core import CoreCheck

from . import core_suite

pytestmark = pytest.mark.slurm_local


@pytest.mark.parametrize("check", core_suite.checks("local"), ids=str)
def test_core_conformance_local(check: CoreCheck) -> None:
    core_suite.run("local", check)
