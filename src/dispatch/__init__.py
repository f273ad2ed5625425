"""dispatch: submit and supervise multi-node training jobs on the scheduler you already have.

The public surface, in one place::

    import dispatch
    cluster = dispatch.open("memory", records=dispatch.records.MemoryRecords())
    job_id = cluster.operator.submit(dispatch.JobSpec(command=("python", "train.py"), nodes=2))
    record = cluster.observer.get(job_id)

See ``docs/concepts.md`` for the model (states and causes, capabilities, declarations, gates, holds, rules).

Names are imported on first use (module ``__getattr__``), so ``from dispatch import job`` inside a training
script loads the standard library and :mod:`dispatch.job` only.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dispatch import records
    from dispatch.capabilities import Answer, Capabilities, Capability, CapabilityAnswer, Provenance
    from dispatch.clock import Clock, FakeClock, SystemClock
    from dispatch.cluster import Cluster, Config, Observer, Operator, new_backend, open
    from dispatch.declarations import UNBOUNDED, Declarations, PolledLoss
    from dispatch.errors import (
        ConfigError,
        Conflict,
        DeclarationError,
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
    from dispatch.extensions import (
        CessationWarning,
        Extension,
        ExtensionPolicy,
        Image,
        Output,
        SharedCheckpoint,
        register_extension,
    )
    from dispatch.identity import AttemptId, RestartId
    from dispatch.outcome import Cause, Evidence, Outcome, State
    from dispatch.registry import OpenOptions, register
    from dispatch.resources import Resources
    from dispatch.rules import RuleSet
    from dispatch.spec import JobSpec
    from dispatch.spi import (
        Backend,
        BatchStarter,
        CessationSignal,
        ExecutionOutput,
        Holder,
        IdentityWeakener,
        MultiFinder,
        NativePolicyCompiler,
        OutputKeeper,
        OutputReader,
        OutputSlices,
        Readmitter,
        Requeuer,
        Watcher,
    )

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
    "new_backend": "dispatch.cluster",
    "open": "dispatch.cluster",
    "UNBOUNDED": "dispatch.declarations",
    "Declarations": "dispatch.declarations",
    "PolledLoss": "dispatch.declarations",
    "ConfigError": "dispatch.errors",
    "Conflict": "dispatch.errors",
    "DeclarationError": "dispatch.errors",
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
    "Extension": "dispatch.extensions",
    "ExtensionPolicy": "dispatch.extensions",
    "Image": "dispatch.extensions",
    "Output": "dispatch.extensions",
    "SharedCheckpoint": "dispatch.extensions",
    "register_extension": "dispatch.extensions",
    "AttemptId": "dispatch.identity",
    "RestartId": "dispatch.identity",
    "Cause": "dispatch.outcome",
    "Evidence": "dispatch.outcome",
    "Outcome": "dispatch.outcome",
    "State": "dispatch.outcome",
    "OpenOptions": "dispatch.registry",
    "register": "dispatch.registry",
    "Resources": "dispatch.resources",
    "RuleSet": "dispatch.rules",
    "JobSpec": "dispatch.spec",
    "Backend": "dispatch.spi",
    "BatchStarter": "dispatch.spi",
    "CessationSignal": "dispatch.spi",
    "ExecutionOutput": "dispatch.spi",
    "Holder": "dispatch.spi",
    "IdentityWeakener": "dispatch.spi",
    "MultiFinder": "dispatch.spi",
    "NativePolicyCompiler": "dispatch.spi",
    "OutputKeeper": "dispatch.spi",
    "OutputReader": "dispatch.spi",
    "OutputSlices": "dispatch.spi",
    "Readmitter": "dispatch.spi",
    "Requeuer": "dispatch.spi",
    "Watcher": "dispatch.spi",
}
"""Each public name and the module that defines it, imported on first use."""

__version__ = "0.1.0.dev0"

__all__ = [
    "UNBOUNDED",
    "Answer",
    "AttemptId",
    "Backend",
    "BatchStarter",
    "Capabilities",
    "Capability",
    "CapabilityAnswer",
    "Cause",
    "CessationSignal",
    "CessationWarning",
    "Clock",
    "Cluster",
    "Config",
    "ConfigError",
    "Conflict",
    "DeclarationError",
    "Declarations",
    "DispatchError",
    "Evidence",
    "ExecutionOutput",
    "Executor",
    "Extension",
    "ExtensionPolicy",
    "FakeClock",
    "Holder",
    "IdentityWeakener",
    "Image",
    "JobSpec",
    "MultiFinder",
    "NativePolicyCompiler",
    "NotFound",
    "Observer",
    "OpenOptions",
    "Operator",
    "Outcome",
    "OutcomeUnknown",
    "Output",
    "OutputKeeper",
    "OutputReader",
    "OutputSlices",
    "PolledLoss",
    "Provenance",
    "ReadOnly",
    "Readmitter",
    "Rejected",
    "Requeuer",
    "Resources",
    "RestartId",
    "RuleSet",
    "SharedCheckpoint",
    "SpecError",
    "State",
    "SystemClock",
    "Unavailable",
    "Unsupported",
    "Watcher",
    "new_backend",
    "open",
    "records",
    "register",
    "register_extension",
]


def __getattr__(name: str) -> Any:
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
