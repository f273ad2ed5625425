"""The GPU ledger of one local state directory: which job holds which device, kept by the kernel's ``flock``.

Standard library only: the launcher loads this file by path (see :mod:`dispatch.local.launcher`).

Each device has a lock file ``<state dir>/gpus/device-<id>.lock``. A job holds a device while an exclusive
``flock`` on that file is held, by its launcher and (the descriptor is inherited) by its ranks and whatever they
start. The kernel drops the lock when the last of those processes exits, however it ends (``kill -9``
included), so a crashed job frees its devices by itself and no later clean-up is needed or trusted. The file's
content names the holder (job, scheduler id, launcher pid), written while the lock is held; it is only read
for a device that is locked, to say whom a waiting job waits for.

:func:`try_acquire` takes ``count`` devices all at once or none: under ``<state dir>/gpus/ledger.lock`` it tries
each device of the pool without blocking and keeps the first ``count`` free ones, so two launchers never split
the devices between them and nobody holds one device while waiting for another.

Invariant: two processes never hold the same device's lock, so two running jobs of one state directory never
get the same device. The ledger does not reach jobs of another state directory or processes dispatch did not
start.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

LEDGER_LOCK = "ledger.lock"
_SAFE = re.compile(r"[A-Za-z0-9_-]{1,64}")
_HOLDER_MAX = 4096


def device_file(directory: str, device: str) -> str:
    """The lock file of ``device`` (an id that is not a plain word is hex-encoded, so it names one file)."""
    name = device if _SAFE.fullmatch(device) else "x" + device.encode("utf-8").hex()
    return os.path.join(directory, f"device-{name}.lock")


@dataclass
class Grant:
    """Devices now held: each one's locked descriptor stays open until :meth:`release` (or the holder exits)."""

    devices: list[str]
    fds: list[int] = field(default_factory=list)

    def release(self) -> None:
        """Close the descriptors: the devices are free once no inherited copy is open either."""
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []


@dataclass(frozen=True)
class Busy:
    """Not enough free devices: which are held and by whom (the holders' records, as they wrote them)."""

    count: int
    held: dict[str, dict[str, Any]]

    def reason(self) -> str:
        """One line for a user: ``waiting for 2 GPUs: devices 0,1 held by job 3f2a...``."""
        by: dict[str, list[str]] = {}
        for device, holder in self.held.items():
            job = holder.get("jobId")
            who = f"job {job}" if isinstance(job, str) and job else "another job"
            by.setdefault(who, []).append(device)
        parts = [f"device{'s' if len(ds) > 1 else ''} {','.join(ds)} held by {who}" for who, ds in by.items()]
        return f"waiting for {self.count} GPU{'s' if self.count != 1 else ''}: " + "; ".join(parts)


def ensure_directory(directory: str) -> None:
    """Create the ledger directory (0700) or check the one there: a directory of ours, closed to others."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(directory, 0o700)
    st = os.lstat(directory)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise PermissionError(f"{directory} is not a directory of this user closed to others: refusing it")


def _open(path: str) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


@contextlib.contextmanager
def _ledger_lock(directory: str) -> Iterator[None]:
    fd = _open(os.path.join(directory, LEDGER_LOCK))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _holder(fd: int) -> dict[str, Any]:
    try:
        data = json.loads(os.pread(fd, _HOLDER_MAX, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def try_acquire(directory: str, pool: Sequence[str], count: int, holder: dict[str, Any]) -> Grant | Busy:
    """Take ``count`` free devices of ``pool`` (in pool order) for ``holder``, or none (Busy says who holds
    the others). The grant's descriptors are close-on-exec; pass them to children explicitly to share the hold."""
    ensure_directory(directory)
    grant = Grant([])
    held: dict[str, dict[str, Any]] = {}
    with _ledger_lock(directory):
        for device in pool:
            if len(grant.devices) == count:
                break
            fd = _open(device_file(directory, device))
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                held[device] = _holder(fd)
                os.close(fd)
                continue
            grant.devices.append(device)
            grant.fds.append(fd)
        if len(grant.devices) < count:
            grant.release()
            return Busy(count, held)
        record = json.dumps(holder).encode("utf-8")
        for fd in grant.fds:
            os.ftruncate(fd, 0)
            os.pwrite(fd, record, 0)
    return grant


def holders(directory: str, pool: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The devices of ``pool`` held right now, with their holders' records (a snapshot, for display)."""
    out: dict[str, dict[str, Any]] = {}
    if not os.path.isdir(directory):
        return out
    with _ledger_lock(directory):
        for device in pool:
            try:
                fd = os.open(device_file(directory, device), os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                out[device] = _holder(fd)
            finally:
                os.close(fd)
    return out
