"""The core checks hold every backend to the contract, not to one scheduler's way of meeting it: shown on the
memory adapter made to behave as real Slurm does (a lost node reported at once, an ended job's requeue
refused and declared so), and made to break the contract (a node-lost recorded before the scheduler says so)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import pytest

from dispatch.capabilities import CapabilityAnswer, no
from dispatch.conformance.checks import ConformanceError, NotApplicable
from dispatch.conformance.core import CORE_CHECKS, CoreCheck, CoreHarness
from dispatch.conformance.memory import memory_core_harness
from dispatch.errors import Rejected
from dispatch.memory import MemoryScheduler
from dispatch.memory.backend import SlurmShapedBackend
from dispatch.outcome import Cause, Outcome, State
from dispatch.spi import Backend, JobEvidence, Unanswered


def check(name: str) -> CoreCheck:
    return next(c for c in CORE_CHECKS if c.name == name)


def scheduler_of(h: CoreHarness) -> MemoryScheduler:
    return h.base.backend().scheduler  # type: ignore[attr-defined,no-any-return]


class RefusesEndedRequeue(SlurmShapedBackend):
    """As Slurm with ``--no-requeue`` jobs: a running job can be requeued, an ended one cannot, and the backend
    says so (``requeue_after_end``)."""

    def requeue(self, scheduler_id: str) -> None:
        if self.scheduler.jobs[scheduler_id].ended:
            raise Rejected(f"job {scheduler_id}: Job has already finished")
        super().requeue(scheduler_id)

    def requeue_after_end(self) -> CapabilityAnswer:
        return no("an ended --no-requeue job cannot be requeued")


class HidesRefusedRequeue(RefusesEndedRequeue):
    """The same scheduler, but the backend does not declare it: the rule is accepted and fails at run time."""

    requeue_after_end = None  # type: ignore[assignment]


class ConcludesEarly(SlurmShapedBackend):
    """A broken reading: the batched read calls a job on a lost node node-lost at once, while the scheduler
    (and ``inspect``) still reads it running."""

    def inspect_many(self, scheduler_ids: Sequence[str]) -> Mapping[str, JobEvidence | Unanswered]:
        out = dict(super().inspect_many(scheduler_ids))
        s = self.scheduler
        for sid, ev in out.items():
            job = s.jobs[sid]
            if isinstance(ev, JobEvidence) and job.current.live and set(job.current.nodes) & set(s.lost_nodes):
                lost = Outcome(State.FAILED, Cause.NODE_LOST, ev.outcome.evidence)
                last = replace(ev.executions[-1], outcome=lost, ended_at=ev.outcome.evidence.observed_at)
                out[sid] = replace(ev, outcome=lost, executions=(*ev.executions[:-1], last))
        return out


def with_backend(h: CoreHarness, cls: type[SlurmShapedBackend]) -> CoreHarness:
    sched = scheduler_of(h)

    def backend() -> Backend:
        return cls(sched)

    return replace(h, base=replace(h.base, backend=backend))


def test_a_declared_refusal_refuses_the_rule_at_load_and_skips_by_name() -> None:
    h = with_backend(memory_core_harness("slurm"), RefusesEndedRequeue)
    with pytest.raises(
        NotApplicable, match="refused at load on this cluster: an ended --no-requeue job cannot be requeued"
    ):
        check("requeue_rule").fn(h)


def test_a_declared_refusal_is_not_applicable_even_in_a_strict_run() -> None:
    """The backend lacks what the check is about: not applicable, in pytest as in ``dispatch conformance``."""
    from dispatch.conformance.core import run_core_check
    from dispatch.conformance.runner import Result, run_suites

    h = with_backend(memory_core_harness("slurm"), RefusesEndedRequeue)
    with pytest.raises(pytest.skip.Exception, match="requeue_rule: not applicable: requeue rules are refused"):
        run_core_check(check("requeue_rule"), h, strict=True)
    [result] = run_suites(h, ["core"], ["requeue_rule"], strict=True)
    assert result.result is Result.NOT_APPLICABLE
    assert "an ended --no-requeue job cannot be requeued" in result.detail


def test_an_undeclared_refusal_fails_the_check() -> None:
    h = with_backend(memory_core_harness("slurm"), HidesRefusedRequeue)
    with pytest.raises(ConformanceError, match="must say so through requeue_after_end"):
        check("requeue_rule").fn(h)


def test_a_requeuing_backend_must_show_the_second_execution() -> None:
    check("requeue_rule").fn(memory_core_harness("slurm"))  # no skip: the memory scheduler requeues ended jobs


def test_a_node_loss_the_scheduler_reports_at_once_passes() -> None:
    """As Slurm does for a node an administrator sets DOWN: NODE_FAIL at once, well inside the window."""
    h = memory_core_harness("slurm")
    sched = scheduler_of(h)

    def down(b: Backend, sid: str) -> None:
        node = sched.jobs[sid].current.nodes[0]
        sched.control.cease([node], "set down")  # ends its jobs now, NODE_FAIL
        sched.control.end_cessation([node])  # ... and no cessation is announced for them

    check("node_loss_is_not_concluded_early").fn(replace(h, base=replace(h.base, lose_node=down)))


def test_node_lost_recorded_before_the_scheduler_says_so_fails() -> None:
    h = with_backend(memory_core_harness("slurm"), ConcludesEarly)
    with pytest.raises(ConformanceError, match="node-lost was recorded while the scheduler reads running"):
        check("node_loss_is_not_concluded_early").fn(h)
