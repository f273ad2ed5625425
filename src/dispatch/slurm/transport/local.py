"""The local transport: scripts run in ``bash`` on this machine (for use on the login node), one kept shell
reused across scripts (:mod:`dispatch.slurm.transport.kept`), each script starting in the caller's directory."""

from __future__ import annotations

import os
from typing import Any

from dispatch.slurm.transport.base import Result, TransportFailure, run_script
from dispatch.slurm.transport.kept import KeptShells


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:
        return None


class LocalExecutor:
    """Runs each script in a kept ``bash -s`` (or, when they are busy or the script carries a payload, a
    ``bash -s`` of its own), in its own process group."""

    def __init__(self, env: dict[str, str] | None = None, *, keep: int = 2) -> None:
        self._env = {**os.environ, **(env or {})}
        self._shells = KeptShells(["bash", "-s"], self._once, env=self._env, keep=keep, cwd=_cwd)

    def _once(self, script: str, timeout: float) -> Result:
        try:
            return run_script(["bash", "-s"], script, timeout, env=self._env)
        except OSError as exc:
            raise TransportFailure(f"cannot start bash: {exc}") from None

    def run(self, script: str, timeout: float) -> Result:
        return self._shells.run(script, timeout)

    def close(self) -> None:
        self._shells.close()


def local_transport(settings: Any) -> LocalExecutor:
    return LocalExecutor()
