"""Stalls: judging a running execution stalled from its ranks' progress, and recording the cause once the
supervisor has ended it. Pure functions of (record, evidence, rules); the supervisor calls :func:`judge` on
every job it observes and :func:`mark` after every fold.

What :func:`judge` guarantees:

* Only a job whose rules give a bound (:attr:`RuleSet.stall_bound <dispatch.rules.RuleSet.stall_bound>`, the
  shortest ``stalledAfter``) is judged, and only while its current submission's object shows a running
  execution that at least one rank reported progress for (:attr:`ExecutionEvidence.progress
  <dispatch.spi.ExecutionEvidence.progress>`): a job that never reports is never stalled.
* Never while the execution is suspended (``running`` / ``suspended``: the scheduler stopped its processes,
  so its silence is not its own), and the silence of a suspension does not count: after a resume the bound
  runs from the later of the rank's last report and the resume, as the supervisor saw it (the first reading
  that shows it running again, :attr:`ExecutionRecord.resumed_at
  <dispatch.records.model.ExecutionRecord.resumed_at>`; a reading that finds the record still suspended counts
  from itself). A resume is thus seen at most one poll late, which only lengthens the bound; a suspension
  that began and ended between two readings is not seen at all, and its silence counts.
* The execution is stalled when a rank that reported has a last report older than the bound at the time the
  evidence was read: ``observed_at - max(report.at, resumed) > bound``, never at or before the bound. Every rank that
  reported is judged (one silent rank of eight is a hang in a collective, the other seven wait in it); a rank
  that never reported is not (a script may report from rank 0 only). The supervisor reads every running job
  of a polled backend each cycle (a ProgressScope backend's progress at most every tenth of the bound:
  :data:`~dispatch.supervise.observation.PROGRESS_EVERY`), so a stall is judged at most one cycle (and that tenth)
  after its bound (a Watcher backend that
  answers ProgressReporting yes must report a new progress report as a change). Report times are the ranks' clocks,
  corrected by the adapter for the cluster's offset.
* The answer is a ``stop`` of the current submission with ``stalled`` (the execution), ``ranks``, ``silentFor`` and
  ``observedAt`` (the time of the reading judged) in its arguments, carried out like every action (intent written
  under the fence first). It is not judged again while a stall stop of the same execution is open or has landed; one
  that certainly failed is judged again. A job closed, stopped on request or with any open intent is not judged.

What :func:`mark` guarantees: an execution that ended ``cancelled`` (as the stop ends it) after a stall stop of
it (open or landed) is recorded as ``failed`` / ``stalled`` with the ranks and the silence in its detail (and the
submission's outcome with it, when it is that execution's). Any other end keeps its own cause: an execution that
succeeded, ran out of memory or lost a node before the stop landed ended that way, not by the stall judgement.
The rules then act on ``stalled`` like on any cause.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from dispatch.outcome import Cause, Outcome, State
from dispatch.records.model import Action, Event, IntentStatus, JobRecord
from dispatch.rules import RuleSet
from dispatch.spi import JobEvidence, Unanswered
from dispatch.supervise.step import Step, StepKind

STALLED = "stalled"
"""The argument of a ``stop`` intent that names the stalled execution."""


def judge(
    job: JobRecord,
    evidence: JobEvidence | Unanswered | None,
    rules: RuleSet | Callable[[JobRecord], RuleSet],
    *,
    suspensions: bool = True,
) -> Step | None:
    """The stop that ends ``job``'s stalled execution, or None (see the module docstring). ``rules`` may be a
    callable, asked only for a job whose evidence carries progress. ``suspensions=False`` ignores suspensions
    (the simulator's planted bug; never the product's)."""
    if not isinstance(evidence, JobEvidence) or evidence.outcome.state is not State.RUNNING:
        return None
    cur = evidence.current
    if cur is None or not cur.progress or cur.outcome.state is not State.RUNNING:
        return None
    if suspensions and Cause.SUSPENDED in (evidence.outcome.cause, cur.outcome.cause):
        return None
    sub = job.current
    if sub is None or sub.scheduler_id != evidence.scheduler_id or job.closed or job.stop_requested:
        return None
    if any(i.open for i in job.intents) or _stopped(job, cur.identity):
        return None
    bound = (rules if isinstance(rules, RuleSet) else rules(job)).stall_bound
    if bound is None:
        return None
    seen = evidence.outcome.evidence.observed_at
    resumed = _resumed(job, cur.identity, seen) if suspensions else None
    since = {p.rank: p.at if resumed is None else max(p.at, resumed) for p in cur.progress}
    silent = {r: seen - at for r, at in since.items() if seen - at > bound}
    if not silent:
        return None
    longest = max(silent.values())
    ranks = sorted(silent)
    reason = (
        f"stalled: rank{'s' if len(ranks) > 1 else ''} {_ranks(ranks)} of execution {cur.identity} reported no "
        f"progress for {longest:.0f}s (stalledAfter {bound:g}s)"
    )
    return Step(
        StepKind.ACT,
        reason,
        action=Action.STOP,
        submission=sub.n,
        args={
            STALLED: cur.identity,
            "ranks": ranks,
            "silentFor": round(longest, 3),
            "bound": bound,
            "observedAt": seen,
        },
    )


def _resumed(job: JobRecord, identity: str, seen: float) -> float | None:
    """When execution ``identity`` last resumed from a suspension, as the record knows it: ``seen`` (this
    reading's time) when the record still shows it suspended."""
    sub = job.current
    rec = next((e for e in sub.executions if e.identity == identity), None) if sub is not None else None
    if rec is None:
        return None
    if rec.outcome.cause is Cause.SUSPENDED:
        return seen
    return rec.resumed_at


def _stopped(job: JobRecord, identity: str) -> bool:
    return any(
        i.action is Action.STOP and i.args.get(STALLED) == identity and i.status is not IntentStatus.FAILED
        for i in job.intents
    )


def _ranks(ranks: list[int]) -> str:
    shown = ", ".join(str(r) for r in ranks[:8])
    return shown + (f" (+{len(ranks) - 8} more)" if len(ranks) > 8 else "")


def mark(job: JobRecord, now: float) -> tuple[JobRecord, list[Event]]:
    """``job`` with every execution its stall stops ended recorded as ``stalled`` (see the module docstring);
    ``job`` itself when nothing changes."""
    stops = {
        (i.submission, str(i.args[STALLED])): i
        for i in job.intents
        if i.action is Action.STOP and i.args.get(STALLED) and i.status is not IntentStatus.FAILED
    }
    if not stops:
        return job, []
    todo = [
        (s.n, e.identity)
        for s in job.submissions
        for e in s.executions
        if (s.n, e.identity) in stops and _to_mark(e.outcome)
    ]
    if not todo:
        return job, []
    new = job.copy()
    events = []
    for n, identity in todo:
        sub = new.submission(n)
        it = stops[(n, identity)]
        ranks = it.args.get("ranks") or []
        detail = (
            f"stalled: rank(s) {_ranks([int(r) for r in ranks])} reported no progress for "
            f"{float(it.args.get('silentFor', 0)):.0f}s; ended by the supervisor"
        )
        for ex in sub.executions:
            if ex.identity == identity:
                was = ex.outcome
                ex.outcome = replace(was, state=State.FAILED, cause=Cause.STALLED, detail=f"{detail} ({_was(was)})")
                if sub.executions[-1] is ex and sub.outcome is not None and _to_mark(sub.outcome):
                    sub.outcome = replace(ex.outcome, evidence=sub.outcome.evidence)
        events.append(Event(job.id, now, STALLED, {"submission": n, "execution": identity, "ranks": ranks}))
    return new, events


def _to_mark(out: Outcome) -> bool:
    return out.state is State.CANCELLED and out.cause is Cause.CANCELLED


def _was(out: Outcome) -> str:
    words = f"{out.state.value}/{out.cause.value if out.cause else '-'}"
    return f"{words}: {out.detail}" if out.detail else words


__all__ = ["STALLED", "judge", "mark"]
