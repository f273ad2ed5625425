"""dispatch.Executor on the real Slurm 26.05 cluster in the sid chroot, over SSH (marker slurm_sid): a value, an
exception with its remote traceback, a function on 2 nodes, map over 200 items, a cancelled future."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from . import scenarios
from .slurm import maker, slurm_cluster

pytestmark = pytest.mark.slurm_sid


@pytest.fixture(scope="module")
def make() -> Iterator[Any]:
    with slurm_cluster("sid") as (cluster, options):
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
