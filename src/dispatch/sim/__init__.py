"""The deterministic simulator: real fold, next, records, memory adapter and supervisors, one parked call at a
time, with crashes and scheduler faults, and the invariants checked after every step (docs/invariants.md).

Run it with ``python -m dispatch.sim --seeds 0-999 --json`` or replay one seed with
``python -m dispatch.sim --seed 17 --stop-at 80``.
"""

from dispatch.sim.invariants import INVARIANTS, check, settled
from dispatch.sim.world import Config, Result, World, run

__all__ = ["INVARIANTS", "Config", "Result", "World", "check", "run", "settled"]
