"""The allowed skips of the core suite on the Slurm test clusters name real checks."""

from dispatch.conformance.core import core_checks

from .core_suite import CANNOT


def test_the_allowed_skips_name_real_checks() -> None:
    assert set(CANNOT) <= {c.name for c in core_checks()}, set(CANNOT) - {c.name for c in core_checks()}
