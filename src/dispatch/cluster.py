"""Opening a cluster: :func:`open` composes the core (an operator and an observer) over an adapter's backend.

``open(name, Config(adapter=..., store=...))`` finds the adapter, decodes its settings strictly, runs its
preflight (inside the adapter's factory), checks its declarations, and returns a :class:`Cluster`:

* ``cluster.operator`` writes: :meth:`Operator.submit`, :meth:`~Operator.stop`, :meth:`~Operator.hold`,
  :meth:`~Operator.release`. Every call goes through the intent protocol (:mod:`dispatch.actions`).
* ``cluster.observer`` reads: :meth:`Observer.get`, :meth:`~Observer.list`, :meth:`~Observer.events`,
  :meth:`~Observer.inspect`.

A read-only open needs no record store; every operator call raises :class:`~dispatch.errors.ReadOnly` before
anything runs.
"""

from __future__ import annotations

import builtins
import os
import secrets
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from dispatch.actions import Actor, marker_for
from dispatch.capabilities import Answer, Capabilities, Capability
from dispatch.clock import SYSTEM_CLOCK, Clock
from dispatch.declarations import Declarations
from dispatch.errors import (
    ConfigError,
    Conflict,
    DispatchError,
    NotFound,
    OutcomeUnknown,
    ReadOnly,
    Rejected,
    Unsupported,
)
from dispatch.records.base import Records
from dispatch.records.model import (
    Action,
    Event,
    GateState,
    Intent,
    IntentStatus,
    JobRecord,
    JobSummary,
    Submission,
)
from dispatch.registry import OpenOptions, adapter
from dispatch.rules import RuleSet
from dispatch.settings import decode
from dispatch.spec import JobSpec
from dispatch.spi import (
    ZERO_BOUND_FORBIDS,
    Backend,
    BatchStarter,
    Holder,
    JobEvidence,
    StartRequest,
    check_backend,
    restrict,
)

_T = TypeVar("_T")
_R = TypeVar("_R")


@dataclass
class Config:
    """How to open a cluster.

    ``adapter``: the adapter's settings (its settings dataclass, a mapping, or JSON text). ``store``: the record
    store (required unless ``read_only``). ``name``: the cluster's name in records (default: the adapter's).
    """

    adapter: Any = None
    store: Records | None = None
    read_only: bool = False
    clock: Clock = SYSTEM_CLOCK
    name: str | None = None


def new_backend(name: str, settings: Any = None, *, read_only: bool = False, clock: Clock = SYSTEM_CLOCK) -> Backend:
    """Build adapter ``name``'s backend with ``settings``, checked against the core's declaration rules.

    A backend that declares a zero CallBound is handed out without Holder, Requeuer and Readmitter.
    """
    info = adapter(name)
    decoded = decode(info.settings, settings, path="") if info.settings is not None else settings
    backend = info.factory(decoded, OpenOptions(read_only=read_only, clock=clock))
    return checked(backend)


def checked(backend: Backend) -> Backend:
    """Apply the declaration rules: reduce a zero-CallBound backend, then verify the rest."""
    decl = backend.declarations()
    if decl.call_bound == 0 and any(isinstance(backend, i) for i in ZERO_BOUND_FORBIDS):
        backend = restrict(backend, ZERO_BOUND_FORBIDS)
    check_backend(backend, decl)
    return backend


def open(name: str, config: Config | None = None, /, **kwargs: Any) -> Cluster:
    """Open cluster ``name`` (an adapter name). Keyword arguments fill a :class:`Config` (``name=`` included:
    the adapter name and the config are positional-only, so they never collide with a Config field)."""
    cfg = config or Config(**kwargs)
    if config is not None and kwargs:
        raise TypeError("pass either a Config or keyword arguments, not both")
    if not cfg.read_only and cfg.store is None:
        raise ConfigError("store", "a writable open needs a record store (or open read-only)")
    backend = new_backend(name, cfg.adapter, read_only=cfg.read_only, clock=cfg.clock)
    return Cluster(cfg.name or name, backend, cfg.store, cfg.clock, read_only=cfg.read_only)


