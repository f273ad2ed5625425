"""The CLI's shared state: the configuration, the record store and the clusters, each opened on first use."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dispatch.cli.config import CliConfig, ClusterConfig
    from dispatch.clock import Clock
    from dispatch.cluster import Cluster
    from dispatch.records.base import Records
    from dispatch.records.model import JobRecord


@dataclass
class App:
    """Global options and lazily opened resources of one ``dispatch`` invocation."""

    config_path: str | None = None
    cluster_name: str | None = None
    debug: bool = False
    records_override: str | None = None
    """A records setting given on the command line (``dispatch supervise --records``), over the configured one."""
    _config: CliConfig | None = None
    _records: Records | None = None
    _clusters: dict[tuple[str, bool], Cluster] = field(default_factory=dict)

    def config(self) -> CliConfig:
        if self._config is None:
            from dispatch.cli import config

            self._config = config.load(self.config_path)
        return self._config

    def cluster_config(self, name: str | None = None) -> ClusterConfig:
        return self.config().cluster(name or self.cluster_name)

    def records_setting(self) -> str:
        """The records setting in force (see :mod:`dispatch.cli.config`)."""
        return self.records_override or self.config().records

    def records_where(self) -> str:
        """The record store, named for messages (a DSN without its password)."""
        from dispatch.cli.config import is_postgres

        setting = self.records_setting()
        if is_postgres(setting):
            from dispatch.records.postgres import redact

            return redact(setting)
        return setting

    def records(self) -> Records:
        if self._records is None:
            from dispatch.cli.config import open_records

            self._records = open_records(self.records_setting())
        return self._records

    def records_read_only(self) -> Records:
        """The record store of the one records setting opened read-only (a dashboard): it must exist; nothing is
        created, migrated or written."""
        from dispatch.cli.config import is_postgres, open_records
        from dispatch.errors import ConfigError, NotFound

        setting = self.records_setting()
        where = self.records_where()
        if not is_postgres(setting) and not os.path.exists(os.path.expanduser(setting)):
            raise NotFound(f"no records yet at {where}: run a job first (dispatch run -- ...)")
        try:
            return open_records(setting, read_only=True)
        except NotFound:
            raise NotFound(f"no records yet at {where}: run a job first (dispatch run -- ...)") from None
        except ConfigError:
            raise
        except Exception as exc:  # sqlite3.DatabaseError, psycopg errors, a schema of another version
            raise ConfigError("records", f"cannot open the record store {where} read-only: {exc}") from None

    def records_if_present(self) -> Records | None:
        """The record store if it exists (read commands never create a SQLite file)."""
        from dispatch.cli.config import is_postgres

        setting = self.records_setting()
        if self._records is None and not is_postgres(setting) and not os.path.exists(os.path.expanduser(setting)):
            return None
        return self.records()

    def cluster(
        self, name: str | None = None, *, read_only: bool = False, store: bool = True, clock: Clock | None = None
    ) -> Cluster:
        """Open cluster ``name`` (default: --cluster, then the config's default), once per invocation; ``clock``:
        the one its backend and operator run on (default: the machine's)."""
        cc = self.cluster_config(name)
        key = (cc.name, read_only)
        found = self._clusters.get(key)
        if found is not None:
            return found
        import dispatch
        from dispatch.errors import ConfigError

        try:
            config = dispatch.Config(
                adapter=cc.settings, records=self.records() if store else None, read_only=read_only, name=cc.name
            )
            if clock is not None:
                config.clock = clock
            cluster = dispatch.open(cc.adapter, config)
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
            raise NotFound(f"no job {job!r}: there are no records yet ({self.records_where()})")
        try:
            return records.get(job)
        except NotFound:
            pass
        matches = [s.id for s in records.summaries() if s.id.startswith(job)] if len(job) >= 3 else []
        if len(matches) == 1:
            return records.get(matches[0])
        if len(matches) > 1:
            raise NotFound(f"{job!r} is ambiguous: it starts {len(matches)} job ids ({', '.join(matches[:5])}, ...)")
        raise NotFound(f"no job {job!r} in the records ({self.records_where()})")

    def cluster_of(self, job: JobRecord, *, read_only: bool = False) -> Cluster:
        """The cluster a job was submitted to (by its recorded cluster name)."""
        return self.cluster(job.cluster, read_only=read_only)

    def close(self) -> None:
        for c in self._clusters.values():
            with contextlib.suppress(Exception):
                c.close()
        if self._records is not None:
            self._records.close()


def option_duration(text: str, option: str) -> float:
    """Seconds from an option's value: a number of seconds (``3600``) or a duration (``30d``, ``12h``, ``1h30m``,
    :func:`dispatch.settings.parse_duration`). ConfigError naming ``option`` otherwise."""
    from dispatch.settings import parse_duration

    try:
        seconds = float(text)  # a plain number is seconds
    except ValueError:
        return parse_duration(text, option)
    return parse_duration(seconds, option)  # checked: finite and not negative


def debug_requested(argv: list[str]) -> bool:
    return "--debug" in argv or os.environ.get("DISPATCH_DEBUG", "") not in ("", "0")


def settings_repr(settings: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in settings.items()) or "defaults"
