"""A job's story along time, computed once from its record and drawn by several renderers.

:func:`build` turns a :class:`~dispatch.records.model.JobRecord` into a :class:`Timeline`: one lane per
submission, holding

* bars: the wait before the first execution (``kind="wait"``) and each execution (``kind="execution"``), each
  with the state it ended in (or is in) and a label naming the cause (``preempted``, ``exit 1``, ...);
* shades: the time the start gate was closed (``gate``) and the holds (``hold``);

and, across lanes, markers for the supervisor's decisions and escalations with the rule and reason.

Renderers (``dispatch show --timeline`` in the terminal, the dashboard's SVG) only place these on an axis; they
never look at the record again. Times are epoch seconds; an open interval (still running, still held) ends at
``now`` and says so with ``open=True``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dispatch.outcome import Cause, Outcome, State
from dispatch.records.model import Action, IntentStatus, JobRecord, Submission


@dataclass(frozen=True)
class Bar:
    kind: str
    """``wait`` (created, not running yet) or ``execution``."""
    start: float
    end: float
    state: str
    label: str
    """The cause as people say it: ``preempted``, ``exit 1``, ``running``."""
    detail: str
    """Longer text for a hover or a listing: identity, times, nodes, the evidence's detail."""
    open: bool = False
    """Still going at ``now`` (``end`` is ``now``)."""
    execution: str | None = None
    """The execution's identity (``N.<id>.R``), for bars of kind ``execution``."""


@dataclass(frozen=True)
class Shade:
    kind: str
    """``gate`` (created behind a closed start gate) or ``hold``."""
    start: float
    end: float
    label: str
    open: bool = False


@dataclass(frozen=True)
class Marker:
    kind: str
    """``decision`` or ``escalation``."""
    at: float
    label: str
    """Short: the action decided (``resubmit``) or the escalated cause."""
    detail: str
    """The rule and reason (decisions), the reason (escalations)."""
    submission: int | None = None


@dataclass
class Lane:
    submission: int
    title: str
    bars: list[Bar] = field(default_factory=list)
    shades: list[Shade] = field(default_factory=list)


@dataclass
class Timeline:
    job_id: str
    start: float
    end: float
    now: float
    lanes: list[Lane]
    markers: list[Marker]

    @property
    def span(self) -> float:
        return max(self.end - self.start, 1e-9)


def cause_label(outcome: Outcome | None) -> str:
    """``exit 3``, ``preempted``, ``running``: the cause of an outcome in a word or two."""
    if outcome is None:
        return "gated"
    cause = outcome.cause
    if cause is None:
        return outcome.state.value
    if cause is Cause.EXIT and outcome.exit_code is not None:
        return f"exit {outcome.exit_code}"
    return cause.value


def _gate_opened(job: JobRecord, sub: Submission) -> float | None:
    """When the submission's gate was opened: its done OPEN intent (resolved, else written)."""
    for i in job.intents:
        if i.submission == sub.n and i.action is Action.OPEN and i.status is IntentStatus.DONE:
            return i.resolved_at or i.written_at
    return None


def _execution_end(
    outcome: Outcome, ended_at: float | None, next_start: float | None, now: float
) -> tuple[float, bool]:
    if ended_at is not None:
        return ended_at, False
    if outcome.state.ended or outcome.state is State.UNKNOWN:
        # ended without a recorded end time: the evidence that said so, else the next execution's start
        seen = outcome.evidence.observed_at
        return min(x for x in (seen, next_start, now) if x is not None), False
    return now, True


def _lane(job: JobRecord, sub: Submission, next_created: float | None, now: float) -> Lane:
    title = f"#{sub.n}" + (f" {sub.scheduler_id}" if sub.scheduler_id else "")
    lane = Lane(sub.n, title)
    lane_end = next_created if next_created is not None else now
    opened = _gate_opened(job, sub)
    first_start = min((e.started_at for e in sub.executions if e.started_at is not None), default=None)
    gate_end = opened if opened is not None else (first_start if first_start is not None else lane_end)
    if gate_end > sub.created_at:
        lane.shades.append(
            Shade("gate", sub.created_at, gate_end, "start gate closed", open=opened is None and first_start is None)
        )
    wait_end = first_start if first_start is not None else lane_end
    if wait_end > sub.created_at and (first_start is not None or not sub.executions):
        still = first_start is None and next_created is None and not (sub.outcome and sub.outcome.state.ended)
        out = sub.outcome
        state = out.state.value if out and not sub.executions else State.PENDING.value
        label = cause_label(out) if out and not sub.executions else "queued"
        lane.bars.append(
            Bar("wait", sub.created_at, wait_end, state, label, f"submission {sub.n} waiting: {label}", open=still)
        )
    starts = [e.started_at for e in sub.executions]
    for k, e in enumerate(sub.executions):
        if e.started_at is None:
            continue
        nxt = next((s for s in starts[k + 1 :] if s is not None), next_created)
        end, still = _execution_end(e.outcome, e.ended_at, nxt, now)
        label = cause_label(e.outcome)
        parts = [f"execution {e.identity}: {e.outcome.state.value} ({label})"]
        if e.nodes:
            parts.append("nodes " + ", ".join(e.nodes))
        if e.outcome.detail:
            parts.append(e.outcome.detail)
        lane.bars.append(
            Bar(
                "execution",
                e.started_at,
                max(end, e.started_at),
                e.outcome.state.value,
                label,
                "; ".join(parts),
                open=still,
                execution=e.identity,
            )
        )
    for h in job.holds:
        if h.submission == sub.n:
            end = h.released_at if h.released_at is not None else now
            label = f"hold by {h.owner}" + (f": {h.reason}" if h.reason else "")
            lane.shades.append(Shade("hold", h.placed_at, max(end, h.placed_at), label, open=h.released_at is None))
    return lane


def build(job: JobRecord, now: float) -> Timeline:
    """The timeline of ``job`` as of ``now``."""
    subs = sorted(job.submissions, key=lambda s: s.n)
    lanes = [_lane(job, sub, subs[k + 1].created_at if k + 1 < len(subs) else None, now) for k, sub in enumerate(subs)]
    markers = [
        Marker(
            "decision",
            d.at,
            d.action,
            f"execution {d.execution} ended {d.cause.value}: rule {d.rule}: {d.reason} (by {d.by})",
            d.submission,
        )
        for d in job.decisions
    ]
    markers += [
        Marker("escalation", x.at, f"escalated: {x.cause.value}", x.reason, x.submission) for x in job.escalations
    ]
    markers.sort(key=lambda m: m.at)
    times = [job.created_at]
    for lane in lanes:
        times += [b.start for b in lane.bars] + [b.end for b in lane.bars]
        times += [s.start for s in lane.shades] + [s.end for s in lane.shades]
    times += [m.at for m in markers]
    start = min(times)
    end = max(times)
    if end - start < 1.0:
        end = start + 1.0
    return Timeline(job.id, start, end, now, lanes, markers)
