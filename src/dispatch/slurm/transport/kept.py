"""A login-node shell kept open across scripts: one ``bash`` started once, each script run in a subshell of it.

Starting a shell per script costs a process start on this side (Python's ``fork``/``exec`` of ``bash`` or
``ssh``) and, over SSH, a new channel on the shared connection: most of what a one-call script costs beyond the
call itself. A :class:`KeptShells` keeps up to ``keep`` shells and runs each script in one of them as::

    ( cd -- <dir>; <script> ) </dev/null 2><its own file>; printf '\\n@@<token>:%s\\n' "$?"; <stderr>; <end>

The script is parsed whole before it runs (a compound command), so it reads nothing more from the shell's input;
its ``exit`` and ``trap ... EXIT`` are the subshell's; its standard error comes back after its status. A script
whose input follows it (a payload, :data:`dispatch.slurm.scripts.PAYLOAD_MIN`) is not run here: the caller runs
it in a shell of its own. When the shell dies, or a script runs past its timeout (the shell's process group is
killed: its whole session, which GNU ``timeout``'s own process groups are part of), the script's answer is
:class:`TransportFailure` with what it printed and the end of what the shell (or ``ssh``) said on its standard
error: once a script is sent, a shell that goes silent may have run it, so it is never sent again. Before a
script is sent, a new shell, and one idle for :data:`IDLE_CHECK` seconds (a kept SSH session can go stale unseen),
must answer a token; one that does not (a stale session, a connection refused) is dropped and the script runs in
a shell of its own, whose failure says why (a host key, a refused login). A script is written within its deadline
(a shell that stops reading cannot hold the caller), and bash runs the parenthesised script only once it has read
all of it, so a script cut off in its sending never ran.
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import select
import shlex
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence

from dispatch.slurm.transport.base import Result, TransportFailure, kill_session

_PRELUDE = (  # umask 077: a file of the shell's that something removed comes back private (2>"$file" makes it)
    "_dsp_umask=$(umask); umask 077\n"
    '_dsp_kept_err=$(mktemp "${TMPDIR:-/tmp}/dsp.XXXXXX") || exit 70\n'
    '_dsp_kept_call=$(mktemp "${TMPDIR:-/tmp}/dsp.XXXXXX") || exit 70\n'
    'trap \'rm -f "$_dsp_kept_err" "$_dsp_kept_call"\' EXIT\n'
)
"""Run once per shell: its two private files (a script's standard error; a call's, :data:`_dsp_kept_call`, which
:meth:`dispatch.slurm.scripts.Script.render` uses instead of making and removing one per script)."""
IDLE_CHECK = 5.0
"""Seconds a shell may sit idle before the next script first asks it to answer (:meth:`_Shell.answers`): a kept SSH
session can go stale unseen, and only a shell known to answer may be handed a script whose loss would leave its
outcome unknown."""


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
        self.in_fd = self.stdin.fileno()
        os.set_blocking(self.in_fd, False)  # writes wait in poll(), within the script's deadline
        self.pending = _PRELUDE.encode()  # written with the first check that the shell answers
        self.answered_at: float | None = None

    def alive(self) -> bool:
        return self.pid == os.getpid() and self.proc.poll() is None

    def run(self, script: str, timeout: float, cwd: str | None, *, lossless: bool) -> Result:
        """The script's result. :class:`_Gone` when the script certainly never started: the shell did not answer
        before it was sent, or (``lossless``: a local pipe, which loses no byte the shell wrote) the shell ended
        before printing that it began. TransportFailure when the shell died, or the script ran past ``timeout``
        (the shell is killed then), after it may have begun."""
        deadline = time.monotonic() + timeout
        if self.answered_at is None or time.monotonic() - self.answered_at > IDLE_CHECK:
            self.answers(deadline)
        token = "@@dspk" + secrets.token_hex(8)
        cd = f"cd -- {shlex.quote(cwd)} 2>/dev/null; " if cwd else ""
        began = f"\n{token}:began\n"
        # the subshell takes the caller's umask back (the kept shell itself keeps 077 for its own files)
        text = (
            f"printf '\\n{token}:began\\n'; "
            f'( umask "$_dsp_umask"; {cd}\n{script}\n) </dev/null 2>"$_dsp_kept_err"; '
            f"printf '\\n{token}:%s\\n' \"$?\"; "
            f'[ ! -s "$_dsp_kept_err" ] || cat "$_dsp_kept_err"; printf \'\\n{token}:end\\n\'\n'
        )
        # bash runs the line only once it has read all of it: a script cut off in its sending never ran
        self._send(text.encode("utf-8", "surrogateescape"), deadline)
        try:
            data = self._read_to(f"\n{token}:end\n".encode(), deadline, timeout)
        except TransportFailure as exc:
            printed = exc.result.stdout
            if lossless and not printed.startswith(began):
                raise _Gone(str(exc), Result(returncode=-1)) from None
            raise TransportFailure(str(exc), _partial(printed.removeprefix(began), token)) from None
        self.answered_at = time.monotonic()
        return _result(data[len(began) :], token)

    def answers(self, deadline: float) -> None:
        """Ask the shell to print a token and wait for it (and, the first time, set it up): :class:`_Gone` when
        it does not answer by ``deadline``, the shell killed. Nothing of a script has been sent yet."""
        token = "@@dspk" + secrets.token_hex(8)
        self._send(self.pending + f"printf '\\n{token}\\n'\n".encode(), deadline)
        self.pending = b""
        try:
            self._read_to(f"\n{token}\n".encode(), deadline, None)
        except TransportFailure as exc:
            raise _Gone(str(exc), Result(returncode=-1)) from None
        self.answered_at = time.monotonic()

    def _send(self, data: bytes, deadline: float) -> None:
        poll = select.poll()
        poll.register(self.in_fd, select.POLLOUT)
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0 or not poll.poll(math.ceil(left * 1000)):
                self.kill()
                raise _Gone("the kept shell did not take the script in time (it was not run)", Result(returncode=-1))
            try:
                view = view[os.write(self.in_fd, view) :]
            except BlockingIOError:
                continue
            except OSError as exc:
                self.kill()
                raise _Gone(f"the kept shell is gone: {exc}{self.said()}", Result(returncode=-1)) from None

    def _read_to(self, end: bytes, deadline: float, timeout: float | None) -> bytes:
        """The shell's output up to and including ``end``. TransportFailure (its stdout: what came) when the
        shell ends first or ``deadline`` passes (the shell killed)."""
        data = bytearray()
        poll = select.poll()  # not select(): a process with more than 1024 open files is no reason to fail
        poll.register(self.fd, select.POLLIN)
        while not data.endswith(end):
            left = deadline - time.monotonic()
            ready = poll.poll(max(0, math.ceil(left * 1000))) if left > 0 else []
            if not ready:
                self.kill()
                what = f"script did not finish within {timeout:g}s" if timeout is not None else "no answer in time"
                raise TransportFailure(what, Result(_text(bytes(data)), "", -1))
            chunk = os.read(self.fd, 65536)
            if not chunk:
                self.kill()
                raise TransportFailure(f"the kept shell ended{self.said()}", Result(_text(bytes(data)), "", -1))
            data += chunk
        return bytes(data)

    def said(self) -> str:
        """``: <the last line or two the shell wrote on its standard error>``, or nothing."""
        try:
            self.errors.seek(0)
            text = self.errors.read()[-300:].decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""
        return f": {text}" if text else ""

    def kill(self) -> None:
        kill_session(self.proc.pid)
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        for f in (self.proc.stdin, self.proc.stdout, self.errors):
            with contextlib.suppress(OSError):
                if f is not None:
                    f.close()


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _partial(printed: str, token: str) -> Result:
    """What a script printed before it was cut: its stdout up to the status line, if it got that far."""
    return Result(printed.split(f"\n{token}:", 1)[0], "", -1)


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
    (a shell of its own). ``cwd`` gives the directory a script starts in (the caller's, for a local shell).
    ``lossless``: the shells' output reaches this process whole (a local pipe, not a network), so a shell that
    ended without printing that a script began never began it (:meth:`_Shell.run`)."""

    def __init__(
        self,
        argv: Sequence[str],
        once: Callable[[str, float], Result],
        *,
        env: dict[str, str] | None = None,
        keep: int = 2,
        cwd: Callable[[], str | None] = lambda: None,
        lossless: bool = False,
    ) -> None:
        self._argv = list(argv)
        self._once = once
        self._env = env
        self._keep = keep
        self._cwd = cwd
        self._lossless = lossless
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
            result = shell.run(script, timeout, self._cwd(), lossless=self._lossless)
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
