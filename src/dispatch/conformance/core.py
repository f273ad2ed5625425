"""Core conformance: every rule of the core contract, checked through the real Operator and Supervisor.

Each check builds a :class:`~dispatch.cluster.Cluster` (operator and observer) and a
:class:`~dispatch.supervise.Supervisor` over the harness's backend and a fresh in-memory record store, runs
supervisor cycles on the harness's clock, makes the scheduler do things through the harness's hooks, and reads
the result *only through* ``cluster.observer`` (records and events). A check that needs a hook, a behaviour or
an interface the harness lacks is skipped with the reason.

Any clock works. With a :class:`~dispatch.clock.FakeClock` (the memory adapter) time is advanced between
cycles; with the real clock (a real scheduler) the checks sleep between cycles, ``timings.poll`` apart, and
wait ``timings.wait`` plus what the backend declares for the situation: the NodeLossWindow for a lost node, the
CallBound for an unknown start. An unbounded NodeLossWindow skips the node-loss check with that reason.
Fault-injection checks need ``inject``: :func:`dispatch.conformance.faults.with_faults` gives any harness one.

Use it from an adapter's pytest run::

    @pytest.mark.parametrize("check", core_checks(), ids=str)
    def test_core(check, core_harness):
        run_core_check(check, core_harness)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from dispatch.capabilities import Capability
from dispatch.clock import Clock, FakeClock
from dispatch.cluster import Cluster
from dispatch.conformance.checks import ConformanceError, NotApplicable, Skip, expect, with_needs
from dispatch.conformance.harness import FAIL_EXIT_CODE, Harness
from dispatch.errors import ConfigError, OutcomeUnknown, ReadOnly
from dispatch.outcome import Cause, State
from dispatch.records.memory import MemoryRecords
from dispatch.records.model import Action, IntentStatus, JobRecord
from dispatch.rules import RuleAction, action_availability
from dispatch.spec import JobSpec
from dispatch.spi import Holder, Readmitter, Requeuer, Watcher, restrict
from dispatch.supervise import Supervisor


@dataclass
class CoreHarness:
    """A backend harness plus what the core checks need beyond it.

    ``base.clock`` is a :class:`~dispatch.clock.FakeClock` (time is advanced) or the real clock (the checks
    sleep). ``inject(method, kind, landed)`` fails the next call of a backend method (``unknown`` or
    ``unavailable``; see :mod:`dispatch.conformance.faults`); ``admin_release`` lifts an admin hold placed by
    ``base.admin_hold``. Hooks left None skip their checks with a reason.
    """

    base: Harness
    inject: Callable[[str, str, bool], None] | None = None
    admin_release: Callable[[str], None] | None = None
    exit_spec: Callable[[int], JobSpec | None] | None = None
    """A spec that runs briefly and exits with the given code (for requeue rules), or None."""

    @property
    def name(self) -> str:
        return self.base.name


@dataclass(frozen=True)
class CoreCheck:
    name: str
    fn: Callable[[CoreHarness], None]
    doc: str = ""
    needs: str = ""
    """The check's preconditions beyond a working backend (hooks, job behaviours, capacity, queueing)."""

    def __str__(self) -> str:
        return self.name


CORE_CHECKS: list[CoreCheck] = []

CoreFn = Callable[[CoreHarness], None]


def core_check(*, needs: str = "") -> Callable[[CoreFn], CoreFn]:
    def deco(fn: CoreFn) -> CoreFn:
        CORE_CHECKS.append(CoreCheck(fn.__name__.removeprefix("check_"), fn, (fn.__doc__ or "").strip(), needs))
        return fn

    return deco


def core_checks() -> list[CoreCheck]:
    """Every core check, for ``pytest.mark.parametrize`` (their ``str`` is their name)."""
    return list(CORE_CHECKS)


def run_core_check(c: CoreCheck, h: CoreHarness, *, strict: bool = False) -> None:
    """Run one check; under pytest a skip becomes ``pytest.skip`` with its reason. A check that does not apply
    to the backend (:class:`NotApplicable`) is always skipped, as "not applicable"; with ``strict``, a check
    that applies but skips (the harness cannot make its situation) raises ConformanceError instead. A failure's
    message ends with the check's preconditions."""
    import pytest

    try:
        c.fn(h)
    except NotApplicable as exc:
        pytest.skip(f"{c.name}: not applicable: {exc}")
    except Skip as exc:
        if strict:
            raise ConformanceError(with_needs(f"{c.name} skipped under a strict run: {exc}", c.needs)) from None
        pytest.skip(f"{c.name}: {exc}")
    except ConformanceError as exc:
        raise ConformanceError(with_needs(str(exc), c.needs)) from None


