"""A conformance harness for the memory adapter (and a model for other adapters' harnesses)."""

from __future__ import annotations

from dispatch.clock import FakeClock
from dispatch.conformance.core import CoreHarness
from dispatch.conformance.harness import Harness, Timings
from dispatch.extensions import Image
from dispatch.memory import MemoryScheduler, Shape, backend
from dispatch.spec import JobSpec
from dispatch.spi import Backend


def memory_core_harness(shape: Shape | str, *, nodes: int = 4) -> CoreHarness:
    """A core harness (operator and supervisor checks) over a fresh memory scheduler of ``shape``."""
    base = memory_harness(shape, nodes=nodes)
    sched: MemoryScheduler = base.backend().scheduler  # type: ignore[attr-defined]
    extensions = (Image("registry.example/train:1"),) if sched.shape is Shape.KUBEFLOW else ()

    def exit_spec(code: int) -> JobSpec:
        return JobSpec(command=("sleep", "5", "exit", str(code)), nodes=2, extensions=extensions)

    return CoreHarness(
        base=base,
        inject=lambda method, kind, landed: sched.control.inject(method, kind, landed=landed),
        admin_release=sched.control.admin_release,
        exit_spec=exit_spec,
    )


def memory_harness(shape: Shape | str, *, accounting: bool = True, nodes: int = 4) -> Harness:
    """A harness over a fresh memory scheduler of ``shape`` with ``nodes`` nodes, driven by a fake clock. Every
    job takes two nodes, so ``nodes // 2`` sleeping jobs fill it (``queue_fill``)."""
    clock = FakeClock()
    sched = MemoryScheduler(clock, shape, nodes=nodes, accounting=accounting, min_job_age=300, node_loss_window=120)
    extensions = (Image("registry.example/train:1"),) if sched.shape is Shape.KUBEFLOW else ()

    def spec(behaviour: str) -> JobSpec | None:
        argv: dict[str, tuple[str, ...]] = {
            "sleep": ("sleep", "1000000"),
            "succeed": ("sleep", "5"),
            "fail": ("sleep", "5", "exit", "3"),
            "timeout": ("sleep", "1000"),
            "oom": ("oom", "5"),
        }
        if behaviour not in argv:
            return None
        limit = 10.0 if behaviour == "timeout" else None
        return JobSpec(command=argv[behaviour], nodes=2, time_limit=limit, extensions=extensions)

    def lose_node(b: Backend, sid: str) -> None:
        sched.control.lose_node(sched.jobs[sid].current.nodes[0])

    return Harness(
        backend=lambda: backend(sched),
        clock=clock,
        spec=spec,
        timings=Timings(wait=900.0, quiet=30.0, poll=1.0),
        read_only_backend=lambda: backend(sched, read_only=True),
        preempt=lambda b, sid: sched.control.preempt(sid),
        lose_node=lose_node,
        admin_hold=lambda b, sid: sched.control.admin_hold(sid),
        name=f"memory-{sched.shape.value}",
        queue_fill=nodes // 2,
    )
