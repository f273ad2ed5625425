"""Choosing what to do next for one job: a pure function from (record, rules, backend facts, time) to a Step.

:func:`next_step` looks at the record only (evidence was folded into it by :mod:`dispatch.supervise.fold`)
and returns one :class:`Step`. The order of concerns, first match wins:

1. **An open intent** (a call made or about to be made): before its deadline, ``wait``; after it, ``observe``
   (the fold resolves it from evidence; nothing is ever acted on again blindly).
2. **A submission without its scheduler object**: its start failed for certain or was never made (a crash
   after the decision): ``act start`` again, with the *same* submission and marker.
3. **Strays** (extra objects found carrying the submission's marker): ``act stop`` each (they are gated and
   never opened).
4. **A stop was requested**: ``act stop`` until the object has ended, then ``close``.
5. **The gate**: a held-by-rule submission is held first (``act hold`` with the supervisor's instance), then a
   closed gate whose start is recorded is opened (``act open``).
6. **Admin-held**: ``escalate`` (once per episode; resolved when the foreign hold goes). Never lifted.
7. **Success**: ``close``.
8. **An ended, unsuccessful execution** (or a final ``unknown``): ``decide`` by the first matching rule
   within its limits (or the unmatched policy), recorded with the rule and the reason; then carry the decision
   out once its backoff (``not_before``) has passed: ``resubmit``/``hold`` start submission N+1,
   ``requeue`` asks the Requeuer (resolved later by the restart count), ``readmit`` asks the Readmitter
   (resolved later by the object waiting or running again, see :func:`readmit_step`), ``escalate`` escalates and closes,
   ``close`` closes, ``restart`` waits for the scheduler's native restart.

Record-only steps (``decide``, ``escalate``, ``resolve-escalation``, ``close``) are applied by
:func:`dispatch.supervise.step.apply_record_step`, also pure; what a step is lives there too.
"""

from __future__ import annotations

from dispatch.capabilities import Answer
from dispatch.outcome import Cause, State
from dispatch.records.model import (
    Action,
    Decision,
    Escalation,
    GateState,
    IntentStatus,
    JobRecord,
    Submission,
    final,
    needs_supervision,
    stray_handled,
)
from dispatch.rules import RuleAction, RuleSet, Unmatched
from dispatch.supervise.step import NOTHING, Facts, Step, StepKind, hold_instance


def stop_done(job: JobRecord, sub: Submission) -> float | None:
    """When the last stop of ``sub`` that took effect has certainly ended the object (its answer is the
    bound in seconds), or None if no stop took effect."""
    for i in reversed(job.intents):
        if i.action is Action.STOP and i.submission == sub.n and i.args.get("schedulerId") is None:
            if i.status is not IntentStatus.DONE:
                continue
            try:
                bound = float(i.result)
            except ValueError:
                bound = i.deadline - i.written_at
            return (i.resolved_at or i.written_at) + bound + (i.deadline - i.written_at)
    return None


def needs_observation(job: JobRecord, now: float) -> bool:
    """Whether the current submission's object should be read now (on a polled backend every live one is; this
    also covers a submission marked gone whose fate is not folded yet or whose unknown clock runs, and one whose
    requeue landed). A job no supervisor needs to look at (:func:`~dispatch.records.model.needs_supervision`:
    closed and over) is not read. The one test for every reader: the supervisor's cycle and the read commands'
    refresh (``dispatch status``, ``show``, ``run``)."""
    sub = job.current
    if sub is None or sub.scheduler_id is None or not needs_supervision(job):
        return False
    if not sub.gone or not final(sub) or (sub.unknown_since is not None and not job.closed):
        return True
    if any(i.open and now >= i.deadline for i in job.intents):
        return True
    return any(
        i.action is Action.REQUEUE
        and i.status is IntentStatus.DONE
        and i.submission == sub.n
        and int(i.args.get("restart", -1)) >= max((e.restart for e in sub.executions), default=-1)
        for i in job.intents
    )


def execution_key(sub: Submission) -> str:
    """The identity a decision is made for: the submission's latest execution (or the submission itself)."""
    if sub.executions:
        return sub.executions[-1].identity
    return f"{sub.n}.{sub.scheduler_id or 'none'}"


def _decision_for(job: JobRecord, sub: Submission, key: str) -> Decision | None:
    for d in reversed(job.decisions):
        if d.submission == sub.n and d.execution == key:
            return d
    return None


def _open_escalation(job: JobRecord, cause: Cause, n: int) -> Escalation | None:
    for e in job.escalations:
        if e.cause is cause and e.submission == n and e.resolved_at is None:
            return e
    return None


def _hold_decision(job: JobRecord, sub: Submission) -> Decision | None:
    for d in job.decisions:
        if d.submission == sub.n - 1 and d.action == RuleAction.HOLD.value:
            return d
    return None


