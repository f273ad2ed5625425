"""The supervisor's output archive on the Kubeflow adapter against the fake cluster, read back by ``dispatch logs``.

A job fails and is resubmitted; its first TrainJob (pods and logs) is deleted; ``dispatch logs`` (a real
subprocess, reading the records the supervisor wrote) still shows rank 0's log of the first execution.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dispatch.capabilities import Answer, Capability
from dispatch.cluster import Cluster
from dispatch.errors import NotFound
from dispatch.kubeflow.backend import KubeflowBackend
from dispatch.kubeflow.keeper import Followed
from dispatch.kubetest.resources import POD, TRAINJOB
from dispatch.outcome import Cause, State
from dispatch.records import SQLiteRecords
from dispatch.records.archive import ArchiveStatus
from dispatch.records.model import ExecutionRecord
from dispatch.supervise import Supervisor

from .harness import FakeCluster, job_spec

SRC = str(Path(__file__).resolve().parents[2] / "src")
ENTRY = "import sys; from dispatch.cli.main import main; sys.exit(main())"
RESUBMIT = {"rules": [{"name": "evicted", "cause": ["preempted"], "action": "resubmit", "limit": 1}]}
AGAIN = {"rules": [{"name": "again", "cause": ["exit"], "action": "resubmit", "limit": 1}]}


class Cli:
    """``dispatch`` as a subprocess over the fake cluster (a configured Kubeflow cluster named ``kf``)."""

    def __init__(self, tmp: Path, cluster: FakeCluster) -> None:
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("DISPATCH_", "XDG_", "KUBECONFIG"))}
        self.env.update(
            XDG_CONFIG_HOME=str(tmp / "config"),
            XDG_STATE_HOME=str(tmp / "state"),
            PYTHONPATH=SRC + os.pathsep + self.env.get("PYTHONPATH", ""),
            NO_COLOR="1",
        )
        self.records = tmp / "state" / "dispatch" / "records.db"
        config = tmp / "config" / "dispatch" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text(
            'default = "kf"\n[clusters.kf]\nadapter = "kubeflow"\n[clusters.kf.settings]\n'
            'namespace = "default"\nmode = "plain"\nsupervised = true\n'
            f'kubeconfig = {{ path = "{cluster.kubeconfig}" }}\ntimeouts = {{ apiserverRequest = "10s" }}\n'
        )
        self.cwd = tmp

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", ENTRY, *args], env=self.env, cwd=self.cwd, capture_output=True, text=True, timeout=60
        )


def cycles(c: FakeCluster, sup: Supervisor, until: Any, what: str, n: int = 40) -> None:
    for _ in range(n):
        sup.cycle()
        if until():
            return
        c.tick(1.0)
    raise AssertionError(f"not reached: {what}")


def caught_up(c: FakeCluster, sup: Supervisor, until: Any, what: str, within: float = 30.0) -> None:
    """Cycle without advancing the fake clock until ``until()``: for a wait on the supervisor's watches catching
    up with the server, which takes real time (more under load), not fake time; no pod's script moves on."""
    deadline = time.monotonic() + within
    while True:
        sup.cycle()
        if until():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {within:g}s: {what}")
        c.tick(0.0)


class World:
    """The fake cluster, a writable backend with ``supervised`` set, the CLI's records, and one supervisor."""

    def __init__(self, c: FakeCluster, tmp: Path) -> None:
        self.c = c
        self.cli = Cli(tmp, c)
        self.records = SQLiteRecords(self.cli.records)
        b = c.backend(supervised=True)
        assert isinstance(b, KubeflowBackend)
        self.b = b
        self.cluster = Cluster("kf", b, self.records, c.clock)
        self.sup = Supervisor(b, self.records, clock=c.clock, owner="sup-kf", poll=1, cluster="kf")

    def sid(self, job_id: str, n: int = 1) -> str | None:
        job = self.records.get(job_id)
        return job.submission(n).scheduler_id if len(job.submissions) >= n else None

    def running(self, job_id: str, n: int = 1) -> list[str]:
        """Cycle until submission ``n``'s pods run and the supervisor has recorded their execution running;
        their names, by rank. The server has the pods first: until the supervisor's watch shows them, its
        record has no execution, and a stop it makes then has no running log to archive."""
        cycles(self.c, self.sup, lambda: bool(self.c.control.pods_of(self.sid(job_id, n) or "")), "pods run")
        caught_up(self.c, self.sup, lambda: self.recorded_running(job_id, n), "the execution recorded running")
        return [p["metadata"]["name"] for p in self.c.control.pods_of(self.sid(job_id, n) or "")]

    def recorded_running(self, job_id: str, n: int = 1) -> bool:
        """Submission ``n``'s record holds an execution and its last one is running."""
        execs = self.records.get(job_id).submission(n).executions
        return bool(execs) and execs[-1].outcome.state is State.RUNNING

    def delete_trainjob(self, sid: str) -> None:
        """The TrainJob goes (an operator, a TTL), and its pods and their logs with it (once they have
        terminated: at most their 30 s grace period)."""
        self.c.control.delete(TRAINJOB, sid)
        self.c.tick(30.0)
        assert self.c.control.pods_of(sid, live=False) == []

    def close(self) -> None:
        self.b.close()
        self.records.close()


