"""Folding evidence into a job's record: a pure function from (record, evidence, time) to (record, events).

What :func:`fold` guarantees:

* Evidence older than what the record already holds is ignored (a slow observer never rewinds a record).
* A failed poll is not folded at all: the caller does not call :func:`fold` when the backend raised
  :class:`~dispatch.errors.Unavailable`, so the state stays as last known and its evidence age grows.
* ``evidence=None`` means the backend has no trace of the object (NotFound). The submission is marked ``gone``;
  an execution that had already ended with evidence keeps that evidence; anything else becomes
  ``unknown`` / cause ``unknown``. Nothing becomes ``succeeded`` without the scheduler saying so.
* An :class:`~dispatch.spi.Unanswered` reading (the scheduler has not answered for the object yet) keeps the
  last evidence and starts the clock an ``unknown`` reading starts (``Submission.unknown_since``); once it has
  lasted ``unanswered_grace`` (the supervisor passes the backend's NodeLossWindow) the submission is folded as
  unknown evidence is: ``unknown`` / cause ``unknown``, an end already seen kept. It resolves no intent.
* A foreign hold (someone else's gate or hold) on a waiting object makes it ``held`` / ``admin-held``.
* A :class:`~dispatch.spi.Cessation` covering an execution that ended node-lost turns its cause into
  ``cessation`` (planned, not a failure of the job).
* Open intents whose deadline has passed are resolved by what the evidence shows (never by acting again):
  ``open`` by the gate, ``hold``/``release`` by the hold instances present, ``stop`` by the object having
  ended, ``requeue`` by whether the restart count moved, ``readmit`` by whether the object waits or runs
  again (or shows an execution after the one readmitted). ``start`` is resolved by ``found``, the result of
  finding the submission's marker after the deadline: one object is recorded, more than one keeps the
  earliest and lists the others as strays (they are gated and will be stopped), none means the start did not
  land (``failed``: it may be made again with the same marker).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from dispatch.outcome import Cause, Evidence, Outcome, State
from dispatch.records.model import (
    Action,
    Event,
    ExecutionRecord,
    GateState,
    HoldRecord,
    Intent,
    IntentStatus,
    JobRecord,
    Submission,
    stops_the_job,
)
from dispatch.spi import Cessation, Found, Gate, JobEvidence, Unanswered
from dispatch.supervise import unknown_clock

DEFAULT_REFRESH = 60.0
"""How stale a record's evidence time may get before an unchanged observation is written anyway."""


def fold(
    job: JobRecord,
    evidence: JobEvidence | Unanswered | None,
    now: float,
    *,
    submission: int | None = None,
    found: Sequence[Found] | None = None,
    cessation: Cessation | None = None,
    refresh: float = DEFAULT_REFRESH,
    observed_at: float | None = None,
    unanswered_grace: float = 0.0,
    reading_gap: float = 0.0,
) -> tuple[JobRecord, list[Event]]:
    """Fold one observation of a submission (default: the current one) into ``job``.

    An intent is resolved only by an observation made at or after its deadline: the evidence's own time, or
    ``observed_at`` (default ``now``) for a NotFound and for ``found``. An observation made earlier (a slow
    supervisor folding what it read before the deadline) says nothing about the call.

    ``evidence`` is what ``inspect`` showed (None: the scheduler has no trace of the object; pass nothing for
    a submission that was not observed, see :func:`fold_found`). ``found`` is what finding the submission's
    marker showed (only used to resolve an open ``start`` past its deadline). ``unanswered_grace`` is how long
    an :class:`~dispatch.spi.Unanswered` reading keeps the last evidence (see the module's docstring).
    ``reading_gap`` is the longest gap between two unknown readings that keeps the unknown clock running
    (:func:`~dispatch.supervise.unknown_clock.reading_bound`; 0, the default: no gap restarts it). Returns
    the new record (``job`` itself, unchanged, when the observation changes nothing worth writing) and the
    events to append.
    """
    sub = _target(job, submission)
    if sub is None:
        return job, []
    at = now if observed_at is None else observed_at
    if isinstance(evidence, Unanswered):
        if found is None and not _unanswered_changes(sub, evidence, unanswered_grace, reading_gap):
            return job, []
    elif (
        found is None
        and not _worth_folding(job, sub, evidence, now, cessation, refresh)
        and not _unknown_reading_due(sub, evidence, at, reading_gap)
    ):
        return job, []
    new = job.copy()
    nsub = new.submission(sub.n)
    events: list[Event] = []
    if found is not None:
        events += _fold_found(new, nsub, found, now, at)
    if isinstance(evidence, Unanswered):
        if nsub.scheduler_id is not None and _unanswered_changes(nsub, evidence, unanswered_grace, reading_gap):
            events += _fold_unanswered(new, nsub, evidence, now, unanswered_grace, reading_gap)
        return new, events
    if nsub.scheduler_id is not None:
        if evidence is None:
            events += _fold_vanished(new, nsub, now, at)
        elif evidence.scheduler_id == nsub.scheduler_id:
            events += _fold_evidence(new, nsub, evidence, now, cessation)
    _mark_unknown(sub, nsub, at, reading_gap)
    return new, events


