"""Starting launchers and signalling processes: the local adapter's transport."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from dispatch.errors import OutcomeUnknown, Unavailable
from dispatch.local import launcher as launcher_module

LAUNCHER_PATH = str(Path(launcher_module.__file__).resolve())
SPAWN_TIMEOUT = 30.0


def spawn_launcher(job_dir: str, restart: int, nonce: str, python: str | None = None) -> None:
    """Start the detached launcher of execution ``restart`` and wait until it has recorded its pid.

    The launcher runs by file path (standard library only), in a new session, with no terminal: it outlives the
    calling process. ``nonce`` names this spawn: the launcher claims it before it runs anything
    (:func:`~dispatch.local.launcher.claim`). When the start is not confirmed (the launcher's parent failed, or
    did not answer within :data:`SPAWN_TIMEOUT`, or this wait was interrupted), the spawner tries to take the
    claim itself: if it wins, that launcher can never run, and Unavailable says nothing started
    (:func:`~dispatch.local.launcher.abandoned` is then true); if the launcher took it first, it runs, and an
    unconfirmed start is OutcomeUnknown. An interruption is re-raised as it came, after the claim is decided.
    """
    exec_dir = launcher_module.execution_dir(job_dir, restart)
    log = os.open(os.path.join(exec_dir, launcher_module.LAUNCHER_LOG), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        proc = subprocess.Popen(
            [python or sys.executable, LAUNCHER_PATH, job_dir, str(restart), nonce],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        _give_up(exec_dir, nonce)
        raise Unavailable(f"cannot start the local launcher: {exc}") from None
    finally:
        os.close(log)
    try:
        code = proc.wait(timeout=SPAWN_TIMEOUT)
    except subprocess.TimeoutExpired:
        code = None
    except BaseException:
        if _give_up(exec_dir, nonce):
            _kill(proc)
        raise
    if code == 0:
        return
    why = f"exit {code}" if code is not None else f"no answer within {SPAWN_TIMEOUT:g}s"
    if _give_up(exec_dir, nonce):
        _kill(proc)
        text = Path(exec_dir, launcher_module.LAUNCHER_LOG).read_text(errors="replace").strip()
        raise Unavailable(f"the local launcher did not start ({why}), and now never will: {text[-500:] or 'no output'}")
    if code is None:
        return  # the launcher claimed this spawn: it runs (its parent is merely slow to say so)
    raise OutcomeUnknown(f"the local launcher claimed its execution but did not confirm its start ({why})")


def _give_up(exec_dir: str, nonce: str) -> bool:
    """Take spawn ``nonce``'s claim for the spawner; True if won (that launcher never runs anything)."""
    return launcher_module.claim(exec_dir, nonce, {"abandoned": True, "by": os.getpid()})


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill a launcher's parent that lost its claim (its child, if forked, exits without running)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


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
