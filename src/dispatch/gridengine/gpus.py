"""The cell's GPUs as Grid Engine counts them: each host's value of the GPU complex, from ``qhost -F``.

``qhost -F <gpu>[,<gpu type>]`` prints a line per host and, under a host whose complex has a value, an
indented ``hc:<gpu>=4.000000`` (``hl:``/``hf:`` for load or fixed values). A host without a value has no
GPUs. The pool is the adapter's queue (the ``queue`` setting), else ``cell``.
"""

from __future__ import annotations

import re

from dispatch.accelerators import GpuPool, Inventory

_VALUE = re.compile(r"^\s+(?:Host Resource\(s\):\s+)?h[a-z]:([A-Za-z0-9_.-]+)=(\S+)\s*$")
_HOST = re.compile(r"^(\S+)\s")


def qhost_argv(gpu: str, gpu_type: str | None) -> list[str]:
    return ["qhost", "-F", gpu if gpu_type is None else f"{gpu},{gpu_type}"]


def parse_qhost(text: str, gpu: str, gpu_type: str | None, pool: str) -> Inventory:
    """An inventory from :func:`qhost_argv`'s output (the header and ``global`` lines are skipped)."""
    hosts: dict[str, dict[str, str]] = {}
    host = ""
    for line in text.splitlines():
        value = _VALUE.match(line)
        if value and host:
            hosts[host][value.group(1)] = value.group(2)
            continue
        m = _HOST.match(line)
        if m and not line.startswith(("HOSTNAME", "-")):
            host = m.group(1)
            hosts.setdefault(host, {})
    pools = []
    for name, values in hosts.items():
        if name == "global":
            continue
        try:
            count = int(float(values.get(gpu, "0")))
        except ValueError:
            count = 0
        kind = values.get(gpu_type) if gpu_type else None
        pools.append(GpuPool(pool, kind, count, 1))
    note = "no execution host listed" if not pools else f"no execution host has a value for complex {gpu}"
    inventory = Inventory.of(pools, f"qhost -F {gpu}")
    return inventory if inventory.pools else Inventory.of((), inventory.source, note=note)
