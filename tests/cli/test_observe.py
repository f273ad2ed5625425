"""The read commands' refresh (``dispatch status``, ``show``, ``run`` without a supervisor) writes records through
the supervisor's one fold: fed the same record and evidence, it writes what the supervisor writes."""

from __future__ import annotations

import math
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from dispatch.declarations import Declarations
from dispatch.outcome import Cause, Evidence, Outcome, State
from dispatch.records import Event, JobRecord, Lease, MemoryRecords, Submission
from dispatch.records.model import Decision, ExecutionRecord, GateState
from dispatch.spec import JobSpec
from dispatch.spi import ExecutionEvidence, Gate, JobEvidence, Unanswered
from dispatch.supervise.fold import fold
from dispatch.supervise.next import needs_observation

T0 = 1_800_000_000.0
GRACE = 60.0
RULES = {"rules": [{"name": "evicted", "cause": "preempted", "action": "resubmit"}]}


class Scheduler:
    """A backend that shows what the test says, and counts what it was asked."""

    def __init__(self, shown: dict[str, JobEvidence | Unanswered] | None = None) -> None:
        self.shown: dict[str, JobEvidence | Unanswered] = shown or {}
        self.asked: list[list[str]] = []

    def declarations(self) -> Declarations:
        return Declarations(node_loss_window=GRACE, call_bound=30.0, polled_loss=None)

    def inspect_many(self, ids: Sequence[str]) -> dict[str, JobEvidence | Unanswered]:
        self.asked.append(list(ids))
        return {i: self.shown[i] for i in ids if i in self.shown}


def record(outcome: Outcome | None, *, rules: bool = True, executions: int = 1) -> JobRecord:
    sub = Submission(1, "dsp-j1-1", T0, scheduler_id="101", gate=GateState.OPEN, outcome=outcome)
    if outcome is not None:
        sub.executions = [ExecutionRecord(f"1.101.{i}", i, outcome, T0) for i in range(executions)]
    return JobRecord(
        id="j1",
        cluster="memory",
        spec=JobSpec(command=("true",)),
        created_at=T0,
        submissions=[sub],
        rules=RULES if rules else None,
    )


def outcome(state: State, cause: Cause | None, at: float, code: int | None = None) -> Outcome:
    return Outcome(state, cause, Evidence("memory:queue", at), exit_code=code)


def evidence(out: Outcome, *, holds: tuple[str, ...] = (), gate: Gate = Gate.OPEN) -> JobEvidence:
    ended = out.evidence.observed_at if out.ended else None
    ex = ExecutionEvidence("1.101.0", 0, out, T0, ended)
    return JobEvidence("101", "dsp-j1-1", out, gate, executions=(ex,), foreign_holds=holds)


def refreshed(job: JobRecord, sched: Scheduler, now: float) -> JobRecord:
    from dispatch.cli.observe import refresh

    records = MemoryRecords()
    stored = records.create(job)
    refresh(records, sched, [stored], now)  # type: ignore[arg-type]
    return records.get(job.id)


def test_unknown_evidence_of_a_live_job_starts_the_unknown_clock() -> None:
    """Without the clock a supervisor taking the job next decides at once on a rule for ``unknown``, instead of
    waiting for the NodeLossWindow (a job that was only unreachable is resubmitted while it runs)."""
    job = record(outcome(State.RUNNING, None, T0 + 5))
    sched = Scheduler({"101": evidence(outcome(State.UNKNOWN, Cause.UNKNOWN, T0 + 20))})
    sub = refreshed(job, sched, T0 + 20).current
    assert sub is not None and sub.outcome is not None and sub.outcome.state is State.UNKNOWN
    assert sub.unknown_since == T0 + 20


