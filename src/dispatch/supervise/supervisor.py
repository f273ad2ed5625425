"""The supervisor: observes every job it owns in one batched pass, folds the evidence, decides, and acts.

One :meth:`Supervisor.cycle`:

1. reads the job records (of its cluster) and takes or renews a **lease** on each job nobody else holds: a
   lease carries a fencing token, and every later write for that job passes ``fence=token``, so a supervisor
   whose lease was taken over cannot write (the store refuses it);
2. **observes** in a constant number of backend calls whatever the number of jobs: one ``inspect_many`` (on a
   Watcher backend, only of the objects the watch says changed, plus those with an intent to resolve), one
   ``find_many`` (or a ``find`` per marker without a MultiFinder, for the few starts whose outcome is unknown)
   and at most one ``cessation`` call. A failed observation (Unavailable) is not a job failure: nothing is
   folded, and the records keep their last evidence and its age;
3. **folds** the evidence into each record (:func:`~dispatch.supervise.fold.fold`, pure) and writes it if it
   changed;
4. applies :func:`~dispatch.supervise.next.next_step` (pure) until it says wait or nothing: record-only steps
   are written; a backend call is made through :class:`~dispatch.actions.Actor`, which writes the intent under
   the fence *before* the call and records the answer after it.

An unknown outcome is never acted on again: the intent stays open until its deadline (written-at + CallBound +
margin), then the fold resolves it from observation (find by marker, gate, holds, restart count).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import zlib
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from dispatch.actions import DEFAULT_MARGIN, Actor, default_owner, marker_for
from dispatch.clock import Clock
from dispatch.declarations import Declarations, check_poll_interval
from dispatch.errors import ConfigError, Conflict, DispatchError, Unavailable
from dispatch.outcome import Cause, State
from dispatch.records.base import Records
from dispatch.records.model import (
    Action,
    Event,
    GateState,
    Intent,
    IntentStatus,
    JobHead,
    JobRecord,
    Lease,
    Peers,
    Submission,
)
from dispatch.rules import RuleSet
from dispatch.spi import Backend, Cessation, CessationSignal, Found, JobEvidence, MultiFinder, Unanswered, Watcher
from dispatch.supervise.archive import Archiver, ArchiveSettings, Pruner
from dispatch.supervise.blame import Exclusions, SuspectPolicy
from dispatch.supervise.fold import Settled, fold, fold_found, fold_stray, start_intent
from dispatch.supervise.mutation import Mutation
from dispatch.supervise.next import Facts, Step, StepKind, apply_record_step, needs_observation, next_step

DEFAULT_LEASE_TTL = 120.0
DEFAULT_MAX_POLL = 30.0
MAX_STEPS_PER_JOB = 8

if TYPE_CHECKING:  # an annotation only: the cluster layer sits above the supervisor's
    from dispatch.cluster import Cluster


class LostLease(DispatchError):
    """This supervisor no longer owns the job (its lease expired or was taken over): it stops touching it."""


def default_poll(declarations: Declarations) -> float:
    """Half the shortest PolledLoss window, at most 30 s (a Watcher: 30 s between watch reads)."""
    loss = declarations.polled_loss
    shortest = loss.shortest() if loss is not None else None
    if shortest is None:
        return DEFAULT_MAX_POLL
    return min(DEFAULT_MAX_POLL, shortest / 2)


@dataclass
class CycleReport:
    """What one cycle did. ``backend_calls`` counts observation calls plus the calls actions made."""

    at: float
    jobs: int = 0
    owned: int = 0
    observed: int = 0
    observation_calls: int = 0
    actions: int = 0
    writes: int = 0
    conflicts: int = 0
    lost: int = 0
    unavailable: bool = False
    takeovers: int = 0
    """Leases taken from another supervisor whose lease had expired."""
    released: int = 0
    """Leases given up because this supervisor held more than its share."""
    supervisors: int = 0
    """The supervisors of the cluster alive in this cycle (this one included)."""
    steps: Counter[str] = field(default_factory=Counter)
    decisions: Counter[tuple[str, str]] = field(default_factory=Counter)
    """Decisions recorded in this cycle, by (action, rule)."""
    escalations: Counter[str] = field(default_factory=Counter)
    """Escalations recorded in this cycle, by cause."""
    states: Counter[tuple[str, str]] = field(default_factory=Counter)
    """The jobs this supervisor owns after the cycle, by (state, cause)."""
    archive: Counter[str] = field(default_factory=Counter)
    """Output archive entries written in this cycle, by status (see :mod:`dispatch.supervise.archive`)."""
    archive_pruned: int = 0
    """Output archive entries deleted by retention in this cycle (:class:`~dispatch.supervise.archive.Pruner`)."""
    archive_prune_errors: int = 0
    """Retention calls that failed in this cycle (the store's error; the cycle went on, and the next call is
    due an hour later)."""

    @property
    def backend_calls(self) -> int:
        return self.observation_calls + self.actions

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "jobs": self.jobs,
            "owned": self.owned,
            "observed": self.observed,
            "backendCalls": self.backend_calls,
            "observationCalls": self.observation_calls,
            "actions": self.actions,
            "writes": self.writes,
            "conflicts": self.conflicts,
            "lost": self.lost,
            "unavailable": self.unavailable,
            "takeovers": self.takeovers,
            "released": self.released,
            "supervisors": self.supervisors,
            "steps": dict(self.steps),
            "decisions": [{"action": a, "rule": r, "count": n} for (a, r), n in sorted(self.decisions.items())],
            "escalations": dict(self.escalations),
            "archive": dict(self.archive),
            "archivePruned": self.archive_pruned,
            "archivePruneErrors": self.archive_prune_errors,
        }


@dataclass
class _Observation:
    evidence: dict[str, JobEvidence | Unanswered] = field(default_factory=dict)
    inspected: set[str] = field(default_factory=set)
    found: dict[str, list[Found]] = field(default_factory=dict)
    cessation: dict[str, Cessation] = field(default_factory=dict)
    inspected_at: float = 0.0
    found_at: float = 0.0


@dataclass(slots=True)
class _Quiet:
    """A job for which next_step said ``nothing`` last cycle, as it was then (see :meth:`Supervisor._steps`).
    ``settled`` is its current submission's settled view, or None when it is not settled (then only the
    next_step call is skipped); ``key`` is its (state, cause) for the cycle report."""

    job: JobRecord
    settled: Settled | None
    key: tuple[State, Cause | None]


class Supervisor:
    """Applies each job's rules (or ``default_rules``) to the jobs of one cluster in one record store.

    ``owner`` names this supervisor in leases, intents and decisions (default: host and pid; it must be unique
    per process). ``poll`` is the time between cycles; for a polled backend it must not exceed the shortest
    PolledLoss window (ConfigError ``poll`` otherwise). ``cluster`` is the cluster (or its name) whose records
    it supervises (default: the backend's name). ``lease_ttl`` bounds how long a dead supervisor's jobs wait
    before another takes them over. ``mutations`` plants bugs for the simulator's mutation tests
    (:mod:`dispatch.supervise.mutation`); never set it otherwise. ``archive`` bounds the output archive kept for
    a backend whose output goes with its executions (:mod:`dispatch.supervise.archive`; default 1 MiB per
    execution, kept forever; with ``keep`` set, the supervisor prunes the store's archive hourly, after a
    cycle's work). ``steady=False`` sends every job the whole way each cycle (observe, fold, next_step) instead
    of letting settled quiet jobs take the steady path (see :meth:`cycle`): the decisions are the same, and the
    simulator compares the two.
    """

    def __init__(
        self,
        backend: Backend,
        records: Records,
        *,
        clock: Clock,
        owner: str | None = None,
        poll: float | None = None,
        default_rules: RuleSet | Mapping[str, Any] | None = None,
        cluster: str | Cluster | None = None,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        margin: float = DEFAULT_MARGIN,
        refresh: float | None = None,
        mutations: Collection[Mutation] = (),
        only: Collection[str] | None = None,
        archive: ArchiveSettings | None = None,
        steady: bool = True,
        suspects: SuspectPolicy | None = None,
    ) -> None:
        decl = backend.declarations()
        self.backend = backend
        self.records = records
        self.clock = clock
        self.owner = owner or default_owner("supervisor")
        self.watcher = isinstance(backend, Watcher)
        self.poll = default_poll(decl) if poll is None else float(poll)
        check_poll_interval(decl, self.poll)
        if not math.isfinite(lease_ttl) or lease_ttl <= self.poll:
            raise ConfigError("leaseTtl", f"the lease ({lease_ttl:g}s) must outlast the poll interval ({self.poll:g}s)")
        self.lease_ttl = float(lease_ttl)
        self.cluster = cluster if isinstance(cluster, str) else cluster.name if cluster is not None else backend.name
        self.refresh = math.inf if refresh is None else refresh
        """How stale a record's evidence time may grow while nothing changes (default: no limit; the evidence
        time is when the state last changed, and the batched lease renewal says the job is being watched)."""
        self.mutations = frozenset(Mutation(m) for m in mutations)
        self._planted_fold = bool(
            self.mutations & {Mutation.SUCCESS_ON_VANISH, Mutation.CAUSE_MIXUP, Mutation.NOT_RUNNING_IS_EVICTED}
        )
        self.only = None if only is None else frozenset(only)
        """When set, the supervisor looks after these jobs only (``dispatch run``'s in-process supervisor): it
        registers no peer and takes no share, so the services sharing the cluster keep theirs."""
        self.actor = Actor(records, backend, clock, self.owner, margin=margin)
        self.facts = Facts.of(backend)
        if Mutation.UNKNOWN_IS_AN_ENDING in self.mutations:
            self.facts = dataclasses.replace(self.facts, unknown_grace=0.0)  # planted bug: no wait on an unknown
        if isinstance(default_rules, RuleSet) or default_rules is None:
            self.default_rules = default_rules or RuleSet()
        else:
            self.default_rules = RuleSet.from_data(default_rules)
        self.default_rules.check_against(backend, self.facts.capabilities)
        self._rules_cache: dict[str, RuleSet] = {}
        self._cache: dict[str, JobRecord] = {}
        self._cursor: str | None = None
        self._seen: set[str] = set()
        self._pending: set[str] = set()
        self._quiet: dict[str, _Quiet] = {}
        """The jobs (by id) for which next_step said ``nothing`` last cycle (see :meth:`_steps`)."""
        self._quiet_next: dict[str, _Quiet] = {}
        self._fast = steady and not self.mutations
        """Whether settled quiet jobs take the steady path (see :meth:`cycle`); planted bugs need every job to
        go the whole way."""
        self.archiver = Archiver.for_backend(backend, records, clock, archive)
        self.pruner = Pruner.for_settings(records, archive)
        """The archive's retention (None: entries are kept forever, the default)."""
        self.exclusions = Exclusions(backend, records, self.cluster, self.facts.capabilities, suspects)
        """Bad nodes: blames of endings, and the nodes a new submission avoids (:mod:`dispatch.supervise.blame`)."""

    # ----- the loop ------------------------------------------------------------------------------------------

    def run(self, until: float | None = None) -> None:
        """Cycle every ``poll`` seconds (on the supervisor's clock) until ``until`` (forever if None)."""
        while True:
            self.cycle()
            if until is not None and self.clock.now() >= until:
                return
            self.clock.sleep(self.poll)

    def cycle(self) -> CycleReport:
        """One pass over every job this supervisor owns or can take (see the module docstring).

        The steady path: a job for which next_step said ``nothing`` last cycle, whose current submission is
        settled (:class:`~dispatch.supervise.fold.Settled`: a live object, no open intent, no stray, no unknown
        clock running) and whose record is still at the version this supervisor holds, is not read, folded or
        asked about again unless this cycle's evidence differs from what its record holds
        (:meth:`Settled.unchanged_by <dispatch.supervise.fold.Settled.unchanged_by>`, which agrees with
        :func:`~dispatch.supervise.fold.fold`). Its object is still observed every cycle, in the same batched
        call, and jobs are handled in the same order whichever path they take, so decisions are the same as
        with ``steady=False``."""
        now = self.clock.now()
        report = CycleReport(at=now)
        self.exclusions.begin_cycle(now)
        peers: Peers | None = None
        if self.only is None:
            peers = self.records.peers(cluster=self.cluster, owner=self.owner, now=now, expires_at=now + self.lease_ttl)
            report.writes += 1
            report.supervisors = len(peers.owners)
        heads = self.records.to_supervise(cluster=self.cluster, owner=self.owner, now=now)
        if self.only is not None:
            heads = [h for h in heads if h.id in self.only]
        report.jobs = len(heads)
        ours, room, surplus, earliest = self._divide(heads, peers, now)
        if earliest - now <= self.lease_ttl / 2:
            ours = self._renew(ours, now, report)
        marks: list[_Quiet | JobHead] = []
        steady: list[_Quiet] = []
        if self._fast and not surplus:
            marks, steady, ours = self._steady(ours)
        owned: list[JobRecord] = []
        jobs = self._load(ours + room, steady)
        if surplus:
            jobs = self._release(jobs, surplus, report)
        for job in jobs:
            try:
                mine = self._own(job, now, report)
            except (Conflict, LostLease):
                report.conflicts += 1
                self._cache.pop(job.id, None)
                continue
            if mine is not None:
                owned.append(mine)
        # every job in the order of the heads: steady ones as they were, the others as owned now
        items: Sequence[_Quiet | JobRecord] = owned if not steady else self._in_order(marks, room, owned)
        report.owned = len(items)
        obs = self._observe(items, now, report)
        self._quiet_next = quiet = {}
        states: Counter[tuple[State, Cause | None]] = Counter()  # by enum: made text once per kind, below
        if self.archiver is not None:
            self.archiver.begin_cycle([x.job if isinstance(x, _Quiet) else x for x in items])
            self.archiver.catch_up([j for j in owned if j.id not in self._seen])
        unchanged = 0
        for x in items:
            if isinstance(x, _Quiet):
                if self._unchanged(x, obs):
                    quiet[x.job.id] = x
                    states[x.key] += 1
                    unchanged += 1
                    continue
                job = x.job
            else:
                job = x
            try:
                self._cache[job.id] = done = self._supervise(job, obs, report)
                if not done.closed:
                    states[(done.state, done.cause)] += 1
            except (LostLease, Conflict) as exc:
                self._cache.pop(job.id, None)
                if isinstance(exc, LostLease):
                    report.lost += 1
                else:
                    report.conflicts += 1
        report.steps[_NOTHING] += unchanged
        for (state, cause), n in states.items():
            report.states[(state.value, cause.value if cause else "")] += n
        self._quiet = self._quiet_next
        if self.pruner is not None and self.pruner.due(self.clock.now()):
            self._prune(report)
        return report

    def _prune(self, report: CycleReport) -> None:
        """The archive's retention, after the jobs' work. A failure is counted, never raised: retention is
        housekeeping, and the cycle's work is done."""
        assert self.pruner is not None
        try:
            report.archive_pruned += self.pruner.prune(self.clock.now())
        except Exception:  # the store's error (a lost connection, a locked file): tried again at the next due time
            report.archive_prune_errors += 1

    def _load(self, heads: list[JobHead], steady: list[_Quiet]) -> list[JobRecord]:
        """The records of ``heads``: the copy this supervisor wrote or read last when its version is still the
        stored one, otherwise read (in one batch). So a steady cycle decodes only what others changed. The
        records of ``steady`` stay cached as they are (a quiet job's record is always the cached one); the
        cache lets go of every other job's."""
        cache = self._cache
        stale = [h.id for h in heads if (c := cache.get(h.id)) is None or c.version != h.version]
        fetched = {j.id: j for j in self.records.get_many(stale)} if stale else {}
        out = []
        for h in heads:
            job = fetched.get(h.id) or cache.get(h.id)
            if job is not None:
                cache[h.id] = job
                out.append(job)
        if len(cache) > len(steady) + len(out):  # jobs that are no longer this supervisor's, or closed
            keep = {q.job.id for q in steady} | {j.id for j in out}
            self._cache = {k: v for k, v in cache.items() if k in keep}
        return out

    def _steady(self, ours: list[JobHead]) -> tuple[list[_Quiet | JobHead], list[_Quiet], list[JobHead]]:
        """Mark this supervisor's leased heads that are steady (quiet last cycle, settled, and still at the version
        it held then: nothing but new evidence can change them). Returns ``ours`` in order with each steady head
        replaced by its entry, the steady entries, and the other heads."""
        quiet = self._quiet
        marks: list[_Quiet | JobHead] = []
        steady: list[_Quiet] = []
        rest: list[JobHead] = []
        for h in ours:
            q = quiet.get(h.id)
            if q is not None and q.settled is not None and q.job.version == h.version:
                steady.append(q)
                marks.append(q)
            else:
                rest.append(h)
                marks.append(h)
        return marks, steady, rest

    @staticmethod
    def _in_order(
        marks: list[_Quiet | JobHead], room: list[JobHead], owned: list[JobRecord]
    ) -> list[_Quiet | JobRecord]:
        """The steady entries and the owned records in the order of the heads (``marks``, then ``room``), so
        jobs are supervised in the same order whichever path they take."""
        by_id = {j.id: j for j in owned}
        out: list[_Quiet | JobRecord] = []
        for m in marks:
            if isinstance(m, _Quiet):
                out.append(m)
            elif (job := by_id.get(m.id)) is not None:
                out.append(job)
        out += [job for h in room if (job := by_id.get(h.id)) is not None]
        return out

    def _unchanged(self, q: _Quiet, obs: _Observation) -> bool:
        """Whether this cycle's observation leaves the steady job ``q`` as it is: its object was not read (a
        watch reported no change), or was read and shows what its record holds, with no cessation; and no
        archive work waits for it. Then the whole path (fold, archive, next_step) would change nothing."""
        settled = q.settled
        assert settled is not None
        sid = settled.scheduler_id
        if sid in obs.inspected and (sid in obs.cessation or not settled.unchanged_by(obs.evidence.get(sid))):
            return False
        return self.archiver is None or not self.archiver.pending(q.job.id)

    # ----- sharing the work -----------------------------------------------------------------------------------

    def share(self, peers: Peers) -> int:
        """How many jobs this supervisor should hold: the cluster's jobs needing supervision divided by the
        supervisors alive, rounded up (all of them when it is alone)."""
        return max(1, math.ceil(peers.jobs / max(1, len(peers.owners))))

    def _divide(
        self, heads: list[JobHead], peers: Peers | None, now: float
    ) -> tuple[list[JobHead], list[JobHead], int, float]:
        """Divide ``heads`` in one pass: this supervisor's unexpired leases, the free or expired ones it may take
        this cycle (up to its share, in an order of its own so that supervisors starting together do not all
        race for the same jobs), how many of its own it holds above its share, and when the earliest of its
        leases expires. Without ``peers`` (a supervisor of ``only`` some jobs) its share is every head it was
        given."""
        share = len(heads) if peers is None else self.share(peers)
        owner = self.owner
        ours: list[JobHead] = []
        others: list[JobHead] = []
        earliest = math.inf
        for h in heads:
            expires = h.lease_expires or 0.0
            if h.lease_owner != owner or expires <= now:
                others.append(h)
            else:
                ours.append(h)
                earliest = min(earliest, expires)
        room = max(0, share - len(ours))
        if room and others:
            others.sort(key=lambda h: zlib.crc32(f"{owner}/{h.id}".encode()))
        return ours, others[:room], max(0, len(ours) - share), earliest

    def _release(self, jobs: list[JobRecord], surplus: int, report: CycleReport) -> list[JobRecord]:
        """Give up ``surplus`` of this supervisor's leases (jobs with no open intent, so the next holder has
        nothing to resolve), so a supervisor that joined takes its share; returns the jobs still to supervise."""
        now = self.clock.now()
        released: set[str] = set()
        for job in sorted(jobs, key=lambda j: zlib.crc32(f"{self.owner}/{j.id}".encode()), reverse=True):
            if len(released) >= surplus:
                break
            lease = job.lease
            if lease is None or lease.owner != self.owner or job.open_intents():
                continue
            new = job.copy()
            new.lease = Lease(self.owner, lease.token, now)  # expired now: the next taker moves the token on
            event = Event(job.id, now, "lease", {"owner": None, "token": lease.token, "from": self.owner})
            try:
                self._check(job)
                self.records.update(new, [event], fence=lease.token)
                report.writes += 1
            except (Conflict, LostLease):
                report.conflicts += 1
            self._cache.pop(job.id, None)
            released.add(job.id)
        report.released = len(released)
        return [j for j in jobs if j.id not in released]

    # ----- leases ------------------------------------------------------------------------------------------

    def _renew(self, ours: list[JobHead], now: float, report: CycleReport) -> list[JobHead]:
        """Renew all of this supervisor's leases (``ours``: the heads of its unexpired ones) in ONE write (the
        cycle calls it once the earliest has half run out); returns those heads as they are after it."""
        expires = now + self.lease_ttl
        renewed = self.records.renew(cluster=self.cluster, owner=self.owner, now=now, expires_at=expires)
        report.writes += 1
        for job_id, version in renewed.items():
            job = self._cache.get(job_id)
            if job is not None and job.version == version - 1 and job.lease is not None:
                job.version = version
                job.lease = Lease(self.owner, job.lease.token, expires)
        return [JobHead(h.id, renewed[h.id], self.owner, expires) if h.id in renewed else h for h in ours]

    def _own(self, job: JobRecord, now: float, report: CycleReport) -> JobRecord | None:
        """The job under this supervisor's valid lease (taken as needed), or None if another holds it."""
        lease = job.lease
        if lease is not None and lease.owner == self.owner and now < lease.expires_at:
            return job  # renewed for all jobs at once (see _renew)
        if lease is not None and now < lease.expires_at:
            return None
        # free, or expired (ours included: an expired lease is never renewed in place, the token moves on)
        token = (lease.token if lease else 0) + 1
        new = job.copy()
        new.lease = Lease(self.owner, token, now + self.lease_ttl)
        new.updated_at = now
        previous = lease.owner if lease else None
        event = Event(job.id, now, "lease", {"owner": self.owner, "token": token, "from": previous})
        written = self.records.update(new, [event])  # compare-and-set on the version: one taker wins
        report.writes += 1
        if previous is not None and previous != self.owner:
            report.takeovers += 1
        self._seen.discard(job.id)
        return written

    def _check(self, job: JobRecord) -> None:
        """Raise LostLease unless ``job`` shows this supervisor's lease, unexpired on the clock."""
        if Mutation.SKIP_FENCE in self.mutations or Mutation.STORE_IGNORES_FENCE in self.mutations:
            return  # planted bug: no lease check before a write
        lease = job.lease
        if lease is None or lease.owner != self.owner or self.clock.now() >= lease.expires_at:
            raise LostLease(f"job {job.id}: {self.owner} no longer holds the lease")

    def _fence(self, job: JobRecord) -> int | None:
        if Mutation.SKIP_FENCE in self.mutations or job.lease is None:
            return None
        return job.lease.token

    def _store(self, new: JobRecord, events: Sequence[Event], report: CycleReport) -> JobRecord:
        self._check(new)
        written = self.records.update(new, events, fence=self._fence(new))
        report.writes += 1
        return written

    def _commit(
        self,
        job: JobRecord,
        change: Callable[[JobRecord], tuple[JobRecord, list[Event]]],
        report: CycleReport,
        first: tuple[JobRecord, list[Event]] | None = None,
    ) -> JobRecord:
        """Apply ``change`` and write it; after a lost compare-and-set re-read, re-check the lease and retry.
        ``first``: ``change(job)`` already computed by the caller."""
        for attempt in range(3):
            new, events = first if first is not None and attempt == 0 else change(job)
            if new is job:
                return job
            try:
                return self._store(new, events, report)
            except Conflict:
                report.conflicts += 1
                job = self.records.get(job.id)
                self._check(job)
        raise Conflict(f"job {job.id}: kept losing the compare-and-set")

    # ----- observation ----------------------------------------------------------------------------------------

    def _observe(self, items: Sequence[_Quiet | JobRecord], now: float, report: CycleReport) -> _Observation:
        """Read what ``items`` need read this cycle (see the module docstring); steady entries (:class:`_Quiet`)
        are settled: a live object, no intent, no stray."""
        obs = _Observation()
        ids: list[str] = []
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
            if isinstance(job, _Quiet):
                sid = job.settled.scheduler_id  # type: ignore[union-attr]
                if changed is None or sid in changed:
                    ids.append(sid)
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
            if intents:
                for s in job.submissions:
                    for sid in s.strays:
                        if any(i.open and now >= i.deadline and i.args.get("schedulerId") == sid for i in intents):
                            ids.append(sid)
        if ids:
            report.observation_calls += 1
            try:
                obs.evidence = dict(self.backend.inspect_many(ids))
                obs.inspected = set(ids)
                obs.inspected_at = self.clock.now()
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

    # ----- one job -------------------------------------------------------------------------------------------

    def rules_for(self, job: JobRecord) -> RuleSet:
        if job.rules is None:
            return self.default_rules
        key = json.dumps(job.rules, sort_keys=True)
        rules = self._rules_cache.get(key)
        if rules is None:
            rules = self._rules_cache[key] = RuleSet.from_data(job.rules)
        return rules

    def _fold(self, job: JobRecord, obs: _Observation, refresh: float) -> tuple[JobRecord, list[Event]]:
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
                )
                events += ev
        for sid in [sid for s in job.submissions for sid in s.strays if sid in obs.inspected]:
            job, ev = fold_stray(job, sid, obs.evidence.get(sid), now, obs.inspected_at)
            events += ev
        if self._planted_fold:
            job = self._planted_fold_on(job)
        return job, events

    def _planted_fold_on(self, job: JobRecord) -> JobRecord:
        """Planted bugs (Mutation.SUCCESS_ON_VANISH, Mutation.CAUSE_MIXUP, Mutation.NOT_RUNNING_IS_EVICTED) applied to
        a folded record."""
        from dispatch.outcome import Outcome

        cur = job.current
        if cur is None:
            return job
        new = job.copy()
        sub = new.submission(cur.n)
        changed = False
        if Mutation.SUCCESS_ON_VANISH in self.mutations and sub.outcome and sub.outcome.state is State.UNKNOWN:
            sub.outcome = Outcome(State.SUCCEEDED, Cause.EXIT, sub.outcome.evidence, exit_code=0)
            changed = True
        if Mutation.CAUSE_MIXUP in self.mutations:
            for ex in sub.executions:
                if ex.outcome.cause is Cause.PREEMPTED:
                    ex.outcome = dataclasses.replace(ex.outcome, cause=Cause.NODE_LOST)
                    changed = True
        out = sub.outcome
        if (
            Mutation.NOT_RUNNING_IS_EVICTED in self.mutations
            and out is not None
            and (out.state is State.UNKNOWN or (out.state.waiting and sub.gate is GateState.OPEN))
            and not sub.gone
        ):
            sub.outcome = Outcome(State.FAILED, Cause.NODE_LOST, out.evidence, detail="not seen running: evicted")
            sub.unknown_since = None
            changed = True
        return new if changed else job

    def _supervise(self, job: JobRecord, obs: _Observation, report: CycleReport) -> JobRecord:
        """Fold the observation into ``job``, archive the output of executions it saw end, and apply its steps;
        returns the record as last written."""
        folded = self._fold(job, obs, self.refresh)
        done = job
        if folded[0] is not job:
            done = self._commit(job, lambda j: self._fold(j, obs, self.refresh), report, first=folded)
        if self.archiver is not None:
            self.archiver.note(job, done)
            for entry in self.archiver.run(done.id):
                report.archive[entry.status.value] += 1
        self.exclusions.note(job, done, first=job.id not in self._seen)
        job = done
        self._seen.add(job.id)
        if Mutation.RELEASE_OTHERS_HOLDS in self.mutations:
            for h in job.active_holds():  # planted bug: lifts a hold someone else placed
                if h.owner != self.owner and job.current is not None and job.current.scheduler_id is not None:
                    job = self._act(
                        job,
                        Step(
                            StepKind.ACT,
                            "planted",
                            action=Action.RELEASE,
                            submission=h.submission,
                            args={"instance": h.instance},
                        ),
                        report,
                    )
                    break
        return self._steps(job, report)

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
            step = self.exclusions.amend(job, next_step(job, self.rules_for(job), self.facts, now), self.rules_for(job))
            report.steps[step.kind.value] += 1
            if step.kind is StepKind.NOTHING:
                settled = None if job.closed else Settled.of(job, self.refresh)
                self._quiet_next[job.id] = _Quiet(job, settled, (job.state, job.cause))
                return job
            if step.kind in (StepKind.WAIT, StepKind.OBSERVE):
                return job
            if step.kind is StepKind.ACT:
                if Mutation.RETRY_AS_NEW_SUBMISSION in self.mutations:
                    step = _planted_retry(job, step)
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

    def _record_step(self, job: JobRecord, step: Step) -> tuple[JobRecord, list[Event]]:
        # re-derived on the record being written, so a retry after a lost race never applies a stale step
        now = self.clock.now()
        again = self.exclusions.amend(job, next_step(job, self.rules_for(job), self.facts, now), self.rules_for(job))
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
        if Mutation.ACT_BEFORE_INTENT in self.mutations:
            return self._act_before_intent(base, step, report)
        written, intent = self.actor.write_intent(
            base,
            step.action,
            step.submission,
            args=step.args,
            decision=step.decision,
            fence=self._fence(job),
            events=[Event(job.id, self.clock.now(), "step", {"reason": step.reason, "by": self.owner})],
        )
        report.writes += 1
        if self.clock.now() > intent.written_at + self.actor.margin:
            # too long since the intent was written: a call now might land after its deadline, when another
            # supervisor may already have resolved it by observation. Record it as not made.
            late = Unavailable(f"not called: more than {self.actor.margin:g}s passed since the intent was written")
            return self._commit(
                written, lambda j: _answer(j, intent, IntentStatus.FAILED, None, late, self.clock.now()), report
            )
        self._check(written)
        report.actions += 1
        status, answer, error = self.actor.attempt(written, intent)
        if (
            Mutation.OPEN_BEFORE_RECORD in self.mutations
            and step.action is Action.START
            and status is IntentStatus.DONE
        ):
            with contextlib.suppress(DispatchError):
                self.backend.open(str(answer))  # planted bug: opened before the scheduler id is recorded
        if (
            Mutation.RESUBMIT_ON_UNKNOWN in self.mutations
            and status is IntentStatus.UNKNOWN
            and step.action in (Action.START, Action.REQUEUE)
        ):
            return self._forget_unknown(written, intent, report)
        return self._commit(written, lambda j: _answer(j, intent, status, answer, error, self.clock.now()), report)

    def _act_before_intent(self, base: JobRecord, step: Step, report: CycleReport) -> JobRecord:
        """Planted bug (Mutation.ACT_BEFORE_INTENT): the call is made before its intent is written."""
        assert step.action is not None and step.submission is not None
        now = self.clock.now()
        provisional = Intent(
            base.next_seq(base.intents), step.action, step.submission, self.owner, now, now, args=dict(step.args)
        )
        report.actions += 1
        status, answer, error = self.actor.attempt(base, provisional)
        written, intent = self.actor.write_intent(
            base, step.action, step.submission, args=step.args, decision=step.decision, fence=self._fence(base)
        )
        report.writes += 1
        return self._commit(written, lambda j: _answer(j, intent, status, answer, error, self.clock.now()), report)

    def _forget_unknown(self, job: JobRecord, intent: Intent, report: CycleReport) -> JobRecord:
        """Planted bug (Mutation.RESUBMIT_ON_UNKNOWN): an unknown outcome is written as a failure."""

        def change(j: JobRecord) -> tuple[JobRecord, list[Event]]:
            new = j.copy()
            for it in new.intents:
                if it.seq == intent.seq and it.open:
                    it.status, it.resolved_at, it.result = IntentStatus.FAILED, self.clock.now(), "taken as failed"
            return new, []

        return self._commit(job, change, report)


def _answer(
    job: JobRecord, intent: Intent, status: IntentStatus, answer: Any, error: DispatchError | None, now: float
) -> tuple[JobRecord, list[Event]]:
    """Record a call's answer on ``job`` if its intent is still open there (a re-read record may have moved on)."""
    from dispatch.actions import record_answer

    current = next((i for i in job.intents if i.seq == intent.seq), None)
    if current is None or not current.open or current.action is not intent.action:
        return job, []
    new, _, events = record_answer(job, intent.seq, status, answer, error, now)
    new.updated_at = now
    return new, events


def _planted_retry(job: JobRecord, step: Step) -> Step:
    """Planted bug (Mutation.RETRY_AS_NEW_SUBMISSION): a start that failed is made again as a new submission."""
    if step.action is not Action.START or step.new_submission or step.submission is None:
        return step
    failed = any(
        i.action is Action.START and i.submission == step.submission and i.status is IntentStatus.FAILED
        for i in job.intents
    )
    return dataclasses.replace(step, submission=step.submission + 1, new_submission=True) if failed else step


def _node_lost(ev: JobEvidence) -> bool:
    return any(e.outcome.cause is Cause.NODE_LOST and e.outcome.ended for e in ev.executions)


_NOTHING = StepKind.NOTHING.value


__all__ = ["CycleReport", "LostLease", "Supervisor", "default_poll"]
