"""The record of one dispatch job: an aggregate written as a whole under optimistic concurrency.

A :class:`JobRecord` holds the job's spec and rules, its submissions (each one scheduler object) with their
executions, holds with their instances, intents (written *before* a backend call, resolved after), decisions,
escalations, and the lease of the supervisor that owns it. Every write replaces the aggregate and bumps
``version``; a store accepts a write only if the version it was read at is still current (see
:class:`~dispatch.records.base.Records`). Events go to an append-only history in the same transaction.

Records are plain data (dataclasses) with a JSON form; they are mutated freely in memory by pure functions and
only the store decides whether a write wins.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from dispatch.outcome import Cause, Outcome, State
from dispatch.spec import JobSpec


class GateState(StrEnum):
    """Where a submission's start gate is, as far as the record knows."""

    PLANNED = "planned"
    """Recorded; the scheduler object may not exist yet (a start intent is pending)."""
    CLOSED = "closed"
    """The object exists with its gate closed: it cannot run."""
    OPEN = "open"
    """dispatch opened the gate."""
    ABANDONED = "abandoned"
    """The start failed for certain, or the object was found gone before it opened."""


class IntentStatus(StrEnum):
    PENDING = "pending"
    """Written, the call is about to be (or being) made. Another writer must not act on it before
    ``deadline``."""
    DONE = "done"
    """The call took effect (answered, or proven by observation)."""
    FAILED = "failed"
    """The call certainly did not take effect (a definite refusal, or proven absent after the deadline)."""
    UNKNOWN = "unknown"
    """The call's outcome is unknown; resolve by observation once ``deadline`` has passed."""


class Action(StrEnum):
    """Things dispatch does to a scheduler, each written as an intent first."""

    START = "start"
    OPEN = "open"
    HOLD = "hold"
    RELEASE = "release"
    REQUEUE = "requeue"
    READMIT = "readmit"
    RESTART = "restart"
    STOP = "stop"


@dataclass(slots=True)
class ExecutionRecord:
    """One execution as last observed, with the evidence for it."""

    identity: str
    restart: int
    outcome: Outcome
    started_at: float | None = None
    ended_at: float | None = None
    nodes: list[str] = field(default_factory=list)
    resumed_at: float | None = None
    """When the supervisor first saw the execution running again after a reading showed it suspended (the
    time of that reading); None when it was never seen suspended. The stall bound runs from here at the
    earliest (:mod:`dispatch.supervise.stall`)."""

    def to_json(self) -> dict[str, Any]:
        out = {
            "identity": self.identity,
            "restart": self.restart,
            "outcome": self.outcome.to_json(),
            "startedAt": self.started_at,
            "endedAt": self.ended_at,
            "nodes": list(self.nodes),
        }
        if self.resumed_at is not None:
            out["resumedAt"] = self.resumed_at
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ExecutionRecord:
        return cls(
            identity=d["identity"],
            restart=d["restart"],
            outcome=Outcome.from_json(d["outcome"]),
            started_at=d.get("startedAt"),
            ended_at=d.get("endedAt"),
            nodes=list(d.get("nodes", [])),
            resumed_at=d.get("resumedAt"),
        )


