"""Planted bugs in the writers the simulator drives beside the supervisors, for proving that it catches them.

Each lives here, in the simulator, as an injected function or a subclass of the product's own class; the exclusions'
two (``own-failure-blames``, ``suspect-per-blame``) set the class attributes the product's
:class:`~dispatch.supervise.blame.Exclusions` offers as seams, with no copy of its code. :data:`TARGETS` names the
invariant each one breaks (``python -m dispatch.sim --mutations`` runs them with the supervisor's planted bugs,
:mod:`dispatch.sim.mutation`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from dispatch.cli.observe import left_to_supervisor
from dispatch.cluster import Operator, Submitted
from dispatch.errors import Conflict, DispatchError
from dispatch.memory import MemoryScheduler, Shape, SlurmShapedBackend
from dispatch.memory import backend as memory_backend
from dispatch.outcome import Cause
from dispatch.records.model import Event, JobRecord
from dispatch.records.nodes import SUSPECT_CAUSES
from dispatch.rules import RuleSet
from dispatch.spec import JobSpec
from dispatch.spi import Backend, JobEvidence, Unanswered
from dispatch.supervise.blame import BLAMING_CAUSES, Exclusions
from dispatch.supervise.fold import fold
from dispatch.supervise.step import Step
from dispatch.supervise.supervisor import Supervisor


class Planted(StrEnum):
    STATUS_WITHOUT_UNKNOWN_CLOCK = "status-without-unknown-clock"
    """``dispatch status`` folds an ``unknown`` reading without starting the unknown clock (the read commands'
    own fold before there was one fold): a supervisor taking the job next decides at once on the unknown."""

    NARROW_VIEW_GONE_FOR_GOOD = "narrow-view-gone-for-good"
    """A user whose view of the scheduler lacks an object records it gone (the read commands leave the absence
    of a job with rules to the supervisor), fate unknown, with no clock: it is never read again, and a supervisor
    taking the job decides on the unknown while the object runs."""

    SUBMIT_MANY_HALF_BATCH = "submit-many-half-batch"
    """``submit_many`` records and starts the first half of the batch, then fails without saying which jobs
    exist: the caller's retry runs those jobs twice."""

    FORGETS_BLAMED_NODES = "forgets-blamed-nodes"
    """The supervisor's exclusions leave out the nodes a rule with ``excludeBlamedNodes`` asks to avoid (only
    the cluster's suspects are excluded): a resubmission may land on the node that failed."""

    SUBMITS_UNRUNNABLE = "submits-unrunnable"
    """The supervisor's exclusions never ask which nodes could run the job: a resubmission whose exclusions
    leave too few nodes is submitted, to wait forever, instead of escalated."""

    OWN_FAILURE_BLAMES = "own-failure-blames"
    """The supervisor's exclusions blame nodes for the job's own launch failures too (``not-launchable``: a
    program that does not exist), as every launch failure once did: one typo shuns nodes for everyone."""

    SUSPECT_PER_BLAME = "suspect-per-blame"
    """Suspects count blames, not distinct jobs: one job whose executions failed on a node again and again makes
    it a suspect for every job of the cluster (and may leave another job too few nodes, escalated)."""

    STALLS_MAKE_SUSPECTS = "stalls-make-suspects"
    """Suspects count stalled blames too: jobs that go quiet past their own bound on a node make it a suspect
    for every job of the cluster, as if the node had failed them."""

    ARRAY_OP_HITS_SIBLINGS = "array-op-hits-siblings"
    """The memory scheduler's stop, hold and requeue of one task of a job array act on the whole array (as
    ``scancel <array>`` would): a sibling job is cancelled, held or run again with no decision of its own."""

    ARRAY_RELEASE_WHOLE = "array-release-whole"
    """Opening one task's gate releases the whole array (as ``scontrol release <array>`` would): a sibling whose
    scheduler id is not recorded yet (its start's answer was lost) starts behind its record's back."""


