"""The SSH transport: the system OpenSSH client, one shared connection (ControlMaster/ControlPersist).

Every script is ``ssh ... <user@host> bash -s`` with the script on stdin, multiplexed over one master
connection, so a poll costs one round trip. BatchMode is on (never a password prompt) and host keys are
checked (``StrictHostKeyChecking=yes`` unless the settings turn it off). Exit status 255 is the client's own
failure (connect refused, authentication, a cut connection): it raises :class:`TransportFailure` with the
output received, and the script layer decides from its start marker whether anything ran.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import subprocess
import tempfile
from typing import Any

from dispatch.errors import ConfigError
from dispatch.slurm.settings import SlurmSettings, SSHSettings
from dispatch.slurm.transport.base import Result, TransportFailure, run_script


class SSHExecutor:
    """Runs scripts over OpenSSH with a shared control connection. The master's socket lives in a private
    per-user directory (:func:`control_dir`) and is named by a hash of the destination and the options, so
    every process of this user reaching the same account with the same settings shares one connection.
    :meth:`close` leaves the master to expire after ControlPersist idle seconds (a CLI called twice in a row
    reuses it); :meth:`exit_master` ends it."""

    def __init__(self, ssh: SSHSettings, connect_timeout: float = 10.0) -> None:
        self._ssh = ssh
        self._dir = control_dir(ssh.control_dir)
        opts = [
            "-o", "BatchMode=yes",
            "-o", f"ConnectTimeout={int(max(1, connect_timeout))}",
            "-o", "StrictHostKeyChecking=" + ("yes" if ssh.strict_host_key_checking else "accept-new"),
            "-o", "ServerAliveInterval=5",
            "-o", "ServerAliveCountMax=3",
        ]  # fmt: skip
        if ssh.known_hosts_file:
            opts += ["-o", f"UserKnownHostsFile={ssh.known_hosts_file}", "-o", "GlobalKnownHostsFile=/dev/null"]
        if ssh.port:
            opts += ["-p", str(ssh.port)]
        if ssh.identity_file:
            opts += ["-i", ssh.identity_file, "-o", "IdentitiesOnly=yes"]
        for opt in ssh.options:
            opts += ["-o", opt]
        self.destination = f"{ssh.user}@{ssh.host}" if ssh.user else ssh.host
        # The socket's name covers the destination and every option that decides whom we trust (known hosts,
        # checking, identity): a backend configured differently never rides on another's verified connection.
        key = hashlib.sha256("\0".join([self.destination, *opts]).encode()).hexdigest()[:20]
        self.control_path = os.path.join(self._dir, f"cm-{key}")
        self.options = [
            "-o", "ControlMaster=auto",
            "-o", f"ControlPath={self.control_path}",
            "-o", f"ControlPersist={int(max(1, ssh.control_persist))}",
            *opts,
        ]  # fmt: skip

    def command(self, remote: str = "bash -s") -> list[str]:
        return ["ssh", *self.options, "--", self.destination, remote]

    def run(self, script: str, timeout: float) -> Result:
        result = run_script(self.command(), script, timeout, what="ssh script")
        if result.returncode == 255:
            raise TransportFailure(f"ssh to {self.destination} failed: {result.stderr.strip()[-300:]}", result)
        return result

    def master_pid(self) -> int | None:
        """The pid of the control master, if one runs (for tests that cut the connection)."""
        out = subprocess.run(
            ["ssh", *self.options, "-O", "check", self.destination], capture_output=True, text=True, timeout=10
        )
        text = out.stderr + out.stdout
        if "pid=" in text:
            return int(text.split("pid=", 1)[1].split(")", 1)[0])
        return None

    def close(self) -> None:
        """Nothing to end: the shared master expires by itself after ControlPersist idle seconds."""

    def exit_master(self) -> None:
        """End the shared master now (every process using it loses its connection)."""
        subprocess.run(
            ["ssh", *self.options, "-O", "exit", self.destination], capture_output=True, timeout=10, check=False
        )


def control_dir(configured: str | None = None) -> str:
    """The directory for control sockets: ``configured``, or ``dispatch-ssh-<uid>`` in the temp dir ($TMPDIR).
    Created mode 700; refused unless it is a real directory owned by this user with no access for others (a
    socket there is a live login)."""
    path = configured or os.path.join(tempfile.gettempdir(), f"dispatch-ssh-{os.getuid()}")
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise ConfigError(
            "ssh.controlDir", f"{path} must be a directory owned by uid {os.getuid()} with mode 700 (SSH sockets)"
        )
    return path


def ssh_transport(settings: Any) -> SSHExecutor:
    assert isinstance(settings, SlurmSettings) and settings.ssh is not None
    return SSHExecutor(settings.ssh, settings.timeouts.connect)
