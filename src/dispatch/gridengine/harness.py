"""The gridengine adapter's conformance harness for a real cell.

``dispatch conformance --harness dispatch.gridengine.harness:harness --harness-config cell.json`` runs both
suites; the project's tests use it on the one-host cell of ``scripts/gridengine-up.sh``. Config keys:
``sgeRoot``, ``sgeCell``, ``queue``, ``stateDir``, ``outputDir`` (the adapter's settings). Hooks: an operator
hold (``qhold -h o``) as the administrator's hold, lifted with ``qrls -h o``; cleanup with ``qdel``. No preempt
or lose_node hook: Grid Engine preempts by suspending (the job does not end), and a one-host cell cannot lose
its host without losing its scheduler.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from typing import Any

from dispatch.clock import SYSTEM_CLOCK
from dispatch.conformance.core import CoreHarness
from dispatch.conformance.faults import with_faults
from dispatch.conformance.harness import Harness, Timings
from dispatch.gridengine.backend import GridEngineBackend
from dispatch.gridengine.settings import GridEngineSettings
from dispatch.settings import decode
from dispatch.spec import JobSpec
from dispatch.spi import Backend


def _admin(settings: GridEngineSettings, *argv: str) -> None:
    env = dict(os.environ, SGE_ROOT=settings.sge_root, SGE_CELL=settings.sge_cell)
    subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=60, check=False)


def harness(config: Mapping[str, Any]) -> CoreHarness:
    settings = decode(GridEngineSettings, dict(config))
    clock = SYSTEM_CLOCK

    def spec(behaviour: str) -> JobSpec | None:
        argv: dict[str, tuple[str, ...]] = {
            "sleep": ("sleep", "600"),
            "succeed": ("true",),
            "fail": ("bash", "-c", "exit 3"),
            "timeout": ("sleep", "600"),
        }
        if behaviour not in argv:
            return None
        return JobSpec(argv[behaviour], time_limit=5.0 if behaviour == "timeout" else None)

    def cleanup(backend: Backend, sid: str) -> None:
        _admin(settings, "qdel", sid)

    base = Harness(
        backend=lambda: GridEngineBackend(settings, clock),
        clock=clock,
        spec=spec,
        timings=Timings(wait=90.0, quiet=5.0, poll=1.0),
        read_only_backend=lambda: GridEngineBackend(settings, clock, read_only=True),
        admin_hold=lambda b, sid: _admin(settings, "qhold", "-h", "o", sid),
        cleanup=cleanup,
        name="gridengine",
    )

    def exit_spec(code: int) -> JobSpec:
        return JobSpec(("bash", "-c", f"sleep 1; exit {code}"))

    return with_faults(
        CoreHarness(base=base, exit_spec=exit_spec, admin_release=lambda sid: _admin(settings, "qrls", "-h", "o", sid))
    )
