"""Deciding and acting: next_step applied to one job until it says wait, and each backend call made under the
intent protocol.

Record-only steps (a decision, an escalation, closing) are written as they come. A backend call goes through
:class:`~dispatch.actions.Actor`: the intent is written under the fence *before* the call and the answer is
recorded after it. An unknown outcome is never acted on again: the intent stays open until its deadline
(written-at + CallBound + margin), then the fold resolves it from observation (find by marker, gate, holds,
restart count).
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from dispatch.actions import Actor, marker_for, record_answer
from dispatch.errors import DispatchError, Unavailable
from dispatch.records.model import Action, Event, Intent, IntentStatus, JobRecord, Submission
from dispatch.rules import RuleSet
from dispatch.supervise.archive import Archiver
from dispatch.supervise.blame import Exclusions
from dispatch.supervise.fold import Settled
from dispatch.supervise.leases import Leases
from dispatch.supervise.next import next_step
from dispatch.supervise.report import CycleReport
from dispatch.supervise.steady import Quiet
from dispatch.supervise.step import Facts, Step, StepKind, apply_record_step

MAX_STEPS_PER_JOB = 8


class Acting(Leases):
    """The deciding and acting part of :class:`~dispatch.supervise.Supervisor` (which sets these attributes)."""

    actor: Actor
    facts: Facts
    refresh: float
    default_rules: RuleSet
    archiver: Archiver | None
    exclusions: Exclusions
    _rules_cache: dict[str, RuleSet]
    _quiet: dict[str, Quiet]
    _quiet_next: dict[str, Quiet]
    """The jobs for which next_step said ``nothing`` this cycle (the next cycle's ``_quiet``)."""

    def rules_for(self, job: JobRecord) -> RuleSet:
        """The rules ``job`` names (the supervisor's default rules when it names none), each set parsed once."""
        if job.rules is None:
            return self.default_rules
        key = json.dumps(job.rules, sort_keys=True)
        rules = self._rules_cache.get(key)
        if rules is None:
            rules = self._rules_cache[key] = RuleSet.from_data(job.rules)
        return rules

    def _steps(self, job: JobRecord, report: CycleReport) -> JobRecord:
        """Apply next_step to ``job`` until it says wait, observe or nothing; returns the record as last written.

        A record for which next_step said ``nothing`` last cycle and that is the same object now (the fold
        changed nothing, no step wrote it) is not asked again: next_step reads only the record, the rules the
        record names, the backend's facts and the time, and every test of the time on the way to ``nothing``
        is of the form ``now >= bound``, which stays true as time goes on. So the answer would be ``nothing``
        again; skipping the call changes no decision."""
        q = self._quiet.get(job.id)
        if q is not None and q.job is job:
            self._quiet_next[job.id] = q
            report.steps[_NOTHING] += 1
            return job
        for _ in range(MAX_STEPS_PER_JOB):
            now = self.clock.now()
            step = self._next_step(job, now)
            report.steps[step.kind.value] += 1
            if step.kind is StepKind.NOTHING:
                settled = None if job.closed else Settled.of(job, self.refresh)
                self._quiet_next[job.id] = Quiet(job, settled, (job.state, job.cause))
                return job
            if step.kind in (StepKind.WAIT, StepKind.OBSERVE):
                return job
            if step.kind is StepKind.ACT:
                stops = step.action in (Action.STOP, Action.HOLD) and "schedulerId" not in step.args
                if self.archiver is not None and stops:
                    for entry in self.archiver.before_stopping(job, step.submission or 0):
                        report.archive[entry.status.value] += 1
                job = self._act(job, step, report)
            else:
                decided, escalated = len(job.decisions), len(job.escalations)
                job = self._commit(job, partial(self._record_step, step=step), report)
                for d in job.decisions[decided:]:
                    report.decisions[(d.action, d.rule)] += 1
                for e in job.escalations[escalated:]:
                    report.escalations[e.cause.value] += 1
        return job

    own_unknown_clock = True
    """Decide on an unknown only once its clock ran under this job's lease (``next_step(own_clock=...)``); a class
    attribute so that the simulator can plant the bug that decides on a predecessor's clock."""

    def _next_step(self, job: JobRecord, now: float) -> Step:
        """next_step for ``job`` at ``now``, amended by the exclusions."""
        rules = self.rules_for(job)
        step = next_step(job, rules, self.facts, now, own_clock=self.own_unknown_clock)
        return self.exclusions.amend(job, step, rules)

    def _record_step(self, job: JobRecord, step: Step) -> tuple[JobRecord, list[Event]]:
        # re-derived on the record being written, so a retry after a lost race never applies a stale step
        now = self.clock.now()
        again = self._next_step(job, now)
        if again != step:
            return job, []
        return apply_record_step(job, step, now, self.owner)

    def _act(self, job: JobRecord, step: Step, report: CycleReport) -> JobRecord:
        """Carry out an ``act`` step: the intent is written (under the fence) before the backend call."""
        assert step.action is not None and step.submission is not None
        self._check(job)
        base = job.copy()
        if step.new_submission:
            n = step.submission
            base.submissions.append(Submission(n, marker_for(job.id, n), self.clock.now()))
        return self._call(base, step, report)

    def _call(self, base: JobRecord, step: Step, report: CycleReport) -> JobRecord:
        """Write the intent of ``step`` on ``base`` (the job, with the new submission a step makes), make the
        call, and record its answer: :meth:`_announce`, :meth:`_attempt`, :meth:`_answered`, in that order."""
        written, intent = self._announce(base, step, report)
        status, answer, error = self._attempt(written, intent, report)
        return self._answered(written, intent, status, answer, error, report)

    def _announce(self, base: JobRecord, step: Step, report: CycleReport) -> tuple[JobRecord, Intent]:
        """Write the intent of ``step`` on ``base``, under the fence: the job as written and the intent."""
        assert step.action is not None and step.submission is not None
        written, intent = self.actor.write_intent(
            base,
            step.action,
            step.submission,
            args=step.args,
            decision=step.decision,
            fence=self._fence(base),
            events=[Event(base.id, self.clock.now(), "step", {"reason": step.reason, "by": self.owner})],
        )
        report.writes += 1
        return written, intent

    def _attempt(
        self, job: JobRecord, intent: Intent, report: CycleReport
    ) -> tuple[IntentStatus, Any, DispatchError | None]:
        """Make the call ``intent`` (written on ``job``) announces and classify its answer, or say why it was not
        made (nothing is written). The simulator's planted bugs wrap it to misread an answer or to call more."""
        if self.clock.now() > intent.written_at + self.actor.margin:
            # too long since the intent was written: a call now might land after its deadline, when another
            # supervisor may already have resolved it by observation. Record it as not made.
            late = Unavailable(f"not called: more than {self.actor.margin:g}s passed since the intent was written")
            return IntentStatus.FAILED, None, late
        self._check(job)
        report.actions += 1
        return self.actor.attempt(job, intent)

    def _answered(
        self,
        job: JobRecord,
        intent: Intent,
        status: IntentStatus,
        answer: Any,
        error: DispatchError | None,
        report: CycleReport,
    ) -> JobRecord:
        """Record the answer to the call ``intent`` announced (or why it was not made) on ``job``."""
        return self._commit(job, lambda j: answer_intent(j, intent, status, answer, error, self.clock.now()), report)


def answer_intent(
    job: JobRecord, intent: Intent, status: IntentStatus, answer: Any, error: DispatchError | None, now: float
) -> tuple[JobRecord, list[Event]]:
    """Record a call's answer on ``job`` if its intent is still open there (a re-read record may have moved on)."""
    current = next((i for i in job.intents if i.seq == intent.seq), None)
    if current is None or not current.open or current.action is not intent.action:
        return job, []
    new, _, events = record_answer(job, intent.seq, status, answer, error, now)
    new.updated_at = now
    return new, events


_NOTHING = StepKind.NOTHING.value


__all__ = ["MAX_STEPS_PER_JOB", "Acting", "answer_intent"]
