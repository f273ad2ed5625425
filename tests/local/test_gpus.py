"""The local adapter's GPUs: each rank's share through CUDA_VISIBLE_DEVICES, the host's inventory, refusals, and
jobs at once sharing the devices out (never one device to two jobs, across crashes)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import dispatch
from dispatch.capabilities import Answer, Capability
from dispatch.clock import SystemClock
from dispatch.errors import Unsupported
from dispatch.local import LocalBackend, ledger
from dispatch.local.gpus import gpu_type_of, probe, rank_devices
from dispatch.local.layout import JobFiles
from dispatch.outcome import Cause, State
from dispatch.records import MemoryRecords
from dispatch.resources import Resources
from dispatch.spec import JobSpec
from dispatch.spi import StartRequest


def test_each_node_gets_its_block_and_ranks_divide_it() -> None:
    devices = ["0", "1", "2", "3", "4", "5", "6", "7"]
    shares = [rank_devices(devices, 4, 2, node, local) for node in range(2) for local in range(2)]
    assert shares == [["0", "1"], ["2", "3"], ["4", "5"], ["6", "7"]]
    # 3 GPUs cannot be divided among 2 ranks: each sees its node's three
    assert rank_devices(devices, 3, 2, 1, 0) == ["3", "4", "5"] == rank_devices(devices, 3, 2, 1, 1)


def test_nvidia_smi_names_become_types() -> None:
    assert gpu_type_of("NVIDIA A100-SXM4-40GB") == "a100-sxm4-40gb"
    assert gpu_type_of(" NVIDIA GeForce RTX 4090 ") == "geforce-rtx-4090"


def test_this_host_without_nvidia_smi_has_no_gpus_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    host = probe(None)
    assert host.devices == ()
    answer = host.inventory.answer()
    assert answer.answer is Answer.NO and "nvidia-smi not found" in answer.reason


def _cluster(tmp_path: Path, gpus: list[str]) -> dispatch.Cluster:
    adapter = {"stateDir": str(tmp_path / "state"), "grace": 1.0, "gpus": gpus}
    return dispatch.open("local", dispatch.Config(adapter=adapter, records=MemoryRecords(), name="local"))


def test_each_rank_sees_its_share_of_the_hosts_gpus(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path, ["0", "1", "2", "3"])
    caps = cluster.capabilities()
    assert caps.answer(Capability.ACCELERATORS) is Answer.YES
    assert "host: 1 node(s) with 4 GPU(s)" in caps[Capability.ACCELERATORS].reason
    out = tmp_path / "seen"
    out.mkdir()
    spec = JobSpec(
        ("sh", "-c", f'echo "$CUDA_VISIBLE_DEVICES" > {out}/$RANK'),
        nodes=2,
        procs_per_node=2,
        resources=Resources(gpus_per_node=2),
    )
    record = cluster.run(spec, timeout=120)
    assert record.state is dispatch.State.SUCCEEDED, record.outcome
    seen = {p.name: p.read_text().strip() for p in out.iterdir()}
    assert seen == {"0": "0", "1": "1", "2": "2", "3": "3"}


def test_more_gpus_than_the_host_has_are_refused_before_anything_is_recorded(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path, ["0", "1", "2", "3"])
    spec = JobSpec(("true",), nodes=2, resources=Resources(gpus_per_node=3))
    with pytest.raises(Unsupported, match=r"6 in all on this host: it has host: 1 node\(s\) with 4 GPU\(s\)"):
        cluster.submit(spec)
    assert cluster.records is not None and cluster.records.jobs(active_only=False) == []
    backend = cluster.backend
    with pytest.raises(Unsupported, match="can never run"):
        backend.start(dispatch.spi.StartRequest("0123456789abcdef", 1, "m", spec))
    assert not list((tmp_path / "state" / "jobs").iterdir()), "start created nothing"


def test_a_host_offering_no_gpus_refuses_any_gpu_request(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path, [])
    with pytest.raises(Unsupported, match="Accelerators|no GPUs"):
        cluster.submit(JobSpec(("true",), resources=Resources(gpus_per_node=1)))
    assert cluster.records is not None and cluster.records.jobs(active_only=False) == []


# ----- two jobs at once: the ledger shares the devices out ------------------------------------------------------


def _wait(pred, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


def _seen(out: Path, sid: str) -> str:
    """The devices job ``sid`` wrote it sees, once the whole line is there ("" before)."""
    try:
        text = (out / sid).read_text()
    except FileNotFoundError:
        return ""
    return text.strip() if text.endswith("\n") else ""


def _holding(out: Path, gpus: int, release: Path | None = None) -> JobSpec:
    """A job that writes the devices it sees to ``out/<scheduler id>``, then keeps them until ``release``
    exists (or for good: ``exec sleep``, so that the rank process itself holds on)."""
    keep = f"while [ ! -e {release} ]; do sleep 0.05; done" if release else "exec sleep 600"
    script = f'echo "$CUDA_VISIBLE_DEVICES" > {out}/"$DISPATCH_SCHEDULER_ID"; {keep}'
    return JobSpec(("sh", "-c", script), resources=Resources(gpus_per_node=gpus))


def _open(b: LocalBackend, spec: JobSpec, job: str) -> str:
    sid = b.start(StartRequest(job, 1, f"m-{job}", spec))
    b.open(sid)
    return sid


@pytest.fixture
def two_gpus(tmp_path: Path) -> Iterator[LocalBackend]:
    b = LocalBackend(tmp_path / "state", SystemClock(), grace=1.0, gpus=["0", "1"])
    yield b
    for sid in (p.name for p in (tmp_path / "state" / "jobs").iterdir()):
        with contextlib.suppress(Exception):
            b.stop_job(sid)


def test_two_jobs_at_once_never_get_the_same_device(two_gpus: LocalBackend, tmp_path: Path) -> None:
    out, release = tmp_path / "seen", tmp_path / "release"
    out.mkdir()
    a = _open(two_gpus, _holding(out, 1, release), "job-a")
    b = _open(two_gpus, _holding(out, 1, release), "job-b")
    _wait(lambda: _seen(out, a) and _seen(out, b))
    assert {_seen(out, a), _seen(out, b)} == {"0", "1"}
    assert two_gpus.inspect(a).outcome.state is State.RUNNING is two_gpus.inspect(b).outcome.state
    held = ledger.holders(str(tmp_path / "state" / "gpus"), ["0", "1"])
    assert {h["jobId"] for h in held.values()} == {"job-a", "job-b"}
    release.touch()
    for sid in (a, b):
        assert two_gpus.wait_ended(sid, 30).outcome.state is State.SUCCEEDED
    assert ledger.holders(str(tmp_path / "state" / "gpus"), ["0", "1"]) == {}, "an ended job holds nothing"


def test_a_job_waits_pending_saying_for_whom_and_starts_when_the_devices_free(
    two_gpus: LocalBackend, tmp_path: Path
) -> None:
    out, release = tmp_path / "seen", tmp_path / "release"
    out.mkdir()
    a = _open(two_gpus, _holding(out, 2, release), "job-a")
    _wait(lambda: _seen(out, a))
    b = _open(two_gpus, _holding(out, 2, tmp_path / "release-b"), "job-b")
    _wait(lambda: "held by" in two_gpus.inspect(b).outcome.detail)
    waiting = two_gpus.inspect(b)
    assert (waiting.outcome.state, waiting.outcome.cause) == (State.PENDING, Cause.QUEUED)
    assert waiting.outcome.detail == "waiting for 2 GPUs: devices 0,1 held by job job-a"
    assert waiting.executions == (), "a job waiting for its devices has not started an execution"
    release.touch()
    _wait(lambda: _seen(out, b))
    assert _seen(out, b) == "0,1"
    assert two_gpus.wait_ended(a, 30).outcome.state is State.SUCCEEDED
    assert two_gpus.inspect(b).outcome.state is State.RUNNING


def test_a_stop_ends_a_job_waiting_for_devices_without_running_it(two_gpus: LocalBackend, tmp_path: Path) -> None:
    out = tmp_path / "seen"
    out.mkdir()
    a = _open(two_gpus, _holding(out, 2), "job-a")
    _wait(lambda: _seen(out, a))
    b = _open(two_gpus, _holding(out, 1), "job-b")
    _wait(lambda: "held by" in two_gpus.inspect(b).outcome.detail)
    two_gpus.stop_job(b)
    assert two_gpus.wait_ended(b, 30).outcome.state is State.CANCELLED
    assert not (out / b).exists(), "the stopped job never ran"


def test_a_killed_holder_frees_its_devices_only_when_none_of_its_processes_is_left(
    two_gpus: LocalBackend, tmp_path: Path
) -> None:
    """kill -9 of the launcher leaves its rank running on the devices: they stay held (the rank inherited the
    lock). kill -9 of the rank then frees them, with nobody left to clean up, and the waiting job starts."""
    out = tmp_path / "seen"
    out.mkdir()
    a = _open(two_gpus, _holding(out, 2), "job-a")
    _wait(lambda: _seen(out, a))
    b = _open(two_gpus, _holding(out, 1), "job-b")
    _wait(lambda: "held by job job-a" in two_gpus.inspect(b).outcome.detail)
    holder = JobFiles.read(two_gpus.job_dir(a))
    assert holder is not None and holder.current is not None and holder.current.launcher is not None
    launcher = holder.current.launcher
    (rank_pid,) = launcher["ranks"].values()
    os.kill(launcher["pid"], signal.SIGKILL)
    _wait(lambda: two_gpus.inspect(a).outcome.state is State.UNKNOWN)
    ledger_dir = str(tmp_path / "state" / "gpus")
    assert set(ledger.holders(ledger_dir, ["0", "1"])) == {"0", "1"}, "the live rank still holds both devices"
    assert two_gpus.inspect(b).outcome.state is State.PENDING
    os.kill(rank_pid, signal.SIGKILL)
    _wait(lambda: _seen(out, b))
    assert _seen(out, b) == "0"
    assert set(ledger.holders(ledger_dir, ["0", "1"])) == {"0"}
    assert ledger.holders(ledger_dir, ["0"])["0"]["jobId"] == "job-b"


def test_a_job_waiting_for_devices_can_be_held_and_released(two_gpus: LocalBackend, tmp_path: Path) -> None:
    out, release = tmp_path / "seen", tmp_path / "release"
    out.mkdir()
    a = _open(two_gpus, _holding(out, 2, release), "job-a")
    _wait(lambda: _seen(out, a))
    b = _open(two_gpus, _holding(out, 1, tmp_path / "release-b"), "job-b")
    _wait(lambda: "held by" in two_gpus.inspect(b).outcome.detail)
    two_gpus.hold(b, "inst-1")
    assert two_gpus.inspect(b).outcome.state is State.HELD, "held at once, as any waiting job"
    # its launcher backs off at its next try: the execution is planned again, not spawned, and still held
    _wait(lambda: (j := JobFiles.read(two_gpus.job_dir(b))) is not None and j.current is None)
    assert two_gpus.inspect(b).outcome.state is State.HELD
    release.touch()
    assert two_gpus.wait_ended(a, 30).outcome.state is State.SUCCEEDED
    assert ledger.holders(str(tmp_path / "state" / "gpus"), ["0", "1"]) == {}, "a held job takes no device"
    assert not (out / b).exists()
    two_gpus.release(b, "inst-1")
    _wait(lambda: _seen(out, b))
    assert _seen(out, b) == "0"
    assert two_gpus.inspect(b).outcome.state is State.RUNNING
