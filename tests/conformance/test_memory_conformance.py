"""The backend conformance suite passes on the memory adapter in both shapes.

The memory harness drives every situation a check needs, so a check that applies and skips is a failure
(``strict``); only checks of interfaces a shape does not implement are skipped.
"""

from __future__ import annotations

import pytest

from dispatch.conformance import Check, ConformanceError, Harness, Skip, backend_checks, run_check
from dispatch.conformance.memory import memory_harness
from dispatch.spi import Watcher


@pytest.mark.parametrize("shape", ["slurm", "kubeflow"])
@pytest.mark.parametrize("check", backend_checks(), ids=str)
def test_memory_backend_conformance(shape: str, check: Check) -> None:
    run_check(check, memory_harness(shape), strict=True)


@pytest.mark.parametrize("check", [c for c in backend_checks() if c.requires is None], ids=str)
def test_memory_without_accounting_still_conforms(check: Check) -> None:
    """Every check that applies to any backend passes when the scheduler keeps no history."""
    run_check(check, memory_harness("slurm", accounting=False), strict=True)


def test_strict_fails_a_check_that_applies_but_skips() -> None:
    def needs_what_no_harness_has(h: Harness) -> None:
        raise Skip("the harness cannot do this")

    applies = Check("needs_what_no_harness_has", needs_what_no_harness_has, None, "")
    with pytest.raises(ConformanceError, match="applies to this backend but skipped: the harness cannot do this"):
        run_check(applies, memory_harness("slurm"), strict=True)
    with pytest.raises(pytest.skip.Exception):
        run_check(applies, memory_harness("slurm"))
    not_applicable = Check("watch", needs_what_no_harness_has, Watcher, "")
    with pytest.raises(pytest.skip.Exception, match="does not implement Watcher"):
        run_check(not_applicable, memory_harness("slurm"), strict=True)
