"""The backend conformance suite against the fake API server, in plain and in Kueue mode."""

from __future__ import annotations

import pytest

from dispatch.conformance import backend_checks, run_check
from dispatch.conformance.checks import Check

from .harness import FakeCluster, harness


@pytest.mark.parametrize("check", backend_checks(), ids=str)
def test_conformance_plain(check: Check, plain: FakeCluster) -> None:
    run_check(check, harness(plain), strict=True)


@pytest.mark.parametrize("check", backend_checks(), ids=str)
def test_conformance_kueue(check: Check, kueue: FakeCluster) -> None:
    run_check(check, harness(kueue), strict=True)
