"""Executors on the real Slurm test clusters (scripts/slurm/up.sh; the sid chroot runs the host's Python mounted
by scripts/training-sid.sh): the shared directory lives in the cluster's /tmp, which this host sees under the
chroot's root. Nothing skips: a missing cluster or mount fails with the command to run."""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import dispatch
from dispatch.cluster import Cluster
from dispatch.executor import Executor
from dispatch.records.sqlite import SQLiteRecords
from dispatch.slurm.harness import settings_for

from ..slurm.clusters import description

HOST = "/opt/dispatch-host"
SRC = str(Path(__file__).resolve().parents[2] / "src")


@contextmanager
def slurm_cluster(name: str) -> Iterator[tuple[Cluster, dict[str, Any]]]:
    """A dispatch cluster on test cluster ``name`` with a fresh shared directory, and the executor options that
    run this host's Python there. Every job still active at the end is stopped."""
    desc = description(name)
    root = str(desc.get("chroot") or "")
    remote = f"/tmp/dispatch-executor-{uuid.uuid4().hex[:8]}"
    local = Path(root + remote)
    local.mkdir(mode=0o777)
    os.chmod(local, 0o777)  # open to every user, as a cluster's shared scratch is
    options: dict[str, Any] = {}
    if root:
        python = f"{HOST}/python/bin/python3"
        env = {"LD_LIBRARY_PATH": f"{HOST}/python/lib", "PYTHONPATH": f"{HOST}/site:{HOST}/repo/src"}
        if not Path(root + python).exists():
            pytest.fail(f"no host Python in {root}: run `sudo scripts/training-sid.sh`", pytrace=False)
        # over SSH the jobs run as the cluster's user, not as this process's: its group shares the files
        options["group"] = _primary_gid(root, str(desc["user"]))
    else:
        python, env = sys.executable, {"PYTHONPATH": SRC}
    settings = settings_for(desc, sharedStorage={"dir": remote, "localDir": str(local)})
    records = SQLiteRecords(str(local / "records.db"))
    try:
        with dispatch.open("slurm", adapter=settings, records=records) as cluster:
            try:
                yield cluster, {"python": python, "env": env, **options}
            finally:
                for job in cluster.observer.list(active_only=True):
                    cluster.operator.stop(job.id)
    finally:
        shutil.rmtree(local, ignore_errors=True)


def _primary_gid(root: str, user: str) -> int:
    """``user``'s primary group in the chroot ``root`` (a number this host may not name)."""
    with open(f"{root}/etc/passwd") as f:
        for line in f:
            fields = line.split(":")
            if fields[0] == user:
                return int(fields[3])
    pytest.fail(f"no user {user} in {root}/etc/passwd: run `sudo scripts/slurm/up.sh`", pytrace=False)


def maker(cluster: Cluster, options: dict[str, Any]) -> Any:
    def make(**kw: Any) -> Executor:
        return Executor(cluster, poll=1.0, **{**options, **kw})

    return make
