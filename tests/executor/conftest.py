"""The cluster every executor test submits to: the local adapter, records in memory, its jobs stopped after."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import dispatch
from dispatch.cluster import Cluster
from dispatch.records import MemoryRecords


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with dispatch.open(
        "local", adapter={"stateDir": str(tmp_path / "state"), "grace": 1}, records=MemoryRecords()
    ) as c:
        yield c
        for job in c.observer.list(active_only=True):
            c.operator.stop(job.id)
