"""Running ``examples/hydra_sweep/train.py`` as a user would, in a fresh directory with its own dispatch config
and records (``XDG_CONFIG_HOME``, ``XDG_STATE_HOME``), and reading what it recorded."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from dispatch.records import SQLiteRecords
from dispatch.records.model import JobRecord

ROOT = Path(__file__).resolve().parents[3]
SRC = ROOT / "src"
TRAIN = ROOT / "examples" / "hydra_sweep" / "train.py"
TIMEOUT = 300.0
LAUNCHED = re.compile(r"#(\d+) ([0-9a-f]{16}): (COMPLETED|FAILED|cancelled)(?::\s(.*))?$", re.M)
"""The launcher's closing line for each job: ``#<number> <job id>: COMPLETED: <value>``."""


def environment(tmp: Path) -> dict[str, str]:
    """This interpreter's environment without dispatch's and Hydra's variables, with fresh config and state
    directories under ``tmp`` and this checkout's ``src`` first on the path (the jobs inherit it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DISPATCH_", "XDG_", "HYDRA_"))}
    env["XDG_CONFIG_HOME"] = str(tmp / "config")
    env["XDG_STATE_HOME"] = str(tmp / "state")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH", "")) if p)
    return env


def argv(tmp: Path, *args: str, app: Path = TRAIN) -> list[str]:
    """``python APP -m ARGS hydra/launcher=dispatch``, its outputs under ``tmp/multirun``."""
    return [sys.executable, str(app), "-m", *args, "hydra/launcher=dispatch", f"hydra.sweep.dir={tmp}/multirun"]


def sweep(tmp: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python train.py -m ARGS hydra/launcher=dispatch`` run to its end in ``tmp``."""
    return subprocess.run(
        argv(tmp, *args), cwd=tmp, env=env or environment(tmp), capture_output=True, text=True, timeout=TIMEOUT
    )


def records_path(tmp: Path) -> Path:
    return tmp / "state" / "dispatch" / "records.db"


def jobs(tmp: Path) -> list[JobRecord]:
    """Every job the sweep recorded (none when nothing was recorded), in batch order."""
    path = records_path(tmp)
    if not path.exists():
        return []
    store = SQLiteRecords(str(path))
    try:
        found = [store.get(s.id) for s in store.summaries()]
    finally:
        store.close()
    return sorted(found, key=lambda j: j.batch.index if j.batch is not None else -1)
