"""Functions in, results out: :class:`Executor`, a :class:`concurrent.futures.Executor` whose calls are dispatch
jobs (see docs/executor.md).

* :mod:`~dispatch.executor.pool`: the executor and its futures (the caller's side), its views
  (``with_options``) and batches (``batch()``);
* :mod:`~dispatch.executor.shape`: what each call's job asks for (nodes, resources, time limit, rules);
* :mod:`~dispatch.executor.output`: a call's output as the cluster keeps it (``future.stdout()``);
* :mod:`~dispatch.executor.calls`: a call's files in the shared directory, and the errors a call raises;
* :mod:`~dispatch.executor.seal`: who may read and write those files, and the bootstrap that checks the runner;
* :mod:`~dispatch.executor.run`: the runner each rank runs (standard library and cloudpickle only).

Names are imported on first use, so ``python -m dispatch.executor.run`` on a node loads the runner alone.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dispatch.executor.calls import CallError, FileRefused, RemoteError, RemoteTraceback, ResultTooLarge
    from dispatch.executor.pool import CallFailed, CallFuture, Executor
    from dispatch.executor.shape import Shape

_LAZY = {
    "CallError": "dispatch.executor.calls",
    "FileRefused": "dispatch.executor.calls",
    "RemoteError": "dispatch.executor.calls",
    "RemoteTraceback": "dispatch.executor.calls",
    "ResultTooLarge": "dispatch.executor.calls",
    "CallFailed": "dispatch.executor.pool",
    "CallFuture": "dispatch.executor.pool",
    "Executor": "dispatch.executor.pool",
    "Shape": "dispatch.executor.shape",
}

__all__ = [
    "CallError",
    "CallFailed",
    "CallFuture",
    "Executor",
    "FileRefused",
    "RemoteError",
    "RemoteTraceback",
    "ResultTooLarge",
    "Shape",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dispatch.executor' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
