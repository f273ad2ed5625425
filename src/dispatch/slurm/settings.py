"""The Slurm adapter's settings, decoded strictly by :func:`dispatch.settings.decode`.

Keys (camelCase in JSON): ``transport`` (``local``, ``ssh`` or a registered name), ``ssh`` (host, user, port,
identityFile, options, controlPersist, knownHostsFile, strictHostKeyChecking, controlDir), ``defaults`` (partition,
account, qos, reservation, constraint), ``environment.pass`` (absent: ``["PATH"]``; an empty list passes
nothing), ``preflight`` (cacheDir, freshness), ``output.dir`` (absolute; ``%`` and ``\\`` refused),
``timeouts`` (call, script, connect), ``cessation.command`` (argv of the site's cessation command) and
``container`` (apptainer, options: how ranks run inside a ``dispatch.Image``).

Every check that the JSON Schema cannot express (host and user characters, partition names, the output
directory) is made here, in ``__post_init__``, and raises :class:`~dispatch.errors.ConfigError` naming the key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from dispatch.adapterkit.storage import SharedStorageSettings
from dispatch.errors import ConfigError

_HOST = re.compile(r"[A-Za-z0-9_.:\[\]-]+")
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:+-]*")
_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPTION = re.compile(r"[A-Za-z][A-Za-z0-9]*=[^\s]*")


def _check_name(value: str | None, key: str) -> None:
    if value is not None and not _NAME.fullmatch(value):
        raise ConfigError(key, f"{value!r} is not a valid Slurm name (letters, digits, _ . : + -; no leading -)")


@dataclass(frozen=True)
class SSHSettings:
    """How to reach the login node over the system OpenSSH client."""

    host: str = field(metadata={"doc": "the login node's host name or address"})
    user: str | None = field(default=None, metadata={"doc": "user to log in as (default: ssh's own choice)"})
    port: int | None = field(default=None, metadata={"doc": "SSH port (default: ssh's own, usually 22)"})
    identity_file: str | None = field(default=None, metadata={"doc": "absolute path of the private key"})
    options: list[str] = field(
        default_factory=list, metadata={"doc": "extra ssh options as Name=value; none that run local commands"}
    )
    control_persist: float = field(
        default=60.0, metadata={"duration": True, "doc": "how long the shared connection outlives its last use"}
    )
    known_hosts_file: str | None = field(
        default=None, metadata={"doc": "absolute path of the known_hosts file (default: ssh's own)"}
    )
    strict_host_key_checking: bool = field(
        default=True, metadata={"doc": "refuse unknown host keys (false: accept a new key once, never a changed one)"}
    )
    control_dir: str | None = field(
        default=None,
        metadata={
            "doc": "directory of the shared connection's socket, of this user, mode 700 (default: "
            "$TMPDIR/dispatch-ssh-<uid>), so two processes in a row, say two CLI calls, reuse one connection"
        },
    )

    def __post_init__(self) -> None:
        if not self.host or self.host.startswith("-") or not _HOST.fullmatch(self.host):
            raise ConfigError("ssh.host", f"{self.host!r} is not a host name or address")
        if self.user is not None and not _USER.fullmatch(self.user):
            raise ConfigError("ssh.user", f"{self.user!r} is not a user name")
        if self.port is not None and not 1 <= self.port <= 65535:
            raise ConfigError("ssh.port", f"{self.port} is not a TCP port")
        for key, path in (
            ("ssh.identityFile", self.identity_file),
            ("ssh.knownHostsFile", self.known_hosts_file),
            ("ssh.controlDir", self.control_dir),
        ):
            if path is not None and (not path.startswith("/") or "\n" in path):
                raise ConfigError(key, "must be an absolute path")
        for i, opt in enumerate(self.options):
            if not _OPTION.fullmatch(opt):
                raise ConfigError(f"ssh.options[{i}]", f"{opt!r} is not an ssh option of the form Name=value")
            if opt.split("=", 1)[0].lower() in ("proxycommand", "localcommand", "permitlocalcommand"):
                raise ConfigError(f"ssh.options[{i}]", "options that run local commands are refused")
        if self.control_persist <= 0:
            raise ConfigError("ssh.controlPersist", "must be a positive duration")


@dataclass(frozen=True)
class DefaultsSettings:
    """Cluster-wide defaults used when a job's ``slurm.Placement`` leaves a field empty."""

    partition: str | None = field(default=None, metadata={"doc": "partition (default: the cluster's default)"})
    account: str | None = field(default=None, metadata={"doc": "account charged (default: the user's default)"})
    qos: str | None = field(default=None, metadata={"doc": "quality of service (default: the association's)"})
    reservation: str | None = field(default=None, metadata={"doc": "reservation to run in (default: none)"})
    constraint: str | None = field(default=None, metadata={"doc": "node feature expression (--constraint)"})

    def __post_init__(self) -> None:
        for name in ("partition", "account", "qos", "reservation"):
            _check_name(getattr(self, name), f"defaults.{name}")
        if self.constraint is not None and (not self.constraint or any(c.isspace() for c in self.constraint)):
            raise ConfigError("defaults.constraint", "must be a non-empty feature expression without spaces")


