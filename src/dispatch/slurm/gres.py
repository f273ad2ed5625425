"""The cluster's GPUs as Slurm declares them: ``sinfo``'s generic resources (Gres) per partition.

:data:`SINFO` prints one line per partition and group of alike nodes: ``<partition>|<node count>|<gres>``,
the gres a comma list such as ``gpu:a100:4(S:0-1),gpu:v100:2`` or ``gpu:2`` or ``(null)``. The default
partition carries a ``*``. Only ``gpu`` gres count.
"""

from __future__ import annotations

import re

from dispatch.accelerators import GpuPool, Inventory

SINFO = ("sinfo", "--noheader", "--format=%P|%D|%G")
_GPU = re.compile(r"(?:^|,)gpu(?::([A-Za-z0-9_.+-]+))?:([0-9]+)(?=\(|,|$)")


def gpu_counts(gres: str) -> list[tuple[str | None, int]]:
    """The (type, count) of each ``gpu`` entry of a Gres list (socket bindings in parentheses are dropped)."""
    plain = re.sub(r"\([^)]*\)", "", gres.strip())
    return [(m.group(1), int(m.group(2))) for m in _GPU.finditer(plain)]


def parse_sinfo_gres(text: str) -> Inventory:
    """An inventory from :data:`SINFO`'s output; lines it cannot read are skipped."""
    pools = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        partition, nodes = parts[0].strip().rstrip("*"), int(parts[1])
        for kind, count in gpu_counts(parts[2]):
            pools.append(GpuPool(partition, kind, count, nodes))
    return Inventory.of(pools, "sinfo Gres")
