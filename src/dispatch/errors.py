"""The one exception hierarchy of dispatch.

Every error dispatch raises on purpose derives from :class:`DispatchError`. Each class says what the caller
should do about it. Adapters map their scheduler's answers to these classes (each adapter documents its table),
and the supervisor records each one differently, so choosing the right class is part of an adapter's contract.
"""

from __future__ import annotations


class DispatchError(Exception):
    """Base of every error dispatch raises on purpose.

    ``job_id`` names the job the error is about when dispatch recorded one before failing (an
    ``Operator.submit`` whose start was refused or whose outcome is unknown); ``None`` otherwise.
    """

    job_id: str | None = None


class Unsupported(DispatchError):
    """This cluster or backend cannot do this at all (an image on Slurm, ``stderr`` on Kubeflow).

    What to do: nothing will change by retrying; change the request or choose another cluster. Raised before
    any scheduler call when it can be known up front (extensions, capabilities).
    """


class ReadOnly(DispatchError):
    """The cluster was opened read-only (or observe-only) and this call writes.

    What to do: open the cluster writable, with a record store. Raised before any command runs.
    """


class Rejected(DispatchError):
    """The scheduler refused a valid request because of the job's current state.

    Example: holding a Slurm job that is already running. What to do: re-observe the job; the request may
    make sense again later, or never. Nothing changed on the scheduler.
    """


class NotFound(DispatchError):
    """No such job: unknown id, or the job left the scheduler and no history remains.

    What to do: treat the job's fate as unknown (never as success). Recorded evidence, if any, stays.
    """


class OutcomeUnknown(DispatchError):
    """The call may or may not have taken effect (a transport cut mid-call, a crash between two steps).

    What to do: never repeat a non-idempotent call blindly. Wait out the backend's CallBound, then observe
    (find the object by its marker) to learn what happened. The supervisor does exactly this.
    """


class Unavailable(DispatchError):
    """The scheduler could not be reached, or answered nothing usable, and the call had no effect.

    A failed poll is not a job failure: what to do is keep the last known state, with its evidence age, and
    try again later. Writes that raise this are known not to have landed (otherwise it is OutcomeUnknown).
    """


class Conflict(DispatchError):
    """A record write lost a race: the job's version changed since it was read, or the writer's lease is gone.

    What to do: re-read the record and decide again. Of two writers that read the same version exactly one
    wins; the loser gets this and must not act on what it meant to write.
    """


class DeclarationError(DispatchError):
    """A backend's declarations break the core's rules (for example a zero CallBound with a Holder).

    What to do: fix the adapter, or hand out its reduced backend. This is a programming error in an adapter.
    """


class _PathError(DispatchError, ValueError):
    """An error about one named place in some input; ``path`` is that place, dotted."""

    label = "input"

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{self.label} {path!r}: {message}" if path else message)


class ConfigError(_PathError):
    """Settings, a rules file or a config file is wrong. ``path`` is the dotted key (``ssh.host``).

    What to do: correct the named key. Nothing ran.
    """

    label = "setting"


class SpecError(_PathError):
    """A JobSpec (or one of its extensions) is invalid. ``path`` names the field (``extensions[0].ref``).

    What to do: correct the named field. Nothing was recorded and nothing ran.
    """

    label = "job spec field"


__all__ = [
    "ConfigError",
    "Conflict",
    "DeclarationError",
    "DispatchError",
    "NotFound",
    "OutcomeUnknown",
    "ReadOnly",
    "Rejected",
    "SpecError",
    "Unavailable",
    "Unsupported",
]