def test_an_object_missing_from_the_readers_view_is_on_the_clock_and_read_again() -> None:
    """Another user's credentials (or Slurm's PrivateData) hide the object: the reader marks it gone, and its fate
    unknown, on the clock; it is read again, and once it shows it is running again, not closed."""
    from dispatch.cli.observe import refresh

    records = MemoryRecords()
    records.create(record(outcome(State.RUNNING, None, T0 + 5), rules=False))
    hidden = Scheduler()
    refresh(records, hidden, [records.get("j1")], T0 + 20)  # type: ignore[arg-type]
    job = records.get("j1")
    assert job.current is not None and job.current.gone and job.current.unknown_since == T0 + 20
    assert not job.closed, "an object out of view for a moment is not an ending"
    shown = Scheduler({"101": evidence(outcome(State.RUNNING, None, T0 + 30))})
    refresh(records, shown, [job], T0 + 30)  # type: ignore[arg-type]
    assert shown.asked == [["101"]], "a gone submission on the unknown clock is read again"
    sub = records.get("j1").current
    assert sub is not None and not sub.gone and sub.unknown_since is None
    assert sub.outcome is not None and sub.outcome.state is State.RUNNING


def test_a_reader_never_records_the_absence_of_a_job_with_rules() -> None:
    """The supervisor decides by rules on an unknown that outlasts the NodeLossWindow. A reader whose view is
    narrower (another user's credentials, Slurm's PrivateData) must not start that clock: it shows the object
    missing, and writes nothing (5,000 simulator seeds found running jobs escalated or closed after a narrow
    reader's absence, e.g. ``python -m dispatch.sim --seed 11582``)."""
    from dispatch.cli.observe import refresh

    records = MemoryRecords()
    records.create(record(outcome(State.RUNNING, None, T0 + 5)))
    before = records.get("j1")
    [shown] = refresh(records, Scheduler(), [before], T0 + 20)  # type: ignore[arg-type]
    assert shown.current is not None and shown.current.gone, "the reader shows what it saw"
    after = records.get("j1")
    assert after.version == before.version and after.current is not None and after.current.unknown_since is None


def test_a_missing_object_of_a_job_without_rules_closes_only_after_the_bound() -> None:
    from dispatch.cli.observe import refresh

    records = MemoryRecords()
    records.create(record(outcome(State.RUNNING, None, T0 + 5), rules=False))
    refresh(records, Scheduler(), [records.get("j1")], T0 + 20)  # type: ignore[arg-type]
    refresh(records, Scheduler(), [records.get("j1")], T0 + 20 + GRACE - 1)  # type: ignore[arg-type]
    assert not records.get("j1").closed
    refresh(records, Scheduler(), [records.get("j1")], T0 + 20 + GRACE)  # type: ignore[arg-type]
    assert records.get("j1").closed


def test_an_end_seen_is_kept_when_the_object_reads_unknown_later() -> None:
    """A preempted job read as unknown afterwards (accounting purged) keeps its cause: overwritten with
    ``unknown``, another rule would match it."""
    job = record(outcome(State.FAILED, Cause.PREEMPTED, T0 + 5))
    sched = Scheduler({"101": evidence(outcome(State.UNKNOWN, Cause.UNKNOWN, T0 + 400))})
    sub = refreshed(job, sched, T0 + 400).current
    assert sub is not None and sub.outcome is not None
    assert (sub.outcome.state, sub.outcome.cause) == (State.FAILED, Cause.PREEMPTED)
    assert sub.executions[0].outcome.cause is Cause.PREEMPTED


def test_evidence_older_than_the_record_never_rewinds_it() -> None:
    job = record(outcome(State.FAILED, Cause.NODE_LOST, T0 + 50))
    sched = Scheduler({"101": evidence(outcome(State.RUNNING, None, T0 + 20))})
    sub = refreshed(job, sched, T0 + 60).current
    assert sub is not None and sub.outcome is not None
    assert (sub.outcome.state, sub.outcome.cause) == (State.FAILED, Cause.NODE_LOST)


def test_a_foreign_hold_on_a_waiting_object_is_admin_held() -> None:
    job = record(outcome(State.PENDING, None, T0 + 5))
    sched = Scheduler({"101": evidence(outcome(State.PENDING, None, T0 + 20), holds=("admin",))})
    sub = refreshed(job, sched, T0 + 20).current
    assert sub is not None and sub.outcome is not None
    assert (sub.outcome.state, sub.outcome.cause) == (State.HELD, Cause.ADMIN_HELD)


