"""Container images on the real test clusters.

* Every release answers ContainerImage from a real probe, and a job with a ``dispatch.Image`` where the answer
  is no is refused before anything is recorded, the error naming the capability and its reason: 22.05 (host)
  and 24.11 (trixie chroot) have no Apptainer; 26.05 (sid chroot) has Debian's apptainer
  (scripts/slurm/apptainer-up.sh), which cannot start a container there: the kernel refuses user namespaces to a
  process whose root is a chroot, and Debian's package has no setuid starter.
* A 2-node dispatch job through the adapter on Slurm 26.05 made of the sid cluster's own files, in a private
  cluster whose daemons run where user namespaces are allowed (the chroot made the root of a mount namespace by
  ``pivot_root``: tests/slurm/pivotcluster.py): the probe answers yes, and each rank runs inside the test image,
  sees its rank, the world size and the master address, receives its argv byte for byte, and starts with the
  CessationWarning signal neutralised inside the image.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dispatch
import dispatch.slurm as slurm
from dispatch.capabilities import Answer, Capability, Provenance
from dispatch.errors import Unsupported
from dispatch.extensions import CessationWarning, Image
from dispatch.records import MemoryRecords
from dispatch.slurm import harness as shipped
from dispatch.spec import JobSpec

from .clusters import HOW, STATE, description
from .pivotcluster import PivotCluster

NOT_FOUND = "apptainer is not found in PATH on the login node"
NO_USERNS = "cannot start a container on the login node: Failed to create user namespace"
CLUSTERS = [
    pytest.param("local", NOT_FOUND, marks=pytest.mark.slurm_local),
    pytest.param("trixie", NOT_FOUND, marks=pytest.mark.slurm_trixie),
    pytest.param("sid", NO_USERNS, marks=pytest.mark.slurm_sid),
]


def _open(name: str, cache: Path) -> slurm.SlurmBackend:
    settings = {**shipped.settings_for(description(name)), "preflight": {"cacheDir": str(cache)}}
    try:
        return slurm.new(settings)
    except Exception as exc:
        pytest.fail(f"the {name} Slurm cluster did not answer ({type(exc).__name__}: {exc}): {HOW}", pytrace=False)


@pytest.mark.parametrize(("name", "reason"), CLUSTERS)
def test_the_probe_answers_no_with_its_reason_and_an_image_job_is_refused_recording_nothing(
    name: str, reason: str, tmp_path: Path
) -> None:
    backend = _open(name, tmp_path)
    records = MemoryRecords()
    cluster = dispatch.Cluster(name, backend, records, dispatch.SystemClock())
    try:
        answer = cluster.capabilities()[Capability.CONTAINER_IMAGE]
        assert (answer.answer, answer.provenance) == (Answer.NO, Provenance.PROBED), answer
        assert reason in answer.reason
        with pytest.raises(Unsupported) as err:
            cluster.submit(JobSpec(("true",), nodes=2, extensions=(Image("/var/lib/dispatch-test-images/busybox"),)))
        assert str(err.value) == f"the dispatch.Image extension needs ContainerImage, which is no here: {answer.reason}"
        assert records.jobs(active_only=False) == []
    finally:
        cluster.close()
    again = _open(name, tmp_path)  # the answer was cached with the other probes
    try:
        cached = again.capabilities()[Capability.CONTAINER_IMAGE]
        assert (cached.answer, cached.provenance, cached.reason) == (
            Answer.NO,
            Provenance.CACHED,
            f"{answer.reason} (cached)",
        )
    finally:
        again.close()


def _apptainer_facts() -> dict[str, Any]:
    path = os.path.join(STATE, "sid-apptainer.json")
    if not os.path.exists(path):
        pytest.fail(f"{path} is missing: run `sudo scripts/slurm/sid-up.sh` (it runs apptainer-up.sh)", pytrace=False)
    with open(path) as f:
        facts: dict[str, Any] = json.load(f)
    return facts


ARGV = ("a b", "it's", 'say "hi"', "$HOME", "`id`", "back\\slash", "line1\nline2", "-n", "ünïcødé", "*")


def _uid(root: str, user: str) -> str:
    with open(os.path.join(root, "etc/passwd")) as f:
        for line in f:
            fields = line.split(":")
            if fields[0] == user:
                return fields[2]
    pytest.fail(f"no user {user} in {root}/etc/passwd: {HOW}", pytrace=False)


REPORT = (
    'while read -r k v; do [ "$k" = SigIgn: ] && ign=$v; done </proc/self/status; '
    '{ cat /etc/dispatch-test-image; printf "%s|%s|%s|%s|%s|%s|%s\\n" "$RANK" "$WORLD_SIZE" "$MASTER_ADDR" '
    '"$MASTER_PORT" "$DISPATCH_NODE" "$(pwd)" "$ign"; printf "%s\\0" "$@"; } >"rank-$RANK.out"'
)
"""Each rank's report, in a file of its own in the working directory (two ranks' output never interleaves)."""


@pytest.fixture
def pivot() -> Iterator[PivotCluster]:
    _apptainer_facts()
    desc = description("sid")
    root, user = desc["chroot"], desc["user"]
    cluster = PivotCluster(root, int(_uid(root, user)), f"/home/{user}")
    try:
        cluster.start()
        yield cluster
    except Exception:
        print("\n".join(cluster.log), cluster.slurm_log())
        raise
    finally:
        cluster.stop()


@pytest.mark.slurm_sid
def test_a_two_node_sbatch_job_runs_each_rank_inside_the_image(pivot: PivotCluster) -> None:
    """Slurm 26.05 (the sid cluster's packages, in a private cluster whose daemons run where user namespaces are
    allowed: tests/slurm/pivotcluster.py) runs a 2-node dispatch job through the adapter: the probe answers yes,
    and each rank runs inside the image with its rank, the world size and the master address, and its argv byte
    for byte."""
    facts = _apptainer_facts()
    settings = {"output": {"dir": f"{pivot.inside}/out"}, "timeouts": {"call": 30, "script": 60}}
    backend = slurm.new(settings, executor=pivot.executor())
    records = MemoryRecords()
    cluster = dispatch.Cluster("pivot", backend, records, dispatch.SystemClock())
    try:
        answer = cluster.capabilities()[Capability.CONTAINER_IMAGE]
        assert answer.answer is Answer.YES, answer
        assert "started a test container on the login node" in answer.reason
        work = f"{pivot.inside}/out"
        spec = JobSpec(
            ("/bin/sh", "-c", REPORT, "rank", *ARGV),
            nodes=2,
            working_dir=work,
            time_limit=600,
            extensions=(Image(facts["image"]), CessationWarning(seconds=30)),
        )
        record = cluster.run(spec, timeout=180)
        assert record.state is dispatch.State.SUCCEEDED, (record.outcome, pivot.slurm_log())
        assert record.current is not None and record.current.scheduler_id is not None
        job_id = int(record.current.scheduler_id)
    finally:
        cluster.close()
    assert not os.path.exists(os.path.join(pivot.root, "etc/dispatch-test-image"))  # the nodes' system has none
    nodes = set()
    for rank in (0, 1):
        with open(os.path.join(pivot.dir, "out", f"rank-{rank}.out"), "rb") as f:
            marker, fields, rest = f.read().split(b"\n", 2)
        assert marker.startswith(b"dispatch test image"), marker  # /etc/dispatch-test-image: only the image has it
        r, world, addr, port, node, cwd, ignored = fields.decode().split("|")
        assert (r, world, addr, port, cwd) == (str(rank), "2", "127.0.0.1", str(20000 + job_id % 12000), work)
        # the warning signal cannot end the rank early inside the image either: busybox's env has no
        # --block-signal, so the program starts with SIGUSR1 ignored (docs/adapters/slurm.md)
        assert int(ignored, 16) & (1 << (signal.SIGUSR1 - 1)), ignored
        nodes.add(node)
        assert rest.split(b"\0")[:-1] == [a.encode() for a in ARGV]
    assert nodes == {"inode1", "inode2"}  # one rank on each node