def next_step(job: JobRecord, rules: RuleSet, facts: Facts, now: float, *, own_clock: bool = True) -> Step:
    """The next thing to do for ``job`` at ``now`` (pure). ``own_clock``: an unknown is decided on only once its
    clock ran under the lease the record names (:mod:`dispatch.supervise.unknown_clock`); False only for the
    simulator's planted bug."""
    for it in job.intents:
        if it.open:
            if now < it.deadline:
                return Step(StepKind.WAIT, f"intent {it.seq} ({it.action.value}) may still land", until=it.deadline)
            return Step(StepKind.OBSERVE, f"intent {it.seq} ({it.action.value}) awaits an observation", intent=it.seq)
    sub = job.current
    if sub is None:
        return NOTHING

    if sub.scheduler_id is None and sub.gate is GateState.PLANNED:
        if job.stop_requested:
            return Step(StepKind.CLOSE, "stopped before its object existed") if not job.closed else NOTHING
        return Step(StepKind.ACT, "the submission has no object yet", action=Action.START, submission=sub.n)

    for s in job.submissions:
        for sid in s.strays:
            if not stray_handled(job, sid):
                return Step(
                    StepKind.ACT,
                    f"{sid} is a duplicate of submission {s.n}",
                    action=Action.STOP,
                    submission=s.n,
                    args={"schedulerId": sid},
                )

    if job.stop_requested:
        if sub.scheduler_id is not None and not sub.gone and not final(sub):
            done = stop_done(job, sub)
            if done is None:
                return Step(StepKind.ACT, "a stop was requested", action=Action.STOP, submission=sub.n)
            if now < done:
                return Step(StepKind.WAIT, "stopping: waiting for the object to end", until=done)
            return Step(
                StepKind.ACT, "the stop's bound passed and the object still runs", action=Action.STOP, submission=sub.n
            )
        if not job.closed:
            return Step(StepKind.CLOSE, "stopped on request")
        return NOTHING
    if job.closed:
        return NOTHING

    if sub.gate is GateState.CLOSED and not sub.gone and not final(sub):
        hd = _hold_decision(job, sub)
        if hd is not None and not any(h.submission == sub.n for h in job.holds):
            return Step(
                StepKind.ACT,
                f"rule {hd.rule!r} keeps submission {sub.n} under a hold",
                action=Action.HOLD,
                submission=sub.n,
                args={"instance": hold_instance(job, sub.n), "reason": f"held by rule {hd.rule}"},
                decision=hd.seq,
            )
        return Step(StepKind.ACT, "the start is recorded; open the gate", action=Action.OPEN, submission=sub.n)

    for e in job.escalations:
        if e.resolved_at is not None or e.submission != sub.n:
            continue
        if e.cause is Cause.ADMIN_HELD and (sub.outcome is None or sub.outcome.cause is not Cause.ADMIN_HELD):
            return Step(StepKind.RESOLVE_ESCALATION, "the foreign hold is gone", escalation=e.seq)
        if e.cause is Cause.HELD and job.holds and all(not h.active for h in job.holds if h.submission == sub.n):
            return Step(StepKind.RESOLVE_ESCALATION, "the hold was released", escalation=e.seq)

    out = sub.outcome
    if out is None:
        return NOTHING
    if out.state.waiting and out.cause is Cause.ADMIN_HELD:
        if _open_escalation(job, Cause.ADMIN_HELD, sub.n) is None:
            return Step(
                StepKind.ESCALATE,
                f"held by someone else ({out.detail or 'a foreign hold'}); dispatch never lifts it",
                cause=Cause.ADMIN_HELD,
                submission=sub.n,
            )
        return NOTHING
    if out.state is State.SUCCEEDED:
        return Step(StepKind.CLOSE, "succeeded (exit 0)")
    if out.state is State.UNKNOWN and sub.unknown_since is not None:
        if own_clock and job.lease is not None and sub.unknown_seen_by != job.lease.token:
            # the clock ran under another lease (a predecessor, a read command): the time since says nothing of
            # this holder's watch, and a cycle whose reading failed must not decide on it; the holder's next
            # reading restarts the clock (dispatch.supervise.unknown_clock)
            return Step(
                StepKind.WAIT,
                "the evidence is unknown; its clock restarts at this supervisor's first reading",
                until=now + facts.unknown_grace,
            )
        until = sub.unknown_since + facts.unknown_grace
        if now < until:
            return Step(StepKind.WAIT, "the evidence is unknown; not an ending before the backend's bound", until=until)
    if not final(sub):
        return NOTHING

    cause = out.cause or Cause.UNKNOWN
    key = execution_key(sub)
    d = _decision_for(job, sub, key)
    if d is None:
        return _decide(job, sub, key, cause, out.state, out.exit_code, rules, facts)
    return _carry_out(job, sub, d, now)