def new_job_id(now: float) -> str:
    """A job id: time-ordered, random, safe in file names, scheduler job names and Kubernetes names."""
    return f"{int(now):08x}{secrets.token_hex(3)}"


def new_hold_instance() -> str:
    """A hold instance: random, so two holds are never confused."""
    return f"h{secrets.token_hex(4)}"


def default_owner(role: str) -> str:
    return f"{role}:{socket.gethostname()}:{os.getpid()}"


class Cluster:
    """One cluster as dispatch sees it: a backend, a record store, an operator and an observer."""

    def __init__(
        self, name: str, backend: Backend, store: Records | None, clock: Clock, *, read_only: bool = False
    ) -> None:
        self.name = name
        self.backend = backend
        self.records = store
        self.clock = clock
        self.read_only = read_only or backend.read_only
        self.operator = Operator(self)
        self.observer = Observer(self)

    def capabilities(self) -> Capabilities:
        return self.backend.capabilities()

    def declarations(self) -> Declarations:
        return self.backend.declarations()

    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # conveniences
    def submit(self, spec: JobSpec, rules: RuleSet | Mapping[str, Any] | None = None) -> str:
        return self.operator.submit(spec, rules)

    def get(self, job_id: str) -> JobRecord:
        return self.observer.get(job_id)


def check_spec(backend: Backend, spec: JobSpec) -> None:
    """Refuse, before any scheduler call, a spec this cluster cannot run (Unsupported names why)."""
    backend.extension_policy().check(spec.extensions, backend.name)
    caps = backend.capabilities()
    if spec.working_dir is not None and caps.answer(Capability.WORKING_DIRECTORY) is Answer.NO:
        caps.require(Capability.WORKING_DIRECTORY, "a working directory")
    if spec.procs_per_node > 1 and caps.answer(Capability.PROCS_PER_NODE) is Answer.NO:
        caps.require(Capability.PROCS_PER_NODE, "more than one process per node")