# ----- the world a check runs in ------------------------------------------------------------------------------


class World:
    def __init__(self, h: CoreHarness, rules: Any = None, backend: Any = None) -> None:
        self.h = h
        self.clock: Clock = h.base.clock
        self.fake = isinstance(self.clock, FakeClock)
        self.backend = backend if backend is not None else h.base.backend()
        self.records = MemoryRecords()
        self.cluster = Cluster("conformance", self.backend, self.records, self.clock)
        self.poll = min(10.0, _default_poll(self.backend))
        # a fake clock costs nothing to advance; a real one is slept, as often as the harness asks
        self.step = self.poll if self.fake else min(self.poll, h.base.timings.poll)
        self.sup = Supervisor(
            self.backend,
            self.records,
            clock=self.clock,
            owner="conformance-supervisor",
            poll=self.poll,
            cluster="conformance",
            default_rules=rules,
        )

    def spec(self, behaviour: str) -> JobSpec:
        spec = self.h.base.spec(behaviour)
        if spec is None:
            raise Skip(f"the harness cannot run a {behaviour!r} job")
        return spec

    def get(self, job_id: str) -> JobRecord:
        return self.cluster.observer.get(job_id)

    def sid(self, job_id: str) -> str:
        cur = self.get(job_id).current
        expect(cur is not None and cur.scheduler_id is not None, f"job {job_id} has no recorded scheduler object")
        assert cur is not None and cur.scheduler_id is not None
        return cur.scheduler_id

    def limited(self, spec: JobSpec) -> float:
        """The wait for a job that ends by its time limit: the usual wait plus the limit itself (the job's own
        duration, not the scheduler's latency)."""
        return self.h.base.timings.wait + (spec.time_limit or 0.0)

    def until(self, what: str, pred: Callable[[], bool], wait: float | None = None) -> None:
        """Run supervisor cycles, one poll interval apart, until ``pred`` holds or ``wait`` passes."""
        limit = self.clock.now() + (wait if wait is not None else self.h.base.timings.wait)
        while True:
            self.sup.cycle()
            if pred():
                return
            if self.clock.now() >= limit:
                raise ConformanceError(f"{what}: not seen within the wait")
            self.pause()

    def pause(self) -> None:
        """Let time pass between two cycles."""
        if isinstance(self.clock, FakeClock):
            self.clock.advance(self.step)
        else:
            self.clock.sleep(self.step)

    def cycles(self, n: int) -> None:
        for _ in range(n):
            self.sup.cycle()
            self.pause()

    def hook(self, name: str) -> Callable[[Any, str], None]:
        fn = getattr(self.h.base, name)
        if fn is None:
            raise Skip(f"the harness has no {name} hook")
        return fn  # type: ignore[no-any-return]


def _default_poll(backend: Any) -> float:
    from dispatch.supervise import default_poll

    return default_poll(backend.declarations())


@contextmanager
def world(h: CoreHarness, rules: Any = None, backend: Any = None) -> Iterator[World]:
    w = World(h, rules, backend)
    try:
        yield w
    finally:
        if h.base.cleanup is not None:
            for job in w.records.jobs(active_only=False):
                for s in job.submissions:
                    if s.scheduler_id:
                        h.base.cleanup(w.backend, s.scheduler_id)


EVICTED = {
    "rules": [{"name": "evicted", "cause": ["preempted", "node-lost", "cessation"], "action": "resubmit", "limit": 1}]
}


# ----- checks ---------------------------------------------------------------------------------------------------


