"""Carrying out a backend call under the intent protocol: write the intent, call, record the answer.

Both the operator (submit, stop, hold, release) and the supervisor (recovery: also requeue and readmit) act only through
:class:`Actor`, so every call dispatch makes to a scheduler is preceded by a durable intent that wins a
compare-and-set on the job's version (and the supervisor's fencing token). A writer that loses the race gets
:class:`~dispatch.errors.Conflict` and makes no call.

How an answer is recorded:

==========================  ===============================================================================
the call ...                the intent becomes
==========================  ===============================================================================
returned                    ``done``; its effect is written (scheduler id, gate open, hold placed, ...)
raised OutcomeUnknown       ``unknown``: resolved later by observation, after ``deadline``, never by retrying
raised Unavailable          ``failed`` (known not to have landed; may be tried again)
raised Rejected/NotFound/   ``failed`` with the scheduler's words; the caller decides what it means
Unsupported/ReadOnly
raised anything else        stays ``pending`` (the process may be about to die); resolved after ``deadline``
==========================  ===============================================================================
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dispatch.clock import Clock
from dispatch.errors import (
    DispatchError,
    NotFound,
    OutcomeUnknown,
    Unavailable,
)
from dispatch.outcome import Cause, Evidence, Outcome, State
from dispatch.records.base import Records, batch_writes
from dispatch.records.model import (
    Action,
    Event,
    GateState,
    HoldRecord,
    Intent,
    IntentStatus,
    JobRecord,
    stops_the_job,
)
from dispatch.spi import Backend, Holder, Readmitter, Requeuer, StartRequest

DEFAULT_MARGIN = 5.0


def marker_for(job_id: str, submission: int) -> str:
    """The marker of a submission: deterministic, so a duplicate object of one submission is recognisable."""
    return f"dsp-{job_id}-{submission}"


@dataclass
class CallResult:
    """What :meth:`Actor.carry_out` learnt: the updated record, the intent, and the error if the call failed."""

    job: JobRecord
    intent: Intent
    error: DispatchError | None = None


class Actor:
    """Writes intents and carries them out against one backend and one record store.

    ``owner`` names the writer in intents and holds; ``margin`` is added to the backend's CallBound to make an
    intent's deadline (the time after which another writer may resolve it by observation).
    """

    def __init__(
        self,
        records: Records,
        backend: Backend,
        clock: Clock,
        owner: str,
        *,
        margin: float = DEFAULT_MARGIN,
    ) -> None:
        self.records = records
        self.backend = backend
        self.clock = clock
        self.owner = owner
        self.margin = margin

    @property
    def call_bound(self) -> float:
        return self.backend.declarations().call_bound

    def write_intent(
        self,
        job: JobRecord,
        action: Action,
        submission: int,
        *,
        args: dict[str, Any] | None = None,
        decision: int | None = None,
        fence: int | None = None,
        events: Sequence[Event] = (),
    ) -> tuple[JobRecord, Intent]:
        """Append a pending intent and write it (compare-and-set). Raises Conflict if the job moved."""
        new = job.copy()
        intent, written_events = self.add_intent(new, action, submission, args=args, decision=decision)
        written = self.records.update(new, [*events, *written_events], fence=fence)
        return written, intent

    def add_intent(
        self,
        job: JobRecord,
        action: Action,
        submission: int,
        *,
        args: dict[str, Any] | None = None,
        decision: int | None = None,
    ) -> tuple[Intent, list[Event]]:
        """Append a pending intent to ``job`` itself (nothing is written): the intent and the event its write
        appends. For a caller that writes ``job`` with other changes in one write (:meth:`write_many`)."""
        now = self.clock.now()
        intent = Intent(
            seq=job.next_seq(job.intents),
            action=action,
            submission=submission,
            owner=self.owner,
            written_at=now,
            deadline=now + self.call_bound + self.margin,
            args=dict(args or {}),
            decision=decision,
        )
        job.intents.append(intent)
        job.updated_at = now
        data = {"seq": intent.seq, "action": action.value, "submission": submission, "owner": self.owner}
        return intent, [Event(job.id, now, "intent", data)]

    def write_many(
        self, items: Sequence[tuple[JobRecord, Sequence[Event]]], *, fence: int | None = None
    ) -> list[JobRecord | DispatchError]:
        """Write every job with its events (compare-and-set each): in one transaction when the store offers
        :class:`~dispatch.records.base.BatchWrites`, else one write per job. Each answer is the job as written or
        the error its write raised (Conflict, NotFound); an error of the store itself in a batched write raises."""
        writer = batch_writes(self.records)
        if writer is not None:
            return list(writer.update_many(items, fence=fence))
        out: list[JobRecord | DispatchError] = []
        for job, events in items:
            try:
                out.append(self.records.update(job, events, fence=fence))
            except DispatchError as exc:
                out.append(exc)
        return out

    def call(self, job: JobRecord, intent: Intent) -> Any:
        """Make the backend call an intent names. Returns the call's answer; raises what the backend raises."""
        sub = job.submission(intent.submission)
        sid = sub.scheduler_id
        if intent.action is Action.START:
            exclude = tuple(str(n) for n in intent.args.get("exclude", ()))
            req = StartRequest(job.id, sub.n, sub.marker, job.spec, exclude)
            return self.backend.start(req)
        if intent.action is Action.STOP and intent.args.get("schedulerId"):
            sid = str(intent.args["schedulerId"])  # a stray duplicate of the submission
        if sid is None:
            raise NotFound(f"submission {sub.n} of job {job.id} has no scheduler object")
        if intent.action is Action.OPEN:
            return self.backend.open(sid)
        if intent.action is Action.STOP:
            return self.backend.stop_job(sid)
        if intent.action is Action.HOLD:
            assert isinstance(self.backend, Holder)
            return self.backend.hold(sid, str(intent.args["instance"]))
        if intent.action is Action.RELEASE:
            assert isinstance(self.backend, Holder)
            return self.backend.release(sid, str(intent.args["instance"]))
        if intent.action is Action.REQUEUE:
            assert isinstance(self.backend, Requeuer)
            return self.backend.requeue(sid)
        if intent.action is Action.READMIT:
            assert isinstance(self.backend, Readmitter)
            return self.backend.readmit(sid)
        raise ValueError(f"no backend call for intent action {intent.action}")

    def carry_out(self, job: JobRecord, intent: Intent, *, fence: int | None = None) -> CallResult:
        """Call the backend for ``intent`` (already written) and record the answer. Raises Conflict if the
        record moved meanwhile (the answer is then lost; the intent is resolved later by observation)."""
        status, answer, error = self.attempt(job, intent)
        return self.record(job, intent, status, answer, error, fence=fence)

    def attempt(self, job: JobRecord, intent: Intent) -> tuple[IntentStatus, Any, DispatchError | None]:
        """Make the call and classify its answer (see the module table); nothing is written."""
        try:
            answer = self.call(job, intent)
        except OutcomeUnknown as exc:
            return IntentStatus.UNKNOWN, None, exc
        except DispatchError as exc:
            return IntentStatus.FAILED, None, exc
        return IntentStatus.DONE, answer, None

    def record(
        self,
        job: JobRecord,
        intent: Intent,
        status: IntentStatus,
        answer: Any,
        error: DispatchError | None,
        *,
        fence: int | None = None,
    ) -> CallResult:
        """Write a call's answer into ``job`` (compare-and-set). Raises Conflict if the record moved."""
        now = self.clock.now()
        new, it, events = record_answer(job, intent.seq, status, answer, error, now)
        new.updated_at = now
        written = self.records.update(new, events, fence=fence)
        return CallResult(written, it, error)


