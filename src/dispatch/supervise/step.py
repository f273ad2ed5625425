"""What the supervisor does next for one job, as data: :class:`Step` (chosen by
:func:`dispatch.supervise.next.next_step`), the backend :class:`Facts` it is chosen with, and
:func:`apply_record_step`, which applies the steps that only change the record (decide, escalate,
resolve-escalation, close). Pure: no backend call, no store write."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from dispatch.capabilities import Capabilities, CapabilityAnswer
from dispatch.declarations import Declarations
from dispatch.outcome import Cause
from dispatch.records.model import Action, Decision, Escalation, Event, JobRecord
from dispatch.rules import RuleAction, action_availability
from dispatch.spi import interfaces_of


def unknown_grace(decl: Declarations) -> float:
    """How long evidence of a live submission must stay ``unknown`` before it counts as an ending: the
    NodeLossWindow, the longest the scheduler takes to declare a lost node and end its jobs. A job that is
    only unreachable (its node silent, the queue or accounting briefly without it) shows known evidence again
    within that window, or is ended by the scheduler with a cause; an unknown that outlasts it is an ending.
    (PolledLoss bounds the poll interval instead, so the supervisor sees an unknown several times first.)"""
    return decl.node_loss_window


@dataclass(frozen=True)
class Facts:
    """What next_step needs to know about the backend: its capabilities, optional interfaces and declarations,
    and (derived) whether each rule action can be carried out here."""

    capabilities: Capabilities
    interfaces: frozenset[str]
    declarations: Declarations
    availability: Mapping[RuleAction, CapabilityAnswer]
    unknown_grace: float = 0.0
    """How long a live submission's evidence must stay unknown before it is an ending (:func:`unknown_grace`)."""

    @classmethod
    def of(cls, backend: Any) -> Facts:
        caps = backend.capabilities()
        decl = backend.declarations()
        return cls(
            caps,
            frozenset(interfaces_of(backend)),
            decl,
            {a: action_availability(a, backend, caps) for a in RuleAction},
            unknown_grace(decl),
        )


class StepKind(StrEnum):
    NOTHING = "nothing"
    WAIT = "wait"
    OBSERVE = "observe"
    ACT = "act"
    DECIDE = "decide"
    ESCALATE = "escalate"
    RESOLVE_ESCALATION = "resolve-escalation"
    CLOSE = "close"


@dataclass(frozen=True)
class Step:
    """One thing to do for a job. ``reason`` is always set (it is recorded or reported)."""

    kind: StepKind
    reason: str
    until: float | None = None
    """``wait``: when something may change by the passage of time alone."""
    action: Action | None = None
    """``act``: the backend call to make under an intent."""
    submission: int | None = None
    args: dict[str, Any] = field(default_factory=dict)
    decision: int | None = None
    """``act``: the decision the call carries out."""
    new_submission: bool = False
    """``act start``: create submission ``submission`` (N+1) in the same write as the intent."""
    intent: int | None = None
    """``observe``: the intent waiting for an observation."""
    cause: Cause | None = None
    rule: str = ""
    rule_action: str = ""
    execution: str = ""
    delay: float = 0.0
    """``decide``: the backoff before the decision is carried out."""
    close: bool = False
    """``escalate``: whether the job is closed too."""
    escalation: int | None = None


NOTHING = Step(StepKind.NOTHING, "nothing to do")


def hold_instance(job: JobRecord, n: int) -> str:
    """The instance of the hold the supervisor places on submission ``n`` (deterministic, so a retried or
    taken-over hold is the same hold)."""
    return f"sv-{job.id}-{n}"


def apply_record_step(job: JobRecord, step: Step, now: float, by: str) -> tuple[JobRecord, list[Event]]:
    """Apply a record-only step (decide, escalate, resolve-escalation, close) to a copy of ``job`` (pure)."""
    new = job.copy()
    new.updated_at = now
    events: list[Event] = []
    if step.kind is StepKind.DECIDE:
        assert step.submission is not None and step.cause is not None
        d = Decision(
            seq=new.next_seq(new.decisions),
            at=now,
            submission=step.submission,
            execution=step.execution,
            cause=step.cause,
            action=step.rule_action,
            rule=step.rule,
            reason=step.reason,
            by=by,
        )
        new.decisions.append(d)
        if step.rule != "unmatched":
            for key in ("total", f"cause:{step.cause.value}", f"rule:{step.rule}", step.rule_action):
                new.counters[key] = new.counters.get(key, 0) + 1
            new.not_before = now + step.delay
        events.append(Event(job.id, now, "decided", d.to_json()))
        if step.rule_action == RuleAction.HOLD.value:
            e = Escalation(
                new.next_seq(new.escalations),
                now,
                Cause.HELD,
                f"rule {step.rule!r}: submission {step.submission + 1} is kept under hold "
                f"{hold_instance(new, step.submission + 1)}; release it to run it",
                submission=step.submission + 1,
            )
            new.escalations.append(e)
            events.append(Event(job.id, now, "escalated", e.to_json()))
    elif step.kind is StepKind.ESCALATE:
        e = Escalation(
            new.next_seq(new.escalations), now, step.cause or Cause.UNKNOWN, step.reason, submission=step.submission
        )
        new.escalations.append(e)
        if step.close:
            new.closed = True
        events.append(Event(job.id, now, "escalated", {**e.to_json(), "closed": step.close}))
    elif step.kind is StepKind.RESOLVE_ESCALATION:
        for e in new.escalations:
            if e.seq == step.escalation:
                e.resolved_at = now
        events.append(Event(job.id, now, "escalation-resolved", {"seq": step.escalation, "reason": step.reason}))
    elif step.kind is StepKind.CLOSE:
        new.closed = True
        events.append(Event(job.id, now, "closed", {"reason": step.reason, "by": by}))
    else:
        raise ValueError(f"{step.kind} is not a record-only step")
    return new, events
