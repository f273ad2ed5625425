"""The backend conformance checks: object-level behaviour every adapter must show, through the SPI alone.

Each :class:`Check` is a function of a :class:`~dispatch.conformance.harness.Harness`. Two kinds of "did not
run", kept apart in both suites:

* **not applicable** (:class:`NotApplicable`): the backend lacks what the check is about (an optional interface it
  does not implement, ``requires``; a capability its cluster answers no). Never a failure, not even with
  ``strict``.
* **skipped** (:class:`Skip`): the check applies but the harness cannot make its situation (a hook or a job
  behaviour it lacks). With ``strict`` that is a failure.

Each check states its preconditions (``needs``: capacity, queueing, hooks, durations); they are in
docs/spi.md and in every failure message. A failed check raises :class:`ConformanceError` saying what was
expected and what was seen.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import ClassVar

from dispatch.capabilities import Capability
from dispatch.conformance.harness import ECHO_STDERR, ECHO_STDOUT, FAIL_EXIT_CODE, Harness
from dispatch.errors import NotFound, ReadOnly, Rejected, Unsupported
from dispatch.extensions import Extension, register_extension
from dispatch.outcome import Cause, State
from dispatch.spec import JobSpec
from dispatch.spi import (
    Backend,
    CessationSignal,
    Gate,
    Holder,
    IdentityWeakener,
    JobEvidence,
    MultiFinder,
    NativePolicyCompiler,
    OutputReader,
    Readmitter,
    Requeuer,
    StartRequest,
    Watcher,
    check_backend,
)


class ConformanceError(AssertionError):
    """A backend did not behave as the contract says."""


class Skip(Exception):
    """The harness cannot make the situation a check needs; the message says why (a failure under ``strict``)."""


class NotApplicable(Skip):
    """The check cannot apply to this backend (it lacks the interface or capability the check is about); the
    message is the Reason. Reported not applicable in both suites, never a failure."""


@register_extension
@dataclass(frozen=True)
class NeverAccepted(Extension):
    """An extension no adapter accepts: the suite uses it to see refusals happen before any call."""

    kind: ClassVar[str] = "conformance.NeverAccepted"


@dataclass(frozen=True)
class Check:
    name: str
    fn: Callable[[Harness], None]
    requires: type | None = None
    doc: str = ""
    needs: str = ""
    """The check's preconditions beyond a working backend (hooks, job behaviours, capacity, queueing)."""


CHECKS: list[Check] = []


def check(
    requires: type | None = None, *, needs: str = ""
) -> Callable[[Callable[[Harness], None]], Callable[[Harness], None]]:
    def deco(fn: Callable[[Harness], None]) -> Callable[[Harness], None]:
        name = fn.__name__.removeprefix("check_")
        CHECKS.append(Check(name, fn, requires, (fn.__doc__ or "").strip(), needs))
        return fn

    return deco


def with_needs(message: str, needs: str) -> str:
    """A failure message followed by the check's preconditions, so a failure says what the check assumed."""
    return f"{message}\n(this check needs: {needs})" if needs else message


# ----- helpers ----------------------------------------------------------------------------------------------


def expect(cond: bool, message: str) -> None:
    if not cond:
        raise ConformanceError(message)


