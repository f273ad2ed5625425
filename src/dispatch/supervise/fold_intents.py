"""Resolving open intents by observation, as the fold does: never by acting again, only by what a reading shows.

An intent is resolved only by an observation made at or after its deadline (the caller passes the time the
reading was made). ``open`` is resolved by the gate, ``hold``/``release`` by the hold instances present, ``stop``
by the object having ended (or a stray's own ending, :func:`fold_stray`), ``requeue`` by whether the restart
count moved, ``readmit`` by whether the object waits or runs again (:func:`readmitted`), and ``start`` by
``found``, the result of finding the submission's marker (:func:`resolve_found`). Every function here mutates
the record it is given (a copy the fold made) and returns the events to append, except :func:`fold_stray`, which
copies the record itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from dispatch.outcome import Cause, Evidence, Outcome, State
from dispatch.records.model import (
    Action,
    Event,
    GateState,
    HoldRecord,
    Intent,
    IntentStatus,
    JobRecord,
    Submission,
    stops_the_job,
)
from dispatch.spi import Found, Gate, JobEvidence, Unanswered


def start_intent(job: JobRecord, n: int) -> Intent | None:
    """The open ``start`` intent of submission ``n``, if any."""
    for it in job.intents:
        if it.open and it.action is Action.START and it.submission == n:
            return it
    return None


def resolve(job: JobRecord, it: Intent, status: IntentStatus, result: str, now: float) -> Event:
    """Mark ``it`` resolved by observation with ``status`` and ``result``; the ``resolved`` event to append."""
    it.status = status
    it.result = f"by observation: {result}"
    it.resolved_at = now
    return Event(
        job.id,
        now,
        "resolved",
        {"seq": it.seq, "action": it.action.value, "status": status.value, "result": it.result},
    )


def resolve_found(job: JobRecord, sub: Submission, found: Sequence[Found], now: float, at: float) -> list[Event]:
    """Resolve ``sub``'s open ``start`` by ``found`` (read at ``at``): one object carrying the marker is
    recorded; more than one keeps the earliest and lists the others as strays (they are gated and will be
    stopped); none means the start did not land (``failed``: it may be made again with the same marker)."""
    it = start_intent(job, sub.n)
    if it is None or at < it.deadline:
        return []
    mine = sorted((f for f in found if f.marker == sub.marker), key=lambda f: (f.created_at or 0.0, f.scheduler_id))
    if not mine:
        return [resolve(job, it, IntentStatus.FAILED, f"no object carries marker {sub.marker}", now)]
    keep = sub.scheduler_id or mine[0].scheduler_id
    sub.scheduler_id = keep
    if sub.gate is GateState.PLANNED:
        sub.gate = GateState.CLOSED
        sub.outcome = Outcome(State.PENDING, Cause.GATED, Evidence("find", now))
    for f in mine:
        if f.scheduler_id != keep and f.scheduler_id not in sub.strays:
            sub.strays.append(f.scheduler_id)
    events = [resolve(job, it, IntentStatus.DONE, f"found {keep} by marker", now)]
    if sub.strays:
        events.append(Event(job.id, now, "strays", {"submission": sub.n, "strays": list(sub.strays)}))
    return events


def resolve_by_evidence(job: JobRecord, sub: Submission, evidence: JobEvidence, now: float) -> list[Event]:
    """Resolve ``sub``'s open intents (all but ``start``, and but a stray's ``stop``) whose deadline the
    evidence's own time has reached, by what the evidence shows."""
    events: list[Event] = []
    seen = evidence.outcome.evidence.observed_at
    for it in job.intents:
        if not it.open or it.submission != sub.n or seen < it.deadline or it.action is Action.START:
            continue
        if it.args.get("schedulerId") not in (None, sub.scheduler_id):
            continue  # a stray's stop: resolved from the stray's own evidence
        if it.action is Action.OPEN:
            ok = evidence.gate is Gate.OPEN
            status = IntentStatus.DONE if ok else IntentStatus.FAILED
            events.append(resolve(job, it, status, f"gate {evidence.gate}", now))
        elif it.action is Action.HOLD:
            instance = str(it.args.get("instance"))
            ok = instance in evidence.holds
            if ok and not any(h.instance == instance for h in job.holds):
                job.holds.append(HoldRecord(instance, it.owner, sub.n, now, str(it.args.get("reason", ""))))
            events.append(
                resolve(job, it, IntentStatus.DONE if ok else IntentStatus.FAILED, f"hold {instance} present={ok}", now)
            )
        elif it.action is Action.RELEASE:
            instance = str(it.args.get("instance"))
            ok = instance not in evidence.holds
            if ok:
                for h in job.holds:
                    if h.instance == instance and h.active:
                        h.released_at = now
            events.append(
                resolve(job, it, IntentStatus.DONE if ok else IntentStatus.FAILED, f"hold {instance} lifted={ok}", now)
            )
        elif it.action is Action.STOP:
            ok = evidence.outcome.ended or evidence.outcome.state is State.UNKNOWN
            if ok:
                job.stop_requested = job.stop_requested or stops_the_job(it)
            events.append(resolve(job, it, IntentStatus.DONE if ok else IntentStatus.FAILED, f"ended={ok}", now))
        elif it.action is Action.REQUEUE:
            before = int(it.args.get("restart", -1))
            latest = max((e.restart for e in evidence.executions), default=-1)
            ok = latest > before
            events.append(
                resolve(job, it, IntentStatus.DONE if ok else IntentStatus.FAILED, f"restart {before} -> {latest}", now)
            )
        elif it.action is Action.READMIT:
            ok, seen_text = readmitted(evidence, str(it.args.get("execution", "")))
            events.append(resolve(job, it, IntentStatus.DONE if ok else IntentStatus.FAILED, seen_text, now))
    return events


