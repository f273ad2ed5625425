"""Container images on the real test clusters.

* Every release answers ContainerImage from a real probe, and a job with a ``dispatch.Image`` where the answer
  is no is refused before anything is recorded, the error naming the capability and its reason: 22.05 (host)
  and 24.11 (trixie chroot) have no Apptainer; 26.05 (sid chroot) has Debian's apptainer
  (scripts/slurm/apptainer-up.sh), which cannot start a container there: the kernel refuses user namespaces to a
  process whose root is a chroot, and Debian's package has no setuid starter.
* What each rank runs (the words after ``srun --``), run for real by that apptainer on the sid chroot's
  filesystem, as the cluster's user, for two ranks: each runs inside the test image, sees its rank, the world
  size and the master address, and receives its argv byte for byte. The chroot is made the root of a private
  mount namespace first (``pivot_root``, as root), the one thing a chroot lacks for user namespaces; Slurm
  itself is not involved (its steps run chrooted).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

import dispatch
import dispatch.slurm as slurm
from dispatch.capabilities import Answer, Capability, Provenance
from dispatch.errors import Unsupported
from dispatch.extensions import Image
from dispatch.records import MemoryRecords
from dispatch.slurm import harness as shipped
from dispatch.slurm.settings import SlurmSettings
from dispatch.slurm.submit import build
from dispatch.spec import JobSpec
from dispatch.spi import StartRequest

from .clusters import HOW, STATE, description

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


PIVOT = r"""
set -eu
root=$1 old=$2 uid=$3; shift 3
mount --rbind "$root" "$root"
cd "$root"
pivot_root . "$old"
cd /
umount -l "/${old#"$root"/}"
exec setpriv --reuid="$uid" --regid="$uid" --clear-groups --reset-env "$@"
"""
"""Make the chroot ``$1`` the root of this (private, ``unshare -m``) mount namespace, then run ``$4...`` as uid
``$3`` with a clean environment (``env`` puts back what a rank would have)."""

ARGV = ("a b", "it's", 'say "hi"', "$HOME", "`id`", "back\\slash", "line1\nline2", "-n", "ünïcødé", "*")
SHOW = (
    'cat /etc/dispatch-test-image; printf "%s|%s|%s|%s|%s\\n" "$RANK" "$WORLD_SIZE" "$MASTER_ADDR" "$MASTER_PORT" '
    '"$(pwd)"; printf "%s\\0" "$@"'
)


def _uid(root: str, user: str) -> str:
    with open(os.path.join(root, "etc/passwd")) as f:
        for line in f:
            fields = line.split(":")
            if fields[0] == user:
                return fields[2]
    pytest.fail(f"no user {user} in {root}/etc/passwd: {HOW}", pytrace=False)


@pytest.mark.slurm_sid
def test_each_rank_runs_inside_the_image_with_its_rank_and_its_argv_byte_for_byte() -> None:
    facts = _apptainer_facts()
    desc = description("sid")
    root, user = desc["chroot"], desc["user"]
    uid = _uid(root, user)
    with tempfile.TemporaryDirectory(dir=os.path.join(root, "tmp")) as host_dir:
        os.chmod(host_dir, 0o755)
        work = os.path.join(host_dir, "work dir")  # a space: the bind and --pwd carry it as one word
        os.mkdir(work)
        os.chown(work, int(uid), int(uid))
        old = os.path.join(host_dir, "old-root")
        os.mkdir(old)
        inside = "/" + os.path.relpath(work, root)
        spec = JobSpec(("/bin/sh", "-c", SHOW, "rank", *ARGV), nodes=2, extensions=(Image(facts["image"]),))
        batch = build(StartRequest("j", 1, "dsp-j-1", spec), SlurmSettings(), "26.05.5", inside, inside).batch
        words = shlex.split(batch[batch.index("exec srun ") :])
        rank_words = words[words.index("--") + 1 :]  # what srun starts on each node
        assert rank_words[rank_words.index("apptainer") + 1] == "exec", rank_words
        outs = []
        for rank in (0, 1):
            env = {
                "PATH": "/usr/local/bin:/usr/bin:/bin",
                "HOME": f"/home/{user}",
                "SLURM_PROCID": str(rank),
                "SLURM_LOCALID": "0",
                "SLURM_NODEID": str(rank),
                "SLURM_LAUNCH_NODE_IPADDR": "127.0.0.1",
                "SLURM_JOB_ID": "4242",
                "SLURMD_NODENAME": f"node{rank + 1}",
            }
            argv = [
                "unshare",
                "-m",
                "bash",
                "-c",
                PIVOT,
                "_",
                root,
                old,
                uid,
                "env",
                *(f"{k}={v}" for k, v in env.items()),
            ]
            done = subprocess.run([*argv, *rank_words], capture_output=True, cwd="/", timeout=120)
            assert done.returncode == 0, done.stderr.decode(errors="replace")
            outs.append(done.stdout)
    for rank, out in enumerate(outs):
        marker, fields, rest = out.split(b"\n", 2)
        assert marker.startswith(b"dispatch test image"), out  # /etc/dispatch-test-image: only the image has it
        assert fields.decode() == f"{rank}|2|127.0.0.1|24242|{inside}"
        assert rest.split(b"\0")[:-1] == [a.encode() for a in ARGV]
