"""A supervisor cut off from PostgreSQL by the network, on the real local Slurm cluster.

sup-a runs ``python -m dispatch.supervise`` in a network namespace of its own (tests/faults/netns.py), its clock two
minutes behind: it reaches slurmctld and slurmdbd through the veth, and PostgreSQL through a relay on the host's end
of it. sup-b runs on the host, its clock two minutes ahead. With four running jobs shared between them, sup-a's
packets to and from PostgreSQL are dropped (both ways) for longer than a lease, then let through again. sup-b takes
every job over once sup-a's leases ran out by the store's clock, and never before; sup-a, its connection hung
meanwhile, makes no scheduler call from the cut on. Then: no job lost, none run twice (Slurm's accounting: one
object per submission marker), every job ends with a cause.

Needs root, the host Slurm cluster (``sudo scripts/slurm/up.sh``) and PostgreSQL (``scripts/postgres-up.sh``);
about a minute.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.faults.netns import Netns, available

import dispatch
from dispatch.errors import OutcomeUnknown, Unavailable
from dispatch.outcome import Cause, State
from dispatch.records.model import JobRecord
from dispatch.records.postgres import PostgresRecords
from dispatch.spec import JobSpec

pytestmark = [pytest.mark.slurm_local, pytest.mark.postgres]

SRC = Path(os.environ.get("DISPATCH_TEST_SRC", Path(__file__).resolve().parents[2] / "src"))
DSN = os.environ.get("DISPATCH_TEST_POSTGRES", "host=127.0.0.1 dbname=dispatch_test user=postgres")
CLUSTERS = Path(os.environ.get("DISPATCH_TEST_STATE", "/var/lib/dispatch-test")) / "clusters.json"
POLL, TTL, CUT = 1.0, 6.0, 15.0
SKEW = 120.0
"""sup-a's clock is this far behind the host's, sup-b's this far ahead (``--test-clock-offset``)."""
ACTIONS = {"start", "open", "stop_job", "hold", "release", "requeue", "readmit"}


def local_cluster() -> dict[str, Any]:
    if not CLUSTERS.exists():
        pytest.fail(f"{CLUSTERS} is missing: run `sudo scripts/slurm/up.sh`")
    desc: dict[str, Any] = json.loads(CLUSTERS.read_text())["local"]
    r = subprocess.run([*desc["admin"]["command"], "scontrol", "ping"], capture_output=True, text=True)
    if r.returncode != 0 or "UP" not in r.stdout:
        pytest.fail(f"the local Slurm cluster does not answer ({r.stderr.strip()}): run `sudo scripts/slurm/up.sh`")
    return desc


def slurm_ports(desc: dict[str, Any]) -> list[int]:
    """The ports of slurmctld and slurmdbd the cluster's slurm.conf names (both listen on every address)."""
    conf = Path(desc.get("env", {}).get("SLURM_CONF", "/etc/slurm/slurm.conf")).read_text()

    def port(key: str, default: int) -> int:
        m = re.search(rf"^{key}=(\d+)", conf, re.M | re.I)
        return int(m.group(1)) if m else default

    return [port("SlurmctldPort", 6817), port("AccountingStoragePort", 6819)]


def dsn_port() -> int:
    m = re.search(r"port=(\d+)", DSN)
    return int(m.group(1)) if m else 5432