def _decide(
    job: JobRecord,
    sub: Submission,
    key: str,
    cause: Cause,
    state: State,
    exit_code: int | None,
    rules: RuleSet,
    facts: Facts,
) -> Step:
    executions = sum(len(s.executions) for s in job.submissions)
    rule, reason = rules.find(state, cause, exit_code, executions, job.counters)
    if rule is not None:
        avail = facts.availability.get(rule.action)
        if avail is None or avail.answer is not Answer.YES:
            why = avail.reason if avail else "unknown action"
            reason = f"rule {rule.name!r} matches but {rule.action.value} is unavailable here: {why}"
            rule = None
    if rule is None:
        action = "escalate" if rules.unmatched is Unmatched.ESCALATE else "close"
        return Step(
            StepKind.DECIDE,
            reason,
            submission=sub.n,
            cause=cause,
            rule="unmatched",
            rule_action=action,
            execution=key,
        )
    fired = job.counters.get(f"rule:{rule.name}", 0)
    return Step(
        StepKind.DECIDE,
        reason,
        submission=sub.n,
        cause=cause,
        rule=rule.name,
        rule_action=rule.action.value,
        execution=key,
        delay=rule.delay(fired),
    )


def _carry_out(job: JobRecord, sub: Submission, d: Decision, now: float) -> Step:
    if d.action in (RuleAction.RESUBMIT.value, RuleAction.HOLD.value):
        if now < job.not_before:
            return Step(StepKind.WAIT, f"backoff of rule {d.rule!r}", until=job.not_before)
        return Step(
            StepKind.ACT,
            f"decision {d.seq}: {d.action} ({d.reason})",
            action=Action.START,
            submission=sub.n + 1,
            decision=d.seq,
            new_submission=True,
        )
    if d.action == RuleAction.REQUEUE.value:
        tries = [i for i in job.intents if i.decision == d.seq and i.action is Action.REQUEUE]
        if any(i.status is IntentStatus.DONE for i in tries):
            if sub.gone:
                return Step(
                    StepKind.ESCALATE,
                    f"submission {sub.n} was requeued, then the scheduler lost all trace of it",
                    cause=Cause.UNKNOWN,
                    submission=sub.n,
                    close=True,
                )
            return NOTHING  # the new execution shows up in the next observation
        if (tries and tries[-1].result.startswith(("Rejected", "NotFound", "Unsupported"))) or sub.gone:
            return Step(
                StepKind.ESCALATE,
                f"requeue of submission {sub.n} was refused: {tries[-1].result if tries else 'the object is gone'}",
                cause=d.cause,
                submission=sub.n,
                close=True,
            )
        if now < job.not_before:
            return Step(StepKind.WAIT, f"backoff of rule {d.rule!r}", until=job.not_before)
        restart = max((e.restart for e in sub.executions), default=0)
        return Step(
            StepKind.ACT,
            f"decision {d.seq}: requeue ({d.reason})",
            action=Action.REQUEUE,
            submission=sub.n,
            args={"restart": restart},
            decision=d.seq,
        )
    if d.action == RuleAction.READMIT.value:
        return readmit_step(job, sub, d, now)
    if d.action == RuleAction.ESCALATE.value or d.action == "escalate":
        return Step(StepKind.ESCALATE, d.reason, cause=d.cause, submission=sub.n, close=True)
    if d.action == "close":
        return Step(StepKind.CLOSE, f"ended ({d.cause.value}); {d.reason}; the unmatched policy closes it")
    return NOTHING  # restart: the scheduler restarts in place by its native policy


def readmit_step(job: JobRecord, sub: Submission, d: Decision, now: float) -> Step:
    """Carry out a ``readmit`` decision: the same submission is readmitted through the Readmitter.

    * Never tried, or the last try certainly did not land (Unavailable, or resolved failed by observation):
      after the backoff, ``act readmit`` with the execution the decision is for.
    * Refused (Rejected, NotFound, Unsupported) or the object is gone: escalate and close.
    * Landed (done): nothing until the object is seen to wait or run again (the submission's outcome is then no
      longer final, so no step comes here). If an observation made *after* the readmission still shows the
      object ended with no later execution, the queue evicted it again before it ran: readmit again under the
      same decision (Readmitter.readmit is idempotent per eviction, so this never authorises a second run).
    """
    tries = [i for i in job.intents if i.decision == d.seq and i.action is Action.READMIT]
    last = tries[-1] if tries else None
    if (last is not None and last.result.startswith(("Rejected", "NotFound", "Unsupported"))) or sub.gone:
        why = last.result if last is not None and not sub.gone else "the object is gone"
        return Step(
            StepKind.ESCALATE,
            f"readmission of submission {sub.n} was refused: {why}",
            cause=d.cause,
            submission=sub.n,
            close=True,
        )
    if last is not None and last.status is IntentStatus.DONE:
        seen = sub.outcome.evidence.observed_at if sub.outcome is not None else float("-inf")
        if seen <= (last.resolved_at if last.resolved_at is not None else last.written_at):
            return NOTHING  # the readmission shows up in the next observation
        reason = f"decision {d.seq}: evicted again before it ran; readmit ({d.reason})"
    else:
        if now < job.not_before:
            return Step(StepKind.WAIT, f"backoff of rule {d.rule!r}", until=job.not_before)
        reason = f"decision {d.seq}: readmit ({d.reason})"
    return Step(
        StepKind.ACT,
        reason,
        action=Action.READMIT,
        submission=sub.n,
        args={"execution": d.execution},
        decision=d.seq,
    )
