"""qhost -F's GPU complex values read into the Accelerators inventory."""

from __future__ import annotations

from dispatch.accelerators import GpuPool
from dispatch.gridengine.gpus import parse_qhost, qhost_argv

QHOST = """HOSTNAME                ARCH         NCPU NSOC NCOR NTHR  LOAD  MEMTOT  MEMUSE  SWAPTO  SWAPUS
----------------------------------------------------------------------------------------------
global                  -               -    -    -    -     -       -       -       -       -
gpu1                    lx-amd64       32    2   16   32  0.01  251.8G    4.4G     0.0     0.0
    Host Resource(s):      hc:gpu=4.000000
   hf:gpu_model=a100
gpu2                    lx-amd64       32    2   16   32  0.01  251.8G    4.4G     0.0     0.0
   hc:gpu=4.000000
   hf:gpu_model=a100
cpu1                    lx-amd64        2    1    2    2 20.01   23.5G    4.4G     0.0     0.0
"""


def test_hosts_with_the_gpu_complex_become_a_pool() -> None:
    assert qhost_argv("gpu", "gpu_model") == ["qhost", "-F", "gpu,gpu_model"]
    inv = parse_qhost(QHOST, "gpu", "gpu_model", "all.q")
    assert inv.pools == (GpuPool("all.q", "a100", 4, 2),)
    assert inv.source == "qhost -F gpu"


def test_a_cell_without_gpu_values_has_none() -> None:
    text = "\n".join([*QHOST.splitlines()[:3], QHOST.splitlines()[-1]])
    inv = parse_qhost(text, "gpu", None, "cell")
    assert inv.pools == () and not inv.answer().yes
    assert inv.describe() == "no GPUs (no execution host has a value for complex gpu)"
