"""The job script a batch scheduler runs: dispatch's environment, then the user's argv, quoted word by word.

Every batch adapter submits some script; what dispatch needs in it is the same everywhere:

* ``DISPATCH_EXECUTION=<N>.<scheduler id>.<R>``, built at run time from the scheduler's own variables (the
  adapter passes shell expressions for the id and the restart count, e.g. ``"$JOB_ID"`` and
  ``"${RESTARTED:-0}"``), so each execution sees its own identity, and those two as ``DISPATCH_SCHEDULER_ID``
  and ``DISPATCH_RESTART``;
* ``DISPATCH_JOB``, ``DISPATCH_SUBMISSION``, ``DISPATCH_MARKER``, ``DISPATCH_CHECKPOINT_DIR`` (with a
  :class:`~dispatch.extensions.SharedCheckpoint`) and the spec's ``env``, every value shell-quoted;
* ``exec`` of the launcher words (``srun ... --``, or nothing) and the spec's command, each word quoted with
  :func:`shlex.quote`, so the argv reaches the process byte for byte whatever it contains.

Launch checks (:func:`launch_checks`, passed as ``checks``) run right before the ``exec``, with the job's
environment in place: the working directory must exist and the program must be an executable file (a name
without ``/`` is looked up in ``PATH``, as ``exec`` will). A failed check prints ``dispatch: launch failed: ...``
to stderr and exits :data:`LAUNCH_FAILED_EXIT`, which the adapter's mapping reads as ``launch-failed`` rather
than as the program's ``exit``. They are checked where the script runs (a batch scheduler's first node): a
rank that another node cannot start still fails there (the shell's 126 or 127, read as an exit).

Nothing a user typed reaches the shell unquoted; the only unquoted text is what the adapter itself passes as
``prelude`` lines and the two id expressions.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

from dispatch.extensions import SharedCheckpoint
from dispatch.spi import StartRequest

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

LAUNCH_FAILED_EXIT = 125
"""The exit status of a job script whose launch checks failed: the convention of the coreutils wrappers (``env``,
``nice``, ``timeout``: 125 is the wrapper's own failure, before the command ran). A program that itself exits
125 with no other trace cannot be told from it; the adapter's docs say where that is so."""


LAUNCH_FAILED_PREFIX = "dispatch: launch failed: "
"""How a failed launch check's line on stderr begins; the reason follows (``dispatch show`` and ``dispatch run``'s
last line read it back: :func:`dispatch.cli.launch.launch_reason`)."""


def launch_checks(command: Sequence[str], working_dir: str | None = None) -> list[str]:
    """Shell lines that fail the launch (exit :data:`LAUNCH_FAILED_EXIT`, a message on stderr) when
    ``working_dir`` cannot be entered (it is entered: the script then runs there) or ``command[0]`` is not an
    executable file. Every path and name is quoted; for :func:`render_job_script`'s ``checks``."""
    if not command:
        raise ValueError("an empty command")
    lines = []
    if working_dir:
        wd = shlex.quote(working_dir)
        lines.append(f"cd -- {wd} 2>/dev/null || {_fail(f'the working directory {working_dir} cannot be entered')}")
    prog = command[0]
    q = shlex.quote(prog)
    if "/" in prog:
        lines.append(f"[ -e {q} ] || {_fail(f'the program {prog} does not exist')}")
        lines.append(f"[ -f {q} ] && [ -x {q} ] || {_fail(f'the program {prog} is not an executable file')}")
    else:
        lines.append(f"type -P -- {q} >/dev/null || {_fail(f'the program {prog} is not found in PATH')}")
    return lines


def _fail(message: str) -> str:
    text = shlex.quote(LAUNCH_FAILED_PREFIX + message)
    return f"{{ printf '%s\\n' {text} >&2; exit {LAUNCH_FAILED_EXIT}; }}"


def render_job_script(
    request: StartRequest,
    *,
    scheduler_id: str,
    restart: str = "0",
    prelude: Sequence[str] = (),
    launcher: Sequence[str] = (),
    exports: Mapping[str, str] | None = None,
    checks: Sequence[str] = (),
    interpreter: str = "/bin/bash",
) -> str:
    """The script of ``request``. ``scheduler_id`` and ``restart`` are shell expressions the adapter writes
    (trusted text, expanded when the job runs); ``prelude`` lines come right after the ``#!`` line (scheduler
    directives, output redirects); ``launcher`` words go before the command (quoted like it); ``exports`` are
    the adapter's own variables, exported (quoted, in the given order) after dispatch's and before the spec's;
    ``checks`` (:func:`launch_checks`) run last, right before the ``exec``."""
    lines = [f"#!{interpreter}", *prelude]
    lines.append(f"export DISPATCH_SCHEDULER_ID={scheduler_id}")
    lines.append(f"export DISPATCH_RESTART={restart}")
    lines.append(f"export DISPATCH_EXECUTION={request.submission}.{scheduler_id}.{restart}")
    lines.append(f"export DISPATCH_JOB={shlex.quote(request.job_id)}")
    lines.append(f"export DISPATCH_SUBMISSION={request.submission}")
    lines.append(f"export DISPATCH_MARKER={shlex.quote(request.marker)}")
    ckpt = request.spec.extension(SharedCheckpoint)
    if ckpt is not None:
        lines.append(f"export DISPATCH_CHECKPOINT_DIR={shlex.quote(ckpt.path)}")
    for key, value in (exports or {}).items():
        if not _NAME.fullmatch(key):
            raise ValueError(f"{key!r} is not an environment variable name")
        lines.append(f"export {key}={shlex.quote(value)}")
    for key, value in sorted(request.spec.env.items()):
        lines.append(f"export {key}={shlex.quote(value)}")  # names are validated by JobSpec
    lines.extend(checks)
    words = " ".join(shlex.quote(a) for a in (*launcher, *request.spec.command))
    lines.append(f"exec {words}")
    return "\n".join(lines) + "\n"
