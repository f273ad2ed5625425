"""The backend conformance suite passes on the memory adapter in both shapes."""

from __future__ import annotations

import pytest

from dispatch.conformance import Check, backend_checks, run_check
from dispatch.conformance.memory import memory_harness


@pytest.mark.parametrize("shape", ["slurm", "kubeflow"])
@pytest.mark.parametrize("check", backend_checks(), ids=str)
def test_memory_backend_conformance(shape: str, check: Check) -> None:
    run_check(check, memory_harness(shape))


def test_memory_without_accounting_still_conforms() -> None:
    for check in backend_checks():
        if check.requires is None:
            try:
                run_check(check, memory_harness("slurm", accounting=False))
            except pytest.skip.Exception:
                continue
