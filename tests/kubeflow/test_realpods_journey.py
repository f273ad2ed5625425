"""dispatch's Kubeflow adapter on real pods: what the journey (tests/journey, id ``kubeflow-realpods``) does not
show and only a real kubelet can: what each rank of a TrainJob sees (the torch runtime's ``PET_*`` and the rank
environment made from them, rank 0 found by name through the JobSet's headless Service and CoreDNS, the working
directory on storage both nodes see), ``dispatch logs`` of rank 0 while it runs and once its pods are gone (the
archive of the in-process supervisor of ``Cluster.wait``), and rank 1's own exit code 3 as the job's outcome.

The cluster: tests/kubeflow/realpods_harness.py (the real control plane, the two real kubelets, the
``host-torch`` runtime).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import dispatch
from dispatch.extensions import Image
from dispatch.kubeflow import Mode
from dispatch.kubeflow.extensions import RuntimeRef
from dispatch.outcome import Cause, State
from dispatch.records import SQLiteRecords
from dispatch.spec import JobSpec
from tests.cli.conftest import Env, cli  # noqa: F401 - the fixture
from tests.journey.adapters import Adapter, config_toml

from .realpods_harness import RUNTIME, RealPodsCluster, read_control_plane, real_cluster_in, until

pytestmark = pytest.mark.realpods

SCRIPT = r"""
master_ip=""
for i in $(seq 60); do
  master_ip=$(getent hosts "$MASTER_ADDR" | cut -d' ' -f1); [ -n "$master_ip" ] && break; sleep 0.5
done
{ echo "rank=$RANK world=$WORLD_SIZE node_rank=$NODE_RANK local=$LOCAL_RANK master=$MASTER_ADDR:$MASTER_PORT"
  echo "pet=$PET_NODE_RANK/$PET_NNODES $PET_MASTER_ADDR:$PET_MASTER_PORT"
  echo "node=$DISPATCH_NODE execution=$DISPATCH_EXECUTION"
  echo "pwd=$(pwd)"
  echo "master_ip=$master_ip"
} >"rank$RANK.txt"
echo "rank $RANK working in $(pwd)"
if [ "$RANK" = 1 ]; then
  while [ ! -e go ]; do sleep 0.2; done
  echo "rank 1 fails" >&2
  exit 3
fi
exec sleep 600
"""
"""Each rank writes what it sees to ``rank<R>.txt`` in the working directory; rank 0 then waits, rank 1 exits 3
once the test has written ``go`` there."""


@pytest.fixture
def real(tmp_path: Path) -> Iterator[RealPodsCluster]:
    yield from real_cluster_in(read_control_plane(), tmp_path, Mode.PLAIN)


def seen(path: Path) -> dict[str, str]:
    """``key=value`` words of a rank's file."""
    return dict(w.split("=", 1) for w in path.read_text().split() if "=" in w)


def test_ranks_on_real_pods_see_their_rank_master_and_working_directory_and_rank_1s_exit_3_is_the_outcome(
    real: RealPodsCluster,
    cli: Env,  # noqa: F811
) -> None:
    cli.config.write_text(config_toml(Adapter("journey", "kubeflow", real.settings(), 2, "8s", 90.0)))
    wd = real.shared / "wd"
    wd.mkdir(mode=0o777)
    wd.chmod(0o777)
    spec = JobSpec(
        ("/bin/sh", "-c", SCRIPT, "journey"),
        nodes=2,
        working_dir=str(wd),
        extensions=(
            Image(real.base.cp["real_images"]["host_usr"]),
            RuntimeRef(RUNTIME, runtime_kind="TrainingRuntime"),
        ),
    )
    with dispatch.open(
        "kubeflow", adapter=real.settings(), records=SQLiteRecords(cli.records), name="journey"
    ) as cluster:
        job = cluster.operator.submit(spec)
        until(lambda: (wd / "rank0.txt").exists() and (wd / "rank1.txt").exists(), "both ranks wrote", 120)
        until(lambda: "master_ip" in (wd / "rank1.txt").read_text(), "rank 1's file complete", 30)
        trainjob = cluster.records.get(job).current.scheduler_id  # type: ignore[union-attr]
        pods = {p["metadata"]["name"].rsplit("-", 1)[0]: p for p in real.base.pods_of(trainjob)}
        assert sorted(pods) == [f"{trainjob}-node-0-0", f"{trainjob}-node-0-1"], sorted(pods)
        assert sorted(p["spec"]["nodeName"] for p in pods.values()) == sorted(n["name"] for n in real.nodes)
        master = f"{trainjob}-node-0-0.{trainjob}"
        for rank in (0, 1):
            got = seen(wd / f"rank{rank}.txt")
            pod = pods[f"{trainjob}-node-0-{rank}"]
            assert (got["rank"], got["world"], got["node_rank"], got["local"]) == (str(rank), "2", str(rank), "0")
            # the torch runtime's PET_* are the rank environment; the Trainer's port is 29500
            assert got["pet"] == f"{rank}/2" and got["master"] == f"{master}:29500", got
            assert got["node"] == pod["spec"]["nodeName"] and got["execution"].startswith(f"{job}.1."), got
            assert got["pwd"] == str(wd)
            # rank 0's name, through the pods' DNS search path, is rank 0's pod on the other node
            assert got["master_ip"] == pods[f"{trainjob}-node-0-0"]["status"]["podIP"], got

        # dispatch logs while it runs: rank 0's log, read through the kubelet
        p = cli.run("logs", job, timeout=60)
        assert p.returncode == 0 and f"rank 0 working in {wd}" in p.stdout, p.stderr

        (wd / "go").touch()
        record = cluster.wait(job, timeout=180)
        assert record.outcome is not None
        out = record.outcome
        assert (out.state, out.cause, out.exit_code) == (State.FAILED, Cause.EXIT, 3), out
        # whose exit it was: the kubelet's reason for any non-zero exit is only "Error"
        assert f"exit 3 (Error) of node rank 1 (pod {trainjob}-node-0-1-" in (out.detail or ""), out

    # the pods gone (an administrator deletes the TrainJob): rank 0's log from the archive
    until(lambda: real.forgotten(trainjob), "the TrainJob and its pods gone", 120)
    p = cli.run("logs", job, "--json", timeout=60)
    assert p.returncode == 0, p.stderr
    chunks = [json.loads(line) for line in p.stdout.splitlines()]
    assert all(c["archived"] for c in chunks), chunks
    assert f"rank 0 working in {wd}" in "".join(c["text"] for c in chunks)
    shown = cli.run("show", job, timeout=60).stdout
    assert re.search(r"failed", shown), shown
