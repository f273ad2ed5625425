"""The adapter kit: contract logic every scheduler adapter needs, written once.

An adapter maps one scheduler onto :mod:`dispatch.spi`, the adapter SPI, and imports from there what it
implements, returns, declares and registers with (``Backend`` and its optional interfaces, ``JobEvidence``,
``Declarations``, ``OpenOptions``, ``register``; ``dispatch`` itself exports what a user calls, and the vocabulary
an adapter shares with users: ``JobSpec``, ``Outcome``, the errors). Most of that mapping is the scheduler's own (its
commands, its states, its causes); some of it is the same for every scheduler, and lives here:

* :mod:`~dispatch.adapterkit.identity`: the submission number a marker carries, and ``N.<id>.R`` execution
  identities.
* :mod:`~dispatch.adapterkit.guards`: the pre-checks of ``open``, ``hold`` and ``release`` (a foreign hold is
  never lifted, another instance's hold is Rejected, only a waiting object is held, releasing nothing is a
  no-op).
* :mod:`~dispatch.adapterkit.holds`: hold instances encoded as 32-bit numbers (for schedulers that can store a
  number, not a name), and an :class:`~dispatch.adapterkit.holds.InstanceBook` that remembers, across processes,
  which instance a number stood for.
* :mod:`~dispatch.adapterkit.shared`: a small JSON object in a file, shared by every process of an adapter
  (read without a lock, updated under one, replaced whole).
* :mod:`~dispatch.adapterkit.rankends` and :mod:`~dispatch.adapterkit.outcomes`: ranks' ends combined into one
  outcome (the first failure in time wins; success only when every rank exits 0), a program's end as an
  outcome, and one cause for a waiting object (stopped > admin-held > held > gated > queued).
* :mod:`~dispatch.adapterkit.fanout`: one call to several hosts settled into one answer (every host reached
  none: Unavailable; done on some: OutcomeUnknown), and one batched failure spread over its items.
* :mod:`~dispatch.adapterkit.commands`: a command runner whose timeouts and transport failures map to
  Unavailable for reads and OutcomeUnknown for writes.
* :mod:`~dispatch.adapterkit.jobscript`: a job script that exports ``DISPATCH_EXECUTION`` and the other
  ``DISPATCH_*`` variables, runs the launch checks (working directory, program), then execs the user's argv
  quoted word by word.
"""

from __future__ import annotations

from dispatch.adapterkit.commands import CommandResult, CommandRunner
from dispatch.adapterkit.fanout import call_each, settle, spread
from dispatch.adapterkit.guards import check_hold, check_open, check_release
from dispatch.adapterkit.holds import HOLD_SPAN, InstanceBook, decode_instance, encode_instance, matches
from dispatch.adapterkit.identity import execution_identity, submission_of
from dispatch.adapterkit.jobscript import LAUNCH_FAILED_EXIT, launch_checks, render_job_script
from dispatch.adapterkit.outcomes import end_outcome, ranks_outcome, waiting_outcome
from dispatch.adapterkit.rankends import RankEnd, RanksEnd, combine
from dispatch.adapterkit.shared import SharedState

__all__ = [
    "HOLD_SPAN",
    "LAUNCH_FAILED_EXIT",
    "CommandResult",
    "CommandRunner",
    "InstanceBook",
    "RankEnd",
    "RanksEnd",
    "SharedState",
    "call_each",
    "check_hold",
    "check_open",
    "check_release",
    "combine",
    "decode_instance",
    "encode_instance",
    "end_outcome",
    "execution_identity",
    "launch_checks",
    "matches",
    "ranks_outcome",
    "render_job_script",
    "settle",
    "spread",
    "submission_of",
    "waiting_outcome",
]
