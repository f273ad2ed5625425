"""A submitit-style script on the real Slurm 22.05 cluster on this host (marker slurm_local), through
``from dispatch.compat import submitit``: parameters by submitit's names, ``map_array`` as one job array whose
results are a plain loop's and whose tasks run at most ``slurm_array_parallelism`` at once, a job's output, and a
refused parameter that submits nothing; a Checkpointable preempted once (a job of the higher-priority partition on
its node), resubmitted by its rule and resumed from its checkpoint."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import cloudpickle
import pytest

from dispatch.compat import submitit
from dispatch.errors import ConfigError
from dispatch.outcome import Cause, State
from dispatch.slurm.harness import admin, node_of

from ...executor.slurm import slurm_cluster
from ...slurm.arrays_suite import most_at_once
from ...slurm.clusters import description

pytestmark = pytest.mark.slurm_local

cloudpickle.register_pickle_by_value(sys.modules[__name__])


def add(a: int, b: int) -> int:
    print(f"adding {a} and {b}, setup {os.environ.get('SUBMITIT_STYLE')}", flush=True)
    return a + b


def test_a_submitit_script_runs_on_slurm(tmp_path: Path) -> None:
    desc = description("local")
    with slurm_cluster("local") as (cluster, options):
        executor = submitit.AutoExecutor(folder=tmp_path / "%j", cluster=cluster, slurm_python=options["python"])
        setup = ["export SUBMITIT_STYLE=yes"]
        executor.update_parameters(
            timeout_min=10, cpus_per_task=1, name="submitit-style", slurm_setup=setup, slurm_array_parallelism=4
        )
        with pytest.raises(ConfigError, match="slurm_srun_args"):
            executor.update_parameters(slurm_srun_args=["--cpu-bind=none"])
        assert cluster.observer.list() == []
        try:
            a, b = list(range(50)), list(range(100, 150))
            jobs = executor.map_array(add, a, b)
            assert [job.result() for job in jobs] == [x + y for x, y in zip(a, b, strict=True)]
            scheduler_ids = [cluster.get(job.job_id).submissions[-1].scheduler_id or "" for job in jobs]
            (array,) = {sid.split("_")[0] for sid in scheduler_ids}  # one job array
            fields = "JobID,Start,End,State"
            deadline = time.monotonic() + 60
            while True:  # a task's result arrives through the shared storage before accounting records its end
                lines = admin(desc, "sacct", "-n", "-P", "-X", "-j", array, "-o", fields, "--starttime", "now-1hour")
                rows = [line.split("|") for line in lines.stdout.splitlines()]
                spans = [(p[1], p[2]) for p in rows if p[3] == "COMPLETED"]
                if len(spans) == len(a) or time.monotonic() > deadline:
                    break
                time.sleep(1)
            assert len(spans) == len(a) and most_at_once(spans) <= 4, lines.stdout  # slurm_array_parallelism=4: %4
            assert {job.state for job in jobs} == {"COMPLETED"}
            assert "adding 0 and 100, setup yes" in (jobs[0].stdout() or "")
            assert cluster.get(jobs[0].job_id).spec.name == "submitit-style"
        finally:
            executor.executor.shutdown(wait=True, cancel_futures=True)


class Summer(submitit.helpers.Checkpointable):
    """Sums i*i below n, half a second a step, from where the last execution stopped; ``starts`` lists where
    each execution began."""

    def __init__(self) -> None:
        self.start, self.total, self.starts = 0, 0, []

    def __call__(self, n: int) -> tuple[int, list[int]]:
        self.starts.append(self.start)
        for i in range(self.start, n):
            time.sleep(0.5)
            self.total += i * i
            self.start = i + 1
        return self.total, self.starts


def test_a_checkpointable_preempted_once_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    desc = description("local")
    with slurm_cluster("local") as (cluster, options):
        executor = submitit.AutoExecutor(folder=tmp_path, cluster=cluster, slurm_python=options["python"])
        executor.update_parameters(timeout_min=10, slurm_partition=desc["partitions"]["default"])
        try:
            job = executor.submit(Summer(), 40)  # 20 s of work
            deadline = time.monotonic() + 120
            while (out := cluster.get(job.job_id).outcome) is None or out.state is not State.RUNNING:
                assert time.monotonic() < deadline, "the job never ran"
                time.sleep(0.5)
            time.sleep(6)  # some steps done
            sid = cluster.get(job.job_id).submissions[0].scheduler_id or ""
            node = node_of(cluster.backend, sid)
            preemptor = ["-J", "dsp-preemptor", "-o", "/dev/null", "--wrap", "sleep 20"]
            admin(desc, "sbatch", "-p", desc["partitions"]["preempt"], "--exclusive", "-w", node, *preemptor)
            total, starts = job.result()
            assert total == sum(i * i for i in range(40))
            assert len(starts) >= 2 and starts[0] == 0 and starts[1] > 0, starts  # resumed, not started again
            record = cluster.get(job.job_id)
            first = record.submissions[0].executions[-1].outcome
            assert first is not None and first.cause is Cause.PREEMPTED, first
            assert len(record.submissions) >= 2 and job.state == "COMPLETED"
        finally:
            executor.executor.shutdown(wait=True, cancel_futures=True)
