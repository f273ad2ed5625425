"""What a call's job asks for: :class:`Shape`, one per :class:`~dispatch.executor.Executor` and one per view
that :meth:`Executor.with_options <dispatch.executor.Executor.with_options>` makes.

A shape is checked when it is made: a field a :class:`~dispatch.spec.JobSpec` would refuse raises
:class:`~dispatch.errors.SpecError` naming it there, not at the first submission.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dispatch.errors import SpecError
from dispatch.extensions import Extension
from dispatch.resources import Resources
from dispatch.rules import RuleSet
from dispatch.spec import JobSpec

DEFAULT_MAX_RESULT_BYTES = 256 * 1024 * 1024
"""The largest pickled result a call may return (256 MiB): a larger one is ResultTooLarge at ``result()``."""


@dataclass(frozen=True)
class Shape:
    """Every call's job: ``nodes`` x ``procs_per_node`` ranks asking ``resources`` of each node, its
    ``time_limit`` (seconds), ``rules``, ``env``, ``extensions`` and ``working_dir`` as a JobSpec has them, each
    rank running ``python`` on the runner, after the shell lines of ``setup`` when there are some (run by
    ``bash`` on every rank, then ``exec`` of the interpreter: ``module load``, ``source venv/bin/activate``).
    ``name`` is the job's name (None: ``call <function>``); ``all_ranks`` makes ``result()`` every rank's value;
    ``max_result_bytes`` caps a pickled result (None: no cap)."""

    nodes: int = 1
    procs_per_node: int = 1
    resources: Resources = field(default_factory=Resources)
    time_limit: float | None = None
    rules: RuleSet | Mapping[str, Any] | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    extensions: tuple[Extension, ...] = ()
    working_dir: str | None = None
    python: str = sys.executable
    setup: tuple[str, ...] = ()
    name: str | None = None
    all_ranks: bool = False
    max_result_bytes: int | None = DEFAULT_MAX_RESULT_BYTES

    def __post_init__(self) -> None:
        if self.max_result_bytes is not None and self.max_result_bytes <= 0:
            raise ValueError(f"max_result_bytes must be positive or None, not {self.max_result_bytes!r}")
        object.__setattr__(self, "env", dict(self.env))
        object.__setattr__(self, "extensions", tuple(self.extensions))
        if isinstance(self.setup, str) or not all(isinstance(line, str) for line in self.setup):
            raise SpecError("setup", f"must be a list of shell lines, not {self.setup!r}")
        object.__setattr__(self, "setup", tuple(self.setup))
        self.spec(("python",), "call")  # SpecError now for a field the job's spec would refuse

    def replace(self, **changes: Any) -> Shape:
        """This shape with ``changes`` (field names), checked again."""
        return dataclasses.replace(self, **changes)

    def spec(self, command: tuple[str, ...], default_name: str) -> JobSpec:
        """The job spec of one call: ``command`` with this shape, named ``name`` or else ``default_name``."""
        if self.setup:
            command = ("bash", "-c", "\n".join((*self.setup, 'exec "$@"')), "dispatch-setup", *command)
        return JobSpec(
            command=command,
            nodes=self.nodes,
            procs_per_node=self.procs_per_node,
            env=self.env,
            time_limit=self.time_limit,
            working_dir=self.working_dir,
            name=self.name or default_name,
            extensions=self.extensions,
            resources=self.resources,
        )
