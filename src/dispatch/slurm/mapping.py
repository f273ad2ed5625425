"""The documented table: every Slurm job state, flag and reason to a dispatch State and Cause.

:func:`outcome_of` is the whole table in code; ``docs/adapters/slurm.md`` prints it. Rules, in order:

1. Flags that mean "Slurm itself held it" (``REQUEUE_HOLD``, ``SPECIAL_EXIT``) and a ``JobHeldAdmin`` reason
   on a waiting job: ``held`` / ``admin-held``. A waiting job kept by several of the reasons below at once
   (dispatch's hold in the begin time of a job behind its gate) reads by the kit's order, admin-held > held >
   gated > queued (:func:`dispatch.adapterkit.outcomes.waiting_outcome`), and reports each of them (gate,
   hold, foreign hold).
2. ``PENDING``: by reason. ``JobHeldUser`` is dispatch's closed start gate (``pending`` / ``gated``) unless its
   description says Slurm requeued and held it (after a launch failure, or ``scontrol requeuehold``: "launch
   failed requeued held", "job requeued in held state"), which is ``held`` / ``admin-held``;
   ``JobHoldMaxRequeue`` is ``failed`` / ``launch-failed``; ``BeginTime`` with a begin time that encodes a hold
   instance is ``held`` / ``held``; reasons that will not change by themselves (:func:`unrunnable_reason`) are
   ``pending`` / ``unrunnable``; reasons in :data:`NO_CAPACITY_REASONS` are ``pending`` / ``no-capacity``;
   anything else (Priority, Resources, Dependency, a requeue's BeginTime, None ...) is ``pending`` / ``queued``.
3. ``RUNNING`` (and 22.05's flag-only ``COMPLETING``, ``CONFIGURING``, ``SIGNALING``, ``RESIZING``,
   ``STAGE_OUT``): ``running``; ``SUSPENDED`` (``scontrol suspend``, gang scheduling, ``PreemptMode=SUSPEND``):
   ``running`` / ``suspended`` (it keeps its nodes and goes on when resumed; no stall is judged meanwhile).
4. Ended: ``COMPLETED`` ``succeeded`` / ``exit`` 0 (a non-zero exit code read elsewhere makes it ``failed``
   / ``exit``); ``FAILED`` ``failed`` / ``exit`` (code or signal), or ``launch-failed`` for the
   ``LAUNCH_FAILED`` flag and the reasons JobLaunchFailure, SystemFailure, BadConstraints without a signal
   (22.05 gives a batch script killed by a signal the reason JobLaunchFailure); exit code 125 with no
   rank's code is ``not-launchable``: the batch script's launch checks (the program, the working directory,
   the image exist) failed before ``srun``, the job's own request and no node's fault
   (:data:`~dispatch.adapterkit.jobscript.LAUNCH_FAILED_EXIT`; a rank exiting 125 carries its step's code);
   ``CANCELLED`` / ``REVOKED`` ``cancelled``; a ``FAILED`` job one of whose steps (sacct) ended
   ``OUT_OF_MEMORY`` is ``out-of-memory`` (the ranks run in an srun step, where the OOM kill lands);
   ``REQUEUED`` (an execution a requeue ended) ``cancelled``;
   ``TIMEOUT`` and ``DEADLINE`` ``timeout``; ``NODE_FAIL`` and ``BOOT_FAIL`` ``node-lost``; ``PREEMPTED``
   ``preempted``; ``OUT_OF_MEMORY`` ``out-of-memory``.
5. 22.05 flag-only ``REQUEUED``/``REQUEUE_FED``: ``pending`` / ``queued``; so is 22.05's flag-only
   ``COMPLETING`` of a requeued job with no start time (the old execution still completing, the new one not
   started). A ``PENDING`` execution one of whose steps (sacct) is ``RUNNING`` is ``running``. Anything else:
   ``unknown``.

Exit code and signal, one rule for every source (squeue or sacct, JSON or text, live or after the job left
the queue): they are the program's own answer and are reported only with the cause ``exit`` (and
``launch-failed``). A signal-killed program has a signal and no exit code; a program that exited has an exit
code and no signal; a ``FAILED`` job whose records say ``0:0`` has neither. Where Slurm or the machine ended
the execution (timeout, preempted, node lost, out of memory, cancelled, requeued) both are None: the records
disagree there (squeue's raw wait status 143 where sacct's job line says ``0:0`` and the batch step ``15:0``;
a node failure reads signal 1 live and exit 1 in 26.05's accounting, exit 0 in 22.05's), and an execution's
code must not change when its evidence moves from squeue to sacct. A ``FAILED`` job whose srun step exited
non-zero reports that step's code (``step_exit_code``, from sacct, also while squeue still lists the job): the
ranks' own, where the job's code is the batch shell's (22.05: ``15:0`` when rank 1 exited 3). Slurm keeps the
highest of the ranks' codes; the backend puts there the first failing rank's, where srun's lines name it
(:mod:`~dispatch.slurm.tasklines`). Accounting lags the controller: for a
moment after the end squeue says ``FAILED`` while sacct has not recorded that execution's end (nor its steps'
codes); :func:`accounting_settling` reads such a job as still ``running`` (as Slurm's own ``COMPLETING``) for
at most :data:`ACCOUNTING_SETTLE` seconds after its end, so that the end is reported once, with the ranks' code.

A job gone from squeue without accounting is not mapped here: the backend raises NotFound (never success).
"""

