"""Fixtures: a test cluster in plain or Kueue mode, in one world or in both.

A test (or module) marked ``both_worlds`` runs twice: ``inproc`` (the project's server, reactors in-process) and
``front`` (the real apiextensions-apiserver behind the front, controllers over HTTP; marked ``apiserver``, and
failing, never skipping, when scripts/k8s/up.sh has not started the server). Unmarked tests, and tests marked
``inproc_only(why)`` (the why says what the front world does not have), run in ``inproc`` only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dispatch.kubeflow.settings import Mode

from .harness import FakeCluster

WORLDS = ["inproc", pytest.param("front", marks=pytest.mark.apiserver)]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "both_worlds: run in the in-process world and in front of the real server")
    config.addinivalue_line("markers", "inproc_only(why): in a both_worlds module, run in the in-process world only")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    node = metafunc.definition
    both = node.get_closest_marker("both_worlds") and node.get_closest_marker("inproc_only") is None
    if "world" in metafunc.fixturenames and both:
        metafunc.parametrize("world", WORLDS, indirect=True)


@pytest.fixture
def world(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "inproc"))


@pytest.fixture
def plain(tmp_path: Path, world: str) -> Iterator[FakeCluster]:
    c = FakeCluster(tmp_path, Mode.PLAIN, world=world)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def kueue(tmp_path: Path, world: str) -> Iterator[FakeCluster]:
    c = FakeCluster(tmp_path, Mode.KUEUE, world=world)
    try:
        yield c
    finally:
        c.close()