def _unknown_reading_due(sub: Submission, evidence: JobEvidence | None, at: float, gap: float) -> bool:
    """Whether an ``unknown`` reading of ``sub``'s object is to be written for the clock's sake alone (see
    :mod:`dispatch.supervise.unknown_clock`)."""
    return (
        evidence is not None
        and evidence.scheduler_id == sub.scheduler_id
        and evidence.outcome.state is State.UNKNOWN
        and unknown_clock.due(sub, at, gap)
    )


def _mark_unknown(old: Submission, new: Submission, at: float, gap: float) -> None:
    """Start (or end) the clock on an unknown: a submission not seen to end whose evidence turns ``unknown``
    gets ``unknown_since``; evidence that is known again clears it. An object shown again after it was marked
    gone starts the clock afresh: the scheduler had it all along (the reader that missed it may have had a
    narrower view), so the time it was missing says nothing of how long its unknown has lasted. A reading
    after a gap nobody read restarts it too (:mod:`dispatch.supervise.unknown_clock`)."""
    out = new.outcome
    shown_again = old.gone and not new.gone
    was_unknown = old.outcome is not None and old.outcome.state is State.UNKNOWN
    if out is None or out.state is not State.UNKNOWN:
        unknown_clock.stop(new)
    elif shown_again:
        unknown_clock.stop(new)
        unknown_clock.read_unknown(new, at, gap)
    elif new.unknown_since is not None or not was_unknown:
        unknown_clock.read_unknown(new, at, gap)


def fold_found(
    job: JobRecord,
    found: Sequence[Found],
    now: float,
    *,
    submission: int | None = None,
    observed_at: float | None = None,
) -> tuple[JobRecord, list[Event]]:
    """Fold only the result of a find-by-marker (no inspect evidence) into ``job``."""
    sub = _target(job, submission)
    if sub is None:
        return job, []
    new = job.copy()
    events = _fold_found(new, new.submission(sub.n), found, now, now if observed_at is None else observed_at)
    return (new, events) if events else (job, [])


def start_intent(job: JobRecord, n: int) -> Intent | None:
    """The open ``start`` intent of submission ``n``, if any."""
    for it in job.intents:
        if it.open and it.action is Action.START and it.submission == n:
            return it
    return None


# ----- internals ------------------------------------------------------------------------------------------


def _target(job: JobRecord, submission: int | None) -> Submission | None:
    if submission is None:
        return job.current
    try:
        return job.submission(submission)
    except KeyError:
        return None


