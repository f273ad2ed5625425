"""Outcomes: a coarse :class:`State`, a typed :class:`Cause`, and where the evidence came from.

A job's outcome is never just "failed". The state says where the job is in its life; the cause says why it
is there. Unknown evidence stays :attr:`State.UNKNOWN` / :attr:`Cause.UNKNOWN`: dispatch never reports success
without evidence of success.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum


class State(StrEnum):
    """The coarse life stage of a job or execution. Small on purpose; the :class:`Cause` carries the detail."""

    PENDING = "pending"
    """Known to the scheduler (or about to be), not running yet: behind the start gate, queued, or waiting
    for resources. The cause says which (``gated``, ``queued``, ``no-capacity``)."""

    HELD = "held"
    """Waiting, and kept from starting on purpose: by dispatch's own hold (cause ``held``) or by someone
    else, such as an administrator (cause ``admin-held``)."""

    RUNNING = "running"
    """At least one rank is running (or the scheduler says the job is running). Cause None, or ``suspended``
    when the scheduler has stopped its processes for now and will let them go on (the job keeps its nodes)."""

    SUCCEEDED = "succeeded"
    """Ended, and the scheduler reports a zero exit for the job: cause ``exit`` with exit code 0."""

    FAILED = "failed"
    """Ended without success. The cause says why: preempted, node-lost, out-of-memory, timeout, a
    non-zero ``exit``, launch-failed, cessation, stalled, rejected."""

    CANCELLED = "cancelled"
    """Ended because it was stopped on request: cause ``cancelled``, or ``held`` where a hold ends a running
    execution (Kubeflow)."""

    UNKNOWN = "unknown"
    """The evidence is gone or contradictory (the job left the queue without accounting). Never success."""

    @property
    def ended(self) -> bool:
        """True for the states a job or execution does not leave: succeeded, failed, cancelled."""
        return self in (State.SUCCEEDED, State.FAILED, State.CANCELLED)

    @property
    def waiting(self) -> bool:
        """True for pending and held."""
        return self in (State.PENDING, State.HELD)


class Cause(StrEnum):
    """Why a job is in its state. Every ended execution carries one; waiting states carry one too."""

    GATED = "gated"
    """Waiting behind dispatch's closed start gate: created, not yet opened. Exists so that a job created
    but not yet recorded can never run."""

    QUEUED = "queued"
    """Waiting in the scheduler's queue for its turn (priority, dependencies, limits)."""

    NO_CAPACITY = "no-capacity"
    """Waiting (or refused) because the cluster has no resources that fit, or quota is exhausted. Exists so
    a user can tell "waiting its turn" from "will not fit"."""

    UNRUNNABLE = "unrunnable"
    """Waiting for a reason that will not change by itself: the scheduler says the request exceeds what the
    cluster or a per-job limit can ever give (Slurm's BadConstraints, PartitionConfig, a per-job QOS or
    association limit; a Kueue ClusterQueue whose quota is below the request). Only a change of the request or of
    the cluster's configuration lets it run; ``dispatch run`` stops such a job instead of waiting for ever.
    Distinct from ``no-capacity``, which clears when other jobs end or nodes come back."""

    HELD = "held"
    """Kept from running by a hold dispatch placed (the hold has an instance; only its owner lifts it). On
    Kubeflow a hold on a running execution ends that execution with this cause."""

    ADMIN_HELD = "admin-held"
    """Kept from running by someone other than dispatch (an administrator's hold, another admission gate).
    dispatch never lifts it; the supervisor escalates it for a human."""

    EXIT = "exit"
    """The application ended by itself; the outcome's ``exit_code`` says how (0 is success)."""

    PREEMPTED = "preempted"
    """The scheduler took the resources back for other work. Usually worth a resubmit, and not the job's
    fault."""

    NODE_LOST = "node-lost"
    """A node the job ran on failed or became unreachable (declared within the NodeLossWindow)."""

    OUT_OF_MEMORY = "out-of-memory"
    """A rank exceeded its memory limit and was killed by the kernel or the scheduler. Resubmitting the same
    spec will likely fail again."""

    TIMEOUT = "timeout"
    """The job reached its time limit and was ended by the scheduler."""

    CANCELLED = "cancelled"
    """Stopped on request (dispatch's stop, or a user's cancel on the scheduler)."""

    LAUNCH_FAILED = "launch-failed"
    """The job never started its command, and the node may be to blame: a prologue or node setup failed, the
    scheduler could not launch it there. Distinct from a non-zero exit of the application, and from
    ``not-launchable`` (the job's own request was wrong)."""

    NOT_LAUNCHABLE = "not-launchable"
    """The job never started its command because of its own request, not a node: its program, working
    directory or image does not exist (a typo, a path not made yet, an image never pushed). It blames no node
    (:mod:`dispatch.supervise.blame`); resubmitting the same spec fails again."""

    SUSPENDED = "suspended"
    """Not an ending: a ``running`` execution whose processes the scheduler has stopped for now (an
    administrator's suspend, gang scheduling, a preemption that suspends) and will resume. It keeps its nodes;
    its silence is not judged a stall while it lasts (:mod:`dispatch.supervise.stall`)."""

    CESSATION = "cessation"
    """The nodes or site ended the job on purpose (drain, maintenance, shutdown), as a CessationSignal
    reported. Planned, so rules may resubmit without counting it as a failure."""

    STALLED = "stalled"
    """The execution stopped making progress: ranks that had reported (:func:`dispatch.job.progress`) reported
    nothing for longer than a rule's ``stalledAfter``, so the supervisor ended it (a hang in a collective, a
    deadlock) rather than let it hold its allocation until the time limit. Judged only for executions that
    reported at least once, on clusters where ProgressReporting is yes."""

    REJECTED = "rejected"
    """The scheduler refused to run the job after accepting it (an admission check rejected it, an invalid
    request found later). Resubmitting the same spec will be rejected again."""

    UNKNOWN = "unknown"
    """The evidence does not say, or is gone (purged, no accounting). Exists so that missing evidence is
    never read as success or as a particular failure."""