class Session:
    """One check's backend, with the objects it created (cleaned up at the end)."""

    def __init__(self, h: Harness) -> None:
        self.h = h
        self.backend = h.backend()
        self.created: list[str] = []
        self.job_id = f"cf{secrets.token_hex(4)}"
        self.n = 0

    def spec(self, behaviour: str) -> JobSpec:
        spec = self.h.spec(behaviour)
        if spec is None:
            raise Skip(f"the harness cannot make a job that shows {behaviour!r}")
        return spec

    def start(self, behaviour: str = "sleep", spec: JobSpec | None = None) -> tuple[str, str]:
        self.n += 1
        marker = f"dsp-{self.job_id}-{self.n}"
        sid = self.backend.start(StartRequest(self.job_id, self.n, marker, spec or self.spec(behaviour)))
        expect(isinstance(sid, str) and bool(sid), f"start returned {sid!r}, not a scheduler id")
        self.created.append(sid)
        return sid, marker

    def run(self, behaviour: str) -> str:
        sid, _ = self.start(behaviour)
        self.backend.open(sid)
        return sid

    def wait(self, sid: str, what: str, pred: Callable[[JobEvidence], bool], extra: float = 0.0) -> JobEvidence:
        """Read the job every poll until ``pred`` holds; fail after the harness's wait plus ``extra`` (a time
        limit the job must first run out)."""
        clock, t = self.h.clock, self.h.timings
        wait = t.wait + extra
        deadline = clock.now() + wait
        last: JobEvidence | None = None
        while True:
            last = self.backend.inspect(sid)
            if pred(last):
                return last
            if clock.now() >= deadline:
                raise ConformanceError(f"{what}: not seen within {wait:g}s; last evidence: {last.outcome}")
            clock.sleep(t.poll)

    def quiet(self, sid: str, what: str, pred: Callable[[JobEvidence], bool]) -> JobEvidence:
        """Observe for the quiet period; ``pred`` must hold at every observation."""
        clock, t = self.h.clock, self.h.timings
        end = clock.now() + t.quiet
        while True:
            ev = self.backend.inspect(sid)
            expect(pred(ev), f"{what}: violated: {ev.outcome} gate={ev.gate.value} executions={len(ev.executions)}")
            if clock.now() >= end:
                return ev
            clock.sleep(t.poll)

    def close(self) -> None:
        for sid in self.created:
            try:
                if self.h.cleanup is not None:
                    self.h.cleanup(self.backend, sid)
                else:
                    self.backend.stop_job(sid)
            except (NotFound, Rejected, ReadOnly):
                pass
        self.backend.close()


@contextmanager
def session(h: Harness) -> Iterator[Session]:
    s = Session(h)
    try:
        yield s
    finally:
        s.close()


def ran(ev: JobEvidence) -> bool:
    return bool(ev.executions) and any(e.started_at is not None for e in ev.executions)


def ended(ev: JobEvidence) -> bool:
    return ev.outcome.state.ended


def running(ev: JobEvidence) -> bool:
    return ev.outcome.state is State.RUNNING


# ----- declarations and capabilities ----------------------------------------------------------------------


@check()
def check_declarations_follow_the_rules(h: Harness) -> None:
    """Declarations agree with the interfaces: zero CallBound has no Holder/Requeuer, PolledLoss iff polled."""
    with session(h) as s:
        check_backend(s.backend, s.backend.declarations())


@check()
def check_capabilities_complete(h: Harness) -> None:
    """Every capability has an answer and a reason."""
    with session(h) as s:
        caps = s.backend.capabilities()
        expect(set(caps) == set(Capability), "not every capability is answered")
        for cap, a in caps.items():
            expect(bool(a.reason), f"{cap.value} has no reason")


# ----- the start gate ----------------------------------------------------------------------------------------


@check(needs="a `succeed` job; it is watched for `Timings.quiet` seconds and must not run")
def check_start_is_gated(h: Harness) -> None:
    """A started object waits behind the closed gate and never runs until opened."""
    with session(h) as s:
        sid, marker = s.start("succeed")
        ev = s.backend.inspect(sid)
        expect(ev.gate is Gate.CLOSED, f"a new object's gate is {ev.gate.value}, not closed")
        expect(ev.marker in (None, marker), f"the object carries marker {ev.marker!r}, not {marker!r}")
        expect(
            ev.outcome.state is State.PENDING and ev.outcome.cause is Cause.GATED,
            f"a gated object reads {ev.outcome.state.value}/{ev.outcome.cause}, not pending/gated",
        )
        s.quiet(sid, "a gated object must not run", lambda e: not ran(e) and e.outcome.state is State.PENDING)


@check(needs="a free slot: a `sleep` job must start within `Timings.wait`")
def check_open_runs_and_is_idempotent(h: Harness) -> None:
    """Opening the gate lets the job run; opening again is harmless."""
    with session(h) as s:
        sid, _ = s.start("sleep")
        s.backend.open(sid)
        s.backend.open(sid)
        ev = s.wait(sid, "the opened job runs", running)
        expect(ev.gate is Gate.OPEN, "an opened object's gate reads closed")
        cur = ev.current
        expect(cur is not None and bool(cur.identity), "a running job shows no execution identity")


@check(needs="a `succeed` job that starts and ends within `Timings.wait`")
def check_success_needs_exit_zero(h: Harness) -> None:
    """A job that ends well reads succeeded, cause exit, exit code 0."""
    with session(h) as s:
        sid = s.run("succeed")
        ev = s.wait(sid, "the job ends", ended)
        expect(ev.outcome.state is State.SUCCEEDED, f"a clean exit reads {ev.outcome.state.value}")
        expect(ev.outcome.cause is Cause.EXIT and ev.outcome.exit_code == 0, f"success reads {ev.outcome}")