def test_show_lists_a_vanished_object_under_the_decision_it_led_to() -> None:
    """The supervisor writes ``vanished`` when the scheduler has no trace of an object; ``show`` lists that event
    under the decision it led to."""
    from dispatch.cli.views import render_show

    job = record(Outcome(State.UNKNOWN, Cause.UNKNOWN, Evidence("not-found", T0 + 10)))
    job.decisions = [Decision(1, T0 + 80, 1, "1.101.0", Cause.UNKNOWN, "resubmit", "lost", "rule matches", "sup")]
    events = [
        Event("j1", T0 + 10, "vanished", {"submission": 1, "state": "unknown"}, seq=1),
        Event("j1", T0 + 80, "decision", {"action": "resubmit"}, seq=2),
    ]
    text = render_show(job, events, T0 + 100)
    under = text.split("decisions (and the events that led to each)")[1].split("\nevents")[0]
    assert "vanished" in under


# ----- one fold: every path that writes, fed the same record and evidence, writes the same record ------------

_OUTCOMES = [
    None,
    (State.PENDING, None, None),
    (State.RUNNING, None, None),
    (State.UNKNOWN, Cause.UNKNOWN, None),
    (State.FAILED, Cause.PREEMPTED, None),
    (State.FAILED, Cause.NODE_LOST, None),
    (State.SUCCEEDED, Cause.EXIT, 0),
]
_EVIDENCE = [
    "missing",
    "unanswered",
    (State.PENDING, None, None),
    (State.RUNNING, None, None),
    (State.UNKNOWN, Cause.UNKNOWN, None),
    (State.FAILED, Cause.PREEMPTED, None),
    (State.FAILED, Cause.EXIT, 3),
    (State.SUCCEEDED, Cause.EXIT, 0),
]


@st.composite
def pairs(draw: st.DrawFn) -> tuple[JobRecord, JobEvidence | Unanswered | None, float]:
    """A record (possibly gone, on the unknown clock, with or without rules) and a reading of its object, made
    before, at or after the record's evidence, and the time it is folded at."""
    shape = draw(st.sampled_from(_OUTCOMES))
    at = T0 + draw(st.sampled_from([5.0, 20.0]))
    out = None if shape is None else outcome(shape[0], shape[1], at, shape[2])
    job = record(out, rules=draw(st.booleans()))
    sub = job.submissions[0]
    sub.gone = out is not None and draw(st.booleans())
    if out is not None and out.state is State.UNKNOWN:
        sub.unknown_since = draw(st.sampled_from([None, at, at - 50.0]))
    read_at = at + draw(st.sampled_from([-10.0, 0.0, 15.0, 59.0, 80.0]))
    kind = draw(st.sampled_from(_EVIDENCE))
    ev: JobEvidence | Unanswered | None
    if kind == "missing":
        ev = None
    elif kind == "unanswered":
        ev = Unanswered("101", "not yet", read_at)
    else:
        assert not isinstance(kind, str)
        holds = ("admin",) if kind[0] is State.PENDING and draw(st.booleans()) else ()
        ev = evidence(outcome(kind[0], kind[1], read_at, kind[2]), holds=holds)
    now = max(read_at, at) + draw(st.sampled_from([0.0, 1.0]))
    return job, ev, now


def _comparable(job: JobRecord) -> dict[str, object]:
    """The record as folded: what the evidence decides (not the version, times of writing, or the read
    commands' closing of a job without rules, a decision and not evidence)."""
    doc = job.to_json()
    for key in ("version", "updatedAt", "closed", "lease"):
        doc.pop(key, None)
    return doc


def _by_supervisor(job: JobRecord, ev: JobEvidence | Unanswered | None, now: float) -> JobRecord:
    """The supervisor's own fold of one inspected object (``Supervisor._fold``), with the backend's bound."""
    from dispatch.clock import FakeClock
    from dispatch.memory import MemoryScheduler, Shape
    from dispatch.memory import backend as memory_backend
    from dispatch.supervise.observation import Observation
    from dispatch.supervise.supervisor import Supervisor

    clock = FakeClock(now)
    sched = MemoryScheduler(clock, Shape.SLURM, nodes=1, node_loss_window=GRACE)
    sup = Supervisor(memory_backend(sched), MemoryRecords(), clock=clock, owner="sup", poll=10.0)
    read = {"101"} if needs_observation(job, now) else set()  # what its cycle reads (Supervisor._observe)
    obs = Observation(evidence={} if ev is None else {"101": ev}, inspected=read, inspected_at=now)
    folded, _ = sup._fold(job, obs, sup.refresh)
    return folded


