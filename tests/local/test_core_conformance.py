"""Core conformance on the local adapter: real processes, the real clock, faults injected by the shipped
wrapper (no FakeClock, no simulator), through the harness the package ships."""

from __future__ import annotations

from pathlib import Path

import pytest

from dispatch.conformance.core import CoreCheck, core_checks, run_core_check
from dispatch.local import LocalBackend
from dispatch.local.harness import core_harness

CANNOT = {
    "preemption_is_resubmitted_by_rule": "nothing on this machine preempts a job",
    "rule_limit_is_honoured": "the limit is shown on preemptions, and nothing here preempts",
    "node_loss_is_not_concluded_early": "the nodes are process groups on this machine",
    "admin_hold_is_escalated_and_never_lifted": "there is no administrator's hold on this machine",
}
"""Core checks no harness can drive on one machine: the only ones allowed to skip. Checks that cannot apply to
the local backend (it loses no evidence, so no poll interval is too slow; it offers no Readmitter) report
themselves not applicable, strict or not."""


@pytest.mark.parametrize("check", core_checks(), ids=str)
def test_local_core_conformance(check: CoreCheck, tmp_path: Path) -> None:
    run_core_check(check, core_harness(tmp_path / "state"), strict=check.name not in CANNOT)


def test_the_allowed_skips_name_real_checks() -> None:
    assert set(CANNOT) <= {c.name for c in core_checks()}


def test_the_wrapper_keeps_the_backends_interfaces(tmp_path: Path) -> None:
    from dispatch.spi import Holder, Requeuer, Watcher, interfaces_of

    h = core_harness(tmp_path / "state")
    b = h.base.backend()
    assert isinstance(b, Holder) and isinstance(b, Requeuer) and not isinstance(b, Watcher)
    assert interfaces_of(b) == interfaces_of(LocalBackend(tmp_path / "s2", h.base.clock))
