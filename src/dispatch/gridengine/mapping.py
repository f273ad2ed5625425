"""From Grid Engine's records to outcomes (pure functions).

Live jobs (qstat state letters): ``r``/``t`` running; ``s``/``S``/``T`` suspended (by a user or an operator, by its
queue, by a threshold or a subordinate queue): ``running`` / ``suspended``, still running, with its slots, and never
judged stalled meanwhile; ``d*`` being deleted (still running until it leaves qstat); ``qw`` pending (queued, or
held by dispatch when its earliest start time carries dispatch's hold); ``hqw`` held: a user hold that dispatch's
gate has not opened is the gate; an operator or system hold, or a user hold after the gate was opened, is someone
else's (admin-held); ``E`` an error state Grid Engine will not leave by itself (failed, launch-failed).

Ended jobs (qacct): ``failed 0`` and ``exit_status < 128`` is the job's own exit, except 125, the job script's
launch checks failing (:data:`~dispatch.adapterkit.jobscript.LAUNCH_FAILED_EXIT`: a working directory that
cannot be entered, a program that is not an executable file), which is not-launchable, the job's own request
and no node's fault (a program that itself exits 125 reads so too: qacct keeps nothing else to tell them
apart); a signal death is a stop when
dispatch stopped the job (recorded by the backend, because Grid Engine 8.1.9 does not record who deleted a
job), a timeout when it ran for its ``h_rt``, out-of-memory when it reached its ``h_vmem``, and otherwise a
failure of unknown cause (a ``qdel`` by someone else cannot be told from any other kill; never ``cancelled``).
``failed 37`` (qmaster enforced a limit) and ``failed 100`` (ended by a signal) are judged as above; any other
non-zero ``failed`` means the job could not be set up or started (launch-failed).
"""

from __future__ import annotations

from dataclasses import dataclass

from dispatch.adapterkit.jobscript import LAUNCH_FAILED_EXIT
from dispatch.adapterkit.outcomes import end_outcome, waiting_outcome
from dispatch.gridengine.parse import AccountingRecord, LiveJob, parse_duration, requested, size_bytes
from dispatch.outcome import Cause, Evidence, Outcome, State

GATE_CONTEXT = "dispatch_gate"
HOLD_CONTEXT = "dispatch_hold"
LIMIT_ENFORCED = 37
"""qacct ``failed 37``: qmaster enforced h_rt, h_cpu or h_vmem."""
AFTER_JOB = 100
"""qacct ``failed 100``: the job ended by a signal ("assumedly after job")."""
HOLD_AFTER = 2114380800.0
"""2037-01-01: a dispatch hold sets the earliest start time to 2037-12-31; any start time after this is one.
(Grid Engine keeps times in 32 bits, so the instance cannot be encoded in the time as on Slurm: it travels in
the job's context instead.)"""


ACCOUNTING_LAG = 300.0
"""How long after a job left qstat a missing qacct record still means "not written yet" (Grid Engine flushes
accounting every ``accounting_flush_time``, 15 s by default; a job not in qacct this long after is gone)."""


def awaiting_accounting(left_qstat_at: float | None, stopped_at: float | None, now: float) -> str | None:
    """Why a job that neither qstat nor qacct shows is one Grid Engine has not answered for *yet* (the
    backend answers it :class:`~dispatch.spi.Unanswered`), or None when it is gone (no answer is coming).

    ``left_qstat_at``: when this backend last saw the job in qstat (None: never). ``stopped_at``: when dispatch
    deleted it while it ran (None: it did not), so qacct is due to record it. Either counts for
    :data:`ACCOUNTING_LAG` seconds."""
    if stopped_at is not None and now - stopped_at <= ACCOUNTING_LAG:
        return "deleted by dispatch while it ran; qacct has no record of it yet"
    if left_qstat_at is not None and now - left_qstat_at <= ACCOUNTING_LAG:
        return f"left qstat {max(0.0, now - left_qstat_at):.0f}s ago; qacct has no record of it yet"
    return None


@dataclass(frozen=True)
class Reading:
    outcome: Outcome
    gate_closed: bool
    hold: str | None
    foreign_hold: str | None


def live_reading(
    job: LiveJob,
    user_hold: bool,
    other_holds: tuple[str, ...],
    context: dict[str, str],
    execution_time: float | None,
    ev: Evidence,
) -> Reading:
    state = job.state
    gate_open = context.get(GATE_CONTEXT) == "open"
    hold = context.get(HOLD_CONTEXT) if execution_time is not None and execution_time >= HOLD_AFTER else None
    foreign = list(other_holds)
    if user_hold and gate_open:
        foreign.append("user hold")
    gate_closed = user_hold and not gate_open
    foreign_hold = ", ".join(foreign) if foreign else None
    if "E" in state:
        out = end_outcome(ev, None, launch_failed=True, detail=f"qstat state {state}: Grid Engine error state")
    elif "d" in state or state[:1] in ("r", "t", "R") or any(c in state for c in "sST"):
        suspended = any(c in state for c in "sST")
        detail = f"qstat state {state}" + (" (suspended)" if suspended else "")
        out = Outcome(State.RUNNING, Cause.SUSPENDED if suspended else None, ev, detail=detail)
    else:
        out = waiting_outcome(
            ev,
            foreign_holds=foreign,
            holds=(hold,) if hold else (),
            gate_closed=gate_closed,
            detail=f"qstat state {state}",
        )
    return Reading(out, gate_closed, hold, foreign_hold)


def ended_outcome(rec: AccountingRecord, stopped: bool, ev: Evidence) -> Outcome:
    detail = f"qacct failed {rec.failed_text}, exit_status {rec.exit_status}"
    if rec.failed not in (0, LIMIT_ENFORCED, AFTER_JOB):
        return end_outcome(ev, None, launch_failed=True, detail=detail)
    if rec.exit_status < 128 and rec.failed == 0:
        launch = rec.exit_status == LAUNCH_FAILED_EXIT  # the job script's launch checks failed
        return end_outcome(ev, rec.exit_status, launch_failed=launch, own=launch, detail=detail)
    sig = rec.exit_status - 128 if rec.exit_status > 128 else None
    if stopped:
        return Outcome(State.CANCELLED, Cause.CANCELLED, ev, signal=sig, detail=detail + " (stopped by dispatch)")
    h_rt = parse_duration(requested(rec.category, "h_rt") or "")
    if h_rt is not None and rec.wallclock is not None and rec.wallclock >= h_rt - 1:
        return Outcome(State.FAILED, Cause.TIMEOUT, ev, signal=sig, detail=detail + f" (ran its h_rt of {h_rt:g}s)")
    vmem = size_bytes(requested(rec.category, "h_vmem") or "")
    if vmem is not None and rec.maxvmem is not None and rec.maxvmem >= 0.9 * vmem:
        return Outcome(State.FAILED, Cause.OUT_OF_MEMORY, ev, signal=sig, detail=detail + " (reached its h_vmem)")
    return Outcome(
        State.FAILED, Cause.UNKNOWN, ev, signal=sig, detail=detail + " (killed; Grid Engine does not say by whom)"
    )
