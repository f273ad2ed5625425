"""A login-node shell kept open across scripts: one ``bash`` started once, each script run in a subshell of it.

Starting a shell per script costs a process start on this side (Python's ``fork``/``exec`` of ``bash`` or
``ssh``) and, over SSH, a new channel on the shared connection: most of what a one-call script costs beyond the
call itself. A :class:`KeptShells` keeps up to ``keep`` shells and runs each script in one of them as::

    ( cd -- <dir>; <script> ) </dev/null 2><its own file>; printf '\\n@@<token>:%s\\n' "$?"; <stderr>; <end>

The script is parsed whole before it runs (a compound command), so it reads nothing more from the shell's input;
its ``exit`` and ``trap ... EXIT`` are the subshell's; its standard error comes back after its status. A script
whose input follows it (a payload, :data:`dispatch.slurm.scripts.PAYLOAD_MIN`) is not run here: the caller runs
it in a shell of its own. When the shell dies, or a script runs past its timeout (the shell's process group is
killed), the script's answer is :class:`TransportFailure` with what it printed and the end of what the shell (or
``ssh``) said on its standard error; a shell that answered nothing at all (a kept SSH session that went stale, a
connection refused) is dropped and the script runs in a shell of its own, whose failure says why (a host key, a
refused login): no byte came back, so its first line (the script's start marker) never ran.
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import select
import shlex
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence

from dispatch.slurm.transport.base import Result, TransportFailure

_PRELUDE = (  # mktemp makes its files 0600 whatever the umask
    '_dsp_kept_err=$(mktemp "${TMPDIR:-/tmp}/dsp.XXXXXX") || exit 70\n'
    '_dsp_kept_call=$(mktemp "${TMPDIR:-/tmp}/dsp.XXXXXX") || exit 70\n'
    'trap \'rm -f "$_dsp_kept_err" "$_dsp_kept_call"\' EXIT\n'
)
"""Run once per shell: its two private files (a script's standard error; a call's, :data:`_dsp_kept_call`, which
:meth:`dispatch.slurm.scripts.Script.render` uses instead of making and removing one per script)."""


class _Gone(TransportFailure):
    """The shell ended or refused input before the script printed anything: the script never started."""


class _Shell:
    """One kept ``bash``: its process and the bytes it printed past the last script's end."""

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None) -> None:
        # what the shell (or ssh) says itself, for a failure's message; closed by kill() and KeptShells.close()
        self.errors = tempfile.TemporaryFile()  # noqa: SIM115
        self.proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errors,
            env=env,
            start_new_session=True,
        )
        self.pid = os.getpid()
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin = self.proc.stdin
        self.fd = self.proc.stdout.fileno()
        self.stdin.write(_PRELUDE.encode())
        self.stdin.flush()

    def alive(self) -> bool:
        return self.pid == os.getpid() and self.proc.poll() is None

    def run(self, script: str, timeout: float, cwd: str | None) -> Result:
        """The script's result. TransportFailure when the shell died or the script ran past ``timeout`` (the
        shell is killed then); :class:`_Gone` when not one byte came back."""
        token = "@@dspk" + secrets.token_hex(8)
        cd = f"cd -- {shlex.quote(cwd)} 2>/dev/null; " if cwd else ""
        text = (
            f'( {cd}\n{script}\n) </dev/null 2>"$_dsp_kept_err"; printf \'\\n{token}:%s\\n\' "$?"; '
            f'[ ! -s "$_dsp_kept_err" ] || cat "$_dsp_kept_err"; printf \'\\n{token}:end\\n\'\n'
        )
        deadline = time.monotonic() + timeout
        try:
            self.stdin.write(text.encode("utf-8", "surrogateescape"))
            self.stdin.flush()
        except OSError as exc:
            self.kill()
            raise _Gone(f"the kept shell is gone: {exc}", Result(returncode=-1)) from None
        end = f"\n{token}:end\n".encode()
        data = bytearray()
        poll = select.poll()  # not select(): a process with more than 1024 open files is no reason to fail
        poll.register(self.fd, select.POLLIN)
        while not data.endswith(end):
            left = deadline - time.monotonic()
            ready = poll.poll(max(0, math.ceil(left * 1000))) if left > 0 else []
            if not ready:
                self.kill()
                raise TransportFailure(f"script did not finish within {timeout:g}s", _partial(data, token))
            chunk = os.read(self.fd, 65536)
            if not chunk:
                self.kill()
                said = self.said()
                if not data:
                    raise _Gone(f"the kept shell ended{said}", Result(returncode=-1))
                raise TransportFailure(f"the kept shell ended{said}", _partial(data, token))
            data += chunk
        return _result(bytes(data), token)

    def said(self) -> str:
        """``: <the last line or two the shell wrote on its standard error>``, or nothing."""
        try:
            self.errors.seek(0)
            text = self.errors.read()[-300:].decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""
        return f": {text}" if text else ""

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        for f in (self.proc.stdin, self.proc.stdout, self.errors):
            with contextlib.suppress(OSError):
                if f is not None:
                    f.close()


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _partial(data: bytearray, token: str) -> Result:
    """What a script printed before it was cut: its stdout up to the status line, if it got that far."""
    head = bytes(data).split(f"\n{token}:".encode(), 1)[0]
    return Result(_text(head), "", -1)


