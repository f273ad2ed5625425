"""SharedState: one JSON object shared by processes, updated under a lock, replaced whole."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from dispatch.adapterkit.shared import SharedState

ROUNDS = 50


def _count(path: str, key: str) -> None:
    state = SharedState(path)
    for _ in range(ROUNDS):
        with state.update() as data:
            data["total"] = int(data.get("total", 0)) + 1
            data[key] = int(data.get(key, 0)) + 1


def test_concurrent_updates_from_processes_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "state" / "shared.json")
    procs = [multiprocessing.Process(target=_count, args=(path, f"p{i}")) for i in range(4)]
    for p in procs:
        p.start()
    reader = SharedState(path)
    seen = []
    while any(p.is_alive() for p in procs):  # a reader without the lock sees whole objects only
        seen.append(int(reader.read().get("total", 0)))
    for p in procs:
        p.join()
        assert p.exitcode == 0
    final = SharedState(path).read()
    assert final == {"total": 4 * ROUNDS, **{f"p{i}": ROUNDS for i in range(4)}}
    assert seen == sorted(seen)  # never a step back: each read is a state some update left
    assert (tmp_path / "state").stat().st_mode & 0o777 == 0o700
    assert Path(path).stat().st_mode & 0o777 == 0o600


def test_a_missing_file_is_empty_and_an_unchanged_update_writes_nothing(tmp_path: Path) -> None:
    state = SharedState(tmp_path / "s.json")
    assert state.read() == {}
    with state.update() as data:
        assert data == {}
    assert not (tmp_path / "s.json").exists()


def test_an_exception_in_the_block_writes_nothing(tmp_path: Path) -> None:
    state = SharedState(tmp_path / "s.json")
    with state.update() as data:
        data["a"] = 1
    with pytest.raises(RuntimeError), state.update() as data:
        data["a"] = 2
        raise RuntimeError("changed my mind")
    assert state.read() == {"a": 1}


def test_a_file_that_is_not_an_object_is_an_error_unless_tolerant(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="does not hold a JSON object"):
        SharedState(path).read()
    with pytest.raises(ValueError), SharedState(path).update():
        pass
    assert path.read_text() == "[1, 2]"  # never overwritten by a strict state
    tolerant = SharedState(path, tolerant=True)
    assert tolerant.read() == {}
    with tolerant.update() as data:
        data["fresh"] = True
    assert SharedState(path).read() == {"fresh": True}
