"""The backend conformance suite passes on the local adapter (real processes, the system clock)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dispatch.clock import SystemClock
from dispatch.conformance import Check, Harness, Timings, backend_checks, run_check
from dispatch.local import Limits, LocalBackend
from dispatch.spec import JobSpec

OOM = "x = 'a' * (200 << 20)\nimport time\ntime.sleep(30)\n"


def local_harness(state_dir: Path) -> Harness:
    clock = SystemClock()

    def spec(behaviour: str) -> JobSpec | None:
        argv: dict[str, tuple[str, ...]] = {
            "sleep": ("sleep", "1000000"),
            "succeed": ("sh", "-c", "sleep 0.3"),
            "fail": ("sh", "-c", "sleep 0.3; exit 3"),
            "timeout": ("sleep", "1000"),
            "oom": (sys.executable, "-c", OOM),
            "echo": ("sh", "-c", "echo dispatch-conformance; echo dispatch-conformance-err >&2"),
        }
        if behaviour not in argv:
            return None
        return JobSpec(
            command=argv[behaviour],
            nodes=2,
            time_limit=1.0 if behaviour == "timeout" else None,
            extensions=(Limits(memory_mb=64),) if behaviour == "oom" else (),
        )

    return Harness(
        backend=lambda: LocalBackend(state_dir, clock, grace=1.0),
        clock=clock,
        spec=spec,
        timings=Timings(wait=20.0, quiet=1.0, poll=0.1),
        read_only_backend=lambda: LocalBackend(state_dir, clock, read_only=True),
        name="local",
    )


CANNOT = {
    "preempted_cause": "nothing on this machine preempts a job",
    "node_lost_cause": "the nodes are process groups on this machine; losing one is losing the machine",
    "admin_hold_is_foreign": "there is no administrator's hold on this machine",
}
"""Checks that apply to the local backend but that no harness can drive here: the only ones allowed to skip."""


@pytest.mark.parametrize("check", backend_checks(), ids=str)
def test_local_backend_conformance(check: Check, tmp_path: Path) -> None:
    run_check(check, local_harness(tmp_path / "state"), strict=check.name not in CANNOT)


def test_the_allowed_skips_name_real_checks() -> None:
    assert set(CANNOT) <= {c.name for c in backend_checks()}, set(CANNOT) - {c.name for c in backend_checks()}
