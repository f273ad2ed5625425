"""submitit code on dispatch's local adapter, through ``from dispatch.compat import submitit``: map_array as one
batched submission with the results of a plain loop, batch(), a parameter dispatch cannot honour refused by
name with nothing submitted, a Checkpointable resumed after its time limit, the Job surface, the cluster chosen
by the dispatch configuration."""

from __future__ import annotations

import os
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

import dispatch
from dispatch.cluster import Cluster
from dispatch.compat import submitit
from dispatch.errors import ConfigError
from dispatch.executor import CallFailed
from dispatch.records.memory import MemoryRecords

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with dispatch.open(
        "local", adapter={"stateDir": str(tmp_path / "state"), "grace": 1}, records=MemoryRecords()
    ) as c:
        yield c
        for job in c.observer.list(active_only=True):
            c.operator.stop(job.id)


@pytest.fixture
def executor(cluster: Cluster, tmp_path: Path) -> Iterator[submitit.AutoExecutor]:
    ex = submitit.AutoExecutor(folder=tmp_path / "logs" / "%j", cluster=cluster)
    yield ex
    ex.executor.shutdown(wait=True, cancel_futures=True)


class Boom(Exception):
    pass


def add(a: int, b: int) -> int:
    return a + b


def shout(word: str) -> str:
    print(f"said {word}", flush=True)
    print(f"warned {word}", file=sys.stderr, flush=True)
    return word


def explode() -> None:
    raise Boom("on the cluster")


def nap(seconds: float) -> str:
    time.sleep(seconds)
    return "woke"


def ranks() -> tuple[int, int, str]:
    env = submitit.JobEnvironment()
    return env.global_rank, env.num_tasks, env.job_id


class Summer(submitit.helpers.Checkpointable):
    """Sums i*i below n, a quarter second a step, from where the last execution stopped."""

    def __init__(self) -> None:
        self.start, self.total, self.starts = 0, 0, []

    def __call__(self, n: int) -> tuple[int, list[int]]:
        self.starts.append(self.start)
        for i in range(self.start, n):
            time.sleep(0.25)
            self.total += i * i
            self.start = i + 1
        return self.total, self.starts


