"""The supervisor: observes every job it owns in one batched pass, folds the evidence, decides, and acts.

One :meth:`Supervisor.cycle`:

1. reads the job records (of its cluster) and takes or renews a **lease** on each job nobody else holds: a
   lease carries a fencing token, and every later write for that job passes ``fence=token``, so a supervisor
   whose lease was taken over cannot write (the store refuses it) (:mod:`dispatch.supervise.leases`, which
   also shares the jobs among the cluster's supervisors);
2. **observes** in a constant number of backend calls whatever the number of jobs
   (:mod:`dispatch.supervise.observation`); a failed observation (Unavailable) is not a job failure;
3. **folds** the evidence into each record (:func:`~dispatch.supervise.fold.fold`, pure) and writes it if it
   changed;
4. applies :func:`~dispatch.supervise.next.next_step` (pure) until it says wait or nothing
   (:mod:`dispatch.supervise.acting`): record-only steps are written; a backend call writes its intent under the
   fence *before* the call and records the answer after it.

Settled quiet jobs take the steady path (:mod:`dispatch.supervise.steady`): no record read, fold or next_step
while nothing changes. The :class:`Supervisor` class is those parts composed; this module holds its
construction and the loop. What a cycle did is a :class:`~dispatch.supervise.report.CycleReport`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Protocol

from dispatch.actions import DEFAULT_MARGIN, Actor, default_owner
from dispatch.clock import Clock, StoreTime
from dispatch.declarations import Declarations, check_poll_interval
from dispatch.errors import ConfigError, Conflict
from dispatch.outcome import Cause, State
from dispatch.records.base import Records
from dispatch.records.model import Event, JobHead, JobRecord, Peers
from dispatch.rules import RuleSet
from dispatch.spi import Backend, RankProgress, Watcher
from dispatch.supervise.acting import MAX_STEPS_PER_JOB, Acting
from dispatch.supervise.archive import Archiver, ArchiveSettings, Pruner
from dispatch.supervise.blame import Exclusions, SuspectPolicy
from dispatch.supervise.leases import LostLease
from dispatch.supervise.observation import Observation, Observing
from dispatch.supervise.report import CycleReport
from dispatch.supervise.steady import Quiet, Steady
from dispatch.supervise.step import Facts, StepKind

DEFAULT_LEASE_TTL = 120.0
DEFAULT_MAX_POLL = 30.0


class ClusterName(Protocol):
    """A cluster as the supervisor takes one (:class:`dispatch.cluster.Cluster`, whose layer sits above the
    supervisor's and is not imported here): only its name is read."""

    @property
    def name(self) -> str: ...


def default_poll(declarations: Declarations) -> float:
    """Half the shortest PolledLoss window, at most 30 s (a Watcher: 30 s between watch reads)."""
    loss = declarations.polled_loss
    shortest = loss.shortest() if loss is not None else None
    if shortest is None:
        return DEFAULT_MAX_POLL
    return min(DEFAULT_MAX_POLL, shortest / 2)


class Supervisor(Acting, Observing, Steady):
    """Applies each job's rules (or ``default_rules``) to the jobs of one cluster in one record store.

    ``owner`` names this supervisor in leases, intents and decisions (default: host and pid; it must be unique
    per process). ``poll`` is the time between cycles; for a polled backend it must not exceed the shortest
    PolledLoss window (ConfigError ``poll`` otherwise). ``cluster`` is the cluster (or its name) whose records
    it supervises (default: the backend's name). ``lease_ttl`` bounds how long a dead supervisor's jobs wait
    before another takes them over. ``archive`` bounds the output archive kept for
    a backend whose output goes with its executions (:mod:`dispatch.supervise.archive`; default 1 MiB per
    execution, kept forever; with ``keep`` set, the supervisor prunes the store's archive hourly, after a
    cycle's work). ``steady=False`` sends every job the whole way each cycle (observe, fold, next_step) instead
    of letting settled quiet jobs take the steady path (see :meth:`cycle`): the decisions are the same, and the
    simulator compares the two. ``lease_clock`` is the clock leases are judged by: the record store's
    (:func:`~dispatch.records.base.store_clock`; ``dispatch supervise`` passes it), so that a supervisor whose
    own clock is off neither takes a live lease nor acts on an expired one; without it (tests and the simulator
    on one fake clock, a store in memory) the supervisor's own ``clock`` judges them. ``clock`` may itself be a
    :class:`~dispatch.clock.StoreTime` (``dispatch supervise`` shares one with its backend, so the evidence times
    the backend stamps are on the store's time line as well).
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
        cluster: str | ClusterName | None = None,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        margin: float = DEFAULT_MARGIN,
        refresh: float | None = None,
        only: Collection[str] | None = None,
        archive: ArchiveSettings | None = None,
        steady: bool = True,
        suspects: SuspectPolicy | None = None,
        lease_clock: Callable[[], float] | None = None,
    ) -> None:
        decl = backend.declarations()
        self.backend = backend
        self.records = records
        self.store_time = (
            clock if isinstance(clock, StoreTime) else None if lease_clock is None else StoreTime(clock, lease_clock)
        )
        """This supervisor's time carried onto the store's (synced every cycle): ``clock`` itself when it is one,
        else made from ``lease_clock``; None when leases are judged by ``clock``."""
        self.clock = clock if self.store_time is None else self.store_time
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
        self.only = None if only is None else frozenset(only)
        """When set, the supervisor looks after these jobs only (``dispatch run``'s in-process supervisor): it
        registers no peer and takes no share, so the services sharing the cluster keep theirs."""
        self.actor = Actor(records, backend, self.clock, self.owner, margin=margin)
        self.facts = Facts.of(backend)
        if isinstance(default_rules, RuleSet) or default_rules is None:
            self.default_rules = default_rules or RuleSet()
        else:
            self.default_rules = RuleSet.from_data(default_rules)
        self.default_rules.check_against(backend, self.facts.capabilities)
        self._adopts = self.default_rules.to_json() != RuleSet().to_json()
        """Whether a job without rules adopts the defaults (:meth:`_adopt`; an empty set changes nothing)."""
        self._rules_cache: dict[str, RuleSet] = {}
        self._cache: dict[str, JobRecord] = {}
        self._cursor: str | None = None
        self._seen: set[str] = set()
        self._pending: set[str] = set()
        self.progress_every: float | None = None
        self.progress: dict[str, tuple[RankProgress, ...]] = {}
        self._progress_at: dict[str, float] = {}
        """When each running job's progress was last read (a ProgressScope backend: :data:`PROGRESS_EVERY`)."""
        self._quiet: dict[str, Quiet] = {}
        """The jobs (by id) for which next_step said ``nothing`` last cycle (see :meth:`_steps`)."""
        self._quiet_next: dict[str, Quiet] = {}
        self._fast = steady
        """Whether settled quiet jobs take the steady path (see :meth:`cycle`)."""
        self.archiver = Archiver.for_backend(backend, records, self.clock, archive)
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
        with ``steady=False``.

        With a ``lease_clock`` the cycle begins by reading it (one read of the store's clock): every lease is then
        taken, renewed and given up by the store's time, and the supervisor's own time is carried onto it for the
        rest of the cycle, so its check before every write and every call (:meth:`_check`) is against the
        store's clock too."""
        now = self.clock.now() if self.store_time is None else self.store_time.sync()
        report = CycleReport(at=now, cluster=self.cluster)
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
        marks: list[Quiet | JobHead] = []
        steady: list[Quiet] = []
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
        items: Sequence[Quiet | JobRecord] = owned if not steady else self._in_order(marks, room, owned)
        report.owned = len(items)
        obs = self._observe(items, now, report)
        self._quiet_next = quiet = {}
        states: Counter[tuple[State, Cause | None]] = Counter()  # by enum: made text once per kind, below
        if self.archiver is not None:
            self.archiver.begin_cycle([x.job if isinstance(x, Quiet) else x for x in items])
            self.archiver.catch_up([j for j in owned if j.id not in self._seen])
        unchanged = 0
        for x in items:
            if isinstance(x, Quiet):
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
        report.steps[StepKind.NOTHING.value] += unchanged
        for (state, cause), n in states.items():
            report.states[(state.value, cause.value if cause else "")] += n
        self._quiet = self._quiet_next
        if self.pruner is not None and self.pruner.due(self.clock.now()):
            self._prune(report)
        return report

    def _adopt(self, job: JobRecord, report: CycleReport) -> JobRecord:
        """A job without rules of its own is given this supervisor's default rules, written into its record with
        a ``rules-adopted`` event, so that what ``dispatch show`` and the dashboard say are the rules that
        apply, and a supervisor taking the job over later applies the same ones (whatever its own defaults)."""
        if job.rules is not None or job.closed or not self._adopts:
            return job
        data = self.default_rules.to_json()

        def adopt(j: JobRecord) -> tuple[JobRecord, list[Event]]:
            if j.rules is not None:
                return j, []
            new = j.copy()
            new.rules = data
            new.updated_at = now = self.clock.now()
            source = {"by": self.owner, "source": "the supervisor's default rules", "rules": len(data["rules"])}
            return new, [Event(j.id, now, "rules-adopted", source)]

        return self._commit(job, adopt, report)

    def _prune(self, report: CycleReport) -> None:
        """The archive's retention, after the jobs' work. A failure is counted, never raised: retention is
        housekeeping, and the cycle's work is done."""
        assert self.pruner is not None
        try:
            report.archive_pruned += self.pruner.prune(self.clock.now())
        except Exception:  # the store's error (a lost connection, a locked file): tried again at the next due time
            report.archive_prune_errors += 1

    def _supervise(self, job: JobRecord, obs: Observation, report: CycleReport) -> JobRecord:
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
        job = self._adopt(done, report)
        self._seen.add(job.id)
        if (stalled := self._stall(job, obs)) is not None:
            job = self._act(job, stalled, report)
        return self._steps(job, report)


__all__ = ["MAX_STEPS_PER_JOB", "CycleReport", "LostLease", "Supervisor", "default_poll"]
