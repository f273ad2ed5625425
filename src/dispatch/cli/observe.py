"""Folding a backend's evidence into job records: what ``status`` and ``run`` do when no supervisor owns a job.

``refresh`` reads every active job of a cluster in ONE batched ``inspect_many`` and writes what changed: the
submission's outcome and executions (with their evidence), ``gone`` when the scheduler no longer shows the
object, and ``closed`` when a job without rules has ended (nothing more will happen to it). Jobs a supervisor
holds a live lease on are left to that supervisor. Each write is a compare-and-set; a lost race is skipped (the
next refresh reads again).
"""

from __future__ import annotations

from collections.abc import Iterable

from dispatch.errors import Conflict, NotFound
from dispatch.outcome import Evidence, unknown
from dispatch.records.base import Records
from dispatch.records.model import Event, ExecutionRecord, JobRecord
from dispatch.spi import Backend, JobEvidence, Unanswered


def owned_by_supervisor(job: JobRecord, now: float) -> bool:
    return job.lease is not None and job.lease.expires_at > now


def needs_observation(job: JobRecord) -> bool:
    """True unless the job is closed AND its last recorded outcome has ended (a stopped job is closed at once,
    but its processes are still ending: it is observed until they have)."""
    out = job.outcome
    return not (job.closed and out is not None and out.state.ended)


def fold(job: JobRecord, ev: JobEvidence | Unanswered | None, now: float) -> list[Event]:
    """Apply evidence of the job's current submission to ``job`` (in place); returns the events to append.

    ``ev`` None means the scheduler has no trace of the object: it is marked gone, its last evidence kept.
    :class:`Unanswered` (no answer for it yet) changes nothing: the last evidence stands, the next read asks again
    (bounding how long that may last is the supervisor's business, see ``dispatch.supervise.fold``).
    """
    sub = job.current
    if sub is None or sub.scheduler_id is None or isinstance(ev, Unanswered):
        return []
    events: list[Event] = []
    if ev is None:
        if not sub.gone:
            sub.gone = True
            events.append(Event(job.id, now, "gone", {"submission": sub.n, "schedulerId": sub.scheduler_id}))
            if sub.outcome is None or not sub.outcome.state.ended:
                # the object vanished before it was seen to end: its fate is unknown, never success
                sub.outcome = unknown(Evidence("record", now), "the scheduler no longer shows the job")
    else:
        old = sub.outcome
        new = ev.outcome
        known = {e.identity: e for e in sub.executions}
        for x in ev.executions:
            rec = known.get(x.identity)
            if rec is None or rec.outcome.state != x.outcome.state or rec.outcome.cause != x.outcome.cause:
                events.append(
                    Event(
                        job.id,
                        now,
                        "execution",
                        {
                            "submission": sub.n,
                            "execution": x.identity,
                            "state": x.outcome.state.value,
                            "cause": x.outcome.cause.value if x.outcome.cause else None,
                            "exitCode": x.outcome.exit_code,
                            "detail": x.outcome.detail,
                        },
                    )
                )
            known[x.identity] = ExecutionRecord(
                x.identity, x.restart, x.outcome, x.started_at, x.ended_at, list(x.nodes)
            )
        sub.executions = sorted(known.values(), key=lambda e: e.restart)
        if old is None or (old.state, old.cause, old.exit_code) != (new.state, new.cause, new.exit_code):
            events.append(
                Event(
                    job.id,
                    now,
                    "observed",
                    {
                        "submission": sub.n,
                        "state": new.state.value,
                        "cause": new.cause.value if new.cause else None,
                        "exitCode": new.exit_code,
                        "detail": new.detail,
                    },
                )
            )
        sub.outcome = new
    out = sub.outcome
    if not job.closed and job.rules is None and out is not None and (out.state.ended or sub.gone):
        job.closed = True
        events.append(Event(job.id, now, "closed", {"reason": "ended, and the job has no rules"}))
    return events


def refresh(records: Records, backend: Backend, jobs: Iterable[JobRecord], now: float) -> list[JobRecord]:
    """Observe the active ``jobs`` in one batched call and return them as observed, in the same order.

    Changes are written (compare-and-set) for jobs no supervisor owns. A job under a live supervisor lease is
    observed too but NOT written: the returned copy shows what the scheduler says now, and the record stays
    the supervisor's to write. So a reader always sees the truth, even when the process that owned the job has
    died and its lease has not expired yet.
    """
    jobs = list(jobs)
    todo = [
        j
        for j in jobs
        if needs_observation(j) and j.current is not None and j.current.scheduler_id is not None and not j.current.gone
    ]
    if not todo:
        return jobs
    evidence = backend.inspect_many([j.current.scheduler_id for j in todo if j.current and j.current.scheduler_id])
    out: dict[str, JobRecord] = {j.id: j for j in jobs}
    for job in todo:
        assert job.current is not None and job.current.scheduler_id is not None
        new = job.copy()
        events = fold(new, evidence.get(job.current.scheduler_id), now)
        if not events:
            continue  # nothing changed but the evidence time: no write (status stays cheap)
        new.updated_at = now
        if owned_by_supervisor(job, now):
            out[job.id] = new  # shown, not written
            continue
        try:
            out[job.id] = records.update(new, events)
        except (Conflict, NotFound):
            continue
    return [out[j.id] for j in jobs]
