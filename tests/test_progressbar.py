"""The progress line: its pure renderers (a state and a time in, one line out), where it is shown, and how
:class:`~dispatch.progressbar.Live` draws and throttles it."""

from __future__ import annotations

import io
import sys
import types
from concurrent.futures import Future
from typing import Any

import pytest

from dispatch import progressbar
from dispatch.progressbar import BatchState, Live, batch_line, step_line, submit_line
from dispatch.spi import RankProgress


def test_batch_line_counts_finished_of_total_with_the_time_left_at_the_pace_so_far() -> None:
    state = BatchState(total=100, started_at=1000.0, done=35, failed=2, cancelled=1)
    line = batch_line(state, now=1012.0, what="map f")
    assert line == "map f: [#######.............] 38/100 done, 2 failed, 1 cancelled, 12.0s, ETA 19.6s"


def test_batch_line_before_anything_finished_and_when_all_did() -> None:
    start = batch_line(BatchState(total=4, started_at=0.0), now=3.0)
    assert start == "jobs: [....................] 0/4 done, 3.0s, ETA -"
    done = batch_line(BatchState(total=4, started_at=0.0, done=4), now=75.0)
    assert done == "jobs: [####################] 4/4 done, 1m15s"  # no time left to estimate


def test_submit_line_shows_each_phase_reached() -> None:
    assert submit_line({}, 0.05) == "submitting 0 jobs: [....................] 0.1s"
    line = submit_line({"recorded": (500, 500), "started": (250, 500)}, 1.2, "jobs to hpc")
    assert line == "submitting 500 jobs to hpc: [##########..........] recorded 500/500, started 250/500, 1.2s"


def _report(rank: int, step: int, total: int | None, at: float, first: int = 0, first_at: float = 0.0) -> RankProgress:
    return RankProgress(rank=rank, step=step, total=total, at=at, first_step=first, first_at=first_at)


def test_step_line_shows_the_slowest_rank_with_its_rate_and_time_left() -> None:
    reports = [_report(0, 1300, 5000, at=100.0), _report(1, 1200, 5000, at=100.0)]
    line = step_line(reports, now=101.0, elapsed=100.0)
    assert line == "step 1200/5000 [####................] 24% 12/s ETA 5m16s (slowest of 2 ranks), 1m40s"


def test_step_line_without_a_total_or_a_rate() -> None:
    assert step_line([_report(0, 7, None, at=5.0, first=7, first_at=5.0)], now=6.0) == "step 7 -"
    assert step_line([], now=0.0, elapsed=2.0) == "no progress reported yet, 2.0s"


def test_a_long_line_is_cut_to_the_terminal_s_width() -> None:
    assert progressbar.fit("x" * 200, 50) == "x" * 48 + "…"
    assert progressbar.fit("short", 50) == "short"


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("setting", "tty", "expected"),
    [
        (None, True, "live"),
        (None, False, None),
        ("never", True, None),
        ("always", False, "lines"),
        ("always", True, "live"),
        ("0", True, None),
        ("1", False, "lines"),
    ],
)
def test_shown_on_a_terminal_unless_the_environment_says_otherwise(
    monkeypatch: pytest.MonkeyPatch, setting: str | None, tty: bool, expected: str | None
) -> None:
    if setting is None:
        monkeypatch.delenv(progressbar.ENV, raising=False)
    else:
        monkeypatch.setenv(progressbar.ENV, setting)
    assert progressbar.mode(Tty() if tty else io.StringIO()) == expected


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_live_redraws_in_place_at_most_ten_times_a_second_and_ends_the_line() -> None:
    out, clock = Tty(), Clock()
    line = Live(out, "live", clock)
    line.update("a")
    clock.t = 0.05
    line.update("b")  # not due: kept
    clock.t = 0.2
    line.update("c")
    line.close()
    assert out.getvalue() == "\ra\x1b[K\rc\x1b[K\rc\x1b[K\n"
    line.update("d")
    assert out.getvalue().endswith("\n")  # nothing after close


def test_live_clears_its_line_around_other_output_and_waits_for_a_line_s_end() -> None:
    out, clock = Tty(), Clock()
    line = Live(out, "live", clock)
    line.update("step 1")
    line.output(lambda: out.write("partial"), ends_line=False)
    clock.t = 1.0
    line.update("step 2")  # the cursor is inside the job's line: not drawn over it
    line.output(lambda: out.write(" end\n"))
    assert out.getvalue() == "\rstep 1\x1b[K\r\x1b[Kpartial end\n\rstep 2\x1b[K"


def test_plain_lines_are_written_only_when_they_change_and_at_most_every_two_seconds() -> None:
    out, clock = io.StringIO(), Clock()
    line = Live(out, "lines", clock)
    line.update("1/3 done")
    clock.t = 1.0
    line.update("2/3 done")
    clock.t = 3.0
    line.update("2/3 done")
    line.close("3/3 done")
    assert out.getvalue() == "1/3 done\n2/3 done\n3/3 done\n"


def test_a_batch_watch_counts_futures_as_they_finish(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(progressbar.ENV, "always")
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    futures: list[Future[Any]] = [Future() for _ in range(3)]
    watch = progressbar.watch(futures, "map f", clock=lambda: 0.0)
    assert watch is not None
    futures[0].set_result(1)
    futures[1].set_exception(ValueError("no"))
    futures[2].cancel()
    assert watch.state == BatchState(total=3, started_at=0.0, done=1, failed=1, cancelled=1)
    lines = err.getvalue().splitlines()
    assert lines[0].startswith("map f: [") and "0/3 done" in lines[0]
    assert "3/3 done, 1 failed, 1 cancelled" in lines[-1]


def test_a_batch_is_shown_nowhere_off_a_terminal_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(progressbar.ENV, raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert progressbar.watch([Future()], "map f") is None
    assert progressbar.watch([Future()], "map f", enabled=False) is None


class Kernel:
    kernel = object()


def _in_a_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("IPython")
    fake.get_ipython = Kernel  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", fake)


def test_in_a_notebook_a_batch_is_a_tqdm_bar_where_tqdm_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    _in_a_kernel(monkeypatch)
    monkeypatch.delenv(progressbar.ENV, raising=False)
    bars: list[Any] = []

    class FakeTqdm:
        def __init__(self, **kwargs: Any) -> None:
            self.kwargs, self.n, self.postfix, self.closed = kwargs, 0, {}, False
            bars.append(self)

        def update(self, n: int) -> None:
            self.n += n

        def set_postfix(self, d: dict[str, int], refresh: bool = True) -> None:
            self.postfix = d

        def close(self) -> None:
            self.closed = True

    monkeypatch.setitem(sys.modules, "tqdm.auto", types.SimpleNamespace(tqdm=FakeTqdm))
    futures: list[Future[Any]] = [Future(), Future()]
    assert progressbar.watch(futures, "map f") is not None
    futures[0].set_exception(RuntimeError())
    futures[1].set_result(0)
    (bar,) = bars
    assert bar.kwargs["total"] == 2 and bar.n == 2 and bar.postfix == {"failed": 1} and bar.closed


def test_in_a_notebook_without_tqdm_a_batch_is_plain_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    _in_a_kernel(monkeypatch)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # import fails
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    futures: list[Future[Any]] = [Future()]
    assert progressbar.watch(futures, "map f") is not None
    futures[0].set_result(0)
    assert err.getvalue().splitlines()[-1].startswith("map f: [####################] 1/1 done")
