"""CI's simulator sweep: 1,000 seeds (both shapes, alternating) must run clean.

This is the simulator's acceptance run, not a unit test: it takes about two minutes on two cores (measured ~8
seeds/s with ``--procs 2``). ``DISPATCH_SIM_SEEDS`` changes the range (e.g. ``0-9999`` for the benchmark run).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from dispatch.sim.__main__ import _range

SRC = Path(__file__).resolve().parents[2] / "src"


def test_a_thousand_seeds_run_clean() -> None:
    seeds = os.environ.get("DISPATCH_SIM_SEEDS", "0-999")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-m", "dispatch.sim", "--seeds", seeds, "--procs", "2", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
        check=False,
    )
    assert proc.stdout, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["violations"] == 0 and out["unsettled"] == 0, json.dumps(out["summary"]["first_failures"], indent=1)
    assert out["seeds"] == len(_range(seeds))
    assert proc.returncode == 0
