"""Slurm's answers to dispatch's sentinels: the documented error table (``docs/adapters/slurm.md``).

:func:`classify` maps one failed call's stderr (and whether the call writes) to an exception class. Order
matters: the first matching row wins.
"""

from __future__ import annotations

from dispatch.errors import DispatchError, NotFound, OutcomeUnknown, Rejected, Unavailable

# (message fragment, sentinel for a read, sentinel for a write)
TABLE: tuple[tuple[str, type[DispatchError], type[DispatchError]], ...] = (
    ("Invalid job id specified", NotFound, NotFound),
    ("Job is no longer pending execution", Rejected, Rejected),
    ("Job has already finished", Rejected, Rejected),
    ("already completing or completed", Rejected, Rejected),
    ("Job is pending execution", Rejected, Rejected),
    ("Requested operation is presently disabled", Rejected, Rejected),
    ("Access/permission denied", Rejected, Rejected),
    ("Job is in held state", Rejected, Rejected),
    ("Job can not be altered now", Unavailable, Unavailable),
    ("Invalid partition name", Rejected, Rejected),
    ("Invalid account", Rejected, Rejected),
    ("Invalid qos", Rejected, Rejected),
    ("Requested node configuration is not available", Rejected, Rejected),
    ("Requested partition configuration not available", Rejected, Rejected),
    ("Requested time limit is invalid", Rejected, Rejected),
    ("Invalid generic resource", Rejected, Rejected),
    ("Invalid feature specification", Rejected, Rejected),
    ("Memory required by task is not available", Rejected, Rejected),
    ("More processors requested than permitted", Rejected, Rejected),
    ("Node count specification invalid", Rejected, Rejected),
    ("Protocol authentication error", Unavailable, Unavailable),
    ("Invalid authentication credential", Unavailable, Unavailable),
    ("Unable to contact slurm controller", Unavailable, OutcomeUnknown),
    ("Socket timed out", Unavailable, OutcomeUnknown),
    ("Unable to create job record", Unavailable, OutcomeUnknown),
    ("Slurm job queue full", Unavailable, OutcomeUnknown),
    ("Slurm accounting storage is disabled", Unavailable, Unavailable),
    ("command not found", Unavailable, Unavailable),
    ("Batch job submission failed", Rejected, Rejected),
    ("sbatch: error:", Rejected, Rejected),
)


def classify(stderr: str, *, write: bool, status: int | None) -> type[DispatchError]:
    """The sentinel for a call that failed with ``stderr`` (exit ``status``; None when it never finished)."""
    for fragment, read_cls, write_cls in TABLE:
        if fragment.lower() in stderr.lower():
            return write_cls if write else read_cls
    if status is None or status in (124, 137):
        return OutcomeUnknown if write else Unavailable
    if status == 127:
        return Unavailable
    return OutcomeUnknown if write else Unavailable


def error_for(what: str, stderr: str, *, write: bool, status: int | None) -> DispatchError:
    """The error of a failed call, its message ``<what>: <stderr>``. A command's own prefix on a line
    (``sbatch: error: ``) is dropped when ``what`` already names that command, so it is said once."""
    cls = classify(stderr, write=write, status=status)
    command = what.split(None, 1)[0] if what.strip() else ""
    lines = [_unprefixed(line, command) for line in stderr.strip().splitlines()]
    text = " | ".join(lines)[:400]
    return cls(f"{what}: {text or f'exit status {status}'}")


def _unprefixed(line: str, command: str) -> str:
    for prefix in (f"{command}: error: ", f"{command}: "):
        if command and line.startswith(prefix):
            return line[len(prefix) :]
    return line