class Operator:
    """The write side. Every method raises ReadOnly on a read-only cluster before doing anything."""

    def __init__(self, cluster: Cluster, owner: str | None = None) -> None:
        self._c = cluster
        self.owner = owner or default_owner("operator")
        self.new_id = new_job_id
        """Makes job ids from the clock's time (replaceable: the simulator makes them deterministic)."""
        self.new_instance = new_hold_instance
        """Makes hold instances (replaceable, like ``new_id``)."""

    def _writable(self) -> tuple[Records, Actor]:
        if self._c.read_only or self._c.records is None:
            raise ReadOnly(f"cluster {self._c.name} is open read-only")
        return self._c.records, Actor(self._c.records, self._c.backend, self._c.clock, self.owner)

    def submit(self, spec: JobSpec, rules: RuleSet | Mapping[str, Any] | None = None) -> str:
        """Record the job, create its first submission behind a closed gate, record it, open the gate.

        Returns the job id. Raises Unsupported or ConfigError (bad rules) before anything is recorded. If the
        scheduler refuses the job, the refusal is recorded and re-raised. If the creation's outcome is
        unknown, raises OutcomeUnknown carrying ``job_id``: the record keeps the intent and a supervisor
        resolves it by finding the object by its marker. The same happens when a supervisor writes the new
        record while this call is submitting it (it took the job's lease): the write of the answer loses its
        compare-and-set, and the supervisor carries the submission on.
        """
        records, actor = self._writable()
        ruleset = self._checked([spec], rules)
        job = self._record(records, spec, ruleset)
        job_id = job.id
        try:
            start_submission(actor, job, 1)
        except Conflict as exc:
            # a supervisor wrote the new record meanwhile (it took the job's lease): the job is recorded and the
            # supervisor carries the submission on (resolving a start whose answer this write lost by its marker)
            handed = OutcomeUnknown(f"job {job_id}: {exc}; the job is recorded and a supervisor carries it on")
            handed.job_id = job_id
            raise handed from exc
        return job_id

    def _checked(self, specs: Sequence[JobSpec], rules: RuleSet | Mapping[str, Any] | None) -> RuleSet | None:
        """Every spec checked against the backend, and the rules against its capabilities (nothing recorded)."""
        backend = self._c.backend
        for spec in specs:
            check_spec(backend, spec)
        ruleset = rules if isinstance(rules, RuleSet) else RuleSet.from_data(rules) if rules is not None else None
        if ruleset is not None:
            ruleset.check_against(backend, backend.capabilities())
        return ruleset

    def _record(self, records: Records, spec: JobSpec, ruleset: RuleSet | None) -> JobRecord:
        """A new job's record with its first submission (not yet started), created in ``records``."""
        now = self._c.clock.now()
        job_id = self.new_id(now)
        job = JobRecord(
            id=job_id,
            cluster=self._c.name,
            spec=spec,
            created_at=now,
            updated_at=now,
            rules=ruleset.to_json() if ruleset is not None else None,
            submissions=[Submission(1, marker_for(job_id, 1), now)],
        )
        return records.create(job, [Event(job_id, now, "submitted", {"spec": spec.to_json(), "by": self.owner})])

    def submit_many(
        self, specs: Sequence[JobSpec], rules: RuleSet | Mapping[str, Any] | None = None
    ) -> list[Submitted]:
        """Submit many jobs, each its own job with its own record, marker, gate and submission, in one backend
        call per phase where the backend is a :class:`BatchStarter` (one by one otherwise): all recorded with
        their start intents, all created gated, all answers recorded, all gates opened.

        Every spec and the rules are checked before anything is recorded (one bad spec: nothing happens).
        Returns one :class:`Submitted` per spec, in order. A job whose creation or opening failed carries the
        error, already recorded exactly as :meth:`submit` records it: refused (``Rejected``), certainly not
        created (``Unavailable``), or unknown (``OutcomeUnknown``: the intent stays for a supervisor, which
        finds the object by its marker). So each job is either recorded and resolvable, or was never created.
        """
        records, actor = self._writable()
        backend = self._c.backend
        ruleset = self._checked(specs, rules)
        # phase 1: records and start intents
        jobs: list[JobRecord] = []
        intents: list[Intent] = []
        for spec in specs:
            job, intent = actor.write_intent(self._record(records, spec, ruleset), Action.START, 1)
            jobs.append(job)
            intents.append(intent)
        results: list[Submitted] = [Submitted(j.id) for j in jobs]
        # phase 2: create every object gated
        requests = [StartRequest(j.id, 1, j.submissions[0].marker, j.spec) for j in jobs]
        answers = _start_all(backend, requests)
        opened: list[int] = []
        for i, answer in enumerate(answers):
            error = answer if isinstance(answer, DispatchError) else None
            status = (
                IntentStatus.DONE
                if error is None
                else IntentStatus.UNKNOWN
                if isinstance(error, OutcomeUnknown)
                else IntentStatus.FAILED
            )
            try:
                jobs[i] = actor.record(jobs[i], intents[i], status, None if error else answer, error).job
            except Conflict as exc:  # a supervisor took the job meanwhile: it carries the submission on
                results[i] = Submitted(jobs[i].id, _handed(jobs[i].id, exc))
                continue
            if error is not None:
                results[i] = Submitted(jobs[i].id, _with_job(error, jobs[i].id))
            else:
                opened.append(i)
        # phase 3: open every gate
        open_intents: dict[int, Intent] = {}
        for i in list(opened):
            try:
                jobs[i], open_intents[i] = actor.write_intent(jobs[i], Action.OPEN, 1)
            except Conflict as exc:
                results[i] = Submitted(jobs[i].id, _handed(jobs[i].id, exc))
                opened.remove(i)
        sids = [str(jobs[i].submissions[0].scheduler_id) for i in opened]
        for i, error in zip(opened, _open_all(backend, sids), strict=True):
            status = (
                IntentStatus.DONE
                if error is None
                else IntentStatus.UNKNOWN
                if isinstance(error, OutcomeUnknown)
                else IntentStatus.FAILED
            )
            try:
                jobs[i] = actor.record(jobs[i], open_intents[i], status, None, error).job
            except Conflict as exc:
                results[i] = Submitted(jobs[i].id, _handed(jobs[i].id, exc))
                continue
            if error is not None:
                results[i] = Submitted(jobs[i].id, _with_job(error, jobs[i].id))
        return results

    def stop(self, job_id: str) -> None:
        """Stop the job: no more recovery, and its current scheduler object is ended (if it has one)."""
        records, actor = self._writable()
        job = records.get(job_id)
        job.stop_requested = True
        job.closed = True
        now = self._c.clock.now()
        job.updated_at = now
        job = records.update(job, [Event(job_id, now, "stop-requested", {"by": self.owner})])
        sub = job.current
        if sub is None or sub.scheduler_id is None:
            return
        # a submission marked gone is stopped too: "gone" may be only a reader's narrower view (another user's
        # credentials); an object that is truly gone answers NotFound, which is fine here
        job, intent = actor.write_intent(job, Action.STOP, sub.n)
        result = actor.carry_out(job, intent)
        if result.error is not None and not isinstance(result.error, NotFound):
            raise result.error

    def hold(self, job_id: str, reason: str = "held by a user") -> str:
        """Place a dispatch hold on the job's current submission; returns the hold instance."""
        records, actor = self._writable()
        if not isinstance(self._c.backend, Holder):
            raise Unsupported(f"cluster {self._c.name} cannot hold jobs (no Holder)")
        self._c.capabilities().require(Capability.HOLD, "a hold")
        job = records.get(job_id)
        sub = job.current
        if sub is None or sub.scheduler_id is None:
            raise Rejected(f"job {job_id} has no scheduler object to hold yet")
        instance = self.new_instance()
        job, intent = actor.write_intent(job, Action.HOLD, sub.n, args={"instance": instance, "reason": reason})
        result = actor.carry_out(job, intent)
        if result.error is not None:
            raise result.error
        return instance

    def release(self, job_id: str, instance: str | None = None) -> list[str]:
        """Lift this operator's holds (or the one ``instance``); returns the instances lifted.

        A hold placed by a supervisor belongs to it: lifting it here needs its instance named explicitly.
        """
        records, actor = self._writable()
        if not isinstance(self._c.backend, Holder):
            raise Unsupported(f"cluster {self._c.name} cannot hold jobs (no Holder)")
        job = records.get(job_id)
        holds = [
            h for h in job.active_holds() if (h.instance == instance if instance else h.owner.startswith("operator:"))
        ]
        if instance and not holds:
            raise NotFound(f"job {job_id} has no active hold {instance!r}")
        lifted = []
        for h in holds:
            job, intent = actor.write_intent(job, Action.RELEASE, h.submission, args={"instance": h.instance})
            result = actor.carry_out(job, intent)
            job = result.job
            if result.error is not None:
                raise result.error
            lifted.append(h.instance)
        return lifted