def record_answer(
    job: JobRecord,
    seq: int,
    status: IntentStatus,
    answer: Any,
    error: DispatchError | None,
    now: float,
    *,
    in_place: bool = False,
) -> tuple[JobRecord, Intent, list[Event]]:
    """A copy of ``job`` with intent ``seq`` resolved by a call's answer, its effect applied (pure). ``in_place``:
    ``job`` itself is changed and returned (for a caller that gives up its copy: a thousand copies cost more than
    the thousand writes of a batch)."""
    new = job if in_place else job.copy()
    it = next(i for i in new.intents if i.seq == seq)
    it.status = status
    it.resolved_at = now if status is not IntentStatus.UNKNOWN else None
    it.result = (type(error).__name__ + ": " + str(error)) if error else ("" if answer is None else str(answer))
    if status is IntentStatus.DONE:
        apply_effect(new, it, answer, now)
    elif status is IntentStatus.FAILED:
        apply_failure(new, it, error, now)
    event = Event(
        job.id, now, "call", {"seq": it.seq, "action": it.action.value, "status": status.value, "result": it.result}
    )
    return new, it, [event]


def apply_effect(job: JobRecord, intent: Intent, answer: Any, now: float) -> None:
    """Write what a successful call did into the record (pure: mutates ``job`` only)."""
    sub = job.submission(intent.submission)
    if intent.action is Action.START:
        sub.scheduler_id = str(answer)
        sub.gate = GateState.CLOSED
        sub.outcome = Outcome(State.PENDING, Cause.GATED, Evidence("start", now))
    elif intent.action is Action.OPEN:
        sub.gate = GateState.OPEN
    elif intent.action is Action.HOLD:
        instance = str(intent.args["instance"])
        if not any(h.instance == instance for h in job.holds):
            job.holds.append(HoldRecord(instance, intent.owner, sub.n, now, str(intent.args.get("reason", ""))))
    elif intent.action is Action.RELEASE:
        for h in job.holds:
            if h.instance == intent.args["instance"] and h.active:
                h.released_at = now
    elif stops_the_job(intent):
        job.stop_requested = True


def apply_failure(job: JobRecord, intent: Intent, error: DispatchError | None, now: float) -> None:
    """Write what a definitely failed call means for the record (pure)."""
    sub = job.submission(intent.submission)
    if intent.action is Action.START and not isinstance(error, Unavailable):
        sub.gate = GateState.ABANDONED
        sub.outcome = Outcome(State.FAILED, Cause.REJECTED, Evidence("start", now), detail=str(error) if error else "")
    elif (
        isinstance(error, NotFound)
        and intent.action is not Action.START
        and not intent.args.get("schedulerId")
        and sub.unknown_since is None
    ):
        # A call's NotFound is not a reading of the object: where the record's unknown clock already runs it adds
        # nothing, and marking the submission gone would make the next reading that shows it (Slurm's accounting,
        # after the queue forgot it) restart the clock: a user retrying `release` would keep it from ever ending.
        sub.gone = True


def default_owner(role: str) -> str:
    """The owner name of an actor in this process: its role, the host and the process id."""
    return f"{role}:{socket.gethostname()}:{os.getpid()}"
