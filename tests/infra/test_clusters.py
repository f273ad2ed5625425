"""Checks that the three real Slurm test clusters work through their real transports.

The clusters are started by ``scripts/slurm/up.sh`` (as root), which writes
``${DISPATCH_TEST_STATE:-/var/lib/dispatch-test}/clusters.json``. These tests read that
file and drive each cluster the way the Slurm adapter will:

* ``local``: Slurm 22.05 on this host, plain ``subprocess`` (as root);
* ``sid``: Slurm 26.05 in a Debian sid chroot, OpenSSH as the non-root user ``ada``
  with the generated key and ``StrictHostKeyChecking=yes`` against the written
  known_hosts file;
* ``trixie``: Slurm 24.11 in a Debian 13 chroot, OpenSSH as the non-root user ``grace``, the same way.

Admin actions (``scontrol hold``) go through ``clusters.json``'s ``admin.command``
(``scripts/slurm/admin.sh``), run as root on the host.

A cluster that is not up makes its tests FAIL (never skip): run ``scripts/slurm/up.sh``.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

STATE_DIR = Path(os.environ.get("DISPATCH_TEST_STATE", "/var/lib/dispatch-test"))
CLUSTERS_JSON = STATE_DIR / "clusters.json"
HINT = "run `sudo scripts/slurm/up.sh` (as root) to start both test clusters"


def _load_description() -> dict[str, Any]:
    try:
        with CLUSTERS_JSON.open() as f:
            data: dict[str, Any] = json.load(f)
    except FileNotFoundError:
        pytest.fail(f"{CLUSTERS_JSON} does not exist: the Slurm test clusters are not up; {HINT}")
    except (OSError, ValueError) as exc:
        pytest.fail(f"cannot read {CLUSTERS_JSON} ({exc}); {HINT}")
    return data


class Cluster:
    """One test cluster, reached through its own transport."""

    def __init__(self, name: str, desc: dict[str, Any], control_dir: str) -> None:
        self.name = name
        self.desc = desc
        self.transport: str = desc["transport"]
        self.default_partition: str = desc["partitions"]["default"]
        self.preempt_partition: str = desc["partitions"]["preempt"]
        self.nodes: list[str] = desc["nodes"]
        self._control_path = os.path.join(control_dir, f"cm-{name}")

    # -- transport ---------------------------------------------------------------------
    def ssh_argv(self, remote: list[str]) -> list[str]:
        d = self.desc
        return [
            "ssh",
            *d["ssh_options"],
            "-o",
            "ControlMaster=auto",
            "-o",
            f"ControlPath={self._control_path}",
            "-o",
            "ControlPersist=60",
            f"{d['user']}@{d['host']}",
            "--",
            shlex.join(remote),  # the remote side runs this through ada's shell
        ]

    def run(self, argv: list[str], check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run a Slurm command as the cluster's user, through the cluster's transport."""
        if self.transport == "local":
            env = {**os.environ, **self.desc.get("env", {})}
            cmd = argv
        elif self.transport == "ssh":
            env = dict(os.environ)
            cmd = self.ssh_argv(argv)
        else:  # pragma: no cover - a clusters.json this file does not know
            pytest.fail(f"unknown transport {self.transport!r} in {CLUSTERS_JSON}")
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        if check and proc.returncode != 0:
            pytest.fail(
                f"[{self.name}] {shlex.join(argv)} failed (rc={proc.returncode}):\n"
                f"stdout: {proc.stdout}\nstderr: {proc.stderr}"
            )
        return proc

    def admin(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run an admin command as root on the host (clusters.json 'admin.command')."""
        cmd = [*self.desc["admin"]["command"], *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if check and proc.returncode != 0:
            pytest.fail(f"[{self.name}] admin {shlex.join(args)} failed (rc={proc.returncode}): {proc.stderr}")
        return proc

    def close(self) -> None:
        if self.transport == "ssh" and os.path.exists(self._control_path):
            subprocess.run(
                ["ssh", "-o", f"ControlPath={self._control_path}", "-O", "exit", "placeholder"],
                capture_output=True,
                timeout=10,
            )

    # -- Slurm helpers -----------------------------------------------------------------
    def sbatch(self, *args: str) -> int:
        out = self.run(["sbatch", "--parsable", *args]).stdout.strip()
        return int(out.split(";")[0])

    def cancel(self, *job_ids: int) -> None:
        if job_ids:
            self.run(["scancel", *map(str, job_ids)], check=False)

    def squeue_state(self, job_id: int) -> tuple[str, str] | None:
        """(state, reason) from squeue, or None once the job has left the controller."""
        proc = self.run(["squeue", "-h", "-t", "all", "-j", str(job_id), "-o", "%T|%r"], check=False)
        line = proc.stdout.strip()
        if proc.returncode != 0 or not line:
            return None
        state, _, reason = line.partition("|")
        return state, reason

    def jobs_on(self, *nodes: str) -> str:
        """What squeue shows on ``nodes`` now (id, name, user, state, nodes), for a failure message."""
        proc = self.run(["squeue", "-h", "-w", ",".join(nodes), "-o", "%i %j %u %T %N"], check=False)
        return "; ".join(proc.stdout.split("\n")).strip("; ") or "none"

    def sacct_records(self, job_id: int, duplicates: bool = False) -> list[dict[str, str]]:
        fields = ["JobID", "State", "ExitCode", "NodeList", "Partition"]
        argv = ["sacct", "-n", "-P", "-X", "-j", str(job_id), "-o", ",".join(fields)]
        if duplicates:
            argv.append("-D")
        out = self.run(argv).stdout
        return [dict(zip(fields, line.split("|"), strict=False)) for line in out.splitlines() if line]

    def job_state(self, job_id: int) -> str:
        """Current state: squeue while the controller knows the job, else sacct."""
        sq = self.squeue_state(job_id)
        if sq is not None:
            return sq[0]
        recs = self.sacct_records(job_id)
        return recs[-1]["State"].split()[0] if recs else "UNKNOWN"

    def read_remote_file(self, path: str) -> str:
        if self.transport == "local":
            return Path(path).read_text()
        return self.run(["cat", path]).stdout

    def remove_remote_file(self, path: str) -> None:
        if self.transport == "local":
            Path(path).unlink(missing_ok=True)
        else:
            self.run(["rm", "-f", path], check=False)

    def output_dir(self) -> str:
        if self.transport == "local":
            d = tempfile.mkdtemp(prefix="dispatch-infra-")
            os.chmod(d, 0o755)
            return d
        home = self.run(["sh", "-c", 'echo "$HOME"']).stdout.strip()
        return home


def wait_for(what: str, predicate: Callable[[], Any], timeout: float, interval: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what} (last value: {last!r})")


TERMINAL = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "OUT_OF_MEMORY",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
}


def wait_terminal(cl: Cluster, job_id: int, timeout: float = 60) -> str:
    def done() -> str | None:
        state = cl.job_state(job_id)
        return state if state in TERMINAL else None

    result: str = wait_for(f"job {job_id} on {cl.name} to finish", done, timeout)
    return result


@pytest.fixture(scope="module")
def description() -> dict[str, Any]:
    return _load_description()


@pytest.fixture(scope="module")
def control_dir() -> Iterator[str]:
    # short path: ssh ControlPath sockets must fit in sun_path (108 bytes)
    with tempfile.TemporaryDirectory(prefix="dsp-", dir="/tmp") as d:
        yield d


@pytest.fixture(
    scope="module",
    params=[
        pytest.param("local", marks=pytest.mark.slurm_local),
        pytest.param("sid", marks=pytest.mark.slurm_sid),
        pytest.param("trixie", marks=pytest.mark.slurm_trixie),
    ],
)
def cluster(request: pytest.FixtureRequest, description: dict[str, Any], control_dir: str) -> Iterator[Cluster]:
    name: str = request.param
    if name not in description:
        pytest.fail(f"{CLUSTERS_JSON} has no {name!r} cluster; {HINT}")
    cl = Cluster(name, description[name], control_dir)
    if cl.transport == "local" and os.geteuid() != 0:
        pytest.fail("the local cluster's accounting only knows root: run these tests as root")
    proc = cl.run(["scontrol", "ping"], check=False, timeout=30)
    if proc.returncode != 0 or "UP" not in proc.stdout:
        pytest.fail(
            f"the {name} Slurm cluster is not reachable ({shlex.join(['scontrol', 'ping'])} over "
            f"{cl.transport}: rc={proc.returncode}, {proc.stdout.strip()} {proc.stderr.strip()}); {HINT}"
        )
    yield cl
    cl.close()


def test_version_matches_description(cluster: Cluster) -> None:
    out = cluster.run(["sbatch", "--version"]).stdout.strip()
    # Debian builds print "slurm-wlm X.Y.Z"
    assert out.split()[-1] == cluster.desc["version"], out
    expected_major = {"local": "22.05.", "sid": "26.05.", "trixie": "24.11."}[cluster.name]
    assert cluster.desc["version"].startswith(expected_major)


def test_hold_release_two_node_job(cluster: Cluster) -> None:
    outdir = cluster.output_dir()
    tag = uuid.uuid4().hex[:8]
    out = f"{outdir}/infra-{tag}-%j.out"
    job = cluster.sbatch(
        "--hold",
        "-J",
        f"infra-two-{tag}",
        "-p",
        cluster.default_partition,
        "-N",
        "2",
        "--ntasks-per-node=1",
        "-t",
        "5",
        "-o",
        out,
        "--wrap",
        "srun -l sh -c 'echo node=$SLURMD_NODENAME'",
    )
    try:
        assert cluster.squeue_state(job) == ("PENDING", "JobHeldUser")
        cluster.run(["scontrol", "release", str(job)])
        assert wait_terminal(cluster, job, timeout=60) == "COMPLETED"
        text = cluster.read_remote_file(out.replace("%j", str(job)))
        seen = sorted(line.split("node=")[1].strip() for line in text.splitlines() if "node=" in line)
        assert len(seen) == 2 and len(set(seen)) == 2, text
        assert set(seen) <= set(cluster.nodes), text

        # sacct finds it (accounting lags the controller by a few seconds)
        def accounted() -> list[dict[str, str]] | None:
            recs = cluster.sacct_records(job)
            return recs if recs and recs[-1]["State"] == "COMPLETED" else None

        recs = wait_for(f"sacct to report job {job} COMPLETED", accounted, timeout=30)
        assert recs[-1]["ExitCode"] == "0:0"
    finally:
        cluster.cancel(job)
        cluster.remove_remote_file(out.replace("%j", str(job)))
        if cluster.transport == "local":
            os.rmdir(outdir)


def test_squeue_and_sacct_json(cluster: Cluster) -> None:
    job = cluster.sbatch("--hold", "-J", "infra-json", "-o", "/dev/null", "--wrap", "true")
    try:
        data = json.loads(cluster.run(["squeue", "--json"]).stdout)
        # 22.05 (openapi v0.0.38) ignores -j/-t filters: always filter on the client side
        jobs = [j for j in data["jobs"] if j["job_id"] == job]
        assert len(jobs) == 1, [j["job_id"] for j in data["jobs"]]
        state = jobs[0]["job_state"]
        # 22.05: a string; 26.05 (data_parser v0.0.4x): a list of flags
        assert (state if isinstance(state, list) else [state])[0] == "PENDING"
        assert jobs[0]["state_reason"] == "JobHeldUser"
        release = data["meta"]["slurm" if "slurm" in data["meta"] else "Slurm"]["release"]
        assert release == cluster.desc["version"]
    finally:
        cluster.cancel(job)
    assert wait_terminal(cluster, job, timeout=30) == "CANCELLED"
    sacct = json.loads(cluster.run(["sacct", "--json", "-j", str(job)]).stdout)
    assert [j["job_id"] for j in sacct["jobs"]] == [job]


def test_admin_hold_and_release(cluster: Cluster) -> None:
    job = cluster.sbatch("--hold", "-J", "infra-adminhold", "-o", "/dev/null", "--wrap", "true")
    try:
        cluster.admin("scontrol", "hold", str(job))
        assert cluster.squeue_state(job) == ("PENDING", "JobHeldAdmin")
        if cluster.desc["user"] != "root":
            # a normal user cannot release an admin hold
            proc = cluster.run(["scontrol", "release", str(job)], check=False)
            assert proc.returncode != 0
            assert cluster.squeue_state(job) == ("PENDING", "JobHeldAdmin")
        cluster.admin("scontrol", "release", str(job))
        assert wait_terminal(cluster, job, timeout=60) == "COMPLETED"
    finally:
        cluster.cancel(job)


def test_preempt_partition_preempts(cluster: Cluster) -> None:
    """A job in the preempt partition preempts low-partition jobs (PreemptMode=REQUEUE).

    With JobRequeue=0 a plain job ends PREEMPTED; a --requeue job goes back to PENDING.
    The high job asks for one CPU on each node that only our exclusive low jobs use, so
    nobody else's jobs get preempted.
    """
    n_a, n_b = cluster.nodes[0], cluster.nodes[1]
    low_plain = cluster.sbatch(
        "-J",
        "infra-low-plain",
        "-p",
        cluster.default_partition,
        "-w",
        n_a,
        "--exclusive",
        "-o",
        "/dev/null",
        "--wrap",
        "sleep 300",
    )
    low_rq = cluster.sbatch(
        "-J",
        "infra-low-requeue",
        "-p",
        cluster.default_partition,
        "-w",
        n_b,
        "--exclusive",
        "--requeue",
        "-o",
        "/dev/null",
        "--wrap",
        "sleep 300",
    )
    high = None
    try:
        # The clusters are shared with the other test groups: an exclusive job waits until the node's current
        # jobs end (a 2-node training run takes about a minute), so the wait is long and names what blocks it.
        for j in (low_plain, low_rq):
            wait_for(
                f"low job {j} to run (on {n_a},{n_b} when the wait began: {cluster.jobs_on(n_a, n_b)})",
                lambda j=j: cluster.job_state(j) == "RUNNING",
                timeout=240,
            )
        high = cluster.sbatch(
            "-J",
            "infra-high",
            "-p",
            cluster.preempt_partition,
            "-w",
            f"{n_a},{n_b}",
            "-N",
            "2",
            "--ntasks-per-node=1",
            "-o",
            "/dev/null",
            "--wrap",
            "sleep 1",
        )
        assert wait_terminal(cluster, low_plain, timeout=45) == "PREEMPTED"
        assert wait_terminal(cluster, high, timeout=45) == "COMPLETED"

        def requeued() -> bool:
            recs = cluster.sacct_records(low_rq, duplicates=True)
            return any(r["State"] == "PREEMPTED" for r in recs) and cluster.job_state(low_rq) != "PREEMPTED"

        wait_for(f"requeueable job {low_rq} to be preempted and requeued", requeued, timeout=30)
        show = cluster.run(["scontrol", "show", "job", str(low_rq)]).stdout
        assert "Restarts=1" in show, show
    finally:
        cluster.cancel(low_plain, low_rq, *([high] if high else []))


def test_memory_limit(cluster: Cluster) -> None:
    """A job over its --mem ends OUT_OF_MEMORY where clusters.json says memory is enforced
    (cgroup v1 memory controller: the host cluster, and the sid chroot through its own
    memory sub-hierarchy). Without cgroups (e.g. the sid chroot on a cgroup v2 host,
    CgroupPlugin=disabled) nothing limits the job and it completes."""
    job = cluster.sbatch(
        "-J",
        "infra-oom",
        "--mem=100M",
        "-o",
        "/dev/null",
        "--wrap",
        "dd if=/dev/zero of=/dev/null bs=400M count=1",
    )
    try:
        state = wait_terminal(cluster, job, timeout=60)
    finally:
        cluster.cancel(job)
    if cluster.desc["memory_enforced"]:
        assert state == "OUT_OF_MEMORY"
    else:
        assert state == "COMPLETED"