@core_check(needs="a `sleep` job")
def check_submission_is_recorded_before_its_gate_opens(h: CoreHarness) -> None:
    """The start intent is written and done (scheduler id recorded) before the open intent is written."""
    with world(h) as w:
        job_id = w.cluster.submit(w.spec("sleep"))
        job = w.get(job_id)
        kinds = [(e.kind, e.data.get("action")) for e in w.cluster.observer.events(job_id)]
        expect(
            kinds[:5]
            == [("submitted", None), ("intent", "start"), ("call", "start"), ("intent", "open"), ("call", "open")],
            f"the write order was {kinds[:5]}",
        )
        cur = job.current
        assert cur is not None
        found = [f.scheduler_id for f in w.backend.find(cur.marker, 0.0)]
        expect(found == [cur.scheduler_id], f"objects carrying the marker: {found}, recorded {cur.scheduler_id}")
        expect(
            job.intents[0].action is Action.START and job.intents[0].status is IntentStatus.DONE,
            "the start intent is not done",
        )


@core_check(needs="a `succeed` job that starts and ends within `Timings.wait`")
def check_success_is_closed_with_evidence(h: CoreHarness) -> None:
    """A job that exits 0 is recorded succeeded (cause exit, code 0, with an evidence source) and closed."""
    with world(h) as w:
        job_id = w.cluster.submit(w.spec("succeed"))
        w.until("the job closing", lambda: w.get(job_id).closed)
        job = w.get(job_id)
        out = job.outcome
        expect(
            job.state is State.SUCCEEDED and out is not None and out.exit_code == 0 and out.cause is Cause.EXIT,
            f"recorded {job.state}/{job.cause}",
        )
        expect(bool(out and out.evidence.source), "no evidence source")


@core_check(needs="a `fail` job (exit 3) that starts and ends within `Timings.wait`")
def check_failure_keeps_its_exit_code_and_is_escalated(h: CoreHarness) -> None:
    """A non-zero exit is failed/exit with its code; with no rule, the unmatched policy escalates it."""
    with world(h) as w:
        job_id = w.cluster.submit(w.spec("fail"))
        w.until("the job closing", lambda: w.get(job_id).closed)
        job = w.get(job_id)
        expect(job.state is State.FAILED and job.cause is Cause.EXIT, f"recorded {job.state}/{job.cause}")
        expect(job.outcome is not None and job.outcome.exit_code == FAIL_EXIT_CODE, "the exit code was lost")
        expect([e.cause for e in job.escalations] == [Cause.EXIT], f"escalations {job.escalations}")
        expect(job.decisions[-1].rule == "unmatched", "the decision does not name the unmatched policy")


@core_check(needs="a `fail` job that starts and ends within `Timings.wait`")
def check_unmatched_close_policy(h: CoreHarness) -> None:
    """``unmatched = close`` closes an unmatched failure without escalating it."""
    with world(h, {"unmatched": "close"}) as w:
        job_id = w.cluster.submit(w.spec("fail"))
        w.until("the job closing", lambda: w.get(job_id).closed)
        expect(not w.get(job_id).escalations, "the close policy escalated")


@core_check(needs="a `timeout` job, ended by the scheduler within `Timings.wait` after its time limit")
def check_timeout_cause(h: CoreHarness) -> None:
    """A job past its time limit is recorded with cause timeout."""
    with world(h) as w:
        spec = w.spec("timeout")
        job_id = w.cluster.submit(spec)
        w.until("the timeout", lambda: w.get(job_id).cause is Cause.TIMEOUT, w.limited(spec))


@core_check(needs="an `oom` job and a cluster that enforces memory limits")
def check_out_of_memory_cause(h: CoreHarness) -> None:
    """A job over its memory limit is recorded with cause out-of-memory."""
    with world(h) as w:
        job_id = w.cluster.submit(w.spec("oom"))
        w.until("the out-of-memory end", lambda: w.get(job_id).cause is Cause.OUT_OF_MEMORY)


@core_check(needs="the `preempt` hook; a free slot (a `sleep` job starts within `Timings.wait`, twice)")
def check_preemption_is_resubmitted_by_rule(h: CoreHarness) -> None:
    """A preempted execution matching a resubmit rule gets submission 2, decided with the rule and reason."""
    with world(h, EVICTED) as w:
        preempt = w.hook("preempt")
        job_id = w.cluster.submit(w.spec("sleep"))
        w.until("the job running", lambda: w.get(job_id).state is State.RUNNING)
        preempt(w.backend, w.sid(job_id))
        w.until("submission 2", lambda: len(w.get(job_id).submissions) == 2 and w.get(job_id).state is State.RUNNING)
        d = w.get(job_id).decisions[0]
        expect((d.rule, d.action, d.cause) == ("evicted", "resubmit", Cause.PREEMPTED), f"decision {d}")
        expect(bool(d.reason), "the decision has no reason")


