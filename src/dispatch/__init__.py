"""dispatch: submit and supervise multi-node training jobs on the scheduler you already have.

The public surface, in one place::

    import dispatch
    cluster = dispatch.open("memory", records=dispatch.records.MemoryRecords())
    job_id = cluster.operator.submit(dispatch.JobSpec(command=("python", "train.py"), nodes=2))
    record = cluster.observer.get(job_id)

See ``docs/concepts.md`` for the model (states and causes, capabilities, declarations, gates, holds, rules).
"""

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
    OutputReader,
    OutputSlices,
    Readmitter,
    Requeuer,
    Watcher,
)

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
    "OutputReader",
    "OutputSlices",
    "PolledLoss",
    "Provenance",
    "ReadOnly",
    "Readmitter",
    "Rejected",
    "Requeuer",
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
