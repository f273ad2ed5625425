"""One supervisor process: ``python -m dispatch.supervise``.

Several of these, on one or several hosts, may share one PostgreSQL record store: each job is owned through a
lease with a fencing token (see :class:`dispatch.supervise.Supervisor`), so a process that is killed, paused or
cut off loses its jobs to another one after ``--lease-ttl`` seconds, and its late writes are refused.

::

    python -m dispatch.supervise --adapter slurm --settings '{"transport": "local"}' \\
        --store postgresql://dispatch@db/dispatch --schema dispatch --owner sup-a --poll 5 --lease-ttl 30 \\
        --rules rules.toml

``--store`` is a PostgreSQL DSN (``postgresql://...``, ``postgres://...`` or a ``key=value`` DSN with ``host=``
or ``dbname=``) or the path of a SQLite file. ``--settings`` is the adapter's settings as JSON, or ``@FILE``.

Output: one JSON line per cycle on standard output (``{"owner", "cycle": <CycleReport>}``), and with
``--trace-calls`` one line per backend call (``{"owner", "call", "at"}``), so tests and the fault campaign can
check what a process did. Settings and the DSN are never printed. Exit status: 0 after SIGTERM/SIGINT or
``--until``, 2 for bad arguments or settings (the error names the key), 3 when the store or the cluster cannot
be reached at start.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from dispatch.errors import ConfigError, DispatchError, Unavailable
from dispatch.records.base import Records
from dispatch.records.model import Event, JobRecord
from dispatch.rules import RuleSet
from dispatch.spi import Backend

_BACKEND_CALLS = (
    "start",
    "start_many",
    "open_many",
    "open",
    "inspect",
    "inspect_many",
    "find",
    "find_many",
    "stop_job",
    "hold",
    "release",
    "requeue",
    "cessation",
    "watch",
)
WRITE_CALLS = frozenset({"start", "open", "stop_job", "hold", "release", "requeue"})
"""The backend calls that change the scheduler (the others only read)."""


def is_postgres(store: str) -> bool:
    """Whether ``store`` names a PostgreSQL database rather than a SQLite file."""
    s = store.strip()
    if s.startswith(("postgresql://", "postgres://")):
        return True
    words = s.split()
    return bool(words) and all("=" in w for w in words) and any(w.split("=", 1)[0] in ("host", "dbname") for w in words)


def open_store(store: str, schema: str = "dispatch") -> Records:
    """The record store ``store`` names (see the module docstring)."""
    if not store:
        raise ConfigError("store", "is required: a postgresql:// DSN or the path of a SQLite file")
    if is_postgres(store):
        from dispatch.records.postgres import PostgresRecords

        return PostgresRecords(store, schema=schema)
    from dispatch.records.sqlite import SQLiteRecords

    return SQLiteRecords(store)


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


class _Emitter:
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


def traced(backend: Backend, report: Callable[[str], None]) -> Backend:
    """``backend`` with every scheduler call reported before it is made; ``isinstance`` checks see the same
    optional interfaces."""
    from dispatch.spi import OPTIONAL_INTERFACES

    def forward(name: str, announce: bool) -> Callable[..., Any]:
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            if announce:
                self._report(name)
            return getattr(self._inner, name)(*args, **kwargs)

        method.__name__ = name
        return method

    attrs: dict[str, Any] = {n: forward(n, True) for n in _BACKEND_CALLS if callable(getattr(backend, n, None))}
    for n in (
        "capabilities",
        "declarations",
        "extension_policy",
        "close",
        "compile_policy",
        "weakened",
        "stdout",
        "stderr",
    ):
        if callable(getattr(backend, n, None)):
            attrs[n] = forward(n, False)
    attrs["name"] = property(lambda self: self._inner.name)
    attrs["read_only"] = property(lambda self: self._inner.read_only)

    def init(self: Any, inner: Backend, report: Callable[[str], None]) -> None:
        self._inner = inner
        self._report = report

    attrs["__init__"] = init
    cls = type(f"Traced{type(backend).__name__}", (), attrs)
    view: Backend = cls(backend, report)
    lost = [i.__name__ for i in OPTIONAL_INTERFACES if isinstance(backend, i) and not isinstance(view, i)]
    if lost:
        raise AssertionError(f"the traced view lost {lost}")
    return view


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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m dispatch.supervise", description="Run one dispatch supervisor.")
    p.add_argument("--adapter", required=True, help="adapter name (slurm, kubeflow, local, memory, ...)")
    p.add_argument("--settings", help="the adapter's settings: JSON text or @FILE")
    p.add_argument("--store", required=True, help="postgresql:// DSN or SQLite file path")
    p.add_argument("--schema", default="dispatch", help="PostgreSQL schema (default: dispatch)")
    p.add_argument("--cluster", help="the cluster name in the records (default: the adapter's name)")
    p.add_argument("--owner", help="this supervisor's unique name (default: supervisor:HOST:PID)")
    p.add_argument("--poll", type=float, help="seconds between cycles (default: from the backend's declarations)")
    p.add_argument("--rules", help="default rules file (.toml, .yaml, .json) for jobs recorded without rules")
    p.add_argument("--lease-ttl", type=float, default=None, help="seconds a lease lasts without renewal")
    p.add_argument("--until", type=float, default=None, help="stop after this many seconds")
    p.add_argument("--trace-calls", action="store_true", help="print one JSON line per backend call")
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        help="import this module (or .py file) first: an adapter that registers itself without an entry point",
    )
    p.add_argument("--test-pause-before-intent", metavar="ACTION", help=argparse.SUPPRESS)
    return p


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = out or sys.stdout
    from dispatch.cluster import default_owner

    owner = args.owner or default_owner("supervisor")
    emit = _Emitter(out, owner)
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        return _run(args, owner, emit, stop)
    except ConfigError as exc:
        print(f"dispatch.supervise: {exc}", file=sys.stderr)
        return 2
    except Unavailable as exc:
        print(f"dispatch.supervise: {exc}", file=sys.stderr)
        return 3


def _run(args: argparse.Namespace, owner: str, emit: _Emitter, stop: threading.Event) -> int:
    from dispatch.clock import SystemClock
    from dispatch.cluster import new_backend

    for plugin in args.plugin:
        load_plugin(plugin)
    settings = parse_settings(args.settings)
    rules = RuleSet.load(args.rules) if args.rules else None
    records = open_store(args.store, args.schema)

    from dispatch.supervise import Supervisor

    if args.test_pause_before_intent:
        records = PausingRecords(records, args.test_pause_before_intent, emit)  # type: ignore[assignment]

    clock = SystemClock()
    backend = new_backend(args.adapter, settings, clock=clock)
    if args.trace_calls:
        backend = traced(backend, lambda name: emit(call=name, at=clock.now()))
    extra: dict[str, Any] = {}
    if args.lease_ttl is not None:
        extra["lease_ttl"] = args.lease_ttl
    sup = Supervisor(
        backend,
        records,
        clock=clock,
        owner=owner,
        poll=args.poll,
        default_rules=rules,
        cluster=args.cluster,
        **extra,
    )
    emit(event="started", pid=os.getpid(), poll=sup.poll, leaseTtl=sup.lease_ttl, adapter=args.adapter)
    deadline = None if args.until is None else clock.now() + args.until
    try:
        while not stop.is_set():
            try:
                report = sup.cycle()
                emit(cycle=report.to_json())
            except DispatchError as exc:
                # the store or the cluster failed outside what a cycle absorbs: keep going, say so
                emit(event="cycle-error", error=type(exc).__name__, message=str(exc))
            except Exception as exc:  # a database connection lost mid-cycle, for instance
                emit(event="cycle-error", error=type(exc).__name__, message=_safe(str(exc), args.store))
            if deadline is not None and clock.now() >= deadline:
                break
            stop.wait(sup.poll)
    finally:
        emit(event="stopped")
        backend.close()
        records.close()
    return 0


def _safe(message: str, store: str) -> str:
    if is_postgres(store):
        from dispatch.records.postgres import redact

        return message.replace(store, redact(store))
    return message


if __name__ == "__main__":
    sys.exit(main())
