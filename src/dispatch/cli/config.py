"""The CLI's configuration: named clusters in ``$XDG_CONFIG_HOME/dispatch/config.toml``, records under
``$XDG_STATE_HOME/dispatch/records.db``.

With no configuration file at all, one cluster exists: ``local`` (the local adapter), and it is the default.
A file looks like::

    default = "hpc"                          # the cluster used without --cluster
    records = "/shared/dispatch/records.db"  # optional: the record store, a SQLite file or PostgreSQL:
    # records = "postgresql://dispatch@db.example/dispatch?schema=dispatch"

    [clusters.hpc]
    adapter = "slurm"
    [clusters.hpc.settings]                  # the adapter's settings (see: dispatch schema slurm)
    transport = "ssh"
    ssh = { host = "login.example.org", user = "ada" }
    defaults = { partition = "gpu", account = "ml" }

The file is read strictly: an unknown key or a wrong type is a one-line error naming the key.

**The records setting** is one string, read by every command (and by ``dispatch ui``): ``$DISPATCH_RECORDS``
if set, else ``records`` in the file, else the default SQLite file. It is a PostgreSQL DSN
(``postgresql://...``, ``postgres://...``, or ``key=value`` words with ``host=`` or ``dbname=``), where
``schema=NAME`` (a URL query parameter or a word; default ``dispatch``) picks the schema, or the path of a
SQLite file. :func:`open_records` opens it, writable or read-only.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from dispatch.errors import ConfigError

if TYPE_CHECKING:
    from dispatch.records.base import Records
    from dispatch.records.nodes import SuspectPolicy

LOCAL = "local"
_TOP_KEYS = {"default", "records", "clusters"}
_CLUSTER_KEYS = {"adapter", "settings", "suspects"}
_SUSPECT_KEYS = {"after", "window", "ttl"}


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
    suspects: SuspectPolicy = field(default_factory=lambda: _default_policy())
    """When a node of this cluster becomes a suspect (``[clusters.<name>.suspects]``: ``after``, ``window``,
    ``ttl``; see docs/supervisor.md, Bad nodes)."""


def _default_policy() -> SuspectPolicy:
    from dispatch.records.nodes import SuspectPolicy

    return SuspectPolicy()


def _suspect_policy(raw: object, where: str) -> SuspectPolicy:
    """``[clusters.<name>.suspects]``: ``after`` (a count; 0 turns suspects off), ``window`` and ``ttl``
    (durations: 30d, 12h, 3600)."""
    from dispatch.records.nodes import SuspectPolicy
    from dispatch.settings import parse_duration

    if not isinstance(raw, dict):
        raise ConfigError(where, "must be a table: after, window, ttl")
    for key in raw:
        if key not in _SUSPECT_KEYS:
            raise ConfigError(f"{where}.{key}", f"unknown key (known: {', '.join(sorted(_SUSPECT_KEYS))})")
    base = SuspectPolicy()
    after = raw.get("after", base.after)
    if isinstance(after, bool) or not isinstance(after, int) or after < 0:
        raise ConfigError(f"{where}.after", f"must be a whole number >= 0, got {after!r}")
    window = parse_duration(raw.get("window", base.window), f"{where}.window")
    ttl = parse_duration(raw.get("ttl", base.ttl), f"{where}.ttl")
    return SuspectPolicy(after, window, ttl)


@dataclass(frozen=True)
class CliConfig:
    """What the configuration says (or the embedded default when there is no file)."""

    path: Path | None
    clusters: dict[str, ClusterConfig]
    default: str
    records: str
    """The records setting: ``$DISPATCH_RECORDS``, else the file's ``records``, else the default SQLite file."""

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
    return CliConfig(None, {LOCAL: ClusterConfig(LOCAL, LOCAL)}, LOCAL, records_setting(None))


def records_setting(configured: str | None) -> str:
    """The records setting in force: ``$DISPATCH_RECORDS``, else ``configured`` (the file's), else the default."""
    return os.environ.get("DISPATCH_RECORDS") or configured or str(default_records_path())


def is_postgres(setting: str) -> bool:
    """Whether a records setting names a PostgreSQL database rather than a SQLite file."""
    s = setting.strip()
    if s.startswith(("postgresql://", "postgres://")):
        return True
    words = s.split()
    return bool(words) and all("=" in w for w in words) and any(w.split("=", 1)[0] in ("host", "dbname") for w in words)


def postgres_target(setting: str, schema: str | None = None) -> tuple[str, str]:
    """The DSN to connect with and the schema, from a PostgreSQL records setting (``schema=`` taken out of
    it; ``schema`` given here wins; default ``dispatch``)."""
    s = setting.strip()
    found = None
    if s.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(s)
        query = parse_qsl(parts.query, keep_blank_values=True)
        found = next((v for k, v in query if k == "schema"), None)
        s = urlunsplit(parts._replace(query=urlencode([(k, v) for k, v in query if k != "schema"])))
    else:
        words = []
        for w in s.split():
            key, _, value = w.partition("=")
            if key.strip() == "schema":
                found = value
            else:
                words.append(w)
        s = " ".join(words)
    return s, schema or found or "dispatch"


def open_records(setting: str | None = None, *, read_only: bool = False, schema: str | None = None) -> Records:
    """Open the record store a records setting names (default: the setting in force, see
    :func:`records_setting` and the configuration file). Every ``dispatch`` command opens records here; so
    does any tool that must see the same jobs (``dispatch ui``).

    ``read_only``: nothing is created, migrated or written (a write raises ReadOnly); a SQLite file that does
    not exist raises NotFound. Errors name the store without any password: ConfigError for a setting that
    cannot be used, Unavailable for a database that cannot be reached."""
    from dispatch.errors import DispatchError

    if setting is None:
        setting = load(None).records
    if is_postgres(setting):
        from dispatch.records.postgres import PostgresRecords, redact

        dsn, name = postgres_target(setting, schema)
        try:
            return PostgresRecords(dsn, schema=name, read_only=read_only)
        except RuntimeError as exc:
            raise ConfigError("records", f"{redact(setting)}: {exc}") from None
    from dispatch.records.sqlite import SQLiteRecords

    try:
        return SQLiteRecords(setting if setting == ":memory:" else os.path.expanduser(setting), read_only=read_only)
    except DispatchError:
        raise
    except Exception as exc:  # OSError, a newer schema, sqlite3.DatabaseError (not a database, locked too long)
        raise ConfigError("records", f"cannot open the record store {setting}: {exc}") from None


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
        if "suspects" in raw:
            try:
                policy = _suspect_policy(raw["suspects"], f"{where}.suspects")
            except ConfigError as exc:
                raise err(exc.path, exc.message) from None
            clusters[name] = ClusterConfig(name, adapter, settings, policy)
        else:
            clusters[name] = ClusterConfig(name, adapter, settings)
    default = data.get("default", LOCAL)
    if not isinstance(default, str) or default not in clusters:
        raise err("default", f"names no cluster (known: {', '.join(sorted(clusters))})")
    records = data.get("records")
    if records is not None and (
        not isinstance(records, str) or not (is_postgres(records) or os.path.isabs(os.path.expanduser(records)))
    ):
        raise err("records", "must be a PostgreSQL DSN (postgresql://...) or an absolute path to a SQLite file")
    return CliConfig(path, clusters, default, records_setting(os.path.expanduser(records) if records else None))