def _result(data: bytes, token: str) -> Result:
    status_at = data.rindex(f"\n{token}:".encode(), 0, len(data) - len(f"\n{token}:end\n"))
    stdout = data[:status_at]
    rest = data[status_at + len(token) + 2 :]
    status, _, stderr = rest.partition(b"\n")
    stderr = stderr[: -len(f"\n{token}:end\n")]
    return Result(_text(stdout), _text(stderr), int(status))


class KeptShells:
    """Up to ``keep`` shells started by ``argv`` (a ``bash -s`` reading its input), each running one script at a
    time; a script that finds them all busy, or carries a payload (``payload(script)``), runs through ``once``
    (a shell of its own). ``cwd`` gives the directory a script starts in (the caller's, for a local shell)."""

    def __init__(
        self,
        argv: Sequence[str],
        once: Callable[[str, float], Result],
        *,
        env: dict[str, str] | None = None,
        keep: int = 2,
        cwd: Callable[[], str | None] = lambda: None,
    ) -> None:
        self._argv = list(argv)
        self._once = once
        self._env = env
        self._keep = keep
        self._cwd = cwd
        self._idle: list[_Shell] = []
        self._started = 0
        self._lock = threading.Lock()

    def run(self, script: str, timeout: float) -> Result:
        if "_dsp_pay=" in script:
            return self._once(script, timeout)
        shell = self._take()
        if shell is None:
            return self._once(script, timeout)
        try:
            result = shell.run(script, timeout, self._cwd())
        except _Gone:
            self._lost(shell)
            return self._once(script, timeout)  # nothing came back, nothing ran: a shell of its own says why
        except TransportFailure:
            self._lost(shell)
            raise
        self._give_back(shell)
        return result

    def _take(self) -> _Shell | None:
        with self._lock:
            while self._idle:
                shell = self._idle.pop()
                if shell.alive():
                    return shell
                self._started -= 1
                if shell.pid == os.getpid():  # a forked child never kills its parent's shells
                    shell.kill()
            if self._started >= self._keep:
                return None
            self._started += 1
        try:
            return _Shell(self._argv, self._env)
        except OSError as exc:
            with self._lock:
                self._started -= 1
            raise TransportFailure(f"cannot start {self._argv[0]}: {exc}") from None

    def _give_back(self, shell: _Shell) -> None:
        with self._lock:
            if self._keep > 0:
                self._idle.append(shell)
                return
            self._started -= 1
        shell.kill()

    def _lost(self, shell: _Shell) -> None:
        shell.kill()
        with self._lock:
            self._started -= 1

    def close(self) -> None:
        """End every idle shell (a busy one ends when its script returns and finds the pool closed)."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._started -= len(idle)
            self._keep = 0
        for shell in idle:
            with contextlib.suppress(OSError):
                shell.stdin.close()  # bash reads its end of input and exits, running its EXIT trap
            with contextlib.suppress(subprocess.TimeoutExpired):
                shell.proc.wait(timeout=2)
            if shell.proc.poll() is None:
                shell.kill()
            with contextlib.suppress(OSError):
                shell.errors.close()
