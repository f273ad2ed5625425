"""The local adapter: runs a job's ranks as process groups on this machine; dispatch's embedded default.

Each of a job's ``nodes`` is a process group of ``procs_per_node`` ranks, started with the torchrun variables
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``NODE_RANK``, ``MASTER_ADDR=127.0.0.1``,
``MASTER_PORT``) and dispatch's own (``DISPATCH_JOB``, ``DISPATCH_EXECUTION``, ``DISPATCH_RANK``, ...). State lives
in files under ``state_dir`` (default ``$XDG_STATE_HOME/dispatch/local``) and a small detached launcher per
execution records how the ranks ended, so state survives the dispatch process. See ``docs/adapters/local.md``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from dispatch.local.backend import NAME, LocalBackend
from dispatch.local.limits import Limits
from dispatch.registry import OpenOptions
from dispatch.registry import register as _register
from dispatch.spi import Backend


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/dispatch/local`` (``~/.local/state/dispatch/local`` when XDG_STATE_HOME is unset)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "dispatch" / "local"


@dataclass(frozen=True)
class LocalSettings:
    """Settings of the local adapter."""

    state_dir: str | None = field(
        default=None, metadata={"doc": "where job state and output live (default $XDG_STATE_HOME/dispatch/local)"}
    )
    grace: float = field(default=5.0, metadata={"duration": True, "doc": "SIGTERM to SIGKILL on stop and timeout"})
    python: str | None = field(default=None, metadata={"doc": "interpreter for the launcher (default: this one)"})
    gpus: list[str] | None = field(
        default=None,
        metadata={"doc": "the GPU device ids jobs may use, as CUDA numbers them (default: what nvidia-smi lists)"},
    )

    def __post_init__(self) -> None:
        if self.state_dir is not None and not os.path.isabs(self.state_dir):
            raise ValueError("stateDir must be an absolute path")


def _factory(settings: LocalSettings | None, options: OpenOptions) -> Backend:
    s = settings or LocalSettings()
    state_dir = Path(s.state_dir) if s.state_dir else default_state_dir()
    backend: Backend = LocalBackend(
        state_dir, options.clock, grace=s.grace, python=s.python, read_only=options.read_only, gpus=s.gpus
    )
    return backend


def register() -> None:
    """Register the local adapter (done on import)."""
    _register(NAME, _factory, settings=LocalSettings, description="process groups on this machine", replace=True)


register()

__all__ = ["NAME", "Limits", "LocalBackend", "LocalSettings", "default_state_dir", "register"]
