"""The invariants the simulator checks after every step (docs/invariants.md explains each one).

Each check compares the records with the memory scheduler's ground truth and returns violations as text,
prefixed with the invariant's name. The fencing invariant (``fenced-writes``) is checked at every write by
:class:`~dispatch.sim.conductor.ParkedRecords` instead, because it is about the moment of the write, and
``acts-under-lease`` (a supervisor decides a scheduler action only while the store holds the job's lease as its own,
unexpired by the store's clock) by the world at the moment each action is decided.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dispatch.memory.scheduler import MemoryScheduler, Shape, TruthExecution, TruthJob
from dispatch.outcome import Cause, State
from dispatch.records.model import Action, IntentStatus, JobRecord, Submission
from dispatch.records.nodes import NodeBlames

INVARIANTS = (
    "one-live-execution",
    "no-object-without-record",
    "gate-opened-only-when-recorded",
    "no-action-twice",
    "hold-lifted-by-owner",
    "ended-has-cause",
    "no-success-without-evidence",
    "record-matches-truth",
    "unknown-is-not-an-ending",
    "fenced-writes",
    "batch-once",
    "excluded-nodes-avoided",
    "no-unrunnable-submission",
    "stall-not-before-bound",
    "array-task-alone",
    "stall-only-while-running",
    "own-failure-blames-no-node",
    "suspects-need-two-jobs",
    "acts-under-lease",
)


def check(
    jobs: Mapping[str, JobRecord], sched: MemoryScheduler, backend: Any, blames: NodeBlames | None = None
) -> list[str]:
    """Every invariant but ``fenced-writes``, on the records ``jobs`` (by id), the node blames the records keep
    (``blames``; ``own-failure-blames-no-node`` is checked only with them) and the scheduler's truth."""
    out: list[str] = []
    truth = list(sched.jobs.values())
    by_job: dict[str, list[TruthJob]] = {}
    for t in truth:
        by_job.setdefault(t.job_id, []).append(t)

    for job_id, objs in by_job.items():
        live = [(t.sid, ex.restart) for t in objs if not t.deleted for ex in t.executions if ex.live]
        if len(live) > 1:
            out.append(f"one-live-execution: job {job_id} has {len(live)} live executions {live}")

    for t in truth:
        job = jobs.get(t.job_id)
        sub = _sub(job, t.submission) if job is not None else None
        if job is None or sub is None or sub.marker != t.marker:
            out.append(f"no-object-without-record: object {t.sid} ({t.marker}) has no recorded submission")
            continue
        known = t.sid == sub.scheduler_id or t.sid in sub.strays
        pending = any(i.action is Action.START and i.submission == sub.n and i.open for i in job.intents)
        if not known and not pending:
            out.append(
                f"no-object-without-record: object {t.sid} of job {t.job_id} submission {t.submission} is neither "
                f"recorded ({sub.scheduler_id}, strays {sub.strays}) nor the subject of an open start"
            )
        if t.gate_open and t.sid != sub.scheduler_id:
            out.append(
                f"gate-opened-only-when-recorded: object {t.sid} was opened but the record names {sub.scheduler_id}"
            )

    out += _batch_items(truth)
    out += _addressed(sched)
    out += _exclusions(jobs, sched, by_job)
    out += _actions_once(jobs, sched, by_job)
    out += _holds(jobs, sched)
    out += _own_failures(backend, sched, blames)
    out += _suspects(jobs, sched, by_job, backend)
    for job in jobs.values():
        out += _outcomes(job, by_job.get(job.id, []), backend)
        out += _premature(job, by_job.get(job.id, []))
        out += _stalls(job, by_job.get(job.id, []), sched, backend)
    return out


