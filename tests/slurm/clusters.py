"""The real test clusters (scripts/slurm/up.sh writes clusters.json), through the harness the package ships
(:mod:`dispatch.slurm.harness`).

Nothing here skips: a missing clusters.json or a cluster that does not answer FAILS with the command to run.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace
from typing import Any

import pytest

import dispatch.slurm as slurm
from dispatch.conformance import Harness
from dispatch.conformance.core import CoreHarness
from dispatch.conformance.faults import with_faults
from dispatch.slurm import harness as shipped

STATE = os.environ.get("DISPATCH_TEST_STATE", "/var/lib/dispatch-test")
HOW = "run `sudo scripts/slurm/up.sh` to start the test clusters"


def description(name: str) -> dict[str, Any]:
    path = os.path.join(STATE, "clusters.json")
    if not os.path.exists(path):
        pytest.fail(f"{path} is missing: {HOW}", pytrace=False)
    with open(path) as f:
        data = json.load(f)
    if name not in data:
        pytest.fail(f"cluster {name!r} is not in {path}: {HOW}", pytrace=False)
    return dict(data[name])


def open_backend(name: str, **kw: Any) -> slurm.SlurmBackend:
    desc = description(name)
    try:
        return slurm.new(shipped.settings_for(desc), **kw)
    except Exception as exc:
        pytest.fail(f"the {name} Slurm cluster did not answer ({type(exc).__name__}: {exc}): {HOW}", pytrace=False)


def admin(name: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a Slurm command as test cluster ``name``'s administrator."""
    return shipped.admin(description(name), *argv, check=check)


def _loud(h: Harness, name: str) -> Harness:
    """``h`` with backends opened by :func:`open_backend`, so a cluster that does not answer fails with HOW."""
    return replace(h, backend=lambda: open_backend(name), read_only_backend=lambda: open_backend(name, read_only=True))


def harness(name: str) -> Harness:
    """The backend-suite harness of test cluster ``name``."""
    return _loud(shipped.base_harness(description(name), f"slurm-{name}"), name)


def core_harness(name: str) -> CoreHarness:
    """The core-suite harness of test cluster ``name`` (the real clock, the shipped fault wrapper)."""
    core = shipped.harness(description(name))
    return with_faults(replace(core, base=_loud(core.base, name), inject=None))
