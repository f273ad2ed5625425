"""examples/hello_ranks.py reads the rank environment and refuses to run without it (never rank 0 of 1)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "hello_ranks.py"


def test_without_the_rank_environment_it_fails_clearly() -> None:
    env = {"PATH": os.environ["PATH"]}
    p = subprocess.run([sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    assert p.stdout == ""
    assert "RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT not set" in p.stderr


def test_with_it_each_rank_says_who_it_is() -> None:
    env = {"PATH": os.environ["PATH"], "RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "5"}
    p = subprocess.run([sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("rank 1/2 on ")
    assert p.stdout.endswith("rank 1: done (rendezvous 10.0.0.1:5)\n")