def _exclusions(
    jobs: Mapping[str, JobRecord], sched: MemoryScheduler, by_job: Mapping[str, list[TruthJob]]
) -> list[str]:
    """``excluded-nodes-avoided``: no execution of a submission made by a rule with ``excludeBlamedNodes`` ran
    on a node the job's earlier executions blamed (as its record shows them). ``no-unrunnable-submission``: no
    object was created whose excluded nodes leave fewer of the cluster's nodes than it needs."""
    from dispatch.rules import RuleSet
    from dispatch.supervise.blame import blames_of

    out: list[str] = []
    for job_id, objs in by_job.items():
        for t in objs:
            left = sched.node_set - t.exclude
            if len(left) < t.spec.nodes:
                out.append(
                    f"no-unrunnable-submission: object {t.sid} of job {job_id} excludes {sorted(t.exclude)}, leaving "
                    f"{sorted(left)} for a job of {t.spec.nodes} node(s): it can never start"
                )
        job = jobs.get(job_id)
        later = [t for t in objs if t.submission > 1 and any(ex.nodes for ex in t.executions)]
        if job is None or job.rules is None or not later:
            continue
        rules = {r.name: r for r in RuleSet.from_data(job.rules).rules}
        for t in later:
            start = next(
                (i for i in job.intents if i.action is Action.START and i.submission == t.submission and i.decision),
                None,
            )
            decision = next((d for d in job.decisions if start is not None and d.seq == start.decision), None)
            rule = rules.get(decision.rule) if decision is not None else None
            if rule is None or not rule.exclude_blamed_nodes:
                continue
            earlier = [ex.identity for s in job.submissions if s.n < t.submission for ex in s.executions]
            blamed = {b.node for b in blames_of(job, "", only=earlier)}
            landed = {n for ex in t.executions for n in ex.nodes} & blamed
            if landed:
                out.append(
                    f"excluded-nodes-avoided: object {t.sid} (job {job_id} submission {t.submission}, rule "
                    f"{rule.name!r}) ran on {sorted(landed)}, blamed by the job's earlier executions"
                )
    return out


def _batch_items(truth: Sequence[TruthJob]) -> list[str]:
    """Each job of a batch (named ``batch<B>-<i>`` by the simulator) runs as one job: the objects of one batch
    item all belong to one job id, however often the caller retried the batch."""
    jobs: dict[str, set[str]] = {}
    for t in truth:
        name = t.spec.name
        if name is not None and name.startswith("batch"):
            jobs.setdefault(name, set()).add(t.job_id)
    return [
        f"batch-once: batch item {name} runs as {len(ids)} jobs {sorted(ids)}"
        for name, ids in sorted(jobs.items())
        if len(ids) > 1
    ]


def _addressed(sched: MemoryScheduler) -> list[str]:
    """``array-task-alone``: every object stopped, held or requeued was named by the call or the admin's action
    that did it (a task of a job array is acted on by its own id, never through a sibling's): a stopped object
    had a stop call that landed on its id (or an admin's cancel), each of its holds a hold call with that
    instance, and each requeue of the Slurm shape (an execution after the first one that no native restart
    made) a requeue call (or an admin's requeue)."""
    stops: set[str] = set()
    holds: set[tuple[str, str]] = set()
    requeues: dict[str, int] = {}
    for c in sched.calls:
        if not c.applied or c.sid is None:
            continue
        if c.method == "stop_job":
            stops.add(c.sid)
        elif c.method == "hold":
            holds.add((c.sid, str(c.args.get("instance"))))
        elif c.method == "requeue":
            requeues[c.sid] = requeues.get(c.sid, 0) + 1
    out: list[str] = []
    for t in sched.jobs.values():
        if t.stopped and t.sid not in stops:
            out.append(f"array-task-alone: object {t.sid} was stopped, but no stop named it")
        for instance in t.holds:
            if (t.sid, instance) not in holds:
                out.append(f"array-task-alone: object {t.sid} is held by {instance}, but no hold of it named it")
        if sched.shape is Shape.SLURM:
            made = len(t.executions) - 1 - t.object_restarts
            asked = requeues.get(t.sid, 0) + t.admin_requeues
            if made > asked:
                out.append(f"array-task-alone: object {t.sid} was requeued {made} times, {asked} of them by its id")
    return out


