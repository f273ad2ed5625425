"""The ``sharedStorage`` setting of an adapter whose jobs may run on other machines (Slurm, Grid Engine): the
directory the caller and the jobs share, and the ``SharedStorage`` answer it gives.

``dir`` is the directory as the jobs see it (on the cluster's shared file system); ``localDir`` is the same
directory where this process reads and writes it (a mount of the same file system; default: ``dir``, when the
caller runs on the cluster itself). Without the setting the answer is ``no``: dispatch cannot tell which of the
cluster's directories every node and this machine share.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dispatch.capabilities import CapabilityAnswer, no, yes
from dispatch.errors import ConfigError, Unsupported
from dispatch.spi import StoragePaths


@dataclass(frozen=True)
class SharedStorageSettings:
    """A directory this process and every node of the cluster share."""

    dir: str = field(metadata={"doc": "the shared directory as the jobs see it (absolute)"})
    local_dir: str | None = field(
        default=None, metadata={"doc": "the same directory as this process sees it (default: dir)"}
    )

    def __post_init__(self) -> None:
        for key, value in (("dir", self.dir), ("localDir", self.local_dir)):
            if value is not None and (not value.startswith("/") or any(c in value for c in "\n\r\x00")):
                raise ConfigError(f"sharedStorage.{key}", "must be an absolute path without control characters")

    @property
    def paths(self) -> StoragePaths:
        return StoragePaths(local=self.local_dir or self.dir, remote=self.dir)


def storage_answer(settings: SharedStorageSettings | None) -> CapabilityAnswer:
    """``SharedStorage``: yes naming the directory when one is configured, else no saying how to configure it."""
    if settings is None:
        return no("no sharedStorage.dir is configured (a directory every node and this machine share)")
    where = (
        settings.dir if settings.local_dir in (None, settings.dir) else f"{settings.dir} (here {settings.local_dir})"
    )
    return yes(f"sharedStorage.dir {where}, as configured (dispatch does not probe it)")


def storage_paths(settings: SharedStorageSettings | None, adapter: str) -> StoragePaths:
    """The configured paths; Unsupported naming the setting when there is none."""
    if settings is None:
        raise Unsupported(f"the {adapter} cluster has no shared storage: {storage_answer(None).reason}")
    return settings.paths
