"""Core conformance (operator + supervisor + observer, fake clock) passes on the memory adapter, both shapes."""

from __future__ import annotations

import pytest

from dispatch.conformance.core import CoreCheck, core_checks, run_core_check
from dispatch.conformance.memory import memory_core_harness


@pytest.mark.parametrize("shape", ["slurm", "kubeflow"])
@pytest.mark.parametrize("check", core_checks(), ids=str)
def test_memory_core_conformance(shape: str, check: CoreCheck) -> None:
    run_core_check(check, memory_core_harness(shape))
