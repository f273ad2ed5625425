"""The gridengine adapter on the real cell: what only a real Grid Engine shows."""

from __future__ import annotations

import os
import secrets
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dispatch.actions import marker_for
from dispatch.clock import SystemClock
from dispatch.errors import ConfigError
from dispatch.gridengine import GridEngineBackend, GridEngineSettings
from dispatch.outcome import Cause, State
from dispatch.resources import Resources
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


def test_memory_is_asked_as_resident_memory_and_the_job_runs(b: GridEngineBackend) -> None:
    """``resources.memPerNode`` reaches the cell as ``mem_free`` (where the scheduler places the job) and
    ``h_rss`` (its resident-set limit), never ``h_vmem``, which kills CUDA processes; the job runs."""
    job = secrets.token_hex(6)
    spec = JobSpec(("true",), working_dir="/", resources=Resources(mem_per_node=64))
    sid = b.start(StartRequest(job, 1, marker_for(job, 1), spec))
    shown = subprocess.run(["qstat", "-j", sid], env=_cell_env(), capture_output=True, text=True, timeout=30)
    (limits,) = [line for line in shown.stdout.splitlines() if line.startswith("hard resource_list:")]
    asked = dict(word.split("=", 1) for word in limits.split(":", 1)[1].strip().split(","))
    assert asked == {"mem_free": "64M", "h_rss": "64M"}, limits
    b.open(sid)
    ev = until(b, sid, lambda e: e.outcome.state.ended)
    assert ev.outcome.state is State.SUCCEEDED, ev.outcome


def test_the_output_directory_is_the_users_alone_whatever_the_umask(tmp_path: Path) -> None:
    """Made 0700 (each missing parent too) under umask 0, the job's files in it; a loose one is refused."""
    d = description()
    out = tmp_path / "shared" / "o"
    settings = GridEngineSettings(
        sge_root=d["sge_root"], sge_cell=d["sge_cell"], state_dir=str(tmp_path / "s"), output_dir=str(out)
    )
    b = GridEngineBackend(settings, SystemClock())
    old = os.umask(0)
    try:
        sid = start(b, ("true",))
        b.open(sid)
        ev = until(b, sid, lambda e: e.outcome.state.ended)
    finally:
        os.umask(old)
    try:
        assert ev.outcome.state is State.SUCCEEDED, ev.outcome
        assert stat.S_IMODE(out.stat().st_mode) == stat.S_IMODE(out.parent.stat().st_mode) == 0o700
        assert any(p.name.endswith(f".{sid}.out") for p in out.iterdir())
        out.chmod(0o777)
        with pytest.raises(ConfigError, match="may be written by others"):
            start(b, ("true",))
    finally:
        b.close()


def test_the_jobs_output_is_private_and_the_program_runs_under_the_callers_umask(
    b: GridEngineBackend, tmp_path: Path
) -> None:
    """Under the caller's umask 022 the program's own file is 0644, as under a bare ``qsub``; the output stays in
    a directory of the user's alone (the shepherd gives the files its own mode, so the directory keeps them)."""
    made = tmp_path / "made"
    made.mkdir()
    old = os.umask(0o022)
    try:
        sid = start(b, ("touch", str(made / "checkpoint")))
    finally:
        os.umask(old)
    b.open(sid)
    ev = until(b, sid, lambda e: e.outcome.state.ended)
    assert ev.outcome.state is State.SUCCEEDED, ev.outcome
    assert stat.S_IMODE((made / "checkpoint").stat().st_mode) == 0o644
    assert any(p.name.endswith(f".{sid}.out") for p in (tmp_path / "o").iterdir())
    assert stat.S_IMODE((tmp_path / "o").stat().st_mode) == 0o700


def test_a_job_an_operator_suspends_reads_suspended_and_running_again_once_resumed(
    b: GridEngineBackend, tmp_path: Path
) -> None:
    """``qmod -sj`` (an operator's suspension, the cell's state letter ``s``; the execution daemon stops the job's
    processes a moment later) on a running job that counts to 20 a second at a time: it reads running with the
    cause ``suspended`` and its count stands still; ``qmod -usj`` brings it back to plain running, and it ends
    succeeded with its whole count (stopped, never killed)."""
    count = tmp_path / "count"
    counter = 'for i in $(seq 1 20); do echo "$i" >>"$1"; sleep 1; done'
    sid = start(b, ("bash", "-c", counter, "count", str(count)))
    b.open(sid)
    ev = until(b, sid, lambda e: e.outcome.state is State.RUNNING)
    assert ev.outcome.state is State.RUNNING and ev.outcome.cause is None, ev.outcome
    # its processes started (a suspension the shepherd gets while it is still starting the job stops nothing)
    deadline = time.monotonic() + 30
    while not (count.exists() and count.read_text()) and time.monotonic() < deadline:
        time.sleep(0.2)
    done = subprocess.run(["qmod", "-sj", sid], env=_cell_env(), capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    ev = until(b, sid, lambda e: e.outcome.cause is Cause.SUSPENDED)
    assert (ev.outcome.state, ev.outcome.cause) == (State.RUNNING, Cause.SUSPENDED), ev.outcome
    time.sleep(3)  # the stop reaches the processes
    before = len(count.read_text().splitlines())
    time.sleep(4)
    assert len(count.read_text().splitlines()) == before < 20, "a suspended job does not count on"
    assert b.inspect(sid).outcome.cause is Cause.SUSPENDED
    done = subprocess.run(["qmod", "-usj", sid], env=_cell_env(), capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    ev = until(b, sid, lambda e: e.outcome.cause is not Cause.SUSPENDED)
    assert ev.outcome.state in (State.RUNNING, State.SUCCEEDED), ev.outcome
    ev = until(b, sid, lambda e: e.outcome.state.ended)
    assert ev.outcome.state is State.SUCCEEDED, ev.outcome
    assert count.read_text().split() == [str(i) for i in range(1, 21)]