@pytest.fixture
def world(plain: FakeCluster, tmp_path: Path) -> Iterator[World]:
    w = World(plain, tmp_path)
    try:
        yield w
    finally:
        w.close()


def kept(w: World, job_id: str, cause: Cause, data: bytes) -> tuple[ExecutionRecord, str]:
    """The first submission's last execution, which ended with ``cause`` and whose log the archive kept as
    ``data``; and that submission's TrainJob."""
    first = w.records.get(job_id).submission(1).executions[-1]
    assert first.outcome.cause is cause
    entry = w.records.get_output(job_id, first.identity)
    assert entry is not None and entry.status is ArchiveStatus.KEPT, entry
    assert entry.data == data
    first_sid = w.sid(job_id, 1)
    assert first_sid is not None
    return first, first_sid


def test_failed_execution_log_outlives_its_pods_after_the_resubmit(world: World) -> None:
    w = world
    assert w.b.capabilities()[Capability.OUTPUT_RETAINED].answer is Answer.YES
    job_id = w.cluster.submit(job_spec("fail"), AGAIN)
    rank0, _ = w.running(job_id)
    w.c.control.append_log(rank0, "epoch 1 loss 0.9", "epoch 2 loss nan")
    cycles(w.c, w.sup, lambda: w.sid(job_id, 2) is not None, "resubmitted")
    first, first_sid = kept(w, job_id, Cause.EXIT, b"epoch 1 loss 0.9\nepoch 2 loss nan\n")
    w.delete_trainjob(first_sid)
    with pytest.raises(NotFound):
        list(w.b.execution_output(first_sid, first.identity))

    p = w.cli.run("logs", job_id, "--submission", "1")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "epoch 1 loss 0.9\nepoch 2 loss nan\n"
    assert "as the supervisor archived it (all of it)" in p.stderr
    p = w.cli.run("logs", job_id, "--execution", first.identity, "--json")
    assert p.returncode == 0, p.stderr
    assert [json.loads(line) for line in p.stdout.splitlines()] == [
        {"rank": 0, "stream": "stdout", "text": "epoch 1 loss 0.9\nepoch 2 loss nan\n", "archived": True}
    ]
    p = w.cli.run("logs", job_id, "--submission", "1", "--rank", "1")
    assert p.returncode == 3 and "holds rank 0's stdout only" in p.stderr, p.stderr
    p = w.cli.run("capabilities", "--json")
    assert p.returncode == 0, p.stderr
    retained = json.loads(p.stdout)["capabilities"]["OutputRetained"]
    assert retained["answer"] == "yes" and "archives rank 0's log" in retained["reason"]


def test_preempted_execution_log_is_kept_while_its_pods_terminate(world: World) -> None:
    # A preempted pod, and the failed Job's other pods, stay Terminating for their grace period (30 s, the
    # default); the supervisor's cycle that sees the execution end falls within it and reads the log.
    w = world
    job_id = w.cluster.submit(job_spec("sleep"), RESUBMIT)
    rank0, _ = w.running(job_id)
    w.c.control.append_log(rank0, "epoch 1", "checkpoint saved")
    w.c.control.preempt_pod(rank0, reason="PreemptionByScheduler")
    terminating = w.c.control.get(POD, rank0)
    assert terminating is not None and terminating["metadata"]["deletionGracePeriodSeconds"] == 30
    cycles(w.c, w.sup, lambda: w.sid(job_id, 2) is not None, "resubmitted")
    first, first_sid = kept(w, job_id, Cause.PREEMPTED, b"epoch 1\ncheckpoint saved\n")
    w.c.tick(30.0)  # the grace runs out: the pods go, and their logs with them
    assert w.c.control.pods_of(first_sid, live=False) == []
    p = w.cli.run("logs", job_id, "--execution", first.identity)
    assert p.returncode == 0 and p.stdout == "epoch 1\ncheckpoint saved\n", p.stderr


