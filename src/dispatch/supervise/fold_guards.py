"""The fold's cheap guards: whether a reading changes a record at all, answered without copying the record.

:func:`worth_folding` and :func:`unanswered_changes` are the guards :func:`~dispatch.supervise.fold.fold` runs
before it copies a record: when they say no, the fold returns the record itself and no event. :class:`Settled`
is the same answer for a settled submission, kept apart from the record so that the supervisor's steady path
can ask it without reading the record's object graph again.
"""

from __future__ import annotations

from dataclasses import dataclass

from dispatch.outcome import Cause, State
from dispatch.records.model import GateState, JobRecord, Submission
from dispatch.spi import Cessation, Gate, JobEvidence, Unanswered
from dispatch.supervise.fold_evidence import shown
from dispatch.supervise.unknown_clock import restarts


def worth_folding(
    job: JobRecord,
    sub: Submission,
    evidence: JobEvidence | None,
    now: float,
    cessation: Cessation | None,
    refresh: float,
) -> bool:
    """Cheap check: does this observation change anything (or is the record's evidence due a refresh)?"""
    if sub.scheduler_id is None:
        return False
    if evidence is None:
        settled = sub.outcome is not None and (sub.outcome.ended or sub.outcome.state is State.UNKNOWN)
        return (
            not sub.gone
            or not settled
            or any(i.open and i.submission == sub.n and now >= i.deadline for i in job.intents)
        )
    if evidence.scheduler_id != sub.scheduler_id:
        return False
    if sub.gone or cessation is not None:
        return True
    if sub.unknown_since is not None and evidence.outcome.state is not State.UNKNOWN:
        return True  # known again (after an unknown or unanswered reading): stop the clock
    if job.intents and any(i.open and i.submission == sub.n and now >= i.deadline for i in job.intents):
        return True
    out = sub.outcome
    ev = shown(evidence)
    if out is None or out.state != ev.state or out.cause != ev.cause or out.exit_code != ev.exit_code:
        return True
    if ev.evidence.observed_at < out.evidence.observed_at:
        return False
    if (sub.gate is GateState.OPEN) != (evidence.gate is Gate.OPEN):
        return True
    if len(evidence.executions) != len(sub.executions):
        return True
    for er, ee in zip(sub.executions, evidence.executions, strict=False):
        if er.identity != ee.identity or er.outcome.state != ee.outcome.state or er.ended_at != ee.ended_at:
            return True
    return ev.evidence.observed_at - out.evidence.observed_at >= refresh


def unanswered_changes(sub: Submission, unanswered: Unanswered, grace: float, lease: int | None) -> bool:
    """Whether an Unanswered reading (made under the supervisor lease ``lease``, or None) changes ``sub``: it
    starts the unknown clock (or restarts it: :mod:`dispatch.supervise.unknown_clock`), or outlasts the
    grace."""
    if sub.scheduler_id is None or unanswered.scheduler_id != sub.scheduler_id:
        return False
    out = sub.outcome
    if out is not None and out.ended:
        return False  # an end seen stays
    if restarts(sub, lease):
        return True
    if out is not None and out.state is State.UNKNOWN:
        return False  # an unknown already runs its clock
    since = sub.unknown_since
    return since is None or unanswered.observed_at - since >= grace


@dataclass(frozen=True, slots=True)
class Settled:
    """What a settled submission's record shows, kept apart from the record so that a supervisor can tell
    whether new evidence changes it without reading the record's object graph again.

    A submission is settled when nothing but the evidence itself can make :func:`~dispatch.supervise.fold.fold`
    change it: it has a scheduler id, an outcome, no ``unknown_since`` clock running, is not ``gone``, has no
    strays and its job has no open intent (so no deadline can pass). For such a submission, :meth:`unchanged_by`
    is exactly the "nothing worth folding" answer of the fold for the same evidence, with no cessation and no
    ``found`` (tests/supervise/test_fold.py checks the two against each other)."""

    scheduler_id: str
    state: State
    cause: Cause | None
    exit_code: int | None
    gate_open: bool
    executions: tuple[tuple[str, State, float | None], ...]
    observed_at: float
    refresh: float

    @classmethod
    def of(cls, job: JobRecord, refresh: float) -> Settled | None:
        """The settled view of ``job``'s current submission, or None if it is not settled."""
        sub = job.current
        if (
            sub is None
            or sub.scheduler_id is None
            or sub.outcome is None
            or sub.gone
            or sub.strays
            or sub.unknown_since is not None
            or any(i.open for i in job.intents)
        ):
            return None
        out = sub.outcome
        return cls(
            sub.scheduler_id,
            out.state,
            out.cause,
            out.exit_code,
            sub.gate is GateState.OPEN,
            tuple((e.identity, e.outcome.state, e.ended_at) for e in sub.executions),
            out.evidence.observed_at,
            refresh,
        )

    def unchanged_by(self, evidence: JobEvidence | Unanswered | None) -> bool:
        """Whether folding ``evidence`` (read of this submission's object) would change nothing."""
        if not isinstance(evidence, JobEvidence) or evidence.scheduler_id != self.scheduler_id:
            return False
        ev = shown(evidence)
        if ev.state is not self.state or ev.cause is not self.cause or ev.exit_code != self.exit_code:
            return False
        at = ev.evidence.observed_at
        if at < self.observed_at:
            return True  # older than what the record holds: never folded
        if (evidence.gate is Gate.OPEN) != self.gate_open or len(evidence.executions) != len(self.executions):
            return False
        for e, (identity, state, ended_at) in zip(evidence.executions, self.executions, strict=True):
            if e.identity != identity or e.outcome.state is not state or e.ended_at != ended_at:
                return False
        return at - self.observed_at < self.refresh