@dataclass(slots=True)
class Submission:
    """The N-th scheduler object of a job. ``marker`` is written before the object is created."""

    n: int
    marker: str
    created_at: float
    scheduler_id: str | None = None
    gate: GateState = GateState.PLANNED
    executions: list[ExecutionRecord] = field(default_factory=list)
    outcome: Outcome | None = None
    """The submission's last observed outcome (its current execution's, or why it waits)."""
    gone: bool = False
    """The scheduler no longer shows the object (purged or deleted); evidence stays as last seen."""
    strays: list[str] = field(default_factory=list)
    """Other scheduler ids found carrying this marker (a late duplicate start); they are stopped, never run."""
    unknown_since: float | None = None
    """When the evidence of this not-yet-ended submission turned ``unknown`` (None while it is known). An
    unknown is not an ending until it has lasted the backend's bound (see ``unknown_grace``)."""
    unknown_seen_by: int | None = None
    """The fencing token of the supervisor lease under which ``unknown_since`` runs (None: started by a reader
    without one); a supervisor reading under another token restarts the clock
    (:mod:`dispatch.supervise.unknown_clock`)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "marker": self.marker,
            "createdAt": self.created_at,
            "schedulerId": self.scheduler_id,
            "gate": self.gate.value,
            "executions": [e.to_json() for e in self.executions],
            "outcome": self.outcome.to_json() if self.outcome else None,
            "gone": self.gone,
            "strays": list(self.strays),
            "unknownSince": self.unknown_since,
            "unknownSeenBy": self.unknown_seen_by,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Submission:
        return cls(
            n=d["n"],
            marker=d["marker"],
            created_at=d["createdAt"],
            scheduler_id=d.get("schedulerId"),
            gate=GateState(d.get("gate", "planned")),
            executions=[ExecutionRecord.from_json(e) for e in d.get("executions", [])],
            outcome=Outcome.from_json(d["outcome"]) if d.get("outcome") else None,
            gone=bool(d.get("gone", False)),
            strays=list(d.get("strays", [])),
            unknown_since=d.get("unknownSince"),
            unknown_seen_by=d.get("unknownSeenBy"),
        )


@dataclass(slots=True)
class HoldRecord:
    """A hold dispatch placed (or means to place): ``instance`` is its identity, ``owner`` who placed it."""

    instance: str
    owner: str
    submission: int
    placed_at: float
    reason: str = ""
    released_at: float | None = None

    @property
    def active(self) -> bool:
        return self.released_at is None

    def to_json(self) -> dict[str, Any]:
        return {
            "instance": self.instance,
            "owner": self.owner,
            "submission": self.submission,
            "placedAt": self.placed_at,
            "reason": self.reason,
            "releasedAt": self.released_at,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> HoldRecord:
        return cls(
            instance=d["instance"],
            owner=d["owner"],
            submission=d["submission"],
            placed_at=d["placedAt"],
            reason=d.get("reason", ""),
            released_at=d.get("releasedAt"),
        )


@dataclass(slots=True)
class Intent:
    """A backend call dispatch is about to make, written before it is made.

    ``deadline`` is when the call has certainly landed or never will (written-at + CallBound + the caller's
    own margin); until then no other writer may act on it. ``args`` are what is needed to check its effect
    (the restart count a requeue expects to raise, the hold instance).
    """

    seq: int
    action: Action
    submission: int
    owner: str
    written_at: float
    deadline: float
    status: IntentStatus = IntentStatus.PENDING
    args: dict[str, Any] = field(default_factory=dict)
    result: str = ""
    resolved_at: float | None = None
    decision: int | None = None
    """The decision this intent carries out, if any."""

    @property
    def open(self) -> bool:
        return self.status in (IntentStatus.PENDING, IntentStatus.UNKNOWN)

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "action": self.action.value,
            "submission": self.submission,
            "owner": self.owner,
            "writtenAt": self.written_at,
            "deadline": self.deadline,
            "status": self.status.value,
            "args": dict(self.args),
            "result": self.result,
            "resolvedAt": self.resolved_at,
            "decision": self.decision,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Intent:
        return cls(
            seq=d["seq"],
            action=Action(d["action"]),
            submission=d["submission"],
            owner=d["owner"],
            written_at=d["writtenAt"],
            deadline=d["deadline"],
            status=IntentStatus(d["status"]),
            args=dict(d.get("args", {})),
            result=d.get("result", ""),
            resolved_at=d.get("resolvedAt"),
            decision=d.get("decision"),
        )


@dataclass(slots=True)
class Decision:
    """What the supervisor chose for an execution's outcome, and why (the rule, or the unmatched policy)."""

    seq: int
    at: float
    submission: int
    execution: str
    cause: Cause
    action: str
    rule: str
    reason: str
    by: str

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "at": self.at,
            "submission": self.submission,
            "execution": self.execution,
            "cause": self.cause.value,
            "action": self.action,
            "rule": self.rule,
            "reason": self.reason,
            "by": self.by,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Decision:
        return cls(
            seq=d["seq"],
            at=d["at"],
            submission=d["submission"],
            execution=d["execution"],
            cause=Cause(d["cause"]),
            action=d["action"],
            rule=d["rule"],
            reason=d["reason"],
            by=d["by"],
        )


