"""Live progress on a terminal: where the work is long (``Executor.map``, ``dispatch submit --from``, ``dispatch
run`` of a job that reports ``job.progress``), one line on stderr redrawn in place.

* The renderers are pure (a state and a time in, one line out): :func:`batch_line` for many jobs (done, failed,
  cancelled of the total, elapsed time, an estimated time left), :func:`submit_line` for a batched submission's
  phases, :func:`step_line` for one job's reported step and total with its rate and time left.
* :class:`Live` draws them: in place (``\\r`` and erase-to-end) at most :data:`REDRAW_EVERY` apart on a
  terminal, or as plain lines at most :data:`LINE_EVERY` apart where nothing redraws (a notebook without tqdm, a
  log when forced); :meth:`Live.output` clears the line around other output so it never mixes in.
* :func:`mode` decides where it is shown: on a terminal only, unless ``DISPATCH_PROGRESS_BAR`` says ``always``
  (plain lines when stderr is no terminal) or ``never``. :func:`batch_sink` adds a notebook (an IPython kernel):
  a tqdm bar where tqdm imports, plain lines otherwise; tqdm is never a dependency.

Drawing costs the caller a lock and a clock read per update: a redraw that is not due is skipped, so the
submission and collector paths are never slowed by the terminal.
"""

from __future__ import annotations

import importlib
import math
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TextIO

from dispatch.present import duration
from dispatch.progress import rate_text, views
from dispatch.spi import RankProgress

ENV = "DISPATCH_PROGRESS_BAR"
"""``auto`` (the default: on a terminal only), ``always`` or ``never``."""
REDRAW_EVERY = 0.1
"""Seconds between two redraws in place (at most ten a second)."""
LINE_EVERY = 2.0
"""Seconds between two plain lines (each is kept, so fewer)."""
BAR = 20
"""Cells of the bar."""

Mode = Literal["live", "lines"]


# ----- pure renderers ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchState:
    """Many jobs: ``total`` of them, of which ``done`` succeeded, ``failed`` failed, ``cancelled`` were cancelled;
    ``started_at`` is when they were submitted."""

    total: int
    started_at: float
    done: int = 0
    failed: int = 0
    cancelled: int = 0

    @property
    def finished(self) -> int:
        return self.done + self.failed + self.cancelled


def bar(share: float, cells: int = BAR) -> str:
    """``[#######.............]``: ``share`` (0 to 1) of ``cells`` filled."""
    filled = max(0, min(cells, int(share * cells)))
    return "[" + "#" * filled + "." * (cells - filled) + "]"


def eta_text(elapsed: float, finished: float, total: float) -> str:
    """The time left at the rate so far (``ETA 3m07s``); ``ETA -`` before anything finished."""
    if finished <= 0 or elapsed <= 0:
        return "ETA -"
    return f"ETA {duration(max(0.0, total - finished) * elapsed / finished)}"


def batch_line(state: BatchState, now: float, what: str = "jobs") -> str:
    """``map f: [####......] 37/100 done, 2 failed, 1 cancelled, 12.0s, ETA 20.4s``: finished of total (the
    failed and cancelled named when there are any), the time since submission and the time left at that pace."""
    elapsed = max(0.0, now - state.started_at)
    share = state.finished / state.total if state.total else 1.0
    text = f"{what}: {bar(share)} {state.finished}/{state.total} done"
    if state.failed:
        text += f", {state.failed} failed"
    if state.cancelled:
        text += f", {state.cancelled} cancelled"
    text += f", {duration(elapsed)}"
    if state.finished < state.total:
        text += f", {eta_text(elapsed, state.finished, state.total)}"
    return text


PHASES = ("recorded", "started", "opened")
"""A batched submission's phases (:meth:`dispatch.cluster.Operator.submit_many`), in order."""


def submit_line(phases: Mapping[str, tuple[int, int]], elapsed: float, what: str = "jobs") -> str:
    """``submitting 500 jobs: [#####.....] recorded 500/500, started 250/500, 1.2s``: each phase reached so far
    (:data:`PHASES`) with how many of its jobs went through it; the batch's size is the largest phase's, and the
    bar counts each phase a third."""
    reached = [p for p in PHASES if p in phases]
    total = max((phases[p][1] for p in reached), default=0)
    share = sum(phases[p][0] / phases[p][1] for p in reached if phases[p][1]) / len(PHASES)
    counts = ", ".join(f"{p} {phases[p][0]}/{phases[p][1]}" for p in reached)
    text = f"submitting {total} {what}: {bar(share)}"
    return f"{text} {counts}, {duration(elapsed)}" if counts else f"{text} {duration(elapsed)}"