class Submissions:
    """Every ``submit_many`` (its size) and ``submit`` of the cluster's operator."""

    def __init__(self, cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
        self.many: list[int] = []
        self.singles = 0
        operator = cluster.operator
        submit_many, submit = operator.submit_many, operator.submit

        def counted_many(specs: Any, rules: Any = None, **kw: Any) -> Any:
            self.many.append(len(specs))
            return submit_many(specs, rules, **kw)

        def counted(spec: Any, rules: Any = None) -> Any:
            self.singles += 1
            return submit(spec, rules)

        monkeypatch.setattr(operator, "submit_many", counted_many)
        monkeypatch.setattr(operator, "submit", counted)


def test_map_array_of_50_is_one_batched_submission_with_the_results_of_a_loop(
    executor: submitit.AutoExecutor, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = Submissions(cluster, monkeypatch)
    executor.update_parameters(timeout_min=10, name="adder")
    a, b = list(range(50)), list(range(100, 150))
    jobs = executor.map_array(add, a, b)
    assert seen.many == [50] and seen.singles == 0
    assert [job.result() for job in jobs] == [add(x, y) for x, y in zip(a, b, strict=True)]
    assert {job.state for job in jobs} == {"COMPLETED"}
    assert len({job.job_id for job in jobs}) == 50
    spec = cluster.get(jobs[0].job_id).spec
    assert (spec.name, spec.time_limit) == ("adder", 600)


def test_batch_is_one_batched_submission_and_its_jobs_work_after_it(
    executor: submitit.AutoExecutor, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = Submissions(cluster, monkeypatch)
    with executor.batch():
        jobs = [executor.submit(add, i, 1) for i in range(5)]
        with pytest.raises(RuntimeError, match="not allowed"):
            executor.update_parameters(timeout_min=2)
        assert seen.many == [] and cluster.observer.list() == []
    assert seen.many == [5] and seen.singles == 0
    assert [job.result() for job in submitit.helpers.as_completed(jobs, timeout=180)] != []
    assert [job.result() for job in jobs] == [1, 2, 3, 4, 5]


def test_an_unsupported_parameter_is_an_error_naming_it_and_nothing_is_submitted(
    executor: submitit.AutoExecutor, cluster: Cluster
) -> None:
    executor.update_parameters(timeout_min=7)
    for bad in ({"slurm_srun_args": ["-v"]}, {"slurm_partitio": "gpu"}, {"gpus": 1}, {"stderr_to_stdout": True}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            executor.update_parameters(timeout_min=9, **bad)
    assert executor.parameters == {"timeout_min": 7}  # a refused update keeps nothing of itself
    with pytest.raises(ConfigError, match="allow_implicit_submissions"), executor.batch(True):
        pass
    executor._kind = "slurm"  # the throttle is a Slurm parameter: read as on a Slurm cluster
    executor.update_parameters(slurm_array_parallelism=2)
    with pytest.raises(ConfigError, match="slurm_array_parallelism.*BatchThrottle.*batches of 2"):
        executor.map_array(add, [1, 2, 3], [1, 2, 3])  # the local adapter cannot cap a batch
    assert cluster.observer.list() == []
    with pytest.raises(ConfigError, match="slurm_max_pickle_size_gb"):
        submitit.AutoExecutor(folder="logs", cluster=cluster, slurm_max_pickle_size_gb=2.0)
    with pytest.raises(ConfigError, match="'conda_file'"):
        submitit.AutoExecutor(folder="logs", cluster=cluster, conda_file="env.yaml")
    with pytest.raises(ConfigError, match="local_python.*interpreter"):
        submitit.AutoExecutor(folder="logs", cluster=cluster, local_python="singularity exec img python")
    assert cluster.observer.list() == []


def test_another_executors_parameters_warn_and_do_not_apply(executor: submitit.AutoExecutor, cluster: Cluster) -> None:
    with pytest.warns(UserWarning, match="slurm_partition: for another submitit executor"):
        executor.update_parameters(slurm_partition="gpu", timeout_min=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        executor.update_parameters(nodes=1)  # the same again: warned once
    job = executor.submit(add, 2, 2)
    assert job.result() == 4
    assert cluster.get(job.job_id).spec.extensions == ()


def test_the_job_answers_as_submitits_does(executor: submitit.AutoExecutor, cluster: Cluster) -> None:
    job = executor.submit(shout, "hello")
    assert job.result() == "hello" and job.done() and job.exception() is None
    assert job.state == "COMPLETED"
    assert "said hello" in (job.stdout() or "") and "warned hello" in (job.stderr() or "")
    assert job.submission().args == ("hello",) and job.num_tasks == 1
    assert f"job_id={job.job_id}" in repr(job)
    failed = executor.submit(explode)
    with pytest.raises(Boom, match="on the cluster"):
        failed.result()
    assert isinstance(failed.exception(), Boom) and failed.state == "FAILED"
    long = executor.submit(nap, 600)
    long.cancel()
    assert long.done() and cluster.get(long.job_id).stop_requested


def test_setup_lines_run_before_the_function(executor: submitit.AutoExecutor) -> None:
    executor.update_parameters(local_setup=["export GREETING='hi from setup'"])
    assert executor.submit(os.getenv, "GREETING").result() == "hi from setup"


def test_a_job_of_two_tasks_gives_every_tasks_result(executor: submitit.AutoExecutor) -> None:
    executor.update_parameters(tasks_per_node=2)
    job = executor.submit(ranks)
    results = job.results()
    assert [(rank, world) for rank, world, _ in results] == [(0, 2), (1, 2)]
    assert {job_id for _, _, job_id in results} == {job.job_id}
    with pytest.raises(RuntimeError, match="2 tasks: use results"):
        job.result()


def test_a_job_past_its_time_limit_is_not_resubmitted_unless_it_is_checkpointable(
    executor: submitit.AutoExecutor, cluster: Cluster
) -> None:
    executor.update_parameters(timeout_min=8 / 60)  # 8 s: room for a slow start on a loaded machine
    plain = executor.submit(nap, 600)
    resumed = executor.submit(Summer(), 40)  # 10 s of work: two executions at least
    total, starts = resumed.result()
    assert total == sum(i * i for i in range(40))
    assert len(starts) >= 2 and starts[0] == 0 and starts == sorted(set(starts)), starts
    record = cluster.get(resumed.job_id)
    assert len(record.submissions) >= 2 and record.rules is not None
    with pytest.raises(CallFailed) as caught:
        plain.result()
    assert plain.state == "TIMEOUT" and len(caught.value.record.submissions) == 1


def test_the_cluster_is_the_dispatch_configurations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("DISPATCH_RECORDS", raising=False)
    assert submitit.AutoExecutor.which() == "local"
    ex = submitit.AutoExecutor(folder=tmp_path / "logs")
    try:
        assert ex.cluster == "local"
        assert ex.submit(add, 20, 22).result() == 42
    finally:
        ex.executor.shutdown()
    assert (tmp_path / "state" / "dispatch" / "records.db").exists()
    with pytest.raises(ConfigError, match="no cluster named 'hpc'"):
        submitit.AutoExecutor(folder=tmp_path / "logs", cluster="hpc")
    with pytest.raises(ConfigError, match="debug executor runs jobs in this process"):
        submitit.AutoExecutor(folder=tmp_path / "logs", cluster="debug")
    assert not os.path.exists(tmp_path / "logs")  # nothing is written in the folder


def test_the_names_submitit_code_reaches_for() -> None:
    assert submitit.helpers.DelayedSubmission is submitit.DelayedSubmission
    delayed = submitit.helpers.DelayedSubmission(add, 1, b=2)
    assert not delayed.done() and delayed.result() == 3 and delayed.done()
    state = Summer().checkpoint(5)
    assert isinstance(state, submitit.helpers.DelayedSubmission) and state.args == (5,)
    with pytest.raises(TypeError, match="no __call__"):

        class NotCallable(submitit.helpers.Checkpointable):
            pass

        NotCallable()
    with pytest.raises(AttributeError, match="use AutoExecutor"):
        _ = submitit.SlurmExecutor
