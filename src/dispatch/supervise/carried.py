"""Which of a job's decisions have been carried out, as its record shows (what the metrics count).

A decision is recorded before it is carried out, and carrying it out may fail or wait (a backoff, a refused
start, a start whose answer was lost until an observation finds it). :func:`carried_out` reads the record only:

* ``resubmit`` and ``hold``: the next submission exists on the scheduler (its start is known to have landed,
  whether by the answer or by finding it afterwards, and whichever try made it);
* ``requeue`` and ``readmit``: a call made for the decision is known done;
* ``escalate`` (a rule's, or the unmatched policy's): the escalation of that submission is recorded;
* ``close`` (the unmatched policy): the job is closed;
* anything else (``restart``: the scheduler restarts in place by itself): recording it is carrying it out.
"""

from __future__ import annotations

from dispatch.records.model import Decision, IntentStatus, JobRecord


def carried_out(job: JobRecord) -> set[int]:
    """The seqs of ``job``'s decisions that its record shows carried out (see the module docstring)."""
    return {d.seq for d in job.decisions if _done(job, d)}


def newly_carried_out(before: JobRecord | None, after: JobRecord) -> list[Decision]:
    """The decisions ``after`` shows carried out that ``before`` (the same job, earlier; None: nothing) did not."""
    done = carried_out(after) - (carried_out(before) if before is not None else set())
    return [d for d in after.decisions if d.seq in done]


def _done(job: JobRecord, d: Decision) -> bool:
    if d.action in ("resubmit", "hold"):
        return any(s.n == d.submission + 1 and s.scheduler_id is not None for s in job.submissions)
    if d.action in ("requeue", "readmit"):
        return any(i.decision == d.seq and i.status is IntentStatus.DONE for i in job.intents)
    if d.action == "escalate":
        return any(e.submission == d.submission and e.at >= d.at for e in job.escalations)
    if d.action == "close":
        return job.closed
    return True


__all__ = ["carried_out", "newly_carried_out"]
