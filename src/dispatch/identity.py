"""Execution identities and their text forms.

A submission (the N-th scheduler object of a dispatch job) can run more than once in place (requeue, JobSet
restart, readmission): each run is an *execution*. Its identity is injected into the job's environment as
``DISPATCH_EXECUTION`` so training code can tell executions apart. Two shapes exist:

* :class:`RestartId`, ``<N>.<scheduler id>.<R>`` where R counts restarts of the same scheduler job (Slurm).
* :class:`AttemptId`, ``<job id>.<N>.<attempt>.<A>.<J>`` where attempt counts admissions made by dispatch,
  A the whole-object restarts and J the per-part restarts; the restart number R is A + J (Kubeflow).

Both parse their own text (``parse``) and print it (``str``); parse errors are ``ValueError`` naming the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_RESTART_RE = re.compile(r"(\d+)\.([A-Za-z0-9_\-]+)\.(\d+)")
_ATTEMPT_RE = re.compile(r"([A-Za-z0-9_\-]+)\.(\d+)\.(\d+)\.(\d+)\.(\d+)")
_PART_RE = re.compile(r"[A-Za-z0-9_\-]+")


@dataclass(frozen=True, order=True)
class RestartId:
    """``<N>.<scheduler id>.<R>``: submission N, the scheduler's job id, restart count R."""

    submission: int
    scheduler_id: str
    restart: int

    def __post_init__(self) -> None:
        if self.submission < 1 or self.restart < 0:
            raise ValueError(f"bad execution identity parts: {self.submission}, {self.restart}")
        if not _PART_RE.fullmatch(self.scheduler_id):
            raise ValueError(f"bad scheduler id {self.scheduler_id!r} in an execution identity")

    def __str__(self) -> str:
        return f"{self.submission}.{self.scheduler_id}.{self.restart}"

    @classmethod
    def parse(cls, text: str) -> RestartId:
        m = _RESTART_RE.fullmatch(text)
        if not m:
            raise ValueError(f"{text!r} is not an execution identity of the form <N>.<job id>.<restart>")
        return cls(int(m.group(1)), m.group(2), int(m.group(3)))


@dataclass(frozen=True, order=True)
class AttemptId:
    """``<job id>.<N>.<attempt>.<A>.<J>``; :attr:`restart` is A + J."""

    job_id: str
    submission: int
    attempt: int
    object_restarts: int
    part_restarts: int

    def __post_init__(self) -> None:
        if self.submission < 1 or min(self.attempt, self.object_restarts, self.part_restarts) < 0:
            raise ValueError("bad execution identity parts")
        if not _PART_RE.fullmatch(self.job_id):
            raise ValueError(f"bad job id {self.job_id!r} in an execution identity")

    @property
    def restart(self) -> int:
        return self.object_restarts + self.part_restarts

    def __str__(self) -> str:
        return f"{self.job_id}.{self.submission}.{self.attempt}.{self.object_restarts}.{self.part_restarts}"

    @classmethod
    def parse(cls, text: str) -> AttemptId:
        m = _ATTEMPT_RE.fullmatch(text)
        if not m:
            raise ValueError(f"{text!r} is not an execution identity of the form <job>.<N>.<attempt>.<A>.<J>")
        return cls(m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5)))