from __future__ import annotations

from dataclasses import dataclass

from dispatch.adapterkit.jobscript import LAUNCH_FAILED_EXIT
from dispatch.adapterkit.outcomes import end_outcome, waiting_outcome
from dispatch.outcome import Cause, Evidence, Outcome, State
from dispatch.slurm.holds import decode_hold
from dispatch.slurm.parse import SlurmJob

UNRUNNABLE_REASONS = frozenset(
    {
        "BadConstraints",
        "PartitionConfig",
        "PartitionTimeLimit",
        "InvalidAccount",
        "InvalidQOS",
        "AccountNotAllowed",
    }
)
"""Pending reasons that will not change by themselves (only a new request or an administrator's change of the
configuration lets the job run): squeue's job reason codes for a request no node or partition setting can ever
satisfy, an account or QOS the job may not use, and (:func:`unrunnable_reason`) every per-job maximum or minimum
of an association or QOS (``AssocMax*PerJob*``, ``QOSMax*PerJob*``, ``QOSMin*``). Limits that clear when other
jobs end (``AssocGrp*``, ``QOSGrp*``, ``AssocMaxJobsLimit``, per-user and per-account maxima) and nodes that may come
back (``PartitionNodeLimit``, which Slurm also gives when nodes are down, ``ReqNodeNotAvail``, ``NodeDown``,
``PartitionDown``) are not."""

NO_CAPACITY_REASONS = frozenset(
    {
        "Constraints",
        "PartitionNodeLimit",
        "PartitionDown",
        "PartitionInactive",
        "ReqNodeNotAvail",
        "NodeDown",
        "AssocGrpCpuLimit",
        "AssocGrpNodeLimit",
        "AssocGrpMemLimit",
        "AssocGrpJobsLimit",
        "AssocGrpSubmitJobsLimit",
        "AssocMaxJobsLimit",
        "QOSGrpCpuLimit",
        "QOSGrpNodeLimit",
        "QOSGrpMemLimit",
        "QOSGrpJobsLimit",
        "QOSMaxJobsPerUserLimit",
        "QOSJobLimit",
        "QOSResourceLimit",
        "QOSTimeLimit",
    }
)
LAUNCH_FAILED_REASONS = frozenset({"JobLaunchFailure", "SystemFailure", "BadConstraints", "Prolog"})
RUNNING_FLAGS = frozenset({"COMPLETING", "CONFIGURING", "SIGNALING", "RESIZING", "STAGE_OUT", "POWER_UP_NODE"})
SLURM_HELD_FLAGS = frozenset({"REQUEUE_HOLD", "SPECIAL_EXIT", "RESV_DEL_HOLD"})
ENDED = {
    "CANCELLED": (State.CANCELLED, Cause.CANCELLED),
    "REVOKED": (State.CANCELLED, Cause.CANCELLED),
    "REQUEUED": (State.CANCELLED, Cause.CANCELLED),
    "TIMEOUT": (State.FAILED, Cause.TIMEOUT),
    "DEADLINE": (State.FAILED, Cause.TIMEOUT),
    "NODE_FAIL": (State.FAILED, Cause.NODE_LOST),
    "BOOT_FAIL": (State.FAILED, Cause.NODE_LOST),
    "PREEMPTED": (State.FAILED, Cause.PREEMPTED),
    "OUT_OF_MEMORY": (State.FAILED, Cause.OUT_OF_MEMORY),
}


@dataclass(frozen=True)
class Reading:
    """An outcome plus what the job says about dispatch's gate and holds."""

    outcome: Outcome
    gate_closed: bool = False
    hold: str | None = None
    foreign_hold: str | None = None


ACCOUNTING_SETTLE = 30.0
"""Seconds after a ``FAILED`` job's end during which its reading waits for sacct to record that end (slurmdbd
receives it from slurmctld's queue, normally within a second); past it the job's own code is reported."""


def accounting_settling(live: SlurmJob, recorded: SlurmJob | None, now: float) -> bool:
    """Whether ``live`` (squeue) ended ``FAILED`` while ``recorded``, sacct's record of the same execution, does
    not show that end yet: its steps' exit codes may still be missing, so the end is not reported yet."""
    if live.state != "FAILED" or (recorded is not None and recorded.state == "FAILED"):
        return False
    return live.end_time is None or now - live.end_time < ACCOUNTING_SETTLE


