"""The core conformance suite against the real Slurm 26.05 cluster over SSH (core_suite: skips, selection)."""

import pytest

from dispatch.conformance.core import CoreCheck

from . import core_suite

pytestmark = pytest.mark.slurm_sid


@pytest.mark.parametrize("check", core_suite.checks("sid"), ids=str)
def test_core_conformance_sid(check: CoreCheck) -> None:
    core_suite.run("sid", check)
