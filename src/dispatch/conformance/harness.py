"""What an adapter gives the conformance suite: a backend factory, the clock, job specs, scheduler hooks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dispatch.clock import Clock
from dispatch.spec import JobSpec
from dispatch.spi import Backend

BEHAVIOURS = ("sleep", "succeed", "fail", "timeout", "oom", "echo")
"""Job behaviours a harness builds specs for:

* ``sleep``: runs far longer than any check waits (until stopped): longer than ``Timings.wait`` plus any
  NodeLossWindow the checks wait out (the bundled harnesses sleep an hour).
* ``succeed``: ends by itself soon with exit code 0 (well within ``Timings.wait``; the bundled ones at once).
* ``fail``: ends by itself soon with exit code 3 (likewise).
* ``timeout``: runs past its time limit (cause timeout); the checks wait ``Timings.wait`` plus the limit, so keep
  the limit short (the bundled harnesses: a few seconds, or the scheduler's smallest).
* ``oom``: exceeds its memory limit (cause out-of-memory).
* ``echo``: prints ``dispatch-conformance`` to stdout and ``dispatch-conformance-err`` to stderr, exits 0.
"""

FAIL_EXIT_CODE = 3
ECHO_STDOUT = "dispatch-conformance"
ECHO_STDERR = "dispatch-conformance-err"


@dataclass(frozen=True)
class Timings:
    """How long checks wait: ``wait`` for something that must happen, ``quiet`` to see that something does
    NOT happen, ``poll`` between observations."""

    wait: float = 60.0
    quiet: float = 5.0
    poll: float = 0.5


DEFAULT_TIMINGS = Timings()
"""Sized for the memory adapter under a fake clock (waits cost nothing there)."""


Hook = Callable[[Backend, str], None]


@dataclass
class Harness:
    """One adapter's connection to the suite.

    ``backend`` builds a writable backend on the cluster under test (called once per check); ``spec`` builds a
    JobSpec for a behaviour (see :data:`BEHAVIOURS`) or returns None when the cluster cannot show it (its
    checks are then skipped with that reason). The hooks make the scheduler do what it does on its own; a hook
    left None skips its checks with a reason. ``read_only_backend`` builds a read-only backend on the same
    cluster. ``cleanup`` is called with every scheduler id a check created.
    """

    backend: Callable[[], Backend]
    clock: Clock
    spec: Callable[[str], JobSpec | None]
    timings: Timings = DEFAULT_TIMINGS
    read_only_backend: Callable[[], Backend] | None = None
    preempt: Hook | None = None
    lose_node: Hook | None = None
    admin_hold: Hook | None = None
    cleanup: Hook | None = None
    name: str = "adapter"
    queue_fill: int = 2
    """How many ``sleep`` jobs fill the cluster so that the next job waits in the queue (the admin-hold core
    check holds a queued job). 0 for a scheduler that can hold a job which could run at once, or one with no
    queue at all."""
