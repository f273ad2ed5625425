"""What sinfo says of the partitions' nodes, and the Slurm backend's ShapeCheck over it (no cluster: the real
22.05 output of ``sinfo --noheader --exact --format=%P|%D|%c|%m|%s`` on the host test cluster, and variations)."""

from __future__ import annotations

from dispatch.resources import Resources
from dispatch.slurm.extensions import Resources as SlurmResources
from dispatch.slurm.nodeshapes import parse_shapes, slurm_shape
from dispatch.spec import JobSpec

# sinfo --noheader --exact --format='%P|%D|%c|%m|%s' on the host 22.05 test cluster (scripts/slurm/local-up.sh)
REAL_2205 = "normal*|2|2|4000|1-infinite\nhigh|2|2|4000|1-infinite\nwide|4|2|4000|1-infinite\n"


def test_the_real_output_reads_as_partitions_with_the_default_marked() -> None:
    parts = parse_shapes(REAL_2205)
    assert parts is not None and parts.default == "normal"
    assert parts.pools["normal"].nodes == 2 and parts.pools["wide"].nodes == 4
    kind = parts.pools["normal"].kinds[0]
    assert (kind.cpus, kind.mem_mib) == (2, 4000)
    assert parts.pools["normal"].max_nodes is None


def test_kinds_of_nodes_add_up_and_maxnodes_is_read() -> None:
    text = "gpu|3|8|64000|1-2\ngpu|1|128|1024000|1-2\nbogus line\ndebug*|1|1|1|infinite\n"
    parts = parse_shapes(text)
    assert parts is not None
    gpu = parts.pools["gpu"]
    assert gpu.nodes == 4 and gpu.max_nodes == 2
    assert parts.pools["debug"].kinds[0].mem_mib is None  # RealMemory=1: not configured, so not known
    assert parse_shapes("") is None


def test_the_slurm_shape_reads_the_deprecated_extension_too() -> None:
    spec = JobSpec(("true",), procs_per_node=2, extensions=(SlurmResources(cpus_per_task=3, mem_per_cpu="1G"),))
    shape = slurm_shape(spec)
    assert (shape.cpus, shape.mem_mib) == (6, 6144)
    portable = JobSpec(("true",), resources=Resources(mem_per_node="2G"))
    assert slurm_shape(portable).mem_mib == 2048
