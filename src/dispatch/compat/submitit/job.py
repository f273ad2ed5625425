"""submitit's ``Job`` over a :class:`dispatch.executor.CallFuture`: the same questions, answered from the job's
dispatch record and the future.

What differs from submitit (docs/coming-from-submitit.md): ``job_id`` is the dispatch job's id (``dispatch show
JOB``), not the scheduler's; ``result()`` re-raises the function's own exception (its remote traceback as the
cause) instead of a ``FailedJobError`` holding its text; a job that ended without a result raises
:class:`~dispatch.executor.CallFailed`, whose record says how it ended (state, cause, exit code).
"""

from __future__ import annotations

import concurrent.futures
from typing import TYPE_CHECKING, Generic, TypeVar

from dispatch.compat.submitit.helpers import DelayedSubmission
from dispatch.errors import Unavailable
from dispatch.outcome import Cause, State

if TYPE_CHECKING:
    from dispatch.executor import CallFuture
    from dispatch.records.model import JobRecord

R = TypeVar("R")

_FAILED_AS = {
    Cause.TIMEOUT: "TIMEOUT",
    Cause.OUT_OF_MEMORY: "OUT_OF_MEMORY",
    Cause.NODE_LOST: "NODE_FAIL",
    Cause.PREEMPTED: "PREEMPTED",
    Cause.CANCELLED: "CANCELLED",
}


def state_word(job: JobRecord) -> str:
    """The job's state in Slurm's words, as submitit's ``Job.state`` gives them on Slurm: PENDING, RUNNING,
    COMPLETED, FAILED (TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, PREEMPTED by cause), CANCELLED, UNKNOWN."""
    out = job.outcome
    if out is None:
        return "PENDING"
    if out.state in (State.PENDING, State.HELD):
        return "PENDING"
    if out.state is State.RUNNING:
        return "SUSPENDED" if out.cause is Cause.SUSPENDED else "RUNNING"
    if out.state is State.SUCCEEDED:
        return "COMPLETED"
    if out.state is State.CANCELLED:
        return "CANCELLED"
    if out.state is State.FAILED:
        return _FAILED_AS.get(out.cause, "FAILED") if out.cause is not None else "FAILED"
    return "UNKNOWN"


class Job(Generic[R]):
    """One submitted call. ``num_tasks`` is its ranks (nodes x tasks per node); ``result()`` is for a one-task
    job, ``results()`` gives every task's value in rank order."""

    def __init__(self, future: CallFuture, submission: DelayedSubmission, num_tasks: int) -> None:
        self._future = future
        self._submission = submission
        self.num_tasks = num_tasks

    @property
    def job_id(self) -> str:
        """The dispatch job's id (RuntimeError inside ``with executor.batch():``: it is submitted at the end)."""
        return self._future.job_id

    @property
    def state(self) -> str:
        """The job's state from its record, in Slurm's words (:func:`state_word`); the record is as the
        executor's supervision cycle last wrote it."""
        cluster = self._future._executor.cluster
        return state_word(cluster.get(self.job_id))

    def submission(self) -> DelayedSubmission:
        """The submitted call: ``function``, ``args``, ``kwargs``."""
        return self._submission

    def done(self, force_check: bool = False) -> bool:
        """Whether the job is over and its result (or error) read. ``force_check`` is accepted and not needed:
        the executor's collector keeps the answer current."""
        del force_check
        return self._future.done()

    def wait(self) -> None:
        concurrent.futures.wait([self._future])

    def results(self) -> list[R]:
        """Every task's value, in rank order, once the job is over; the function's exception when it raised."""
        value = self._future.result()
        return list(value) if self.num_tasks > 1 else [value]

    def result(self) -> R:
        """The value of a one-task job (``results()`` for several tasks, as in submitit)."""
        if self.num_tasks > 1:
            raise RuntimeError(f"job {self.job_id} has {self.num_tasks} tasks: use results()")
        value: R = self._future.result()
        return value

    def exception(self) -> BaseException | None:
        """What ``result()`` would raise, once the job is over; None when it returned."""
        return self._future.exception()

    def cancel(self, check: bool = True) -> None:
        """Stop the job. With ``check``, Unavailable when it could not be stopped (the cluster did not answer)."""
        if not self._future.cancel() and check and not self._future.done():
            raise Unavailable(f"job {self.job_id} could not be stopped (see the message above); it may run on")

    def stdout(self) -> str | None:
        """Rank 0's output so far (``CallFuture.stdout``); None while there is none."""
        return self._future.stdout()

    def stderr(self) -> str | None:
        return self._future.stderr()

    def __repr__(self) -> str:
        try:
            state = self.state
            job_id = self.job_id
        except Exception:
            state, job_id = "UNKNOWN", "?"
        return f'Job<job_id={job_id}, num_tasks={self.num_tasks}, state="{state}">'
