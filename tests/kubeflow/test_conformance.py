"""The backend conformance suite in plain and in Kueue mode, in both worlds: the project's server with in-process
reactors, and the front of the real apiextensions-apiserver with the controllers over HTTP (marked apiserver)."""

from __future__ import annotations

import pytest

from dispatch.conformance import backend_checks, run_check
from dispatch.conformance.checks import Check

from .harness import FakeCluster, harness

pytestmark = pytest.mark.both_worlds


@pytest.mark.parametrize("check", backend_checks(), ids=str)
def test_conformance_plain(check: Check, plain: FakeCluster) -> None:
    run_check(check, harness(plain), strict=True)


@pytest.mark.parametrize("check", backend_checks(), ids=str)
def test_conformance_kueue(check: Check, kueue: FakeCluster) -> None:
    run_check(check, harness(kueue), strict=True)
