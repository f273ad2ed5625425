"""Planted bugs, for proving that the simulator catches them. Never set outside tests.

A :class:`~dispatch.supervise.Supervisor` built with ``mutations={...}`` deliberately breaks one of its own
rules, so the mutation tests (``tests/sim/test_mutations.py``, ``python -m dispatch.sim --mutations``) can show
the simulator's invariants find each bug within a bounded number of seeds. The supervisor consults these flags
in exactly the places named below, and nowhere else (``STORE_IGNORES_FENCE`` also makes the simulator's record
store skip its token check); the default is the empty set. :data:`TARGETS` names the invariant each one breaks.
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

    STORE_IGNORES_FENCE = "store-ignores-fence"
    """The record store forgets to compare the fencing token, and the supervisor trusts it (no lease check of
    its own before a write): an overtaken supervisor's write lands on a job another one now owns."""

    SUCCESS_ON_VANISH = "success-on-vanish"
    """Evidence that vanished (or reads unknown) is folded as success, exit 0: a job is recorded succeeded
    that never was."""

    CAUSE_MIXUP = "cause-mixup"
    """A preempted execution is recorded with cause node-lost: the record disagrees with the scheduler."""

    OPEN_BEFORE_RECORD = "open-before-record"
    """The start gate is opened right after the start returns, before the scheduler id is recorded: a crash in
    between leaves a running object the record does not name."""

    RELEASE_OTHERS_HOLDS = "release-others-holds"
    """The supervisor lifts holds other people placed through dispatch (a user's hold, by its instance)."""

    NOT_RUNNING_IS_EVICTED = "not-running-is-evicted"
    """A submission not seen running once its gate is open (waiting in the queue, held, or read ``unknown``) is
    taken to have been evicted, and its eviction rule resubmits the job without the old object being stopped
    or seen to end: when the old one runs again, two executions of the job run at once."""

    STALL_BEFORE_BOUND = "stall-before-bound"
    """An execution is judged stalled after half its ``stalledAfter`` bound of silence: a run that only paused
    (a checkpoint, an evaluation) is ended as hung."""

    RETRY_AS_NEW_SUBMISSION = "retry-as-new-submission"
    """A start that failed (refused, or found not to have landed) is made again as a new submission with a new
    marker instead of the same one: the job gains a submission no decision asked for."""


TARGETS: dict[Mutation, str] = {
    Mutation.ACT_BEFORE_INTENT: "no-object-without-record",
    Mutation.SKIP_FENCE: "fenced-writes",
    Mutation.RESUBMIT_ON_UNKNOWN: "no-object-without-record",
    Mutation.UNKNOWN_IS_AN_ENDING: "unknown-is-not-an-ending",
    Mutation.STORE_IGNORES_FENCE: "fenced-writes",
    Mutation.SUCCESS_ON_VANISH: "no-success-without-evidence",
    Mutation.CAUSE_MIXUP: "record-matches-truth",
    Mutation.OPEN_BEFORE_RECORD: "gate-opened-only-when-recorded",
    Mutation.RELEASE_OTHERS_HOLDS: "hold-lifted-by-owner",
    Mutation.NOT_RUNNING_IS_EVICTED: "one-live-execution",
    Mutation.RETRY_AS_NEW_SUBMISSION: "no-action-twice",
    Mutation.STALL_BEFORE_BOUND: "stall-not-before-bound",
}
"""The invariant each planted bug breaks (the one the mutation check expects to catch it)."""

BY_CONSTRUCTION: dict[str, str] = {
    "ended-has-cause": (
        "an Outcome in an ended state cannot be built without a cause (Outcome raises ValueError), and records "
        "are rebuilt through Outcome on every read, so no supervisor bug can write a record that breaks it"
    ),
}
"""Invariants no planted bug can break, and why: the types hold them, so the simulator's check of them is a
guard against a change to those types, not a test of the supervisor."""