@dataclass(slots=True)
class Escalation:
    """A situation handed to humans: ``cause`` and a ``reason`` they can act on."""

    seq: int
    at: float
    cause: Cause
    reason: str
    submission: int | None = None
    resolved_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "at": self.at,
            "cause": self.cause.value,
            "reason": self.reason,
            "submission": self.submission,
            "resolvedAt": self.resolved_at,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Escalation:
        return cls(
            seq=d["seq"],
            at=d["at"],
            cause=Cause(d["cause"]),
            reason=d["reason"],
            submission=d.get("submission"),
            resolved_at=d.get("resolvedAt"),
        )


@dataclass(frozen=True, slots=True)
class BatchMember:
    """Which batch made a job (:meth:`~dispatch.cluster.Operator.submit_many`): the batch's key and the job's
    index in it. A retry of the batch with the same key finds its jobs by this."""

    key: str
    index: int

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "index": self.index}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BatchMember:
        return cls(str(d["key"]), int(d["index"]))


@dataclass(slots=True)
class Lease:
    """Which supervisor owns the job, until when, and the fencing token every owner's write carries."""

    owner: str
    token: int
    expires_at: float

    def to_json(self) -> dict[str, Any]:
        return {"owner": self.owner, "token": self.token, "expiresAt": self.expires_at}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Lease:
        return cls(owner=d["owner"], token=d["token"], expires_at=d["expiresAt"])


@dataclass(slots=True)
class Event:
    """One entry of a job's append-only history."""

    job_id: str
    at: float
    kind: str
    data: dict[str, Any] = field(default_factory=dict)
    seq: int = 0
    """Assigned by the store, increasing per store."""

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "jobId": self.job_id, "at": self.at, "kind": self.kind, "data": self.data}


