"""submitit's parameter names read into a dispatch job's request: every name carried or refused by name."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from dispatch.compat.submitit.parameters import DEFAULT_TIMEOUT_MIN, later_wins, request_of
from dispatch.errors import ConfigError, DispatchError
from dispatch.resources import Resources
from dispatch.slurm.extensions import Placement


def test_the_shared_names_make_the_jobs_shape() -> None:
    r = request_of(
        {
            "timeout_min": 30,
            "nodes": 2,
            "tasks_per_node": 4,
            "gpus_per_node": 1,
            "cpus_per_task": 8,
            "mem_gb": 64,
            "name": "train",
            "stderr_to_stdout": False,
            "slurm_partition": None,  # None is not set, as in submitit
        },
        "slurm",
    )
    assert (r.nodes, r.tasks_per_node, r.world_size, r.time_limit, r.name) == (2, 4, 8, 1800.0, "train")
    assert r.resources == Resources(gpus_per_node=1, cpus_per_proc=8, mem_per_node=64 * 1024)
    assert r.extensions() == () and r.elsewhere == ()


def test_without_a_time_limit_a_job_gets_submitits_five_minutes() -> None:
    assert request_of({}, "local").time_limit == DEFAULT_TIMEOUT_MIN * 60 == 300


def test_the_clusters_own_parameters_win_over_the_shared_ones() -> None:
    assert request_of({"timeout_min": 10, "slurm_time": "1:00:00"}, "slurm").time_limit == 3600
    assert request_of({"slurm_time": 90, "timeout_min": 10}, "slurm").time_limit == 5400
    assert request_of({"timeout_min": 10, "slurm_timeout_min": 20}, "slurm").time_limit == 1200
    assert request_of({"timeout_min": 10, "local_timeout_min": 20}, "local").time_limit == 1200
    assert request_of({"nodes": 1, "slurm_nodes": 3, "slurm_ntasks_per_node": 2}, "slurm").world_size == 6


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("45", 2700), ("10:30", 630), ("1:00:00", 3600), ("2-0", 172800), ("1-2:30", 95400), ("0-0:0:5", 5)],
)
def test_slurm_time_in_slurms_forms(text: str, seconds: int) -> None:
    assert request_of({"slurm_time": text}, "slurm").time_limit == seconds


def test_slurm_parameters_become_the_jobs_resources_and_placement() -> None:
    r = request_of(
        {
            "slurm_partition": "gpu",
            "slurm_account": "ml",
            "slurm_qos": "high",
            "slurm_constraint": "a100",
            "slurm_exclude": "node[1-2]",
            "slurm_gres": "gpu:a100:4",
            "slurm_mem": "200GB",
            "slurm_exclusive": True,
            "slurm_job_name": "sweep",
            "slurm_additional_parameters": {"reservation": "friday", "cpus-per-task": 6},
        },
        "slurm",
    )
    gpus = Resources(gpus_per_node=4, gpu_type="a100", cpus_per_proc=6, mem_per_node=200 * 1024, exclusive=True)
    assert r.resources == gpus
    assert r.name == "sweep"
    placement = Placement(partition="gpu", account="ml", qos="high", reservation="friday", constraint="a100")
    assert r.extensions() == (dataclasses.replace(placement, exclude="node[1-2]"),)


def test_parameters_for_another_executor_are_checked_and_left_to_it() -> None:
    r = request_of({"slurm_partition": "gpu", "slurm_array_parallelism": 4, "timeout_min": 10}, "local")
    assert r.elsewhere == ("slurm_partition", "slurm_array_parallelism")
    assert r.extensions() == () and r.array_parallelism is None and r.time_limit == 600
    with pytest.raises(ConfigError, match="slurm_partitio'.*no parameter of submitit's slurm executor"):
        request_of({"slurm_partitio": "gpu"}, "local")
    assert request_of({"slurm_array_parallelism": 4}, "slurm").array_parallelism == 4


@pytest.mark.parametrize(
    ("parameters", "named", "why"),
    [
        ({"partition": "gpu"}, "partition", "is no submitit parameter"),
        ({"gpus": 2}, "gpus", "is no submitit parameter"),
        ({"chronos_conda_file": "x"}, "chronos_conda_file", "is no submitit parameter"),
        ({"slurm_teardown": ["rm -r scratch"]}, "slurm_teardown", "not carried by dispatch: dispatch runs no shell"),
        ({"slurm_setup": "module load cuda"}, "slurm_setup", "list of shell lines"),
        ({"slurm_srun_args": ["--cpu-bind=none"]}, "slurm_srun_args", "not carried"),
        ({"slurm_signal_delay_s": 120}, "slurm_signal_delay_s", "on SIGTERM"),
        ({"slurm_use_srun": False}, "slurm_use_srun", "not carried"),
        ({"stderr_to_stdout": True}, "stderr_to_stdout", "apart"),
        ({"slurm_mail_user": "a@b"}, "slurm_mail_user", "sends no mail"),
        ({"local_visible_gpus": (0, 1)}, "local_visible_gpus", "not carried"),
        ({"slurm_additional_parameters": {"mail-type": "END"}}, "slurm_additional_parameters['mail-type']", "carried"),
        ({"slurm_gres": "shard:2"}, "slurm_gres", "GPU requests"),
        ({"slurm_exclusive": "user"}, "slurm_exclusive", "exclusive=True or False"),
        ({"timeout_min": "10"}, "timeout_min", "positive number"),
        ({"nodes": 0}, "nodes", "at least 1"),
        ({"slurm_time": "soon"}, "slurm_time", "Slurm time"),
        ({"mem_gb": -1}, "mem_gb", "positive number"),
        ({"debug_anything": 1}, "debug_anything", "no parameter of submitit's debug executor"),
    ],
)
def test_a_parameter_dispatch_cannot_honour_is_an_error_naming_it(
    parameters: dict[str, Any], named: str, why: str
) -> None:
    prefix = named.split("_")[0]
    for executor in [prefix] if prefix in ("slurm", "local", "debug") else ["slurm", "local"]:
        with pytest.raises(ConfigError) as caught:
            request_of(parameters, executor)
        assert isinstance(caught.value, DispatchError)
        assert caught.value.path == named and why in caught.value.message, caught.value


def test_a_parameter_no_cluster_carries_is_refused_on_every_cluster() -> None:
    with pytest.raises(ConfigError, match="slurm_srun_args"):
        request_of({"slurm_srun_args": ["-v"]}, "local")


def test_a_parameter_given_the_value_that_asks_nothing_is_accepted() -> None:
    nothing = {"slurm_srun_args": [], "slurm_use_srun": True, "stderr_to_stdout": False, "local_setup": ()}
    r = request_of(nothing, "slurm")
    assert r.elsewhere == ("local_setup",)
    assert dataclasses.replace(r, elsewhere=()) == request_of({}, "slurm")


def test_setup_lines_are_carried_for_the_clusters_own_executor() -> None:
    lines = ["module load cuda", "export STAGE=setup"]
    assert request_of({"slurm_setup": lines}, "slurm").setup == tuple(lines)
    assert request_of({"local_setup": lines}, "local").setup == tuple(lines)
    assert request_of({"slurm_setup": lines}, "local").setup == ()


def test_a_bad_placement_names_the_parameter() -> None:
    with pytest.raises(ConfigError, match="slurm_partition"):
        request_of({"slurm_partition": "gpu queue"}, "slurm").extensions()


def _updated(*updates: dict[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for update in updates:
        merged = later_wins(merged, update)
    return merged


def test_a_later_update_wins_over_an_earlier_name_for_the_same_thing() -> None:
    """Two names for one thing set by two calls: the later call's value is the one used, whatever the names."""
    times = _updated({"slurm_time": "00:10:00"}, {"slurm_timeout_min": 120}, {"slurm_time": "00:30:00"})
    assert request_of(times, "slurm").time_limit == 1800
    gpus = _updated({"slurm_gpus_per_node": 4}, {"slurm_gres": "gpu:a100:2"}, {"slurm_gpus_per_node": 8})
    resources = request_of(gpus, "slurm").resources
    assert (resources.gpus_per_node, resources.gpu_type) == (8, None)
    extra = _updated({"slurm_additional_parameters": {"gres": "gpu:2", "qos": "hi"}}, {"gpus_per_node": 1})
    assert extra == {"slurm_additional_parameters": {"qos": "hi"}, "gpus_per_node": 1}


def test_a_later_update_for_one_executor_leaves_another_executors_parameters() -> None:
    assert _updated({"local_setup": ["a"], "slurm_setup": ["b"]}, {"local_setup": ["c"]}) == {
        "slurm_setup": ["b"],
        "local_setup": ["c"],
    }
