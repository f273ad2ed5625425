"""Planted bugs, for proving that the simulator catches them. Never set outside tests.

A :class:`~dispatch.supervise.Supervisor` built with ``mutations={...}`` deliberately breaks one of its own
rules, so the mutation tests (``tests/sim/test_mutations.py``) can show the simulator's invariants find each bug
within a bounded number of seeds. The supervisor consults these flags in exactly the places named below, and
nowhere else; the default is the empty set.
"""

from __future__ import annotations

from enum import StrEnum


class Mutation(StrEnum):
    ACT_BEFORE_INTENT = "act-before-intent"
    """Make the backend call first and write the intent (with its answer) afterwards: a crash in between leaves
    a scheduler object the record knows nothing about."""

    SKIP_FENCE = "skip-fence"
    """Skip the fence: write without the fencing token and without checking the lease before a write. A
    supervisor overtaken in the middle of a cycle re-reads after its lost compare-and-set and keeps writing a
    job another supervisor now owns."""

    RESUBMIT_ON_UNKNOWN = "resubmit-on-unknown"
    """Take an unknown outcome (OutcomeUnknown from a start or requeue) as a failure and act again at once,
    instead of waiting out the CallBound and observing: the call may have landed, so it lands twice."""

    UNKNOWN_IS_AN_ENDING = "unknown-is-an-ending"
    """Take the first ``unknown`` observation of a live job as its ending (no wait for the backend's bound): a
    job whose queue entry vanished for a moment is escalated and closed while it still runs."""
