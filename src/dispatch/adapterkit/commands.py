"""Run a scheduler's commands with a deadline, mapping failures to the SPI's errors.

:meth:`CommandRunner.read` is for commands that change nothing (``qstat``, ``squeue``): a command that could
not be started, timed out or was cut by its transport raises :class:`~dispatch.errors.Unavailable`.
:meth:`CommandRunner.write` is for commands that may change the scheduler (``qsub``, ``qhold``): a command that
could not be started raises Unavailable (nothing ran), but one that timed out raises
:class:`~dispatch.errors.OutcomeUnknown`, because it may have acted before it was killed. A command that ran
and answered returns a :class:`CommandResult` whatever its exit status: what a non-zero status means is the
scheduler's to say (the adapter's errors module).

The argv is never given to a local shell. With a ``prefix`` (``("ssh", "login1")``), the argv becomes one
word, shell-quoted word by word, because the remote side runs it through its shell.

Through ``ssh``, its own failure (exit 255) is told apart by what ssh said: a failure before any session was
set up (connection refused or timed out, an unknown host, a refused key or host key) means nothing ran and raises
Unavailable, for a write too; any other ssh failure (a connection closed or reset while the command ran) may
have come after the remote command acted, and raises OutcomeUnknown for a write.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dispatch.errors import OutcomeUnknown, Unavailable

SSH_CONNECT_FAILURES = (
    "Connection refused",
    "Connection timed out",
    "Could not resolve hostname",
    "Name or service not known",
    "No route to host",
    "Network is unreachable",
)
"""What OpenSSH prints on a line of its own (``ssh: connect to host h port 22: Connection refused``) when it
could not connect."""

SSH_REFUSED_SESSION = ("Permission denied (", "Host key verification failed", "Unable to negotiate with")
"""How OpenSSH's lines begin when it connected but was refused a session (authentication, host key, algorithms)."""


def ssh_failed_before_session(stderr: str) -> bool:
    """True when ssh's own failure (exit 255) came before any remote command could start: one of ssh's own lines
    says it could not connect or was refused a session. A remote command's output never matches, because its
    lines are not ssh's (they do not begin ``ssh:``)."""
    for line in stderr.splitlines():
        line = line.strip()
        if line.startswith("ssh: ") and any(m in line for m in SSH_CONNECT_FAILURES):
            return True
        if line.startswith(SSH_REFUSED_SESSION):
            return True
    return False


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


class CommandRunner:
    """Runs commands locally (or through ``prefix``), each under ``timeout`` seconds."""

    def __init__(
        self,
        *,
        timeout: float = 30.0,
        env: Mapping[str, str] | None = None,
        prefix: Sequence[str] = (),
    ) -> None:
        if timeout <= 0:
            raise ValueError(f"a command timeout must be positive, not {timeout!r}")
        self.timeout = timeout
        self.env = dict(env) if env is not None else None
        self.prefix = tuple(prefix)
        self.calls = 0

    def argv_for(self, argv: Sequence[str]) -> list[str]:
        """What is executed for ``argv``: itself, or the prefix followed by its quoted words."""
        if not argv:
            raise ValueError("an empty command")
        if self.prefix:
            return [*self.prefix, shlex.join(argv)]
        return list(argv)

    def read(self, argv: Sequence[str], *, stdin: str | None = None, timeout: float | None = None) -> CommandResult:
        return self._run(argv, stdin, timeout, write=False)

    def write(self, argv: Sequence[str], *, stdin: str | None = None, timeout: float | None = None) -> CommandResult:
        return self._run(argv, stdin, timeout, write=True)

    def _run(self, argv: Sequence[str], stdin: str | None, timeout: float | None, *, write: bool) -> CommandResult:
        real = self.argv_for(argv)
        limit = self.timeout if timeout is None else timeout
        self.calls += 1
        try:
            done = subprocess.run(
                real,
                input=stdin,
                capture_output=True,
                text=True,
                timeout=limit,
                env=self.env,
                stdin=None if stdin is not None else subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            what = f"{argv[0]} did not answer within {limit:g}s"
            if write:
                raise OutcomeUnknown(f"{what}; it may have acted before it was killed") from None
            raise Unavailable(what) from None
        except OSError as exc:  # not started: nothing ran
            raise Unavailable(f"{argv[0]} could not be run: {exc}") from None
        if self.prefix and done.returncode == 255 and os.path.basename(self.prefix[0]) == "ssh":
            said = done.stderr.strip()[:300]
            if write and not ssh_failed_before_session(done.stderr):
                raise OutcomeUnknown(f"ssh failed around {argv[0]}, which may have acted: {said}")
            raise Unavailable(f"ssh failed before {argv[0]} could run: {said}" if write else f"ssh failed: {said}")
        return CommandResult(tuple(argv), done.returncode, done.stdout, done.stderr)
