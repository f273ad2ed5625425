"""GPUs on the real Slurm clusters of all three releases (22.05 on the host, 24.11 and 26.05 in chroots), declared
as generic resources by scripts/slurm/local-up.sh and chroot-up.sh (gres/gpu backed by character-device files,
2 per node by default): the inventory comes from sinfo, each rank sees the GPUs Slurm gives it, and a request
larger than any node is refused before anything is recorded or submitted."""

from __future__ import annotations

import pytest

import dispatch
from dispatch.capabilities import Answer, Capability
from dispatch.errors import Unsupported
from dispatch.records import MemoryRecords
from dispatch.resources import Resources
from dispatch.spec import JobSpec

from .clusters import HOW, description, open_backend

CLUSTERS = [
    pytest.param("local", marks=pytest.mark.slurm_local),
    pytest.param("trixie", marks=pytest.mark.slurm_trixie),
    pytest.param("sid", marks=pytest.mark.slurm_sid),
]


def _cluster(name: str) -> tuple[dispatch.Cluster, MemoryRecords]:
    records = MemoryRecords()
    return dispatch.Cluster(name, open_backend(name), records, dispatch.SystemClock()), records


def _gpus(name: str) -> tuple[str, int, str]:
    """The cluster's default partition, its GPUs per node, and how the inventory names that partition."""
    desc = description(name)
    per_node = int(desc.get("gpus_per_node", 0))
    if per_node < 1:
        pytest.fail(f"the {name} cluster declares no GPUs in clusters.json: {HOW}", pytrace=False)
    partition = desc["partitions"]["default"]
    return partition, per_node, f"{partition}: {len(desc['nodes'])} node(s) with {per_node} GPU(s)"


@pytest.mark.parametrize("name", CLUSTERS)
def test_each_rank_sees_the_gpus_slurm_gives_its_node(name: str) -> None:
    _, per_node, pool = _gpus(name)
    nodes = description(name)["nodes"]
    cluster, _ = _cluster(name)
    try:
        answer = cluster.capabilities()[Capability.ACCELERATORS]
        assert answer.answer is Answer.YES, f"no GPUs declared on the {name} cluster ({answer.reason}): {HOW}"
        assert pool in answer.reason
        # one line per rank, written at once, so two ranks' lines cannot interleave
        line = 'echo "rank $RANK $SLURMD_NODENAME $CUDA_VISIBLE_DEVICES"'
        spec = JobSpec(("sh", "-c", line), nodes=2, procs_per_node=2, resources=Resources(gpus_per_node=per_node))
        record = cluster.run(spec, timeout=180)
        assert record.state is dispatch.State.SUCCEEDED, record.outcome
        assert record.current is not None and record.current.scheduler_id is not None
        out = b"".join(cluster.backend.stdout(record.current.scheduler_id)).decode()
        seen = sorted(ln.split()[2:] for ln in out.splitlines() if ln.startswith("rank "))
        visible = ",".join(str(g) for g in range(per_node))
        assert seen == sorted([[n, visible] for n in nodes[:2] for _ in range(2)]), out
    finally:
        cluster.close()


@pytest.mark.parametrize("name", CLUSTERS)
def test_more_gpus_than_any_node_has_are_refused_naming_the_inventory(name: str) -> None:
    _, per_node, pool = _gpus(name)
    cluster, records = _cluster(name)
    try:
        with pytest.raises(Unsupported) as err:
            cluster.submit(JobSpec(("true",), resources=Resources(gpus_per_node=4 * per_node)))
        assert f"can never run 1 node(s) with {4 * per_node} GPU(s) each" in str(err.value)
        assert pool in str(err.value)
        assert records.jobs(active_only=False) == []
    finally:
        cluster.close()
