"""The GPU ledger: all-or-nothing grants, holders named, locks that die with their holder, a checked directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dispatch.local import ledger


def test_a_grant_is_all_or_nothing_and_busy_names_the_holders(tmp_path: Path) -> None:
    d = str(tmp_path / "gpus")
    first = ledger.try_acquire(d, ["0", "1", "2"], 2, {"jobId": "a"})
    assert isinstance(first, ledger.Grant) and first.devices == ["0", "1"]
    busy = ledger.try_acquire(d, ["0", "1", "2"], 2, {"jobId": "b"})
    assert isinstance(busy, ledger.Busy)
    assert busy.reason() == "waiting for 2 GPUs: devices 0,1 held by job a"
    assert set(ledger.holders(d, ["0", "1", "2"])) == {"0", "1"}, "the failed try kept nothing, not even device 2"
    one = ledger.try_acquire(d, ["0", "1", "2"], 1, {"jobId": "c"})
    assert isinstance(one, ledger.Grant) and one.devices == ["2"]
    first.release()
    one.release()
    assert ledger.holders(d, ["0", "1", "2"]) == {}


def test_a_lock_dies_with_its_holder_process(tmp_path: Path) -> None:
    d = str(tmp_path / "gpus")
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import sys; from dispatch.local import ledger; g = ledger.try_acquire(sys.argv[1], ['0'], 1, "
         "{'jobId': 'child'}); print(type(g).__name__, flush=True); sys.stdin.read()", d],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert child.stdout is not None and child.stdout.readline().strip() == "Grant"
    assert ledger.holders(d, ["0"]) == {"0": {"jobId": "child"}}
    child.kill()
    child.wait()
    again = ledger.try_acquire(d, ["0"], 1, {"jobId": "next"})
    assert isinstance(again, ledger.Grant), "SIGKILL of the holder freed the device"


def test_odd_device_ids_name_one_file_each_inside_the_ledger(tmp_path: Path) -> None:
    d = str(tmp_path)
    assert ledger.device_file(d, "3") == os.path.join(d, "device-3.lock")
    odd = ledger.device_file(d, "../x")
    assert os.path.dirname(odd) == d and odd != ledger.device_file(d, "..x")


def test_a_ledger_directory_open_to_others_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "gpus"
    d.mkdir(mode=0o700)
    d.chmod(0o777)
    with pytest.raises(PermissionError, match="closed to others"):
        ledger.try_acquire(str(d), ["0"], 1, {})
