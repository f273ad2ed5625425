"""Host exclusion on Grid Engine: a submission's excluded hosts become ``-l hostname=!(a|b)``, which the real
cell's scheduler honours; NodeExclusion is probed on the cell, and the cell's hosts are known (NodeInventory) so
a resubmission that would exclude every host escalates instead of waiting forever."""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from dispatch.actions import marker_for
from dispatch.capabilities import Capability
from dispatch.clock import SystemClock
from dispatch.errors import SpecError
from dispatch.gridengine import GridEngineBackend, GridEngineSettings
from dispatch.gridengine.submit import exclusion_options
from dispatch.outcome import State
from dispatch.spec import JobSpec
from dispatch.spi import StartRequest

from .cell import description
from .test_backend import until


def test_excluded_hosts_are_one_boolean_host_expression() -> None:
    assert exclusion_options(()) == []
    assert exclusion_options(("n2", "n1.example", "n2")) == ["-l", "hostname=!(n1.example|n2)"]
    for bad in ("n1|n2", "*", "n1 n2", "!n1", ""):
        with pytest.raises(SpecError, match="not a Grid Engine host name"):
            exclusion_options((bad,))


def _env() -> dict[str, str]:
    d = description()
    return dict(os.environ, SGE_ROOT=d["sge_root"], SGE_CELL=d["sge_cell"])


@pytest.fixture
def b(tmp_path: Path) -> Iterator[GridEngineBackend]:
    d = description()
    settings = GridEngineSettings(
        sge_root=d["sge_root"],
        sge_cell=d["sge_cell"],
        queue=d["queue"],
        state_dir=str(tmp_path / "s"),
        output_dir=str(tmp_path / "o"),
    )
    backend = GridEngineBackend(settings, SystemClock())
    try:
        yield backend
    finally:
        backend.close()


def _start(b: GridEngineBackend, exclude: tuple[str, ...], started: list[str]) -> str:
    job = secrets.token_hex(6)
    sid = b.start(StartRequest(job, 1, marker_for(job, 1), JobSpec(("true",)), exclude))
    started.append(sid)
    return sid


@pytest.mark.gridengine
def test_the_cell_excludes_the_hosts_a_submission_names(b: GridEngineBackend) -> None:
    answer = b.capabilities()[Capability.NODE_EXCLUSION]
    assert answer.yes and "qsub -w v" in answer.reason
    hosts = b.schedulable_nodes(JobSpec(("true",)))
    assert hosts is not None and description()["host"] in hosts
    started: list[str] = []
    try:
        # every host of the queue excluded: the scheduler finds no queue for it (verified as if the cell were empty)
        stuck = _start(b, tuple(sorted(hosts)), started)
        b.open(stuck)  # Grid Engine verifies no held job
        check = subprocess.run(["qalter", "-w", "v", stuck], env=_env(), capture_output=True, text=True, timeout=60)
        said = check.stdout + check.stderr
        assert "no suitable queues" in said and "hostname" in said, said
        # a host that is not the cell's excluded: it runs, there, to its end
        runs = _start(b, ("elsewhere.invalid",), started)
        b.open(runs)
        ev = until(b, runs, lambda e: e.outcome.state.ended, 180.0)
        assert ev.outcome.state is State.SUCCEEDED, ev.outcome
        assert ev.current is not None and set(ev.current.nodes) <= hosts
        # and the excluded one, released before it, still waits: the scheduler ran since, and left it
        left = b.inspect(stuck)
        assert left.outcome.state.waiting and (left.current is None or left.current.started_at is None), left
    finally:
        for sid in started:
            subprocess.run(["qdel", sid], env=_env(), capture_output=True, timeout=30)
