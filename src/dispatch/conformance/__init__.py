"""The backend conformance suite: what every dispatch adapter must show at object level, through the SPI alone.

Use it from an adapter's own pytest run with a small harness::

    from dispatch.conformance import Harness, backend_checks, run_check

    @pytest.mark.parametrize("check", backend_checks(), ids=str)
    def test_conformance(check, harness):      # harness: a fixture returning a Harness
        run_check(check, harness)

Checks of optional interfaces the backend lacks, and checks needing a hook or behaviour the harness lacks, are
skipped with the reason (pytest shows it with ``-rs``).
"""

from __future__ import annotations

from dispatch.conformance.checks import CHECKS, Check, ConformanceError, Skip, applicable
from dispatch.conformance.harness import (
    BEHAVIOURS,
    DEFAULT_TIMINGS,
    ECHO_STDERR,
    ECHO_STDOUT,
    FAIL_EXIT_CODE,
    Harness,
    Timings,
)


class _Named(Check):
    def __str__(self) -> str:
        return self.name


def backend_checks() -> list[Check]:
    """Every backend check, for ``pytest.mark.parametrize`` (their ``str`` is their name)."""
    return [_Named(c.name, c.fn, c.requires, c.doc) for c in CHECKS]


def run_check(c: Check, h: Harness, *, strict: bool = False) -> None:
    """Run one check; under pytest a skip becomes ``pytest.skip`` with its reason.

    A check that does not apply (the backend lacks the interface it ``requires``) is always skipped. With
    ``strict``, a check that applies but skips (the harness cannot make the situation it needs) raises
    ConformanceError instead: use it for a harness that is meant to drive every check.
    """
    probe = h.backend()
    try:
        reason = applicable(c, probe)
    finally:
        probe.close()
    try:
        if reason is not None:
            raise Skip(reason)
        try:
            c.fn(h)
        except Skip as exc:
            if strict:
                raise ConformanceError(f"{c.name} applies to this backend but skipped: {exc}") from None
            raise
    except Skip as exc:
        import pytest

        pytest.skip(f"{c.name}: {exc}")


__all__ = [
    "BEHAVIOURS",
    "CHECKS",
    "DEFAULT_TIMINGS",
    "ECHO_STDERR",
    "ECHO_STDOUT",
    "FAIL_EXIT_CODE",
    "Check",
    "ConformanceError",
    "Harness",
    "Skip",
    "Timings",
    "backend_checks",
    "run_check",
]
