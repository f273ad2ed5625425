"""The supervisor as a long-running service: the loop behind ``dispatch supervise``.

:func:`serve` runs cycles every ``poll`` seconds until SIGTERM/SIGINT, ``until`` or ``once``, and reports on
standard output one JSON line per cycle (``{"owner", "cycle": <CycleReport>}``) and, with ``trace_calls``, one
per backend call (``{"owner", "call", "at"}``), so tests and the fault campaign can check what a process did.
Settings and DSNs are never printed. With a metrics port it serves Prometheus metrics and ``/healthz``
(:mod:`dispatch.supervise.metrics`). It runs the garbage collector by the service's policy
(:class:`~dispatch.supervise.collector.Collector`).

The helpers here (:func:`parse_settings`, :func:`load_plugin`, :func:`traced`, :class:`PausingRecords`) serve
the command's options; the command itself lives in :mod:`dispatch.cli.admin`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from dispatch.errors import ConfigError, DispatchError
from dispatch.records.base import Records
from dispatch.records.model import Event, JobRecord
from dispatch.spi import Backend
from dispatch.supervise.collector import Collector

_BACKEND_CALLS = (
    "start",
    "start_many",
    "open",
    "open_many",
    "inspect",
    "inspect_many",
    "find",
    "find_many",
    "stop_job",
    "hold",
    "release",
    "requeue",
    "readmit",
    "cessation",
    "watch",
    "execution_output",
)
WRITE_CALLS = frozenset(
    {"start", "start_many", "open", "open_many", "stop_job", "hold", "release", "requeue", "readmit"}
)
"""The backend calls that change the scheduler (the others only read)."""


def parse_settings(text: str | None) -> Any:
    """``--settings``: JSON text, ``@FILE`` holding JSON, or nothing."""
    if text is None or text == "":
        return None
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError("settings", f"cannot read {path}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        # the text may hold a secret: name the position, never echo it
        raise ConfigError(
            "settings", f"not valid JSON (line {getattr(exc, 'lineno', '?')}, column {getattr(exc, 'colno', '?')})"
        ) from None


def load_plugin(name: str) -> None:
    """Import ``name``: a module path (``pkg.mod``) or a ``.py`` file, whose import registers an adapter."""
    import importlib
    import importlib.util

    try:
        if name.endswith(".py"):
            spec = importlib.util.spec_from_file_location(Path(name).stem, name)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load {name}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        else:
            importlib.import_module(name)
    except (ImportError, OSError) as exc:
        raise ConfigError("plugin", f"cannot import {name}: {exc}") from None


class Emitter:
    """Writes JSON lines to ``out``, one at a time, each flushed (the reader may be a test watching a pipe)."""

    def __init__(self, out: TextIO, owner: str) -> None:
        self._out = out
        self._owner = owner
        self._lock = threading.Lock()

    def __call__(self, **fields: Any) -> None:
        line = json.dumps({"owner": self._owner, **fields}, default=str)
        with self._lock:
            try:
                self._out.write(line + "\n")
                self._out.flush()
            except (BrokenPipeError, ValueError):
                pass


def traced(backend: Backend, report: Callable[[str, str | None], None]) -> Backend:
    """``backend`` with every scheduler call reported before it is made, with what it acts on when it acts on one
    thing (``report(name, target)``: a start's job id, the scheduler id of an open, stop, hold, release, requeue
    or readmit; None otherwise); ``isinstance`` checks see the same optional interfaces."""
    from dispatch.spi import view

    def call(name: str, method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if name in _BACKEND_CALLS:
            report(name, _target(name, args))
        return method(*args, **kwargs)

    return view(backend, "Traced", call=call)


def _target(name: str, args: tuple[Any, ...]) -> str | None:
    """What a traced call acts on (see :func:`traced`)."""
    if not args or name not in WRITE_CALLS:
        return None
    job_id = getattr(args[0], "job_id", None)
    return str(job_id) if job_id is not None else str(args[0]) if isinstance(args[0], str) else None


class PausingRecords:
    """A record store that stops this process (SIGSTOP) once, just before writing an intent for ``action``.

    A fault-test hook (``--test-pause-before-intent``): the test then lets the lease expire, lets another
    supervisor take the job over, and resumes this one (SIGCONT) to check that its write is refused.
    """

    def __init__(self, inner: Records, action: str, report: Callable[..., None]) -> None:
        self._inner = inner
        self._action = action
        self._report = report
        self._done = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def update(self, job: JobRecord, events: Sequence[Event] = (), *, fence: int | None = None) -> JobRecord:
        if not self._done and any(e.kind == "intent" and e.data.get("action") == self._action for e in events):
            self._done = True
            self._report(event="pausing", job=job.id, action=self._action, fence=fence)
            os.kill(os.getpid(), signal.SIGSTOP)
            self._report(event="resumed", job=job.id, action=self._action, fence=fence)
            try:
                written = self._inner.update(job, events, fence=fence)
            except DispatchError as exc:
                self._report(event="write-refused", job=job.id, error=type(exc).__name__, message=str(exc))
                raise
            self._report(event="write-accepted", job=job.id)
            return written
        return self._inner.update(job, events, fence=fence)


def serve(
    sup: Any,
    emit: Emitter,
    *,
    once: bool = False,
    until: float | None = None,
    metrics: Any = None,
    redact: Callable[[str], str] = lambda s: s,
    log: Callable[[str], None] | None = None,
    collector: Collector | None = None,
) -> int:
    """Cycle ``sup`` every ``sup.poll`` seconds until SIGTERM/SIGINT, ``until`` seconds or (``once``) one cycle.

    A cycle that fails outside what a cycle absorbs (the store unreachable, a lost database connection) is
    reported as ``{"event": "cycle-error"}`` and the loop goes on; ``metrics`` (a
    :class:`~dispatch.supervise.metrics.Metrics`) is told of every cycle. ``collector`` (default: the service's
    :class:`~dispatch.supervise.collector.Collector`) runs after every cycle; the process's collector is left
    as it was on return (unfrozen, automatic collection as before). Returns the exit status (0)."""
    collector = Collector() if collector is None else collector
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    deadline = None if until is None else time.monotonic() + until
    collector.start()
    try:
        while not stop.is_set():
            started = time.monotonic()
            try:
                report = sup.cycle()
                emit(cycle=report.to_json())
                if metrics is not None:
                    metrics.cycle(report, time.monotonic() - started)
            except DispatchError as exc:
                emit(event="cycle-error", error=type(exc).__name__, message=redact(str(exc)))
                if log is not None:
                    log(f"cycle failed: {type(exc).__name__}: {redact(str(exc))}")
            except Exception as exc:  # a database connection lost mid-cycle, for instance
                emit(event="cycle-error", error=type(exc).__name__, message=redact(str(exc)))
                if log is not None:
                    log(f"cycle failed: {type(exc).__name__}: {redact(str(exc))}")
            collector.after_cycle()
            if once or (deadline is not None and time.monotonic() >= deadline):
                break
            stop.wait(sup.poll)
    finally:
        collector.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
        emit(event="stopped")
    return 0


__all__ = ["WRITE_CALLS", "Emitter", "PausingRecords", "load_plugin", "parse_settings", "serve", "traced"]
