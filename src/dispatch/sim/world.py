"""One seeded simulation: real operator, supervisors, records and memory scheduler, driven step by step.

A run has two phases:

* **faults** (``steps`` steps): each step, chosen by the seed, lets one parked supervisor call proceed, moves the
  clock, crashes or restarts a supervisor, makes the scheduler do something (preempt, lose a node, OOM, time out,
  admin-hold or release, cease nodes, purge; in the Slurm shape an admin requeues, holds or cancels one task of a
  job array alone, and, on a stream of its own, suspends or resumes a running job), some jobs name a program that
  does not exist (ending ``not-launchable``, resubmitted by a rule), injects a fault into the next call of a backend
  method (OutcomeUnknown that landed or not, Unavailable, a crash between a requeue's steps; a readmit in the
  Kubeflow shape, where a preemption waits for dispatch to readmit it), or has a user stop a job or release a rule's
  hold. Beside them, on a random stream of their own, the other writers of the records act (:data:`ACTORS`): the
  read commands' refresh as two users (one with a narrower view of the scheduler), ``submit_many`` with forced id
  collisions and a retrying caller (in the Slurm shape its jobs are tasks of job arrays, made and opened in one call
  each, a fault injected into either now and then), and one outage of every supervisor. The invariants are checked
  after every step.
* **liveness** (at most ``quiet`` rounds): faults stop, crashed supervisors restart, admins resume suspended jobs and
  release their holds, lost nodes come back, and a human releases the holds rules asked them to. Each round every
  supervisor completes one cycle and the clock moves one poll interval. Every job must settle (closed, nothing open,
  nothing running) within the bound; the invariants are still checked after every step.

Clock rule (the honest limit of fencing, see docs/supervisor.md): the clock never moves more than the CallBound
past the moment a supervisor parked at a backend action, i.e. no process pauses longer than the CallBound
between its last check and its call.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import random
import zlib
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from dispatch.actions import DEFAULT_MARGIN
from dispatch.cli.observe import Fold, Writes, reader_writes, refresh
from dispatch.clock import FakeClock, SkewedClock
from dispatch.cluster import Cluster
from dispatch.errors import DispatchError, Unavailable
from dispatch.extensions import Image
from dispatch.memory import MemoryScheduler, Shape
from dispatch.memory.scheduler import order_key
from dispatch.records.memory import MemoryRecords
from dispatch.records.model import JobRecord
from dispatch.records.nodes import SuspectPolicy
from dispatch.sim.conductor import Conductor, Worker, parked_backend, parked_records
from dispatch.sim.invariants import check, check_batch_call, settled
from dispatch.sim.mutation import NETWORK, Mutation, PlantedSupervisor
from dispatch.sim.planted import (
    HalfBatchOperator,
    Planted,
    fold_gone_for_good,
    fold_without_unknown_clock,
    planted_backend,
    planted_exclusions,
    writes_absence,
)
from dispatch.spec import JobSpec
from dispatch.spi import view
from dispatch.supervise.fold import fold as one_fold
from dispatch.supervise.step import hold_instance, unknown_grace
from dispatch.supervise.supervisor import Supervisor

CALL_BOUND = 30.0
LIVENESS_CAP = 4
"""The liveness bound runs on while the scheduler still works on an object, up to this many times K rounds."""
POLL = 10.0
LEASE_TTL = 40.0
T0 = 1_800_000_000.0
"""The fake clock's start (times in the trace are counted from it)."""
SKEWS = (-120.0, -30.0, 0.0, 30.0, 120.0)
"""How far off a supervisor's clock may be, in seconds (``Config.network``)."""


CUTS = ("drop", "lossy", "hang", "late")
"""How a cut-off supervisor's calls fare (:meth:`World._dropped`)."""


class Partitioned(Unavailable):
    """A call the network dropped (``Config.network``): nothing reached the other side."""


ACTORS: tuple[tuple[str, str], ...] = (
    ("supervisor", "the real Supervisor (dispatch supervise), crashed and restarted, one parked call at a time"),
    (
        "scheduler",
        "the memory scheduler and its admins: preempt, lose or cease nodes, OOM, time out, hold, purge, faults; "
        "an admin requeues, holds or cancels one task of a job array alone (Slurm shape)",
    ),
    ("submit", "Operator.submit (dispatch submit), now and then with a taken id minted first"),
    (
        "submit-many",
        "Operator.submit_many of a named batch with an id collision forced; a failed batch is retried; in the "
        "Slurm shape it makes job arrays (start_many, open_many: faults injected per call), its records written "
        "in batches",
    ),
    ("stop", "Operator.stop (dispatch stop)"),
    ("hold", "Operator.hold (dispatch hold)"),
    ("release", "Operator.release: a user lifts their holds, a human the holds rules asked for (dispatch release)"),
    ("status", "the read commands' refresh (dispatch status, show, run): dispatch.cli.observe.refresh"),
    ("narrow-status", "a second user's dispatch status, whose view of the scheduler lacks a third of the objects"),
    ("outage", "every supervisor down for 30-90 s: leases expire and the read commands write the records"),
)
"""The writers of the records the simulator drives (``python -m dispatch.sim --actors``)."""