def check_batch_call(error: BaseException, created: Sequence[str]) -> list[str]:
    """A ``submit_many`` that raised must name every job it recorded (``error.job_id``, ``error.job_ids`` or
    ``error.submitted``), so the caller knows which exist; ``created`` are the ids it recorded."""
    named = {getattr(error, "job_id", None), *getattr(error, "job_ids", ())}
    named |= {s.job_id for s in getattr(error, "submitted", ())}
    unnamed = [i for i in created if i not in named]
    if not unnamed:
        return []
    return [f"batch-once: a failed submit_many ({type(error).__name__}) recorded {unnamed} without naming them"]


def _premature(job: JobRecord, objs: Sequence[TruthJob]) -> list[str]:
    """A decision taken on ``unknown`` evidence while the object was in truth still running: an unknown that
    did not outlast the backend's bound was taken for an ending. And the means to wait it out: every submission
    whose outcome reads ``unknown`` carries the time the unknown began (``unknown_since``), whoever wrote it."""
    out: list[str] = []
    for s in job.submissions:
        if s.outcome is not None and s.outcome.state is State.UNKNOWN and s.unknown_since is None:
            out.append(f"unknown-is-not-an-ending: job {job.id} submission {s.n} reads unknown with no clock")
    for d in job.decisions:
        if d.cause is not Cause.UNKNOWN:
            continue
        sub = _sub(job, d.submission)
        for t in objs:
            if sub is None or t.sid != sub.scheduler_id or t.deleted:
                continue
            if any(
                ex.started_at is not None and ex.started_at <= d.at and (ex.ended_at is None or ex.ended_at > d.at)
                for ex in t.executions
            ):
                out.append(
                    f"unknown-is-not-an-ending: job {job.id} decided {d.action} on unknown evidence at t={d.at:.1f} "
                    f"while object {t.sid} was running"
                )
    return out


def _sub(job: JobRecord, n: int) -> Submission | None:
    for s in job.submissions:
        if s.n == n:
            return s
    return None


def _actions_once(
    jobs: Mapping[str, JobRecord], sched: MemoryScheduler, by_job: Mapping[str, Sequence[TruthJob]]
) -> list[str]:
    out: list[str] = []
    opened: dict[str, list[str]] = {}
    for objs in by_job.values():
        for t in objs:
            if t.gate_open:
                opened.setdefault(t.marker, []).append(t.sid)
    for marker, sids in opened.items():
        if len(sids) > 1:
            out.append(f"no-action-twice: marker {marker} has {len(sids)} opened objects {sids}")
    requeues: dict[str, int] = {}
    for c in sched.calls:
        if c.method == "requeue" and c.applied and c.sid is not None:
            requeues[c.sid] = requeues.get(c.sid, 0) + 1
    for sid, count in requeues.items():
        obj = sched.jobs.get(sid)
        rec = jobs.get(obj.job_id) if obj is not None else None
        if obj is None or rec is None:
            continue
        decided = sum(1 for d in rec.decisions if d.submission == obj.submission and d.action == "requeue")
        if count > decided:
            out.append(f"no-action-twice: object {sid} was requeued {count} times for {decided} requeue decisions")
    for objs in by_job.values():
        for t in objs:
            rec = jobs.get(t.job_id)
            if rec is None or t.readmissions == 0:
                continue
            decided = sum(1 for d in rec.decisions if d.submission == t.submission and d.action == "readmit")
            if t.readmissions > decided:
                out.append(
                    f"no-action-twice: object {t.sid} was readmitted {t.readmissions} times for {decided} readmit "
                    "decisions"
                )
    for job in jobs.values():
        creating = sum(1 for d in job.decisions if d.action in ("resubmit", "hold"))
        if len(job.submissions) > 1 + creating:
            out.append(
                f"no-action-twice: job {job.id} has {len(job.submissions)} submissions for {creating} "
                "resubmit/hold decisions"
            )
    return out