@core_check(needs="the `preempt` hook; a free slot (a `sleep` job starts within `Timings.wait`, twice)")
def check_rule_limit_is_honoured(h: CoreHarness) -> None:
    """A rule whose limit is reached no longer matches; the unmatched policy then decides."""
    with world(h, EVICTED) as w:
        preempt = w.hook("preempt")
        job_id = w.cluster.submit(w.spec("sleep"))
        for n in (1, 2):
            w.until(
                "the job running",
                lambda n=n: (
                    len(w.get(job_id).submissions) == n  # type: ignore[misc]
                    and w.get(job_id).state is State.RUNNING
                ),
            )
            preempt(w.backend, w.sid(job_id))
        w.until("the job closing", lambda: w.get(job_id).closed)
        job = w.get(job_id)
        expect(len(job.submissions) == 2, f"{len(job.submissions)} submissions for a limit of 1")
        expect("limit" in job.decisions[-1].reason, f"last decision: {job.decisions[-1].reason}")


@core_check(needs="the `lose_node` hook; a free slot; a bounded NodeLossWindow")
def check_node_loss_is_not_concluded_early(h: CoreHarness) -> None:
    """A lost node ends its job with cause node-lost within the NodeLossWindow, as the scheduler reports it:
    the supervisor never concludes node-lost before the scheduler says so. (How soon the scheduler says so is
    its own: within the window, at once for a node an administrator sets down, after its timeout for a silent
    one.)"""
    with world(h) as w:
        window = w.backend.declarations().node_loss_window
        if not math.isfinite(window):  # the backend's answer first: it decides before any harness limit
            raise NotApplicable(
                "the backend declares an unbounded NodeLossWindow: a lost node's job never ends by itself"
            )
        lose = w.hook("lose_node")
        job_id = w.cluster.submit(w.spec("sleep"))
        w.until("the job running", lambda: w.get(job_id).state is State.RUNNING)
        sid = w.sid(job_id)
        lost_at = w.clock.now()
        lose(w.backend, sid)
        lost = (Cause.NODE_LOST, Cause.CESSATION)
        w.until("node-lost", lambda: w.get(job_id).cause in lost and w.get(job_id).closed, h.base.timings.wait + window)
        # the record says node-lost: the scheduler, read after it, must say so too (an ending is final)
        ev = w.backend.inspect(sid)
        said = [x.outcome.cause for x in ev.executions if x.outcome.state.ended]
        expect(
            Cause.NODE_LOST in said or Cause.CESSATION in said,
            f"node-lost was recorded while the scheduler reads {ev.outcome.state}/{ev.outcome.cause}",
        )
        job = w.get(job_id)
        expect(job.outcome is not None and job.outcome.evidence.observed_at >= lost_at, "node-lost predates the loss")
        expect([e.cause for e in job.escalations] == [job.cause], f"escalations {job.escalations}")


@core_check(
    needs=(
        "the `admin_hold` hook and `admin_release`; `Harness.queue_fill` `sleep` jobs fill the cluster so the "
        "job under test queues (0 when the scheduler holds a job that could run at once)"
    )
)
def check_admin_hold_is_escalated_and_never_lifted(h: CoreHarness) -> None:
    """Someone else's hold reads admin-held, is escalated once, is never lifted by dispatch, and the escalation
    is resolved when the hold goes."""
    if h.admin_release is None:
        raise Skip("the harness cannot lift an admin hold")
    with world(h) as w:
        hold = w.hook("admin_hold")
        # the harness says how many long jobs fill its cluster, so the job under test waits in the queue
        blockers = [w.cluster.submit(w.spec("sleep")) for _ in range(h.base.queue_fill)]
        job_id = w.cluster.submit(w.spec("sleep"))
        hold(w.backend, w.sid(job_id))
        w.until("admin-held", lambda: w.get(job_id).cause is Cause.ADMIN_HELD or w.get(job_id).escalations != [])
        w.cycles(3)
        job = w.get(job_id)
        expect([e.cause for e in job.escalations] == [Cause.ADMIN_HELD], f"escalations {job.escalations}")
        expect(not job.closed, "an admin hold closed the job")
        expect(not any(i.action is Action.RELEASE for i in job.intents), "dispatch tried to release an admin hold")
        h.admin_release(w.sid(job_id))
        w.until("the escalation resolved", lambda: w.get(job_id).escalations[0].resolved_at is not None)
        for b in blockers:
            w.cluster.operator.stop(b)