@dataclass(frozen=True)
class EnvironmentSettings:
    """``pass``: caller-side variables the job inherits (None means PATH; an empty list passes none)."""

    pass_: list[str] | None = field(
        default=None,
        metadata={"key": "pass", "doc": "caller-side variables the job inherits (absent: PATH; [] passes none)"},
    )

    def __post_init__(self) -> None:
        for i, name in enumerate(self.pass_ or ()):
            if not _ENV.fullmatch(name):
                raise ConfigError(f"environment.pass[{i}]", f"{name!r} is not an environment variable name")

    @property
    def names(self) -> list[str]:
        return ["PATH"] if self.pass_ is None else list(self.pass_)


@dataclass(frozen=True)
class PreflightSettings:
    """Where probe results are cached (on the caller's machine) and how long one stays fresh."""

    cache_dir: str | None = field(
        default=None, metadata={"doc": "absolute directory of cached probe results (default: no cache)"}
    )
    freshness: float = field(
        default=86400.0, metadata={"duration": True, "doc": "how long a cached probe result stays fresh"}
    )

    def __post_init__(self) -> None:
        if self.cache_dir is not None and not self.cache_dir.startswith("/"):
            raise ConfigError("preflight.cacheDir", "must be an absolute path")


@dataclass(frozen=True)
class OutputSettings:
    """``dir``: the cluster-side directory of the jobs' output files (absolute; no ``%`` or ``\\``); how long the
    pointer files and the arrays' marker maps under ``<dir>/.jobs`` are kept (:mod:`dispatch.slurm.pruning`)."""

    dir: str | None = field(
        default=None, metadata={"doc": "cluster-side directory of output files (default: ~/dispatch-output)"}
    )
    keep_pointers: float = field(
        default=90 * 86400.0,
        metadata={"duration": True, "doc": "how long after submission a job's output pointer is kept (0: forever)"},
    )
    keep_maps: float = field(
        default=7 * 86400.0,
        metadata={"duration": True, "doc": "how long after submission an array's marker map is kept (0: forever)"},
    )

    def __post_init__(self) -> None:
        if self.dir is not None:
            check_output_dir(self.dir, "output.dir")
        for name, value in (("keepPointers", self.keep_pointers), ("keepMaps", self.keep_maps)):
            if not (value >= 0 and value < float("inf")):
                raise ConfigError(f"output.{name}", "must be 0 (forever) or a positive duration")


def check_output_dir(value: str, key: str) -> None:
    """Refuse what Slurm's filename patterns would rewrite (``%``, ``\\``) and what is not absolute."""
    if not value.startswith("/"):
        raise ConfigError(key, "must be an absolute path")
    if "%" in value or "\\" in value:
        raise ConfigError(key, "must not contain % or \\ (Slurm filename patterns would rewrite them)")
    if any(c in value for c in "\n\r\x00"):
        raise ConfigError(key, "must not contain control characters")


