"""The CLI's configuration: named clusters in ``$XDG_CONFIG_HOME/dispatch/config.toml``, records under
``$XDG_STATE_HOME/dispatch/records.db``.

With no configuration file at all, one cluster exists: ``local`` (the local adapter), and it is the default.
A file looks like::

    default = "hpc"                          # the cluster used without --cluster
    records = "/shared/dispatch/records.db"  # optional: the SQLite record store

    [clusters.hpc]
    adapter = "slurm"
    [clusters.hpc.settings]                  # the adapter's settings (see: dispatch schema slurm)
    transport = "ssh"
    ssh = { host = "login.example.org", user = "ada" }
    defaults = { partition = "gpu", account = "ml" }

The file is read strictly: an unknown key or a wrong type is a one-line error naming the key.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dispatch.errors import ConfigError

LOCAL = "local"
_TOP_KEYS = {"default", "records", "clusters"}
_CLUSTER_KEYS = {"adapter", "settings"}


def config_home() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")


def state_home() -> Path:
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")


def default_config_path() -> Path:
    return config_home() / "dispatch" / "config.toml"


def default_records_path() -> Path:
    return state_home() / "dispatch" / "records.db"


@dataclass(frozen=True)
class ClusterConfig:
    name: str
    adapter: str
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CliConfig:
    """What the configuration says (or the embedded default when there is no file)."""

    path: Path | None
    clusters: dict[str, ClusterConfig]
    default: str
    records: Path

    def cluster(self, name: str | None) -> ClusterConfig:
        chosen = name or self.default
        found = self.clusters.get(chosen)
        if found is None:
            where = f" in {self.path}" if self.path else " (no config file)"
            known = ", ".join(sorted(self.clusters)) or "none"
            raise ConfigError(
                "cluster",
                f"no cluster named {chosen!r}{where}; known clusters: {known} "
                f"(add [clusters.{chosen}] to {self.path or default_config_path()})",
            )
        return found


def embedded() -> CliConfig:
    return CliConfig(None, {LOCAL: ClusterConfig(LOCAL, LOCAL)}, LOCAL, default_records_path())


def load(explicit: str | os.PathLike[str] | None = None) -> CliConfig:
    """Read ``explicit`` (which must exist) or the default file (the embedded default when it is absent)."""
    path = Path(explicit) if explicit else default_config_path()
    if not path.exists():
        if explicit:
            raise ConfigError("config", f"the config file {path} does not exist (create it, or drop --config)")
        return embedded()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError("config", f"cannot read {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("config", f"{path} is not valid TOML: {exc}") from None
    return parse(data, path)


def parse(data: dict[str, Any], path: Path) -> CliConfig:
    def err(key: str, message: str) -> ConfigError:
        return ConfigError(key, f"{message} (in {path})")

    for key in data:
        if key not in _TOP_KEYS:
            raise err(key, f"unknown key (known: {', '.join(sorted(_TOP_KEYS))})")
    raw_clusters = data.get("clusters", {})
    if not isinstance(raw_clusters, dict):
        raise err("clusters", "must be a table of clusters: [clusters.<name>]")
    clusters: dict[str, ClusterConfig] = {LOCAL: ClusterConfig(LOCAL, LOCAL)}
    for name, raw in raw_clusters.items():
        where = f"clusters.{name}"
        if not isinstance(raw, dict):
            raise err(where, "must be a table with an adapter")
        for key in raw:
            if key not in _CLUSTER_KEYS:
                raise err(f"{where}.{key}", f"unknown key (known: {', '.join(sorted(_CLUSTER_KEYS))})")
        adapter = raw.get("adapter")
        if not isinstance(adapter, str) or not adapter:
            from dispatch.registry import registered

            raise err(f"{where}.adapter", f"is required: the adapter's name ({', '.join(registered())})")
        settings = raw.get("settings", {})
        if not isinstance(settings, dict):
            raise err(f"{where}.settings", "must be a table of the adapter's settings")
        clusters[name] = ClusterConfig(name, adapter, settings)
    default = data.get("default", LOCAL)
    if not isinstance(default, str) or default not in clusters:
        raise err("default", f"names no cluster (known: {', '.join(sorted(clusters))})")
    records = data.get("records")
    if records is not None and (not isinstance(records, str) or not os.path.isabs(os.path.expanduser(records))):
        raise err("records", "must be an absolute path to the SQLite record store")
    return CliConfig(path, clusters, default, Path(os.path.expanduser(records)) if records else default_records_path())
