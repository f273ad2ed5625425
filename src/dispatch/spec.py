"""What to run: :class:`JobSpec`, validated field by field.

A JobSpec is immutable and valid once constructed: the constructor raises :class:`~dispatch.errors.SpecError`
naming the first bad field. It round-trips through JSON (:meth:`JobSpec.to_json`, :meth:`JobSpec.from_json`).
The command is an argv list and is never interpreted by a shell: adapters must pass it byte for byte.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from dispatch.errors import SpecError
from dispatch.extensions import Extension, extension_from_json, find_extension
from dispatch.resources import Resources

E = TypeVar("E", bound=Extension)

MAX_NODES = 100_000
MAX_PROCS_PER_NODE = 4096
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPEC_KEYS = {
    "command",
    "nodes",
    "procsPerNode",
    "workingDir",
    "env",
    "timeLimit",
    "name",
    "resources",
    "extensions",
    "umask",
}


def _fail(path: str, message: str) -> SpecError:
    return SpecError(path, message)


RESERVED_ENV = frozenset(
    {
        "DISPATCH_JOB", "DISPATCH_JOB_ID", "DISPATCH_SUBMISSION", "DISPATCH_SCHEDULER_ID", "DISPATCH_MARKER",
        "DISPATCH_EXECUTION", "DISPATCH_RESTART", "DISPATCH_RESTART_A", "DISPATCH_RESTART_J", "DISPATCH_ATTEMPT",
        "DISPATCH_RANK", "DISPATCH_WORLD_SIZE", "DISPATCH_NODE", "DISPATCH_CHECKPOINT_DIR", "DISPATCH_PROGRESS_DIR",
        "DISPATCH_CESSATION_SIGNAL", "DISPATCH_CESSATION_GRACE", "DISPATCH_DEADLINE",
    }
)  # fmt: skip
"""The variables dispatch sets in every job's environment (:mod:`dispatch.job` reads them): a spec may not set
them, since the job script exports the spec's ``env`` after its own and a value there would silently replace the
job's identity (its tracker run id, the execution its progress reports belong to)."""


