"""Opening a cluster: :func:`open` composes the core (an operator and an observer) over an adapter's backend.

``open(name, Config(adapter=..., records=...))`` finds the adapter, decodes its settings strictly, runs its
preflight (inside the adapter's factory), checks its declarations, and returns a :class:`Cluster`:

* ``cluster.operator`` writes: :meth:`Operator.submit`, :meth:`~Operator.stop`, :meth:`~Operator.hold`,
  :meth:`~Operator.release`. Every call goes through the intent protocol (:mod:`dispatch.actions`).
* ``cluster.observer`` reads: :meth:`Observer.get`, :meth:`~Observer.list`, :meth:`~Observer.events`,
  :meth:`~Observer.inspect`.
* :meth:`Cluster.wait` and :meth:`Cluster.run` wait for an outcome, supervising the job in this process.

A read-only open needs no record store; every operator call raises :class:`~dispatch.errors.ReadOnly` before
anything runs.
"""

from __future__ import annotations

import builtins
import copy
import dataclasses
import hashlib
import json
import secrets
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, InitVar, dataclass, field
from typing import Any, TypeVar

from dispatch.accelerators import check_request
from dispatch.actions import Actor, default_owner, marker_for, record_answer
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
from dispatch.extensions import Image
from dispatch.records.base import BatchWrites, Records, batch_writes
from dispatch.records.model import (
    Action,
    BatchMember,
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
    AcceleratorInventory,
    Backend,
    BatchStarter,
    Holder,
    JobEvidence,
    ShapeCheck,
    StartRequest,
    check_backend,
    restrict,
)
from dispatch.umask import caller_umask

_T = TypeVar("_T")
_R = TypeVar("_R")


@dataclass
class Config:
    """How to open a cluster.

    ``adapter``: the adapter's settings (its settings dataclass, a mapping, or JSON text). ``records``: the
    record store (required unless ``read_only``). ``name``: the cluster's name in records (default: the adapter's).
    ``store`` is the old spelling of ``records``: accepted with a DeprecationWarning until the next release.
    """

    adapter: Any = None
    records: Records | None = None
    read_only: bool = False
    clock: Clock = SYSTEM_CLOCK
    name: str | None = None
    _: KW_ONLY
    store: InitVar[Records | None] = None

    def __post_init__(self, store: Records | None) -> None:
        if store is not None:
            self.records = _renamed_store(store, self.records, stacklevel=4)


