"""The local transport: scripts run in ``bash`` on this machine (for use on the login node), one kept shell
reused across scripts (:mod:`dispatch.slurm.transport.kept`), each script starting in the caller's directory."""

from __future__ import annotations

import functools
import os
import weakref
from typing import Any

from dispatch.slurm.transport.base import Result, TransportFailure, run_script
from dispatch.slurm.transport.kept import KeptShells


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:
        return None


def _run_once(env: dict[str, str], script: str, timeout: float) -> Result:
    try:
        return run_script(["bash", "-s"], script, timeout, env=env)
    except OSError as exc:
        raise TransportFailure(f"cannot start bash: {exc}") from None


class LocalExecutor:
    """Runs each script in a kept ``bash -s`` (or, when they are busy or the script carries a payload, a
    ``bash -s`` of its own), in its own process group."""

    def __init__(self, env: dict[str, str] | None = None, *, keep: int = 2) -> None:
        self._env = {**os.environ, **(env or {})}
        once = functools.partial(_run_once, self._env)  # holds no reference to this executor (see below)
        self._shells = KeptShells(["bash", "-s"], once, env=self._env, keep=keep, cwd=_cwd, lossless=True)
        weakref.finalize(self, self._shells.close)  # an executor dropped without close() leaves no shell behind

    def _once(self, script: str, timeout: float) -> Result:
        return _run_once(self._env, script, timeout)

    def run(self, script: str, timeout: float) -> Result:
        return self._shells.run(script, timeout)

    def close(self) -> None:
        self._shells.close()


def local_transport(settings: Any) -> LocalExecutor:
    return LocalExecutor()
