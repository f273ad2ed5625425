"""Capabilities: what one cluster can do, each answered yes / no / unknown with a Reason and a provenance.

Answers are per cluster, not per adapter: the same adapter may answer differently on two clusters, and an
open mode lowers answers (a read-only open cannot probe, so probed answers become ``unknown`` unless a cached
probe result exists). Code that needs a capability asks :meth:`Capabilities.require`, which raises
:class:`~dispatch.errors.Unsupported` with the Reason when the answer is not ``yes``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from dispatch.errors import Unsupported


class Capability(StrEnum):
    """The capabilities a cluster is asked about."""

    CONTAINER_IMAGE = "ContainerImage"
    """Runs the job in a container image (the ``dispatch.Image`` extension)."""
    NATIVE_REQUEUE = "NativeRequeue"
    """The scheduler itself puts a failed job back in its queue (a policy it enforces without dispatch)."""
    NATIVE_RESTART = "NativeRestart"
    """The scheduler itself restarts a failed job in place."""
    HOLD = "Hold"
    """Holds can be placed and lifted by instance."""
    PRE_TERMINATION_SIGNAL = "PreTerminationSignal"
    """A stopped job first gets a catchable signal and a grace period before it is killed. The answer's Reason
    names the signal and the grace (SIGTERM on Slurm and local; Grid Engine's ``-notify`` sends SIGUSR2)."""
    ACCOUNTING_HISTORY = "AccountingHistory"
    """A job's history survives after it leaves the live queue."""
    ATTEMPT_INJECTION = "AttemptInjection"
    """The running job is told its execution identity (``DISPATCH_EXECUTION``)."""
    WORKING_DIRECTORY = "WorkingDirectory"
    """The job's working directory can be chosen."""
    PROCS_PER_NODE = "ProcsPerNode"
    """The number of processes per node can be chosen."""
    OUTPUT_PATH = "OutputPath"
    """Where output files go can be chosen (the ``dispatch.Output`` extension)."""
    OUTPUT_READ = "OutputRead"
    """The job's output can be read back."""
    OUTPUT_FOLLOW = "OutputFollow"
    """The job's output can be followed while it runs."""
    OUTPUT_RETAINED = "OutputRetained"
    """Output survives the job's end."""
    READMISSION_GATE = "ReadmissionGate"
    """After an eviction the job is not started again until dispatch allows it (it can count attempts)."""
    NODE_EXCLUSION = "NodeExclusion"
    """A submission can be kept off named nodes (a resubmission avoids the nodes its ending blamed, and the
    cluster's suspect nodes)."""
    ACCELERATORS = "Accelerators"
    """The cluster has GPUs a job can ask for (``JobSpec.resources``); the Reason names which, per node and pool
    (the inventory itself: :class:`dispatch.spi.AcceleratorInventory`)."""
    SHARED_STORAGE = "SharedStorage"
    """A directory this process and the job's ranks both read and write (``dispatch.Executor`` passes a
    function and its result through it)."""
    PROGRESS_REPORTING = "ProgressReporting"
    """What a rank reports with :func:`dispatch.job.progress` reaches the supervisor with the job's state (so
    ``dispatch status`` shows it and a rule with ``stalledAfter`` can judge a hang)."""
    BATCH_THROTTLE = "BatchThrottle"
    """A batch (:meth:`~dispatch.cluster.Operator.submit_many`) can be capped at ``max_running`` of its jobs
    running at once, the scheduler keeping the others queued until one ends (Slurm: the job array's ``%K``)."""


class Answer(StrEnum):
    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"


class Provenance(StrEnum):
    DECLARED = "declared"
    """The adapter states it from what it is."""
    PROBED = "probed"
    """Preflight tried it on this cluster just now."""
    CACHED = "cached"
    """A probe's result, read from the preflight cache."""


@dataclass(frozen=True)
class CapabilityAnswer:
    """One answer: ``answer``, the ``reason`` for it (always non-empty), and how it was learnt."""

    answer: Answer
    reason: str
    provenance: Provenance = Provenance.DECLARED

    def __post_init__(self) -> None:
        if not self.reason:
            raise ValueError("every capability answer needs a reason")

    @property
    def yes(self) -> bool:
        return self.answer is Answer.YES

    def to_json(self) -> dict[str, str]:
        return {"answer": self.answer.value, "reason": self.reason, "provenance": self.provenance.value}


def yes(reason: str, provenance: Provenance = Provenance.DECLARED) -> CapabilityAnswer:
    return CapabilityAnswer(Answer.YES, reason, provenance)


def no(reason: str, provenance: Provenance = Provenance.DECLARED) -> CapabilityAnswer:
    return CapabilityAnswer(Answer.NO, reason, provenance)


def unknown(reason: str, provenance: Provenance = Provenance.DECLARED) -> CapabilityAnswer:
    return CapabilityAnswer(Answer.UNKNOWN, reason, provenance)


class Capabilities(Mapping[Capability, CapabilityAnswer]):
    """An answer for every capability (a missing one is an error at construction)."""

    def __init__(self, answers: Mapping[Capability, CapabilityAnswer]) -> None:
        missing = [c.value for c in Capability if c not in answers]
        if missing:
            raise ValueError(f"capabilities without an answer: {', '.join(missing)}")
        self._answers = {c: answers[c] for c in Capability}

    def __getitem__(self, key: Capability) -> CapabilityAnswer:
        return self._answers[key]

    def __iter__(self) -> Iterator[Capability]:
        return iter(self._answers)

    def __len__(self) -> int:
        return len(self._answers)

    def __repr__(self) -> str:
        inner = ", ".join(f"{c.value}={a.answer.value}" for c, a in self._answers.items())
        return f"Capabilities({inner})"

    def answer(self, cap: Capability) -> Answer:
        return self._answers[cap].answer

    def require(self, cap: Capability, what: str) -> None:
        """Raise :class:`Unsupported` naming ``what`` unless ``cap`` is ``yes``."""
        a = self._answers[cap]
        if not a.yes:
            raise Unsupported(f"{what} needs {cap.value}, which is {a.answer.value} here: {a.reason}")

    def with_answer(self, cap: Capability, answer: CapabilityAnswer) -> Capabilities:
        """A copy with one answer replaced (an open mode lowering it, a probe raising it)."""
        return Capabilities({**self._answers, cap: answer})

    def lowered_for_read_only(self) -> Capabilities:
        """Probed answers become ``unknown``: a read-only open cannot probe. Cached and declared stay."""
        out = dict(self._answers)
        for cap, a in self._answers.items():
            if a.provenance is Provenance.PROBED:
                out[cap] = replace(a, answer=Answer.UNKNOWN, reason=f"read-only open, not probed ({a.reason})")
        return Capabilities(out)

    def to_json(self) -> dict[str, dict[str, str]]:
        return {c.value: a.to_json() for c, a in self._answers.items()}