@check(needs="a `fail` job (exit 3) that starts and ends within `Timings.wait`")
def check_failure_keeps_exit_code(h: Harness) -> None:
    """A non-zero exit reads failed, cause exit, with its exit code."""
    with session(h) as s:
        sid = s.run("fail")
        ev = s.wait(sid, "the job ends", ended)
        expect(
            ev.outcome.state is State.FAILED and ev.outcome.cause is Cause.EXIT,
            f"exit {FAIL_EXIT_CODE} reads {ev.outcome.state.value}/{ev.outcome.cause}",
        )
        expect(ev.outcome.exit_code == FAIL_EXIT_CODE, f"exit code read as {ev.outcome.exit_code}")


@check(needs="a `timeout` job, ended by the scheduler within `Timings.wait` after its time limit")
def check_timeout_cause(h: Harness) -> None:
    """A job past its time limit ends with cause timeout."""
    with session(h) as s:
        limit = s.spec("timeout").time_limit or 0.0
        sid = s.run("timeout")
        ev = s.wait(sid, "the job times out", ended, limit)
        expect(ev.outcome.cause is Cause.TIMEOUT, f"a timed-out job reads cause {ev.outcome.cause}")


@check(needs="an `oom` job and a cluster that enforces memory limits, ending it within `Timings.wait`")
def check_out_of_memory_cause(h: Harness) -> None:
    """A job over its memory limit ends with cause out-of-memory."""
    with session(h) as s:
        sid = s.run("oom")
        ev = s.wait(sid, "the job runs out of memory", ended)
        expect(ev.outcome.cause is Cause.OUT_OF_MEMORY, f"an OOM job reads cause {ev.outcome.cause}")


@check()
def check_unknown_id_is_not_found(h: Harness) -> None:
    """An id the scheduler never had is NotFound, never a guessed outcome."""
    with session(h) as s:
        try:
            ev = s.backend.inspect("999999999")
        except NotFound:
            pass
        else:
            raise ConformanceError(f"an unknown id was inspected as {ev.outcome}")


@check(needs="two gated `succeed` jobs (they never run)")
def check_inspect_many_is_one_view(h: Harness) -> None:
    """inspect_many answers like inspect, leaving out ids with no trace."""
    with session(h) as s:
        a, _ = s.start("succeed")
        b, _ = s.start("succeed")
        many = s.backend.inspect_many([a, b, "999999999"])
        expect(set(many) == {a, b}, f"inspect_many returned ids {sorted(many)}")
        for sid in (a, b):
            got = many[sid]
            expect(isinstance(got, JobEvidence), f"inspect_many has no answer yet for a waiting object: {got}")
            assert isinstance(got, JobEvidence)
            one = s.backend.inspect(sid)
            expect(got.outcome.state is one.outcome.state, "inspect_many disagrees with inspect")
            expect(got.gate is one.gate, "inspect_many disagrees with inspect on the gate")


@check(needs="a gated `succeed` job (it never runs)")
def check_find_by_marker(h: Harness) -> None:
    """find locates exactly the object carrying a marker, within the horizon."""
    with session(h) as s:
        before = h.clock.now() - 1
        sid, marker = s.start("succeed")
        found = s.backend.find(marker, before - 60)
        expect([f.scheduler_id for f in found] == [sid], f"find({marker}) returned {found}")
        expect(s.backend.find(f"{marker}-none", before - 60) == [], "find returned objects for an unused marker")


@check(needs="a free slot: a `sleep` job must start within `Timings.wait`")
def check_stop_running(h: Harness) -> None:
    """Stopping a running job ends it with cause cancelled, within the returned bound (plus the wait)."""
    with session(h) as s:
        sid = s.run("sleep")
        s.wait(sid, "the job runs", running)
        bound = s.backend.stop_job(sid)
        expect(bound >= 0, f"stop_job returned a negative bound {bound}")
        ev = s.wait(sid, "the stopped job ends", ended)
        expect(
            ev.outcome.state is State.CANCELLED and ev.outcome.cause is Cause.CANCELLED,
            f"a stopped job reads {ev.outcome.state.value}/{ev.outcome.cause}",
        )


@check(needs="a gated `succeed` job")
def check_stop_gated_never_runs(h: Harness) -> None:
    """Stopping a gated job ends it without it ever running."""
    with session(h) as s:
        sid, _ = s.start("succeed")
        s.backend.stop_job(sid)
        try:
            ev = s.wait(sid, "the stopped gated job ends", ended)
        except NotFound:
            return
        expect(not ran(ev), "a job stopped behind its gate ran")