TARGETS: dict[Planted, str] = {
    Planted.STATUS_WITHOUT_UNKNOWN_CLOCK: "unknown-is-not-an-ending",
    Planted.NARROW_VIEW_GONE_FOR_GOOD: "unknown-is-not-an-ending",
    Planted.SUBMIT_MANY_HALF_BATCH: "batch-once",
    Planted.FORGETS_BLAMED_NODES: "excluded-nodes-avoided",
    Planted.SUBMITS_UNRUNNABLE: "no-unrunnable-submission",
    Planted.OWN_FAILURE_BLAMES: "own-failure-blames-no-node",
    Planted.SUSPECT_PER_BLAME: "suspects-need-two-jobs",
    Planted.STALLS_MAKE_SUSPECTS: "suspects-need-two-jobs",
    Planted.ARRAY_OP_HITS_SIBLINGS: "array-task-alone",
    Planted.ARRAY_RELEASE_WHOLE: "gate-opened-only-when-recorded",
}
"""The invariant each planted bug breaks (the one the mutation check expects to catch it)."""


def _without_clock(
    job: JobRecord, evidence: JobEvidence | Unanswered | None, now: float, *, missing: bool, **kwargs: Any
) -> tuple[JobRecord, list[Event]]:
    new, events = fold(job, evidence, now, **kwargs)
    hit = evidence is None if missing else isinstance(evidence, JobEvidence)
    if hit and new is not job and new.current is not None:
        new.current.unknown_since = None
    return new, events


def fold_without_unknown_clock(
    job: JobRecord, evidence: JobEvidence | Unanswered | None, now: float, **kwargs: Any
) -> tuple[JobRecord, list[Event]]:
    """Planted bug (STATUS_WITHOUT_UNKNOWN_CLOCK): the one fold, then the clock an unknown reading started is
    dropped."""
    return _without_clock(job, evidence, now, missing=False, **kwargs)


def writes_absence(job: JobRecord, evidence: JobEvidence | Unanswered | None, now: float) -> bool:
    """Planted bug (NARROW_VIEW_GONE_FOR_GOOD): a read command writes an object's absence from its view too."""
    return not left_to_supervisor(job, now)


def fold_gone_for_good(
    job: JobRecord, evidence: JobEvidence | Unanswered | None, now: float, **kwargs: Any
) -> tuple[JobRecord, list[Event]]:
    """Planted bug (NARROW_VIEW_GONE_FOR_GOOD): the one fold, then the clock a missing object started is
    dropped."""
    return _without_clock(job, evidence, now, missing=True, **kwargs)