RUNNING_CAUSES = frozenset({Cause.SUSPENDED})
"""The causes a ``running`` outcome may carry (besides None)."""

WAITING_CAUSES = frozenset(
    {Cause.GATED, Cause.QUEUED, Cause.NO_CAPACITY, Cause.UNRUNNABLE, Cause.HELD, Cause.ADMIN_HELD}
)


@dataclass(frozen=True, slots=True)
class Evidence:
    """Where an observation came from and when: ``source`` names it (``squeue``, ``sacct``, ``watch``,
    ``memory``, ``record``), ``observed_at`` is the clock time it was read."""

    source: str
    observed_at: float

    def age(self, now: float) -> float:
        """Seconds since the observation (never negative)."""
        return max(0.0, now - self.observed_at)


@dataclass(frozen=True, slots=True)
class Outcome:
    """A state, its cause, the exit code where one is known, and the evidence behind them.

    ``detail`` keeps the scheduler's own words (``NODE_FAIL``, ``OOMKilled``) for humans; code must use
    ``state`` and ``cause``.
    """

    state: State
    cause: Cause | None
    evidence: Evidence
    exit_code: int | None = None
    signal: int | None = None
    detail: str = ""

    def __post_init__(self) -> None:
        if self.state.ended and self.cause is None:
            raise ValueError(f"an ended outcome ({self.state}) needs a cause")
        if self.state is State.SUCCEEDED and (self.cause is not Cause.EXIT or self.exit_code != 0):
            raise ValueError("success needs evidence: cause exit with exit code 0")
        if self.state is State.UNKNOWN and self.cause is None:
            object.__setattr__(self, "cause", Cause.UNKNOWN)

    @property
    def ended(self) -> bool:
        return self.state.ended

    def age(self, now: float) -> float:
        return self.evidence.age(now)

    def with_evidence(self, evidence: Evidence) -> Outcome:
        return replace(self, evidence=evidence)

    def to_json(self) -> dict[str, object]:
        return {
            "state": self.state.value,
            "cause": self.cause.value if self.cause else None,
            "exitCode": self.exit_code,
            "signal": self.signal,
            "detail": self.detail,
            "source": self.evidence.source,
            "observedAt": self.evidence.observed_at,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Outcome:
        cause = data.get("cause")
        exit_code = data.get("exitCode")
        signal = data.get("signal")
        observed = data.get("observedAt")
        assert isinstance(observed, int | float) and math.isfinite(observed)
        return cls(
            state=State(str(data["state"])),
            cause=Cause(str(cause)) if cause is not None else None,
            evidence=Evidence(str(data.get("source", "")), float(observed)),
            exit_code=int(exit_code) if isinstance(exit_code, int) else None,
            signal=int(signal) if isinstance(signal, int) else None,
            detail=str(data.get("detail") or ""),
        )


def succeeded(evidence: Evidence, detail: str = "") -> Outcome:
    return Outcome(State.SUCCEEDED, Cause.EXIT, evidence, exit_code=0, detail=detail)


def unknown(evidence: Evidence, detail: str = "") -> Outcome:
    return Outcome(State.UNKNOWN, Cause.UNKNOWN, evidence, detail=detail)