@check(needs="a `succeed` spec")
def check_refuses_unaccepted_extension(h: Harness) -> None:
    """An extension the adapter does not accept is Unsupported, and nothing is created."""
    with session(h) as s:
        base = s.spec("succeed")
        spec = JobSpec(command=base.command, nodes=base.nodes, extensions=(*base.extensions, NeverAccepted()))
        marker = f"dsp-{s.job_id}-99"
        since = h.clock.now() - 60
        try:
            sid = s.backend.start(StartRequest(s.job_id, 99, marker, spec))
        except Unsupported:
            expect(s.backend.find(marker, since) == [], "a refused start left an object behind")
            return
        s.created.append(sid)
        raise ConformanceError("an unaccepted extension was not refused")


@check(needs="the harness's `read_only_backend`")
def check_read_only_refuses_writes(h: Harness) -> None:
    """A read-only backend refuses every write with ReadOnly and still reads."""
    if h.read_only_backend is None:
        raise Skip("the harness builds no read-only backend")
    with session(h) as s:
        sid, marker = s.start("succeed")
        ro = h.read_only_backend()
        try:
            expect(ro.read_only, "a read-only backend says it is writable")
            calls: list[tuple[str, Callable[[], object]]] = [
                ("start", lambda: ro.start(StartRequest(s.job_id, 50, marker + "-ro", s.spec("succeed")))),
                ("open", lambda: ro.open(sid)),
                ("stop_job", lambda: ro.stop_job(sid)),
            ]
            if isinstance(ro, Holder):
                calls.append(("hold", lambda: ro.hold(sid, "h-ro")))
            if isinstance(ro, Requeuer):
                calls.append(("requeue", lambda: ro.requeue(sid)))
            for name, call in calls:
                try:
                    call()
                except ReadOnly:
                    continue
                raise ConformanceError(f"read-only {name} did not raise ReadOnly")
            expect(ro.inspect(sid).gate is Gate.CLOSED, "a read-only inspect disagrees, or a write went through")
        finally:
            ro.close()


# ----- scheduler-made events (hooks) ----------------------------------------------------------------------


@check(needs="the `preempt` hook; a free slot (a `sleep` job starts within `Timings.wait`)")
def check_preempted_cause(h: Harness) -> None:
    """A preempted execution ends with cause preempted."""
    if h.preempt is None:
        raise Skip("the harness cannot preempt")
    with session(h) as s:
        sid = s.run("sleep")
        s.wait(sid, "the job runs", running)
        h.preempt(s.backend, sid)
        ev = s.wait(
            sid,
            "the preempted execution ends",
            lambda e: (e.current is not None and e.current.outcome.state.ended) or ended(e),
        )
        last = [x for x in ev.executions if x.outcome.state.ended]
        expect(
            bool(last) and last[-1].outcome.cause is Cause.PREEMPTED,
            f"a preempted execution reads {[x.outcome.cause for x in ev.executions]}",
        )


@check(needs="the `lose_node` hook; a free slot; the lost node's job ends within `Timings.wait`")
def check_node_lost_cause(h: Harness) -> None:
    """A job whose node is lost ends with cause node-lost within the NodeLossWindow."""
    if h.lose_node is None:
        raise Skip("the harness cannot lose a node")
    with session(h) as s:
        sid = s.run("sleep")
        s.wait(sid, "the job runs", running)
        h.lose_node(s.backend, sid)
        ev = s.wait(sid, "the job on a lost node ends", ended)
        expect(ev.outcome.cause is Cause.NODE_LOST, f"a job on a lost node reads cause {ev.outcome.cause}")


@check(needs="the `admin_hold` hook on a gated job; watched for `Timings.quiet` seconds")
def check_admin_hold_is_foreign(h: Harness) -> None:
    """A hold placed by someone else reads admin-held, and opening our gate does not lift it."""
    if h.admin_hold is None:
        raise Skip("the harness cannot place an administrator's hold")
    with session(h) as s:
        sid, _ = s.start("succeed")
        h.admin_hold(s.backend, sid)
        with suppress(Rejected):
            s.backend.open(sid)
        ev = s.quiet(sid, "an admin-held job must not run", lambda e: not ran(e))
        expect(bool(ev.foreign_holds), "an administrator's hold is not reported as foreign")
        expect(ev.outcome.cause is Cause.ADMIN_HELD, f"an admin-held job reads cause {ev.outcome.cause}")


