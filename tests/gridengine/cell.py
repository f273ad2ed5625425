"""The test cell (scripts/gridengine-up.sh writes gridengine.json). Nothing here skips: a missing description
or a cell that does not answer FAILS with the command to run."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from dispatch.conformance.core import CoreHarness
from dispatch.gridengine.harness import harness

STATE = os.environ.get("DISPATCH_TEST_STATE", "/var/lib/dispatch-test")
HOW = "run `sudo scripts/gridengine-up.sh` to start the test cell"


def description() -> dict[str, Any]:
    path = os.path.join(STATE, "gridengine.json")
    if not os.path.exists(path):
        pytest.fail(f"{path} is missing: {HOW}", pytrace=False)
    with open(path) as f:
        return dict(json.load(f))


def cell_harness(tmp: Path) -> CoreHarness:
    desc = description()
    return harness(
        {
            "sgeRoot": desc["sge_root"],
            "sgeCell": desc["sge_cell"],
            "queue": desc["queue"],
            "stateDir": str(tmp / "state"),
            "outputDir": str(tmp / "output"),
        }
    )
