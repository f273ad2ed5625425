"""The CLI's shared state: the configuration, the record store and the clusters, each opened on first use."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dispatch.cli.config import CliConfig, ClusterConfig
    from dispatch.cluster import Cluster
    from dispatch.records.model import JobRecord
    from dispatch.records.sqlite import SQLiteRecords


@dataclass
class App:
    """Global options and lazily opened resources of one ``dispatch`` invocation."""

    config_path: str | None = None
    cluster_name: str | None = None
    debug: bool = False
    _config: CliConfig | None = None
    _records: SQLiteRecords | None = None
    _clusters: dict[tuple[str, bool], Cluster] = field(default_factory=dict)

    def config(self) -> CliConfig:
        if self._config is None:
            from dispatch.cli import config

            self._config = config.load(self.config_path)
        return self._config

    def cluster_config(self, name: str | None = None) -> ClusterConfig:
        return self.config().cluster(name or self.cluster_name)

    def records(self) -> SQLiteRecords:
        if self._records is None:
            from dispatch.errors import ConfigError
            from dispatch.records.sqlite import SQLiteRecords

            path = self.config().records
            try:
                self._records = SQLiteRecords(path)
            except (OSError, RuntimeError) as exc:
                raise ConfigError("records", f"cannot open the record store {path}: {exc}") from None
            except Exception as exc:  # sqlite3.DatabaseError: not a database, locked beyond the timeout
                raise ConfigError("records", f"cannot open the record store {path}: {exc}") from None
        return self._records

    def records_read_only(self) -> SQLiteRecords:
        """The record store opened read-only (a dashboard): it must exist; nothing is created or migrated."""
        from dispatch.errors import ConfigError, NotFound
        from dispatch.records.sqlite import SQLiteRecords

        path = self.config().records
        try:
            return SQLiteRecords(path, read_only=True)
        except NotFound:
            raise NotFound(f"no records yet at {path}: run a job first (dispatch run -- ...)") from None
        except Exception as exc:  # sqlite3.DatabaseError, a newer schema
            raise ConfigError("records", f"cannot open the record store {path} read-only: {exc}") from None

    def records_if_present(self) -> SQLiteRecords | None:
        """The record store if its file exists (read commands never create it)."""
        if self._records is None and not self.config().records.exists():
            return None
        return self.records()

    def cluster(self, name: str | None = None, *, read_only: bool = False, store: bool = True) -> Cluster:
        """Open cluster ``name`` (default: --cluster, then the config's default), once per invocation."""
        cc = self.cluster_config(name)
        key = (cc.name, read_only)
        found = self._clusters.get(key)
        if found is not None:
            return found
        import dispatch
        from dispatch.errors import ConfigError

        try:
            cluster = dispatch.open(
                cc.adapter,
                dispatch.Config(
                    adapter=cc.settings,
                    store=self.records() if store else None,
                    read_only=read_only,
                    name=cc.name,
                ),
            )
        except ConfigError as exc:
            if exc.path == "adapter":
                raise ConfigError(f"clusters.{cc.name}.adapter", exc.message) from None
            prefix = f"clusters.{cc.name}.settings"
            raise ConfigError(f"{prefix}.{exc.path}" if exc.path else prefix, exc.message) from None
        self._clusters[key] = cluster
        return cluster

    def resolve_job(self, job: str) -> JobRecord:
        """The record of job ``job``: its full id, or a unique prefix of one."""
        from dispatch.errors import NotFound

        records = self.records_if_present()
        if records is None:
            raise NotFound(f"no job {job!r}: there are no records yet ({self.config().records})")
        try:
            return records.get(job)
        except NotFound:
            pass
        matches = [s.id for s in records.summaries() if s.id.startswith(job)] if len(job) >= 3 else []
        if len(matches) == 1:
            return records.get(matches[0])
        if len(matches) > 1:
            raise NotFound(f"{job!r} is ambiguous: it starts {len(matches)} job ids ({', '.join(matches[:5])}, ...)")
        raise NotFound(f"no job {job!r} in the records ({self.config().records})")

    def cluster_of(self, job: JobRecord, *, read_only: bool = False) -> Cluster:
        """The cluster a job was submitted to (by its recorded cluster name)."""
        return self.cluster(job.cluster, read_only=read_only)

    def close(self) -> None:
        for c in self._clusters.values():
            with contextlib.suppress(Exception):
                c.close()
        if self._records is not None:
            self._records.close()


def debug_requested(argv: list[str]) -> bool:
    return "--debug" in argv or os.environ.get("DISPATCH_DEBUG", "") not in ("", "0")


def settings_repr(settings: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in settings.items()) or "defaults"
