"""The launcher's structured config: ``hydra/launcher=dispatch`` selects it, ``hydra.launcher.KEY=VALUE`` sets a key.

A key the dataclass does not have is refused by Hydra itself while it composes the config, before anything is
launched (``Could not override 'hydra.launcher.KEY'``). Values are checked when the sweep is launched, before
anything is submitted: a bad one is one line naming its key
(:class:`~hydra_plugins.dispatch_launcher.launcher.LauncherError`).
"""

# No ``from __future__ import annotations``: Hydra's plugin scan runs this module before it is in sys.modules,
# where dataclasses cannot resolve string annotations.
from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore


@dataclass
class ResourcesConf:
    """What each node of every job of the sweep needs (:class:`dispatch.resources.Resources`)."""

    gpus_per_node: int = 0
    gpu_type: str | None = None
    cpus_per_proc: int | None = None
    mem_per_node: str | None = None
    """A memory size: ``64G``, ``512M`` (binary units), or a bare number of MiB."""
    exclusive: bool = False


@dataclass
class DispatchLauncherConf:
    """Where and how the sweep's jobs run. Every job of the sweep gets the same shape, resources, rules and limit."""

    _target_: str = "hydra_plugins.dispatch_launcher.launcher.DispatchLauncher"
    cluster: str | None = None
    """A cluster of dispatch's config file, as ``dispatch --cluster`` takes it (default: ``$DISPATCH_CLUSTER``,
    then the file's ``default``, else ``local``)."""
    config: str | None = None
    """dispatch's config file (default: ``$DISPATCH_CONFIG``, then ``$XDG_CONFIG_HOME/dispatch/config.toml``)."""
    nodes: int = 1
    procs_per_node: int = 1
    time_limit: str | None = None
    """Wall time of each job: seconds (``3600``) or a duration (``90m``, ``2h``, ``1h30m``)."""
    rules: Any = None
    """The jobs' recovery rules: the path of a rules file, or a rules file's content (``{rules: [...]}``)."""
    resources: ResourcesConf = field(default_factory=ResourcesConf)
    env: dict[str, str] = field(default_factory=dict)
    python: str | None = None
    """The interpreter each rank runs (default: this one's path); it needs hydra-core and dispatch-jobs."""
    working_dir: str | None = "${hydra.runtime.cwd}"
    """Where the ranks start (a relative ``hydra.sweep.dir`` is under it); null for the adapter's default."""
    name: str = "${hydra.job.name}"
    """The jobs' names start with it: ``<name>[<job number>] <overrides>``."""
    poll: float = 0.25
    """Seconds between two supervision cycles while the sweep runs."""


ConfigStore.instance().store(group="hydra/launcher", name="dispatch", node=DispatchLauncherConf, provider="dispatch")