# ----- optional interfaces ------------------------------------------------------------------------------------


@check(Holder, needs="a free slot: the released `sleep` job must start within `Timings.wait`")
def check_hold_by_instance(h: Harness) -> None:
    """A hold keeps an opened job from running; only its own instance lifts it."""
    with session(h) as s:
        b = s.backend
        assert isinstance(b, Holder)
        sid, _ = s.start("sleep")
        b.hold(sid, "inst-a")
        b.hold(sid, "inst-a")
        s.backend.open(sid)
        ev = s.quiet(sid, "a held job must not run", lambda e: not ran(e))
        expect("inst-a" in ev.holds, f"the hold instance is not reported (holds={ev.holds})")
        expect(
            ev.outcome.state is State.HELD and ev.outcome.cause is Cause.HELD,
            f"a held job reads {ev.outcome.state.value}/{ev.outcome.cause}",
        )
        try:
            b.release(sid, "inst-b")
        except Rejected:
            pass
        else:
            raise ConformanceError("releasing another instance did not raise Rejected")
        s.quiet(sid, "a wrong release must not lift the hold", lambda e: not ran(e))
        b.release(sid, "inst-a")
        s.wait(sid, "the released job runs", running)


@check(Holder, needs="a free slot: a `sleep` job must start within `Timings.wait`")
def check_hold_on_running(h: Harness) -> None:
    """A hold on a running execution is Rejected, or ends that execution with cause held."""
    with session(h) as s:
        b = s.backend
        assert isinstance(b, Holder)
        sid = s.run("sleep")
        s.wait(sid, "the job runs", running)
        try:
            b.hold(sid, "inst-r")
        except Rejected:
            ev = b_inspect(s, sid)
            expect(ev.outcome.state is State.RUNNING, "a rejected hold changed the job")
            return
        ev = s.wait(sid, "the held execution ends", lambda e: any(x.outcome.cause is Cause.HELD for x in e.executions))
        expect(not running(ev), "a job held while running is still running")


def b_inspect(s: Session, sid: str) -> JobEvidence:
    return s.backend.inspect(sid)


@check(
    Requeuer,
    needs=(
        "capacity for two jobs at once: a `sleep` job runs and is requeued while a `fail` job runs and ends "
        "beside it, each within `Timings.wait`"
    ),
)
def check_requeue_is_a_new_execution(h: Harness) -> None:
    """A running job that is requeued runs again as a new execution with a higher restart count; an ended job
    may be requeued again, or refused with Rejected (Slurm refuses jobs submitted without --requeue)."""
    with session(h) as s:
        b = s.backend
        assert isinstance(b, Requeuer)
        sid = s.run("sleep")
        first = s.wait(sid, "the job runs", running)
        b.requeue(sid)
        ev = s.wait(
            sid,
            "the requeued job runs again",
            lambda e: any(x.restart > first.executions[-1].restart and x.started_at is not None for x in e.executions),
        )
        restarts = [x.restart for x in ev.executions]
        expect(restarts == sorted(set(restarts)), f"execution restart counts are not increasing: {restarts}")
        ids = [x.identity for x in ev.executions]
        expect(len(set(ids)) == len(ids), f"executions share an identity: {ids}")
        ended_sid = s.run("fail")
        s.wait(ended_sid, "the job ends", ended)
        try:
            b.requeue(ended_sid)
        except Rejected:
            return
        s.wait(ended_sid, "the requeued ended job runs again", lambda e: len(e.executions) > 1)


@check(Readmitter, needs="the `preempt` hook; a free slot (a `sleep` job starts within `Timings.wait`)")
def check_readmit_after_an_eviction(h: Harness) -> None:
    """A job its queue evicted (preempted) waits at the readmission gate and runs again only when readmitted:
    the same object, as a new execution with a new identity; readmitting it again changes nothing (one new
    execution per eviction). A job that ended by itself is refused (Rejected)."""
    if h.preempt is None:
        raise Skip("the harness has no preempt hook")
    with session(h) as s:
        b = s.backend
        assert isinstance(b, Readmitter)
        sid, marker = s.start("sleep")
        b.open(sid)
        s.wait(sid, "the job runs", running)
        h.preempt(b, sid)
        ev = s.wait(sid, "the preemption is seen", ended)
        expect(ev.outcome.cause is Cause.PREEMPTED, f"a preempted job reads {ev.outcome.state}/{ev.outcome.cause}")
        before = [x.identity for x in ev.executions]
        s.quiet(sid, "an evicted job waits for its readmission", lambda e: not running(e))
        b.readmit(sid)
        b.readmit(sid)
        ev = s.wait(sid, "the readmitted job runs again", running)
        ids = [x.identity for x in ev.executions]
        expect(ids[: len(before)] == before and len(ids) == len(before) + 1, f"executions {before} -> {ids}")
        found = [f.scheduler_id for f in b.find(marker, 0.0)]
        expect(found == [sid], f"objects carrying the marker after the readmission: {found}")
        ended_sid = s.run("fail")
        s.wait(ended_sid, "the job ends", ended)
        try:
            b.readmit(ended_sid)
        except Rejected:
            return
        raise ConformanceError("readmitting a job that ended by itself was not refused")