def start_submission(
    actor: Actor,
    job: JobRecord,
    n: int,
    *,
    fence: int | None = None,
    hold_instance: str | None = None,
    decision: int | None = None,
) -> JobRecord:
    """Create submission ``n`` behind its gate, record it, optionally hold it, then open the gate.

    Each step is an intent written before its call. Raises the backend's error after recording it; on an
    unknown outcome raises OutcomeUnknown with ``job_id`` set, leaving the intent for a supervisor.
    """
    job, intent = actor.write_intent(job, Action.START, n, fence=fence, decision=decision)
    result = actor.carry_out(job, intent, fence=fence)
    job = result.job
    if result.error is not None:
        _raise_with_job(result.error, job.id)
    if hold_instance is not None:
        job, intent = actor.write_intent(
            job, Action.HOLD, n, fence=fence, args={"instance": hold_instance, "reason": "held by a rule"}
        )
        result = actor.carry_out(job, intent, fence=fence)
        job = result.job
        if result.error is not None:
            _raise_with_job(result.error, job.id)
    job, intent = actor.write_intent(job, Action.OPEN, n, fence=fence)
    result = actor.carry_out(job, intent, fence=fence)
    job = result.job
    if result.error is not None:
        _raise_with_job(result.error, job.id)
    return job


@dataclass(frozen=True)
class Submitted:
    """One job of :meth:`Operator.submit_many`: its id, and the recorded error when it did not get through."""

    job_id: str
    error: DispatchError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def _each(items: Sequence[_T], call: Callable[[_T], _R]) -> list[_R | DispatchError]:
    """``call`` on every item in turn, a DispatchError taken as that item's answer rather than raised."""
    out: list[_R | DispatchError] = []
    for item in items:
        try:
            out.append(call(item))
        except DispatchError as exc:
            out.append(exc)
    return out


