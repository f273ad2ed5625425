"""dispatch: submit and supervise multi-node training jobs on the scheduler you already have.

The public surface, in one place::

    import dispatch
    cluster = dispatch.open("memory", records=dispatch.records.MemoryRecords())
    job_id = cluster.operator.submit(dispatch.JobSpec(command=("python", "train.py"), nodes=2))
    record = cluster.observer.get(job_id)

See ``docs/concepts.md`` for the model (states and causes, capabilities, declarations, gates, holds, rules).

Names are imported on first use (module ``__getattr__``), so ``from dispatch import job`` inside a training
script loads the standard library and :mod:`dispatch.job` only.

Two namespaces. ``dispatch`` (its ``__all__``) is what a *user* calls: a name is here when a user submits with it
(``open``, ``Config``, ``JobSpec``, ``Resources``, the core extensions a spec carries, ``Executor``), observes or
supervises with it (``Cluster``, ``Operator``, ``Observer``, ``RuleSet``, the clocks, the capabilities a cluster
answers), reads records and outcomes with it (``records``, ``Outcome``, ``State``, ``Cause``, ``Evidence``, the
identities) or handles an error with it (the :mod:`dispatch.errors` classes a call raises).
:mod:`dispatch.spi` is what an *adapter author* implements or returns: the ``Backend`` protocol and its optional
interfaces, the evidence types, the declarations of time bounds (``Declarations``, ``PolledLoss``,
``UNBOUNDED``, and ``DeclarationError`` for breaking their rules), extension policies and new extension kinds
(``Extension``, ``ExtensionPolicy``, ``register_extension``), and registration (``register``, ``OpenOptions``,
``new_backend``).

The SPI names this package used to export still resolve, with a :class:`DeprecationWarning` naming their home in
:mod:`dispatch.spi`, until release 0.1.0, which drops them.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dispatch import records
    from dispatch.capabilities import Answer, Capabilities, Capability, CapabilityAnswer, Provenance
    from dispatch.clock import Clock, FakeClock, SystemClock
    from dispatch.cluster import Cluster, Config, Observer, Operator, open
    from dispatch.errors import (
        ConfigError,
        Conflict,
        DispatchError,
        NotFound,
        OutcomeUnknown,
        ReadOnly,
        Rejected,
        SpecError,
        Unavailable,
        Unsupported,
    )
    from dispatch.executor import Executor
    from dispatch.extensions import CessationWarning, Image, Output, SharedCheckpoint
    from dispatch.identity import AttemptId, RestartId
    from dispatch.outcome import Cause, Evidence, Outcome, State
    from dispatch.resources import Resources
    from dispatch.rules import RuleSet
    from dispatch.spec import JobSpec

_LAZY = {
    "records": "dispatch.records",
    "Answer": "dispatch.capabilities",
    "Capabilities": "dispatch.capabilities",
    "Capability": "dispatch.capabilities",
    "CapabilityAnswer": "dispatch.capabilities",
    "Provenance": "dispatch.capabilities",
    "Clock": "dispatch.clock",
    "FakeClock": "dispatch.clock",
    "SystemClock": "dispatch.clock",
    "Cluster": "dispatch.cluster",
    "Config": "dispatch.cluster",
    "Observer": "dispatch.cluster",
    "Operator": "dispatch.cluster",
    "open": "dispatch.cluster",
    "ConfigError": "dispatch.errors",
    "Conflict": "dispatch.errors",
    "DispatchError": "dispatch.errors",
    "NotFound": "dispatch.errors",
    "OutcomeUnknown": "dispatch.errors",
    "ReadOnly": "dispatch.errors",
    "Rejected": "dispatch.errors",
    "SpecError": "dispatch.errors",
    "Unavailable": "dispatch.errors",
    "Unsupported": "dispatch.errors",
    "Executor": "dispatch.executor",
    "CessationWarning": "dispatch.extensions",
    "Image": "dispatch.extensions",
    "Output": "dispatch.extensions",
    "SharedCheckpoint": "dispatch.extensions",
    "AttemptId": "dispatch.identity",
    "RestartId": "dispatch.identity",
    "Cause": "dispatch.outcome",
    "Evidence": "dispatch.outcome",
    "Outcome": "dispatch.outcome",
    "State": "dispatch.outcome",
    "Resources": "dispatch.resources",
    "RuleSet": "dispatch.rules",
    "JobSpec": "dispatch.spec",
}
"""Each public name and the module that defines it, imported on first use."""

_MOVED = frozenset(
    {
        "UNBOUNDED",
        "Backend",
        "BatchStarter",
        "CessationSignal",
        "DeclarationError",
        "Declarations",
        "ExecutionOutput",
        "Extension",
        "ExtensionPolicy",
        "Holder",
        "IdentityWeakener",
        "MultiFinder",
        "NativePolicyCompiler",
        "OpenOptions",
        "OutputKeeper",
        "OutputReader",
        "OutputSlices",
        "PolledLoss",
        "Readmitter",
        "Requeuer",
        "Watcher",
        "new_backend",
        "register",
        "register_extension",
    }
)
"""The adapter SPI names this package used to export: each now lives in :mod:`dispatch.spi`."""

_REMOVED_IN = "0.1.0"
"""The release that drops the names in ``_MOVED`` from this package (the next release)."""

__version__ = "0.1.0.dev0"

__all__ = [
    "Answer",
    "AttemptId",
    "Capabilities",
    "Capability",
    "CapabilityAnswer",
    "Cause",
    "CessationWarning",
    "Clock",
    "Cluster",
    "Config",
    "ConfigError",
    "Conflict",
    "DispatchError",
    "Evidence",
    "Executor",
    "FakeClock",
    "Image",
    "JobSpec",
    "NotFound",
    "Observer",
    "Operator",
    "Outcome",
    "OutcomeUnknown",
    "Output",
    "Provenance",
    "ReadOnly",
    "Rejected",
    "Resources",
    "RestartId",
    "RuleSet",
    "SharedCheckpoint",
    "SpecError",
    "State",
    "SystemClock",
    "Unavailable",
    "Unsupported",
    "open",
    "records",
]


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        # Not cached: every use warns where it is (the warnings filter shows each place once). ``from dispatch
        # import X`` reads X twice, the import system's hasattr() probe first: only the second read warns.
        if sys._getframe(1).f_code.co_name != "_handle_fromlist":
            warnings.warn(
                f"dispatch.{name} is deprecated: use dispatch.spi.{name} (the adapter SPI); "
                f"dispatch.{name} goes in release {_REMOVED_IN}",
                DeprecationWarning,
                stacklevel=2,
            )
        return getattr(importlib.import_module("dispatch.spi"), name)
    module = _LAZY.get(name)
    if module is None:
        # a submodule read as an attribute (``dispatch.rules.RuleSet`` after ``import dispatch``), as it was when
        # this package imported everything eagerly
        if not name.startswith("_") and importlib.util.find_spec(f"dispatch.{name}") is not None:
            return importlib.import_module(f"dispatch.{name}")
        raise AttributeError(f"module 'dispatch' has no attribute {name!r}")
    value = importlib.import_module(module)
    if module != f"dispatch.{name}":
        value = getattr(value, name)
    globals()[name] = value  # the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