@dataclass(slots=True)
class JobRecord:
    """A dispatch job as recorded. ``version`` is the store's; 0 means never written."""

    id: str
    cluster: str
    spec: JobSpec
    created_at: float
    rules: dict[str, Any] | None = None
    version: int = 0
    updated_at: float = 0.0
    submissions: list[Submission] = field(default_factory=list)
    holds: list[HoldRecord] = field(default_factory=list)
    intents: list[Intent] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    escalations: list[Escalation] = field(default_factory=list)
    lease: Lease | None = None
    closed: bool = False
    """No more actions will be taken: the job reached a final decision (done, given up, escalated, stopped)."""
    stop_requested: bool = False
    counters: dict[str, int] = field(default_factory=dict)
    """Action counts used for rule limits, keyed ``"<action>"``, ``"<action>:<cause>"`` and ``"total"``."""
    not_before: float = 0.0
    """Backoff: the supervisor takes no recovery action before this time."""
    batch: BatchMember | None = None
    """The batch that made the job, if ``submit_many`` did (absent from the JSON otherwise)."""

    # ----- derived views -------------------------------------------------------------------------------

    @property
    def current(self) -> Submission | None:
        return self.submissions[-1] if self.submissions else None

    def submission(self, n: int) -> Submission:
        for s in self.submissions:
            if s.n == n:
                return s
        raise KeyError(f"job {self.id} has no submission {n}")

    @property
    def outcome(self) -> Outcome | None:
        cur = self.current
        return cur.outcome if cur else None

    @property
    def state(self) -> State:
        out = self.outcome
        return out.state if out else State.PENDING

    @property
    def cause(self) -> Cause | None:
        out = self.outcome
        if out is None:
            return Cause.GATED
        return out.cause

    def open_intents(self) -> list[Intent]:
        return [i for i in self.intents if i.open]

    def next_seq(self, items: list[Any]) -> int:
        return (max((i.seq for i in items), default=0)) + 1

    def active_holds(self) -> list[HoldRecord]:
        return [h for h in self.holds if h.active]

    def copy(self) -> JobRecord:
        """A copy whose lists and records are its own; the spec, frozen, is shared (most of a deep copy's cost)."""
        return copy.deepcopy(self, {id(self.spec): self.spec})

    # ----- JSON -----------------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "cluster": self.cluster,
            "spec": self.spec.to_json(),
            "createdAt": self.created_at,
            "rules": self.rules,
            "version": self.version,
            "updatedAt": self.updated_at,
            "submissions": [s.to_json() for s in self.submissions],
            "holds": [h.to_json() for h in self.holds],
            "intents": [i.to_json() for i in self.intents],
            "decisions": [d.to_json() for d in self.decisions],
            "escalations": [e.to_json() for e in self.escalations],
            "lease": self.lease.to_json() if self.lease else None,
            "closed": self.closed,
            "stopRequested": self.stop_requested,
            "counters": dict(self.counters),
            "notBefore": self.not_before,
            **({"batch": self.batch.to_json()} if self.batch is not None else {}),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> JobRecord:
        return cls(
            id=d["id"],
            cluster=d["cluster"],
            spec=JobSpec.from_json(d["spec"]),
            created_at=d["createdAt"],
            rules=d.get("rules"),
            version=d.get("version", 0),
            updated_at=d.get("updatedAt", 0.0),
            submissions=[Submission.from_json(s) for s in d.get("submissions", [])],
            holds=[HoldRecord.from_json(h) for h in d.get("holds", [])],
            intents=[Intent.from_json(i) for i in d.get("intents", [])],
            decisions=[Decision.from_json(x) for x in d.get("decisions", [])],
            escalations=[Escalation.from_json(e) for e in d.get("escalations", [])],
            lease=Lease.from_json(d["lease"]) if d.get("lease") else None,
            closed=bool(d.get("closed", False)),
            stop_requested=bool(d.get("stopRequested", False)),
            counters=dict(d.get("counters", {})),
            not_before=float(d.get("notBefore", 0.0)),
            batch=BatchMember.from_json(d["batch"]) if d.get("batch") else None,
        )


@dataclass(frozen=True, slots=True)
class JobSummary:
    """The few fields a status table needs, readable without decoding the whole record."""

    id: str
    cluster: str
    name: str | None
    state: State
    cause: Cause | None
    exit_code: int | None
    execution: str | None
    created_at: float
    updated_at: float
    observed_at: float | None
    closed: bool
    version: int

    @classmethod
    def of(cls, job: JobRecord) -> JobSummary:
        out = job.outcome
        cur = job.current
        execution = cur.executions[-1].identity if cur and cur.executions else None
        return cls(
            id=job.id,
            cluster=job.cluster,
            name=job.spec.name,
            state=job.state,
            cause=job.cause,
            exit_code=out.exit_code if out else None,
            execution=execution,
            created_at=job.created_at,
            updated_at=job.updated_at,
            observed_at=out.evidence.observed_at if out else None,
            closed=job.closed,
            version=job.version,
        )

    @classmethod
    def from_row(cls, r: Sequence[Any]) -> JobSummary:
        """A summary from a store's row: id, cluster, name, state, cause, exit_code, execution, created_at,
        updated_at, observed_at, closed, version (the order of :data:`SUMMARY_COLUMNS`)."""
        return cls(
            id=r[0],
            cluster=r[1],
            name=r[2],
            state=State(r[3]),
            cause=Cause(r[4]) if r[4] else None,
            exit_code=r[5],
            execution=r[6],
            created_at=r[7],
            updated_at=r[8],
            observed_at=r[9],
            closed=bool(r[10]),
            version=r[11],
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "cluster": self.cluster,
            "name": self.name,
            "state": self.state.value,
            "cause": self.cause.value if self.cause else None,
            "exitCode": self.exit_code,
            "execution": self.execution,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "observedAt": self.observed_at,
            "closed": self.closed,
            "version": self.version,
        }