@settings(max_examples=400, deadline=None)
@given(pair=pairs())
def test_every_path_that_writes_folds_the_same_record(
    pair: tuple[JobRecord, JobEvidence | Unanswered | None, float],
) -> None:
    """The one fold, the supervisor's fold of a cycle's observation, and the read commands' refresh (status,
    show, run without a supervisor): the same record and evidence give the same record; only the absence of a
    job with rules is left unwritten by a reader."""
    from dispatch.cli.observe import refresh

    job, ev, now = pair
    expected = job
    if needs_observation(job, now):  # the one test of whether to read, for every path
        expected, _ = fold(job, ev, now, observed_at=now, unanswered_grace=GRACE, refresh=math.inf)
    assert _comparable(_by_supervisor(job, ev, now)) == _comparable(expected)
    records = MemoryRecords()
    stored = records.create(job)
    refresh(records, Scheduler({} if ev is None else {"101": ev}), [stored], now)  # type: ignore[arg-type]
    written = records.get("j1")
    # a reader never writes the absence of a job with rules: that is the supervisor's (its view is the full one)
    assert _comparable(written) == _comparable(job if ev is None and job.rules is not None else expected)
    if job.lease is None and written.closed:
        assert job.rules is None, "a read command closes only a job without rules"


def test_a_job_a_live_supervisor_owns_is_shown_but_not_written() -> None:
    from dispatch.cli.observe import refresh

    records = MemoryRecords()
    job = record(outcome(State.RUNNING, None, T0 + 5))
    job.lease = Lease("supervisor:elsewhere", 1, expires_at=T0 + 100)
    stored = records.create(job)
    sched = Scheduler({"101": evidence(outcome(State.UNKNOWN, Cause.UNKNOWN, T0 + 20))})
    (seen,) = refresh(records, sched, [stored], T0 + 20)  # type: ignore[arg-type]
    assert seen.current is not None and seen.current.unknown_since == T0 + 20
    assert records.get("j1").version == stored.version


def test_a_job_with_an_open_intent_is_shown_but_not_written() -> None:
    """Resolving an intent is a supervisor's: a reader whose narrower view misses the object would resolve a
    hold that landed as failed (found by the simulator's second user: a hold nobody recorded, never lifted)."""
    from dispatch.cli.observe import refresh
    from dispatch.records.model import Action, Intent

    records = MemoryRecords()
    job = record(outcome(State.RUNNING, None, T0 + 5))
    job.intents = [Intent(1, Action.HOLD, 1, "operator:me", T0 + 10, T0 + 45, args={"instance": "u1"})]
    stored = records.create(job)
    (seen,) = refresh(records, Scheduler(), [stored], T0 + 60)  # type: ignore[arg-type]
    assert seen.current is not None and seen.current.gone, "shown as read"
    after = records.get("j1")
    assert after.version == stored.version and after.intents[0].open, "not written: the intent stays open"


def test_stop_stops_a_submission_a_reader_marked_gone() -> None:
    """A reader with a narrower view marked the object gone; a user's stop still stops it (found by the
    simulator's second user: a stopped job whose object was left behind)."""
    from dispatch.clock import FakeClock
    from dispatch.cluster import Cluster
    from dispatch.memory import MemoryScheduler, Shape
    from dispatch.memory import backend as memory_backend

    clock = FakeClock(T0)
    sched = MemoryScheduler(clock, Shape.SLURM, nodes=1)
    cluster = Cluster("memory", memory_backend(sched), MemoryRecords(), clock)
    job_id = cluster.operator.submit(JobSpec(command=("sleep", "100")))
    clock.advance(5.0)
    records = cluster.records
    assert records is not None
    marked = records.get(job_id)
    assert marked.current is not None and marked.current.scheduler_id is not None
    sid = marked.current.scheduler_id
    marked.current.gone = True
    records.update(marked, [])
    cluster.operator.stop(job_id)
    assert sched.jobs[sid].stopped, "the object a reader could not see is stopped"
