"""Job arrays in the simulator: its ``submit_many`` reaches the memory scheduler's batched path (start_many,
open_many, batch writes of the records), admins act on one task alone, and ``array-task-alone`` holds."""

from __future__ import annotations

from collections import Counter

from dispatch.clock import FakeClock
from dispatch.memory import MemoryScheduler, backend
from dispatch.records.memory import MemoryRecords
from dispatch.sim import Config, check, run
from dispatch.sim.conductor import Conductor, ParkedBatchRecords, ParkedRecords, parked_records
from dispatch.sim.world import World
from dispatch.spec import JobSpec
from dispatch.spi import StartRequest

SEEDS = range(0, 24, 2)
"""A handful of Slurm-shape seeds (the shape with arrays)."""


def test_the_batched_path_and_the_per_task_actions_occur() -> None:
    calls: Counter[str] = Counter()
    notes: Counter[str] = Counter()
    with_arrays = 0
    for seed in SEEDS:
        world = World(Config(seed=seed, shape="slurm"))
        result = world.run()
        assert result.violations == [] and result.settled, (seed, result.violations[:3], result.unsettled[:3])
        assert isinstance(world.records, ParkedBatchRecords)
        calls.update(c.method for c in world.sched.calls if c.method in ("start_many", "open_many"))
        with_arrays += any(len(sids) > 1 for sids in world.sched.arrays.values())
        notes.update(k for k in result.counts if k.startswith("admin-task-"))
        faults = [line.split(" fault ", 1)[1].split()[0] for line in result.trace if " fault " in line]
        notes.update(f for f in faults if f in ("start_many", "open_many"))
    assert calls["start_many"] > 0 and calls["open_many"] > 0, calls
    assert with_arrays >= len(SEEDS) // 2, "an array of several tasks in most seeds"
    for action in ("admin-task-requeue", "admin-task-hold", "admin-task-cancel", "start_many", "open_many"):
        assert notes[action] > 0, (action, notes)


def test_a_seed_with_arrays_replays_identically() -> None:
    a = World(Config(seed=6, shape="slurm"))
    first = a.run()
    second = run(Config(seed=6, shape="slurm"))
    assert a.sched.arrays and first.trace == second.trace


def test_the_records_offer_batch_writes_only_when_the_store_does() -> None:
    conductor = Conductor(lambda: 0.0)
    assert isinstance(parked_records(MemoryRecords(), conductor, lambda: 0.0), ParkedBatchRecords)

    class OneByOne:
        def create(self) -> None: ...

    plain = parked_records(OneByOne(), conductor, lambda: 0.0)
    assert type(plain) is ParkedRecords and not hasattr(plain, "create_many")


def test_the_check_catches_a_task_acted_on_through_a_sibling() -> None:
    sched = MemoryScheduler(FakeClock(), "slurm")
    b = backend(sched)
    spec = JobSpec(command=("sleep", "100"))
    sids = b.start_many([StartRequest(f"j{i}", 1, f"dsp-j{i}-1", spec) for i in range(3)])  # type: ignore[attr-defined]
    b.stop_job(sids[0])
    b.hold(sids[1], "u1")
    assert [v for v in check({}, sched, b) if v.startswith("array-task-alone")] == []
    sched.stop(sids[2])  # as scancel <array> would: no call named it
    sched.hold(sids[1], "u2")
    found = [v for v in check({}, sched, b) if v.startswith("array-task-alone")]
    assert found == [
        f"array-task-alone: object {sids[1]} is held by u2, but no hold of it named it",
        f"array-task-alone: object {sids[2]} was stopped, but no stop named it",
    ]