def resolve_vanished(job: JobRecord, sub: Submission, now: float, at: float) -> list[Event]:
    """Resolve ``sub``'s open intents (all but ``start``) whose deadline ``at`` has reached, for an object the
    scheduler has no trace of: a ``stop`` is done, anything else failed."""
    events: list[Event] = []
    for it in job.intents:
        if not it.open or it.submission != sub.n or at < it.deadline or it.action is Action.START:
            continue
        if it.args.get("schedulerId") not in (None, sub.scheduler_id):
            continue
        if it.action is Action.STOP:
            events.append(resolve(job, it, IntentStatus.DONE, "the object is gone", now))
        else:
            events.append(resolve(job, it, IntentStatus.FAILED, "the object is gone", now))
    return events


def readmitted(evidence: JobEvidence, execution: str) -> tuple[bool, str]:
    """Whether ``evidence`` shows that a readmission of the object after ``execution`` ended has landed: the
    object waits or runs again, or shows an execution after that one. Returns the answer and what was seen."""
    ids = [e.identity for e in evidence.executions]
    later = execution in ids and ids.index(execution) < len(ids) - 1
    state = evidence.outcome.state
    again = state.waiting or state is State.RUNNING
    return later or again, f"{state.value} after {execution}; executions {len(ids)}"


def fold_stray(
    job: JobRecord,
    scheduler_id: str,
    evidence: JobEvidence | Unanswered | None,
    now: float,
    observed_at: float | None = None,
) -> tuple[JobRecord, list[Event]]:
    """Resolve open ``stop`` intents aimed at the stray object ``scheduler_id`` from its evidence (None: gone),
    if it was observed at or after their deadline. An Unanswered reading resolves nothing."""
    if isinstance(evidence, Unanswered):
        return job, []
    at = evidence.outcome.evidence.observed_at if evidence is not None else observed_at
    at = now if at is None else at
    todo = {
        i.seq
        for i in job.intents
        if i.open and i.action is Action.STOP and at >= i.deadline and i.args.get("schedulerId") == scheduler_id
    }
    if not todo:
        return job, []
    new = job.copy()
    events = []
    ended = evidence is None or evidence.outcome.ended or evidence.outcome.state is State.UNKNOWN
    for it in new.intents:
        if it.seq in todo:
            status = IntentStatus.DONE if ended else IntentStatus.FAILED
            events.append(resolve(new, it, status, f"stray {scheduler_id} ended={ended}", now))
    return new, events
