"""The SSH transport: the system OpenSSH client, one shared connection (ControlMaster/ControlPersist).

Every script runs in a ``bash -s`` on the login node kept open over the master connection (one or two per
destination and options, shared by every executor of this process: :mod:`dispatch.slurm.transport.kept`), or in an
``ssh ... <user@host> bash -s`` of its own when those are busy, so a poll costs one round trip and no new session.
BatchMode is on (never a password prompt) and host keys are checked (``StrictHostKeyChecking=yes`` unless the
settings turn it off). Exit status 255 is the client's own failure (connect refused, authentication, a cut
connection): it raises :class:`TransportFailure` with the output received, and the script layer decides from its
start marker whether anything ran; a kept shell's connection that ends does the same.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import subprocess
import tempfile
import threading
from typing import Any

from dispatch.errors import ConfigError
from dispatch.slurm.settings import SlurmSettings, SSHSettings
from dispatch.slurm.transport.base import Result, TransportFailure, run_script
from dispatch.slurm.transport.kept import KeptShells

KEEP = 2
"""Sessions kept per control connection (sshd allows 10 per connection by default: ``MaxSessions``)."""
_KEPT: dict[str, KeptShells] = {}
_KEPT_LOCK = threading.Lock()


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
        return self._kept().run(script, timeout)

    def _kept(self) -> KeptShells:
        with _KEPT_LOCK:
            shells = _KEPT.get(self.control_path)
            if shells is None:
                shells = _KEPT[self.control_path] = KeptShells(self.command(), self._once, keep=KEEP)
            return shells

    def _once(self, script: str, timeout: float) -> Result:
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
        """Nothing to end: the kept shells serve this process's other executors of the same connection (they end
        with the process), and the master expires by itself ControlPersist idle seconds after them."""

    def exit_master(self) -> None:
        """End the kept shells and the shared master now (every process using it loses its connection)."""
        with _KEPT_LOCK:
            shells = _KEPT.pop(self.control_path, None)
        if shells is not None:
            shells.close()
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