def outcome_of(job: SlurmJob, evidence: Evidence) -> Reading:
    """Map one job (or execution) to an outcome, following the table in this module's docstring."""
    state, flags, reason = job.state, job.flags, job.reason
    if state == "PENDING" and "RUNNING" in job.step_states:  # sacct: the job line lags its batch step
        state = "RUNNING"
    if (
        not state
        and flags & RUNNING_FLAGS
        and job.start_time is None
        and ((job.restart_cnt or 0) > 0 or "REQUEUED" in flags)
    ):
        state = "PENDING"  # 22.05 right after a requeue: the old execution completing, the new one not started
    shown_reason = "" if reason in ("None", "(null)") else reason
    detail = " ".join(x for x in (state or "/".join(sorted(flags)), shown_reason, job.description) if x)

    def out(s: State, c: Cause | None, code: int | None = None, sig: int | None = None) -> Outcome:
        return Outcome(s, c, evidence, exit_code=code, signal=sig, detail=detail)

    waiting = state in ("PENDING", "") and not (flags & RUNNING_FLAGS and not state)
    held_flags = sorted(flags & SLURM_HELD_FLAGS) if waiting else []
    if state == "PENDING" and reason == "JobHoldMaxRequeue" and not held_flags:
        return Reading(out(State.FAILED, Cause.LAUNCH_FAILED))
    if state == "PENDING" or held_flags:
        return _waiting(job, held_flags, evidence, detail)
    if state == "SUSPENDED":
        return Reading(out(State.RUNNING, Cause.SUSPENDED))
    if state == "RUNNING" or (not state and flags & RUNNING_FLAGS):
        return Reading(out(State.RUNNING, None))
    if state == "COMPLETED":
        code, sig = _exit_pair(job)
        return Reading(end_outcome(evidence, code if code or sig else 0, sig, detail=detail))
    if state == "FAILED":
        # 22.05 labels a batch script killed by a signal JobLaunchFailure: with a signal, it ran and was killed
        if "LAUNCH_FAILED" in flags or (reason in LAUNCH_FAILED_REASONS and not job.signal):
            return Reading(end_outcome(evidence, *_exit_pair(job), launch_failed=True, detail=detail))
        if job.exit_code == LAUNCH_FAILED_EXIT and not job.signal and not job.step_exit_code:
            return Reading(end_outcome(evidence, job.exit_code, launch_failed=True, own=True, detail=detail))
        if "OUT_OF_MEMORY" in job.step_states:
            return Reading(out(State.FAILED, Cause.OUT_OF_MEMORY))
        if job.step_exit_code:  # a rank's own code, where the job's is srun's or the signal it died of
            return Reading(end_outcome(evidence, job.step_exit_code, detail=detail))
        return Reading(end_outcome(evidence, *_exit_pair(job), detail=detail))
    if state in ENDED:
        s, c = ENDED[state]
        return Reading(out(s, c))  # Slurm or the machine ended it: no exit code, no signal (module docstring)
    if not state and flags & {"REQUEUED", "REQUEUE_FED"}:
        return Reading(out(State.PENDING, Cause.QUEUED))
    return Reading(out(State.UNKNOWN, Cause.UNKNOWN))


def _waiting(job: SlurmJob, held_flags: list[str], evidence: Evidence, detail: str) -> Reading:
    """A waiting job's reading: what keeps it waiting (Slurm's own hold flags, an administrator's hold, a hold
    Slurm placed after a requeue, dispatch's gate, dispatch's hold in the begin time, the queue), one cause
    by the kit's order (:func:`dispatch.adapterkit.outcomes.waiting_outcome`)."""
    reason = job.reason
    foreign = held_flags[0] if held_flags else None
    gate_closed = False
    if foreign is None and reason == "JobHeldAdmin":
        foreign = "JobHeldAdmin"
    elif reason == "JobHeldUser":
        desc = job.description.lower()
        if "requeued" in desc and "held" in desc:  # "launch failed requeued held", "job requeued in held state"
            foreign = foreign or job.description
        else:
            gate_closed = True
    hold = decode_hold(job.eligible_time)
    no_capacity = reason in NO_CAPACITY_REASONS or reason.startswith(("ReqNodeNotAvail", "AssocGrp", "QOSGrp"))
    queued = Cause.UNRUNNABLE if unrunnable_reason(reason) else Cause.NO_CAPACITY if no_capacity else Cause.QUEUED
    outcome = waiting_outcome(
        evidence,
        foreign_holds=(foreign,) if foreign else (),
        holds=(hold,) if hold else (),
        gate_closed=gate_closed,
        queued=queued,
        detail=detail,
    )
    return Reading(outcome, gate_closed=gate_closed, hold=hold, foreign_hold=foreign)


def unrunnable_reason(reason: str) -> bool:
    """Whether a pending job's ``reason`` will not change by itself (:data:`UNRUNNABLE_REASONS`, and the per-job
    maxima and minima of an association or QOS)."""
    if reason in UNRUNNABLE_REASONS:
        return True
    per_job = reason.startswith(("AssocMax", "QOSMax")) and "PerJob" in reason
    return per_job or reason.startswith("QOSMin")


def _exit_pair(job: SlurmJob) -> tuple[int | None, int | None]:
    """(exit code, signal) by the module's rule: a signal excludes an exit code; ``0:0`` on a FAILED job is
    no evidence (neither)."""
    if job.signal:
        return None, job.signal
    if job.exit_code == 0 and job.state == "FAILED":
        return None, None
    return job.exit_code, None
