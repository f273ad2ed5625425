"""The local transport: the script runs in ``bash -s`` on this machine (for use on the login node)."""

from __future__ import annotations

import os
from typing import Any

from dispatch.slurm.transport.base import Result, TransportFailure, run_script


class LocalExecutor:
    """Runs each script with ``bash -s`` (script on stdin), in its own process group."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self._env = {**os.environ, **(env or {})}

    def run(self, script: str, timeout: float) -> Result:
        try:
            return run_script(["bash", "-s"], script, timeout, env=self._env)
        except OSError as exc:
            raise TransportFailure(f"cannot start bash: {exc}") from None

    def close(self) -> None:
        pass


def local_transport(settings: Any) -> LocalExecutor:
    return LocalExecutor()