@pytest.mark.parametrize("grace", [0, 30], ids=["deleted-at-once", "seen-after-the-grace"])
def test_preempted_execution_whose_pods_went_before_a_cycle_saw_it_is_recorded_gone(world: World, grace: int) -> None:
    # rank 0 deleted with grace 0 (as `kubectl delete --force`), or no supervisor cycle within the 30 s grace:
    # by the cycle that sees the execution end, the pods have gone and their logs with them.
    w = world
    job_id = w.cluster.submit(job_spec("sleep"), RESUBMIT)
    rank0, _ = w.running(job_id)
    w.c.control.append_log(rank0, "epoch 1")
    w.c.control.preempt_pod(rank0, reason="PreemptionByScheduler", grace_seconds=grace)
    w.c.tick(float(grace))
    assert w.c.control.get(POD, rank0) is None
    cycles(w.c, w.sup, lambda: w.sid(job_id, 2) is not None, "resubmitted")
    first = w.records.get(job_id).submission(1).executions[-1]
    assert first.outcome.cause is Cause.PREEMPTED
    entry = w.records.get_output(job_id, first.identity)
    assert entry is not None and entry.status is ArchiveStatus.GONE and "has no pod" in entry.reason
    p = w.cli.run("logs", job_id, "--execution", first.identity)
    assert p.returncode == 3, p.stderr
    assert f"execution {first.identity} of job {job_id}" in p.stderr and "the archive says gone" in p.stderr


def test_a_stop_the_supervisor_makes_archives_the_running_log_first(world: World) -> None:
    w = world
    job_id = w.cluster.submit(job_spec("sleep"), RESUBMIT)
    rank0, _ = w.running(job_id)
    w.c.control.append_log(rank0, "checkpoint saved")
    job = w.records.get(job_id)
    job.stop_requested = True  # as after a `dispatch stop` whose own call did not get through
    w.records.update(job)
    cycles(w.c, w.sup, lambda: w.records.get(job_id).closed, "stopped and closed")
    assert w.c.control.pods_of(w.sid(job_id) or "") == []
    first = w.records.get(job_id).submission(1).executions[-1]
    entry = w.records.get_output(job_id, first.identity)
    assert entry is not None and entry.status is ArchiveStatus.KEPT, entry
    assert entry.data == b"checkpoint saved\n" and "read just before the supervisor stopped it" in entry.reason
    p = w.cli.run("logs", job_id)
    assert p.returncode == 0 and p.stdout == "checkpoint saved\n", p.stderr


@pytest.mark.parametrize("cut", [False, True], ids=["stream-ends", "stream-cut"])
def test_a_timed_out_execution_log_is_kept_though_its_pods_went_before_any_cycle(world: World, cut: bool) -> None:
    # At activeDeadlineSeconds the Trainer deletes the JobSet, and a program that exits on SIGTERM takes its pod
    # (and its log) with it before any supervisor cycle sees the end. Forced here: the deadline passes, every
    # rank ends by SIGTERM and its pod goes, all before the next cycle (and, cut, the log's stream broken first,
    # as the pod's deletion may break it). The follow opened when rank 0's container started read it all.
    w = world
    job_id = w.cluster.submit(job_spec("sleep", time_limit=10.0))
    pods = w.running(job_id)
    w.c.control.append_log(pods[0], "epoch 1", "epoch 2")
    keeper = w.b.keeper
    assert keeper is not None, "the supervisor's archive did not ask the backend to keep output"
    sid = w.sid(job_id)
    assert sid is not None
    until = time.monotonic() + 30.0
    # the follow opened when rank 0's container started, and reads what is written (a pod gone before its follow
    # opened, a deadline shorter than that, leaves nothing: keeper.py)
    while (keeper.kept((sid, (1, 0, 0))) or Followed("", "")).data != b"epoch 1\nepoch 2\n":
        assert time.monotonic() < until, "rank 0's log was not followed once its container ran"
        time.sleep(0.05)
    if cut:
        w.c.control.drop_watches(abrupt=True)
    w.c.tick(11.0)  # the deadline: the JobSet is deleted, its pods are Terminating
    for name in pods:
        w.c.control.fail_pod(name, exit_code=143)  # each program ends on SIGTERM: its pod goes
    w.c.tick(0.0)
    assert w.c.control.pods_of(sid, live=False) == []
    cycles(w.c, w.sup, lambda: w.records.get(job_id).closed, "the job closed")
    first = w.records.get(job_id).submission(1).executions[-1]
    assert (first.outcome.state, first.outcome.cause) == (State.FAILED, Cause.TIMEOUT)
    entry = w.records.get_output(job_id, first.identity)
    assert entry is not None and entry.status is ArchiveStatus.KEPT, entry
    assert entry.data == b"epoch 1\nepoch 2\n"
    p = w.cli.run("logs", job_id)
    assert p.returncode == 0 and p.stdout == "epoch 1\nepoch 2\n", p.stderr
    p = w.cli.run("logs", job_id, "--stderr")  # the cluster cannot, and the archive holds stdout only
    assert p.returncode == 4 and "stderr is not separate" in p.stderr, p.stderr
