"""This host's GPUs for the local adapter: the inventory, and each rank's share through ``CUDA_VISIBLE_DEVICES``.

The devices are the ``gpus`` setting when given (device ids as CUDA numbers them, a subset of the host's, or
``[]`` to offer none), else what ``nvidia-smi`` lists; a host without ``nvidia-smi`` has no GPUs, and the
``Accelerators`` answer says so. Every "node" of a local job is a process group on this one host, so a job
needs ``nodes x gpusPerNode`` of its devices: node ``k`` gets the ``k``-th block of ``gpusPerNode`` devices,
and its ranks divide that block evenly (when ``gpusPerNode`` is a multiple of ``procsPerNode``; otherwise each
rank sees the whole block). Which devices an execution gets is decided when it starts, by the state directory's
GPU ledger (:mod:`dispatch.local.ledger`): jobs running at the same time never share a device, and a job waits
(pending, saying for which devices and jobs) while too few are free.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from dispatch.accelerators import GpuPool, Inventory
from dispatch.local.launcher import rank_devices

__all__ = ["POOL", "HostGpus", "gpu_type_of", "probe", "rank_devices"]

POOL = "host"
PROBE = ("nvidia-smi", "--query-gpu=index,name", "--format=csv,noheader")
PROBE_TIMEOUT = 10.0


@dataclass(frozen=True)
class HostGpus:
    """The devices the local adapter hands out, their type (None when unknown), and where that came from."""

    devices: tuple[str, ...]
    gpu_type: str | None
    source: str
    note: str = ""

    @property
    def inventory(self) -> Inventory:
        pools = [GpuPool(POOL, self.gpu_type, len(self.devices), 1)] if self.devices else []
        return Inventory.of(pools, self.source, shared_host=True, note=self.note)


def gpu_type_of(name: str) -> str:
    """A GPU type word from an ``nvidia-smi`` name: ``NVIDIA A100-SXM4-40GB`` -> ``a100-sxm4-40gb`` (a request
    for type ``a100`` matches it: see :meth:`dispatch.accelerators.Inventory.fits`)."""
    words = re.sub(r"[^a-z0-9_.+-]+", "-", name.strip().lower()).strip("-")
    return words.removeprefix("nvidia-") or "gpu"


def probe(configured: Sequence[str] | None) -> HostGpus:
    """The host's GPUs: the ``gpus`` setting when given, else ``nvidia-smi``'s list (none when it is absent or
    fails, with the reason in ``note``)."""
    if configured is not None:
        return HostGpus(tuple(configured), None, "setting local.gpus")
    try:
        done = subprocess.run(PROBE, capture_output=True, text=True, timeout=PROBE_TIMEOUT, check=False)
    except FileNotFoundError:
        return HostGpus((), None, "nvidia-smi", "nvidia-smi not found: this host has no GPUs dispatch can see")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return HostGpus((), None, "nvidia-smi", f"nvidia-smi failed: {exc}")
    if done.returncode != 0:
        first = (done.stderr or done.stdout).strip().splitlines()
        return HostGpus((), None, "nvidia-smi", f"nvidia-smi exited {done.returncode}: {first[0] if first else ''}")
    devices, names = [], set()
    for line in done.stdout.splitlines():
        index, _, name = line.partition(",")
        if index.strip().isdigit():
            devices.append(index.strip())
            names.add(gpu_type_of(name))
    kind = names.pop() if len(names) == 1 else None
    return HostGpus(tuple(devices), kind, "nvidia-smi")
