"""Where ``dispatch logs`` reads an execution's output: the cluster, or the supervisor's archive in the records.

An execution is named by its restart number within a submission (``--execution 1``, in the current submission
or ``--submission N``) or by its identity as ``dispatch show`` lists it. The current execution of a submission
is read from the cluster (live, followable); an earlier one from the cluster when the scheduler keeps output
files (local, Slurm), else from the archive (:mod:`dispatch.records.archive`). When the cluster no longer has
the output (Kubernetes: the pods are gone) the archive answers; when neither has it, the error names the
execution and says what the archive holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from dispatch.errors import NotFound, SpecError
from dispatch.records.archive import ArchivedOutput, ArchiveStatus
from dispatch.records.model import ExecutionRecord, JobRecord, Submission


@dataclass(frozen=True)
class Target:
    """The execution ``dispatch logs`` shows: its submission, its record (None: the submission has none yet, or
    a restart number the record does not list), the restart number for the backend (None: the current one),
    and whether it is the submission's latest execution (then the cluster is asked first)."""

    submission: Submission
    execution: ExecutionRecord | None
    restart: int | None
    latest: bool

    def name(self, job_id: str) -> str:
        if self.execution is not None:
            return f"execution {self.execution.identity} of job {job_id}"
        if self.restart is not None:
            return f"execution {self.restart} of submission {self.submission.n} of job {job_id}"
        return f"the current execution of job {job_id}"


def target(record: JobRecord, submission: int | None, execution: str | None) -> Target:
    """Resolve ``--submission`` and ``--execution`` against the record. SpecError for a restart number that
    names several executions (a Kubeflow readmission starts again at restart 0) or text that is neither a
    number nor an identity; NotFound for a submission the job does not have."""
    from dispatch.identity import RestartId

    if submission is not None:
        try:
            sub = record.submission(submission)
        except KeyError:
            raise NotFound(f"job {record.id} has no submission {submission}") from None
    else:
        sub_or_none = record.current
        if sub_or_none is None:
            raise NotFound(f"job {record.id} has not been created on its cluster yet")
        sub = sub_or_none
    if execution is None:
        last = sub.executions[-1] if sub.executions else None
        return Target(sub, last, None, True)
    if execution.isdigit():
        restart = int(execution)
        matches = [e for e in sub.executions if e.restart == restart]
        if len(matches) > 1:
            names = ", ".join(e.identity for e in matches)
            raise SpecError(
                "--execution", f"restart {restart} names several executions of submission {sub.n} ({names}): give one"
            )
        found = matches[0] if matches else None
        return Target(sub, found, restart, found is not None and found is sub.executions[-1])
    for s in record.submissions:
        for e in s.executions:
            if e.identity == execution:
                if submission is not None and s.n != submission:
                    raise SpecError("--execution", f"{execution} is an execution of submission {s.n}, not {submission}")
                return Target(s, e, e.restart, e is s.executions[-1])
    try:
        restart = RestartId.parse(execution).restart
    except ValueError:
        raise SpecError(
            "--execution", f"{execution!r} is neither a restart number nor an execution identity of job {record.id}"
        ) from None
    return Target(sub, None, restart, False)


def archived(records: Any, job_id: str, t: Target) -> ArchivedOutput | None:
    """The archive's entry for the target execution (None without one, or with a store that has no archive)."""
    get = getattr(records, "get_output", None)
    if t.execution is None or not callable(get):
        return None
    entry: ArchivedOutput | None = get(job_id, t.execution.identity)
    return entry


def from_archive(entry: ArchivedOutput | None, what: str, stderr: bool, ranks: tuple[int, ...]) -> ArchivedOutput:
    """``entry`` when it holds output the command can show; otherwise NotFound naming the execution and what
    the archive holds for it."""
    if entry is None:
        raise NotFound(f"{what}: no output of it is kept (the cluster has none any more and no supervisor archived it)")
    if entry.status is not ArchiveStatus.KEPT:
        raise NotFound(f"{what}: no output of it is kept (the archive says {entry.status.value}: {entry.reason})")
    if stderr or any(r != entry.rank for r in ranks):
        raise NotFound(f"{what}: the archive holds rank {entry.rank}'s {entry.stream} only")
    return entry


def primed(chunks: Iterable[Any]) -> Iterator[Any]:
    """``chunks`` with its first item already read, so an error of a lazy reader surfaces here."""
    it = iter(chunks)
    try:
        first = next(it)
    except StopIteration:
        return iter(())

    def rest() -> Iterator[Any]:
        yield first
        yield from it

    return rest()