def step_line(reports: Sequence[RankProgress], now: float, elapsed: float | None = None) -> str:
    """One job's progress as its slowest rank reported it: ``step 1200/5000 [####....] 24% 3.1/s ETA 20m03s``
    (``step 1200 3.1/s`` without a total; the rate ``-`` before a second report), the ranks counted when more
    than one reported, and the time since the job started when given."""
    vs = views(reports, now)
    if not vs:
        return "no progress reported yet" + (f", {duration(elapsed)}" if elapsed is not None else "")
    slow = min(vs, key=lambda v: (v.step, v.rank))
    if slow.total:
        share = min(1.0, slow.step / slow.total)
        text = f"step {slow.step}/{slow.total} {bar(share)} {100 * share:.0f}% {rate_text(slow.rate)}"
        if slow.rate:
            text += f" ETA {duration(max(0, slow.total - slow.step) / slow.rate)}"
    else:
        text = f"step {slow.step} {rate_text(slow.rate)}"
    if len(vs) > 1:
        text += f" (slowest of {len(vs)} ranks)"
    if elapsed is not None:
        text += f", {duration(elapsed)}"
    return text


def fit(text: str, columns: int) -> str:
    """``text`` cut to ``columns - 1`` cells (a line filling the last column wraps on some terminals)."""
    room = max(10, columns - 1)
    return text if len(text) <= room else text[: room - 1] + "…"


# ----- where it is shown -------------------------------------------------------------------------------------


def setting() -> str:
    """``DISPATCH_PROGRESS_BAR``: ``auto`` unless it says ``always`` (or 1, yes, on) or ``never`` (0, no,
    off)."""
    raw = os.environ.get(ENV, "").strip().lower()
    if raw in ("always", "1", "yes", "on", "true"):
        return "always"
    if raw in ("never", "0", "no", "off", "false"):
        return "never"
    return "auto"


def is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def mode(stream: TextIO | None = None) -> Mode | None:
    """How progress is shown on ``stream`` (default stderr): ``live`` on a terminal, ``lines`` when forced
    where there is none, None (not shown) otherwise or when ``never``."""
    stream = sys.stderr if stream is None else stream
    want = setting()
    if want == "never":
        return None
    if is_tty(stream):
        return "live"
    return "lines" if want == "always" else None


def in_notebook() -> bool:
    """True inside an IPython kernel (Jupyter), where stderr is no terminal but a cell shows what is written."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:
        return False
    return shell is not None and hasattr(shell, "kernel")


# ----- drawing -----------------------------------------------------------------------------------------------


@dataclass
class Live:
    """One progress line on ``stream``: redrawn in place (``live``) or written as plain lines (``lines``),
    throttled (:data:`REDRAW_EVERY`, :data:`LINE_EVERY`); thread-safe."""

    stream: TextIO
    mode: Mode
    clock: Callable[[], float] = time.monotonic
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _text: str = field(default="", init=False)
    _shown: str = field(default="", init=False)
    _drawn: bool = field(default=False, init=False)
    """The line is on the terminal now (``live``): clear it before anything else is written."""
    _last: float = field(default=-math.inf, init=False)
    _mid_line: bool = field(default=False, init=False)
    """Other output left the cursor inside a line: nothing is drawn until it ends one."""
    _closed: bool = field(default=False, init=False)

    def update(self, text: str, *, force: bool = False) -> None:
        """Show ``text`` when a redraw is due (or ``force``); otherwise keep it for the next one."""
        with self._lock:
            self._text = text
            if self._closed:
                return
            now = self.clock()
            every = REDRAW_EVERY if self.mode == "live" else LINE_EVERY
            if force or now - self._last >= every:
                self._draw(now)

    def output(self, write: Callable[[], Any], ends_line: bool = True) -> None:
        """Run ``write`` (other output to the same terminal) with the line cleared first, then draw it again
        (unless ``write`` left the cursor inside a line: ``ends_line`` False)."""
        with self._lock:
            if self._drawn:
                self._erase()
            write()
            self._mid_line = not ends_line
            if not self._closed and self.mode == "live" and self._text:
                self._draw(self.clock())

    def close(self, text: str | None = None) -> None:
        """The last state (``text``, else the last one given), then the line is left as it stands; nothing is
        drawn after."""
        with self._lock:
            if self._closed:
                return
            if text is not None:
                self._text = text
            if (self._text and self._text != self._shown) or (self.mode == "live" and self._drawn):
                self._draw(self.clock())
            if self.mode == "live" and self._drawn:
                self._write("\n")
                self._drawn = False
            self._closed = True

    def _draw(self, now: float) -> None:
        if self._mid_line or not self._text:
            return
        if self.mode == "live":
            columns = shutil.get_terminal_size((100, 24)).columns
            self._write("\r" + fit(self._text, columns) + "\x1b[K")
            self._drawn = True
        elif self._text != self._shown:
            self._write(self._text + "\n")
        self._shown = self._text
        self._last = now

    def _erase(self) -> None:
        self._write("\r\x1b[K")
        self._drawn = False

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken stderr shows no progress; the work goes on
            self._closed = True


def live(stream: TextIO | None = None) -> Live | None:
    """A :class:`Live` line on ``stream`` (default stderr) where :func:`mode` shows one, else None."""
    stream = sys.stderr if stream is None else stream
    how = mode(stream)
    return None if how is None else Live(stream, how)


# ----- many futures ------------------------------------------------------------------------------------------


class BatchSink(Protocol):
    """Where a :class:`BatchWatch` shows its state."""

    def show(self, state: BatchState) -> None: ...
    def close(self, state: BatchState) -> None: ...


@dataclass
class LineSink:
    """A batch's state as :func:`batch_line` on a :class:`Live` line."""

    line: Live
    what: str
    clock: Callable[[], float] = time.monotonic

    def show(self, state: BatchState) -> None:
        self.line.update(batch_line(state, self.clock(), self.what), force=state.finished == 0)

    def close(self, state: BatchState) -> None:
        self.line.close(batch_line(state, self.clock(), self.what))