def _renamed_store(store: Records, records: Records | None, *, stacklevel: int) -> Records:
    """The records given as ``store=``, the old spelling, with its deprecation warning."""
    warnings.warn(
        "store= is deprecated, use records= (store= is accepted until the next release)",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
    if records is not None and records is not store:
        raise TypeError("records= and store= (its old spelling) name different record stores")
    return store


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
    if config is not None and kwargs:
        raise TypeError("pass either a Config or keyword arguments, not both")
    store = kwargs.pop("store", None)
    if store is not None:
        kwargs["records"] = _renamed_store(store, kwargs.get("records"), stacklevel=3)
    cfg = config or Config(**kwargs)
    if not cfg.read_only and cfg.records is None:
        raise ConfigError("records", "a writable open needs a record store (or open read-only)")
    backend = new_backend(name, cfg.adapter, read_only=cfg.read_only, clock=cfg.clock)
    return Cluster(cfg.name or name, backend, cfg.records, cfg.clock, read_only=cfg.read_only)


ID_BYTES = 8
"""A job id is 16 hex digits: 64 random bits (ids made before this were 14: 8 of time and 6 random; they are read,
typed and matched by prefix as ever)."""
MINT_TRIES = 8
"""How many ids one new job tries before giving up with Conflict (another job holds each: never, in practice)."""


def new_job_id(now: float) -> str:
    """A job id: 16 hex digits, 64 random bits, safe in file names, scheduler job names and Kubernetes names.

    ``now`` is not used (an id says nothing about time: records are listed by their creation time); it stays for
    minters that make ids from the clock, like the simulator's."""
    return secrets.token_hex(ID_BYTES)


def new_batch_key() -> str:
    """A fresh batch key for :meth:`Operator.submit_many`: 128 random bits."""
    return secrets.token_hex(16)


def batch_job_id(key: str, index: int, probe: int) -> str:
    """The id job ``index`` of batch ``key`` takes at try ``probe``: 16 hex digits of a hash of the three, so a
    retry of the batch with the same key finds the same ids. A later probe is tried only when the id is held by a
    job of another batch (a collision)."""
    digest = hashlib.blake2b(f"{key}\x00{index}\x00{probe}".encode(), digest_size=ID_BYTES)
    return digest.hexdigest()


def new_hold_instance() -> str:
    """A hold instance: random, so two holds are never confused."""
    return f"h{secrets.token_hex(4)}"


class Cluster:
    """One cluster as dispatch sees it: a backend, a record store, an operator and an observer."""

    def __init__(
        self, name: str, backend: Backend, records: Records | None, clock: Clock, *, read_only: bool = False
    ) -> None:
        self.name = name
        self.backend = backend
        self.records = records
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

    def wait(self, job_id: str, timeout: float | None = None) -> JobRecord:
        """Supervise the job in this process until it is over, as ``dispatch run`` does, and return its final
        record (``record.outcome``: state, cause, exit code). Its rules are applied here. ``timeout`` seconds
        (None: no limit) raise :class:`TimeoutError` and leave the job running. A job the scheduler says can never
        run (pending, cause ``unrunnable``) raises :class:`Unsupported` naming why, and stays queued. See
        :mod:`dispatch.follow`."""
        from dispatch.follow import follow

        return follow(self, job_id, timeout=timeout)

    def run(
        self, spec: JobSpec, rules: RuleSet | Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> JobRecord:
        """Submit ``spec`` and :meth:`wait` for its outcome: the library's ``dispatch run``. A job the scheduler
        says can never run (pending, cause ``unrunnable``) is stopped, with the reason recorded, and its final
        record (cancelled) returned: nothing this call submitted is left in the queue."""
        from dispatch.follow import follow, unrunnable, unrunnable_reason

        job_id = self.operator.submit(spec, rules)

        def each(job: JobRecord) -> None:
            if unrunnable(job):
                self.operator.stop(job_id, reason=unrunnable_reason(job))

        return follow(self, job_id, timeout=timeout, each=each)


def check_spec(backend: Backend, spec: JobSpec) -> None:
    """Refuse, before any scheduler call, a spec this cluster cannot run (Unsupported names why)."""
    caps = backend.capabilities()
    if spec.extension(Image) is not None and caps.answer(Capability.CONTAINER_IMAGE) is Answer.NO:
        caps.require(Capability.CONTAINER_IMAGE, "the dispatch.Image extension")
    backend.extension_policy().check(spec.extensions, backend.name)
    if spec.working_dir is not None and caps.answer(Capability.WORKING_DIRECTORY) is Answer.NO:
        caps.require(Capability.WORKING_DIRECTORY, "a working directory")
    if spec.procs_per_node > 1 and caps.answer(Capability.PROCS_PER_NODE) is Answer.NO:
        caps.require(Capability.PROCS_PER_NODE, "more than one process per node")
    check_accelerators(backend, spec)
    check_shape(backend, spec)


def check_shape(backend: Backend, spec: JobSpec) -> None:
    """Refuse (:class:`Unsupported`, ``refused: <why>``), before anything is recorded, a spec whose shape (nodes,
    CPUs and memory per node) the cluster can never run, as its :class:`ShapeCheck` says. A backend that is not
    one, or cannot tell, lets the spec through (the scheduler then decides)."""
    if isinstance(backend, ShapeCheck):
        why = backend.never_runs(spec)
        if why:
            raise Unsupported(f"refused: {why}")


def check_accelerators(backend: Backend, spec: JobSpec) -> None:
    """Refuse (:class:`Unsupported`), before anything is recorded, a spec asking for GPUs ``backend``'s cluster
    can never give: it answers ``Accelerators`` no, or its inventory has no pool big enough. An unknown answer
    lets the spec through (the scheduler then decides)."""
    if spec.resources.gpus_per_node == 0:
        return
    inventory = backend.accelerators() if isinstance(backend, AcceleratorInventory) else None
    if inventory is None:
        answer = backend.capabilities()[Capability.ACCELERATORS]
        if answer.answer is Answer.NO:
            raise Unsupported(f"a request for GPUs needs Accelerators, which is no here: {answer.reason}")
        return
    check_request(inventory, spec.resources, spec.nodes, f"this {backend.name} cluster")


def with_caller_umask(spec: JobSpec) -> JobSpec:
    """``spec`` with the submitting process's umask when it names none (:attr:`JobSpec.umask`): recorded with
    the job, so every execution, a supervisor's resubmission under another umask too, runs under the one its
    submitter had."""
    return spec if spec.umask is not None else dataclasses.replace(spec, umask=caller_umask())


class Operator:
    """The write side. Every method raises ReadOnly on a read-only cluster before doing anything."""

    def __init__(self, cluster: Cluster, owner: str | None = None) -> None:
        self._c = cluster
        self.owner = owner or default_owner("operator")
        self.new_id: Callable[[float], str] = new_job_id
        """Makes the id of a job :meth:`submit` records, from the clock's time (replaceable: the simulator makes
        them deterministic, tests force collisions)."""
        self.batch_id: Callable[[str, int, int], str] = batch_job_id
        """Makes the id of job ``index`` of batch ``key`` at try ``probe`` for :meth:`submit_many`
        (:func:`batch_job_id`; replaceable like ``new_id``: it must answer the same for the same arguments)."""
        self.new_batch_key: Callable[[], str] = new_batch_key
        """Makes the key of a batch submitted without one (replaceable like ``new_id``)."""
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
        job = self._record(records, with_caller_umask(spec), ruleset)
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

    def _throttle(self, max_running: int | None, count: int) -> int | None:
        """The cap :meth:`submit_many` hands the backend: None when there is none or it caps nothing; checked
        against the capability and the backend (a BatchStarter) before anything is recorded."""
        if max_running is None:
            return None
        if isinstance(max_running, bool) or not isinstance(max_running, int) or max_running < 1:
            raise ConfigError("max_running", f"must be a positive integer (or None), not {max_running!r}")
        if max_running >= count:
            return None
        self._c.capabilities().require(Capability.BATCH_THROTTLE, f"max_running={max_running}")
        if not isinstance(self._c.backend, BatchStarter):
            raise Unsupported(f"max_running needs a backend that starts a batch in one call; {self._c.name}'s does not")
        return max_running

    def _record(self, records: Records, spec: JobSpec, ruleset: RuleSet | None) -> JobRecord:
        """A new job's record with its first submission (not yet started), created in ``records`` under a fresh
        id (another is minted when one is taken)."""
        for _ in range(MINT_TRIES):
            try:
                return self._create(records, self.new_id(self._c.clock.now()), spec, ruleset)
            except Conflict:
                continue  # the id is taken: nothing was written
        raise Conflict(f"no free job id after {MINT_TRIES} tries (is the id minter broken?)")

    def _create(
        self, records: Records, job_id: str, spec: JobSpec, ruleset: RuleSet | None, batch: BatchMember | None = None
    ) -> JobRecord:
        """Create job ``job_id``'s record with its first submission, not yet started (Conflict if the id is taken)."""
        return records.create(*self._new_record(job_id, spec, ruleset, batch))

    def _new_record(
        self, job_id: str, spec: JobSpec, ruleset: RuleSet | None, batch: BatchMember | None = None
    ) -> tuple[JobRecord, list[Event]]:
        """A new job's record (not written) with its first submission, not yet started, and its creation event."""
        now = self._c.clock.now()
        job = JobRecord(
            id=job_id,
            cluster=self._c.name,
            spec=spec,
            created_at=now,
            updated_at=now,
            rules=ruleset.to_json() if ruleset is not None else None,
            submissions=[Submission(1, marker_for(job_id, 1), now)],
            batch=batch,
        )
        data: dict[str, Any] = {"spec": spec.to_json(), "by": self.owner}
        if batch is not None:
            data["batch"] = batch.to_json()
        return job, [Event(job_id, now, "submitted", data)]

    def submit_many(
        self,
        specs: Sequence[JobSpec],
        rules: RuleSet | Mapping[str, Any] | None = None,
        *,
        key: str | None = None,
        max_running: int | None = None,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> list[Submitted]:
        """Submit many jobs, each its own job with its own record, marker, gate and submission, in one backend
        call per phase where the backend is a :class:`BatchStarter` (one by one otherwise): all recorded with
        their start intents, all created gated, all answers recorded, all gates opened.

        Every spec and the rules are checked before anything is recorded (one bad spec: nothing happens).
        Returns one :class:`Submitted` per spec, in order. A job whose creation or opening failed carries the
        error, already recorded exactly as :meth:`submit` records it: refused (``Rejected``), certainly not
        created (``Unavailable``), or unknown (``OutcomeUnknown``: the intent stays for a supervisor, which
        finds the object by its marker). So each job is either recorded and resolvable, or was never created.

        ``key`` names the batch (a fresh random one when None): job ``i``'s id derives from the key and ``i``
        (:func:`batch_job_id`), so calling again with the same key and the same specs and rules carries the same
        batch on and never starts a job twice: a job already recorded is returned as it stands (``existed``),
        and only what certainly did not happen yet is done (recording, a start never tried or certainly refused
        as Unavailable, an opening). The same key with other specs or rules raises Conflict before anything is
        recorded. A store error while recording raises :class:`BatchIncomplete`, after the jobs recorded before
        it went through every phase: it carries their results and the key to call again with.

        The phases write the same records in the same order whatever the store; only how many jobs share a
        write differs (:class:`_Writes`: a phase's jobs in one transaction where the store offers
        :class:`BatchWrites`, one write per job otherwise).

        ``max_running`` caps how many of the jobs this call starts run at once: the scheduler keeps the others
        queued until one ends (Slurm: one job array with ``%K``). It needs the :attr:`Capability.BATCH_THROTTLE`
        capability, checked before anything is recorded (Unsupported naming its Reason), unless it is at least the
        number of jobs (then nothing is capped); ConfigError when it is not a positive integer. A backend that
        cannot keep the cap for these jobs (on Slurm: they would need more than one array) refuses every start
        (Rejected) rather than break it. A job the supervisor later resubmits is a job of its own, outside the cap.

        ``progress``, when given, is told how far the phases went: ``progress(phase, done, total)`` with phase
        ``recorded``, ``started`` or ``opened``, after each job or each batched call of the phase (``dispatch
        submit --from`` shows it); it must return quickly.
        """
        records, actor = self._writable()
        ruleset = self._checked(specs, rules)
        throttle = self._throttle(max_running, len(specs))
        key = self.new_batch_key() if key is None else key
        if not key:
            raise ConfigError("key", "a batch key must not be empty")
        rules_json = ruleset.to_json() if ruleset is not None else None
        known = {j.id: j for j in records.get_many([self.batch_id(key, i, 0) for i in range(len(specs))])}
        specs = [with_caller_umask(spec) for spec in specs]
        for i, spec in enumerate(specs):
            found = known.get(self.batch_id(key, i, 0))
            if found is not None and _member(found, key, i):
                self._same_input(records, found, key, spec, rules_json)
        writes = _Writes(records, batch_writes(records))
        batch = _Batch(key, specs, ruleset, rules_json, max_running=throttle, progress=progress)
        stopped = self._record_phase(writes, actor, batch, known)
        self._start_phase(writes, actor, batch)
        self._open_phase(writes, actor, batch)
        if stopped is not None:
            raise BatchIncomplete(key, batch.results, len(specs), stopped)
        return batch.results

    def _record_phase(
        self, writes: _Writes, actor: Actor, batch: _Batch, known: dict[str, JobRecord]
    ) -> DispatchError | None:
        """Phase 1, in index order: every job recorded with its start intent. A job whose first id is free is
        created there with the intent in the same write, together with the others ``writes`` puts beside it; a
        job of an earlier call with this key is taken as it stands (its start intent written when its start is
        still to do, its gate queued for phase 3 when only the opening is); an id taken by another batch's job
        is probed on. Stops at the first error of the store (the jobs after it are not recorded) and returns it."""
        records = writes.records
        fresh = [i for i in range(len(batch.specs)) if self.batch_id(batch.key, i, 0) not in known]
        chunks = iter(writes.chunks(fresh))
        first_ids_free = set(fresh)
        created: dict[int, JobRecord | DispatchError] = {}
        for i, spec in enumerate(batch.specs):
            if i in first_ids_free and i not in created:
                created |= self._create_fresh(writes, actor, batch, next(chunks))
            made = created.get(i)
            if isinstance(made, JobRecord):  # created with its start intent
                batch.results.append(Submitted(made.id))
                batch.jobs.append(made)
                batch.tick("recorded", i + 1)
                continue
            if made is not None and not isinstance(made, Conflict):
                return made  # the store failed: this job and the ones after it are not recorded
            if made is not None:  # its first id was taken meanwhile: probed on from what holds it
                taken = _get_or_none(records, self.batch_id(batch.key, i, 0))
                if taken is not None:
                    known[taken.id] = taken
            try:
                job, existed = self._find_or_create(records, batch.key, i, spec, batch.ruleset, batch.rules_json, known)
            except DispatchError as exc:
                return exc
            batch.results.append(Submitted(job.id, existed=existed))
            batch.jobs.append(job)
            step = _resume_step(job) if existed else Action.START
            if step is None:
                batch.results[i] = Submitted(job.id, _standing_error(job), existed=True)
                batch.tick("recorded", i + 1)
                continue
            if step is Action.OPEN:
                batch.to_open.append(i)
                batch.tick("recorded", i + 1)
                continue
            try:
                batch.jobs[i], batch.start_intents[i] = actor.write_intent(job, Action.START, 1)
            except DispatchError as exc:  # a supervisor took the job meanwhile, or the store failed
                batch.results[i] = Submitted(job.id, _handed(job.id, exc), existed=existed)
            batch.tick("recorded", i + 1)
        return None

    def _create_fresh(
        self, writes: _Writes, actor: Actor, batch: _Batch, indexes: Sequence[int]
    ) -> dict[int, JobRecord | DispatchError]:
        """Create jobs ``indexes`` at their first ids, each with its start intent, in one call of ``writes``.
        Returns each one's answer: the record (its intent joins ``batch.start_intents``), the Conflict of an id
        taken meanwhile, or the store's error (then nothing of the call was written)."""
        items: list[tuple[JobRecord, list[Event]]] = []
        intents: dict[int, Intent] = {}
        for i in indexes:
            job, events = self._new_record(
                self.batch_id(batch.key, i, 0), batch.specs[i], batch.ruleset, BatchMember(batch.key, i)
            )
            intents[i], more = actor.add_intent(job, Action.START, 1)
            items.append((job, [*events, *more]))
        made = dict(zip(indexes, writes.create(items), strict=True))
        batch.start_intents.update({i: intents[i] for i in indexes if isinstance(made[i], JobRecord)})
        return made

    def _find_or_create(
        self,
        records: Records,
        key: str,
        index: int,
        spec: JobSpec,
        ruleset: RuleSet | None,
        rules_json: dict[str, Any] | None,
        known: Mapping[str, JobRecord],
    ) -> tuple[JobRecord, bool]:
        """Job ``index`` of batch ``key``: found (True) or created (False), at the first probe whose id no job of
        another batch holds."""
        for probe in range(MINT_TRIES):
            job_id = self.batch_id(key, index, probe)
            found = known.get(job_id) if probe == 0 else _get_or_none(records, job_id)
            if found is None:
                try:
                    return self._create(records, job_id, spec, ruleset, BatchMember(key, index)), False
                except Conflict:
                    found = records.get(job_id)  # made meanwhile: by a concurrent call with this key, or not
            if _member(found, key, index):
                self._same_input(records, found, key, spec, rules_json)
                return found, True
        raise Conflict(f"batch {key}: no free id for job {index} after {MINT_TRIES} tries (is the id minter broken?)")

    def _same_input(
        self, records: Records, job: JobRecord, key: str, spec: JobSpec, rules_json: dict[str, Any] | None
    ) -> None:
        """Conflict unless ``job`` (of batch ``key``) was made from this spec and these rules on this cluster. A
        job made without rules whose record now holds a supervisor's defaults (its ``rules-adopted`` event) was
        made without rules."""
        same_rules = _as_stored(job.rules) == _as_stored(rules_json) or (
            rules_json is None and any(e.kind == "rules-adopted" for e in records.events(job.id))
        )
        if job.spec.umask is None:  # recorded before specs carried the submitter's umask
            spec = dataclasses.replace(spec, umask=None)
        if (
            job.cluster != self._c.name
            or _as_stored(job.spec.to_json()) != _as_stored(spec.to_json())
            or not same_rules
        ):
            index = job.batch.index if job.batch is not None else "?"
            raise Conflict(
                f"batch key {key!r} was used for other jobs: job {job.id} (index {index}) differs in its"
                " cluster, spec or rules; use a new key for a new batch"
            )

    def _start_phase(self, writes: _Writes, actor: Actor, batch: _Batch) -> None:
        """Phase 2: create the object of every job with a start intent, gated, and record each answer; a started
        job's open intent is written with its answer (its entry in ``batch.open_intents``) and it joins
        ``batch.to_open``."""
        jobs, intents = batch.jobs, batch.start_intents
        to_start = sorted(intents)
        requests = [StartRequest(jobs[i].id, 1, jobs[i].submissions[0].marker, jobs[i].spec) for i in to_start]
        answers = _start_all(
            self._c.backend, requests, lambda n: batch.tick("started", n, len(requests)), batch.max_running
        )
        now = self._c.clock.now()
        items: list[tuple[JobRecord, list[Event]]] = []
        opening: dict[int, Intent] = {}
        for i, answer in zip(to_start, answers, strict=True):
            error = answer if isinstance(answer, DispatchError) else None
            # in place: jobs[i] is this call's own copy (the store's answer), replaced by what is written
            new, _, events = record_answer(
                jobs[i], intents[i].seq, _status(error), None if error else answer, error, now, in_place=True
            )
            new.updated_at = now
            if error is None:
                opening[i], more = actor.add_intent(new, Action.OPEN, 1)
                events += more
            items.append((new, events))
        started: list[int] = []
        for i, answer, written in zip(to_start, answers, writes.update(items), strict=True):
            if isinstance(written, DispatchError):  # a supervisor took the job meanwhile: it carries it on
                batch.handed(i, written)
                continue
            jobs[i] = written
            if isinstance(answer, DispatchError):
                batch.failed(i, answer)
            else:
                started.append(i)
                batch.open_intents[i] = opening[i]
        batch.to_open[:] = sorted([*batch.to_open, *started])

    def _open_phase(self, writes: _Writes, actor: Actor, batch: _Batch) -> None:
        """Phase 3: open every gate of ``batch.to_open``, each behind its intent (written here unless
        ``batch.open_intents`` holds it already), and record each answer."""
        jobs, open_intents = batch.jobs, batch.open_intents
        need = [i for i in batch.to_open if i not in open_intents]
        items: list[tuple[JobRecord, list[Event]]] = []
        for i in need:
            new = jobs[i].copy()
            open_intents[i], events = actor.add_intent(new, Action.OPEN, 1)
            items.append((new, events))
        for i, written in zip(need, writes.update(items), strict=True):
            if isinstance(written, DispatchError):
                del open_intents[i]
                batch.handed(i, written)
            else:
                jobs[i] = written
        opened = [i for i in batch.to_open if i in open_intents]
        sids = [str(jobs[i].submissions[0].scheduler_id) for i in opened]
        errors = _open_all(self._c.backend, sids, lambda n: batch.tick("opened", n, len(sids)))
        now = self._c.clock.now()
        items = []
        for i, error in zip(opened, errors, strict=True):
            new, _, events = record_answer(
                jobs[i], open_intents[i].seq, _status(error), None, error, now, in_place=True
            )
            new.updated_at = now
            items.append((new, events))
        for i, error, written in zip(opened, errors, writes.update(items), strict=True):
            if isinstance(written, DispatchError):
                batch.handed(i, written)
                continue
            jobs[i] = written
            if error is not None:
                batch.failed(i, error)

    def stop(self, job_id: str, reason: str | None = None) -> None:
        """Stop the job: no more recovery, and its current scheduler object is ended (if it has one). ``reason``,
        when given, is recorded with the stop (why it was stopped, beside who asked)."""
        records, actor = self._writable()
        job = records.get(job_id)
        job.stop_requested = True
        job.closed = True
        now = self._c.clock.now()
        job.updated_at = now
        data = {"by": self.owner} | ({"reason": reason} if reason else {})
        job = records.update(job, [Event(job_id, now, "stop-requested", data)])
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

    def acknowledge(self, job_id: str, note: str | None = None) -> list[int]:
        """Mark the escalations of a closed job resolved: a human has seen them, and the job no longer waits for
        one (``dispatch status`` stops pointing at it). Returns the seqs resolved (none: nothing was open).

        Only a closed job's escalations can be acknowledged: on an open job an escalation stands for a situation
        still going on (a foreign hold, a hold a rule placed), which the supervisor resolves itself when it ends;
        stop the job to give up on it. Each is recorded as an ``escalation-resolved`` event naming who
        acknowledged it (and ``note``); the job's outcome and decisions are not changed.
        """
        records, _ = self._writable()
        for _ in range(MINT_TRIES):
            job = records.get(job_id)
            open_ = [e for e in job.escalations if e.resolved_at is None]
            if not open_:
                return []
            if not job.closed:
                causes = ", ".join(sorted({e.cause.value for e in open_}))
                raise Rejected(
                    f"job {job_id} is still open: its escalation ({causes}) ends when its cause does"
                    f" (see: dispatch show {job_id}); to give up on the job, stop it"
                )
            now = self._c.clock.now()
            new = job.copy()
            events = []
            for e in new.escalations:
                if e.resolved_at is None:
                    e.resolved_at = now
                    data: dict[str, Any] = {"seq": e.seq, "reason": "acknowledged", "by": self.owner}
                    if note:
                        data["note"] = note
                    events.append(Event(job_id, now, "escalation-resolved", data))
            new.updated_at = now
            try:
                records.update(new, events)
            except Conflict:
                continue  # written meanwhile: read it again
            return [e.seq for e in open_]
        raise Conflict(f"job {job_id}: kept changing while its escalations were acknowledged")


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
    """One job of :meth:`Operator.submit_many`: its id, the recorded error when it did not get through, and
    whether an earlier call with the same batch key had recorded it (``existed``)."""

    job_id: str
    error: DispatchError | None = None
    existed: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


class BatchIncomplete(OutcomeUnknown):
    """:meth:`Operator.submit_many` could not record every job (the store failed while recording, or an id
    could not be had).

    ``submitted`` holds one :class:`Submitted` per job recorded before the failure, in order (each went through
    every phase like any other); the jobs after them were not recorded, except that the one being recorded when
    the store failed may have been. ``total`` is the batch's size, ``error`` what stopped the recording, ``key``
    the batch key: calling ``submit_many`` again with it and the same specs finishes the batch and starts no job
    twice.
    """

    def __init__(self, key: str, submitted: Sequence[Submitted], total: int, error: DispatchError) -> None:
        super().__init__(
            f"batch {key}: {len(submitted)} of {total} jobs recorded, then recording stopped"
            f" ({type(error).__name__}: {error}); submit again with the same batch key to finish it (no job runs"
            " twice)"
        )
        self.key = key
        self.submitted = list(submitted)
        self.total = total
        self.error = error


@dataclass
class _Batch:
    """One :meth:`Operator.submit_many` call as its phases carry it: the input, and per job (by index) its
    result, its record as last written, and the intents still to carry out."""

    key: str
    specs: Sequence[JobSpec]
    ruleset: RuleSet | None
    rules_json: dict[str, Any] | None
    results: list[Submitted] = field(default_factory=list)
    jobs: list[JobRecord] = field(default_factory=list)
    start_intents: dict[int, Intent] = field(default_factory=dict)
    to_open: list[int] = field(default_factory=list)
    open_intents: dict[int, Intent] = field(default_factory=dict)
    max_running: int | None = None
    progress: Callable[[str, int, int], None] | None = None

    def tick(self, phase: str, done: int, total: int | None = None) -> None:
        """Tell ``progress`` (when given) that ``done`` of the phase's ``total`` jobs (default: the batch's) went
        through ``phase``."""
        if self.progress is not None:
            self.progress(phase, done, len(self.specs) if total is None else total)

    def handed(self, i: int, exc: Exception) -> None:
        """Job ``i``'s write was refused (a supervisor took it meanwhile, or the store failed): a supervisor
        carries it on from what its intents say."""
        job_id = self.jobs[i].id
        self.results[i] = Submitted(job_id, _handed(job_id, exc), existed=self.results[i].existed)

    def failed(self, i: int, error: DispatchError) -> None:
        """Job ``i``'s call failed and its answer is recorded."""
        job_id = self.jobs[i].id
        self.results[i] = Submitted(job_id, _with_job(error, job_id), existed=self.results[i].existed)


@dataclass(frozen=True)
class _Writes:
    """The write granularity of :meth:`Operator.submit_many`, the one thing its phases do differently per store:
    with ``batch`` (the store offers :class:`BatchWrites`) a phase writes all its jobs in one transaction, one
    sync to disk; without, one write per job. Either way each item gets its own answer, the job as written or
    the error its write met (an error of the store in a batch is every item's answer: nothing was written)."""

    records: Records
    batch: BatchWrites | None

    def chunks(self, indexes: Sequence[int]) -> list[list[int]]:
        """``indexes`` grouped as they are created: all in one write, or each in its own."""
        if self.batch is None:
            return [[i] for i in indexes]
        return [list(indexes)] if indexes else []

    def create(self, items: Sequence[tuple[JobRecord, Sequence[Event]]]) -> list[JobRecord | DispatchError]:
        if self.batch is None:
            return _each(items, lambda item: self.records.create(*item))
        try:
            return list(self.batch.create_many(items)) if items else []
        except DispatchError as exc:
            return [copy.copy(exc) for _ in items]

    def update(self, items: Sequence[tuple[JobRecord, Sequence[Event]]]) -> list[JobRecord | DispatchError]:
        if self.batch is None:
            return _each(items, lambda item: self.records.update(*item))
        try:
            return list(self.batch.update_many(items)) if items else []
        except DispatchError as exc:
            return [copy.copy(exc) for _ in items]


def _each(
    items: Sequence[_T], call: Callable[[_T], _R], tick: Callable[[int], None] | None = None
) -> list[_R | DispatchError]:
    """``call`` on every item in turn, a DispatchError taken as that item's answer rather than raised; ``tick``
    is told how many were called after each."""
    out: list[_R | DispatchError] = []
    for item in items:
        try:
            out.append(call(item))
        except DispatchError as exc:
            out.append(exc)
        if tick is not None:
            tick(len(out))
    return out


def _start_all(
    backend: Backend,
    requests: Sequence[StartRequest],
    tick: Callable[[int], None] | None = None,
    max_running: int | None = None,
) -> list[str | DispatchError]:
    """One batched call when the backend is a BatchStarter (capped at ``max_running`` running at once, when it
    caps these requests); otherwise ``start`` per request (``tick`` is told how many were answered, after each
    call)."""
    if not requests:
        return []
    if isinstance(backend, BatchStarter):
        try:
            if max_running is not None and max_running < len(requests):
                answers = backend.start_many(requests, max_running=max_running)
            else:
                answers = backend.start_many(requests)
        except DispatchError as exc:  # the whole call failed: every start has its answer (each its own copy)
            answers = [copy.copy(exc) for _ in requests]
        if tick is not None:
            tick(len(requests))
        return answers
    return _each(requests, backend.start, tick)


def _open_all(
    backend: Backend, scheduler_ids: Sequence[str], tick: Callable[[int], None] | None = None
) -> list[DispatchError | None]:
    """One batched call when the backend is a BatchStarter; otherwise ``open`` per object (None: opened;
    ``tick`` as for :func:`_start_all`)."""
    if not scheduler_ids:
        return []
    if isinstance(backend, BatchStarter):
        try:
            answers = backend.open_many(scheduler_ids)
        except DispatchError as exc:
            answers = [copy.copy(exc) for _ in scheduler_ids]
        if tick is not None:
            tick(len(scheduler_ids))
        return answers
    return _each(scheduler_ids, backend.open, tick)


def _status(error: DispatchError | None) -> IntentStatus:
    """How a call's answer resolves its intent (:mod:`dispatch.actions`)."""
    if error is None:
        return IntentStatus.DONE
    return IntentStatus.UNKNOWN if isinstance(error, OutcomeUnknown) else IntentStatus.FAILED


def _as_stored(data: Any) -> Any:
    """``data`` as a store gives it back (JSON: tuples become lists), so a record and an input compare."""
    return json.loads(json.dumps(data))


def _member(job: JobRecord, key: str, index: int) -> bool:
    return job.batch is not None and job.batch.key == key and job.batch.index == index


def _get_or_none(records: Records, job_id: str) -> JobRecord | None:
    try:
        return records.get(job_id)
    except NotFound:
        return None


def _resume_step(job: JobRecord) -> Action | None:
    """What a retry of a batch may still do for one of its jobs an earlier call recorded: START when its first
    submission certainly has no object (never tried, or certainly refused as Unavailable), OPEN when the object
    exists behind a closed gate, None otherwise (done, ended, stopped, refused, or a call in doubt: a supervisor
    resolves that by observation). Each is written as an intent under compare-and-set, so a supervisor acting
    on the job meanwhile makes this call lose, never act twice."""
    sub = job.submissions[0] if job.submissions else None
    if sub is None or job.closed or job.stop_requested or len(job.submissions) > 1 or job.open_intents():
        return None
    if sub.gate is GateState.PLANNED and sub.scheduler_id is None:
        return Action.START
    if sub.gate is GateState.CLOSED and sub.scheduler_id is not None and not sub.gone and not job.holds:
        return Action.OPEN
    return None


def _standing_error(job: JobRecord) -> DispatchError | None:
    """The error a job of an earlier call stands with, for a retry that leaves it as it is: None when its
    submission got through (or went on under a supervisor), OutcomeUnknown for a call in doubt, Rejected for a
    refused start."""
    sub = job.submissions[0] if job.submissions else None
    if sub is None:
        return None
    doubt = [i for i in job.open_intents() if i.submission == sub.n]
    if doubt:
        return _with_job(
            OutcomeUnknown(
                f"job {job.id}: its {doubt[0].action.value} is in doubt; a supervisor resolves it by finding the object"
            ),
            job.id,
        )
    if sub.gate is GateState.ABANDONED and len(job.submissions) == 1:
        refused = [i for i in job.intents if i.action is Action.START and i.status is IntentStatus.FAILED]
        reason = refused[-1].result if refused else "refused"
        return _with_job(Rejected(f"job {job.id}: {reason}"), job.id)
    return None


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


__all__ = [
    "BatchIncomplete",
    "Cluster",
    "Config",
    "Observer",
    "Operator",
    "Submitted",
    "batch_job_id",
    "check_shape",
    "check_spec",
    "new_backend",
    "new_job_id",
    "open",
    "start_submission",
]
