"""The Slurm adapter: dispatch jobs as ``sbatch`` jobs, over the local shell or SSH.

Importing this package registers the adapter ``slurm`` (with :class:`SlurmSettings`), the transports
``local`` and ``ssh``, and the extensions ``slurm.Placement`` and ``slurm.Resources``.

* :func:`new` builds a :class:`SlurmBackend` (running preflight), read-only, with a given executor (the
  ``dispatch.slurmtest`` transcript executor in tests) or a given clock.
* :func:`schema` is the settings' JSON Schema (advisory; decoding is strict either way).

A backend whose cluster gives no landing bound (CallBound 0) must be handed out without Holder and Requeuer:
:func:`dispatch.cluster.new_backend` does it; callers of :func:`new` use :func:`dispatch.cluster.checked`.
"""

from __future__ import annotations

from typing import Any

from dispatch.clock import Clock
from dispatch.registry import OpenOptions, register
from dispatch.settings import decode
from dispatch.settings import schema as _schema
from dispatch.slurm.backend import NAME, SlurmBackend
from dispatch.slurm.extensions import Placement, Resources
from dispatch.slurm.settings import SlurmSettings
from dispatch.slurm.transport import Executor, Result, TransportFailure, make_transport, register_transport
from dispatch.slurm.transport.local import local_transport
from dispatch.slurm.transport.ssh import ssh_transport

register_transport("local", local_transport, replace=True)
register_transport("ssh", ssh_transport, replace=True)


def new(
    settings: SlurmSettings | dict[str, Any] | str | None = None,
    *,
    read_only: bool = False,
    executor: Executor | None = None,
    clock: Clock | None = None,
) -> SlurmBackend:
    """A backend for the cluster ``settings`` describe (decoded strictly; ConfigError names the key)."""
    decoded = decode(SlurmSettings, settings, path="")
    ex = executor if executor is not None else make_transport(decoded)
    try:
        return SlurmBackend(decoded, ex, clock, read_only=read_only)
    except BaseException:
        ex.close()
        raise


def _factory(settings: SlurmSettings, options: OpenOptions) -> SlurmBackend:
    return new(settings, read_only=options.read_only, clock=options.clock)


def schema() -> dict[str, Any]:
    """The JSON Schema of the settings (the transport enum lists only the built-in names)."""
    out = _schema(SlurmSettings, title="dispatch slurm adapter settings")
    out["properties"]["transport"] = {"enum": ["local", "ssh"], "default": "local"}
    return out


register(NAME, _factory, settings=SlurmSettings, description="Slurm over the local shell or SSH", replace=True)

__all__ = [
    "NAME",
    "Executor",
    "Placement",
    "Resources",
    "Result",
    "SlurmBackend",
    "SlurmSettings",
    "TransportFailure",
    "new",
    "register_transport",
    "schema",
]
