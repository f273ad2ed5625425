"""The supervisor: recovery as data, applied by pure fold and next functions under leases and intents.

* :func:`fold` (:mod:`dispatch.supervise.fold`): evidence into a record, pure.
* :func:`next_step` (:mod:`dispatch.supervise.next`): the next step for a record, pure.
* :class:`Supervisor` (:mod:`dispatch.supervise.supervisor`): leases, batched observation, the intent protocol.

See docs/supervisor.md for the guarantees and docs/invariants.md for what the simulator checks.
"""

from dispatch.supervise.fold import fold, fold_found, fold_stray
from dispatch.supervise.mutation import Mutation
from dispatch.supervise.next import Facts, Step, StepKind, apply_record_step, hold_instance, next_step
from dispatch.supervise.supervisor import CycleReport, LostLease, Supervisor, default_poll

__all__ = [
    "CycleReport",
    "Facts",
    "LostLease",
    "Mutation",
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
