"""The backend conformance suite: what every dispatch adapter must show at object level, through the SPI alone.

Use it from an adapter's own pytest run with a small harness::

    from dispatch.conformance import Harness, backend_checks, run_check

    @pytest.mark.parametrize("check", backend_checks(), ids=str)
    def test_conformance(check, harness):      # harness: a fixture returning a Harness
        run_check(check, harness)

Checks of optional interfaces the backend lacks are skipped as "not applicable", and checks needing a hook or
behaviour the harness lacks are skipped, each with the reason (pytest shows it with ``-rs``). A failure's message
ends with the check's preconditions (docs/spi.md lists them all).
"""

from __future__ import annotations

from dispatch.conformance.checks import CHECKS, Check, ConformanceError, NotApplicable, Skip, applicable, with_needs
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

    A check that does not apply (the backend lacks the interface it ``requires``, or the check raises
    :class:`NotApplicable`) is always skipped as not applicable. With ``strict``, a check that applies but skips
    (the harness cannot make the situation it needs) raises ConformanceError instead: use it for a harness that
    is meant to drive every check.
    """
    import pytest

    probe = h.backend()
    try:
        reason = applicable(c, probe)
    finally:
        probe.close()
    if reason is not None:
        pytest.skip(f"{c.name}: not applicable: {reason}")
    try:
        c.fn(h)
    except NotApplicable as exc:
        pytest.skip(f"{c.name}: not applicable: {exc}")
    except Skip as exc:
        if strict:
            raise ConformanceError(
                with_needs(f"{c.name} applies to this backend but skipped: {exc}", c.needs)
            ) from None
        pytest.skip(f"{c.name}: {exc}")
    except ConformanceError as exc:
        raise ConformanceError(with_needs(str(exc), c.needs)) from None


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
    "NotApplicable",
    "Skip",
    "Timings",
    "backend_checks",
    "run_check",
]
