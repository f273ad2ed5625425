"""The core conformance suite (the real operator and supervisor over the Slurm adapter) on one test cluster.

Every check runs strict except the ones named in :data:`CANNOT`: the only skips allowed, each with its reason.
"""

from __future__ import annotations

from dispatch.conformance.core import CoreCheck, core_checks, run_core_check

from .clusters import core_harness

CANNOT = {
    "requeue_rule": (
        "Slurm refuses to requeue an ended --no-requeue job and the supervisor decides on ended executions "
        "only: the check sees the refusal escalated, then skips"
    ),
}
"""Core checks Slurm legitimately cannot pass as written, with why."""


def run(cluster: str, check: CoreCheck) -> None:
    run_core_check(check, core_harness(cluster), strict=check.name not in CANNOT)


def checks() -> list[CoreCheck]:
    return core_checks()
