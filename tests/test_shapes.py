"""dispatch.shapes: a shape is refused only when no node of the pool could ever hold it."""

from __future__ import annotations

from dispatch.resources import Resources
from dispatch.shapes import NodeKind, Pool, Shape, first_refusal, refusal
from dispatch.spec import JobSpec

SMALL = NodeKind(2, cpus=2, mem_mib=4000)
BIG = NodeKind(1, cpus=64, mem_mib=512 * 1024)


def test_more_nodes_than_the_pool_has_or_allows_per_job() -> None:
    pool = Pool("partition normal", (SMALL,))
    assert refusal(pool, Shape(5)) == "5 nodes asked, partition normal has 2"
    capped = Pool("partition wide", (NodeKind(8, 2, 4000),), max_nodes=4, max_nodes_why="the partition's MaxNodes")
    assert refusal(capped, Shape(5)) == "5 nodes asked, partition wide allows 4 per job (the partition's MaxNodes)"
    assert refusal(capped, Shape(4)) is None


def test_cpus_and_memory_per_node() -> None:
    pool = Pool("partition normal", (SMALL,))
    assert refusal(pool, Shape(1, ranks=4)) == (
        "4 rank(s) x 1 CPU(s) per node asked, the nodes of partition normal have at most 2 CPU(s)"
    )
    assert refusal(pool, Shape(1, ranks=1, cpus_per_rank=3)) is not None
    assert refusal(pool, Shape(1, mem_mib=64 * 1024)) == (
        "64G of memory per node asked, the nodes of partition normal have at most 4000M"
    )
    assert refusal(pool, Shape(2, ranks=2, mem_mib=4000)) is None


def test_a_heterogeneous_pool_runs_what_its_big_nodes_hold() -> None:
    pool = Pool("partition mixed", (SMALL, BIG))
    assert refusal(pool, Shape(1, ranks=32, mem_mib=256 * 1024)) is None
    # two big nodes asked, one exists: each figure fits some node, the count of such nodes does not
    assert refusal(pool, Shape(2, ranks=32)) == (
        "2 node(s) with 32 rank(s) x 1 CPU(s) = 32 CPU(s) each asked, partition mixed has 1 such node(s)"
    )


def test_unknown_figures_are_never_refused() -> None:
    pool = Pool("this cluster", (NodeKind(2),))
    assert refusal(pool, Shape(2, ranks=1000, mem_mib=1 << 30)) is None
    assert refusal(Pool("nothing listed", ()), Shape(100)) is None


def test_a_list_of_pools_is_refused_only_when_none_runs_it() -> None:
    small, big = Pool("partition a", (SMALL,)), Pool("partition b", (BIG,))
    assert first_refusal([small, big], Shape(1, ranks=8)) is None
    why = first_refusal([small, small], Shape(3))
    assert why == "3 nodes asked, partition a has 2; 3 nodes asked, partition a has 2"


def test_the_shape_of_a_spec() -> None:
    spec = JobSpec(("true",), nodes=2, procs_per_node=3, resources=Resources(cpus_per_proc=2, mem_per_node="8G"))
    shape = Shape.of(spec)
    assert (shape.nodes, shape.cpus, shape.mem_mib) == (2, 6, 8192)
    assert Shape.of(JobSpec(("true",)), cpus_per_rank=4).cpus == 4