class TqdmSink:
    """A batch's state as a tqdm bar (``tqdm.auto``: the notebook's widget in a kernel), failures in its
    postfix; tqdm throttles its own redraws."""

    def __init__(self, tqdm: Any, total: int, what: str) -> None:
        self.bar = tqdm(total=total, desc=what, unit="job", leave=True)
        self.n = 0

    def show(self, state: BatchState) -> None:
        if state.finished > self.n:
            extra = {k: v for k, v in (("failed", state.failed), ("cancelled", state.cancelled)) if v}
            if extra:
                self.bar.set_postfix(extra, refresh=False)
            self.bar.update(state.finished - self.n)
            self.n = state.finished

    def close(self, state: BatchState) -> None:
        self.show(state)
        self.bar.close()


def batch_sink(total: int, what: str, enabled: bool | None = None) -> BatchSink | None:
    """Where a batch of ``total`` jobs shows its progress, or None: with ``enabled`` None (auto), on a terminal
    (:func:`mode`) or in a notebook (a tqdm bar where tqdm imports, plain lines otherwise); True shows it
    everywhere (plain lines where there is no terminal), False nowhere."""
    if enabled is False or (enabled is None and setting() == "never"):
        return None
    if in_notebook():
        try:
            tqdm = importlib.import_module("tqdm.auto").tqdm  # optional: never a dependency
        except ImportError:
            return LineSink(Live(sys.stderr, "lines"), what)
        return TqdmSink(tqdm, total, what)
    if enabled:
        return LineSink(Live(sys.stderr, "live" if is_tty(sys.stderr) else "lines"), what)
    line = live()
    return None if line is None else LineSink(line, what)


class BatchWatch:
    """Counts ``futures`` as they finish (each future's done callback, in whichever thread settles it) and shows
    the count on ``sink``; closes it when the last one finished."""

    def __init__(self, futures: Sequence[Future[Any]], sink: BatchSink, clock: Callable[[], float]) -> None:
        self._sink = sink
        self._lock = threading.Lock()
        self._state = BatchState(total=len(futures), started_at=clock())
        sink.show(self._state)
        if not futures:
            sink.close(self._state)
        for f in futures:
            f.add_done_callback(self._settled)

    def _settled(self, future: Future[Any]) -> None:
        with self._lock:
            s = self._state
            if future.cancelled():
                s = BatchState(s.total, s.started_at, s.done, s.failed, s.cancelled + 1)
            elif future.exception() is not None:
                s = BatchState(s.total, s.started_at, s.done, s.failed + 1, s.cancelled)
            else:
                s = BatchState(s.total, s.started_at, s.done + 1, s.failed, s.cancelled)
            self._state = s
            try:
                if s.finished >= s.total:
                    self._sink.close(s)
                else:
                    self._sink.show(s)
            except Exception:  # a display that fails never fails the futures
                pass

    @property
    def state(self) -> BatchState:
        return self._state


def watch(
    futures: Sequence[Future[Any]], what: str, enabled: bool | None = None, clock: Callable[[], float] = time.monotonic
) -> BatchWatch | None:
    """Show ``futures``' progress where :func:`batch_sink` says; None when it is shown nowhere."""
    sink = batch_sink(len(futures), what, enabled)
    return None if sink is None else BatchWatch(futures, sink, clock)


__all__ = [
    "ENV",
    "BatchState",
    "BatchWatch",
    "Live",
    "batch_line",
    "batch_sink",
    "in_notebook",
    "live",
    "mode",
    "step_line",
    "submit_line",
    "watch",
]
