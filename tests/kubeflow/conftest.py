from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dispatch.kubeflow.settings import Mode

from .harness import FakeCluster


@pytest.fixture
def plain(tmp_path: Path) -> Iterator[FakeCluster]:
    c = FakeCluster(tmp_path, Mode.PLAIN)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def kueue(tmp_path: Path) -> Iterator[FakeCluster]:
    c = FakeCluster(tmp_path, Mode.KUEUE)
    try:
        yield c
    finally:
        c.close()