@dataclass
class Config:
    """What one seed runs."""

    seed: int
    shape: str = "slurm"
    supervisors: int = 2
    jobs: int = 3
    steps: int = 150
    quiet: int = 80
    """The liveness bound K, in rounds (one supervisor cycle each and one poll interval of time)."""
    stop_at: int | None = None
    unmatched: str = "escalate"
    mutations: frozenset[Mutation] = frozenset()
    planted: frozenset[Planted] = frozenset()
    """Planted bugs in the other writers (:mod:`dispatch.sim.planted`)."""
    faults: bool = True
    steady: bool = True
    """Whether the supervisors take the steady path for settled quiet jobs (False: every job the whole way)."""
    network: bool = False
    """Faults from the network (on a stream of their own): each supervisor's clock set off by up to two minutes
    (leases judged by the store's clock, the world's), and now and then a supervisor cut off from the records or
    from the cluster for 10-60 s, wholly or dropping half its calls. On by itself for the planted bugs of the
    safeguards against them (:data:`~dispatch.sim.mutation.NETWORK`)."""


@dataclass
class Result:
    seed: int
    shape: str
    steps: int = 0
    violations: list[str] = field(default_factory=list)
    settled: bool = False
    unsettled: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    trace: list[str] = field(default_factory=list)
    dump: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return not self.violations and self.settled

    def summary(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "shape": self.shape,
            "steps": self.steps,
            "violations": self.violations[:5],
            "settled": self.settled,
            "unsettled": self.unsettled[:5],
            "counts": self.counts,
        }


SUSPECTS = SuspectPolicy(after=1, window=600.0, ttl=900.0)
"""Every node blamed by two jobs (the fewest the product counts, whatever ``after`` says) is a suspect for 15
minutes: on four nodes, a few losses can leave a resubmission nowhere to
run, which the ``no-unrunnable-submission`` invariant is about. Used on half the seeds (``seed // 2`` even, so
both shapes); the other half runs without suspects, so a rule's own exclusion (``excluded-nodes-avoided``) is
not hidden by a suspect that covers the same node."""


