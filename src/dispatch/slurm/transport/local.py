"""The local transport: the script runs in ``bash -s`` on this machine (for use on the login node)."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any

from dispatch.slurm.transport.base import Result, TransportFailure


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", "surrogateescape") if isinstance(data, bytes) else data


class LocalExecutor:
    """Runs each script with ``bash -s`` (script on stdin), in its own process group."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self._env = {**os.environ, **(env or {})}

    def run(self, script: str, timeout: float) -> Result:
        try:
            proc = subprocess.Popen(
                ["bash", "-s"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self._env,
                start_new_session=True,
            )
        except OSError as exc:
            raise TransportFailure(f"cannot start bash: {exc}") from None
        try:
            out, err = proc.communicate(script.encode("utf-8", "surrogateescape"), timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            raise TransportFailure(
                f"script did not finish within {timeout:g}s", Result(_text(out), _text(err), -1)
            ) from None
        return Result(_text(out), _text(err), proc.returncode)

    def close(self) -> None:
        pass


def local_transport(settings: Any) -> LocalExecutor:
    return LocalExecutor()
