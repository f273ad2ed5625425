"""Folding one ``inspect`` reading of a submission's object into its record.

* Evidence older than what the record already holds is ignored (a slow observer never rewinds a record).
* A foreign hold (someone else's gate or hold) on a waiting object makes it ``held`` / ``admin-held``
  (:func:`shown`).
* Executions are merged by identity: ended evidence is never replaced by unknown, and an execution the reading
  no longer shows that had not ended becomes ``unknown`` ("history lost").
* A :class:`~dispatch.spi.Cessation` covering an execution that ended node-lost turns its cause into
  ``cessation`` (planned, not a failure of the job).
* An end already seen is kept over an unknown reading, unless the object has run again since.
* Open intents past their deadline are then resolved by what the reading shows
  (:func:`~dispatch.supervise.fold_intents.resolve_by_evidence`).
"""

from __future__ import annotations

from dataclasses import replace

from dispatch.outcome import Cause, Evidence, Outcome, State
from dispatch.records.model import Event, ExecutionRecord, GateState, JobRecord, Submission
from dispatch.spi import Cessation, Gate, JobEvidence
from dispatch.supervise.fold_intents import resolve_by_evidence


def shown(evidence: JobEvidence) -> Outcome:
    """The submission outcome ``evidence`` shows, as the fold records it: a waiting object under a foreign hold
    (someone else's gate or hold) is ``held`` / ``admin-held``."""
    out = evidence.outcome
    if evidence.foreign_holds and out.state.waiting:
        return Outcome(
            State.HELD, Cause.ADMIN_HELD, out.evidence, detail="held by " + ", ".join(evidence.foreign_holds)
        )
    return out


def _merge_execution(rec: ExecutionRecord | None, ee_outcome: Outcome) -> Outcome:
    """The outcome to keep for an execution: never replace ended evidence by unknown."""
    if rec is not None and rec.outcome.ended and not ee_outcome.ended:
        return rec.outcome
    return ee_outcome


def _resumed(rec: ExecutionRecord | None, out: Outcome) -> float | None:
    """The execution's resume time: this reading's, when the record showed it suspended and ``out`` shows it
    running again; else what the record kept."""
    if rec is None:
        return None
    if rec.outcome.cause is Cause.SUSPENDED and out.state is State.RUNNING and out.cause is not Cause.SUSPENDED:
        return out.evidence.observed_at
    return rec.resumed_at


def fold_evidence(
    job: JobRecord, sub: Submission, evidence: JobEvidence, now: float, cessation: Cessation | None
) -> list[Event]:
    """Fold ``evidence`` (a reading of ``sub``'s own object) into ``sub``; the events to append."""
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
        out = _merge_execution(rec, ee.outcome)
        if (
            cessation is not None
            and out.ended
            and out.cause is Cause.NODE_LOST
            and (ee.ended_at is None or ee.ended_at >= cessation.since)
        ):
            out = replace(out, cause=Cause.CESSATION, detail=f"cessation: {cessation.reason}")
        merged.append(
            ExecutionRecord(
                ee.identity, ee.restart, out, ee.started_at, ee.ended_at, list(ee.nodes), _resumed(rec, ee.outcome)
            )
        )
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
    events += resolve_by_evidence(job, sub, evidence, now)
    return events
