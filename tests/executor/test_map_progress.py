"""``Executor.map`` shows how many of its calls are done and failed on stderr where progress is shown
(:mod:`dispatch.progressbar`): on a terminal, in a notebook, or everywhere with ``progress=True``; never with
``progress=False``, and by default not when stderr is no terminal (its output is then as before)."""

from __future__ import annotations

import pytest

from dispatch import Executor, progressbar
from dispatch.cluster import Cluster


def half(x: int) -> int:
    if x == 3:
        raise ValueError("three")
    return x // 2


def test_map_shows_its_calls_done_and_failed(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    with Executor(cluster, poll=0.1, progress=True) as ex:
        results = ex.map(half, range(4))
        assert [next(results) for _ in range(3)] == [0, 0, 1]
        with pytest.raises(ValueError, match="three"):
            next(results)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("map half: [....................] 0/4 done"), lines
    assert lines[-1].startswith("map half: [####################] 4/4 done, 1 failed, "), lines


def test_map_shows_nothing_off_a_terminal_by_default_or_when_told(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(progressbar.ENV, raising=False)
    with Executor(cluster, poll=0.1) as ex:
        assert list(ex.map(half, [0, 2])) == [0, 1]
    monkeypatch.setenv(progressbar.ENV, "always")
    with Executor(cluster, poll=0.1, progress=False) as ex:
        assert list(ex.map(half, [4])) == [2]
    assert capsys.readouterr().err == ""
