"""The local backend with real processes: environment, process groups, gate, holds, requeue, stop, limits,
output files per rank and execution, and state read back by a fresh backend (another process's view)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path

import pytest

from dispatch.clock import SystemClock
from dispatch.errors import NotFound, ReadOnly, Rejected
from dispatch.local import Limits, LocalBackend
from dispatch.local.layout import JobFiles
from dispatch.outcome import Cause, State
from dispatch.spec import JobSpec
from dispatch.spi import Gate, StartRequest

ENV_DUMP = (
    "import json, os\n"
    "keys = ['RANK','WORLD_SIZE','LOCAL_RANK','LOCAL_WORLD_SIZE','NODE_RANK','MASTER_ADDR','MASTER_PORT',"
    "'DISPATCH_JOB','DISPATCH_EXECUTION','DISPATCH_RANK','DISPATCH_RESTART','EXTRA']\n"
    "d = {k: os.environ.get(k) for k in keys}\n"
    "d['pgid'] = os.getpgid(0)\n"
    "print(json.dumps(d))\n"
)


def start(b: LocalBackend, spec: JobSpec, job: str = "job1", n: int = 1) -> str:
    return b.start(StartRequest(job, n, f"dsp-{job}-{n}", spec))


def run(b: LocalBackend, spec: JobSpec, job: str = "job1") -> str:
    sid = start(b, spec, job)
    b.open(sid)
    return sid


def wait_for(pred, timeout: float = 15.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


def test_ranks_get_torchrun_and_dispatch_environment(backend: LocalBackend) -> None:
    spec = JobSpec(command=(sys.executable, "-c", ENV_DUMP), nodes=2, procs_per_node=2, env={"EXTRA": "x y"})
    sid = run(backend, spec)
    ev = backend.wait_ended(sid, 15)
    assert ev.outcome.state is State.SUCCEEDED
    dumps = {}
    for rank in range(4):
        (chunk,) = [c for _, c in backend.lines(sid, "stdout", ranks=[rank])]
        dumps[rank] = json.loads(chunk)
    ports = {d["MASTER_PORT"] for d in dumps.values()}
    assert len(ports) == 1 and next(iter(ports)).isdigit()
    for rank, d in dumps.items():
        assert d["RANK"] == d["DISPATCH_RANK"] == str(rank)
        assert d["WORLD_SIZE"] == "4" and d["LOCAL_WORLD_SIZE"] == "2"
        assert d["LOCAL_RANK"] == str(rank % 2) and d["NODE_RANK"] == str(rank // 2)
        assert d["MASTER_ADDR"] == "127.0.0.1"
        assert d["DISPATCH_JOB"] == "job1"
        assert d["DISPATCH_EXECUTION"] == f"1.{sid}.0" == ev.executions[0].identity
        assert d["DISPATCH_RESTART"] == "0"
        assert d["EXTRA"] == "x y"
    # each node's ranks share one process group, and the two nodes are two groups
    assert dumps[0]["pgid"] == dumps[1]["pgid"] != dumps[2]["pgid"] == dumps[3]["pgid"]


def test_nothing_runs_until_open(backend: LocalBackend, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    sid = start(backend, JobSpec(command=("touch", str(marker))))
    time.sleep(0.5)
    ev = backend.inspect(sid)
    assert ev.gate is Gate.CLOSED and (ev.outcome.state, ev.outcome.cause) == (State.PENDING, Cause.GATED)
    assert not marker.exists() and ev.executions == ()
    backend.open(sid)
    assert backend.wait_ended(sid, 10).outcome.state is State.SUCCEEDED
    assert marker.exists()


def test_held_job_does_not_launch_until_its_instance_is_released(backend: LocalBackend, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    sid = start(backend, JobSpec(command=("touch", str(marker))))
    backend.hold(sid, "h1")
    backend.hold(sid, "h2")
    backend.open(sid)
    time.sleep(0.3)
    assert backend.inspect(sid).outcome.state is State.HELD and not marker.exists()
    with pytest.raises(Rejected):
        backend.release(sid, "other")
    backend.release(sid, "h1")
    time.sleep(0.3)
    assert not marker.exists(), "one hold left: still held"
    backend.release(sid, "h2")
    assert backend.wait_ended(sid, 10).outcome.state is State.SUCCEEDED and marker.exists()


def test_hold_on_running_or_ended_job_is_rejected(backend: LocalBackend) -> None:
    sid = run(backend, JobSpec(command=("sleep", "30")))
    wait_for(lambda: backend.inspect(sid).outcome.state is State.RUNNING)
    with pytest.raises(Rejected, match="running"):
        backend.hold(sid, "h")
    backend.stop_job(sid)
    backend.wait_ended(sid, 10)
    with pytest.raises(Rejected):
        backend.hold(sid, "h")


def test_requeue_running_job_makes_a_new_execution_with_its_own_output_files(tmp_path: Path) -> None:
    # the first execution ignores SIGTERM, so it ends only when the grace period (5 s) is over: the next
    # execution stays planned that long, and the second requeue lands inside that window however loaded the
    # machine is (with a prompt exit the launcher could start the next execution between the two calls)
    backend = LocalBackend(tmp_path / "state", SystemClock(), grace=5.0)
    # the trap comes first and the test requeues only once every rank has printed: a SIGTERM that came before a
    # rank's shell got that far ended it unprinted (seen under load)
    script = (
        "[ $DISPATCH_RESTART = 1 ] || trap '' TERM; "
        "echo out-$DISPATCH_RESTART-$RANK; echo err-$DISPATCH_RESTART-$RANK >&2; "
        "[ $DISPATCH_RESTART = 1 ] || sleep 30"
    )
    sid = run(backend, JobSpec(command=("sh", "-c", script), nodes=2))
    first = Path(backend.job_dir(sid)) / "executions" / "0"
    wait_for(lambda: all((first / f"rank-{r}.err").exists() and (first / f"rank-{r}.err").read_text() for r in (0, 1)))
    try:
        _requeued_twice(backend, sid)
    finally:
        backend.stop_job(sid)


def _requeued_twice(backend: LocalBackend, sid: str) -> None:
    wait_for(lambda: backend.inspect(sid).outcome.state is State.RUNNING)
    backend.requeue(sid)
    backend.requeue(sid)  # idempotent while the next execution is planned
    wait_for(lambda: len(backend.inspect(sid).executions) == 2 and backend.inspect(sid).outcome.state.ended)
    ev = backend.inspect(sid)
    first, second = ev.executions
    assert (first.restart, second.restart) == (0, 1)
    assert first.outcome.state is State.CANCELLED and "requeue" in first.outcome.detail
    assert second.outcome.state is State.SUCCEEDED and second.identity == f"1.{sid}.1"
    for r in (0, 1):
        for rank in (0, 1):
            d = Path(backend.job_dir(sid)) / "executions" / str(r)
            assert (d / f"rank-{rank}.out").read_text() == f"out-{r}-{rank}\n"
            assert (d / f"rank-{rank}.err").read_text() == f"err-{r}-{rank}\n"
    assert b"".join(backend.stdout(sid, execution=0)) == b"out-0-0\nout-0-1\n"
    assert b"".join(backend.stderr(sid, execution=1, rank=1)) == b"err-1-1\n"


def test_requeue_of_ended_job_starts_next_execution(backend: LocalBackend) -> None:
    sid = run(backend, JobSpec(command=("sh", "-c", "exit $((3 - DISPATCH_RESTART * 3))")))
    assert backend.wait_ended(sid, 10).outcome.exit_code == 3
    backend.requeue(sid)
    wait_for(lambda: len(backend.inspect(sid).executions) == 2 and backend.inspect(sid).outcome.state.ended)
    assert backend.inspect(sid).outcome.state is State.SUCCEEDED


def test_requeue_refused_before_run_and_after_stop(backend: LocalBackend) -> None:
    sid = start(backend, JobSpec(command=("true",)))
    with pytest.raises(Rejected):
        backend.requeue(sid)
    backend.stop_job(sid)
    with pytest.raises(Rejected):
        backend.requeue(sid)
    assert backend.inspect(sid).outcome.state is State.CANCELLED


def test_stop_sends_sigterm_then_sigkill_after_grace(backend: LocalBackend) -> None:
    script = "trap 'echo got-term; sleep 30' TERM; echo ready; while :; do sleep 0.1; done"
    sid = run(backend, JobSpec(command=("sh", "-c", script), nodes=2))
    # both ranks' traps must be set: a rank still starting would die of the SIGTERM, and end first
    wait_for(lambda: all(b"ready" in b"".join(backend.stdout(sid, rank=r)) for r in (0, 1)))
    t0 = time.monotonic()
    bound = backend.stop_job(sid)
    assert bound >= backend.grace
    ev = backend.wait_ended(sid, 15)
    took = time.monotonic() - t0
    assert (ev.outcome.state, ev.outcome.cause) == (State.CANCELLED, Cause.CANCELLED)
    assert backend.grace * 0.8 <= took <= bound + 1.0, took
    assert ev.outcome.signal == 9  # the rank ignored SIGTERM (it slept), so it was killed
    assert b"got-term" in b"".join(backend.stdout(sid))  # ... but SIGTERM came first


def test_graceful_rank_ends_on_sigterm_alone(tmp_path: Path) -> None:
    # a long grace, so that a loaded machine's slow trap is not mistaken for one that needed SIGKILL
    backend = LocalBackend(tmp_path / "state", SystemClock(), grace=30.0)
    sid = run(backend, JobSpec(command=("sh", "-c", "trap 'exit 0' TERM; echo ready; while :; do sleep 0.1; done")))
    try:
        wait_for(lambda: b"ready" in b"".join(backend.stdout(sid)))
        t0 = time.monotonic()
        backend.stop_job(sid)
        ev = backend.wait_ended(sid, 25)
        assert ev.outcome.state is State.CANCELLED and ev.outcome.signal != 9  # it ended on SIGTERM alone...
        assert time.monotonic() - t0 < backend.grace  # ...without waiting for the grace to run out
    finally:
        with contextlib.suppress(Exception):
            backend.stop_job(sid)


def test_time_limit_ends_with_timeout(backend: LocalBackend) -> None:
    sid = run(backend, JobSpec(command=("sleep", "60"), nodes=2, time_limit=0.5))
    ev = backend.wait_ended(sid, 10)
    assert (ev.outcome.state, ev.outcome.cause) == (State.FAILED, Cause.TIMEOUT)


def test_memory_limit_ends_with_out_of_memory(backend: LocalBackend) -> None:
    code = "x = 'a' * (150 << 20)\nimport time\ntime.sleep(30)\n"
    sid = run(backend, JobSpec(command=(sys.executable, "-c", code), extensions=(Limits(memory_mb=64),)))
    ev = backend.wait_ended(sid, 15)
    assert (ev.outcome.state, ev.outcome.cause) == (State.FAILED, Cause.OUT_OF_MEMORY)
    assert "64 MiB" in ev.outcome.detail


def test_under_memory_limit_succeeds(backend: LocalBackend) -> None:
    sid = run(
        backend, JobSpec(command=(sys.executable, "-c", "x = 'a' * (5 << 20)"), extensions=(Limits(memory_mb=256),))
    )
    assert backend.wait_ended(sid, 15).outcome.state is State.SUCCEEDED


def test_one_failing_rank_ends_the_execution_with_its_exit_code(backend: LocalBackend) -> None:
    sid = run(backend, JobSpec(command=("sh", "-c", '[ "$RANK" = 1 ] && exit 7; sleep 30'), nodes=3))
    ev = backend.wait_ended(sid, 15)
    assert (ev.outcome.state, ev.outcome.cause, ev.outcome.exit_code) == (State.FAILED, Cause.EXIT, 7)
    assert "rank 1" in ev.outcome.detail


def test_missing_program_is_not_launchable(backend: LocalBackend) -> None:
    sid = run(backend, JobSpec(command=("/nonexistent/program",), nodes=2))
    ev = backend.wait_ended(sid, 10)
    assert ev.outcome.cause is Cause.NOT_LAUNCHABLE  # the job's own launch failure: it blames no node
    assert b"cannot start" in b"".join(backend.stderr(sid, rank=0))


def test_state_read_by_a_fresh_backend_and_find_by_marker(backend: LocalBackend) -> None:
    sid = run(backend, JobSpec(command=("sh", "-c", "exit 4")), job="jobx")
    backend.wait_ended(sid, 10)
    other = LocalBackend(backend.state_dir, SystemClock(), read_only=True)
    ev = other.inspect(sid)
    assert (ev.outcome.state, ev.outcome.exit_code) == (State.FAILED, 4)
    assert [f.scheduler_id for f in other.find("dsp-jobx-1", 0)] == [sid]
    assert other.find("dsp-jobx-1", time.time() + 60) == []
    with pytest.raises(ReadOnly):
        other.stop_job(sid)


def test_launcher_gone_without_result_is_unknown_not_success(backend: LocalBackend) -> None:
    sid = run(backend, JobSpec(command=("sleep", "30")))
    wait_for(lambda: backend.inspect(sid).outcome.state is State.RUNNING)
    job = JobFiles.read(backend.job_dir(sid))
    assert job is not None and job.current is not None and job.current.launcher is not None
    launcher_pid = job.current.launcher["pid"]
    os.kill(launcher_pid, 9)
    wait_for(lambda: backend.inspect(sid).outcome.state is State.UNKNOWN)
    ev = backend.inspect(sid)
    assert ev.outcome.cause is Cause.UNKNOWN and "launcher" in ev.outcome.detail
    backend.stop_job(sid)  # kills the orphaned ranks' process groups directly


def test_unknown_ids_are_not_found(backend: LocalBackend) -> None:
    for sid in ("999999999", "../etc", "nope"):
        with pytest.raises(NotFound):
            backend.inspect(sid)
    assert backend.inspect_many(["999999999"]) == {}


def test_follow_yields_lines_until_the_end(backend: LocalBackend) -> None:
    sid = run(backend, JobSpec(command=("sh", "-c", "for i in 1 2 3; do echo line$i; sleep 0.2; done"), nodes=2))
    got = list(backend.lines(sid, "stdout", follow=True))
    assert all(c.endswith(b"\n") for _, c in got), got  # whole lines only (several when a poll finds several)
    per_rank = {r: b"".join(c for q, c in got if q == r) for r in (0, 1)}
    assert per_rank == {r: b"line1\nline2\nline3\n" for r in (0, 1)}, got


def test_render_shows_the_plan_shell_quoted(backend: LocalBackend) -> None:
    spec = JobSpec(command=("python", "-c", "print('$(x)')"), nodes=2, time_limit=60)
    text = backend.render(StartRequest("jobr", 1, "dsp-jobr-1", spec))
    assert "RANK=1" in text and "WORLD_SIZE=2" in text
    assert "'print('\"'\"'$(x)'\"'\"')'" in text
    assert "nothing was started" in text
    assert not any(backend.jobs_dir.iterdir())


def test_a_specs_umask_is_the_ranks_whatever_the_submitters(backend: LocalBackend) -> None:
    """The umask recorded with the job (``JobSpec.umask``) is the ranks' even when a process under another one
    (a supervisor resubmitting) launches it; without one, the ranks have the submitter's."""
    probe = (sys.executable, "-c", "import os; print(oct(os.umask(0)))")
    old = os.umask(0o022)
    try:
        pinned = run(backend, JobSpec(command=probe, umask=0o077), job="pinned")
        plain = run(backend, JobSpec(command=probe), job="plain")
    finally:
        os.umask(old)
    for sid, want in ((pinned, "0o77"), (plain, "0o22")):
        assert backend.wait_ended(sid, 15).outcome.state is State.SUCCEEDED
        ((_, out),) = list(backend.lines(sid, "stdout", ranks=[0]))
        assert out.strip() == want.encode(), sid
