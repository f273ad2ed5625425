"""The executor seam and the registry of named transports.

An :class:`Executor` runs one bash script on the cluster side and returns its :class:`Result`. It raises
:class:`TransportFailure` when the transport itself failed (connection refused or cut, the script's own
deadline passed); ``result`` then carries whatever output arrived, so the caller can tell from the script's
start marker whether anything ran. Everything Slurm-specific lives above this seam.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from dispatch.errors import ConfigError


@dataclass(frozen=True)
class Result:
    """What a script produced: its stdout and stderr (text) and its exit status."""

    stdout: str = ""
    stderr: str = ""
    returncode: int = 0


class TransportFailure(Exception):
    """The transport failed; ``result`` holds the partial output received (possibly empty)."""

    def __init__(self, message: str, result: Result | None = None) -> None:
        super().__init__(message)
        self.result = result or Result(returncode=-1)


@runtime_checkable
class Executor(Protocol):
    """Runs bash scripts on the cluster side."""

    def run(self, script: str, timeout: float) -> Result: ...

    def close(self) -> None: ...


TransportFactory = Callable[[Any], Executor]
"""Builds an executor from the adapter's settings (a :class:`~dispatch.slurm.settings.SlurmSettings`)."""

_TRANSPORTS: dict[str, TransportFactory] = {}
_LOCK = threading.Lock()


def register_transport(name: str, factory: TransportFactory, *, replace: bool = False) -> None:
    """Register a transport under ``name`` (selected by the ``transport`` setting)."""
    with _LOCK:
        if name in _TRANSPORTS and not replace and _TRANSPORTS[name] is not factory:
            raise ValueError(f"a transport named {name!r} is already registered")
        _TRANSPORTS[name] = factory


def transports() -> list[str]:
    return sorted(_TRANSPORTS)


def make_transport(settings: Any) -> Executor:
    """The executor for ``settings.transport``; ConfigError naming ``transport`` when it is unknown."""
    factory = _TRANSPORTS.get(settings.transport)
    if factory is None:
        raise ConfigError("transport", f"no transport named {settings.transport!r} (known: {', '.join(transports())})")
    return factory(settings)


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", "surrogateescape") if isinstance(data, bytes) else data


def run_script(
    argv: list[str], script: str, timeout: float, *, env: dict[str, str] | None = None, what: str = "script"
) -> Result:
    """Run ``argv`` (a shell reading its script on standard input) with ``script``, in its own session, and
    kill the whole session if it runs past ``timeout`` (then TransportFailure carrying what was printed)."""
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True
    )
    try:
        out, err = proc.communicate(script.encode("utf-8", "surrogateescape"), timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_session(proc.pid)
        try:
            out, err = proc.communicate(timeout=AFTER_KILL)
        except subprocess.TimeoutExpired:  # a process outside the session still holds the pipes: stop reading
            proc.kill()
            out, err = b"", b""
        raise TransportFailure(
            f"{what} did not finish within {timeout:g}s", Result(_text(out), _text(err), -1)
        ) from None
    return Result(_text(out), _text(err), proc.returncode)


AFTER_KILL = 2.0
"""Seconds a killed script's output is still read for (what its processes printed before the kill)."""


def kill_session(leader: int) -> None:
    """SIGKILL every process of the session ``leader`` leads (started with ``start_new_session``): its process
    group, and the groups its processes made of their own inside the session (GNU ``timeout`` puts itself and
    its command in a new process group, which a kill of the leader's group misses). Linux's ``/proc`` names each
    process's session; elsewhere only the leader's group is killed."""
    with contextlib.suppress(OSError):
        os.killpg(leader, signal.SIGKILL)
    try:
        entries = os.listdir("/proc")
    except OSError:
        return
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            # the command (field 2) is in parentheses and may hold anything: the fields after its last ")"
            fields = stat[stat.rindex(b")") + 2 :].split()
            if int(fields[3]) == leader:  # field 6, the session id
                os.kill(int(entry), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            continue
