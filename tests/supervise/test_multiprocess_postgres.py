"""Several supervisor processes on one PostgreSQL store, supervising jobs that live outside any one process: on the
real local Slurm cluster (``slurm``) and in the file-backed ``local`` adapter's state directory (``local``).

* a supervisor killed with SIGKILL loses its leases, and another process takes its jobs over within
  ``lease TTL + poll + margin`` (measured, asserted, printed);
* a supervisor paused with SIGSTOP just before writing an intent, resumed after its lease was taken over, has
  its write refused (Conflict: the record moved and its fencing token is stale) and makes no scheduler call;
* no submission is created twice (checked against Slurm's accounting).

Needs PostgreSQL (``DISPATCH_TEST_POSTGRES``, default ``host=127.0.0.1 dbname=dispatch_test user=postgres``) and, for
``slurm``, the host Slurm cluster (``sudo scripts/slurm/up.sh``); fails loudly, naming the command, when one is
missing. An adapter that cannot be opened fails the test, naming it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import dispatch
from dispatch.errors import ConfigError, DispatchError, OutcomeUnknown, Unavailable
from dispatch.records.model import JobRecord
from dispatch.records.postgres import PostgresRecords
from dispatch.registry import adapter
from dispatch.spec import JobSpec

pytestmark = [pytest.mark.postgres]

SRC = Path(os.environ.get("DISPATCH_TEST_SRC", Path(__file__).resolve().parents[2] / "src"))
DSN = os.environ.get("DISPATCH_TEST_POSTGRES", "host=127.0.0.1 dbname=dispatch_test user=postgres")
CLUSTERS = Path(os.environ.get("DISPATCH_TEST_STATE", "/var/lib/dispatch-test")) / "clusters.json"
POLL = 1.0
LEASE_TTL = 6.0
WRITE_CALLS = {"start", "open", "stop_job", "hold", "release", "requeue"}


def local_cluster() -> dict[str, Any]:
    if not CLUSTERS.exists():
        pytest.fail(f"{CLUSTERS} is missing: run `sudo scripts/slurm/up.sh`")
    desc: dict[str, Any] = json.loads(CLUSTERS.read_text())["local"]
    r = subprocess.run([*desc["admin"]["command"], "scontrol", "ping"], capture_output=True, text=True)
    if r.returncode != 0 or "UP" not in r.stdout:
        pytest.fail(f"the local Slurm cluster does not answer ({r.stderr.strip()}): run `sudo scripts/slurm/up.sh`")
    return desc


def slurm_settings(desc: dict[str, Any]) -> dict[str, Any]:
    return {
        "transport": "local",
        "defaults": {"partition": desc["partitions"]["default"], "account": desc["account"]},
        "timeouts": {"call": "12s", "script": "25s", "connect": "5s"},  # a CallBound near 40 s, not 150
    }


@pytest.fixture(
    params=[
        pytest.param("slurm", marks=pytest.mark.slurm_local),
        "local",
    ]
)
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Env]:
    kind: str = request.param
    try:
        adapter(kind)
    except ConfigError as exc:
        pytest.fail(f"the {kind} adapter cannot be opened: {exc}")
    if kind.startswith("slurm"):
        desc = local_cluster()
        settings: dict[str, Any] = slurm_settings(desc)
    else:
        desc = {}
        settings = {"stateDir": str(tmp_path / "local-state")}
    schema = f"mp_{secrets.token_hex(4)}"
    try:
        records = PostgresRecords(DSN, schema=schema)
    except Unavailable as exc:
        pytest.fail(f"{exc}\nstart PostgreSQL (scripts/postgres-up.sh) or set DISPATCH_TEST_POSTGRES")
    e = Env(kind, settings, desc, schema, records, tmp_path)
    try:
        yield e
    finally:
        e.stop_all()
        e.cancel_jobs()
        e.cluster.close()
        records.drop()
        records.close()


class Supervisor:
    """One ``python -m dispatch.supervise`` process and its JSON-lines output."""

    def __init__(self, env: Env, owner: str, *extra: str) -> None:
        self.owner = owner
        self.log = env.tmp / f"{owner}.jsonl"
        argv = [
            sys.executable,
            "-m",
            "dispatch.supervise",
            "--adapter",
            env.kind,
            "--settings",
            json.dumps(env.settings),
            "--store",
            DSN,
            "--schema",
            env.schema,
            "--cluster",
            "mp",
            "--owner",
            owner,
            "--poll",
            str(POLL),
            "--lease-ttl",
            str(LEASE_TTL),
            "--trace-calls",
            *extra,
        ]
        with open(self.log, "wb") as out:
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

    def wait_for(self, pred: Callable[[dict[str, Any]], bool], timeout: float, what: str) -> dict[str, Any]:
        deadline = time.time() + timeout
        while time.time() < deadline:
            for rec in self.lines():
                if pred(rec):
                    return rec
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError(f"{self.owner}: no {what} within {timeout}s; log:\n{self.log.read_text()[-3000:]}")

    def stopped(self) -> bool:
        try:
            stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] == "T"

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)


class Env:
    def __init__(
        self,
        kind: str,
        settings: dict[str, Any],
        desc: dict[str, Any],
        schema: str,
        records: PostgresRecords,
        tmp: Path,
    ) -> None:
        self.kind = kind
        self.settings = settings
        self.desc = desc
        self.schema = schema
        self.records = records
        self.tmp = tmp
        self.sups: list[Supervisor] = []
        self.cluster = dispatch.open(kind, dispatch.Config(adapter=settings, records=records, name="mp"))
        self.t0 = time.time()

    def supervisor(self, owner: str, *extra: str) -> Supervisor:
        s = Supervisor(self, owner, *extra)
        self.sups.append(s)
        return s

    def submit(self, command: tuple[str, ...], rules: dict[str, Any] | None = None) -> str:
        spec = JobSpec(command=command, nodes=1, name="mp-test", time_limit=300)
        try:
            return self.cluster.submit(spec, rules)
        except OutcomeUnknown as exc:
            # a supervisor took the new job's lease mid-submit: recorded, and the supervisor carries it on
            job_id: str = exc.job_id  # type: ignore[attr-defined]
            return job_id

    def jobs(self) -> list[JobRecord]:
        return self.records.jobs(active_only=False)

    def wait(self, pred: Callable[[list[JobRecord]], bool], timeout: float, what: str) -> float:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if pred(self.jobs()):
                return time.time()
            time.sleep(0.2)
        raise AssertionError(f"no {what} within {timeout}s: {[j.to_json() for j in self.jobs()]}")

    def stop_all(self) -> None:
        for s in self.sups:
            s.signal(signal.SIGCONT)
            s.signal(signal.SIGKILL)
            s.proc.wait(timeout=10)

    def sacct(self) -> list[tuple[str, str, str, str]]:
        """(job id, name, comment, state) of every Slurm job since the test began (all users)."""
        start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(self.t0 - 60))
        r = subprocess.run(
            [*self.desc["admin"]["command"], "sacct", "-a", "-X", "-n", "-P", "--delimiter=\x1f", "-S", start,
             "-o", "JobIDRaw,JobName%200,Comment%300,State"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        rows = [tuple(line.split("\x1f")) for line in r.stdout.splitlines()]
        return [row for row in rows if len(row) == 4]  # type: ignore[misc]

    def objects_per_marker(self) -> dict[str, set[str]]:
        """The scheduler objects carrying each submission's marker: Slurm's accounting, or the local adapter's
        own find (its state is the files every process shares)."""
        markers = {s.marker for j in self.jobs() for s in j.submissions}
        out: dict[str, set[str]] = {m: set() for m in markers}
        if not self.kind.startswith("slurm"):
            for m in markers:
                out[m] = {f.scheduler_id for f in self.cluster.backend.find(m, self.t0 - 60)}
            return out
        deadline = time.time() + 20  # sacct lags the controller by a few seconds
        while True:
            rows = self.sacct()
            for jid, name, comment, _state in rows:
                for m in markers:
                    if m in name or m in comment:
                        out[m].add(jid)
            if all(out.values()) or time.time() > deadline:
                return out
            time.sleep(1)

    def cancel_jobs(self) -> None:
        ids = [sid for j in self.jobs() for s in j.submissions for sid in [s.scheduler_id, *s.strays] if sid]
        if not self.kind.startswith("slurm"):
            for sid in ids:
                with contextlib.suppress(DispatchError):
                    self.cluster.backend.stop_job(sid)
            return
        if ids:
            subprocess.run([*self.desc["admin"]["command"], "scancel", *ids], capture_output=True)


def owners(jobs: list[JobRecord]) -> set[str | None]:
    return {j.lease.owner if j.lease else None for j in jobs}


def given_up(env: Env, job: JobRecord, owner: str) -> bool:
    """Whether ``owner`` gave up the job's lease (above its share once a peer joined: sup-b may then take it at
    once, so which supervisor holds a job right after the second starts depends on the timing)."""
    return any(
        e.kind == "lease" and e.data.get("owner") is None and e.data.get("from") == owner
        for e in env.records.events(job.id)
    )


def test_a_killed_supervisor_is_taken_over_within_the_lease_bound(env: Env) -> None:
    a = env.supervisor("sup-a")
    a.wait_for(lambda r: r.get("event") == "started", 30, "start")
    ids = [env.submit(("sleep", "25")) for _ in range(3)]
    env.wait(lambda js: len(js) == 3 and owners(js) == {"sup-a"}, 30, "leases held by sup-a")
    b = env.supervisor("sup-b")
    b.wait_for(lambda r: "cycle" in r, 30, "first cycle of sup-b")
    taken_live = [j.id for j in env.jobs() if j.lease and j.lease.owner == "sup-b" and not given_up(env, j, "sup-a")]
    assert not taken_live, f"a live lease must not be taken: {taken_live}"
    expires = max(j.lease.expires_at for j in env.jobs() if j.lease)
    killed_at = time.time()
    a.signal(signal.SIGKILL)
    taken_at = env.wait(lambda js: owners(js) == {"sup-b"}, 3 * LEASE_TTL, "takeover by sup-b")
    takeover = taken_at - killed_at
    bound = LEASE_TTL + POLL + 2.0  # the lease runs out, then sup-b's next cycle takes it
    print(
        f"\n[{env.kind}] takeover after SIGKILL: {takeover:.2f}s, {taken_at - expires:.2f}s after the lease expired "
        f"(lease TTL {LEASE_TTL}s, poll {POLL}s, bound {bound}s)"
    )
    assert takeover <= bound, f"takeover took {takeover:.2f}s, more than {bound}s"
    assert taken_at >= expires - 0.5, "sup-b took a lease before it expired"
    tokens = {j.id: j.lease.token for j in env.jobs() if j.lease}
    assert all(t >= 2 for t in tokens.values()), f"the token must move on at takeover: {tokens}"
    # sup-b sees the jobs to their end, and nothing ran twice
    env.wait(lambda js: all(j.closed for j in js), 90, "all jobs closed under sup-b")
    for j in env.jobs():
        assert j.id in ids and len(j.submissions) == 1, j.to_json()
        assert j.state.value == "succeeded", j.to_json()
    per_marker = env.objects_per_marker()
    assert all(len(v) == 1 for v in per_marker.values()), f"a submission was created twice: {per_marker}"


def test_a_paused_supervisor_cannot_write_after_its_lease_was_taken_over(env: Env) -> None:
    rules = {"rules": [{"name": "retry", "cause": "exit", "exitCodes": [75], "action": "resubmit", "limit": 1}]}
    a = env.supervisor("sup-a", "--test-pause-before-intent", "start")
    a.wait_for(lambda r: r.get("event") == "started", 30, "start")
    job_id = env.submit(("sh", "-c", "sleep 1; exit 75"), rules)
    paused = a.wait_for(lambda r: r.get("event") == "pausing", 90, "pause before the start intent")
    deadline = time.time() + 10
    while not a.stopped() and time.time() < deadline:
        time.sleep(0.1)
    assert a.stopped(), "sup-a did not stop itself"
    # the trace holds sup-a's calls before the pause (it read submission 1's end), so an empty list of writes
    # after it wakes means it made none, not that nothing was traced
    assert [r for r in a.lines() if "call" in r], "sup-a's call trace is empty before the pause"
    job = env.records.get(job_id)
    assert job.lease is not None and job.lease.owner == "sup-a" and paused["fence"] == job.lease.token
    paused_version = job.version
    # sup-b takes the job once sup-a's lease has run out, and carries out the resubmission itself
    b = env.supervisor("sup-b")
    env.wait(lambda js: owners(js) == {"sup-b"}, 3 * LEASE_TTL, "takeover by sup-b")
    env.wait(
        lambda js: len(js[0].submissions) == 2 and js[0].submissions[1].scheduler_id is not None,
        60,
        "submission 2 started by sup-b",
    )
    a.signal(signal.SIGCONT)
    refused = a.wait_for(lambda r: r.get("event") in ("write-refused", "write-accepted"), 30, "the late write")
    assert refused["event"] == "write-refused" and refused["error"] == "Conflict", refused
    # the job ends under sup-b: two submissions (one resubmission), each one Slurm object
    env.wait(lambda js: js[0].closed, 90, "the job closed")
    # No late write, proven without waiting a while: sup-a has cycled since it woke (its stale operation is over
    # and it has read the store since), then it is stopped and has exited. Every call it ever made is traced
    # before it is made, so its whole life after waking is in the log: a late write would be there.
    a.wait_for(lambda r: "cycle" in r and _after(a, "resumed", r), 30, "a cycle after resuming")
    a.signal(signal.SIGTERM)
    assert a.proc.wait(timeout=60) == 0
    assert any(r.get("event") == "stopped" for r in _lines_after(a, "resumed")), "sup-a did not stop by itself"
    after = _lines_after(a, "resumed")
    writes = [r for r in after if r.get("call") in WRITE_CALLS]
    assert writes == [], f"sup-a made scheduler calls after waking with a stale lease: {writes}"
    job = env.records.get(job_id)
    assert len(job.submissions) == 2, job.to_json()
    assert all(i.owner == "sup-b" for i in job.intents if i.submission == 2), job.to_json()["intents"]
    # and the store holds nothing of sup-a's after its pause: the record moved on past the fence sup-a held,
    # and no event since sup-b's takeover is owned by sup-a (its refused intent added none)
    assert job.version > paused_version, (job.version, paused_version)
    takeover = min(e.seq for e in env.records.events(job_id) if e.kind == "lease" and e.data.get("owner") == "sup-b")
    late = [e.to_json() for e in env.records.events(job_id) if e.seq > takeover and e.data.get("owner") == "sup-a"]
    assert late == [], f"sup-a's events after the takeover: {late}"
    per_marker = env.objects_per_marker()
    assert all(len(v) == 1 for v in per_marker.values()), f"a submission was created twice: {per_marker}"
    _ = b


def _lines_after(s: Supervisor, event: str) -> list[dict[str, Any]]:
    lines = s.lines()
    idx = next((i for i, r in enumerate(lines) if r.get("event") == event), None)
    return [] if idx is None else lines[idx + 1 :]


def _after(s: Supervisor, event: str, rec: dict[str, Any]) -> bool:
    return rec in _lines_after(s, event)
