"""dispatch.job.progress: what a rank records, how often it writes, and what it refuses."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import types
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from dispatch import job


@pytest.fixture
def progress_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    d = tmp_path / "progress"
    monkeypatch.setenv("DISPATCH_PROGRESS_DIR", str(d))
    monkeypatch.setenv("DISPATCH_RANK", "3")
    monkeypatch.setenv("DISPATCH_EXECUTION", "1.77.0")
    monkeypatch.setenv("DISPATCH_PROGRESS_INTERVAL", "3600")
    job.reset_for_tests()
    yield d
    job.reset_for_tests()


def _read(d: Path, rank: int = 3) -> dict[str, object]:
    data = json.loads((d / f"rank-{rank}.json").read_text())
    assert isinstance(data, dict)
    return data


def test_the_first_call_writes_the_rank_file_with_step_total_metrics_and_time(progress_dir: Path) -> None:
    before = time.time()
    assert job.progress(10, total=100, loss=0.5, tokens=4096) is True
    report = _read(progress_dir)
    assert report["rank"] == 3 and report["step"] == 10 and report["total"] == 100
    assert report["execution"] == "1.77.0"
    assert report["metrics"] == {"loss": 0.5, "tokens": 4096}
    assert report["first"] == {"step": 10, "at": report["at"]}  # the base of the rate: this process's first report
    assert isinstance(report["at"], float) and before <= report["at"] <= time.time()
    assert sorted(os.listdir(progress_dir)) == ["rank-3.json"]  # no temporary file left behind


def test_the_report_and_its_directory_are_private_to_the_user(progress_dir: Path) -> None:
    """On shared storage: the directory 0700, the report 0600, whatever the umask."""
    old = os.umask(0o002)
    try:
        assert job.progress(1) is True
    finally:
        os.umask(old)
    assert progress_dir.stat().st_mode & 0o777 == 0o700
    assert (progress_dir / "rank-3.json").stat().st_mode & 0o777 == 0o600


def test_a_link_left_under_the_temporary_name_is_replaced_never_written_through(progress_dir: Path) -> None:
    progress_dir.mkdir(mode=0o700)
    target = progress_dir.parent / "target"
    target.write_text("theirs")
    (progress_dir / f"rank-3.json.{os.getpid()}.tmp").symlink_to(target)
    assert job.progress(1) is True
    assert target.read_text() == "theirs"
    assert _read(progress_dir)["step"] == 1 and not (progress_dir / "rank-3.json").is_symlink()


def test_calls_within_the_interval_do_not_write_until_the_last_step(progress_dir: Path) -> None:
    assert job.progress(1, total=5) is True
    for step in (2, 3, 4):
        assert job.progress(step, total=5) is False
    assert _read(progress_dir)["step"] == 1
    assert job.progress(5, total=5) is True  # the end is always written
    assert _read(progress_dir)["step"] == 5


def test_a_call_after_the_interval_writes_again(progress_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISPATCH_PROGRESS_INTERVAL", "5")
    job.reset_for_tests()
    now = [1000.0]  # the module's monotonic clock, moved by the test (a loaded machine cannot make it jump)
    monkeypatch.setattr(job, "time", types.SimpleNamespace(monotonic=lambda: now[0], time=time.time))
    assert job.progress(1) is True
    now[0] += 4.9
    assert job.progress(2) is False
    now[0] += 0.2
    assert job.progress(3) is True
    assert _read(progress_dir)["step"] == 3


def test_outside_a_job_with_a_progress_directory_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DISPATCH_PROGRESS_DIR", raising=False)
    job.reset_for_tests()
    monkeypatch.chdir(tmp_path)
    assert job.progress(1, total=2, loss=1.0) is False
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "names"),
    [
        (("7",), {}, TypeError, "step must be an int"),
        ((1.5,), {}, TypeError, "step must be an int"),
        ((True,), {}, TypeError, "step must be an int"),
        ((-1,), {}, ValueError, "step must be from 0"),
        ((2**53,), {}, ValueError, "step must be from 0"),
        ((1,), {"total": 0}, ValueError, "total must be from 1"),
        ((1,), {"total": True}, TypeError, "total must be an int"),
        ((1,), {"loss": "0.3"}, TypeError, "metric 'loss' must be a number"),
        ((1,), {"ok": True}, TypeError, "metric 'ok' must be a number"),
        ((1,), {"x" * 65: 1.0}, ValueError, "is not a name"),
        ((1,), {f"m{i}": 1.0 for i in range(17)}, ValueError, "at most 16 metrics"),
    ],
)
def test_wrong_arguments_are_refused_on_every_call_with_what_is_wrong(
    progress_dir: Path, args: tuple[object, ...], kwargs: dict[str, object], error: type[Exception], names: str
) -> None:
    assert job.progress(0) is True  # the next call is inside the interval: refused all the same
    with pytest.raises(error, match=names):
        job.progress(*args, **kwargs)  # type: ignore[arg-type]
    assert _read(progress_dir)["step"] == 0


def test_a_metric_that_becomes_nan_or_infinite_is_recorded_as_null(progress_dir: Path) -> None:
    assert job.progress(4, loss=float("nan"), grad=float("inf"), lr=1e-4) is True
    assert _read(progress_dir)["metrics"] == {"loss": None, "grad": None, "lr": 1e-4}


def test_storage_that_cannot_be_written_warns_once_and_never_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("DISPATCH_PROGRESS_DIR", str(blocker / "progress"))  # under a file: never a directory
    monkeypatch.setenv("DISPATCH_PROGRESS_INTERVAL", "0")
    job.reset_for_tests()
    with pytest.warns(RuntimeWarning, match="cannot write"):
        assert job.progress(1) is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert job.progress(2) is False  # tried again, no second warning


def test_concurrent_callers_never_leave_a_torn_file(progress_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISPATCH_PROGRESS_INTERVAL", "0")
    job.reset_for_tests()
    stop = threading.Event()
    seen: list[int] = []

    def read() -> None:
        while not stop.is_set():
            with contextlib.suppress(FileNotFoundError):
                seen.append(int(str(_read(progress_dir)["step"])))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for step in range(300):
            job.progress(step, loss=float(step))
    finally:
        stop.set()
        reader.join()
    assert _read(progress_dir)["step"] == 299
    assert seen, "the reader read nothing"
