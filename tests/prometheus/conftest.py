"""The ``start_prometheus`` fixture: starts prometheus servers for the test (:func:`prom.prometheus`) and stops
every one it started when the test ends."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path

import pytest

from .prom import Prometheus, prometheus


@pytest.fixture
def start_prometheus(tmp_path: Path) -> Iterator[Callable[..., Prometheus]]:
    """``start_prometheus(targets, rule_files=())``: a ready server scraping ``targets`` every second."""
    with ExitStack() as stack:
        started = 0

        def start(targets: Sequence[str], rule_files: Sequence[Path] = ()) -> Prometheus:
            nonlocal started
            started += 1
            return stack.enter_context(prometheus(tmp_path / f"prometheus-{started}", targets, rule_files=rule_files))

        yield start
