"""How the supervisor service runs Python's cyclic garbage collector.

A supervisor holds one decoded record per supervised job (its cache) and builds a few short-lived objects per
job each cycle (the evidence read, the fold's checks). With the collector's defaults the long-lived records
are traversed again and again by full collections (triggered when the objects promoted since the last full
one reach a quarter of the long-lived ones, which the per-cycle evidence does every few cycles), and the
young collections that the per-job allocations trigger scan a heap far larger than the CPU's caches: a young
collection visits every object the young ones refer to, old or frozen, so each one, several per cycle at 10,000
jobs, walks the records and the backend's state again (in callgrind's cache simulation the collector's
traversals were the largest source of last-level cache misses of a cycle at 10,000 jobs). Neither frees
anything: records and evidence hold no reference cycles and go away by reference counting.

:class:`Collector` is the policy ``dispatch supervise`` applies (:func:`dispatch.supervise.service.serve`),
and ``bench/cycle.py`` measures a cycle with it, as the service runs it:

* the automatic collector is off (:func:`gc.disable`) while the service runs: nothing is collected in the
  middle of a cycle;
* after each cycle, collect the young generations (the cycle's cyclic garbage: exceptions caught with their
  tracebacks, for instance) and then :func:`gc.freeze` what is left, so the survivors (the record cache, the
  backend's connections) are never scanned again; reference counting still frees a frozen record when the
  cache lets go of it;
* every ``full_every`` cycles, unfreeze and run one full collection, so cyclic garbage that reached the old
  generation before a freeze is reclaimed after at most that many cycles (an hour at the default poll).

The cost is bounded and measured: a young collection per cycle scans only what the cycle allocated and kept;
the periodic full collection scans everything once per ``full_every`` cycles. What a cycle leaves as cyclic
garbage waits at most until its end (memory bounded by one cycle's garbage). :meth:`Collector.stop` gives the
process its collector back as it was.
"""

from __future__ import annotations

import gc

FULL_EVERY = 360
"""Cycles between full collections (an hour at a 10 s poll)."""


class Collector:
    """The collector policy of the supervisor service (see the module docstring). ``after_cycle`` is called by
    the service loop after every cycle; ``start`` once before the first."""

    def __init__(self, full_every: int = FULL_EVERY) -> None:
        if full_every < 1:
            raise ValueError(f"full_every must be at least 1, got {full_every}")
        self.full_every = full_every
        self.cycles = 0
        self._was_enabled = True

    def start(self) -> None:
        """Freeze what start-up made (modules, settings, the backend and the store) and switch the automatic
        collector off."""
        gc.collect()
        gc.freeze()
        self._was_enabled = gc.isenabled()
        gc.disable()

    def stop(self) -> None:
        """Unfreeze, and switch the automatic collector back on if it was on at :meth:`start`."""
        gc.unfreeze()
        if self._was_enabled:
            gc.enable()

    def after_cycle(self) -> None:
        self.cycles += 1
        if self.cycles % self.full_every == 0:
            gc.unfreeze()
            gc.collect()
        else:
            gc.collect(1)
        gc.freeze()


__all__ = ["FULL_EVERY", "Collector"]
