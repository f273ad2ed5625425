"""The local adapter's GPUs: each rank's share through CUDA_VISIBLE_DEVICES, the host's inventory, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

import dispatch
from dispatch.capabilities import Answer, Capability
from dispatch.errors import Unsupported
from dispatch.local.gpus import gpu_type_of, probe, rank_devices
from dispatch.records import MemoryRecords
from dispatch.resources import Resources
from dispatch.spec import JobSpec


def test_each_node_gets_its_block_and_ranks_divide_it() -> None:
    devices = ["0", "1", "2", "3", "4", "5", "6", "7"]
    shares = [rank_devices(devices, 4, 2, node, local) for node in range(2) for local in range(2)]
    assert shares == [["0", "1"], ["2", "3"], ["4", "5"], ["6", "7"]]
    # 3 GPUs cannot be divided among 2 ranks: each sees its node's three
    assert rank_devices(devices, 3, 2, 1, 0) == ["3", "4", "5"] == rank_devices(devices, 3, 2, 1, 1)


def test_nvidia_smi_names_become_types() -> None:
    assert gpu_type_of("NVIDIA A100-SXM4-40GB") == "a100-sxm4-40gb"
    assert gpu_type_of(" NVIDIA GeForce RTX 4090 ") == "geforce-rtx-4090"


def test_this_host_without_nvidia_smi_has_no_gpus_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    host = probe(None)
    assert host.devices == ()
    answer = host.inventory.answer()
    assert answer.answer is Answer.NO and "nvidia-smi not found" in answer.reason


def _cluster(tmp_path: Path, gpus: list[str]) -> dispatch.Cluster:
    adapter = {"stateDir": str(tmp_path / "state"), "grace": 1.0, "gpus": gpus}
    return dispatch.open("local", dispatch.Config(adapter=adapter, records=MemoryRecords(), name="local"))


def test_each_rank_sees_its_share_of_the_hosts_gpus(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path, ["0", "1", "2", "3"])
    caps = cluster.capabilities()
    assert caps.answer(Capability.ACCELERATORS) is Answer.YES
    assert "host: 1 node(s) with 4 GPU(s)" in caps[Capability.ACCELERATORS].reason
    out = tmp_path / "seen"
    out.mkdir()
    spec = JobSpec(
        ("sh", "-c", f'echo "$CUDA_VISIBLE_DEVICES" > {out}/$RANK'),
        nodes=2,
        procs_per_node=2,
        resources=Resources(gpus_per_node=2),
    )
    record = cluster.run(spec, timeout=120)
    assert record.state is dispatch.State.SUCCEEDED, record.outcome
    seen = {p.name: p.read_text().strip() for p in out.iterdir()}
    assert seen == {"0": "0", "1": "1", "2": "2", "3": "3"}


def test_more_gpus_than_the_host_has_are_refused_before_anything_is_recorded(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path, ["0", "1", "2", "3"])
    spec = JobSpec(("true",), nodes=2, resources=Resources(gpus_per_node=3))
    with pytest.raises(Unsupported, match=r"6 in all on this host: it has host: 1 node\(s\) with 4 GPU\(s\)"):
        cluster.submit(spec)
    assert cluster.records is not None and cluster.records.jobs(active_only=False) == []
    backend = cluster.backend
    with pytest.raises(Unsupported, match="can never run"):
        backend.start(dispatch.spi.StartRequest("0123456789abcdef", 1, "m", spec))
    assert not list((tmp_path / "state" / "jobs").iterdir()), "start created nothing"


def test_a_host_offering_no_gpus_refuses_any_gpu_request(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path, [])
    with pytest.raises(Unsupported, match="Accelerators|no GPUs"):
        cluster.submit(JobSpec(("true",), resources=Resources(gpus_per_node=1)))
    assert cluster.records is not None and cluster.records.jobs(active_only=False) == []
