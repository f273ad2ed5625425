"""dispatch.integrations.lightning with Lightning itself, in a subprocess (Lightning reads the environment and sets
signal handlers): inside a Slurm allocation Lightning alone picks its SLURMEnvironment with auto-requeue; given
``environment()`` it uses dispatch's ranks and no requeue, and refuses a Trainer whose shape is not the job's."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from .harness import ROOT

pytestmark = pytest.mark.training

# what srun and dispatch's Slurm adapter set for rank 1 of a 2-node job
ENV = {
    "SLURM_JOB_ID": "99", "SLURM_JOB_NAME": "train", "SLURM_NTASKS": "2", "SLURM_NTASKS_PER_NODE": "1",
    "SLURM_PROCID": "1", "SLURM_LOCALID": "0", "SLURM_NODEID": "1", "SLURM_NODELIST": "n[1-2]",
    "SLURM_TASKS_PER_NODE": "1(x2)",
    "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "NODE_RANK": "1",
    "MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "24321", "DISPATCH_RANK": "1", "DISPATCH_WORLD_SIZE": "2",
}  # fmt: skip

SCRIPT = """
import lightning as L
from lightning.fabric.plugins.environments import SLURMEnvironment
from dispatch.integrations import lightning as dispatch_lightning

def trainer(**extra):
    return L.Trainer(accelerator="cpu", devices=1, num_nodes=2, strategy="ddp", logger=False, **extra)

alone = trainer()._accelerator_connector.cluster_environment
assert isinstance(alone, SLURMEnvironment) and alone.auto_requeue, alone

env = trainer(plugins=[dispatch_lightning.environment()])._accelerator_connector.cluster_environment
assert not isinstance(env, SLURMEnvironment), env
got = (env.global_rank(), env.world_size(), env.local_rank(), env.node_rank(), env.main_address, env.main_port)
assert got == (1, 2, 0, 1, "10.0.0.5", 24321), got
assert env.creates_processes_externally and not env.detect()
env.validate_settings(num_devices=1, num_nodes=2)
try:
    env.validate_settings(num_devices=2, num_nodes=2)
except ValueError as exc:
    assert "world size 2" in str(exc), exc
else:
    raise AssertionError("a Trainer of 4 ranks in a job of 2 was accepted")
print("ok")
"""


def test_environment_replaces_slurm_detection_and_its_auto_requeue() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "DISPATCH_"))}
    env.update(ENV, PYTHONPATH=str(ROOT / "src"))
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]
