"""GPUs on the real 22.05 cluster, declared as generic resources by scripts/slurm/local-up.sh (gres/gpu backed by
empty files, LOCAL_SLURM_GPUS per node, 2 by default): the inventory comes from sinfo, each rank sees the GPUs
Slurm gives it, and a request larger than any node is refused before anything is recorded or submitted."""

from __future__ import annotations

from pathlib import Path

import pytest

import dispatch
from dispatch.capabilities import Answer, Capability
from dispatch.errors import Unsupported
from dispatch.records import MemoryRecords
from dispatch.resources import Resources
from dispatch.spec import JobSpec

from .clusters import HOW, open_backend

pytestmark = pytest.mark.slurm_local


def _cluster() -> tuple[dispatch.Cluster, MemoryRecords]:
    records = MemoryRecords()
    return dispatch.Cluster("local", open_backend("local"), records, dispatch.SystemClock()), records


def test_each_rank_sees_the_gpus_slurm_gives_its_node(tmp_path: Path) -> None:
    cluster, _ = _cluster()
    try:
        answer = cluster.capabilities()[Capability.ACCELERATORS]
        assert answer.answer is Answer.YES, f"no GPUs declared on the local cluster ({answer.reason}): {HOW}"
        assert "normal: 2 node(s) with 2 GPU(s)" in answer.reason
        tmp_path.chmod(0o777)
        line = f'echo "$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES" > {tmp_path}/rank-$RANK'
        spec = JobSpec(("sh", "-c", line), nodes=2, procs_per_node=2, resources=Resources(gpus_per_node=2))
        record = cluster.run(spec, timeout=180)
        assert record.state is dispatch.State.SUCCEEDED, record.outcome
        seen = sorted(p.read_text().split() for p in tmp_path.glob("rank-*"))
        assert seen == [["n1", "0,1"], ["n1", "0,1"], ["n2", "0,1"], ["n2", "0,1"]]
    finally:
        cluster.close()


def test_more_gpus_than_any_node_has_are_refused_naming_the_inventory() -> None:
    cluster, records = _cluster()
    try:
        with pytest.raises(Unsupported) as err:
            cluster.submit(JobSpec(("true",), resources=Resources(gpus_per_node=8)))
        assert "can never run 1 node(s) with 8 GPU(s) each" in str(err.value)
        assert "normal: 2 node(s) with 2 GPU(s)" in str(err.value)
        assert records.jobs(active_only=False) == []
    finally:
        cluster.close()
