"""sinfo's Gres per partition read into the Accelerators inventory."""

from __future__ import annotations

from dispatch.accelerators import GpuPool
from dispatch.slurm.gres import gpu_counts, parse_sinfo_gres


def test_gres_lists_with_types_counts_and_socket_bindings() -> None:
    assert gpu_counts("gpu:a100:4(S:0-1),gpu:v100:2") == [("a100", 4), ("v100", 2)]
    assert gpu_counts("gpu:2(S:0,1),mps:100") == [(None, 2)]
    assert gpu_counts("(null)") == [] == gpu_counts("mps:200")


def test_sinfo_lines_become_pools_per_partition() -> None:
    text = "normal*|2|gpu:2(S:0)\nhigh|2|gpu:2(S:0)\nbig|1|gpu:h100:8\ncpu|4|(null)\ngarbage\n"
    inv = parse_sinfo_gres(text)
    assert inv.pools == (
        GpuPool("big", "h100", 8, 1),
        GpuPool("high", None, 2, 2),
        GpuPool("normal", None, 2, 2),
    )
    assert parse_sinfo_gres("normal*|2|(null)\n").answer().reason == "no GPUs (sinfo Gres)"
