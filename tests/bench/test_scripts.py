"""Every script in bench/ runs: each one's ``--help`` starts it in a fresh interpreter (so every import at the
top of the script resolves, the way ``python bench/<name>.py`` resolves it), each helper module imports, and the
scripts that need no cluster measure a tiny case to the end and print JSON.

The full measurements need real clusters and minutes; they are run by hand (docs name each command).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
SCRIPTS = sorted(p.name for p in BENCH.glob("*.py") if not p.name.startswith("_"))
HELPERS = sorted(p.stem for p in BENCH.glob("_*.py"))


def _env() -> dict[str, str]:
    """This checkout's sources, as a user who runs ``python bench/x.py`` from it gets them."""
    return {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def test_the_scripts_were_found() -> None:
    assert len(SCRIPTS) >= 10 and "train.py" in SCRIPTS, SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_script_starts(script: str) -> None:
    got = subprocess.run(
        [sys.executable, str(BENCH / script), "--help"],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert got.returncode == 0, got.stderr[-2000:]
    assert got.stdout.startswith("usage:"), got.stdout[:500]


@pytest.mark.parametrize("helper", HELPERS)
def test_the_helper_imports(helper: str) -> None:
    code = f"import sys; sys.path.insert(0, {str(BENCH)!r}); import {helper}"
    got = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120
    )
    assert got.returncode == 0, got.stderr[-2000:]


TINY = {
    "archive.py": ["--jobs", "2", "--lines", "10", "--store", "memory"],
    "cycle.py": ["--adapter", "memory", "--jobs", "5", "--closed", "0", "--store", "memory"],
    "prune.py": ["--entries", "10", "--jobs", "2", "--store", "sqlite"],
    "records.py": ["--jobs", "20", "--executions", "2", "--stores", "memory"],
    "cli.py": ["--jobs", "20", "--repeat", "1", "--records", "sqlite"],
    "supervisors.py": ["--store", "memory", "--supervisors", "2", "--jobs", "4"],
    "executor_wait.py": ["--calls", "3"],
}
"""A case of a few seconds for each script that needs no cluster and no database server."""


@pytest.mark.parametrize("script", sorted(TINY))
def test_the_script_measures_a_tiny_case(script: str) -> None:
    got = subprocess.run(
        [sys.executable, str(BENCH / script), *TINY[script], "--json"],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert got.returncode == 0, got.stderr[-2000:]
    assert json.loads(got.stdout), got.stdout[:500]
