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


def render_job_script(
    request: StartRequest,
    *,
    scheduler_id: str,
    restart: str = "0",
    prelude: Sequence[str] = (),
    launcher: Sequence[str] = (),
    exports: Mapping[str, str] | None = None,
    interpreter: str = "/bin/bash",
) -> str:
    """The script of ``request``. ``scheduler_id`` and ``restart`` are shell expressions the adapter writes
    (trusted text, expanded when the job runs); ``prelude`` lines come right after the ``#!`` line (scheduler
    directives, output redirects); ``launcher`` words go before the command (quoted like it); ``exports`` are
    the adapter's own variables, exported (quoted, in the given order) after dispatch's and before the spec's."""
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
    words = " ".join(shlex.quote(a) for a in (*launcher, *request.spec.command))
    lines.append(f"exec {words}")
    return "\n".join(lines) + "\n"
