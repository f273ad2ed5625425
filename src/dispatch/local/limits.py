"""The ``local.Limits`` extension: resource limits the local adapter enforces on each rank."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dispatch.errors import SpecError
from dispatch.extensions import Extension, register_extension


@register_extension
@dataclass(frozen=True)
class Limits(Extension):
    """Limits of the local adapter. ``memory_mb``: the most resident memory (RSS) one rank may use, in MiB.

    Enforcement: the execution's launcher samples each rank's resident set size every 50 ms (``/proc/<pid>/statm``)
    and SIGKILLs a rank over the limit; the execution then ends with cause ``out-of-memory``. Only the rank's
    own process is measured, not processes it starts. A spike shorter than the sampling interval can go unseen.
    """

    kind: ClassVar[str] = "local.Limits"
    memory_mb: int | None = None

    def __post_init__(self) -> None:
        if self.memory_mb is not None and (
            isinstance(self.memory_mb, bool) or not isinstance(self.memory_mb, int) or self.memory_mb < 1
        ):
            raise SpecError("memoryMb", f"must be a whole number of MiB >= 1, got {self.memory_mb!r}")