class Proc:
    """One supervisor process and its JSON lines."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONPATH=str(SRC))
            )

    def lines(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                out.append({"raw": line})
        return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


class World:
    def __init__(self, desc: dict[str, Any], ns: Netns, tmp: Path) -> None:
        self.desc, self.ns, self.tmp = desc, ns, tmp
        self.settings = {
            "transport": "local",
            "defaults": {"partition": desc["partitions"]["default"], "account": desc["account"]},
            "timeouts": {"call": "12s", "script": "25s", "connect": "5s"},
        }
        self.schema = f"nf_{secrets.token_hex(4)}"
        try:
            self.records = PostgresRecords(DSN, schema=self.schema)
        except Unavailable as exc:
            pytest.fail(f"{exc}\nstart PostgreSQL (scripts/postgres-up.sh) or set DISPATCH_TEST_POSTGRES")
        self.cluster = dispatch.open("slurm", dispatch.Config(adapter=self.settings, records=self.records, name="nf"))
        for port in slurm_ports(desc):
            ns.forward(port)
        self.relay = ns.relay(dsn_port())
        self.procs: list[Proc] = []
        self.t0 = time.time()

    def supervisor(self, owner: str, *, inside: bool) -> Proc:
        dsn = f"host={self.ns.host_ip} port={self.relay} dbname=dispatch_test user=postgres" if inside else DSN
        argv = [sys.executable, "-m", "dispatch.supervise", "--adapter", "slurm", "--settings",
                json.dumps(self.settings), "--records", dsn, "--schema", self.schema, "--cluster", "nf", "--owner",
                owner, "--poll", str(POLL), "--lease-ttl", str(TTL), "--trace-calls",
                "--test-clock-offset", str(-SKEW if inside else SKEW)]  # fmt: skip
        p = Proc(self.ns.command(argv) if inside else argv, self.tmp / f"{owner}.jsonl")
        self.procs.append(p)
        return p

    def submit(self) -> str:
        spec = JobSpec(command=("sleep", "30"), nodes=1, name="nf-test", time_limit=300)
        try:
            return self.cluster.submit(spec)
        except OutcomeUnknown as exc:  # a supervisor took the lease mid-submit: it carries the start on
            return str(exc.job_id)

    def jobs(self) -> list[JobRecord]:
        return self.records.jobs(active_only=False)

    def wait(self, pred: Callable[[list[JobRecord]], bool], timeout: float, what: str) -> float:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if pred(self.jobs()):
                return time.time()
            time.sleep(0.3)
        raise AssertionError(f"no {what} within {timeout}s: {[j.to_json() for j in self.jobs()]}")

    def objects_per_marker(self) -> dict[str, set[str]]:
        markers = {s.marker for j in self.jobs() for s in j.submissions}
        out: dict[str, set[str]] = {m: set() for m in markers}
        start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(self.t0 - 60))
        deadline = time.time() + 20  # sacct lags the controller by a few seconds
        while True:
            r = subprocess.run(
                [*self.desc["admin"]["command"], "sacct", "-a", "-X", "-n", "-P", "--delimiter=\x1f", "-S", start,
                 "-o", "JobIDRaw,JobName%200,Comment%300,State"],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            for line in r.stdout.splitlines():
                row = line.split("\x1f")
                for m in markers:
                    if len(row) == 4 and (m in row[1] or m in row[2]):
                        out[m].add(row[0])
            if all(out.values()) or time.time() > deadline:
                return out
            time.sleep(1)

    def close(self) -> None:
        for p in self.procs:
            p.stop()
        ids = [sid for j in self.jobs() for s in j.submissions for sid in [s.scheduler_id, *s.strays] if sid]
        if ids:
            subprocess.run([*self.desc["admin"]["command"], "scancel", *ids], capture_output=True)
        self.cluster.close()
        self.records.drop()
        self.records.close()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    desc = local_cluster()
    why = available()
    if why is not None:
        pytest.fail(f"network namespaces do not work here: {why}")
    with Netns("part") as ns:
        w = World(desc, ns, tmp_path)
        try:
            yield w
        finally:
            w.close()


def test_a_supervisor_cut_off_from_postgres_is_taken_over_and_makes_no_call(world: World) -> None:
    a = world.supervisor("sup-a", inside=True)
    ids = [world.submit() for _ in range(4)]
    world.wait(lambda js: all(j.lease and j.lease.owner == "sup-a" for j in js), 30, "sup-a owning every job")
    b = world.supervisor("sup-b", inside=False)
    world.wait(lambda js: any(j.lease and j.lease.owner == "sup-b" for j in js), 30, "sup-b taking its share")
    cut_at = time.time()
    world.ns.cut(world.relay)  # sup-a's packets to and from PostgreSQL are dropped, both ways
    took = world.wait(
        lambda js: all(j.lease and j.lease.owner == "sup-b" for j in js), TTL + 4 * POLL + 10, "sup-b owning all"
    )
    held = {j.id: j.lease.token for j in world.jobs() if j.lease}
    time.sleep(max(0.0, cut_at + CUT - time.time()))
    world.ns.heal()
    healed = time.time()
    world.wait(lambda js: all(j.closed for j in js), 90, "every job closed")
    time.sleep(2 * POLL)  # sup-a's connection comes back (TCP retransmits): let it run a cycle or two
    a.stop()
    b.stop()

    jobs = {j.id: j for j in world.jobs()}
    assert sorted(jobs) == sorted(ids)  # none lost
    for j in jobs.values():
        assert j.state is State.SUCCEEDED and j.cause is Cause.EXIT, (j.id, j.state, j.cause)  # ended with a cause
        assert len(j.submissions) == 1, j.to_json()  # none resubmitted: nothing failed but the network
        assert j.lease is not None and j.lease.token >= held[j.id], j.to_json()
    per_marker = world.objects_per_marker()
    assert all(len(objs) == 1 for objs in per_marker.values()), per_marker  # none run twice
    late = [rec for rec in a.lines() if rec.get("call") in ACTIONS and float(rec.get("at", 0)) >= cut_at]
    assert not late, late  # sup-a, cut off, made no scheduler call from the cut on (its trace is on store time)
    # sup-b, its clock two minutes ahead, took no lease of sup-a's before it ran out by the store's clock: sup-a's
    # last renewal before the cut left it at least half a TTL (less a poll), so a takeover came no sooner (a lease
    # sup-a gave up, its share once sup-b joined, may be taken at once)
    early = []
    for j in jobs.values():
        leases = [e for e in world.records.events(j.id) if e.kind == "lease"]
        for before, e in itertools.pairwise(leases):
            given_up = before.data.get("owner") is None
            taken = e.data.get("owner") == "sup-b" and e.data.get("from") == "sup-a"
            if taken and not given_up and e.at < cut_at + TTL / 2 - POLL:
                early.append((j.id, round(e.at - cut_at, 2)))
    assert not early, early
    errors = sum(1 for r in a.lines() if r.get("event") == "cycle-error")
    print(
        f"\ntakeover of all four {took - cut_at:.1f}s after the cut (TTL {TTL:g}s, poll {POLL:g}s); "
        f"cut {healed - cut_at:.1f}s; sup-a cycle errors: {errors}"
    )
