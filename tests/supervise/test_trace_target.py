"""``dispatch supervise --trace-calls``: each scheduler action is traced with what it acts on (a start's job id,
the scheduler id of the others), so a history of the calls can be checked against the records' lease history."""

from __future__ import annotations

import contextlib
from typing import Any

from dispatch.clock import FakeClock
from dispatch.errors import DispatchError
from dispatch.memory import MemoryScheduler, backend
from dispatch.spec import JobSpec
from dispatch.spi import StartRequest
from dispatch.supervise.service import traced


def test_an_action_is_traced_with_its_target_and_a_read_without_one() -> None:
    seen: list[tuple[str, Any]] = []
    b = traced(backend(MemoryScheduler(FakeClock(), "slurm")), lambda call, target: seen.append((call, target)))
    sid = b.start(StartRequest("job-1", 1, "dsp-job-1-1", JobSpec(command=("true",)), ()))
    with contextlib.suppress(DispatchError):
        b.open(str(sid))
    b.inspect_many([str(sid)])
    assert seen == [("start", "job-1"), ("open", str(sid)), ("inspect_many", None)]