@core_check(needs="fault injection (`inject`, given by `with_faults`); a free slot")
def check_failed_poll_keeps_the_last_state(h: CoreHarness) -> None:
    """An unavailable status read is not a job failure: the record keeps its last state and its evidence."""
    if h.inject is None:
        raise Skip("the harness cannot inject faults")
    with world(h) as w:
        job_id = w.cluster.submit(w.spec("sleep"))
        w.until("the job running", lambda: w.get(job_id).state is State.RUNNING)
        before = w.get(job_id).outcome
        for method in ("inspect_many", "watch"):
            h.inject(method, "unavailable", False)
        w.cycles(1)
        job = w.get(job_id)
        expect(job.state is State.RUNNING and not job.closed and job.outcome == before, f"recorded {job.state}")


@core_check(needs="fault injection; a polled backend (not a Watcher); a free slot")
def check_unanswered_read_keeps_the_last_state(h: CoreHarness) -> None:
    """A status read with no answer yet for a job (Unanswered) is not an ending: the record keeps its last
    state, nothing is decided, and the next answer is folded as usual."""
    with world(h) as w:
        if isinstance(w.backend, Watcher):
            raise NotApplicable("a Watcher's supervisor reads a job only when the watch reports it changed")
        if h.inject is None:
            raise Skip("the harness cannot inject faults")
        job_id = w.cluster.submit(w.spec("sleep"))
        w.until("the job running", lambda: w.get(job_id).state is State.RUNNING)
        before = w.get(job_id).outcome
        for _ in range(2):
            h.inject("inspect_many", "unanswered", False)
            w.cycles(1)
            job = w.get(job_id)
            expect(job.state is State.RUNNING and not job.closed, f"an unanswered read recorded {job.state}")
            expect(job.outcome == before, "an unanswered read replaced the last evidence")
            expect(len(job.submissions) == 1 and not job.decisions, "an unanswered read led to a decision")
            expect(job.current is not None and job.current.unknown_since is not None, "no unknown clock started")
        w.until("the answer folded", lambda: (c := w.get(job_id).current) is not None and c.unknown_since is None)
        expect(w.get(job_id).state is State.RUNNING, f"after the answer: {w.get(job_id).state}")


@core_check(needs="fault injection; a `succeed` job that ends within `Timings.wait` plus the CallBound")
def check_unknown_start_is_resolved_by_marker(h: CoreHarness) -> None:
    """A start whose outcome is unknown is never made again blindly: after the deadline the object is found
    by its marker and adopted (exactly one object), then opened."""
    if h.inject is None:
        raise Skip("the harness cannot inject faults")
    with world(h) as w:
        h.inject("start", "unknown", True)
        try:
            w.cluster.submit(w.spec("succeed"))
            raise ConformanceError("the injected unknown outcome was not raised")
        except OutcomeUnknown:
            pass
        job_id = w.records.jobs()[0].id
        w.until(
            "the job closing", lambda: w.get(job_id).closed, h.base.timings.wait + w.backend.declarations().call_bound
        )
        job = w.get(job_id)
        starts = [i for i in job.intents if i.action is Action.START]
        expect(len(starts) == 1 and starts[0].status is IntentStatus.DONE, f"starts {starts}")
        expect(len(w.backend.find(job.current.marker, 0.0)) == 1, "more than one object carries the marker")  # type: ignore[union-attr]
        expect(job.state is State.SUCCEEDED, f"recorded {job.state}")