def suspects_for(seed: int) -> SuspectPolicy:
    return SUSPECTS if (seed // 2) % 2 == 0 else SuspectPolicy(after=0)


MISSING_PROGRAM = 0.25
"""The share of simulated jobs whose program does not exist (a typo; resubmitted by the ``typo`` rule, as a
user's rule on launch failures would): their endings must blame no node."""

SUSPEND, RESUME = 0.3, 0.1
"""Per step of the cluster: the chance that an admin suspends a running job, and that one suspended is
resumed (every suspended job is resumed when the faults stop)."""

STALLED_AFTER = 20.0
"""The simulated jobs' stall bound (a reporting program reports every 5 s: see dispatch.memory.scheduler)."""


def rules_for(shape: Shape, unmatched: str) -> dict[str, Any]:
    retry = "requeue" if shape is Shape.SLURM else "resubmit"
    # the Kubeflow shape readmits a preemption (its queue's eviction) while the rule's limit lasts, then resubmits
    readmit = (
        [{"name": "readmit-preempted", "cause": "preempted", "action": "readmit", "limit": 2}]
        if shape is Shape.KUBEFLOW
        else []
    )
    # progress reaches the supervisor of the Slurm shape only (a watched backend reads no unchanged object)
    stalls = (
        [{"name": "hang", "cause": "stalled", "stalledAfter": f"{STALLED_AFTER:g}s", "action": "resubmit", "limit": 1}]
        if shape is Shape.SLURM
        else []
    )
    return {
        "unmatched": unmatched,
        "limits": {"total": 4},
        "rules": [
            *readmit,
            {
                "name": "evicted",
                "cause": ["preempted", "node-lost", "cessation"],
                "action": "resubmit",
                "limit": 3,
                "backoff": "10s",
                "backoffMax": "40s",
                "excludeBlamedNodes": True,
            },
            {"name": "retry-75", "cause": "exit", "exitCodes": [75], "action": retry, "limit": 2},
            {"name": "timeout", "cause": "timeout", "action": "hold", "limit": 1},
            {"name": "typo", "cause": "not-launchable", "action": "resubmit", "limit": 2},
            *stalls,
        ],
    }


class _UnfencedRecords(MemoryRecords):
    """Planted bug (Mutation.STORE_IGNORES_FENCE): a record store that never compares the fencing token."""

    def update(self, job: JobRecord, events: Any = (), *, fence: int | None = None) -> JobRecord:
        return super().update(job, events, fence=None)

    def update_many(self, items: Any, *, fence: int | None = None) -> list[Any]:
        return super().update_many(items, fence=None)  # type: ignore[return-value]


class World:
    """Everything one seed touches."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.progress_rng = random.Random(f"progress-{cfg.seed}")
        """Which jobs report progress or hang: a stream of its own, so the other draws stay what they were."""
        self.edge_rng = random.Random(f"edges-{cfg.seed}")
        """Which jobs name a program that does not exist, and when an admin suspends or resumes a running job: a
        stream of its own, so the other draws stay what they were."""
        self.shape = Shape(cfg.shape)
        self.clock = FakeClock(1_800_000_000.0)
        self.sched = MemoryScheduler(
            self.clock,
            self.shape,
            nodes=4,
            min_job_age=120.0,
            node_loss_window=60.0,
            default_runtime=60.0,
            kill_wait=10.0,
        )
        self.backend = planted_backend(self.sched, cfg.planted, CALL_BOUND)
        self.store = _UnfencedRecords() if Mutation.STORE_IGNORES_FENCE in cfg.mutations else MemoryRecords()
        self.conductor = Conductor(self.clock.now)
        self.records = parked_records(self.store, self.conductor, self.clock.now)
        self.cluster = Cluster("memory", self.backend, self.records, self.clock)  # type: ignore[arg-type]
        self.cluster.operator.owner = "operator:sim"
        self._ids = 0
        self.cluster.operator.new_id = self._new_id
        self._instances = 0
        self.cluster.operator.new_instance = self._new_instance
        self.workers: list[Worker | None] = [None] * cfg.supervisors
        self.incarnation = [0] * cfg.supervisors
        self.result = Result(cfg.seed, self.shape.value)
        self.step_no = 0
        self._cache: dict[str, tuple[str, JobRecord]] = {}
        self.batch_rng = random.Random(f"arrays-{cfg.seed}")
        """Faults injected into the batched calls and the admins' actions on one task of an array: a stream of
        its own, so the seeds' other draws stay what they were."""
        self.arng = random.Random(cfg.seed * 7919 + 1)
        """The other writers' choices (a stream of their own, so the supervisors' and the scheduler's draws stay
        as they were)."""
        self.down_until = -math.inf
        """During an outage no supervisor is restarted before this time (then all are)."""
        self.outage_on = False
        self._outages = 0
        self._collide_in = 0
        """The next id minted after this many more mints is one that is already taken (0: none forced)."""
        self._batches = 0
        self._collide_keys: dict[str, int] = {}
        """The job of each batch key whose first id is taken (for an operator minting batch ids from a key)."""
        self.actor_violations: list[str] = []
        self.network = cfg.network or bool(cfg.mutations & NETWORK)
        self.net_rng = random.Random(f"network-{cfg.seed}")
        """The network's faults and each supervisor's clock offset: a stream of their own."""
        self.cuts: dict[tuple[str, str], tuple[float, str]] = {}
        """(owner, "records" or "cluster") -> until when, and how its calls fare meanwhile (:data:`CUTS`)."""
        if self.network:
            self.records.fault = self._dropped("records")
        if Planted.SUBMIT_MANY_HALF_BATCH in cfg.planted:
            half = HalfBatchOperator(self.cluster, "operator:sim")
            half.new_id, half.new_instance = self.cluster.operator.new_id, self.cluster.operator.new_instance
            self.cluster.operator = half
        self._mint_batch_ids(self.cluster.operator)
        self.hidden_residue = cfg.seed % 3
        """The second user cannot see the objects whose number has this residue mod 3."""

    # ----- set-up ----------------------------------------------------------------------------------------------

    def _new_id(self, now: float) -> str:
        if self._collide_in > 0:
            self._collide_in -= 1
            if self._collide_in == 0 and self._ids:
                return f"j{self.cfg.seed}x1"  # forced: the first job's id, taken
        self._ids += 1
        return f"j{self.cfg.seed}x{self._ids}"

    def _batch_id(self, key: str, index: int, probe: int) -> str:
        """Job ``index`` of batch ``key`` at try ``probe``, for an operator that derives batch ids from a key: the
        same for the same arguments; a forced collision makes try 0 of one job of the batch the first job's id."""
        if probe == 0 and self._collide_keys.get(key) == index and self._ids:
            return f"j{self.cfg.seed}x1"
        return f"j{self.cfg.seed}b{zlib.crc32(f'{key}/{index}/{probe}'.encode()):08x}"

    def _mint_batch_ids(self, operator: Any) -> None:
        if hasattr(operator, "batch_id"):  # an operator minting batch ids from a key takes the simulator's minter
            operator.batch_id = self._batch_id

    def _new_instance(self) -> str:
        self._instances += 1
        return f"u{self._instances}"

    def spec(self, r: random.Random | None = None) -> JobSpec:
        r = r or self.rng
        kind = r.choice(["ok", "ok", "exit", "retry", "oom", "timeout"])
        runtime = str(r.choice([20, 40, 60, 90]))
        argv: tuple[str, ...] = {
            "ok": ("sleep", runtime),
            "exit": ("sleep", runtime, "exit", "3"),
            "retry": ("sleep", runtime, "exit", "75"),
            "oom": ("oom", runtime),
            "timeout": ("sleep", "1000"),
        }[kind]
        limit = 30.0 if kind == "timeout" else None
        reporting = self.progress_rng.random()
        if kind == "timeout" and reporting < 0.5 and self.shape is Shape.SLURM:
            argv, limit = ("hang", str(self.progress_rng.choice([0, 10, 15]))), None  # reports, then goes silent
        elif kind in ("ok", "exit") and reporting < 0.5:
            argv = (*argv, "report")  # reports until it ends: never stalled
        ext = (Image("registry.example/train:1"),) if self.shape is Shape.KUBEFLOW else ()
        if self.edge_rng.random() < MISSING_PROGRAM:
            argv, limit = ("missing", *argv), None  # a typo: it ends not-launchable as it starts
        return JobSpec(command=argv, nodes=r.choice([1, 1, 2]), time_limit=limit, extensions=ext)

    def submit(self) -> None:
        try:
            self.cluster.operator.submit(self.spec(), rules_for(self.shape, self.cfg.unmatched))
            self.note("submit")
        except DispatchError as exc:
            self.note(f"submit raised {type(exc).__name__}")

    def spawn(self, k: int) -> None:
        self.incarnation[k] += 1
        owner = f"sup-{k + 1}#{self.incarnation[k]}"
        fault = self._dropped("cluster") if self.network else None
        backend = parked_backend(self.backend, self.conductor, fault=fault, deciding=self._deciding(owner))
        opts: dict[str, Any] = {
            "clock": self.clock,
            "owner": owner,
            "poll": POLL,
            "cluster": "memory",
            "lease_ttl": LEASE_TTL,
            "margin": DEFAULT_MARGIN,
            "steady": self.cfg.steady,
            "suspects": suspects_for(self.cfg.seed),
        }
        if self.network:  # its own clock off; leases judged by the store's (the world's)
            skew = self.net_rng.choice(SKEWS)
            opts["clock"] = SkewedClock(self.clock, skew) if skew else self.clock
            opts["lease_clock"] = self.clock.now
            self.note(f"clock of {owner} off by {skew:+g}s")
        sup = (
            PlantedSupervisor(backend, self.records, mutations=self.cfg.mutations, **opts)
            if self.cfg.mutations
            else Supervisor(backend, self.records, **opts)  # type: ignore[arg-type]
        )
        sup.exclusions = planted_exclusions(sup, self.cfg.planted)
        if sup.archiver is not None:  # its reads park like every other call, and its budget is the fake clock's
            sup.archiver.run_inline(self.clock.now)

        def body() -> None:
            while True:
                try:
                    sup.cycle()
                except Partitioned as exc:  # as the service does: the cycle is reported failed, the next one runs
                    self.note(f"cycle-error {owner}: {exc}")
                self.conductor.park("idle", "cycle done")

        w = Worker(owner, body, info={"owner": owner})
        self.workers[k] = w
        self.conductor.start(w)

    # ----- the network -----------------------------------------------------------------------------------------

    def _dropped(self, side: str) -> Any:
        """The fault on a worker's calls to ``side`` (the records or the cluster) while it is cut off, by the cut's
        mode: ``drop`` (every call raises :class:`Partitioned`), ``lossy`` (each call does with even odds),
        ``hang`` (the call hangs until the cut heals, then raises, as over a dead TCP connection) or ``late`` (it
        hangs until the cut heals, then goes through, as TCP's retransmission delivers it). While a call hangs the
        clock moves, never past the CallBound of another supervisor parked at an action (the clock rule)."""

        def fault(w: Worker, call: str) -> None:
            owner = str(w.info.get("owner"))
            cut = self.cuts.get((owner, side))
            if cut is None:
                return
            until, mode = cut
            if self.clock.now() >= until:
                del self.cuts[(owner, side)]
                return
            if mode in ("hang", "late"):
                cap = min((v.parked_at + CALL_BOUND - 1.0 for v in self.parked() if v.kind == "act"), default=until)
                self.clock.advance(max(0.0, min(until, cap) - self.clock.now()))
                if mode == "late":
                    self.note(f"late {owner}: {call} went through at t={self.clock.now() - T0:.1f}")
                    return
                raise Partitioned(f"{owner} cut off from the {side}: {call} hung until t={self.clock.now() - T0:.1f}")
            if mode == "drop" or self.net_rng.random() < 0.5:
                raise Partitioned(f"{owner} cut off from the {side}: {call} dropped")

        return fault

    def _writing(self) -> list[Worker]:
        """The supervisors parked at the write of an intent: the moment a cut from the records matters most (the
        call it announces follows), so the nemesis strikes there more often."""
        return [w for w in self.parked() if w.kind == "write" and w.point.endswith(" intent")]

    def cut(self) -> None:
        """A live supervisor is cut off from the records or from the cluster for 10-60 s (see :meth:`_dropped` for
        the modes). A supervisor parked at a write, if any, is cut off from the records."""
        writing = self._writing()
        live = writing or [w for w in self.workers if w is not None and w.state == "parked"]
        if not live:
            return
        w = self.net_rng.choice(live)
        side = "records" if writing else self.net_rng.choice(["records", "cluster"])
        seconds = self.net_rng.uniform(10.0, 60.0)
        mode = self.net_rng.choice(CUTS)
        owner = str(w.info["owner"])
        self.cuts[(owner, side)] = (self.clock.now() + seconds, mode)
        self.note(f"cut {owner} from the {side} for {seconds:.1f}s ({mode})")

    def _deciding(self, owner: str) -> Any:
        """The ``acts-under-lease`` check: at the moment ``owner`` decides a scheduler action (before its call
        parks), the store holds the job's lease as ``owner``'s, unexpired by the store's clock."""

        def check(call: str, args: tuple[Any, ...]) -> None:
            job = self._job_of(args)
            if job is None:
                return
            lease, now = job.lease, self.clock.now()
            if lease is not None and lease.owner == owner and lease.expires_at > now:
                return
            held = (
                f"{lease.owner}'s (token {lease.token}, until t={lease.expires_at - T0:.1f})" if lease else "nobody's"
            )
            at = f"t={now - T0:.1f}"
            self.actor_violations.append(
                f"acts-under-lease: {owner} decided {call} for job {job.id} at {at}; lease: {held}"
            )

        return check

    def _job_of(self, args: tuple[Any, ...]) -> JobRecord | None:
        """The job a scheduler action names: a start's request's job, or the job that recorded the object."""
        if not args:
            return None
        job_id = getattr(args[0], "job_id", None)
        jobs = self.snapshot()
        if job_id is not None:
            return jobs.get(str(job_id))
        sid = str(args[0])
        for job in jobs.values():
            if any(sub.scheduler_id == sid for sub in job.submissions):
                return job
        return None

    # ----- steps -----------------------------------------------------------------------------------------------

    def note(self, what: str) -> None:
        self.result.counts[what.split(" ")[0]] = self.result.counts.get(what.split(" ")[0], 0) + 1
        self.result.trace.append(f"{self.step_no:4d} t={self.clock.now() - 1_800_000_000.0:7.1f} {what}")

    def parked(self) -> list[Worker]:
        return [w for w in self.workers if w is not None and w.state == "parked"]

    def tick(self, dt: float) -> None:
        cap = min((w.parked_at + CALL_BOUND - 1.0 for w in self.parked() if w.kind == "act"), default=float("inf"))
        dt = max(0.0, min(dt, cap - self.clock.now()))
        if dt > 0:
            self.clock.advance(dt)
        self.note(f"tick +{dt:g}s")

    def resume(self, w: Worker) -> None:
        point = f"{w.name} {w.kind} {w.point}"
        self.conductor.resume(w)
        if w.error is not None:
            self.result.violations.append(f"supervisor-error: {w.name} raised {w.error!r}")
            w.error = None
        self.note(f"run {point}")

    def crash(self, k: int) -> None:
        w = self.workers[k]
        if w is None or w.state != "parked":
            return
        self.note(f"crash {w.name} at {w.kind} {w.point}")
        self.conductor.crash(w)
        self.workers[k] = None

    def suspensions(self) -> None:
        """An admin suspends a running job or resumes a suspended one (``scontrol suspend``/``resume``), drawn
        from a stream of its own."""
        if self.shape is not Shape.SLURM:
            return  # a TrainJob has no suspension that keeps its pods (its spec.suspend ends them)
        c = self.sched.control
        running = set(c.running())  # advances the scheduler to now
        live = sorted((t for t in self.sched.jobs.values() if t.sid in running), key=_sid_key_of)
        suspended = [t for t in live if t.current.suspended_at is not None]
        draw = self.edge_rng.random()
        if suspended and draw < RESUME:
            t = self.edge_rng.choice(suspended)
            try:
                c.resume(t.sid)
                self.note(f"resume {t.sid}")
            except ValueError:
                self.note(f"resume {t.sid}: it has ended")
        elif draw > 1 - SUSPEND and len(suspended) < len(live):
            going = [t for t in live if t.current.suspended_at is None]
            reporting = [t for t in going if self.sched.program(t).reports]  # the ones a stall rule judges
            t = self.edge_rng.choice(reporting if reporting and self.edge_rng.random() < 0.8 else going)
            try:
                c.suspend(t.sid)
                self.note(f"suspend {t.sid}")
            except ValueError:  # it ended as the scheduler advanced (a program that does not exist ends at once)
                self.note(f"suspend {t.sid}: it has ended")

    def env(self) -> None:
        """One thing the cluster, an admin or a user does."""
        self.suspensions()
        r = self.rng
        c = self.sched.control
        running = sorted(c.running(), key=_sid_key)
        objects = sorted(self.sched.jobs.values(), key=lambda t: _sid_key(t.sid))
        choice = r.choice(
            [
                "preempt",
                "oom",
                "timeout",
                "lose-node",
                "restore-node",
                "admin-hold",
                "admin-release",
                "cease",
                "end-cessation",
                "purge",
                "spurious-unknown",
                "fault",
                "fault",
                "fault",
                "stop",
                "release",
                "submit",
                "user-hold",
                "user-release",
            ]
        )
        if choice in ("preempt", "oom", "timeout") and running:
            sid = r.choice(running)
            {"preempt": c.preempt, "oom": c.out_of_memory, "timeout": c.time_out}[choice](sid)
            self.note(f"{choice} {sid}")
        elif choice == "lose-node" and running:
            node = r.choice(list(self.sched.jobs[r.choice(running)].current.nodes))
            c.lose_node(node)
            self.note(f"lose-node {node}")
        elif choice == "restore-node" and self.sched.lost_nodes:
            node = r.choice(sorted(self.sched.lost_nodes))
            c.restore_node(node)
            self.note(f"restore-node {node}")
        elif choice == "admin-hold" and self.batch_rng.random() < 0.5 and self.array_task_action():
            pass
        elif choice == "admin-hold" and objects:
            t = r.choice([t for t in objects if not t.ended] or objects)
            c.admin_hold(t.sid)
            self.note(f"admin-hold {t.sid}")
        elif choice == "admin-release":
            held = [t for t in objects if t.admin_held]
            if held:
                t = r.choice(held)
                c.admin_release(t.sid)
                self.note(f"admin-release {t.sid}")
            else:
                self.array_task_action()
        elif choice == "cease" and running:
            nodes = list(self.sched.jobs[r.choice(running)].current.nodes)
            c.cease(nodes)
            self.note(f"cease {nodes}")
        elif choice == "end-cessation" and self.sched.ceasing:
            nodes = sorted(self.sched.ceasing)
            c.end_cessation(nodes)
            self.note(f"end-cessation {nodes}")
        elif choice == "purge":
            ended = [t for t in objects if t.ended and not t.purged and not t.deleted]
            if ended and self.shape is Shape.SLURM:
                t = r.choice(ended)
                c.purge(t.sid)
                self.note(f"purge {t.sid}")
        elif choice == "spurious-unknown" and running:
            sid = r.choice(running)
            seconds = r.uniform(1.0, 0.8 * unknown_grace(self.backend.declarations()))
            if r.random() < 0.5:
                c.blank(sid, seconds)
                self.note(f"spurious-unknown {sid} for {seconds:.1f}s")
            else:
                c.lag(sid, seconds)
                self.note(f"no-answer {sid} for {seconds:.1f}s")
        elif choice == "fault":
            method = r.choice(
                [
                    "start",
                    "open",
                    "hold",
                    "release",
                    "requeue" if self.shape is Shape.SLURM else "readmit",
                    "stop_job",
                    "inspect_many",
                    "find_many",
                    "watch",
                    "crash-requeue",
                    "drop-watch",
                ]
            )
            if method == "crash-requeue":
                c.crash_next_requeue()
                self.note("fault requeue crashes between its steps")
            elif method == "drop-watch":
                c.drop_watch()
                self.note("fault watch loses its place (a re-list follows)")
            elif method in ("inspect_many", "find_many", "watch"):
                c.inject(method, "unavailable")
                self.note(f"fault {method} unavailable")
            else:
                kind = r.choice(["unknown", "unknown", "unavailable"])
                landed = kind == "unknown" and r.random() < 0.5
                c.inject(method, kind, landed=landed)
                self.note(f"fault {method} {kind}{' landed' if landed else ''}")
        elif choice == "stop" and r.random() < 0.3:
            jobs = [j for j in self.store.jobs(active_only=True)]
            if jobs:
                job = r.choice(jobs)
                try:
                    self.cluster.operator.stop(job.id)
                    self.note(f"stop {job.id}")
                except DispatchError as exc:
                    self.note(f"stop {job.id} raised {type(exc).__name__}")
        elif choice == "release":
            self.human_release()
        elif choice == "user-hold":
            jobs = self.store.jobs(active_only=True)
            if jobs:
                job = r.choice(jobs)
                try:
                    instance = self.cluster.operator.hold(job.id, "held by a user")
                    self.note(f"user-hold {job.id} {instance}")
                except DispatchError as exc:
                    self.note(f"user-hold {job.id} raised {type(exc).__name__}")
        elif choice == "user-release":
            self.user_release()
        elif choice == "submit" and self._ids < self.cfg.jobs + 2:
            if self.arng.random() < 0.3:
                self.submit_colliding()
            else:
                self.submit()

    def array_task_action(self) -> bool:
        """An admin acts on one task of a job array by its own id (its own stream): requeues it (one running, of
        a job not closed: Slurm refuses to requeue an ended ``--no-requeue`` job, and a closed job's object
        running again is watched by no one), holds it, or cancels it (one not ended). False when no task fits
        the action drawn."""
        r = self.batch_rng
        c = self.sched.control
        tasks = [t for t in sorted(self.sched.jobs.values(), key=lambda t: _sid_key(t.sid)) if t.array is not None]
        action = r.choice(["requeue", "hold", "cancel"])
        if action == "requeue":
            records = self.snapshot()
            fits = [
                t
                for t in tasks
                if t.current.live
                and not (t.purged or t.deleted)
                and t.job_id in records
                and not records[t.job_id].closed
            ]
        else:
            fits = [t for t in tasks if not t.ended and not t.deleted and not (action == "hold" and t.admin_held)]
        if not fits:
            return False
        t = r.choice(fits)
        {"requeue": c.requeue, "hold": c.admin_hold, "cancel": c.cancel}[action](t.sid)
        self.note(f"admin-task-{action} {t.sid}")
        return True

    def user_release(self) -> None:
        """A user lifts the holds they placed through the operator (no instance named: only their own), on the
        first job whose release goes through. A release that fails does not keep the user from their other
        jobs: the hold of a stopped job whose object has left the queue answers NotFound for ever (there is
        nothing left to release), and a user who stopped at it would leave a live job held to the end."""
        for job in self.store.jobs(active_only=False):
            if any(h.owner.startswith("operator:") for h in job.active_holds()):
                try:
                    lifted = self.cluster.operator.release(job.id)
                except DispatchError as exc:
                    self.note(f"user-release {job.id} raised {type(exc).__name__}")
                    continue
                self.note(f"user-release {job.id} {lifted}")
                return

    def human_release(self) -> None:
        """A human releases a hold a rule asked them to (naming its instance)."""
        for job in self.store.jobs(active_only=True):
            for h in job.active_holds():
                if h.instance == hold_instance(job, h.submission):
                    try:
                        self.cluster.operator.release(job.id, h.instance)
                        self.note(f"release {job.id} {h.instance}")
                    except DispatchError as exc:
                        self.note(f"release {job.id} raised {type(exc).__name__}")
                    return

    # ----- the other writers ------------------------------------------------------------------------------------

    def other_writer(self) -> None:
        """One thing a writer of the records other than the supervisors does (its own random stream). While the
        supervisors are down, users look (``status``) and the partition that took the supervisors down may hide a
        running job for a moment."""
        if self.outage_on:
            choice = self.arng.choice(["status", "narrow-status", "partition"])
        else:
            choice = self.arng.choice(["status", "status", "narrow-status", "narrow-status", "submit-many", "outage"])
            if choice == "outage" and self._outages >= 1:
                return  # one outage a run: the supervisors' own faults need their time too
        if choice == "partition":
            self.partition()
        elif choice == "status":
            self.status(narrow=False)
        elif choice == "narrow-status":
            self.status(narrow=True)
        elif choice == "submit-many":
            self.submit_many()
        else:
            self.outage()

    def _narrow(self) -> Any:
        """The scheduler as the second user sees it: objects whose number has :attr:`hidden_residue` mod 3 are
        missing from its view (another user's credentials, Slurm's PrivateData)."""

        def call(name: str, method: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            answer = method(*args, **kwargs)
            if name == "inspect_many":
                return {sid: ev for sid, ev in answer.items() if _residue(sid) != self.hidden_residue}
            return answer

        return view(self.backend, "Narrow", call=call)

    def status(self, *, narrow: bool) -> None:
        """``dispatch status``: the active jobs refreshed through the read commands' own code path
        (:func:`dispatch.cli.observe.refresh`), as the first user or as the second one with a narrower view."""
        planted = self.cfg.planted
        fold: Fold = one_fold
        writes: Writes = reader_writes
        if narrow and Planted.NARROW_VIEW_GONE_FOR_GOOD in planted:
            fold, writes = fold_gone_for_good, writes_absence
        elif not narrow and Planted.STATUS_WITHOUT_UNKNOWN_CLOCK in planted:
            fold = fold_without_unknown_clock
        who = "narrow-status" if narrow else "status"
        jobs = self.store.jobs(active_only=True)
        before = {j.id: j.version for j in jobs}
        try:
            backend = self._narrow() if narrow else self.backend
            seen = refresh(self.records, backend, jobs, self.clock.now(), fold=fold, writes=writes)  # type: ignore[arg-type]
        except DispatchError as exc:
            self.note(f"{who} raised {type(exc).__name__}")
            return
        wrote = [j.id for j in seen if j.version != before.get(j.id)]
        self.note(f"{who} of {len(jobs)} jobs wrote {wrote}")

    def submit_many(self) -> None:
        """``submit_many`` of a small batch (each job named after its place in the batch), with an id collision
        forced more often than not; a caller whose batch failed retries it once with the same input (and the same
        key, where the operator takes one). Checks that a failed call names the jobs it recorded."""
        if self._batches >= 2:
            return
        r = self.arng
        self._batches += 1
        b = self._batches
        specs = [replace(self.spec(r), name=f"batch{b}-{i}") for i in range(r.choice([2, 3, 4]))]
        key = f"sim{self.cfg.seed}b{b}"
        if r.random() < 0.6:
            index = r.randrange(len(specs))
            self._collide_in = index + 1
            self._collide_keys[key] = index
        op = self.cluster.operator
        kwargs: dict[str, Any] = {"key": key} if "key" in inspect.signature(op.submit_many).parameters else {}
        if self.cfg.faults and self.shape is Shape.SLURM and self.batch_rng.random() < 0.4:
            method = self.batch_rng.choice(["start_many", "open_many"])
            kind = self.batch_rng.choice(["unknown", "unknown", "unavailable"])
            landed = kind == "unknown" and self.batch_rng.random() < 0.5
            self.sched.control.inject(method, kind, landed=landed)
            self.note(f"fault {method} {kind}{' landed' if landed else ''}")
        for attempt in ("", " (retry)"):
            before = set(self.store._docs)
            try:
                results = op.submit_many(specs, rules_for(self.shape, self.cfg.unmatched), **kwargs)
            except DispatchError as exc:
                created = sorted(set(self.store._docs) - before)
                self.actor_violations += check_batch_call(exc, created)
                self.note(f"submit-many batch{b}{attempt} raised {type(exc).__name__}, after recording {created}")
                self._collide_in = 0
                continue
            self.note(f"submit-many batch{b}{attempt}: {[x.job_id for x in results]}")
            break
        self._collide_in = 0

    def submit_colliding(self) -> None:
        """``submit`` whose id minter hands out a taken id first."""
        self._collide_in = 1
        self.submit()
        self._collide_in = 0

    def partition(self) -> None:
        """A running job reads ``unknown`` for a while, shorter than the bound (the scheduler's spurious unknown)."""
        running = sorted(self.sched.control.running(), key=_sid_key)
        if running:
            sid = self.arng.choice(running)
            seconds = self.arng.uniform(20.0, 0.8 * unknown_grace(self.backend.declarations()))
            self.sched.control.blank(sid, seconds)
            self.note(f"partition: {sid} unknown for {seconds:.1f}s")

    def outage(self) -> None:
        """Every supervisor goes down, and none comes back for a while: their leases expire, so the read commands
        (and the second user) write the records meanwhile."""
        for k, w in enumerate(self.workers):
            if w is not None and w.state == "parked":
                self.crash(k)
        self.down_until = self.clock.now() + self.arng.uniform(30.0, 90.0)
        self.outage_on = True
        self._outages += 1
        self.note(f"outage until t={self.down_until - 1_800_000_000.0:.1f}")

    # ----- checking ----------------------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, JobRecord]:
        out: dict[str, JobRecord] = {}
        for job_id, doc in list(self.store._docs.items()):
            cached = self._cache.get(job_id)
            if cached is None or cached[0] is not doc:
                cached = (doc, JobRecord.from_json(json.loads(doc)))
                self._cache[job_id] = cached
            out[job_id] = cached[1]
        return out

    def check(self) -> bool:
        found = check(self.snapshot(), self.sched, self.backend, self.store)
        found += self.records.violations + self.actor_violations
        self.records.violations.clear()
        self.actor_violations.clear()
        for v in found:
            self.result.violations.append(f"step {self.step_no}: {v}")
        return not found

    def dump(self) -> dict[str, Any]:
        return {
            "records": {k: v.to_json() for k, v in self.snapshot().items()},
            "truth": [_truth_json(t) for t in self.sched.jobs.values()],
            "calls": [asdict(c) for c in self.sched.calls],
            "workers": [
                {"name": w.name, "state": w.state, "parkedAt": f"{w.kind} {w.point}"} for w in self.workers if w
            ],
        }

    # ----- the run -------------------------------------------------------------------------------------------------

    def run(self) -> Result:
        cfg = self.cfg
        try:
            for _ in range(cfg.jobs):
                self.submit()
                self.clock.advance(1.0)
            for k in range(cfg.supervisors):
                self.spawn(k)
            stopped = self.fault_phase()
            if not stopped:
                self.liveness()
        finally:
            self.shutdown()
        self.result.steps = self.step_no
        return self.result

    def _stop_here(self) -> bool:
        if self.cfg.stop_at is not None and self.step_no >= self.cfg.stop_at:
            self.result.dump = self.dump()
            return True
        return False

    def fault_phase(self) -> bool:
        r = self.rng
        for _ in range(self.cfg.steps):
            self.step_no += 1
            if self.outage_on and self.clock.now() >= self.down_until:
                self.outage_on = False
                if self.arng.random() < 0.5:  # the partition that took the supervisors down heals after them
                    self.partition()
                    self.status(narrow=False)
                for k in [k for k, w in enumerate(self.workers) if w is None]:
                    self.spawn(k)
                self.note("outage over: supervisors restart")
            if self.arng.random() < (0.3 if self.outage_on else 0.08):
                self.other_writer()
            if self.network and self.net_rng.random() < (0.5 if self._writing() else 0.05):
                self.cut()
            parked = self.parked()
            x = r.random()
            if x < 0.55 and parked:
                self.resume(r.choice(parked))
            elif x < 0.72:
                self.tick(r.choice([1.0, 2.0, 5.0, 10.0, 20.0]))
            elif x < 0.76 and self.cfg.faults and parked:
                k = r.randrange(len(self.workers))
                self.crash(k)
            elif x < 0.80 and any(w is None for w in self.workers) and self.clock.now() >= self.down_until:
                self.spawn(r.choice([k for k, w in enumerate(self.workers) if w is None]))
                self.note("restart supervisor")
            elif self.cfg.faults:
                self.env()
            else:
                self.tick(5.0)
            self.check()
            if self._stop_here():
                return True
        return False

    def _scheduler_busy(self) -> bool:
        """Whether the scheduler itself still works on an object: one with its gate open, no hold, not deleted
        and not ended (running, or queued for capacity, as a resubmission that excludes blamed nodes may be
        for a while). The liveness bound then runs on (up to :data:`LIVENESS_CAP` times), since the wait is
        the scheduler's, not the supervisor's; a supervisor that leaves a gate closed, a hold placed or an
        ended job open is still caught at the bound."""
        return any(
            t.gate_open and not t.holds and not t.admin_held and not t.deleted and t.ended_at is None
            for t in self.sched.jobs.values()
        )

    def liveness(self) -> None:
        c = self.sched.control
        self.sched.faults.clear()
        self.sched.crash_requeue = 0
        self.cuts.clear()
        for node in sorted(self.sched.lost_nodes):
            c.restore_node(node)
        for t in sorted(self.sched.jobs.values(), key=_sid_key_of):
            if t.current.live and t.current.suspended_at is not None:
                with contextlib.suppress(ValueError):  # it ended as the scheduler advanced
                    c.resume(t.sid)
        if self.sched.ceasing:
            c.end_cessation(sorted(self.sched.ceasing))
        for k, w in enumerate(self.workers):
            if w is None or w.state == "done":  # crashed, or ended by an error (reported as supervisor-error)
                self.spawn(k)
        self.note("liveness: faults stopped")
        for rnd in range(LIVENESS_CAP * self.cfg.quiet):
            if rnd >= self.cfg.quiet and not self._scheduler_busy():
                break
            for t in sorted(self.sched.jobs.values(), key=lambda t: _sid_key(t.sid)):
                if t.admin_held:
                    c.admin_release(t.sid)
                    self.note(f"admin-release {t.sid}")
            self.human_release()
            self.user_release()
            for w in list(self.workers):
                if w is None:
                    continue
                for _ in range(500):  # one full cycle: run until it parks at idle again
                    if w.state != "parked":
                        break  # ended by an error: already reported
                    self.step_no += 1
                    self.resume(w)
                    self.check()
                    if self._stop_here():
                        return
                    if w.state != "parked" or w.kind == "idle":
                        break
            why = settled(self.snapshot(), self.sched)
            if not why:
                self.result.settled = True
                self.result.unsettled = []
                return
            self.result.unsettled = why
            self.step_no += 1
            self.tick(POLL)
        self.result.violations.append(
            f"liveness: not settled within {self.cfg.quiet} rounds (and the scheduler's own waits): "
            f"{self.result.unsettled[:3]}"
        )

    def shutdown(self) -> None:
        for k, w in enumerate(self.workers):
            if w is not None and w.state == "parked":
                self.conductor.crash(w)
            self.workers[k] = None


def _sid_key_of(t: Any) -> tuple[int, int]:
    return _sid_key(t.sid)


def _sid_key(sid: str) -> tuple[int, int]:
    return order_key(sid)


def _residue(sid: str) -> int:
    """The number the second user's view hides objects by (a task of an array: its array's number plus its
    task's, so the tasks of one array are not all hidden or all seen)."""
    number, task = order_key(sid)
    return (number + max(task, 0)) % 3


def _truth_json(t: Any) -> dict[str, Any]:
    d = asdict(t)
    d["spec"] = t.spec.to_json()
    d["exclude"] = sorted(t.exclude)
    return d


def run(cfg: Config) -> Result:
    """Run one seed."""
    return World(cfg).run()


def run_quiet(cfg: Config) -> Result:
    """Run one seed and drop its trace (a sweep keeps summaries; replays keep traces). Picklable, for pools."""
    result = run(cfg)
    result.trace = []
    return result
