"""The core conformance suite (the real operator and supervisor over the Slurm adapter) on one test cluster.

Every check runs strict except the ones named in :data:`CANNOT`: the only skips allowed, each with its reason.
Checks that cannot apply to Slurm (it offers no Readmitter; it declares that it cannot requeue an ended
``--no-requeue`` job, so ``requeue`` rules are refused at load) report themselves not applicable, strict or not.

On 22.05 (the ``local`` cluster, whose test group is already the longest) the suite runs without
:data:`LONG_CHECKS`, three checks that wait out a real time limit or the CallBound (about 90 s each) and whose
Slurm side the backend suite proves on 22.05 too: the timeout mapping (``timeout_cause``), holds by instance
(``hold_by_instance``) and find by marker (``find_by_marker``, ``find_many``); what they add on top is the
supervisor's, the same on every release, and they run in full on 24.11 and 26.05.
"""

from __future__ import annotations

from dispatch.conformance.core import CoreCheck, core_checks, run_core_check

from .clusters import core_harness

CANNOT: dict[str, str] = {}
"""Core checks the Slurm harness cannot drive, with why: none."""

LONG_CHECKS = ("timeout_cause", "hold_rule_belongs_to_the_supervisor", "unknown_start_is_resolved_by_marker")
"""Left out on 22.05 only (see the module docstring)."""


def checks(cluster: str) -> list[CoreCheck]:
    """The core checks run on ``cluster``: all of them, except :data:`LONG_CHECKS` on ``local`` (22.05)."""
    return [c for c in core_checks() if cluster != "local" or c.name not in LONG_CHECKS]


def run(cluster: str, check: CoreCheck) -> None:
    run_core_check(check, core_harness(cluster), strict=check.name not in CANNOT)