@core_check(needs="a `timeout` job; a cluster whose HOLD capability is yes")
def check_hold_rule_belongs_to_the_supervisor(h: CoreHarness) -> None:
    """A hold rule starts the next submission under a hold the supervisor owns; an operator does not lift it
    unless a human names its instance."""
    with world(h, {"rules": [{"cause": "timeout", "action": "hold"}]}) as w:
        if not isinstance(w.backend, Holder) or not w.cluster.capabilities()[Capability.HOLD].yes:
            raise NotApplicable("this cluster cannot hold")
        spec = w.spec("timeout")
        job_id = w.cluster.submit(spec)
        w.until(
            "the held submission 2",
            lambda: w.get(job_id).cause is Cause.HELD and len(w.get(job_id).submissions) == 2,
            w.limited(spec),
        )
        job = w.get(job_id)
        hold = job.active_holds()[0]
        expect(hold.owner == w.sup.owner, f"the hold belongs to {hold.owner}")
        expect(w.cluster.operator.release(job_id) == [], "an operator lifted the supervisor's hold")
        expect(w.cluster.operator.release(job_id, hold.instance) == [hold.instance], "a named release failed")
        w.until("the job running again", lambda: w.get(job_id).state is State.RUNNING)


@core_check(needs="`exit_spec` (a job exiting 75); a Requeuer that can requeue an ended execution")
def check_requeue_rule(h: CoreHarness) -> None:
    """A requeue rule runs the same submission again as a new execution (restart + 1).

    The supervisor decides on ended executions only. A Requeuer that cannot requeue an ended execution says so
    (``requeue_after_end``, as Slurm does for its ``--no-requeue`` jobs): the rule must then be refused at
    load, naming it, and the check skips with the Reason. A backend that accepts the rule must carry it out."""
    rules = {"rules": [{"name": "again", "cause": "exit", "exitCodes": [75], "action": "requeue", "limit": 1}]}
    with world(h) as w:
        requeues = isinstance(w.backend, Requeuer)  # kept as a bool: w.backend stays typed as a Backend
        if not requeues:
            raise NotApplicable("the backend offers no Requeuer")
        answer = action_availability(RuleAction.REQUEUE, w.backend, w.backend.capabilities())
        if not answer.yes:
            try:
                Supervisor(w.backend, w.records, clock=w.clock, poll=w.poll, default_rules=rules)
            except ConfigError as exc:
                expect(exc.path == "rules[0]" and "again" in str(exc), f"the error names {exc.path}: {exc}")
                raise NotApplicable(f"requeue rules are refused at load on this cluster: {answer.reason}") from None
            raise ConformanceError(f"a requeue rule was accepted although requeue is {answer.answer.value}")
    if h.exit_spec is None or h.exit_spec(75) is None:
        raise Skip("the harness has no exit-code spec")
    with world(h, rules) as w:
        spec = h.exit_spec(75)
        assert spec is not None
        job_id = w.cluster.submit(spec)
        w.until("the job closing", lambda: w.get(job_id).closed)
        job = w.get(job_id)
        expect(len(job.submissions) == 1, "a requeue made a new submission")
        d = job.decisions[0]
        expect((d.rule, d.action, d.cause) == ("again", "requeue", Cause.EXIT), f"decision {d}")
        tries = [i for i in job.intents if i.action is Action.REQUEUE]
        expect(bool(tries), "the requeue rule made no requeue")
        expect(
            tries[0].status is not IntentStatus.FAILED,
            f"the requeue of an ended execution failed ({tries[0].result}): a Requeuer that cannot requeue an "
            "ended execution must say so through requeue_after_end, so the rule is refused at load",
        )
        restarts = [e.restart for e in job.submissions[0].executions]
        expect(restarts == [0, 1], f"executions {restarts}: no second execution")


