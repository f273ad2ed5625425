"""The training proofs on real pods: examples/train_ddp.py through dispatch's Kubeflow adapter, on the two real
kubelets of scripts/k8s/nodes-up.sh, in Kueue mode (the real Kueue, JobSet, Trainer and Job controllers), under a
real supervisor process with examples/rules/training.yaml.

What differs from the Slurm cases (tests/training/harness.py), and why:

* the ranks run the host's Python and torch and the repository mounted read-only into the ``host-usr`` image
  (tests/kubeflow/realpods_harness.py); the checkpoint directory, the output and the final parameters are in the
  cluster's shared ``hostPath`` directory, which both nodes (and this process) see;
* Kubeflow keeps no output file (``dispatch.Output`` is Slurm's): each rank's argv is wrapped in ``/bin/sh -c
  'exec "$@" >OUT/<execution>.rank<R>.out 2>&1'`` (``exec``: the rank is still the process the kubelet signals);
* Kubernetes has no accounting: "no two executions overlapped" is read from the ranks' own lines (the first and
  last time each execution's ranks wrote, on this host's clock), not from sacct;
* a preemption is Kueue's (a TrainJob of a higher WorkloadPriorityClass that needs the ClusterQueue's whole
  quota); the rules resubmit, so the next execution is a new TrainJob that Kueue admits once the preemptor has
  ended.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dispatch
from dispatch.extensions import CessationWarning, Image, SharedCheckpoint
from dispatch.kubeflow import Mode
from dispatch.kubeflow.extensions import RuntimeRef
from dispatch.records import SQLiteRecords
from dispatch.rules import RuleSet
from dispatch.spec import JobSpec

from ..kubeflow.realpods_harness import RUNTIME, RealPodsCluster, read_control_plane, real_cluster_in
from .harness import EVERY, EXAMPLE, RULES, STEPS, Case, Result

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "kubeflow"
WRAP = 'exec "$@" >"$0/$DISPATCH_EXECUTION.rank$RANK.out" 2>&1'
"""The rank's output into a file per execution and rank (``$0``: the output directory)."""


def open_cluster(tmp: Path) -> Iterator[RealPodsCluster]:
    """The real-pods cluster in Kueue mode (a generator: the first item, then the clean-up on close)."""
    return real_cluster_in(read_control_plane(), tmp, Mode.KUEUE)