def _start_all(backend: Backend, requests: Sequence[StartRequest]) -> list[str | DispatchError]:
    """One batched call when the backend is a BatchStarter; otherwise ``start`` per request."""
    if not requests:
        return []
    if isinstance(backend, BatchStarter):
        return backend.start_many(requests)
    return _each(requests, backend.start)


def _open_all(backend: Backend, scheduler_ids: Sequence[str]) -> list[DispatchError | None]:
    """One batched call when the backend is a BatchStarter; otherwise ``open`` per object (None: opened)."""
    if not scheduler_ids:
        return []
    if isinstance(backend, BatchStarter):
        return backend.open_many(scheduler_ids)
    return _each(scheduler_ids, backend.open)


def _handed(job_id: str, exc: Exception) -> OutcomeUnknown:
    handed = OutcomeUnknown(f"job {job_id}: {exc}; the job is recorded and a supervisor carries it on")
    handed.job_id = job_id
    return handed


def _with_job(error: DispatchError, job_id: str) -> DispatchError:
    error.job_id = job_id
    return error


def _raise_with_job(error: DispatchError, job_id: str) -> None:
    """Raise ``error`` (or, for an unknown outcome, an OutcomeUnknown that says so) with ``job_id`` set."""
    error.job_id = job_id
    if isinstance(error, OutcomeUnknown):
        handed = OutcomeUnknown(f"job {job_id}: {error} (recorded; a supervisor will resolve it by finding the object)")
        handed.job_id = job_id
        raise handed from error
    raise error


class Observer:
    """The read side: records (when the cluster has a store) and the backend's live evidence."""

    def __init__(self, cluster: Cluster) -> None:
        self._c = cluster

    def _records(self) -> Records:
        if self._c.records is None:
            raise ReadOnly(f"cluster {self._c.name} was opened without a record store; use inspect()")
        return self._c.records

    def get(self, job_id: str) -> JobRecord:
        """The job's record (a copy). NotFound for an unknown id."""
        return self._records().get(job_id)

    def list(self, *, active_only: bool = False, limit: int | None = None) -> builtins.list[JobSummary]:
        return self._records().summaries(active_only=active_only, cluster=self._c.name, limit=limit)

    def events(self, job_id: str) -> builtins.list[Event]:
        return self._records().events(job_id)

    def inspect(self, scheduler_id: str) -> JobEvidence:
        """The scheduler's evidence for one object, read now (works on a read-only open)."""
        return self._c.backend.inspect(scheduler_id)


def pending_start(job: JobRecord) -> bool:
    """True while the job's current submission has a start whose outcome is not yet known."""
    sub = job.current
    if sub is None or sub.gate is not GateState.PLANNED:
        return False
    return any(
        i.action is Action.START and i.submission == sub.n and i.status in (IntentStatus.PENDING, IntentStatus.UNKNOWN)
        for i in job.intents
    )


__all__ = ["Cluster", "Config", "Observer", "Operator", "check_spec", "new_backend", "open", "start_submission"]
