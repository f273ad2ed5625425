"""Observation: what a cycle reads from the backend, in a constant number of calls, and its fold into records.

:meth:`Observing._observe` reads whatever the cycle's jobs need in a constant number of backend calls whatever
the number of jobs: one ``inspect_many`` (on a Watcher backend, only of the objects the watch says changed, plus
those with an intent to resolve; on a :class:`~dispatch.spi.ProgressScope` backend, with progress only for the
jobs its records show running whose rules judge stalls, each at most every :data:`PROGRESS_EVERY` of its bound: a
job that starts is judged from the next cycle on),
one ``find_many`` (or a ``find`` per marker without a MultiFinder, for the few starts whose outcome is unknown)
and at most one ``cessation`` call. A failed observation (Unavailable) is not a job failure: nothing is folded,
and the records keep their last evidence and its age.
:meth:`Observing._fold` folds it into one record through the one pure fold (:mod:`dispatch.supervise.fold`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from dispatch.actions import Actor
from dispatch.clock import Clock
from dispatch.errors import Unavailable
from dispatch.outcome import Cause, State
from dispatch.records.model import Event, JobRecord
from dispatch.rules import RuleSet
from dispatch.spi import (
    Backend,
    Cessation,
    CessationSignal,
    Found,
    JobEvidence,
    MultiFinder,
    ProgressScope,
    RankProgress,
    Unanswered,
    Watcher,
)
from dispatch.supervise import stall
from dispatch.supervise.archive import Archiver
from dispatch.supervise.fold import fold, fold_found, fold_stray, start_intent
from dispatch.supervise.next import needs_observation
from dispatch.supervise.report import CycleReport
from dispatch.supervise.steady import Quiet
from dispatch.supervise.step import Facts, Step

PROGRESS_EVERY = 0.1
"""On a :class:`~dispatch.spi.ProgressScope` backend a running job's progress is read when a tenth of its stall
bound has passed since the last read (every cycle when the cycle is longer): a stall is judged at most that, plus a
cycle, after its bound, and the cycles between read the listing alone (on Slurm, reading reports costs about what
the listing does: docs/performance.md)."""


@dataclass
class Observation:
    """One cycle's reading: the evidence of each object inspected (and which were), what each marker's find
    returned, the cessation of objects whose node was lost, and when the reads were made."""

    evidence: dict[str, JobEvidence | Unanswered] = field(default_factory=dict)
    inspected: set[str] = field(default_factory=set)
    found: dict[str, list[Found]] = field(default_factory=dict)
    cessation: dict[str, Cessation] = field(default_factory=dict)
    inspected_at: float = 0.0
    found_at: float = 0.0


class Observing:
    """The observation part of :class:`~dispatch.supervise.Supervisor` (which sets these attributes)."""

    backend: Backend
    clock: Clock
    actor: Actor
    facts: Facts
    watcher: bool
    archiver: Archiver | None
    _cursor: str | None
    """The watch cursor (a Watcher backend only; None: start over)."""
    _seen: set[str]
    _pending: set[str]
    """Objects to read next cycle whatever a watch reports (a change not read, an object not answered yet)."""
    _progress_at: dict[str, float]
    progress_every: float | None
    """When set, every running job's progress is also read at least this often (seconds; a ProgressScope
    backend reads it for the stall judges alone otherwise) and what each read showed is kept in
    :attr:`progress` (``dispatch run`` shows it)."""
    progress: dict[str, tuple[RankProgress, ...]]
    """The last progress read of each running object, by scheduler id (only with :attr:`progress_every`)."""
    rules_for: Callable[[JobRecord], RuleSet]
    owner: str

    def _observe(self, items: Sequence[Quiet | JobRecord], now: float, report: CycleReport) -> Observation:
        """Read what ``items`` need read this cycle (see the module docstring); steady entries (:class:`Quiet`)
        are settled: a live object, no intent, no stray."""
        obs = Observation()
        ids: list[str] = []
        judged: dict[str, float] = {}  # running as last read, with rules that judge stalls: sid -> stall bound
        markers: dict[str, float] = {}
        changed: set[str] | None = None
        if self.watcher:
            assert isinstance(self.backend, Watcher)
            try:
                batch = self.backend.watch(self._cursor, 0.0)
                report.observation_calls += 1
                self._cursor = batch.cursor
                changed = None if batch.reset else set(batch.changed) | self._pending
            except Unavailable:
                report.observation_calls += 1
                report.unavailable = True
                changed = set(self._pending)
        for job in items:
            if isinstance(job, Quiet):
                sid = job.settled.scheduler_id  # type: ignore[union-attr]
                if changed is None or sid in changed:
                    ids.append(sid)
                    running = job.key[0] is State.RUNNING
                    bound = self.rules_for(job.job).stall_bound if running else None
                    if bound is not None:
                        judged[sid] = bound
                    if running:
                        self._shown(judged, sid)
                continue
            intents = job.intents  # most jobs have none: the intent checks below are then void
            if intents:
                for sub in job.submissions:
                    it = start_intent(job, sub.n)
                    if it is not None and now >= it.deadline:
                        markers[sub.marker] = sub.created_at - self.actor.margin
            cur = job.current
            if (
                cur is not None
                and cur.scheduler_id is not None
                and needs_observation(job, now)
                and (
                    changed is None
                    or job.id not in self._seen
                    or cur.scheduler_id in changed
                    or (intents and any(i.open and now >= i.deadline for i in intents))
                )
            ):
                ids.append(cur.scheduler_id)
                running = cur.outcome is not None and cur.outcome.state is State.RUNNING
                bound = self.rules_for(job).stall_bound if running else None
                if bound is not None:
                    judged[cur.scheduler_id] = bound
                if running:
                    self._shown(judged, cur.scheduler_id)
            if intents:
                for s in job.submissions:
                    for sid in s.strays:
                        if any(i.open and now >= i.deadline and i.args.get("schedulerId") == sid for i in intents):
                            ids.append(sid)
        if ids:
            report.observation_calls += 1
            try:
                if isinstance(self.backend, ProgressScope) and self.backend.scopes_progress():
                    due = self._progress_due(judged, now)
                    obs.evidence = dict(self.backend.inspect_many(ids, progress_of=due))
                    self._progress_at.update(dict.fromkeys(due, now))
                else:
                    obs.evidence = dict(self.backend.inspect_many(ids))
                obs.inspected = set(ids)
                obs.inspected_at = self.clock.now()
                if self.progress_every is not None:
                    self._keep_progress(obs.evidence)
                self._pending.clear()
                # an object with no answer yet is asked about again next cycle, whatever a watch reports
                self._pending.update(sid for sid, ev in obs.evidence.items() if isinstance(ev, Unanswered))
            except Unavailable:
                report.unavailable = True
                # changes the watch reported but we could not read are read next cycle
                self._pending.update(ids if changed is not None else [])
                if changed is None:
                    self._cursor = None  # a reset we could not follow: reset again
        if markers:
            since = min(markers.values())
            obs.found_at = self.clock.now()
            try:
                if isinstance(self.backend, MultiFinder):
                    report.observation_calls += 1
                    obs.found = {m: list(v) for m, v in self.backend.find_many(sorted(markers), since).items()}
                else:
                    for m in sorted(markers):
                        report.observation_calls += 1
                        obs.found[m] = list(self.backend.find(m, markers[m]))
            except Unavailable:
                report.unavailable = True
                obs.found = {}
        if isinstance(self.backend, CessationSignal):
            lost = [sid for sid, ev in obs.evidence.items() if isinstance(ev, JobEvidence) and _node_lost(ev)]
            if lost:
                report.observation_calls += 1
                try:
                    obs.cessation = dict(self.backend.cessation(lost))
                except Unavailable:
                    report.unavailable = True
        report.observed = len(obs.evidence)
        return obs

    def _fold(self, job: JobRecord, obs: Observation, refresh: float) -> tuple[JobRecord, list[Event]]:
        """``job`` with what ``obs`` read of it folded in (its start's find, its current object, its strays), and
        the events to append; ``job`` itself when nothing changed."""
        now = self.clock.now()
        events: list[Event] = []
        cur = job.current
        if cur is not None:
            if cur.marker in obs.found:
                job, ev = fold_found(job, obs.found[cur.marker], now, observed_at=obs.found_at)
                events += ev
            sid = job.current.scheduler_id if job.current else None
            if sid is not None and sid in obs.inspected:
                job, ev = fold(
                    job,
                    obs.evidence.get(sid),
                    now,
                    cessation=obs.cessation.get(sid),
                    refresh=refresh,
                    observed_at=obs.inspected_at,
                    unanswered_grace=self.facts.unknown_grace,
                    reading_lease=job.lease.token if job.lease is not None and job.lease.owner == self.owner else None,
                )
                events += ev
        for sid in [sid for s in job.submissions for sid in s.strays if sid in obs.inspected]:
            job, ev = fold_stray(job, sid, obs.evidence.get(sid), now, obs.inspected_at)
            events += ev
        job, ev = stall.mark(job, now)
        events += ev
        return job, events

    def _unchanged(self, q: Quiet, obs: Observation) -> bool:
        """Whether this cycle's observation leaves the steady job ``q`` as it is: its object was not read (a
        watch reported no change), or was read and shows what its record holds, with no cessation; and no
        archive work waits for it. Then the whole path (fold, archive, next_step) would change nothing."""
        settled = q.settled
        assert settled is not None
        sid = settled.scheduler_id
        if sid in obs.inspected and (sid in obs.cessation or not settled.unchanged_by(obs.evidence.get(sid))):
            return False
        if sid in obs.inspected and self._stall(q.job, obs) is not None:
            return False
        return self.archiver is None or not self.archiver.pending(q.job.id)

    def _shown(self, judged: dict[str, float], sid: str) -> None:
        """With :attr:`progress_every`, running object ``sid``'s progress is due at least that often."""
        if self.progress_every is not None:
            bound = self.progress_every / PROGRESS_EVERY  # due when PROGRESS_EVERY of this "bound" passed
            judged[sid] = min(judged.get(sid, bound), bound)

    def _keep_progress(self, evidence: dict[str, JobEvidence | Unanswered]) -> None:
        """Keep what ``evidence`` shows of running executions' progress in :attr:`progress`."""
        for sid, ev in evidence.items():
            if isinstance(ev, JobEvidence) and ev.current is not None and ev.current.progress:
                self.progress[sid] = ev.current.progress

    def _progress_due(self, judged: dict[str, float], now: float) -> list[str]:
        """The jobs of ``judged`` (scheduler id -> stall bound) whose progress is due this cycle
        (:data:`PROGRESS_EVERY`); the times of jobs no longer judged are forgotten."""
        last = self._progress_at
        self._progress_at = {sid: last[sid] for sid in judged if sid in last}
        return [sid for sid, bound in judged.items() if sid not in last or now - last[sid] >= bound * PROGRESS_EVERY]

    def _stall(self, job: JobRecord, obs: Observation) -> Step | None:
        """The stop that ends ``job``'s stalled execution, judged from this cycle's evidence (see
        :mod:`dispatch.supervise.stall`), or None."""
        sid = job.current.scheduler_id if job.current is not None else None
        if sid is None or sid not in obs.inspected:
            return None
        return self._judge_stall(job, obs.evidence.get(sid))

    def _judge_stall(self, job: JobRecord, evidence: JobEvidence | Unanswered | None) -> Step | None:
        """The stall judgement on ``job``'s evidence: :func:`stall.judge` under the job's rules (the simulator's
        planted bugs override it to judge with the judge's ``suspensions`` off, or with shorter bounds)."""
        return stall.judge(job, evidence, self.rules_for)


def _node_lost(ev: JobEvidence) -> bool:
    return any(e.outcome.cause is Cause.NODE_LOST and e.outcome.ended for e in ev.executions)


__all__ = ["Observation", "Observing"]
