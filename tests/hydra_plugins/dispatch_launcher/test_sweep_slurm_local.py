"""The six-job sweep on the real Slurm 22.05 on this host (marker slurm_local): ``train.py -m`` with
``hydra.launcher.cluster`` naming a Slurm cluster of dispatch's config file is ONE job array of six tasks on the
controller (every job's scheduler id is ``<array>_<task>``, one array, tasks 0-5), and the six values come back."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

from dispatch.outcome import State
from dispatch.slurm.arrayids import split
from dispatch.slurm.harness import settings_for

from ...slurm.clusters import description
from .sweep import LAUNCHED, SRC, environment, jobs, sweep

pytestmark = pytest.mark.slurm_local


def _toml(value: Any) -> str:
    """``value`` (dicts, lists, strings, numbers, booleans; None left out) as a TOML inline value."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items() if v is not None) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(str(value))


def test_a_sweep_of_six_is_one_job_array_of_six_tasks(tmp_path: Path) -> None:
    shared = Path(f"/tmp/dispatch-hydra-{uuid.uuid4().hex[:8]}")
    shared.mkdir(mode=0o777)
    os.chmod(shared, 0o777)  # open to every user, as a cluster's shared scratch is
    config = tmp_path / "config" / "dispatch" / "config.toml"
    config.parent.mkdir(parents=True)
    settings = settings_for(description("local"), sharedStorage={"dir": str(shared)})
    config.write_text(f'[clusters.slurm22]\nadapter = "slurm"\nsettings = {_toml(settings)}\n')
    lrs = ("0.1", "0.2", "0.3", "0.4", "0.5", "0.6")
    try:
        done = sweep(
            tmp_path,
            f"lr={','.join(lrs)}",
            "hydra.launcher.cluster=slurm22",
            f"+hydra.launcher.env.PYTHONPATH={SRC}",
            env=environment(tmp_path),
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        found = jobs(tmp_path)
        assert len(found) == 6 and all(j.state is State.SUCCEEDED for j in found), [(j.id, j.state) for j in found]
        sids = [str(j.submissions[0].scheduler_id) for j in found]
        assert len({split(s)[0] for s in sids}) == 1, f"one sbatch, one array: {sids}"
        assert sorted(split(s)[1] for s in sids) == list(range(6)), sids
        assert len(LAUNCHED.findall(done.stdout)) == 6 and "FAILED" not in done.stdout
    finally:
        shutil.rmtree(shared, ignore_errors=True)