def _holds(jobs: Mapping[str, JobRecord], sched: MemoryScheduler) -> list[str]:
    out: list[str] = []
    for job in jobs.values():
        owners = {h.instance: h.owner for h in job.holds}
        for it in job.intents:
            if it.action is not Action.RELEASE:
                continue
            instance = str(it.args.get("instance"))
            owner = owners.get(instance)
            if owner is None:
                out.append(
                    f"hold-lifted-by-owner: job {job.id}: intent {it.seq} releases {instance}, not a dispatch hold"
                )
            elif it.owner != owner and not it.owner.startswith("operator:"):
                out.append(f"hold-lifted-by-owner: job {job.id}: {it.owner} releases hold {instance} owned by {owner}")
    for c in sched.calls:
        if c.method != "release" or not c.applied or c.sid is None:
            continue
        obj = sched.jobs.get(c.sid)
        rec = jobs.get(obj.job_id) if obj is not None else None
        if rec is None:
            continue
        if not any(h.instance == c.args.get("instance") for h in rec.holds) and not any(
            i.action is Action.RELEASE and i.args.get("instance") == c.args.get("instance") for i in rec.intents
        ):
            out.append(f"hold-lifted-by-owner: a release of {c.args.get('instance')} on {c.sid} has no recorded hold")
    return out


def _truth_execution(objs: Sequence[TruthJob], identity: str, backend: Any, nth: int = 0) -> TruthExecution | None:
    """The ``nth`` shown truth execution with this identity (the memory Kubeflow shape can show a held execution
    and a never-started one, cancelled later, under one identity; they are matched in order)."""
    k = 0
    for t in objs:
        for ex in t.executions:
            if (ex.started_at is not None or ex.ended_at is not None) and backend._identity(t, ex) == identity:
                if k == nth:
                    return ex
                k += 1
    return None


def _outcomes(job: JobRecord, objs: Sequence[TruthJob], backend: Any) -> list[str]:
    out: list[str] = []
    for sub in job.submissions:
        seen: dict[str, int] = {}
        for rec in sub.executions:
            identity = rec.identity
            nth = seen.get(identity, 0)
            seen[identity] = nth + 1
            o = rec.outcome
            if o.ended and o.cause is None:
                out.append(f"ended-has-cause: job {job.id} execution {identity} ended without a cause")
            if not o.ended:
                continue
            ex = _truth_execution(objs, identity, backend, nth)
            if ex is None:
                out.append(f"record-matches-truth: job {job.id} records execution {identity}, which never ran")
                continue
            if o.state is State.SUCCEEDED and not (ex.state is State.SUCCEEDED and ex.exit_code == 0):
                out.append(
                    f"no-success-without-evidence: job {job.id} execution {identity} recorded succeeded, "
                    f"truth {ex.state} {ex.cause}"
                )
            truth_cause = ex.cause
            if o.cause is Cause.CESSATION and truth_cause is Cause.NODE_LOST:
                continue
            if o.cause is Cause.STALLED and truth_cause is Cause.CANCELLED:
                continue  # the supervisor ended it as stalled (stall-not-before-bound checks that judgement)
            if ex.ended_at is None or (o.state, o.cause, o.exit_code) != (ex.state, truth_cause, ex.exit_code):
                out.append(
                    f"record-matches-truth: job {job.id} execution {identity} recorded {o.state}/{o.cause}/"
                    f"{o.exit_code}, truth {ex.state}/{truth_cause}/{ex.exit_code}"
                )
        so = sub.outcome
        if so is not None and so.state is State.SUCCEEDED:
            last = sub.executions[-1] if sub.executions else None
            ex = _truth_execution(objs, last.identity, backend) if last is not None else None
            if ex is None or ex.state is not State.SUCCEEDED or ex.exit_code != 0:
                out.append(f"no-success-without-evidence: job {job.id} submission {sub.n} recorded succeeded")
    for it in job.intents:
        if it.status is IntentStatus.DONE and it.action is Action.START:
            started = _sub(job, it.submission)
            if started is not None and started.scheduler_id is None:
                out.append(f"record-matches-truth: job {job.id}: start {it.seq} done without a scheduler id")
    return out


