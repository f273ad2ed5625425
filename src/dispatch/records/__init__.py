"""Durable job records: the :class:`Records` protocol, its model, and the in-memory and SQLite stores."""

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
