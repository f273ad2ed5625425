"""The SSH transport: the system OpenSSH client, one shared connection (ControlMaster/ControlPersist).

Every script is ``ssh ... <user@host> bash -s`` with the script on stdin, multiplexed over one master
connection, so a poll costs one round trip. BatchMode is on (never a password prompt) and host keys are
checked (``StrictHostKeyChecking=yes`` unless the settings turn it off). Exit status 255 is the client's own
failure (connect refused, authentication, a cut connection): it raises :class:`TransportFailure` with the
output received, and the script layer decides from its start marker whether anything ran.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Any

from dispatch.slurm.settings import SlurmSettings, SSHSettings
from dispatch.slurm.transport.base import Result, TransportFailure, run_script


class SSHExecutor:
    """Runs scripts over OpenSSH with a shared control connection; :meth:`close` ends the master."""

    def __init__(self, ssh: SSHSettings, connect_timeout: float = 10.0) -> None:
        self._ssh = ssh
        self._dir = tempfile.mkdtemp(prefix="dispatch-ssh-")
        os.chmod(self._dir, 0o700)
        self.control_path = os.path.join(self._dir, "cm")
        opts = [
            "-o", "ControlMaster=auto",
            "-o", f"ControlPath={self.control_path}",
            "-o", f"ControlPersist={int(max(1, ssh.control_persist))}",
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
        self.options = opts
        self.destination = f"{ssh.user}@{ssh.host}" if ssh.user else ssh.host

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
        subprocess.run(
            ["ssh", *self.options, "-O", "exit", self.destination], capture_output=True, timeout=10, check=False
        )
        shutil.rmtree(self._dir, ignore_errors=True)


def ssh_transport(settings: Any) -> SSHExecutor:
    assert isinstance(settings, SlurmSettings) and settings.ssh is not None
    return SSHExecutor(settings.ssh, settings.timeouts.connect)