def _stalls(job: JobRecord, objs: Sequence[TruthJob], sched: MemoryScheduler, backend: Any) -> list[str]:
    """stall-not-before-bound: every stall the supervisor judged (a ``stop`` intent naming a stalled execution)
    was judged after the execution's last report, in truth, by more than the job's rules' bound; and never for
    an execution that never reported. stall-only-while-running: the reading judged (the intent's
    ``observedAt``) saw the execution running in truth, not suspended, not yet started or already ended."""
    from dispatch.memory.scheduler import last_report
    from dispatch.rules import RuleSet

    out: list[str] = []
    for it in job.intents:
        identity = it.args.get("stalled") if it.action is Action.STOP else None
        if not identity:
            continue
        bound = RuleSet.from_data(job.rules).stall_bound if job.rules is not None else None
        found = [(t, ex) for t in objs for ex in t.executions if ex.started_at is not None
                 and backend._identity(t, ex) == identity]  # fmt: skip
        if not found or bound is None:
            out.append(f"stall-not-before-bound: job {job.id} judged {identity} stalled with no such run or bound")
            continue
        t, ex = found[0]
        assert ex.started_at is not None
        seen = it.args.get("observedAt")
        if isinstance(seen, int | float):
            if not (ex.started_at <= seen and (ex.ended_at is None or seen <= ex.ended_at)):
                out.append(f"stall-only-while-running: job {job.id} judged {identity} stalled at {seen}: not running")
            elif any(a <= seen < b for a, b in ex.pauses(it.written_at)):
                out.append(f"stall-only-while-running: job {job.id} judged {identity} stalled while it was suspended")
        last = last_report(sched.program(t), ex.started_at, it.written_at, ex.pauses(it.written_at))
        if last is None:
            out.append(f"stall-not-before-bound: job {job.id} judged {identity} stalled; it never reported")
        elif it.written_at - last <= bound:
            out.append(
                f"stall-not-before-bound: job {job.id} judged {identity} stalled {it.written_at - last:.1f}s after "
                f"its last report (bound {bound:g}s)"
            )
    return out


def _own_failures(backend: Any, sched: MemoryScheduler, store: NodeBlames | None) -> list[str]:
    """own-failure-blames-no-node: no node blame the records keep is of an execution that, in truth, ended by
    the job's own launch failure (its program does not exist: ``not-launchable``)."""
    if store is None:
        return []
    own = {
        backend._identity(t, ex)
        for t in sched.jobs.values()
        for ex in t.executions
        if ex.cause is Cause.NOT_LAUNCHABLE and ex.started_at is not None
    }
    return [
        f"own-failure-blames-no-node: node {b.node} blamed by job {b.job_id}'s execution {b.execution}, which ended "
        "by its own launch failure"
        for b in store.node_blames("memory", 0.0)
        if b.execution in own
    ]


def _blamers(
    jobs: Mapping[str, JobRecord], sched: MemoryScheduler, backend: Any, before: float, *, stalls: bool
) -> dict[str, set[str]]:
    """Per node, the distinct jobs an execution of which ended on it by the node's fault as the scheduler shows
    it (in truth: the node lost or ceased) at or before ``before``; with ``stalls``, also by a stall, as the record
    says: what a job's own ``excludeBlamedNodes`` avoids, but no evidence against a node for other jobs
    (:data:`dispatch.records.nodes.SUSPECT_CAUSES`)."""
    stalled = {
        ex.identity
        for job in jobs.values()
        for sub in job.submissions
        for ex in sub.executions
        if stalls and ex.outcome.cause is Cause.STALLED
    }
    out: dict[str, set[str]] = {}
    for t in sched.jobs.values():
        for ex in t.executions:
            if ex.ended_at is None or ex.ended_at > before or ex.started_at is None:
                continue
            if ex.cause is Cause.NODE_LOST or backend._identity(t, ex) in stalled:
                for n in ex.nodes:
                    out.setdefault(n, set()).add(t.job_id)
    return out


