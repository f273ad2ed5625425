"""Starting launchers and signalling processes: the local adapter's transport."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from dispatch.errors import Unavailable
from dispatch.local import launcher as launcher_module

LAUNCHER_PATH = str(Path(launcher_module.__file__).resolve())
SPAWN_TIMEOUT = 30.0


def spawn_launcher(job_dir: str, restart: int, python: str | None = None) -> None:
    """Start the detached launcher of execution ``restart`` and wait until it has recorded its pid.

    The launcher runs by file path (standard library only), in a new session, with no terminal: it outlives the
    calling process. Raises Unavailable (nothing started) if the launcher could not start.
    """
    exec_dir = launcher_module.execution_dir(job_dir, restart)
    log = os.open(os.path.join(exec_dir, launcher_module.LAUNCHER_LOG), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        proc = subprocess.Popen(
            [python or sys.executable, LAUNCHER_PATH, job_dir, str(restart)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        raise Unavailable(f"cannot start the local launcher: {exc}") from None
    finally:
        os.close(log)
    try:
        code = proc.wait(timeout=SPAWN_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        code = -1
    if code != 0:
        text = Path(exec_dir, launcher_module.LAUNCHER_LOG).read_text(errors="replace").strip()
        raise Unavailable(f"the local launcher did not start (exit {code}): {text[-500:] or 'no output'}")


def signal_pid(pid: int, sig: int) -> bool:
    """Send ``sig`` to ``pid``; False if it is gone."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def kill_groups(pgids: list[int], sig: int = signal.SIGKILL) -> None:
    """Signal process groups, ignoring the ones already gone."""
    for pgid in pgids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
