"""The exit codes of the ``dispatch`` command, and which error leads to which. Documented in ``docs/cli.md``."""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    """Exit codes. ``run`` and ``status JOB``-style waits use JOB_FAILED and UNKNOWN for the job's outcome."""

    OK = 0
    """Success (for ``run``: the job succeeded)."""
    JOB_FAILED = 1
    """The job ended without success: failed (any cause) or cancelled."""
    USAGE = 2
    """Bad command line, configuration, rules file or job spec. Nothing was done."""
    NOT_FOUND = 3
    """No such job, cluster object, execution, rank or file."""
    REFUSED = 4
    """The cluster cannot or will not do it: Unsupported (a job it can never run, refused before it is recorded),
    Rejected, a read-only open, a ``stop`` of a job already closed (nothing to stop), or a ``run`` that stopped its
    job because the scheduler said it can never run."""
    UNKNOWN = 5
    """The outcome is unknown: the job's evidence is gone, or a call may or may not have taken effect."""
    UNAVAILABLE = 6
    """The cluster could not be reached; nothing was done. Try again."""
    CONFLICT = 7
    """Another writer changed the job at the same time; nothing was done. Try again."""
    INTERNAL = 70
    """A bug in dispatch (run again with ``--debug`` for the traceback, and report it)."""
    INTERRUPTED = 130
    """Interrupted with Ctrl-C."""


MEANING: dict[Exit, str] = {
    Exit.OK: "Success (for `run`: the job succeeded).",
    Exit.JOB_FAILED: "The job ended without success: failed (any cause) or cancelled (`run`; not `stop --wait`,"
    " which exits 0 once the job has ended).",
    Exit.USAGE: "Bad command line, configuration, rules file or job spec. Nothing was done.",
    Exit.NOT_FOUND: "No such job, execution or rank.",
    Exit.REFUSED: "The cluster cannot or will not do it: Unsupported (a job it can never run, refused before it is"
    " recorded), Rejected, a read-only open, a `stop` of a job already closed, or a `run` that stopped its job"
    " because the scheduler said it can never run.",
    Exit.UNKNOWN: "The outcome is unknown: the job's evidence is gone, or a call may or may not have taken effect.",
    Exit.UNAVAILABLE: "The cluster could not be reached, or preflight failed; nothing was done. Try again.",
    Exit.CONFLICT: "Another writer changed the job at the same time; nothing was done. Try again.",
    Exit.INTERNAL: "A bug in dispatch: run again with `--debug` for the traceback, and report it.",
    Exit.INTERRUPTED: "Interrupted with Ctrl-C (a second Ctrl-C during `run` leaves the job running).",
}


def exit_for(exc: BaseException) -> Exit:
    """The exit code for an error dispatch raised on purpose."""
    from dispatch import errors

    table: list[tuple[type[BaseException], Exit]] = [
        (errors.ConfigError, Exit.USAGE),
        (errors.SpecError, Exit.USAGE),
        (errors.NotFound, Exit.NOT_FOUND),
        (errors.Unsupported, Exit.REFUSED),
        (errors.Rejected, Exit.REFUSED),
        (errors.ReadOnly, Exit.REFUSED),
        (errors.OutcomeUnknown, Exit.UNKNOWN),
        (errors.Unavailable, Exit.UNAVAILABLE),
        (errors.Conflict, Exit.CONFLICT),
        (errors.DeclarationError, Exit.INTERNAL),
    ]
    for cls, code in table:
        if isinstance(exc, cls):
            return code
    return Exit.INTERNAL


HINTS: dict[str, str] = {
    "NotFound": "list jobs with: dispatch status --all",
    "OutcomeUnknown": "dispatch will not repeat the call; check later with: dispatch status",
    "Unavailable": "nothing was done; try again",
    "Conflict": "another process changed the job at the same time; try again",
    "ReadOnly": "open the cluster writable",
}