@core_check(needs="the `preempt` hook; a Readmitter; a free slot")
def check_readmit_rule(h: CoreHarness) -> None:
    """A readmit rule lets a job its queue preempted run again through the Readmitter: the same submission,
    one new execution, no new submission; the decision and the intent are recorded like any other."""
    probe = h.base.backend()
    try:
        if not isinstance(probe, Readmitter):
            raise NotApplicable("the backend offers no Readmitter (nothing here waits for dispatch to readmit a job)")
    finally:
        probe.close()
    with world(h, {"rules": [{"name": "back", "cause": "preempted", "action": "readmit", "limit": 1}]}) as w:
        preempt = w.hook("preempt")
        job_id = w.cluster.submit(w.spec("sleep"))
        w.until("the job running", lambda: w.get(job_id).state is State.RUNNING)
        preempt(w.backend, w.sid(job_id))
        w.until(
            "running again after the readmission",
            lambda: w.get(job_id).state is State.RUNNING and len(w.get(job_id).current.executions) == 2,  # type: ignore[union-attr]
        )
        job = w.get(job_id)
        expect(len(job.submissions) == 1, f"a readmission made {len(job.submissions)} submissions")
        first = job.submissions[0].executions[0]
        expect(first.outcome.cause is Cause.PREEMPTED, f"the first execution reads {first.outcome.cause}")
        expect([(d.action, d.rule) for d in job.decisions] == [("readmit", "back")], f"decisions {job.decisions}")
        calls = [(i.action, i.status) for i in job.intents if i.action is Action.READMIT]
        expect(calls == [(Action.READMIT, IntentStatus.DONE)], f"readmit intents {calls}")
        w.cluster.operator.stop(job_id)


@core_check()
def check_unavailable_rule_action_is_refused(h: CoreHarness) -> None:
    """Rules naming an action the cluster cannot perform are refused at load, naming the rule."""
    with world(h) as w:
        reduced = restrict(w.backend, (Holder,))
        try:
            Supervisor(
                reduced,
                w.records,
                clock=w.clock,
                poll=w.poll,
                default_rules={"rules": [{"name": "park", "cause": "timeout", "action": "hold"}]},
            )
        except ConfigError as exc:
            expect(exc.path == "rules[0]" and "park" in str(exc), f"the error names {exc.path}: {exc}")
            return
        raise ConformanceError("a hold rule was accepted on a backend without a Holder")


@core_check(needs="a polled backend that declares PolledLoss")
def check_poll_interval_is_checked(h: CoreHarness) -> None:
    """A polled backend refuses a poll interval longer than its shortest PolledLoss window."""
    with world(h) as w:
        loss = w.backend.declarations().polled_loss
        shortest = loss.shortest() if loss is not None else None
        if shortest is None:
            raise NotApplicable("the backend is a Watcher or loses no evidence")
        try:
            Supervisor(w.backend, w.records, clock=w.clock, poll=shortest * 2)
        except ConfigError as exc:
            expect(exc.path == "poll", f"the error names {exc.path}")
            return
        raise ConformanceError("a too-slow poll interval was accepted")


@core_check(needs="a free slot: a `sleep` job must start within `Timings.wait`")
def check_stop_ends_and_closes(h: CoreHarness) -> None:
    """A stop ends the object and the job is recorded cancelled and closed."""
    with world(h) as w:
        job_id = w.cluster.submit(w.spec("sleep"))
        w.until("the job running", lambda: w.get(job_id).state is State.RUNNING)
        w.cluster.operator.stop(job_id)
        w.until("cancelled", lambda: w.get(job_id).state is State.CANCELLED)
        expect(w.get(job_id).closed, "a stopped job stayed open")


@core_check(needs="the harness's `read_only_backend`")
def check_read_only_refuses_writes(h: CoreHarness) -> None:
    """A read-only cluster refuses every operator write before anything runs."""
    if h.base.read_only_backend is None:
        raise Skip("the harness has no read-only backend")
    ro = Cluster("conformance", h.base.read_only_backend(), None, h.base.clock, read_only=True)
    for call in (lambda: ro.submit(JobSpec(command=("true",))), lambda: ro.operator.stop("x")):
        try:
            call()
        except ReadOnly:
            continue
        raise ConformanceError("a read-only cluster accepted a write")


@core_check(needs="capacity or a queue for four `sleep` jobs")
def check_observation_is_batched(h: CoreHarness) -> None:
    """One supervisor cycle costs the same number of backend calls with one job as with several."""
    with world(h) as w:
        w.cluster.submit(w.spec("sleep"))
        w.cycles(2)
        one = w.sup.cycle().observation_calls
        for _ in range(3):
            w.cluster.submit(w.spec("sleep"))
        w.cycles(2)
        many = w.sup.cycle().observation_calls
        expect(many == one, f"{one} observation calls for 1 job, {many} for 4")


__all__ = ["CORE_CHECKS", "CoreCheck", "CoreHarness", "core_checks", "run_core_check"]
