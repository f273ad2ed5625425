"""The supervisor's planted bugs, for proving that the simulator catches them.

:class:`PlantedSupervisor` is the product's :class:`~dispatch.supervise.Supervisor` with some of these bugs
planted: each overrides one of the product's own steps (a lease check, a fence, the fold, the stall judgement,
a call's three parts: its intent written, the call made, its answer recorded) and breaks one of its rules, so the
mutation tests (``tests/sim/test_mutations.py``, ``python -m dispatch.sim --mutations``) can show the
simulator's invariants find each bug within a bounded number of seeds. An override wraps the product's step, or
calls the product's steps with other arguments or in another order; it copies none of their code, so a planted
bug cannot drift from the code it breaks. The product code has no hook for them (``STORE_IGNORES_FENCE`` also
makes the simulator's record store skip its token check). :data:`TARGETS` names the invariant each one breaks.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Collection
from enum import StrEnum
from typing import Any

from dispatch.errors import DispatchError, Unavailable
from dispatch.outcome import Cause, Outcome, State
from dispatch.records.model import Action, Event, GateState, Intent, IntentStatus, JobRecord
from dispatch.rules import RuleSet
from dispatch.spi import JobEvidence, Unanswered
from dispatch.supervise import Supervisor, stall
from dispatch.supervise.observation import Observation
from dispatch.supervise.report import CycleReport
from dispatch.supervise.step import Step, StepKind


class Mutation(StrEnum):
    ACT_BEFORE_INTENT = "act-before-intent"
    """Make the backend call first and write the intent (with its answer) afterwards: a crash in between leaves
    a scheduler object the record knows nothing about."""

    SKIP_FENCE = "skip-fence"
    """Skip the fence: write without the fencing token and without checking the lease before a write. A
    supervisor overtaken in the middle of a cycle re-reads after its lost compare-and-set and keeps writing a
    job another supervisor now owns."""

    RESUBMIT_ON_UNKNOWN = "resubmit-on-unknown"
    """Take an unknown outcome (OutcomeUnknown from a start or requeue) as a failure and act again at once,
    instead of waiting out the CallBound and observing: the call may have landed, so it lands twice."""

    UNKNOWN_IS_AN_ENDING = "unknown-is-an-ending"
    """Take the first ``unknown`` observation of a live job as its ending (no wait for the backend's bound): a
    job whose queue entry vanished for a moment is escalated and closed while it still runs."""

    STORE_IGNORES_FENCE = "store-ignores-fence"
    """The record store forgets to compare the fencing token, and the supervisor trusts it (no lease check of
    its own before a write): an overtaken supervisor's write lands on a job another one now owns."""

    SUCCESS_ON_VANISH = "success-on-vanish"
    """Evidence that vanished (or reads unknown) is folded as success, exit 0: a job is recorded succeeded
    that never was."""

    CAUSE_MIXUP = "cause-mixup"
    """A preempted execution is recorded with cause node-lost: the record disagrees with the scheduler."""

    OPEN_BEFORE_RECORD = "open-before-record"
    """The start gate is opened right after the start returns, before the scheduler id is recorded: a crash in
    between leaves a running object the record does not name."""

    RELEASE_OTHERS_HOLDS = "release-others-holds"
    """The supervisor lifts holds other people placed through dispatch (a user's hold, by its instance)."""

    NOT_RUNNING_IS_EVICTED = "not-running-is-evicted"
    """A submission not seen running once its gate is open (waiting in the queue, held, or read ``unknown``) is
    taken to have been evicted, and its eviction rule resubmits the job without the old object being stopped
    or seen to end: when the old one runs again, two executions of the job run at once."""

    STALL_BEFORE_BOUND = "stall-before-bound"
    """An execution is judged stalled after half its ``stalledAfter`` bound of silence (the simulated jobs' is
    20 s): a run that only paused (a checkpoint, an evaluation) is ended as hung."""

    STALL_WHILE_SUSPENDED = "stall-while-suspended"
    """The stall judgement ignores suspensions (``stall.judge(..., suspensions=False)``): a job an admin
    suspended reads running and silent, and is ended as hung."""

    DECIDES_ON_ANOTHERS_CLOCK = "decides-on-anothers-clock"
    """A supervisor decides on an unknown whose clock ran under another lease (a predecessor's, a read command's)
    in a cycle whose own reading failed: two short spells of unknown, with nobody watching between them, taken
    for one long one (``next_step(..., own_clock=False)``, through :attr:`Supervisor.own_unknown_clock`)."""
    RETRY_AS_NEW_SUBMISSION = "retry-as-new-submission"
    """A start that failed (refused, or found not to have landed) is made again as a new submission with a new
    marker instead of the same one: the job gains a submission no decision asked for."""

    LEASE_BY_OWN_CLOCK = "lease-by-own-clock"
    """Leases are judged by the supervisor's own clock, not the store's (the product's ``lease_clock`` seam left
    out): with clocks set off (the simulator's network faults), a supervisor ahead takes leases the store still
    holds live, and one behind acts on leases the store has let expire."""

    ACTS_ON_LAPSED_LEASE = "acts-on-lapsed-lease"
    """A supervisor whose intent write hung past its lease (cut off from the store, then delivered late) makes
    the call anyway: no check of the lease, or of the time since the intent was written, before the call."""


TARGETS: dict[Mutation, str] = {
    Mutation.ACT_BEFORE_INTENT: "no-object-without-record",
    Mutation.SKIP_FENCE: "fenced-writes",
    Mutation.RESUBMIT_ON_UNKNOWN: "no-object-without-record",
    Mutation.UNKNOWN_IS_AN_ENDING: "unknown-is-not-an-ending",
    Mutation.STORE_IGNORES_FENCE: "fenced-writes",
    Mutation.SUCCESS_ON_VANISH: "no-success-without-evidence",
    Mutation.CAUSE_MIXUP: "record-matches-truth",
    Mutation.OPEN_BEFORE_RECORD: "gate-opened-only-when-recorded",
    Mutation.RELEASE_OTHERS_HOLDS: "hold-lifted-by-owner",
    Mutation.NOT_RUNNING_IS_EVICTED: "one-live-execution",
    Mutation.RETRY_AS_NEW_SUBMISSION: "no-action-twice",
    Mutation.STALL_BEFORE_BOUND: "stall-not-before-bound",
    Mutation.STALL_WHILE_SUSPENDED: "stall-only-while-running",
    Mutation.DECIDES_ON_ANOTHERS_CLOCK: "unknown-is-not-an-ending",
    Mutation.LEASE_BY_OWN_CLOCK: "fenced-writes",
    Mutation.ACTS_ON_LAPSED_LEASE: "acts-under-lease",
}
"""The invariant each planted bug breaks (the one the mutation check expects to catch it)."""

NETWORK = frozenset({Mutation.LEASE_BY_OWN_CLOCK, Mutation.ACTS_ON_LAPSED_LEASE})
"""The planted bugs of the safeguards against faults from the network: a run with one of them has those faults on
(``Config.network``)."""

BY_CONSTRUCTION: dict[str, str] = {
    "ended-has-cause": (
        "an Outcome in an ended state cannot be built without a cause (Outcome raises ValueError), and records "
        "are rebuilt through Outcome on every read, so no supervisor bug can write a record that breaks it"
    ),
}
"""Invariants no planted bug can break, and why: the types hold them, so the simulator's check of them is a
guard against a change to those types, not a test of the supervisor."""


PLANTED_EARLY = 10.0
"""How early Mutation.STALL_BEFORE_BOUND judges a stall, in seconds."""

_FOLDED = frozenset({Mutation.SUCCESS_ON_VANISH, Mutation.CAUSE_MIXUP, Mutation.NOT_RUNNING_IS_EVICTED})
"""The planted bugs applied to a folded record."""


def _sooner(rules: RuleSet) -> RuleSet:
    """``rules`` with every ``stalledAfter`` PLANTED_EARLY seconds shorter."""
    shorter = tuple(
        r if r.stalled_after is None else dataclasses.replace(r, stalled_after=r.stalled_after - PLANTED_EARLY)
        for r in rules.rules
    )
    return dataclasses.replace(rules, rules=shorter)


class PlantedSupervisor(Supervisor):
    """The product's supervisor with the planted bugs ``mutations`` (the simulator's mutation check only).

    Takes the product's arguments; with any bug planted every job goes the whole way each cycle (no steady path),
    so the bug is met wherever it can be."""

    def __init__(self, *args: Any, mutations: Collection[Mutation], **kwargs: Any) -> None:
        if Mutation.LEASE_BY_OWN_CLOCK in mutations:
            kwargs["lease_clock"] = None  # planted: the product's seam left out, leases judged by its own clock
        super().__init__(*args, **kwargs)
        self.mutations = frozenset(Mutation(m) for m in mutations)
        if self.mutations:
            self._fast = False
        if Mutation.DECIDES_ON_ANOTHERS_CLOCK in self.mutations:
            self.own_unknown_clock = False  # planted: the product's seam, turned off
        if Mutation.UNKNOWN_IS_AN_ENDING in self.mutations:
            self.facts = dataclasses.replace(self.facts, unknown_grace=0.0)  # planted: no wait on an unknown

    def _judge_stall(self, job: JobRecord, evidence: JobEvidence | Unanswered | None) -> Step | None:
        if Mutation.STALL_WHILE_SUSPENDED in self.mutations:
            # planted: the judge's own seam, turned off (a suspended job's silence counts)
            return stall.judge(job, evidence, self.rules_for, suspensions=False)
        if Mutation.STALL_BEFORE_BOUND in self.mutations:
            # planted: judged PLANTED_EARLY seconds before the bound (the rules the judge reads, made shorter)
            return stall.judge(job, evidence, lambda j: _sooner(self.rules_for(j)))
        return super()._judge_stall(job, evidence)

    def _check(self, job: JobRecord) -> None:
        if Mutation.SKIP_FENCE in self.mutations or Mutation.STORE_IGNORES_FENCE in self.mutations:
            return  # planted: no lease check before a write
        super()._check(job)

    def _fence(self, job: JobRecord) -> int | None:
        return None if Mutation.SKIP_FENCE in self.mutations else super()._fence(job)

    def _fold(self, job: JobRecord, obs: Observation, refresh: float) -> tuple[JobRecord, list[Event]]:
        job, events = super()._fold(job, obs, refresh)
        return (self._misfold(job) if self.mutations & _FOLDED else job), events

    def _misfold(self, job: JobRecord) -> JobRecord:
        """SUCCESS_ON_VANISH, CAUSE_MIXUP and NOT_RUNNING_IS_EVICTED, applied to a folded record."""
        cur = job.current
        if cur is None:
            return job
        new = job.copy()
        sub = new.submission(cur.n)
        changed = False
        if Mutation.SUCCESS_ON_VANISH in self.mutations and sub.outcome and sub.outcome.state is State.UNKNOWN:
            sub.outcome = Outcome(State.SUCCEEDED, Cause.EXIT, sub.outcome.evidence, exit_code=0)
            changed = True
        if Mutation.CAUSE_MIXUP in self.mutations:
            for ex in sub.executions:
                if ex.outcome.cause is Cause.PREEMPTED:
                    ex.outcome = dataclasses.replace(ex.outcome, cause=Cause.NODE_LOST)
                    changed = True
        out = sub.outcome
        if (
            Mutation.NOT_RUNNING_IS_EVICTED in self.mutations
            and out is not None
            and (out.state is State.UNKNOWN or (out.state.waiting and sub.gate is GateState.OPEN))
            and not sub.gone
        ):
            sub.outcome = Outcome(State.FAILED, Cause.NODE_LOST, out.evidence, detail="not seen running: evicted")
            sub.unknown_since = None
            changed = True
        return new if changed else job

    def _steps(self, job: JobRecord, report: CycleReport) -> JobRecord:
        if Mutation.RELEASE_OTHERS_HOLDS in self.mutations:
            for h in job.active_holds():  # planted: lifts a hold someone else placed
                if h.owner != self.owner and job.current is not None and job.current.scheduler_id is not None:
                    args = {"instance": h.instance}
                    release = Step(StepKind.ACT, "planted", action=Action.RELEASE, submission=h.submission, args=args)
                    job = self._act(job, release, report)
                    break
        return super()._steps(job, report)

    def _act(self, job: JobRecord, step: Step, report: CycleReport) -> JobRecord:
        if Mutation.RETRY_AS_NEW_SUBMISSION in self.mutations:
            step = _retry_as_new(job, step)
        return super()._act(job, step, report)

    def _call(self, base: JobRecord, step: Step, report: CycleReport) -> JobRecord:
        if Mutation.ACT_BEFORE_INTENT not in self.mutations:
            return super()._call(base, step, report)
        # planted: the product's own three parts in the wrong order: the call is made (on an intent not yet
        # written) before its intent is written
        assert step.action is not None and step.submission is not None
        provisional, _ = self.actor.add_intent(base.copy(), step.action, step.submission, args=step.args)
        status, answer, error = self._attempt(base, provisional, report)
        written, intent = self._announce(base, step, report)
        return self._answered(written, intent, status, answer, error, report)

    def _attempt(
        self, job: JobRecord, intent: Intent, report: CycleReport
    ) -> tuple[IntentStatus, Any, DispatchError | None]:
        if Mutation.ACTS_ON_LAPSED_LEASE in self.mutations:
            report.actions += 1  # planted: the call made with no check of the lease or of the intent's age
            status, answer, error = self.actor.attempt(job, intent)
        else:
            status, answer, error = super()._attempt(job, intent, report)
        if (
            Mutation.OPEN_BEFORE_RECORD in self.mutations
            and intent.action is Action.START
            and status is IntentStatus.DONE
        ):
            with contextlib.suppress(DispatchError):
                self.backend.open(str(answer))  # planted: opened before the scheduler id is recorded
        if (
            Mutation.RESUBMIT_ON_UNKNOWN in self.mutations
            and status is IntentStatus.UNKNOWN
            and intent.action in (Action.START, Action.REQUEUE)
        ):
            # planted: the unknown outcome read as a call that certainly did not land, to be made again at once
            return IntentStatus.FAILED, None, Unavailable(f"taken as failed: {error}")
        return status, answer, error


def _retry_as_new(job: JobRecord, step: Step) -> Step:
    """RETRY_AS_NEW_SUBMISSION: a start that failed is made again as a new submission."""
    if step.action is not Action.START or step.new_submission or step.submission is None:
        return step
    failed = any(
        i.action is Action.START and i.submission == step.submission and i.status is IntentStatus.FAILED
        for i in job.intents
    )
    return dataclasses.replace(step, submission=step.submission + 1, new_submission=True) if failed else step


__all__ = ["BY_CONSTRUCTION", "NETWORK", "TARGETS", "Mutation", "PlantedSupervisor"]
