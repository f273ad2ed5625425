"""The allowed skips and the 22.05 selection of the core suite on the Slurm test clusters name real checks."""

from dispatch.conformance import backend_checks
from dispatch.conformance.core import core_checks

from .core_suite import CANNOT, LONG_CHECKS, checks


def test_the_allowed_skips_name_real_checks() -> None:
    assert set(CANNOT) <= {c.name for c in core_checks()}, set(CANNOT) - {c.name for c in core_checks()}


def test_only_22_05_leaves_out_the_long_checks_and_their_slurm_side_is_in_the_backend_suite() -> None:
    every = [c.name for c in core_checks()]
    assert set(LONG_CHECKS) <= set(every)
    assert [c.name for c in checks("sid")] == [c.name for c in checks("trixie")] == every
    assert [c.name for c in checks("local")] == [n for n in every if n not in LONG_CHECKS]
    assert {"timeout_cause", "hold_by_instance", "find_by_marker", "find_many"} <= {c.name for c in backend_checks()}
