"""The adapter registry: ``register`` on import, or discovery through the ``dispatch.adapters`` entry points.

An adapter registers a factory ``factory(settings, options) -> Backend`` under a name (through
:mod:`dispatch.spi`, which re-exports :func:`register` and :class:`OpenOptions`), with the dataclass its
settings decode into. :func:`adapter` finds it by name, loading entry points on a miss, so a third-party adapter
needs only an entry point in the ``dispatch.adapters`` group that names a callable which registers it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from dispatch.errors import ConfigError
from dispatch.extensions import set_kind_loader
from dispatch.spi import Backend
from dispatch.spi import OpenOptions as OpenOptions  # defined with the rest of the SPI; its old home still serves

ENTRY_POINT_GROUP = "dispatch.adapters"

BUILTIN = {
    "memory": "dispatch.memory",
    "local": "dispatch.local",
    "slurm": "dispatch.slurm",
    "kubeflow": "dispatch.kubeflow",
    "gridengine": "dispatch.gridengine",
}


Factory = Callable[[Any, OpenOptions], Backend]


@dataclass(frozen=True)
class Adapter:
    name: str
    factory: Factory
    settings: type[Any] | None
    description: str = ""


_ADAPTERS: dict[str, Adapter] = {}
_LOCK = threading.Lock()


def register(
    name: str,
    factory: Factory,
    *,
    settings: type[Any] | None = None,
    description: str = "",
    replace: bool = False,
) -> None:
    """Register an adapter ``factory`` under ``name``; ``settings`` is the dataclass its settings decode into
    (strictly, by the core, before the factory sees them). Registering a taken name raises unless ``replace``."""
    with _LOCK:
        existing = _ADAPTERS.get(name)
        if existing is not None and not replace and existing.factory is not factory:
            raise ValueError(f"an adapter named {name!r} is already registered")
        _ADAPTERS[name] = Adapter(name, factory, settings, description)


def _load_builtin(name: str) -> None:
    module = BUILTIN.get(name)
    if module is None:
        return
    import importlib

    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(
            "adapter", f"the {name} adapter could not be imported ({exc}); install dispatch-jobs[{name}]"
        ) from None


def _load_entry_points(name: str) -> None:
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            hook = ep.load()
            if callable(hook):
                hook()


def adapter(name: str) -> Adapter:
    """The adapter registered as ``name``, importing built-ins and entry points as needed."""
    if not isinstance(name, str) or not name:
        raise ConfigError("adapter", "an adapter name is required")
    if name not in _ADAPTERS:
        _load_builtin(name)
    if name not in _ADAPTERS:
        _load_entry_points(name)
    found = _ADAPTERS.get(name)
    if found is None:
        known = ", ".join(registered())
        raise ConfigError("adapter", f"no adapter named {name!r} (known: {known})")
    return found


def _load_for_kind(name: str) -> None:
    """Import adapter ``name`` for an extension kind it defines; an adapter that cannot be found or imported
    leaves the kind unknown (its decoding error names it)."""
    with contextlib.suppress(ConfigError):
        adapter(name)


set_kind_loader(_load_for_kind)


def registered() -> list[str]:
    """Every adapter name that can be opened: those registered so far, the built-ins, and the names of the
    ``dispatch.adapters`` entry points installed (listed without importing them)."""
    names = set(_ADAPTERS) | set(BUILTIN) | {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return sorted(names)