@dataclass(frozen=True)
class TimeoutSettings:
    """``call``: the deadline of each Slurm command in a script; ``script``: of a whole script (transport);
    ``connect``: the SSH connect timeout."""

    call: float = field(default=30.0, metadata={"duration": True, "doc": "deadline of each Slurm command"})
    script: float = field(default=120.0, metadata={"duration": True, "doc": "deadline of a whole script"})
    connect: float = field(default=10.0, metadata={"duration": True, "doc": "SSH connect timeout"})

    def __post_init__(self) -> None:
        for name in ("call", "script", "connect"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"timeouts.{name}", "must be a positive duration")


@dataclass(frozen=True)
class CessationSettings:
    """``command``: argv of the site's cessation command, run on the cluster side (see docs/adapters/slurm.md)."""

    command: list[str] | None = field(
        default=None, metadata={"doc": "argv of the site's cessation command (default: none is run)"}
    )

    def __post_init__(self) -> None:
        if self.command is not None and (not self.command or not self.command[0]):
            raise ConfigError("cessation.command", "must be a non-empty argv list")


@dataclass(frozen=True)
class ContainerSettings:
    """How ranks run inside a ``dispatch.Image`` (:mod:`dispatch.slurm.images`): Apptainer's program on the nodes
    and the options every ``apptainer exec`` of this cluster needs."""

    apptainer: str = field(
        default="apptainer",
        metadata={"doc": "Apptainer's program on the login node and the nodes: a name looked up in PATH, or a path"},
    )
    options: list[str] = field(
        default_factory=list,
        metadata={"doc": "options every apptainer exec gets before dispatch's own (e.g. --userns, --nv, --bind=/data)"},
    )

    def __post_init__(self) -> None:
        if not self.apptainer or self.apptainer.startswith("-") or any(c.isspace() for c in self.apptainer):
            raise ConfigError("container.apptainer", f"{self.apptainer!r} is not a program name or path")
        for i, opt in enumerate(self.options):
            if not opt.startswith("-") or any(c in opt for c in "\n\r\x00"):
                raise ConfigError(f"container.options[{i}]", f"{opt!r} is not an option (one word starting with -)")


@dataclass(frozen=True)
class SlurmSettings:
    """Settings of the ``slurm`` adapter."""

    transport: str = field(
        default="local", metadata={"doc": "how Slurm commands run: local (this machine), ssh, or a registered name"}
    )
    ssh: SSHSettings | None = field(default=None, metadata={"doc": "the login node (required with transport ssh)"})
    defaults: DefaultsSettings = field(
        default_factory=DefaultsSettings, metadata={"doc": "placement used when a job's slurm.Placement has none"}
    )
    environment: EnvironmentSettings = field(
        default_factory=EnvironmentSettings, metadata={"doc": "what the job inherits from the caller's environment"}
    )
    preflight: PreflightSettings = field(
        default_factory=PreflightSettings, metadata={"doc": "caching of the probes run when the cluster is opened"}
    )
    output: OutputSettings = field(default_factory=OutputSettings, metadata={"doc": "where output files go"})
    timeouts: TimeoutSettings = field(default_factory=TimeoutSettings, metadata={"doc": "deadlines of calls"})
    cessation: CessationSettings = field(
        default_factory=CessationSettings, metadata={"doc": "the site's node cessation (drain notice) command"}
    )
    container: ContainerSettings = field(
        default_factory=ContainerSettings, metadata={"doc": "how ranks run inside a dispatch.Image (Apptainer)"}
    )
    env: dict[str, str] = field(
        default_factory=dict, metadata={"doc": "variables set for every Slurm command on the cluster side"}
    )
    """Variables set for every Slurm command the adapter runs on the cluster side (``SLURM_CONF``)."""
    shared_storage: SharedStorageSettings | None = field(
        default=None, metadata={"doc": "a directory this machine and every node share (dispatch.Executor)"}
    )

    def __post_init__(self) -> None:
        if not isinstance(self.transport, str) or not re.fullmatch(r"[a-z][a-z0-9_-]*", self.transport):
            raise ConfigError("transport", f"{self.transport!r} is not a transport name")
        if self.transport == "ssh" and self.ssh is None:
            raise ConfigError("ssh", "is required when transport is ssh")
        for key in self.env:
            if not _ENV.fullmatch(key):
                raise ConfigError(f"env.{key}", "is not an environment variable name")