def _worth_folding(
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


def shown(evidence: JobEvidence) -> Outcome:
    """The submission outcome ``evidence`` shows, as the fold records it: a waiting object under a foreign hold
    (someone else's gate or hold) is ``held`` / ``admin-held``."""
    out = evidence.outcome
    if evidence.foreign_holds and out.state.waiting:
        return Outcome(
            State.HELD, Cause.ADMIN_HELD, out.evidence, detail="held by " + ", ".join(evidence.foreign_holds)
        )
    return out


@dataclass(frozen=True, slots=True)
class Settled:
    """What a settled submission's record shows, kept apart from the record so that a supervisor can tell
    whether new evidence changes it without reading the record's object graph again.

    A submission is settled when nothing but the evidence itself can make :func:`fold` change it: it has a
    scheduler id, an outcome, no ``unknown_since`` clock running, is not ``gone``, has no strays and its job
    has no open intent (so no deadline can pass). For such a submission, :meth:`unchanged_by` is exactly the
    "nothing worth folding" answer of :func:`fold` for the same evidence, with no cessation and no ``found``
    (tests/supervise/test_fold.py checks the two against each other)."""

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


def _unanswered_changes(sub: Submission, unanswered: Unanswered, grace: float, gap: float) -> bool:
    """Whether an Unanswered reading changes ``sub``: it starts the unknown clock (or restarts it, or keeps its
    last reading fresh), or outlasts the grace."""
    if sub.scheduler_id is None or unanswered.scheduler_id != sub.scheduler_id:
        return False
    out = sub.outcome
    if out is not None and out.ended:
        return False  # an end seen stays
    if unknown_clock.due(sub, unanswered.observed_at, gap):
        return True  # the clock's last reading is to be kept fresh, or the clock restarted after a gap
    if out is not None and out.state is State.UNKNOWN:
        return False  # an unknown already runs its clock
    since = sub.unknown_since
    return since is None or unanswered.observed_at - since >= grace


def _fold_unanswered(
    job: JobRecord, sub: Submission, unanswered: Unanswered, now: float, grace: float, gap: float
) -> list[Event]:
    at = unanswered.observed_at
    events: list[Event] = []
    if unknown_clock.read_unknown(sub, at, gap):
        events.append(Event(job.id, now, "unanswered", {"submission": sub.n, "reason": unanswered.reason}))
    since = at if sub.unknown_since is None else sub.unknown_since  # set by read_unknown
    out = sub.outcome
    if (out is None or not (out.ended or out.state is State.UNKNOWN)) and at - since >= grace:
        ev = Evidence("unanswered", at)
        detail = f"the scheduler has not answered for it for {at - since:.0f}s: {unanswered.reason}"
        for ex in sub.executions:
            if not ex.outcome.ended:
                ex.outcome = Outcome(State.UNKNOWN, Cause.UNKNOWN, ev, detail=detail)
        sub.outcome = Outcome(State.UNKNOWN, Cause.UNKNOWN, ev, detail=detail)
        events.append(
            Event(
                job.id,
                now,
                "observed",
                {"submission": sub.n, "state": "unknown", "cause": "unknown", "exitCode": None, "source": ev.source},
            )
        )
    return events


def _resolve(job: JobRecord, it: Intent, status: IntentStatus, result: str, now: float) -> Event:
    it.status = status
    it.result = f"by observation: {result}"
    it.resolved_at = now
    return Event(
        job.id,
        now,
        "resolved",
        {"seq": it.seq, "action": it.action.value, "status": status.value, "result": it.result},
    )


def _fold_found(job: JobRecord, sub: Submission, found: Sequence[Found], now: float, at: float) -> list[Event]:
    it = start_intent(job, sub.n)
    if it is None or at < it.deadline:
        return []
    mine = sorted((f for f in found if f.marker == sub.marker), key=lambda f: (f.created_at or 0.0, f.scheduler_id))
    if not mine:
        return [_resolve(job, it, IntentStatus.FAILED, f"no object carries marker {sub.marker}", now)]
    keep = sub.scheduler_id or mine[0].scheduler_id
    sub.scheduler_id = keep
    if sub.gate is GateState.PLANNED:
        sub.gate = GateState.CLOSED
        sub.outcome = Outcome(State.PENDING, Cause.GATED, Evidence("find", now))
    for f in mine:
        if f.scheduler_id != keep and f.scheduler_id not in sub.strays:
            sub.strays.append(f.scheduler_id)
    events = [_resolve(job, it, IntentStatus.DONE, f"found {keep} by marker", now)]
    if sub.strays:
        events.append(Event(job.id, now, "strays", {"submission": sub.n, "strays": list(sub.strays)}))
    return events


def _fold_vanished(job: JobRecord, sub: Submission, now: float, at: float) -> list[Event]:
    events: list[Event] = []
    ev = Evidence("not-found", now)
    settled = sub.outcome is not None and (sub.outcome.ended or sub.outcome.state is State.UNKNOWN)
    if not sub.gone or not settled:
        sub.gone = True
        for ex in sub.executions:
            if not ex.outcome.ended:
                ex.outcome = Outcome(State.UNKNOWN, Cause.UNKNOWN, ev, detail="the scheduler has no trace of it")
        if sub.outcome is None or not sub.outcome.ended:
            sub.outcome = Outcome(State.UNKNOWN, Cause.UNKNOWN, ev, detail="the scheduler has no trace of it")
        events.append(Event(job.id, now, "vanished", {"submission": sub.n, "state": sub.outcome.state.value}))
    for it in job.intents:
        if not it.open or it.submission != sub.n or at < it.deadline or it.action is Action.START:
            continue
        if it.args.get("schedulerId") not in (None, sub.scheduler_id):
            continue
        if it.action is Action.STOP:
            events.append(_resolve(job, it, IntentStatus.DONE, "the object is gone", now))
        else:
            events.append(_resolve(job, it, IntentStatus.FAILED, "the object is gone", now))
    return events


def _merge_execution(rec: ExecutionRecord | None, ee_outcome: Outcome, ee: object) -> Outcome:
    """The outcome to keep for an execution: never replace ended evidence by unknown."""
    if rec is not None and rec.outcome.ended and not ee_outcome.ended:
        return rec.outcome
    return ee_outcome


def _fold_evidence(
    job: JobRecord, sub: Submission, evidence: JobEvidence, now: float, cessation: Cessation | None
) -> list[Event]:
    events: list[Event] = []
    observed = evidence.outcome.evidence.observed_at
    if sub.outcome is not None and observed < sub.outcome.evidence.observed_at:
        return events  # older than what we know
    sub.gone = False
    if evidence.gate is Gate.OPEN:
        sub.gate = GateState.OPEN
    elif sub.gate is GateState.PLANNED:
        sub.gate = GateState.CLOSED

    by_id = {e.identity: e for e in sub.executions}
    seen: set[str] = set()
    merged: list[ExecutionRecord] = []
    for ee in evidence.executions:
        rec = by_id.get(ee.identity)
        out = _merge_execution(rec, ee.outcome, ee)
        if (
            cessation is not None
            and out.ended
            and out.cause is Cause.NODE_LOST
            and (ee.ended_at is None or ee.ended_at >= cessation.since)
        ):
            out = replace(out, cause=Cause.CESSATION, detail=f"cessation: {cessation.reason}")
        merged.append(ExecutionRecord(ee.identity, ee.restart, out, ee.started_at, ee.ended_at, list(ee.nodes)))
        seen.add(ee.identity)
    for rec in sub.executions:
        if rec.identity in seen:
            continue
        if not rec.outcome.ended:
            rec.outcome = Outcome(State.UNKNOWN, Cause.UNKNOWN, Evidence("not-found", now), detail="history lost")
        merged.append(rec)
    merged.sort(key=lambda e: (e.restart, e.started_at if e.started_at is not None else float("inf")))
    sub.executions = merged

    out = shown(evidence)
    cur = evidence.current
    if cur is not None and evidence.executions and out.state is evidence.executions[-1].outcome.state:
        # the submission's outcome is its current execution's, with what we merged (kept or cessation)
        cur_rec = next(e for e in merged if e.identity == cur.identity)
        if cur_rec.outcome.ended:
            out = cur_rec.outcome.with_evidence(out.evidence) if out.ended else cur_rec.outcome
    # vanished evidence: keep the end we saw, unless the object has run again since (a readmission or a requeue
    # shows an execution that end was not of): then the end is past, and unknown is what we know
    ran_again = cur is not None and cur.identity not in by_id
    if sub.outcome is not None and sub.outcome.ended and not out.ended and out.state is State.UNKNOWN and not ran_again:
        out = sub.outcome
    before = sub.outcome
    sub.outcome = out
    if before is None or (before.state, before.cause, before.exit_code) != (out.state, out.cause, out.exit_code):
        events.append(
            Event(
                job.id,
                now,
                "observed",
                {
                    "submission": sub.n,
                    "state": out.state.value,
                    "cause": out.cause.value if out.cause else None,
                    "exitCode": out.exit_code,
                    "source": out.evidence.source,
                },
            )
        )
    events += _resolve_by_evidence(job, sub, evidence, now)
    return events


def _resolve_by_evidence(job: JobRecord, sub: Submission, evidence: JobEvidence, now: float) -> list[Event]:
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
            events.append(_resolve(job, it, status, f"gate {evidence.gate}", now))
        elif it.action is Action.HOLD:
            instance = str(it.args.get("instance"))
            ok = instance in evidence.holds
            if ok and not any(h.instance == instance for h in job.holds):
                job.holds.append(HoldRecord(instance, it.owner, sub.n, now, str(it.args.get("reason", ""))))
            events.append(
                _resolve(
                    job, it, IntentStatus.DONE if ok else IntentStatus.FAILED, f"hold {instance} present={ok}", now
                )
            )
        elif it.action is Action.RELEASE:
            instance = str(it.args.get("instance"))
            ok = instance not in evidence.holds
            if ok:
                for h in job.holds:
                    if h.instance == instance and h.active:
                        h.released_at = now
            events.append(
                _resolve(job, it, IntentStatus.DONE if ok else IntentStatus.FAILED, f"hold {instance} lifted={ok}", now)
            )
        elif it.action is Action.STOP:
            ok = evidence.outcome.ended or evidence.outcome.state is State.UNKNOWN
            if ok:
                job.stop_requested = job.stop_requested or stops_the_job(it)
            events.append(_resolve(job, it, IntentStatus.DONE if ok else IntentStatus.FAILED, f"ended={ok}", now))
        elif it.action is Action.REQUEUE:
            before = int(it.args.get("restart", -1))
            latest = max((e.restart for e in evidence.executions), default=-1)
            ok = latest > before
            events.append(
                _resolve(
                    job, it, IntentStatus.DONE if ok else IntentStatus.FAILED, f"restart {before} -> {latest}", now
                )
            )
        elif it.action is Action.READMIT:
            ok, shown = readmitted(evidence, str(it.args.get("execution", "")))
            events.append(_resolve(job, it, IntentStatus.DONE if ok else IntentStatus.FAILED, shown, now))
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
            events.append(_resolve(new, it, status, f"stray {scheduler_id} ended={ended}", now))
    return new, events