SUMMARY_COLUMNS = (
    "id, cluster, name, state, cause, exit_code, execution, created_at, updated_at, observed_at, closed, version"
)
"""The summary columns every SQL store keeps beside each job's document, in :meth:`JobSummary.from_row` order."""


def row_values(job: JobRecord, version: int | None = None) -> tuple[Any, ...]:
    """What an SQL store writes for ``job`` after its id, in :data:`ROW_COLUMNS` order: version, the summary
    columns, the JSON document, then the supervision columns (whether the job needs a supervisor, and its
    lease's owner and expiry). ``version``: write the job at that version (its document too), not at its own."""
    s = JobSummary.of(job)
    doc = job.to_json()
    if version is not None:
        doc["version"] = version
    return (
        job.version if version is None else version,
        job.cluster,
        s.name,
        s.state.value,
        s.cause.value if s.cause else None,
        s.exit_code,
        s.execution,
        job.closed,
        job.created_at,
        job.updated_at,
        s.observed_at,
        json.dumps(doc, separators=(",", ":")),
        needs_supervision(job),
        job.lease.owner if job.lease else None,
        job.lease.expires_at if job.lease else None,
    )


ROW_COLUMNS = (
    "version, cluster, name, state, cause, exit_code, execution, closed, created_at, updated_at, observed_at, doc,"
    " supervised, lease_owner, lease_expires"
)
"""The columns :func:`row_values` fills, in its order (the row's id comes first)."""


@dataclass(frozen=True, slots=True)
class JobHead:
    """What a supervisor needs to know of a job before it decodes it: its id and version (to reuse a copy it
    already holds) and its lease's owner and expiry (to skip jobs another supervisor holds)."""

    id: str
    version: int
    lease_owner: str | None
    lease_expires: float | None

    def takeable(self, owner: str, now: float) -> bool:
        """Whether ``owner`` holds this job's lease or may take it (free, or expired at ``now``)."""
        return self.lease_owner is None or self.lease_owner == owner or (self.lease_expires or 0.0) <= now


@dataclass(frozen=True, slots=True)
class Peers:
    """The supervisors of a cluster alive now (by owner, sorted) and the number of its jobs needing one."""

    owners: tuple[str, ...]
    jobs: int


def stops_the_job(intent: Intent) -> bool:
    """Whether a ``stop`` intent is a stop of the job (a user's, or an escalation's): not one of a stray duplicate
    (``schedulerId``), nor the supervisor's end of one stalled execution (``stalled``), after which the job goes
    on under its rules."""
    return intent.action is Action.STOP and not intent.args.get("schedulerId") and not intent.args.get("stalled")


def stray_handled(job: JobRecord, sid: str) -> bool:
    """A stray object of the job has been stopped (the stop's intent is done)."""
    return any(
        i.action is Action.STOP and i.args.get("schedulerId") == sid and i.status is IntentStatus.DONE
        for i in job.intents
    )


def final(sub: Submission) -> bool:
    """The submission has ended for good, as far as the evidence says (or its fate is unknown for good)."""
    out = sub.outcome
    if out is None:
        return sub.gate is GateState.ABANDONED
    return out.ended or out.state is State.UNKNOWN


def needs_supervision(job: JobRecord) -> bool:
    """A job a supervisor must still look at: open, or closed with an unresolved intent, a stray not yet
    stopped, or a stop whose object is not yet seen to have ended. Stores keep this beside the document
    (column ``supervised``), so the supervisor's query never reads the history of closed jobs."""
    if not job.closed:
        return True
    if any(i.open for i in job.intents):
        return True
    if any(not stray_handled(job, sid) for s in job.submissions for sid in s.strays):
        return True
    cur = job.current
    if job.stop_requested and cur is not None and cur.scheduler_id is not None and not cur.gone:
        return not final(cur)  # followed until the object is seen to have ended
    return False