class KubeflowCase(Case):
    """One training job on the real pods of ``real``: submit, supervise, inject, wait, read."""

    def __init__(
        self, real: RealPodsCluster, label: str, *, delay: float = 0.0, warning: float = 20.0, steps: int = STEPS
    ) -> None:  # Case.__init__ reads a Slurm cluster's description: not called
        self.real = real
        self.cluster = CLUSTER
        self.root = ""
        self.dir = real.shared / f"train-{label}-{uuid.uuid4().hex[:6]}"
        self.dir.mkdir(mode=0o777)
        os.chmod(self.dir, 0o777)
        self.ckpt = self.dir / "ckpt"
        self.out = self.dir / "out"
        self.out.mkdir(mode=0o777)
        os.chmod(self.out, 0o777)
        self.params = self.dir / "final.params"
        self.db = self.dir / "records.db"
        self.steps = steps
        self.delay = delay
        self.time_limit = None
        self.warning = warning
        self.python = sys.executable
        self.example = str(EXAMPLE)
        self.env = {"PYTHONPATH": str(ROOT / "src")}
        self.supervisors: list[subprocess.Popen[bytes]] = []
        self.started = 0.0
        self.job_id = ""
        self.lost_for: float | None = None
        base = real.base
        self.settings: dict[str, Any] = {
            "kubeconfig": {"path": base.cp["kubeconfig"]},
            "namespace": base.ns,
            "mode": base.mode.value,
            "timeouts": {"apiserverRequest": "20s"},
            "preflight": {"probeWatch": "2s"},
            "supervised": True,
        }
        if base.mode is Mode.KUEUE:
            self.settings |= {"localQueue": "lq", "admissionCheckController": base.admission_controller}

    def spec(self) -> JobSpec:
        argv = ("/bin/sh", "-c", WRAP, str(self.out), self.python, self.example, "--steps", str(self.steps),
                "--checkpoint-every", str(EVERY), "--step-delay", str(self.delay),
                "--out", str(self.params))  # fmt: skip
        return JobSpec(
            argv,
            nodes=2,
            procs_per_node=1,
            env=self.env,
            extensions=(
                Image(self.real.base.cp["real_images"]["host_usr"]),
                RuntimeRef(RUNTIME, runtime_kind="TrainingRuntime"),
                SharedCheckpoint(path=str(self.ckpt)),
                CessationWarning(seconds=self.warning),
            ),
        )

    def submit(self) -> str:
        self.started = time.time()
        with dispatch.open("kubeflow", adapter=self.settings, records=SQLiteRecords(self.db)) as cluster:
            self.job_id = cluster.operator.submit(self.spec(), rules=RuleSet.load(RULES))
        return self.job_id

    def supervise(self, *extra: str) -> subprocess.Popen[bytes]:
        log = open(self.dir / f"supervisor-{len(self.supervisors)}.log", "wb")  # noqa: SIM115 - the child's
        proc = subprocess.Popen(
            [sys.executable, "-m", "dispatch.supervise", "--adapter", "kubeflow", "--settings",
             json.dumps(self.settings), "--store", str(self.db), "--poll", "1", "--lease-ttl", "8", *extra],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()
        self.supervisors.append(proc)
        return proc

    def trainjob(self) -> str:
        """The TrainJob of the job's current submission."""
        sub = self.record().current
        assert sub is not None and sub.scheduler_id, self.describe()
        return sub.scheduler_id

    def logs(self) -> dict[str, list[dict[str, Any]]]:
        """Every JSON line the ranks wrote, per execution (``<execution>.rank<R>.out``)."""
        out: dict[str, list[dict[str, Any]]] = {}
        for path in sorted(self.out.glob("*.rank*.out")):
            execution = path.name.rsplit(".rank", 1)[0]
            lines = out.setdefault(execution, [])
            for raw in path.read_text(errors="replace").splitlines():
                if raw.startswith("{"):
                    try:
                        lines.append(json.loads(raw))
                    except ValueError:
                        continue
        return out

    def finish(self, interrupted_at: list[float] | None = None) -> Result:
        self.wait(self.closed, "the job is closed", timeout=300)
        wall = time.time() - self.started
        self.stop_supervisors()
        rec = self.record()
        logs = self.logs()
        done = [ln["t"] for lines in logs.values() for ln in lines if ln.get("event") == "done"]
        spans = [(e, "ran", min(ts), max(ts)) for e, lines in logs.items() if (ts := [ln["t"] for ln in lines])]
        return Result(
            job=rec,
            params=self.params.read_bytes() if self.params.exists() else b"",
            logs=logs,
            wall=(max(done) - self.started) if done else wall,
            intervals=spans,
            interrupted_at=interrupted_at or [],
        )

    def cleanup(self) -> None:
        """Stop the supervisors and delete the job's TrainJobs (the namespace goes with the cluster)."""
        self.stop_supervisors()
        if self.job_id:
            try:
                for s in self.record().submissions:
                    if s.scheduler_id:
                        self.real.base.k("delete", "trainjob", "-n", self.real.ns, s.scheduler_id,
                                         "--ignore-not-found", "--wait=false")  # fmt: skip
            except Exception:
                pass


def reference(real: RealPodsCluster, attempts: int = 2) -> Result:
    """The uninterrupted run the others are compared with (tests/training/scenarios.py's reference)."""
    interrupted = []
    for _ in range(attempts):
        case = KubeflowCase(real, "reference")
        try:
            case.submit()
            case.supervise()
            res = case.finish()
            assert res.job.submissions[-1].outcome is not None
            assert res.job.submissions[-1].outcome.state.value == "succeeded", case.describe()
            assert len(res.params) > 0, case.describe()
            res.assert_no_overlap()
            if not res.interruptions():
                return res
            interrupted.append(res.interruptions())
        finally:
            case.cleanup()
    raise AssertionError(f"no uninterrupted reference run in {attempts} attempts: {interrupted}")


def _check(case: KubeflowCase, res: Result, ref: bytes, cause: str) -> None:
    assert cause in res.causes, (res.causes, case.describe())
    assert res.job.submissions[-1].outcome is not None
    assert res.job.submissions[-1].outcome.state.value == "succeeded", case.describe()
    assert len(res.executions) >= 2, res.executions
    assert res.params == ref, "the final parameters differ from the uninterrupted run's"
    res.assert_no_overlap()


def preempted(real: RealPodsCluster, ref: bytes) -> Result:
    """Kueue preempts the job's Workload for a TrainJob of a higher priority that needs the whole quota; the
    ranks get SIGTERM (their pods deleted), checkpoint at the step they agree on and exit; the supervisor
    resubmits and the next execution resumes from that checkpoint."""
    case = KubeflowCase(real, "preempted", delay=0.1)
    try:
        case.submit()
        case.supervise()
        case.wait(lambda: case.step_reached() >= 40, "the first execution reaches step 40")
        at = time.time()
        real.base.preempt(case.trainjob())
        res = case.finish([at])
        _check(case, res, ref, "preempted")
        assert any(s is not None and s >= 40 and s == r for s, r in res.handoffs()), res.handoffs()
        return res
    finally:
        case.cleanup()


def supervisor_killed(real: RealPodsCluster, ref: bytes) -> Result:
    """Kueue preempts the job; the supervisor is SIGKILLed in the middle of the recovery (the new submission is
    created and recorded, its gate not yet opened); a new supervisor takes the job over and finishes it."""
    case = KubeflowCase(real, "supkilled", delay=0.1)
    try:
        case.submit()
        first = case.supervise("--test-pause-before-intent", "open")
        case.wait(lambda: case.step_reached() >= 40, "the first execution reaches step 40")
        at = time.time()
        real.base.preempt(case.trainjob())
        case.wait(lambda: b'"pausing"' in (case.dir / "supervisor-0.log").read_bytes(), "the supervisor pauses", 120)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        rec = case.record()
        assert len(rec.submissions) == 2 and rec.submissions[1].gate.value != "open", case.describe()
        case.supervise()
        res = case.finish([at])
        _check(case, res, ref, "preempted")
        assert len(res.job.submissions) == 2, case.describe()  # taken over, not submitted a third time
        return res
    finally:
        case.cleanup()


NODE_LOST_DELAY = 1.5
"""Seconds per step of the node-lost case: the node is declared lost about 75 s after its kubelet stops (the
controller-manager's 60 s grace period from the last lease renewal, then the 10 s toleration), and the first
execution must still be running then."""


def node_lost(real: RealPodsCluster, ref: bytes) -> Result:
    """The kubelet of the node where rank 1 runs stops answering (SIGSTOP: the test's own fault, undone with
    SIGCONT in any case); once the node lifecycle controller has evicted the pod and the supervisor has decided on
    the node loss, the kubelet is let go again. The next execution needs both real nodes (one rank per node), so
    it runs once the node is back."""
    case = KubeflowCase(real, "nodelost", delay=NODE_LOST_DELAY)
    pid = 0
    try:
        case.submit()
        case.supervise()
        case.wait(lambda: case.step_reached() >= 15, "the first execution reaches step 15")
        starts = [ln for lines in case.logs().values() for ln in lines if ln.get("event") == "start"]
        node = next(ln["node"] for ln in starts if ln.get("rank") == 1)
        pid = int(next(n for n in real.nodes if n["name"] == node)["kubelet"]["pid"])
        assert Path(f"/proc/{pid}/comm").read_text().strip() == "kubelet", f"{pid} is not {node}'s kubelet"
        at = time.time()
        os.kill(pid, signal.SIGSTOP)
        try:
            case.wait(lambda: "node-lost" in [d.cause.value for d in case.record().decisions], "node-lost", 180, 1.0)
            case.lost_for = time.time() - at
        finally:
            os.kill(pid, signal.SIGCONT)
            pid = 0
        res = case.finish([at])
        _check(case, res, ref, "node-lost")
        return res
    finally:
        if pid:
            os.kill(pid, signal.SIGCONT)
        case.cleanup()


def plain_wall(real: RealPodsCluster, delay: float) -> float:
    """The same training as a TrainJob of the same runtime created with kubectl (no dispatch, no Kueue: no queue
    label), uninterrupted: from its creation to rank 0's "done" line, seconds. The ranks take the torch
    runtime's ``PET_*`` as the variables the example reads."""
    base = real.base
    name = f"plain-{uuid.uuid4().hex[:6]}"
    d = real.shared / name
    d.mkdir(mode=0o777)
    os.chmod(d, 0o777)
    env = (f"export RANK=$PET_NODE_RANK WORLD_SIZE=$PET_NNODES MASTER_ADDR=$PET_MASTER_ADDR "
           f"MASTER_PORT=$PET_MASTER_PORT PYTHONPATH={ROOT / 'src'}; exec \"$@\"")  # fmt: skip
    argv = [sys.executable, str(EXAMPLE), "--steps", str(STEPS), "--checkpoint-every", str(EVERY),
            "--step-delay", str(delay), "--out", f"{d}/final.params", "--checkpoint-dir", f"{d}/ckpt"]  # fmt: skip
    doc = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": base.ns},
        "spec": {
            "runtimeRef": {"name": RUNTIME, "kind": "TrainingRuntime", "apiGroup": "trainer.kubeflow.org"},
            "trainer": {"numNodes": 2, "command": ["/bin/sh", "-c", env, "plain", *argv]},
        },
    }
    t = time.time()
    base.apply(doc)
    end = time.time() + 300
    while True:
        conds = json.loads(base.k("get", "trainjob", "-n", base.ns, name, "-o", "json")).get("status", {})
        types = {c["type"] for c in conds.get("conditions") or [] if c.get("status") == "True"}
        if "Complete" in types:
            break
        assert "Failed" not in types and time.time() < end, f"the plain TrainJob {name} did not complete: {conds}"
        time.sleep(1)
    pod = base.pods_of(name)[0]["metadata"]["name"]
    events = [json.loads(x) for x in base.k("logs", "-n", base.ns, pod).splitlines() if x.startswith('{"t"')]
    (done,) = [e for e in events if e.get("event") == "done"]
    base.k("delete", "trainjob", "-n", base.ns, name, "--wait=false")
    return float(done["t"]) - t
