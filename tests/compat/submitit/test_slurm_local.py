"""A submitit-style script on the real Slurm 22.05 cluster on this host (marker slurm_local), through
``from dispatch.compat import submitit``: parameters by submitit's names, ``map_array`` as one job array whose
results are a plain loop's, a job's output, and a refused parameter that submits nothing."""

from __future__ import annotations

import sys
from pathlib import Path

import cloudpickle
import pytest

from dispatch.compat import submitit
from dispatch.errors import ConfigError

from ...executor.slurm import slurm_cluster

pytestmark = pytest.mark.slurm_local

cloudpickle.register_pickle_by_value(sys.modules[__name__])


def add(a: int, b: int) -> int:
    print(f"adding {a} and {b}", flush=True)
    return a + b


def test_a_submitit_script_runs_on_slurm(tmp_path: Path) -> None:
    with slurm_cluster("local") as (cluster, options):
        executor = submitit.AutoExecutor(folder=tmp_path / "%j", cluster=cluster, slurm_python=options["python"])
        executor.update_parameters(timeout_min=10, cpus_per_task=1, name="submitit-style", slurm_use_srun=True)
        with pytest.raises(ConfigError, match="slurm_setup"):
            executor.update_parameters(slurm_setup=["module load cuda"])
        assert cluster.observer.list() == []
        try:
            a, b = list(range(12)), list(range(100, 112))
            jobs = executor.map_array(add, a, b)
            assert [job.result() for job in jobs] == [x + y for x, y in zip(a, b, strict=True)]
            scheduler_ids = [cluster.get(job.job_id).submissions[-1].scheduler_id or "" for job in jobs]
            assert len({sid.split("_")[0] for sid in scheduler_ids}) == 1, scheduler_ids  # one job array
            assert {job.state for job in jobs} == {"COMPLETED"}
            assert "adding 0 and 100" in (jobs[0].stdout() or "")
            assert cluster.get(jobs[0].job_id).spec.name == "submitit-style"
        finally:
            executor.executor.shutdown(wait=True, cancel_futures=True)
