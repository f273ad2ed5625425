"""The file-mode creation mask a job's ranks run under (``JobSpec.umask``): the submitter's, read once.

A :class:`~dispatch.Cluster` records the submitting process's umask with a job that names none, so every
execution, a supervisor's resubmission under another umask too, runs under the same one; dispatch's own files on
shared storage stay private whatever it is (:mod:`dispatch.adapterkit.private`).
"""

from __future__ import annotations

import os
import threading

_lock = threading.Lock()


def caller_umask() -> int:
    """This process's umask, read without changing it (``/proc/self/status`` on Linux; elsewhere set and restored
    under a lock, which another thread's file creation at that instant could still see)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _lock:
        mask = os.umask(0o077)
        os.umask(mask)
    return mask