class HalfBatchOperator(Operator):
    """Planted bug (SUBMIT_MANY_HALF_BATCH): submits the first half of a batch, then raises a bare Conflict."""

    def submit_many(self, specs: Sequence[JobSpec], rules: Any = None, **kwargs: Any) -> list[Submitted]:
        super().submit_many(specs[: (len(specs) + 1) // 2], rules, **kwargs)
        raise Conflict("a job id is taken")


class ForgetfulExclusions(Exclusions):
    """Planted bug (FORGETS_BLAMED_NODES): every rule is read as if it did not say ``excludeBlamedNodes``."""

    def amend(self, job: JobRecord, step: Step, rules: RuleSet) -> Step:
        forgetful = dataclasses.replace(
            rules, rules=tuple(dataclasses.replace(r, exclude_blamed_nodes=False) for r in rules.rules)
        )
        return super().amend(job, step, forgetful)


class BlindExclusions(Exclusions):
    """Planted bug (SUBMITS_UNRUNNABLE): the nodes that could run a job are never known."""

    def schedulable(self, spec: JobSpec) -> frozenset[str] | None:
        return None


class OwnFailureBlamingExclusions(Exclusions):
    """Planted bug (OWN_FAILURE_BLAMES): the product's seam, widened to the job's own launch failures."""

    blaming = BLAMING_CAUSES | {Cause.NOT_LAUNCHABLE}


class PerBlameExclusions(Exclusions):
    """Planted bug (SUSPECT_PER_BLAME): the product's seam, counting blames instead of distinct jobs."""

    distinct_jobs = False


class StallSuspectExclusions(Exclusions):
    """Planted bug (STALLS_MAKE_SUSPECTS): the product's seam, counting stalls towards suspects."""

    suspect_causes = SUSPECT_CAUSES | {Cause.STALLED}


def planted_exclusions(sup: Supervisor, planted: frozenset[Planted]) -> Exclusions:
    """The supervisor's exclusions, made by :class:`ForgetfulExclusions` or :class:`BlindExclusions` when
    ``planted`` names its bug (the simulator sets it on each supervisor it starts)."""
    if Planted.FORGETS_BLAMED_NODES in planted:
        cls: type[Exclusions] = ForgetfulExclusions
    elif Planted.SUBMITS_UNRUNNABLE in planted:
        cls = BlindExclusions
    elif Planted.OWN_FAILURE_BLAMES in planted:
        cls = OwnFailureBlamingExclusions
    elif Planted.SUSPECT_PER_BLAME in planted:
        cls = PerBlameExclusions
    elif Planted.STALLS_MAKE_SUSPECTS in planted:
        cls = StallSuspectExclusions
    else:
        return sup.exclusions
    return cls(sup.backend, sup.records, sup.cluster, sup.facts.capabilities, sup.exclusions.policy)


class SiblingsBackend(SlurmShapedBackend):
    """Planted bug (ARRAY_OP_HITS_SIBLINGS): a stop, hold or requeue of an array task, once it landed, is made
    on each of its siblings too (whatever each answers)."""

    def _siblings_too(self, sid: str, act: Any) -> None:
        for sibling in self.scheduler.siblings(sid):
            with contextlib.suppress(DispatchError):
                act(sibling)

    def stop_job(self, scheduler_id: str) -> float:
        wait = super().stop_job(scheduler_id)
        self._siblings_too(scheduler_id, self.scheduler.stop)
        return wait

    def hold(self, scheduler_id: str, instance: str) -> None:
        super().hold(scheduler_id, instance)
        self._siblings_too(scheduler_id, lambda sid: self.scheduler.hold(sid, instance))

    def requeue(self, scheduler_id: str) -> None:
        super().requeue(scheduler_id)
        self._siblings_too(scheduler_id, self.scheduler.requeue)


class WholeArrayBackend(SlurmShapedBackend):
    """Planted bug (ARRAY_RELEASE_WHOLE): opening a task's gate, alone or in a batch, opens its siblings' too."""

    def open(self, scheduler_id: str) -> None:
        super().open(scheduler_id)
        self._open_siblings([scheduler_id])

    def open_many(self, scheduler_ids: Sequence[str]) -> list[DispatchError | None]:
        answers = super().open_many(scheduler_ids)
        self._open_siblings([sid for sid, a in zip(scheduler_ids, answers, strict=True) if a is None])
        return answers

    def _open_siblings(self, opened: Sequence[str]) -> None:
        for sid in opened:
            for sibling in self.scheduler.siblings(sid):
                with contextlib.suppress(DispatchError):
                    self.scheduler.open_gate(sibling)


def planted_backend(sched: MemoryScheduler, planted: frozenset[Planted], call_bound: float) -> Backend:
    """The simulator's memory backend over ``sched``: :class:`SiblingsBackend` or :class:`WholeArrayBackend`
    when ``planted`` names its bug and the scheduler has the Slurm shape (the one with arrays)."""
    if sched.shape is Shape.SLURM and Planted.ARRAY_OP_HITS_SIBLINGS in planted:
        return SiblingsBackend(sched, call_bound=call_bound)
    if sched.shape is Shape.SLURM and Planted.ARRAY_RELEASE_WHOLE in planted:
        return WholeArrayBackend(sched, call_bound=call_bound)
    return memory_backend(sched, call_bound=call_bound)
