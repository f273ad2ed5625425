"""Code written for submitit, run on dispatch: ``from dispatch.compat import submitit`` in place of
``import submitit`` (docs/coming-from-submitit.md has the mapping and what differs).

* :class:`AutoExecutor` (:mod:`~dispatch.compat.submitit.executor`): ``update_parameters`` with submitit's names
  (:mod:`~dispatch.compat.submitit.parameters`), ``submit``, ``map_array``, ``submit_array``, ``batch()``;
* :class:`Job` (:mod:`~dispatch.compat.submitit.job`): ``result()``, ``results()``, ``done()``, ``state``,
  ``job_id``, ``stdout()``, ``stderr()``, ``cancel()``;
* :mod:`~dispatch.compat.submitit.helpers`: ``Checkpointable``, ``DelayedSubmission``, ``as_completed``;
* :class:`JobEnvironment` (:mod:`~dispatch.compat.submitit.environment`): inside a job, its ranks.

Underneath is :class:`dispatch.Executor`: every call is a dispatch job with a record, rules and a place in a
job array. A job needs dispatch installed only when the function names this module itself
(``submitit.JobEnvironment()`` inside it): the helpers and JobEnvironment travel by value. submitit's other
executors (``SlurmExecutor``, ``LocalExecutor``, ``DebugExecutor``) are not here: :class:`AutoExecutor` with
``cluster=`` picks the cluster.
"""

from __future__ import annotations

from typing import Any

import cloudpickle  # type: ignore[import-untyped]

from dispatch.compat.submitit import environment, helpers
from dispatch.compat.submitit.environment import JobEnvironment
from dispatch.compat.submitit.executor import AutoExecutor
from dispatch.compat.submitit.helpers import DelayedSubmission
from dispatch.compat.submitit.job import Job

__all__ = ["AutoExecutor", "DelayedSubmission", "Job", "JobEnvironment", "helpers"]

# A Checkpointable subclass, a DelayedSubmission and JobEnvironment travel with the call, so that a job on a
# cluster without dispatch installed can unpickle them (both modules are standard library only).
cloudpickle.register_pickle_by_value(helpers)
cloudpickle.register_pickle_by_value(environment)

_NOT_HERE = ("SlurmExecutor", "LocalExecutor", "DebugExecutor", "SlurmJob", "LocalJob", "DebugJob", "Executor")


def __getattr__(name: str) -> Any:
    if name in _NOT_HERE:
        raise AttributeError(
            f"dispatch.compat.submitit has no {name}: use AutoExecutor(folder, cluster=...), which takes the"
            " slurm_ and local_ parameters for the cluster it runs on"
        )
    raise AttributeError(f"module 'dispatch.compat.submitit' has no attribute {name!r}")
