"""dispatch.Executor on the real Slurm 22.05 cluster on this host (marker slurm_local): a value, an exception
with its remote traceback, a function on 2 nodes, map over 200 items (1,000 had not finished after 15 minutes,
about 60 tasks a minute, on the test cluster shared with other runs: `pytest -m slurm_local` with n=1000), a
cancelled future; and another real Unix user of the machine on the cluster's 0777 shared directory, refused at
every way in."""

from __future__ import annotations

import pwd
from collections.abc import Iterator
from typing import Any

import pytest

from . import scenarios
from .slurm import maker, slurm_cluster

pytestmark = pytest.mark.slurm_local


@pytest.fixture(scope="module")
def make() -> Iterator[Any]:
    with slurm_cluster("local") as (cluster, options):
        yield maker(cluster, options)


def test_a_value_comes_back(make: scenarios.Make) -> None:
    scenarios.value_returned(make)


def test_an_exception_is_raised_with_its_remote_traceback(make: scenarios.Make) -> None:
    scenarios.exception_raised(make)


def test_a_function_on_two_nodes(make: scenarios.Make) -> None:
    scenarios.two_nodes(make)


def test_map_over_200_items(make: scenarios.Make) -> None:
    scenarios.map_many(make, 200)


def test_a_cancelled_future(make: scenarios.Make) -> None:
    scenarios.cancelled(make)


def test_a_checkpointable_callable_stopped_by_its_time_limit_resumes(make: scenarios.Make) -> None:
    scenarios.checkpointed_and_resumed(make, time_limit=60, steps=40, delay=2.0)


def test_another_user_is_refused_at_every_way_in(make: scenarios.Make, peer: pwd.struct_passwd) -> None:
    scenarios.another_user_is_refused(make, peer)
