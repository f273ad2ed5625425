"""Durable job records: the :class:`Records` protocol, its model, and the in-memory and SQLite stores."""

# The registry installs the loader that imports an adapter for its extension kinds, so a record of a Kubeflow job
# (``kubeflow.RuntimeRef``) decodes in a process that has imported nothing else of dispatch.
import dispatch.registry  # noqa: F401
from dispatch.records.base import Records, check_fence
from dispatch.records.memory import MemoryRecords
from dispatch.records.model import (
    Action,
    Decision,
    Escalation,
    Event,
    ExecutionRecord,
    GateState,
    HoldRecord,
    Intent,
    IntentStatus,
    JobRecord,
    JobSummary,
    Lease,
    Peers,
    Submission,
)
from dispatch.records.sqlite import SQLiteRecords

__all__ = [
    "Action",
    "Decision",
    "Escalation",
    "Event",
    "ExecutionRecord",
    "GateState",
    "HoldRecord",
    "Intent",
    "IntentStatus",
    "JobRecord",
    "JobSummary",
    "Lease",
    "MemoryRecords",
    "Peers",
    "Records",
    "SQLiteRecords",
    "Submission",
    "check_fence",
]