def _suspects(
    jobs: Mapping[str, JobRecord], sched: MemoryScheduler, by_job: Mapping[str, list[TruthJob]], backend: Any
) -> list[str]:
    """suspects-need-two-jobs: a node that a new submission excludes, other than the ones its own rule asks to
    avoid, was blamed (in truth, by the scheduler's evidence: the node lost, never a stall) by at least two
    distinct jobs before the start was written; and no job was
    escalated as unrunnable ("could never start") while the nodes blamed by two jobs or more, with its own,
    left it enough to run."""
    from dispatch.rules import RuleSet

    out: list[str] = []
    cache: dict[tuple[float, bool], dict[str, set[str]]] = {}

    def blamers(at: float, stalls: bool = False) -> dict[str, set[str]]:
        if (at, stalls) not in cache:
            cache[(at, stalls)] = _blamers(jobs, sched, backend, at, stalls=stalls)
        return cache[(at, stalls)]

    for job in jobs.values():
        rules = {r.name: r for r in RuleSet.from_data(job.rules).rules} if job.rules is not None else {}

        def own(at: float, upto: int, job: JobRecord = job) -> set[str]:
            return {n for n, who in blamers(at, True).items() if job.id in who and _ran_on(by_job, job.id, n, upto)}

        for it in job.intents:
            if it.action is not Action.START or not it.args.get("exclude") or it.submission is None:
                continue
            first = next(  # a start made again carries its submission's exclusion; its decision is the first's
                (i for i in job.intents if i.action is Action.START and i.submission == it.submission and i.decision),
                it,
            )
            decision = next((d for d in job.decisions if first.decision is not None and d.seq == first.decision), None)
            rule = rules.get(decision.rule) if decision is not None else None
            mine = own(it.written_at, it.submission) if rule is not None and rule.exclude_blamed_nodes else set()
            for n in sorted(set(it.args["exclude"]) - mine):
                who = blamers(it.written_at).get(n, set())
                if len(who) < 2:
                    out.append(
                        f"suspects-need-two-jobs: job {job.id} submission {it.submission} excludes {n}, blamed by "
                        f"{sorted(who) or 'no job'} only"
                    )
        for e in job.escalations:
            if "could never start" not in e.reason:
                continue
            decision = next((d for d in reversed(job.decisions) if d.at <= e.at), None)
            rule = rules.get(decision.rule) if decision is not None else None
            upto = (e.submission or 0) + 1
            mine = own(e.at, upto) if rule is not None and rule.exclude_blamed_nodes else set()
            legit = mine | {n for n, who in blamers(e.at).items() if len(who) >= 2}
            if len(sched.node_set - legit) >= job.spec.nodes:
                out.append(
                    f"suspects-need-two-jobs: job {job.id} escalated as unrunnable, though only {sorted(legit)} were "
                    f"blamed by two jobs or its own: {len(sched.node_set - legit)} node(s) were left for its "
                    f"{job.spec.nodes}"
                )
    return out


def _ran_on(by_job: Mapping[str, list[TruthJob]], job_id: str, node: str, before_submission: int) -> bool:
    return any(
        node in ex.nodes for t in by_job.get(job_id, []) if t.submission < before_submission for ex in t.executions
    )


def settled(jobs: Mapping[str, JobRecord], sched: MemoryScheduler) -> list[str]:
    """Why the run has not settled (empty: every job is closed with nothing open, and nothing runs or waits
    behind an open gate)."""
    why: list[str] = []
    for job in jobs.values():
        if not job.closed:
            why.append(f"job {job.id} is not closed ({job.state.value}/{job.cause})")
        elif job.open_intents():
            why.append(f"job {job.id} has open intents")
    for t in sched.jobs.values():
        if t.deleted or t.ended:
            continue
        if t.gate_open or t.current.live:
            why.append(f"object {t.sid} of job {t.job_id} is still {'running' if t.current.live else 'waiting'}")
        elif not t.ended:
            why.append(f"object {t.sid} of job {t.job_id} is gated and not stopped")
    return why
