"""The supervisor: recovery as data, applied by pure fold and next functions under leases and intents.

* :func:`fold` (:mod:`dispatch.supervise.fold`): evidence into a record, pure.
* :func:`next_step` (:mod:`dispatch.supervise.next`): the next step for a record, pure.
* :class:`Supervisor` (:mod:`dispatch.supervise.supervisor`): the loop, composed of its parts: leases and sharing
  (:mod:`~dispatch.supervise.leases`), batched observation (:mod:`~dispatch.supervise.observation`), deciding and
  acting under the intent protocol (:mod:`~dispatch.supervise.acting`) and the steady path
  (:mod:`~dispatch.supervise.steady`).

See docs/supervisor.md for the guarantees and docs/invariants.md for what the simulator checks.
"""

from dispatch.supervise.fold import fold, fold_found, fold_stray
from dispatch.supervise.next import next_step
from dispatch.supervise.step import Facts, Step, StepKind, apply_record_step, hold_instance
from dispatch.supervise.supervisor import CycleReport, LostLease, Supervisor, default_poll

__all__ = [
    "CycleReport",
    "Facts",
    "LostLease",
    "Step",
    "StepKind",
    "Supervisor",
    "apply_record_step",
    "default_poll",
    "fold",
    "fold_found",
    "fold_stray",
    "hold_instance",
    "next_step",
]
