"""The gridengine adapter on the real cell: what only a real Grid Engine shows."""

from __future__ import annotations

import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dispatch.actions import marker_for
from dispatch.clock import SystemClock
from dispatch.gridengine import GridEngineBackend, GridEngineSettings
from dispatch.outcome import Cause, State
from dispatch.spec import JobSpec
from dispatch.spi import JobEvidence, StartRequest

from .cell import description

pytestmark = pytest.mark.gridengine


def _cell_env() -> dict[str, str]:
    d = description()
    return dict(os.environ, SGE_ROOT=d["sge_root"], SGE_CELL=d["sge_cell"])


@pytest.fixture
def b(tmp_path: Path) -> Iterator[GridEngineBackend]:
    """A backend on the shared cell. Afterwards, whatever the test's end, every job it started is deleted (none
    is left sleeping on the cell) and the backend is closed."""
    d = description()
    settings = GridEngineSettings(
        sge_root=d["sge_root"], sge_cell=d["sge_cell"], state_dir=str(tmp_path / "s"), output_dir=str(tmp_path / "o")
    )
    backend = GridEngineBackend(settings, SystemClock())
    started: list[str] = []
    backend_start = backend.start

    def start_and_remember(request: StartRequest) -> str:
        sid = backend_start(request)
        started.append(sid)
        return sid

    backend.start = start_and_remember  # type: ignore[method-assign]
    try:
        yield backend
    finally:
        for sid in started:  # "does not exist" once it ended: nothing to delete
            subprocess.run(["qdel", sid], env=_cell_env(), capture_output=True, timeout=30)
        backend.close()


def start(b: GridEngineBackend, argv: tuple[str, ...]) -> str:
    job = secrets.token_hex(6)
    return b.start(StartRequest(job, 1, marker_for(job, 1), JobSpec(argv)))


def until(b: GridEngineBackend, sid: str, pred: object, wait: float = 60.0) -> JobEvidence:
    deadline = time.monotonic() + wait
    while True:
        ev = b.inspect(sid)
        if pred(ev) or time.monotonic() > deadline:  # type: ignore[operator]
            return ev
        time.sleep(0.5)


def test_a_job_stopped_while_waiting_reads_cancelled_though_grid_engine_forgets_it(b: GridEngineBackend) -> None:
    sid = start(b, ("sleep", "60"))
    b.stop_job(sid)
    ev = until(b, sid, lambda e: e.outcome.state.ended, 20)
    assert (ev.outcome.state, ev.outcome.cause) == (State.CANCELLED, Cause.CANCELLED)
    assert ev.outcome.evidence.source == "dispatch stop record" and ev.current is not None
    assert ev.current.started_at is None


def test_a_qdel_by_someone_else_is_never_cancelled(b: GridEngineBackend) -> None:
    sid = start(b, ("sleep", "60"))
    b.open(sid)
    until(b, sid, lambda e: e.outcome.state is State.RUNNING)
    subprocess.run(["qdel", sid], env=_cell_env(), check=True, capture_output=True, timeout=30)
    ev = until(b, sid, lambda e: e.outcome.state.ended, 30)
    assert (ev.outcome.state, ev.outcome.cause) == (State.FAILED, Cause.UNKNOWN), ev.outcome
    assert "does not say by whom" in ev.outcome.detail


def test_the_job_gets_the_rank_environment_as_rank_0_of_1(b: GridEngineBackend, tmp_path: Path) -> None:
    """The kit's rank environment (dispatch.adapterkit.rankenv), as the local adapter and Slurm give it."""
    names = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK", "MASTER_ADDR",
             "MASTER_PORT", "DISPATCH_RANK", "DISPATCH_WORLD_SIZE", "DISPATCH_SCHEDULER_ID",
             "DISPATCH_RESTART")  # fmt: skip
    show = 'for n in "$@"; do printf "%s=%s\\n" "$n" "${!n-unset}"; done; printf "node=%s\\n" "$DISPATCH_NODE"'
    job = secrets.token_hex(6)
    marker = marker_for(job, 1)
    sid = b.start(StartRequest(job, 1, marker, JobSpec(("bash", "-c", show, "show", *names), working_dir="/")))
    b.open(sid)
    ev = until(b, sid, lambda e: e.outcome.state.ended)
    assert ev.outcome.state is State.SUCCEEDED, ev.outcome
    got = dict(line.split("=", 1) for line in (tmp_path / "o" / f"{marker}.{sid}.out").read_text().splitlines())
    port = str(20000 + int(sid) % 12000)
    assert got.pop("node") not in ("", "unset")
    assert got == {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "NODE_RANK": "0",
                   "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "DISPATCH_RANK": "0",
                   "DISPATCH_WORLD_SIZE": "1", "DISPATCH_SCHEDULER_ID": sid, "DISPATCH_RESTART": "0"}  # fmt: skip


def test_a_missing_program_is_not_launchable_not_an_exit(b: GridEngineBackend, tmp_path: Path) -> None:
    """The kit's launch checks run in the job script: the program never ran, and the job says so (the job's
    own failure, not-launchable: it blames no host)."""
    sid = start(b, (str(tmp_path / "no such program"), "--flag"))
    b.open(sid)
    ev = until(b, sid, lambda e: e.outcome.state.ended)
    assert (ev.outcome.state, ev.outcome.cause) == (State.FAILED, Cause.NOT_LAUNCHABLE), ev.outcome
    err = next((tmp_path / "o").glob(f"*.{sid}.err")).read_text()
    assert f"dispatch: launch failed: the program {tmp_path}/no such program does not exist" in err
