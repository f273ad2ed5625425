"""Fixtures for the local adapter: a backend over a temporary state directory; every job stopped at the end."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from dispatch.clock import SystemClock
from dispatch.local import LocalBackend


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[LocalBackend]:
    b = LocalBackend(tmp_path / "state", SystemClock(), grace=1.0)
    yield b
    for sid in (p.name for p in (tmp_path / "state" / "jobs").iterdir()):
        with contextlib.suppress(Exception):
            b.stop_job(sid)
