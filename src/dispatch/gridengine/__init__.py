"""The gridengine adapter: Son of Grid Engine 8.1.9 through its commands on this host, built on the adapter
kit. See ``docs/adapters/gridengine.md``."""

from __future__ import annotations

from dispatch.gridengine.backend import NAME, GridEngineBackend
from dispatch.gridengine.settings import GridEngineSettings
from dispatch.registry import OpenOptions
from dispatch.registry import register as _register
from dispatch.spi import Backend


def _factory(settings: GridEngineSettings | None, options: OpenOptions) -> Backend:
    backend: Backend = GridEngineBackend(settings or GridEngineSettings(), options.clock, read_only=options.read_only)
    return backend


def register() -> None:
    """Register the gridengine adapter (done on import)."""
    _register(NAME, _factory, settings=GridEngineSettings, description="Son of Grid Engine cell", replace=True)


register()

__all__ = ["NAME", "GridEngineBackend", "GridEngineSettings", "register"]