@dataclass(frozen=True)
class JobSpec:
    """A multi-node job: ``command`` run as ``procs_per_node`` processes on each of ``nodes`` nodes.

    Fields:
        command: argv, at least one non-empty element; never passed through a shell.
        nodes: how many nodes (>= 1).
        procs_per_node: processes (ranks) per node (>= 1).
        working_dir: absolute directory the ranks start in, or None for the adapter's default.
        env: extra environment variables for every rank.
        time_limit: seconds of wall time before the scheduler ends the job (cause ``timeout``), or None.
        name: a human name (not unique; the job id is), or None.
        resources: what each node needs (GPUs, CPUs per process, memory, exclusivity), portably.
        extensions: typed extras, at most one of each kind.
        umask: the file-mode creation mask the ranks run under (0 to 0o777), or None for the one of the process
            that submits; a :class:`~dispatch.Cluster` records the submitter's at submission, so every execution
            (a resubmission by a supervisor too) runs under the same one. Files of dispatch's own on shared
            storage stay private whatever it is.
    """

    command: tuple[str, ...]
    nodes: int = 1
    procs_per_node: int = 1
    working_dir: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    time_limit: float | None = None
    name: str | None = None
    extensions: tuple[Extension, ...] = ()
    resources: Resources = field(default_factory=Resources)
    umask: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.command, str) or not isinstance(self.command, Sequence):
            raise _fail("command", "must be a list of strings (argv), not a shell string")
        object.__setattr__(self, "command", tuple(self.command))
        if not self.command:
            raise _fail("command", "must not be empty")
        for i, arg in enumerate(self.command):
            if not isinstance(arg, str):
                raise _fail(f"command[{i}]", f"must be a string, got {type(arg).__name__}")
            if "\x00" in arg:
                raise _fail(f"command[{i}]", "must not contain a NUL character")
        if not self.command[0]:
            raise _fail("command[0]", "the program must not be empty")
        for name, value, limit in (
            ("nodes", self.nodes, MAX_NODES),
            ("procsPerNode", self.procs_per_node, MAX_PROCS_PER_NODE),
        ):
            if isinstance(value, bool) or not isinstance(value, int):
                raise _fail(name, f"must be an integer, got {value!r}")
            if not 1 <= value <= limit:
                raise _fail(name, f"must be between 1 and {limit}, got {value}")
        if self.working_dir is not None:
            if not isinstance(self.working_dir, str) or not self.working_dir.startswith("/"):
                raise _fail("workingDir", "must be an absolute path")
            if "\x00" in self.working_dir or "\n" in self.working_dir:
                raise _fail("workingDir", "must not contain NUL or newline characters")
        if not isinstance(self.env, Mapping):
            raise _fail("env", "must be a mapping of names to strings")
        env = dict(self.env)
        for key, env_value in env.items():
            if not isinstance(key, str) or not _ENV_NAME.fullmatch(key):
                raise _fail(f"env.{key}", "is not a valid environment variable name")
            if not isinstance(env_value, str):
                raise _fail(f"env.{key}", f"must be a string, got {type(env_value).__name__}")
            if "\x00" in env_value:
                raise _fail(f"env.{key}", "must not contain a NUL character")
            if key in RESERVED_ENV:
                raise _fail(f"env.{key}", "is set by dispatch in every job (its identity, rank or bounds)")
        object.__setattr__(self, "env", env)
        if self.time_limit is not None:
            if isinstance(self.time_limit, bool) or not isinstance(self.time_limit, int | float):
                raise _fail("timeLimit", "must be a number of seconds")
            if not math.isfinite(self.time_limit) or self.time_limit <= 0:
                raise _fail("timeLimit", "must be a positive, finite number of seconds")
        if self.name is not None:
            if not isinstance(self.name, str) or not self.name or len(self.name) > 128:
                raise _fail("name", "must be 1 to 128 characters")
            if not self.name.isprintable():
                raise _fail("name", "must be printable (no newlines or control characters)")
        if self.umask is not None and (
            isinstance(self.umask, bool) or not isinstance(self.umask, int) or not 0 <= self.umask <= 0o777
        ):
            raise _fail("umask", f"must be a file-mode mask from 0 to 0o777 (511), got {self.umask!r}")
        if not isinstance(self.resources, Resources):
            raise _fail("resources", f"must be a dispatch.resources.Resources, got {type(self.resources).__name__}")
        if not isinstance(self.extensions, Sequence):
            raise _fail("extensions", "must be a list of extensions")
        object.__setattr__(self, "extensions", tuple(self.extensions))
        seen: set[str] = set()
        for i, ext in enumerate(self.extensions):
            if not isinstance(ext, Extension):
                raise _fail(f"extensions[{i}]", f"is not an extension: {ext!r}")
            if ext.kind in seen:
                raise _fail(f"extensions[{i}]", f"{ext.kind} appears twice")
            seen.add(ext.kind)

    @property
    def world_size(self) -> int:
        """Total number of ranks: nodes x processes per node."""
        return self.nodes * self.procs_per_node

    def extension(self, cls: type[E]) -> E | None:
        """This spec's extension of class ``cls``, or None."""
        return find_extension(self.extensions, cls)

    def to_json(self) -> dict[str, Any]:
        """The JSON form (camelCase keys); :meth:`from_json` reads it back to an equal spec."""
        out: dict[str, Any] = {"command": list(self.command), "nodes": self.nodes}
        out["procsPerNode"] = self.procs_per_node
        if self.working_dir is not None:
            out["workingDir"] = self.working_dir
        if self.env:
            out["env"] = dict(self.env)
        if self.time_limit is not None:
            out["timeLimit"] = self.time_limit
        if self.name is not None:
            out["name"] = self.name
        if not self.resources.empty:
            out["resources"] = self.resources.to_json()
        if self.extensions:
            out["extensions"] = [e.to_json() for e in self.extensions]
        if self.umask is not None:
            out["umask"] = self.umask
        return out

    @classmethod
    def from_json(cls, data: object) -> JobSpec:
        """Decode a spec strictly: unknown keys and bad values raise :class:`SpecError` naming the field."""
        if not isinstance(data, Mapping):
            raise _fail("", f"a job spec must be an object, got {type(data).__name__}")
        for key in data:
            if key not in _SPEC_KEYS:
                raise _fail(str(key), f"unknown field (known: {', '.join(sorted(_SPEC_KEYS))})")
        if "command" not in data:
            raise _fail("command", "is required")
        raw_exts = data.get("extensions", [])
        if not isinstance(raw_exts, list):
            raise _fail("extensions", "must be a list")
        exts = tuple(extension_from_json(e, f"extensions[{i}]") for i, e in enumerate(raw_exts))
        command = data["command"]
        if not isinstance(command, list):
            raise _fail("command", "must be a list of strings (argv)")
        env = data.get("env", {})
        if not isinstance(env, Mapping):
            raise _fail("env", "must be a mapping of names to strings")
        return cls(
            command=tuple(command),
            nodes=data.get("nodes", 1),
            procs_per_node=data.get("procsPerNode", 1),
            working_dir=data.get("workingDir"),
            env=env,
            time_limit=data.get("timeLimit"),
            name=data.get("name"),
            extensions=exts,
            resources=Resources.from_json(data.get("resources", {})),
            umask=data.get("umask"),
        )