@check(MultiFinder)
def check_find_many(h: Harness) -> None:
    """find_many answers every marker asked, in one call."""
    with session(h) as s:
        b = s.backend
        assert isinstance(b, MultiFinder)
        since = h.clock.now() - 60
        a, ma = s.start("succeed")
        c, mc = s.start("succeed")
        found = b.find_many([ma, mc, "dsp-none-1"], since)
        expect([f.scheduler_id for f in found.get(ma, [])] == [a], f"find_many lost {ma}")
        expect([f.scheduler_id for f in found.get(mc, [])] == [c], f"find_many lost {mc}")
        expect(found.get("dsp-none-1", []) == [], "find_many found an unused marker")


@check(Watcher)
def check_watch_reports_changes(h: Harness) -> None:
    """A watch from a cursor reports the objects that changed after it."""
    with session(h) as s:
        b = s.backend
        assert isinstance(b, Watcher)
        first = b.watch(None, 0)
        expect(first.reset, "a watch without a cursor must ask for a re-list (reset)")
        sid = s.run("succeed")
        cursor, seen = first.cursor, False
        deadline = h.clock.now() + h.timings.wait
        while not seen and h.clock.now() < deadline:
            batch = b.watch(cursor, h.timings.poll)
            cursor = batch.cursor
            seen = sid in batch.changed or batch.reset
            if not seen:
                h.clock.sleep(h.timings.poll)
        expect(seen, f"the watch never reported {sid}")


@check(CessationSignal)
def check_cessation_answers(h: Harness) -> None:
    """cessation answers for the ids asked about, and only for them."""
    with session(h) as s:
        b = s.backend
        assert isinstance(b, CessationSignal)
        sid, _ = s.start("succeed")
        out = b.cessation([sid])
        expect(set(out) <= {sid}, f"cessation answered about ids not asked: {sorted(out)}")


@check(IdentityWeakener)
def check_weakened_answers(h: Harness) -> None:
    """weakened gives None or a reason for an object."""
    with session(h) as s:
        b = s.backend
        assert isinstance(b, IdentityWeakener)
        sid, _ = s.start("succeed")
        reason = b.weakened(sid)
        expect(reason is None or (isinstance(reason, str) and bool(reason)), f"weakened returned {reason!r}")


@check(NativePolicyCompiler)
def check_compile_policy_partitions(h: Harness) -> None:
    """compile_policy splits rules into native and residual, losing none."""
    with session(h) as s:
        b = s.backend
        assert isinstance(b, NativePolicyCompiler)
        rules = [{"cause": ["preempted"], "action": "resubmit"}, {"cause": ["exit"], "action": "restart"}]
        pol = b.compile_policy(rules)
        expect(len(pol.native) + len(pol.residual) == len(rules), "compile_policy lost or invented rules")


@check(OutputReader, needs="an `echo` job that starts and ends within `Timings.wait`")
def check_output_read_back(h: Harness) -> None:
    """stdout and stderr of a finished job read back what it printed."""
    with session(h) as s:
        b = s.backend
        assert isinstance(b, OutputReader)
        sid = s.run("echo")
        s.wait(sid, "the job ends", ended)
        out = b"".join(b.stdout(sid))
        expect(ECHO_STDOUT.encode() in out, f"stdout read back {out[:200]!r}")
        try:
            err = b"".join(b.stderr(sid))
        except Unsupported:
            return
        expect(ECHO_STDERR.encode() in err, f"stderr read back {err[:200]!r}")


def applicable(c: Check, backend: Backend) -> str | None:
    """None if check ``c`` applies to ``backend``, else the reason it is skipped."""
    if c.requires is not None and not isinstance(backend, c.requires):
        return f"{type(backend).__name__} does not implement {c.requires.__name__}"
    return None
