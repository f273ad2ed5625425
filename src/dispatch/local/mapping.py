"""From a job directory's files to evidence: outcomes, executions, the gate and holds (pure functions)."""

from __future__ import annotations

from dispatch.adapterkit.identity import execution_identity
from dispatch.adapterkit.outcomes import waiting_outcome
from dispatch.adapterkit.progress import parse_report
from dispatch.local.layout import ExecutionFiles, JobFiles
from dispatch.outcome import Cause, Evidence, Outcome, State
from dispatch.spi import ExecutionEvidence, Gate, JobEvidence, RankProgress

SOURCE = "local"
STALE_SPAWN = 30.0
"""Seconds after which a spawn that never recorded a launcher is taken as lost (the spawner died mid-way)."""


def execution_outcome(e: ExecutionFiles, evidence: Evidence) -> Outcome:
    """One spawned execution's outcome: from its result, else from whether its launcher still runs."""
    r = e.result
    if r is not None:
        state = State(str(r.get("state", "unknown")))
        cause = Cause(str(r["cause"])) if r.get("cause") else Cause.UNKNOWN
        code = r.get("exitCode")
        sig = r.get("signal")
        try:
            return Outcome(
                state,
                cause,
                evidence,
                exit_code=code if isinstance(code, int) else None,
                signal=sig if isinstance(sig, int) else None,
                detail=str(r.get("detail") or ""),
            )
        except ValueError as exc:  # a result that contradicts itself is not evidence of anything
            return Outcome(State.UNKNOWN, Cause.UNKNOWN, evidence, detail=f"unreadable result: {exc}")
    if e.launcher is None:
        spawned_at = float((e.spawned or {}).get("at", evidence.observed_at))
        if evidence.observed_at - spawned_at > STALE_SPAWN:
            return Outcome(State.UNKNOWN, Cause.UNKNOWN, evidence, detail="the launcher never started")
        return Outcome(State.PENDING, Cause.QUEUED, evidence, detail="starting")
    if e.launcher_alive and waiting_for(e):
        return Outcome(State.PENDING, Cause.QUEUED, evidence, detail=waiting_for(e))
    if e.launcher_alive:
        return Outcome(State.RUNNING, None, evidence)
    return Outcome(
        State.UNKNOWN,
        Cause.UNKNOWN,
        evidence,
        detail=f"the launcher (pid {e.launcher.get('pid')}) is gone without recording how the execution ended",
    )


def waiting_for(e: ExecutionFiles) -> str:
    """Why a live launcher has not started its ranks yet (it waits for GPUs), or "" once they run."""
    said = (e.launcher or {}).get("waiting")
    return str(said) if said and e.result is None else ""


def progress_of(e: ExecutionFiles) -> tuple[RankProgress, ...]:
    """The ranks' last progress reports of a running execution (unreadable files are left out)."""
    reports = (parse_report(text, rank) for rank, text in e.progress)
    return tuple(r for r in reports if r is not None)


def job_evidence(job: JobFiles, now: float) -> JobEvidence:
    """The evidence of one job directory, observed at ``now``."""
    evidence = Evidence(SOURCE, now)
    submission = int(job.manifest.get("submission", 1))
    executions: list[ExecutionEvidence] = []
    for e in job.spawned:
        if e.result is None and (e.launcher is None or (e.launcher_alive and waiting_for(e))):
            continue  # not started: the job's outcome says why it waits
        out = execution_outcome(e, evidence)
        started = (e.launcher or {}).get("startedAt") or (e.result or {}).get("startedAt")
        ended = (e.result or {}).get("endedAt")
        executions.append(
            ExecutionEvidence(
                identity=execution_identity(submission, job.scheduler_id, e.restart),
                restart=e.restart,
                outcome=out,
                started_at=float(started) if started is not None else None,
                ended_at=float(ended) if ended is not None else None,
                nodes=tuple(f"local-{n}" for n in range(int(job.manifest["spec"].get("nodes", 1)))),
                progress=progress_of(e) if out.state is State.RUNNING else (),
            )
        )
    holds = tuple(sorted(job.holds))
    gate = Gate.OPEN if job.gate_open else Gate.CLOSED
    return JobEvidence(
        scheduler_id=job.scheduler_id,
        marker=str(job.manifest.get("marker")) if job.manifest.get("marker") else None,
        outcome=_job_outcome(job, executions, evidence),
        gate=gate,
        holds=holds,
        executions=tuple(executions),
    )


def _job_outcome(job: JobFiles, executions: list[ExecutionEvidence], evidence: Evidence) -> Outcome:
    current = job.current
    if current is not None and current.result is None and job.holds and current.launcher_alive and waiting_for(current):
        # held while it waits for GPUs: its launcher sees the hold at its next try and puts it back as planned
        return waiting_outcome(evidence, stopped=job.stopped is not None, holds=sorted(job.holds))
    if current is not None and current.result is None:
        return execution_outcome(current, evidence)
    if job.queued is not None or current is None:
        return waiting_outcome(
            evidence, stopped=job.stopped is not None, holds=sorted(job.holds), gate_closed=not job.gate_open
        )
    assert executions, "an ended current execution is always listed"
    return executions[-1].outcome
