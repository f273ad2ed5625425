"""A private two-node Slurm 26.05 cluster made of the sid test cluster's files, whose daemons run in a mount
namespace whose root is the chroot (``pivot_root``), so its jobs can start Apptainer containers, which the shared
sid cluster's chrooted jobs cannot (the kernel refuses user namespaces to a chrooted process).

What it is: ``slurmctld`` and two ``slurmd`` (``inode1``, ``inode2``) of the chroot's Slurm 26.05, started as root
with their own ``slurm.conf`` (no accounting, no cgroups, ports the system hands out free), authenticated by the
sid cluster's munged (only its socket is used). Commands run in the namespace as the sid cluster's user through
``nsenter`` (:class:`NsenterExecutor`, the Slurm adapter's executor seam). Everything lives in a fresh
directory under the chroot's ``/tmp``; :meth:`PivotCluster.stop` kills every process of the namespace (they are
all this helper's) and removes the directory. Needs root and the sid chroot with Apptainer
(``scripts/slurm/sid-up.sh``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

from dispatch.slurm.transport.base import Result, run_script

HOLD = r"""
set -eu
root=$1 old=$2
mount --rbind "$root" "$root"
cd "$root"
pivot_root . "$old"
cd /
umount -l "/${old#"$root"/}"
echo ready
exec sleep infinity
"""
"""Make the chroot ``$1`` the root of this (private, ``unshare -m``) mount namespace, say so, and stay."""

NODES = ("inode1", "inode2")


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _conf(inside: str, ports: list[int]) -> str:
    nodes = "".join(
        f"NodeName={n} NodeHostname={n} NodeAddr=127.0.0.1 Port={p} CPUs=1 RealMemory=500 State=UNKNOWN\n"
        for n, p in zip(NODES, ports[1:], strict=True)
    )
    return f"""ClusterName=pivot
SlurmctldHost=localhost
SlurmctldPort={ports[0]}
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=/run/munge/munge.socket.2
MpiDefault=none
MailProg=/bin/true
StateSaveLocation={inside}/state
SlurmdSpoolDir={inside}/spool/%n
SlurmctldPidFile={inside}/run/slurmctld.pid
SlurmdPidFile={inside}/run/slurmd-%n.pid
SlurmctldLogFile={inside}/log/slurmctld.log
SlurmdLogFile={inside}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=120
KillWait=5
InactiveLimit=0
SchedulerType=sched/backfill
{nodes}PartitionName=batch Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


@dataclass
class NsenterExecutor:
    """Runs each script with ``bash -s`` in the cluster's namespace as ``uid`` (a clean environment: HOME, PATH
    and SLURM_CONF)."""

    holder: int
    uid: int
    home: str
    conf: str

    def run(self, script: str, timeout: float) -> Result:
        argv = ["nsenter", "-t", str(self.holder), "-m", "-r", "-w", "--", "/usr/bin/setpriv"]
        argv += [f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups", "--reset-env", "/usr/bin/env", "-i"]
        argv += [f"HOME={self.home}", "PATH=/usr/local/bin:/usr/bin:/bin", f"SLURM_CONF={self.conf}", "bash", "-s"]
        return run_script(argv, script, timeout, what="nsenter script")

    def close(self) -> None:
        pass


@dataclass
class PivotCluster:
    root: str
    uid: int
    home: str
    dir: str = ""
    """The cluster's directory as this machine sees it (``<root>/tmp/dispatch-pivot.*``)."""
    holder: subprocess.Popen[str] | None = None
    log: list[str] = field(default_factory=list)

    @property
    def inside(self) -> str:
        """The cluster's directory as its processes see it."""
        return "/" + os.path.relpath(self.dir, self.root)

    def start(self, deadline: float = 90.0) -> None:
        self.dir = tempfile.mkdtemp(prefix="dispatch-pivot.", dir=os.path.join(self.root, "tmp"))
        os.chmod(self.dir, 0o755)
        for sub in ("state", "log", "run", "old", "out", *(f"spool/{n}" for n in NODES)):
            os.makedirs(os.path.join(self.dir, sub))
        os.chown(os.path.join(self.dir, "out"), self.uid, self.uid)
        with open(os.path.join(self.dir, "slurm.conf"), "w") as f:
            f.write(_conf(self.inside, _free_ports(1 + len(NODES))))
        with open(os.path.join(self.dir, "cgroup.conf"), "w") as f:
            f.write("CgroupPlugin=disabled\n")
        self.holder = subprocess.Popen(
            ["unshare", "-m", "bash", "-c", HOLD, "_", self.root, os.path.join(self.dir, "old")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        assert self.holder.stdout is not None
        line = self.holder.stdout.readline()  # ends when the namespace is ready, or the holder died
        if line.strip() != "ready":
            raise RuntimeError(f"the pivot_root namespace did not start: {line}{self.holder.stdout.read()}")
        self._root_run("slurmctld")
        for node in NODES:
            self._root_run("slurmd", "-N", node)
        end = time.monotonic() + deadline
        while True:  # wait for the condition itself: both nodes idle
            states = self._root_run("sinfo", "-h", "-N", "-o", "%N %t", check=False).stdout.split()
            if states.count("idle") == len(NODES):
                return
            if time.monotonic() > end:
                raise RuntimeError(f"the private cluster's nodes are not idle after {deadline:g} s: {states}")
            time.sleep(0.5)

    def _root_run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        assert self.holder is not None
        env = ["/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", f"SLURM_CONF={self.conf}"]
        done = subprocess.run(
            ["nsenter", "-t", str(self.holder.pid), "-m", "-r", "-w", "--", *env, *argv],
            capture_output=True,
            text=True,
            timeout=60,
        )
        self.log.append(f"{' '.join(argv)}: {done.returncode} {done.stdout[-300:]} {done.stderr[-300:]}")
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed in the private cluster: {done.stderr.strip()}")
        return done

    @property
    def conf(self) -> str:
        return f"{self.inside}/slurm.conf"

    def executor(self) -> NsenterExecutor:
        assert self.holder is not None
        return NsenterExecutor(self.holder.pid, self.uid, self.home, self.conf)

    def slurm_log(self) -> str:
        path = os.path.join(self.dir, "log", "slurmctld.log")
        if not os.path.exists(path):
            return ""
        with open(path, errors="replace") as f:
            return f.read()[-3000:]

    def stop(self) -> None:
        """Kill every process in the namespace (the holder, the daemons, any job step: all started here), then
        remove the directory."""
        if self.holder is not None:
            ns = os.readlink(f"/proc/{self.holder.pid}/ns/mnt") if self.holder.poll() is None else None
            if ns is not None:
                for _ in range(3):
                    for pid in _pids_in(ns):
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
                    if not _pids_in(ns):
                        break
                    time.sleep(0.2)
            if self.holder.poll() is None:
                self.holder.kill()
            self.holder.wait(timeout=30)
            if self.holder.stdout is not None:
                self.holder.stdout.close()
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)


def _pids_in(ns: str) -> list[int]:
    """The processes whose mount namespace is ``ns`` (none of them is this test's own: it never enters it)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/mnt") == ns:
                    out.append(int(entry))
            except OSError:
                continue
    return out
