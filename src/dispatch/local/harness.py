"""The local adapter's conformance harness: real processes on this machine, the real clock.

``dispatch conformance --harness dispatch.local.harness:harness`` runs both suites here; the project's tests
use the same harness. Config keys: ``stateDir`` (default: a new temporary directory).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dispatch.clock import SystemClock
from dispatch.conformance.core import CoreHarness
from dispatch.conformance.faults import with_faults
from dispatch.conformance.harness import Harness, Timings
from dispatch.errors import ConfigError
from dispatch.local.backend import LocalBackend
from dispatch.local.limits import Limits
from dispatch.spec import JobSpec

OOM = "x = 'a' * (200 << 20)\nimport time\ntime.sleep(30)\n"


def base_harness(state_dir: str | Path) -> Harness:
    """The backend-suite harness over jobs kept in ``state_dir``."""
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

    def cleanup(backend: Any, sid: str) -> None:
        LocalBackend(state_dir, clock, grace=0.2).stop_job(sid)

    return Harness(
        backend=lambda: LocalBackend(state_dir, clock, grace=1.0),
        clock=clock,
        spec=spec,
        timings=Timings(wait=20.0, quiet=1.0, poll=0.1),
        read_only_backend=lambda: LocalBackend(state_dir, clock, read_only=True),
        cleanup=cleanup,
        name="local",
    )


def core_harness(state_dir: str | Path) -> CoreHarness:
    """The core-suite harness: the base harness, an exit-code spec, and the shipped fault wrapper."""

    def exit_spec(code: int) -> JobSpec:
        return JobSpec(command=("sh", "-c", f"sleep 0.3; exit {code}"))

    return with_faults(CoreHarness(base=base_harness(state_dir), exit_spec=exit_spec))


def harness(config: Mapping[str, Any]) -> CoreHarness:
    """The factory ``dispatch conformance`` calls."""
    unknown = set(config) - {"stateDir"}
    if unknown:
        raise ConfigError(sorted(unknown)[0], "is not a local harness setting (only stateDir)")
    state = config.get("stateDir") or tempfile.mkdtemp(prefix="dispatch-conformance-")
    if not isinstance(state, str):
        raise ConfigError("stateDir", "must be a path")
    return core_harness(state)
