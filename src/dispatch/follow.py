"""Waiting for a job's outcome in this process: what ``dispatch run`` does, as a library call.

:func:`follow` supervises ONE job in the calling process (a :class:`~dispatch.supervise.Supervisor` limited to
that job, so its rules are applied here: resubmission, requeue, hold, ...) until the job is over, and returns
its record. It takes no share of the other jobs of the cluster, so it runs beside the cluster's supervisor
services without taking their jobs; a job a live service already holds is left to it, and this call simply
watches its record until it ends.

``Cluster.wait(job_id)`` and ``Cluster.run(spec, rules=...)`` are the public doors (:mod:`dispatch.cluster`).

A job that waits for a reason that will not change by itself (:func:`unrunnable`: pending with cause
``unrunnable``) is not waited on for ever: ``each`` may stop it (``Cluster.run`` and ``dispatch run``, which
submitted it, do: no orphan is left in the queue), and :func:`follow` then waits for it to end as for any stop;
when it is left waiting, :func:`follow` raises :class:`~dispatch.errors.Unsupported` naming the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from dispatch.errors import ReadOnly, Unsupported
from dispatch.outcome import Cause, State

if TYPE_CHECKING:
    from dispatch.clock import Clock
    from dispatch.records.base import Records
    from dispatch.records.model import JobRecord
    from dispatch.spi import Backend, RankProgress


class Followed(Protocol):
    """What :func:`follow` needs of a cluster (:class:`dispatch.cluster.Cluster` is one): its name, backend,
    records and clock, and whether it is open read-only."""

    @property
    def name(self) -> str: ...
    @property
    def backend(self) -> Backend: ...
    @property
    def records(self) -> Records | None: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def read_only(self) -> bool: ...


PROGRESS_SHOWN_EVERY = 1.0
"""Seconds between two reads of a followed job's progress when it is shown (:func:`follow`'s ``progress``)."""

DEFAULT_POLL = 0.25
"""Seconds between two cycles of the in-process supervisor (bounded below by nothing else: one batched
``inspect_many`` per cycle)."""


def over(job: JobRecord) -> bool:
    """True when nothing more will happen to ``job``: it is closed (no rule will act again) and its last
    submission has ended, has no outcome to wait for, or is gone from the scheduler."""
    if not job.closed:
        return False
    out, cur = job.outcome, job.current
    return out is None or out.state.ended or cur is None or cur.gone


def unrunnable(job: JobRecord) -> bool:
    """True when ``job`` waits for a reason that will not change by itself (cause ``unrunnable``) and nobody has
    asked to stop it yet."""
    out = job.outcome
    return out is not None and out.state is State.PENDING and out.cause is Cause.UNRUNNABLE and not job.stop_requested


def unrunnable_reason(job: JobRecord) -> str:
    """One line on why ``job`` can never run, from its outcome's detail (the scheduler's words)."""
    out = job.outcome
    return f"job {job.id} can never run as asked: {(out.detail if out else '') or 'the scheduler says so'}"


def follow(
    cluster: Followed,
    job_id: str,
    *,
    timeout: float | None = None,
    poll: float = DEFAULT_POLL,
    each: Callable[[JobRecord], None] | None = None,
    progress: Callable[[JobRecord, tuple[RankProgress, ...]], None] | None = None,
) -> JobRecord:
    """Supervise job ``job_id`` here until it is over (:func:`over`); return its final record.

    ``timeout`` (seconds on the cluster's clock; None waits for ever) raises :class:`TimeoutError` naming the
    job and its state when it passes; the job runs on. A job that reads :func:`unrunnable` after ``each`` saw it
    (``each`` did not stop it) raises :class:`Unsupported` naming the scheduler's reason; the job stays queued.
    ``each`` is called with the record after every cycle (``dispatch run`` shows output and handles Ctrl-C
    there). ``progress``, when given, is called after every cycle with the record and the last progress read of
    its current execution while that runs (read at least every :data:`PROGRESS_SHOWN_EVERY` seconds, on every
    backend; ``()`` while no rank reported): ``dispatch run`` draws it. ReadOnly on a cluster opened read-only
    or without a record store: waiting writes what it observes.
    """
    from dispatch.supervise import Supervisor

    if cluster.read_only or cluster.records is None:
        raise ReadOnly(f"cluster {cluster.name} is open read-only: waiting for a job records what it observes")
    if timeout is not None and (not math.isfinite(timeout) or timeout < 0):
        raise ValueError(f"timeout must be a finite number of seconds >= 0, not {timeout!r}")
    records = cluster.records
    records.get(job_id)  # NotFound for an unknown id, before anything else
    supervisor = Supervisor(cluster.backend, records, clock=cluster.clock, cluster=cluster.name, only={job_id})
    if progress is not None:
        supervisor.progress_every = PROGRESS_SHOWN_EVERY
    deadline = None if timeout is None else cluster.clock.now() + timeout
    while True:
        supervisor.cycle()
        job = records.get(job_id)
        if progress is not None:
            cur = job.current
            running = cur is not None and cur.outcome is not None and cur.outcome.state is State.RUNNING
            sid = cur.scheduler_id if cur is not None and running else None
            progress(job, supervisor.progress.get(sid, ()) if sid is not None else ())
        if each is not None:
            each(job)
            if unrunnable(job):
                job = records.get(job_id)  # each may have stopped it
        if unrunnable(job):
            raise Unsupported(unrunnable_reason(job) + "; it stays queued (dispatch stop " + job_id + " ends it)")
        if over(job):
            return job
        if deadline is not None and cluster.clock.now() >= deadline:
            raise TimeoutError(f"job {job_id} has not ended after {timeout:g}s (it is {job.state.value}; it runs on)")
        cluster.clock.sleep(poll)
