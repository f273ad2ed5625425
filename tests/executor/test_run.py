"""The runner (dispatch/executor/run.py) as each rank runs it, in a real subprocess: which rank writes, what a
result file holds for a value, a raised exception (picklable or not) and a value over the cap, and its exit
status; then how the caller reads each back (dispatch.executor.calls.value_of)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from dispatch.executor import RemoteError, RemoteTraceback, ResultTooLarge, run
from dispatch.executor.calls import value_of

cloudpickle.register_pickle_by_value(sys.modules[__name__])


class Unpicklable(Exception):
    def __init__(self) -> None:
        super().__init__("holds a lock")
        self.lock = threading.Lock()


def _raise_unpicklable() -> None:
    raise Unpicklable()


KEY = b"k" * 32


def _call(tmp: Path, fn: Any, *args: Any, all_ranks: bool = False, cap: int | None = None) -> Path:
    tmp.mkdir(mode=0o700, exist_ok=True)
    data = {"fn": fn, "args": args, "kwargs": {}, "all_ranks": all_ranks, "max_result_bytes": cap}
    (tmp / run.KEY_FILE).write_bytes(KEY)
    os.chmod(tmp / run.KEY_FILE, 0o600)
    (tmp / run.CALL_FILE).write_bytes(run.seal(KEY, "call", cloudpickle.dumps(data)))
    return tmp


def _run(call_dir: Path, rank: int = 0) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in run.RANK_VARIABLES}
    env["DISPATCH_RANK"] = str(rank)
    return subprocess.run(
        [sys.executable, run.__file__, str(call_dir)], env=env, capture_output=True, text=True, timeout=60
    )


def _result(call_dir: Path, rank: int = 0) -> dict[str, Any]:
    path = call_dir / run.result_name(rank)
    assert path.stat().st_mode & 0o777 == 0o600, oct(path.stat().st_mode)
    out: dict[str, Any] = pickle.loads(run.unseal(KEY, f"result.{rank}", path.read_bytes(), path.name))
    return out


def test_a_value_is_written_by_rank_0_only_and_exits_0(tmp_path: Path) -> None:
    d = _call(tmp_path / "c", pow, 2, 10)
    assert _run(d, rank=1).returncode == 0
    assert not (d / run.result_name(1)).exists()
    assert _run(d, rank=0).returncode == 0
    assert value_of(_result(d)) == 1024


def test_with_all_ranks_every_rank_writes(tmp_path: Path) -> None:
    d = _call(tmp_path / "c", pow, 3, 2, all_ranks=True)
    for rank in (0, 1):
        assert _run(d, rank=rank).returncode == 0
        assert value_of(_result(d, rank)) == 9


def test_an_exception_exits_1_and_comes_back_with_the_remote_traceback(tmp_path: Path) -> None:
    d = _call(tmp_path / "c", int, "not a number")
    got = _run(d)
    assert got.returncode == 1 and "ValueError" in got.stderr
    with pytest.raises(ValueError, match="invalid literal") as caught:
        value_of(_result(d))
    assert isinstance(caught.value.__cause__, RemoteTraceback)
    assert "ValueError: invalid literal" in caught.value.__cause__.text


def test_an_exception_that_does_not_pickle_travels_as_text(tmp_path: Path) -> None:
    d = _call(tmp_path / "c", _raise_unpicklable)
    assert _run(d).returncode == 1
    with pytest.raises(RemoteError, match="Unpicklable: holds a lock") as caught:
        value_of(_result(d))
    assert "_raise_unpicklable" in caught.value.traceback


def test_a_value_over_the_cap_is_refused_by_the_runner(tmp_path: Path) -> None:
    d = _call(tmp_path / "c", bytes, 10_000, cap=1000)
    got = _run(d)
    assert got.returncode == 1 and "over the cap of 1000" in got.stderr
    with pytest.raises(ResultTooLarge, match="over the cap of 1000"):
        value_of(_result(d))


def test_an_earlier_executions_result_is_removed_before_the_call_runs(tmp_path: Path) -> None:
    d = _call(tmp_path / "c", os._exit, 3)  # dies without a word, as a killed rank does
    (d / run.result_name(0)).write_bytes(run.seal(KEY, "result.0", cloudpickle.dumps({"ok": True, "value": "stale"})))
    assert _run(d).returncode == 3
    assert not (d / run.result_name(0)).exists()


def test_an_unreadable_call_exits_2(tmp_path: Path) -> None:
    d = tmp_path / "c"
    d.mkdir()
    got = _run(d)
    assert got.returncode == 2 and "cannot read the call" in got.stderr


def _evil() -> None:
    Path(os.environ["EVIL_MARK"]).write_text("ran")


@pytest.mark.parametrize("forgery", ["unsealed", "other key", "a result's seal", "writable by every user"])
def test_a_forged_or_exposed_call_is_refused_before_it_is_unpickled(
    tmp_path: Path, forgery: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = _call(tmp_path / "c", pow, 2, 10)
    mark = tmp_path / "mark"
    monkeypatch.setenv("EVIL_MARK", str(mark))
    payload = cloudpickle.dumps({"fn": _evil, "args": (), "kwargs": {}, "all_ranks": False, "max_result_bytes": None})
    call = d / run.CALL_FILE
    if forgery == "unsealed":
        call.write_bytes(payload)
    elif forgery == "other key":
        call.write_bytes(run.seal(b"x" * 32, "call", payload))
    elif forgery == "a result's seal":
        call.write_bytes(run.seal(KEY, "result.0", payload))
    else:
        call.write_bytes(run.seal(KEY, "call", payload))
        os.chmod(call, 0o666)
    got = _run(d)
    assert got.returncode == 2 and "is refused" in got.stderr, got.stderr
    assert not mark.exists() and not (d / run.result_name(0)).exists()


def test_a_call_directory_reached_through_a_symbolic_link_is_refused(tmp_path: Path) -> None:
    d = _call(tmp_path / "c", pow, 2, 10)
    (tmp_path / "link").symlink_to(d)
    got = _run(tmp_path / "link")
    assert got.returncode == 2 and "is refused" in got.stderr and "link" in got.stderr, got.stderr


def test_the_runner_imports_nothing_of_dispatch(tmp_path: Path) -> None:
    d = _call(tmp_path / "c", sorted, [3, 1, 2])
    code = (
        f"import runpy, sys\nsys.argv = ['run.py', {str(d)!r}]\n"
        f"try:\n    runpy.run_path({run.__file__!r}, run_name='__main__')\n"
        "except SystemExit as e:\n    assert e.code == 0, e.code\n"
        "assert not [m for m in sys.modules if m == 'dispatch' or m.startswith('dispatch.')], 'dispatch imported'\n"
    )
    got = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr
    assert value_of(_result(d)) == [1, 2, 3]
