"""The evidence of one TrainJob: the cache's reading and journal, as the supervisor is given them.

Every outcome carries the time of this reading. An execution whose end the journal holds is known ended *as of
now*: stamped with the time it was first seen ended, it would look older than a later reading of the record
(one that read it running while its pods were still ending), and the fold, which never lets older evidence
rewind a record, would ignore the end for ever.
"""

from __future__ import annotations

from dispatch.identity import AttemptId
from dispatch.kubeflow import names as n
from dispatch.kubeflow.mapping import Objects, Reading, annotations_of, eviction_outcome, last_eviction
from dispatch.kubeflow.watch import Journal
from dispatch.outcome import Cause, Evidence, Outcome, State
from dispatch.spi import ExecutionEvidence, JobEvidence


def job_evidence(name: str, o: Objects, r: Reading, journal: Journal, ev: Evidence, *, kueue: bool) -> JobEvidence:
    """TrainJob ``name``'s evidence, every outcome in it stamped ``ev``."""
    ann = annotations_of(o.trainjob)
    job_id = ann.get(n.JOB_ID) or name
    raw_sub = ann.get(n.SUBMISSION, "1")
    submission = int(raw_sub) if raw_sub.isdigit() and int(raw_sub) >= 1 else 1
    execs: list[ExecutionEvidence] = []
    if kueue and r.key.attempt > 1 and not any(key.attempt < r.key.attempt for key in journal.execs):
        # earlier attempts ran before this process watched: one entry stands for them (attempt numbers
        # are 1 + the Workload's evictions, so they need not be contiguous)
        last = last_eviction(o.workload)
        synth = (
            eviction_outcome(last[0], last[1], bool(r.holds), ev)
            if last
            else Outcome(State.UNKNOWN, None, ev, detail="ran before this process watched it")
        )
        execs.append(ExecutionEvidence(identity(job_id, submission, r.key.attempt - 1, 0, 0), 0, synth, None, None, ()))
    for key in sorted(journal.execs):
        rec = journal.execs[key]
        execs.append(
            ExecutionEvidence(
                identity(job_id, submission, key.attempt, key.a, key.j),
                key.a + key.j,
                rec.outcome.with_evidence(ev),
                rec.started_at,
                rec.ended_at,
                rec.nodes,
            )
        )
    current = journal.execs.get(r.key)
    outcome: Outcome
    if r.execution is not None and r.execution.state is State.RUNNING:
        outcome = r.execution
    elif r.execution is not None and r.execution.ended:
        waiting = r.waiting
        stopped = waiting is not None and waiting.state is State.CANCELLED and waiting.cause is Cause.CANCELLED
        if waiting is not None and ((waiting.state.waiting and not r.awaiting_authorisation) or stopped):
            outcome = waiting  # held after the execution ended, or stopped after a hold ended it
        else:
            outcome = current.outcome if current is not None else r.execution
    else:
        assert r.waiting is not None
        outcome = r.waiting
        if r.awaiting_authorisation and execs and execs[-1].outcome.ended and outcome.state.waiting:
            outcome = execs[-1].outcome
    return JobEvidence(
        scheduler_id=name,
        marker=r.marker,
        outcome=outcome.with_evidence(ev),
        gate=r.gate,
        holds=r.holds,
        foreign_holds=r.foreign_holds,
        executions=tuple(execs),
    )


def identity(job_id: str, submission: int, attempt: int, a: int, j: int) -> str:
    """The execution's identity (a job id that is no dispatch id, as a foreign TrainJob's, is hashed)."""
    try:
        return str(AttemptId(job_id, submission, attempt, a, j))
    except ValueError:
        return f"{n.short_hash(job_id)}.{submission}.{attempt}.{a}.{j}"
