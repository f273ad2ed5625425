"""The fault campaign: M jobs on the real Slurm test clusters, K supervisor processes on one PostgreSQL store,
and F faults injected at seeded random moments; then the records are checked against Slurm's own accounting.

    python bench/faults.py --json [--cluster local|sid|both] [--jobs M] [--supervisors K] [--faults F]
                           [--seed S] [--dsn DSN] [--keep]

``--jobs`` and ``--supervisors`` are per cluster. Faults: ``kill-supervisor`` (SIGKILL, restarted a few seconds
later under a new owner name), ``pause-supervisor`` (SIGSTOP past its lease, then SIGCONT), ``cut-ssh`` (sid:
SIGKILL of the SSH ControlMaster and of the open ssh channels), ``restart-slurmctld`` (admin.sh restart),
``node-down`` (State=DOWN, RESUME a few seconds later), ``preempt`` (an exclusive job in the preempting partition
on one node). ``--network`` (local cluster only): each supervisor in a network namespace of its own, its clock off
by up to two minutes, and ``cut-records``, ``cut-records-one-way``, ``lossy-records`` (its link to PostgreSQL cut
or lossy past its lease). ``--kinds a,b`` draws only those kinds. Every run checks each supervisor's traced
scheduler actions against the records' lease history (``history.acted_without_lease`` must be 0).

Prints one JSON object: ``jobs``, ``executions``, ``faults_injected``, ``jobs_lost``, ``duplicate_submissions``,
``ended_without_cause``, ``disagreements`` (the last four must be 0; defined in docs/faults.md), plus
``faults_by_kind``, ``details`` and timings. Exit status 0 when the four are 0, 1 otherwise, 2 when the campaign
could not run. Everything the campaign changes on a cluster is put back in ``finally`` blocks (nodes resumed,
slurmctld started, preemptors and leftover jobs cancelled, supervisors stopped).

Needs: the clusters (``sudo scripts/slurm/up.sh``; run automatically when a cluster does not answer), PostgreSQL
(``DISPATCH_TEST_POSTGRES`` or ``--dsn``, default ``host=127.0.0.1 dbname=dispatch_test user=postgres``), root.
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import itertools
import json
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SRC = Path(os.environ.get("DISPATCH_TEST_SRC", ROOT / "src"))
sys.path.insert(0, str(SRC))

import dispatch  # noqa: E402
from dispatch.errors import DispatchError  # noqa: E402
from dispatch.outcome import Cause, State  # noqa: E402
from dispatch.records.model import JobRecord  # noqa: E402
from dispatch.records.postgres import PostgresRecords  # noqa: E402
from dispatch.spec import JobSpec  # noqa: E402
from dispatch.supervise.service import WRITE_CALLS  # noqa: E402

CLUSTERS_JSON = Path(os.environ.get("DISPATCH_TEST_STATE", "/var/lib/dispatch-test")) / "clusters.json"
DEFAULT_DSN = os.environ.get("DISPATCH_TEST_POSTGRES", "host=127.0.0.1 dbname=dispatch_test user=postgres")
PREEMPTOR_NAME = "dispatch-faults-preemptor"
DOWN_REASON = "dispatch-faults-campaign"
NETWORK_KINDS = ["cut-records", "cut-records-one-way", "lossy-records"]
"""The faults ``--network`` adds (each supervisor runs in a network namespace of its own)."""
CLOCK_OFFSETS = (-120.0, 0.0, 120.0)
"""``--network``: each supervisor process's clock is off by one of these (seconds)."""
HISTORY_SLACK = 0.5
"""Seconds of clock-sync error the history check allows (a round trip to the store, and the trace line's lag)."""

RULES = """\
unmatched = "escalate"

[limits]
total = 40

[[rules]]
name = "interrupted"
cause = ["preempted", "node-lost", "cessation", "launch-failed"]
action = "resubmit"
limit = 30
backoff = "1s"
backoffMax = "4s"
"""

# sacct State -> the coarse state and (when Slurm's state implies one) the cause dispatch must record
SACCT_STATES: dict[str, tuple[State, Cause | None]] = {
    "COMPLETED": (State.SUCCEEDED, Cause.EXIT),
    "FAILED": (State.FAILED, None),
    "OUT_OF_MEMORY": (State.FAILED, Cause.OUT_OF_MEMORY),
    "NODE_FAIL": (State.FAILED, Cause.NODE_LOST),
    "PREEMPTED": (State.FAILED, Cause.PREEMPTED),
    "TIMEOUT": (State.FAILED, Cause.TIMEOUT),
    "DEADLINE": (State.FAILED, Cause.TIMEOUT),
    "BOOT_FAIL": (State.FAILED, Cause.LAUNCH_FAILED),
    "CANCELLED": (State.CANCELLED, Cause.CANCELLED),
}
ACTIVE_SACCT = {"PENDING", "RUNNING", "REQUEUED", "SUSPENDED", "RESIZING", "REQUEUE_HOLD", "REQUEUE_FED"}


def log(msg: str) -> None:
    print(f"[faults {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ----- the clusters ---------------------------------------------------------------------------------------------


@dataclass
class Target:
    """One test cluster as the campaign uses it."""

    name: str
    desc: dict[str, Any]
    workdir: Path

    @property
    def admin(self) -> list[str]:
        return list(self.desc["admin"]["command"])

    @property
    def nodes(self) -> list[str]:
        return list(self.desc["nodes"])

    @property
    def ssh(self) -> bool:
        return bool(self.desc["transport"] == "ssh")

    def settings(self) -> dict[str, Any]:
        """The Slurm adapter's settings for this cluster (docs/adapters/slurm.md)."""
        d = self.desc
        out: dict[str, Any] = {
            "transport": d["transport"],
            "defaults": {"partition": d["partitions"]["default"], "account": d["account"]},
        }
        ssh: dict[str, Any] = {}
        if self.ssh:
            ssh = {
                "host": d["host"],
                "user": d["user"],
                "port": d["port"],
                "identityFile": d["identity_file"],
                "knownHostsFile": d["known_hosts"],
            }
        # short command deadlines keep the CallBound (and so an unknown start's wait) near 40 s instead of 150
        out["timeouts"] = {"call": "12s", "script": "25s", "connect": "5s"}
        out["preflight"] = {"cacheDir": str(self.workdir / "preflight")}
        if d.get("env"):
            out["env"] = dict(d["env"])
        if ssh:
            out["ssh"] = ssh
        return out

    def run_admin(self, *args: str, timeout: float = 90.0, check: bool = True) -> str:
        r = subprocess.run([*self.admin, *args], capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"{self.name}: admin {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
        return r.stdout


def load_targets(which: str, workdir: Path) -> list[Target]:
    if not CLUSTERS_JSON.exists():
        ensure_up()
    data = json.loads(CLUSTERS_JSON.read_text())
    names = ["local", "sid"] if which == "both" else [which]
    targets = [Target(n, data[n], workdir) for n in names]
    for t in targets:
        try:
            t.run_admin("scontrol", "ping", timeout=30)
        except (RuntimeError, subprocess.TimeoutExpired):
            ensure_up()
            t.run_admin("scontrol", "ping", timeout=30)
    return targets


def ensure_up() -> None:
    script = ROOT / "scripts" / "slurm" / "up.sh"
    log(f"a cluster does not answer: running {script}")
    r = subprocess.run([str(script)], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"faults: {script} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")


# ----- supervisor processes -------------------------------------------------------------------------------------


@dataclass
class SupervisorProc:
    target: Target
    index: int
    dsn: str
    schema: str
    rules: Path
    poll: float
    lease_ttl: float
    generation: int = 0
    proc: subprocess.Popen[bytes] | None = None
    logs: list[Path] = field(default_factory=list)
    paused: bool = False
    netns: Any = None
    """With ``--network``: the namespace this supervisor runs in (tests/faults/netns.py), and its DSN there."""
    netns_dsn: str = ""
    netns_port: int = 0
    offsets: Callable[[], float] | None = None
    """With ``--network``: draws the clock offset of each new process (``--test-clock-offset``)."""
    offset: float = 0.0

    @property
    def owner(self) -> str:
        return f"{self.target.name}/sup{self.index}/gen{self.generation}"

    def start(self) -> None:
        self.generation += 1
        logfile = self.target.workdir / f"{self.owner.replace('/', '_')}.jsonl"
        self.logs.append(logfile)
        env = dict(os.environ, PYTHONPATH=str(SRC), TMPDIR=str(self.target.workdir / "tmp"))
        argv = [
            sys.executable,
            "-m",
            "dispatch.supervise",
            "--adapter",
            "slurm",
            "--settings",
            json.dumps(self.target.settings()),
            "--store",
            self.dsn,
            "--schema",
            self.schema,
            "--cluster",
            self.target.name,
            "--owner",
            self.owner,
            "--poll",
            str(self.poll),
            "--lease-ttl",
            str(self.lease_ttl),
            "--rules",
            str(self.rules),
            "--trace-calls",
        ]
        if self.offsets is not None:
            self.offset = self.offsets()
            argv += ["--test-clock-offset", str(self.offset)]
        if self.netns is not None:
            argv[argv.index("--store") + 1] = self.netns_dsn
            argv = self.netns.command(argv)
        with open(logfile, "wb") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def pause(self) -> None:
        if self.alive:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        if self.alive and self.paused:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def kill(self) -> None:
        if self.alive:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.paused = False

    def stop(self) -> None:
        self.resume()
        if self.alive:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def children(self) -> list[int]:
        """PIDs of this process's child processes (its ssh channels, its local commands)."""
        if not self.alive:
            return []
        assert self.proc is not None
        return _descendants(self.proc.pid)


def _descendants(pid: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in kids.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


# ----- faults ---------------------------------------------------------------------------------------------------


@dataclass
class Campaign:
    targets: list[Target]
    sups: dict[str, list[SupervisorProc]]
    rng: random.Random
    faults: Counter[str] = field(default_factory=Counter)
    fault_log: list[dict[str, Any]] = field(default_factory=list)
    preemptors: dict[str, list[str]] = field(default_factory=dict)
    downed: dict[str, set[str]] = field(default_factory=dict)
    ctld_stopped: set[str] = field(default_factory=set)
    started_at: float = field(default_factory=time.time)
    network: bool = False
    only: frozenset[str] | None = None
    """``--kinds``: the fault kinds to draw from (None: all)."""
    cut: set[str] = field(default_factory=set)
    """The namespaces cut off now (one network fault at a time per supervisor: a heal undoes them all)."""

    def kinds(self, t: Target) -> list[str]:
        kinds = ["kill-supervisor", "pause-supervisor", "restart-slurmctld", "node-down", "preempt"]
        if t.ssh:
            kinds.append("cut-ssh")
        if self.network:
            kinds += NETWORK_KINDS
        return [k for k in kinds if self.only is None or k in self.only]

    def inject(self, t: Target, kind: str, schedule: Callable[[float, Callable[[], None]], None]) -> None:
        at = time.time() - self.started_at
        detail: dict[str, Any] = {"at": round(at, 2), "cluster": t.name, "kind": kind}
        if kind == "kill-supervisor":
            live = [s for s in self.sups[t.name] if s.alive]
            if not live:
                detail["skipped"] = "no live supervisor"
            else:
                s = self.rng.choice(live)
                detail["owner"] = s.owner
                s.kill()
                delay = self.rng.uniform(1.0, 4.0)
                schedule(delay, s.start)
        elif kind == "pause-supervisor":
            live = [s for s in self.sups[t.name] if s.alive and not s.paused]
            if not live:
                detail["skipped"] = "no live supervisor"
            else:
                s = self.rng.choice(live)
                pause = s.lease_ttl + self.rng.uniform(1.0, 4.0)  # long enough to lose its leases
                detail.update(owner=s.owner, seconds=round(pause, 1))
                s.pause()
                schedule(pause, s.resume)
        elif kind in NETWORK_KINDS:
            self._cut_records(t, kind, detail, schedule)
        elif kind == "cut-ssh":
            detail["killed"] = self._cut_ssh(t)
        elif kind == "restart-slurmctld":
            self.ctld_stopped.add(t.name)
            t0 = time.time()
            t.run_admin("restart", "slurmctld", timeout=120)
            self.ctld_stopped.discard(t.name)
            detail["took"] = round(time.time() - t0, 2)
        elif kind == "node-down":
            node = self.rng.choice(t.nodes)
            detail["node"] = node
            self.downed.setdefault(t.name, set()).add(node)
            t.run_admin("scontrol", "update", f"NodeName={node}", "State=DOWN", f"Reason={DOWN_REASON}")
            schedule(self.rng.uniform(2.0, 5.0), lambda: self._resume(t, node))
        elif kind == "preempt":
            node = self.rng.choice(t.nodes)
            detail["node"] = node
            out = t.run_admin(
                "sbatch",
                "--parsable",
                "-p",
                t.desc["partitions"]["preempt"],
                "-A",
                t.desc["account"],
                "-w",
                node,
                "--exclusive",
                "-t",
                "1",
                "-J",
                PREEMPTOR_NAME,
                "-o",
                "/dev/null",
                "--wrap",
                "sleep 3",
            )
            sid = out.strip().split(";")[0]
            detail["preemptor"] = sid
            self.preemptors.setdefault(t.name, []).append(sid)
        self.faults[kind] += 1
        self.fault_log.append(detail)
        log(f"fault {json.dumps(detail)}")

    def _cut_records(
        self, t: Target, kind: str, detail: dict[str, Any], schedule: Callable[[float, Callable[[], None]], None]
    ) -> None:
        """Cut a live supervisor off from PostgreSQL for its lease TTL + 1-4 s, then heal: both ways, one way (what
        it sends, or what it is sent, is lost), or dropping half its packets each way."""
        live = [s for s in self.sups[t.name] if s.alive and s.netns is not None and s.netns.name not in self.cut]
        if not live:
            detail["skipped"] = "no live supervisor that is not cut off already"
            return
        s = self.rng.choice(live)
        seconds = s.lease_ttl + self.rng.uniform(1.0, 4.0)
        port = s.netns_port
        if kind == "cut-records":
            s.netns.cut(port)
        elif kind == "cut-records-one-way":
            detail["direction"] = direction = self.rng.choice(["out", "in"])
            s.netns.cut(port, direction)
        else:
            s.netns.loss(0.5, port)
        self.cut.add(s.netns.name)
        detail.update(owner=s.owner, seconds=round(seconds, 1))

        def heal() -> None:
            s.netns.heal()
            self.cut.discard(s.netns.name)

        schedule(seconds, heal)

    def _resume(self, t: Target, node: str) -> None:
        t.run_admin("scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)
        self.downed.get(t.name, set()).discard(node)

    def _cut_ssh(self, t: Target) -> list[int]:
        """SIGKILL this campaign's ControlMaster(s) for ``t`` and every ssh channel its supervisors have open."""
        victims: set[int] = set()
        # A ControlMaster daemonizes (it leaves the process tree) and retitles itself "ssh: <control path> [mux]"
        # (which also overwrites its environment), so it is known by its control path: every process of the
        # campaign has TMPDIR in the campaign's private directory, where the transports make their control sockets.
        # Only sid is reached over SSH, so every such master is a connection to it.
        private = str(t.workdir)
        for d in Path("/proc").iterdir():
            if d.name.isdigit() and _comm(int(d.name)) == "ssh" and private in " ".join(_cmdline(int(d.name))):
                victims.add(int(d.name))
        for s in self.sups[t.name]:
            victims.update(p for p in s.children() if _comm(p) == "ssh")
        for p in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        return sorted(victims)

    def restore(self) -> None:
        """Put every cluster back as it was: called in ``finally``."""
        for group in self.sups.values():
            for s in group:
                if s.netns is not None:
                    with contextlib.suppress(RuntimeError):
                        s.netns.heal()
        self.cut.clear()
        for t in self.targets:
            for node in sorted(self.downed.get(t.name, set())):
                self._resume(t, node)
            # any node still DOWN for our reason (a resume that failed while slurmctld restarted)
            try:
                out = t.run_admin("sinfo", "-h", "-N", "-o", "%N|%t|%E", check=False)
                for line in out.splitlines():
                    node, state, reason = [*line.split("|"), "", ""][:3]
                    if reason.strip() == DOWN_REASON or (DOWN_REASON in reason and "down" in state):
                        self._resume(t, node)
            except (RuntimeError, subprocess.TimeoutExpired):
                pass
            t.run_admin("start", "slurmctld", timeout=120, check=False)
            ids = self.preemptors.get(t.name, [])
            if ids:
                t.run_admin("scancel", *ids, check=False)


# ----- the campaign ----------------------------------------------------------------------------------------------


@dataclass
class Submitted:
    cluster: str
    job_id: str | None
    error: str | None = None


def run(args: argparse.Namespace) -> dict[str, Any]:
    t_begin = time.time()
    rng = random.Random(args.seed)
    workdir = Path(tempfile.mkdtemp(prefix="dispatch-faults-"))
    os.chmod(workdir, 0o700)
    (workdir / "tmp").mkdir(mode=0o700)
    tempfile.tempdir = str(workdir / "tmp")  # this process's own ssh control sockets too (see Campaign._cut_ssh)
    targets = load_targets(args.cluster, workdir)
    schema = f"faults_{args.seed}_{secrets.token_hex(3)}"
    records = PostgresRecords(args.dsn, schema=schema)
    rules = workdir / "rules.toml"
    rules.write_text(RULES)
    rules_data = dispatch.rules.RuleSet.load(rules)
    sups = {
        t.name: [
            SupervisorProc(t, i, args.dsn, schema, rules, args.poll, args.lease_ttl) for i in range(args.supervisors)
        ]
        for t in targets
    }
    only = frozenset(args.kinds.split(",")) if args.kinds else None
    camp = Campaign(targets, sups, rng, network=args.network, only=only)
    spaces = network_spaces(args, targets, sups) if args.network else []
    clusters = {
        t.name: dispatch.open("slurm", dispatch.Config(adapter=t.settings(), records=records, name=t.name))
        for t in targets
    }
    submitted: list[Submitted] = []
    events: list[tuple[float, int, Callable[[], None]]] = []
    seq = [0]

    def schedule(delay: float, fn: Callable[[], None]) -> None:
        seq[0] += 1
        heapq.heappush(events, (time.time() + delay, seq[0], fn))

    def submit(t: Target, i: int) -> Callable[[], None]:
        def go() -> None:
            duration = rng.randint(3, 6)
            spec = JobSpec(command=("sleep", str(duration)), nodes=1, name=f"faults-{i}", time_limit=600)
            try:
                jid = clusters[t.name].submit(spec, rules_data)
                submitted.append(Submitted(t.name, jid))
            except DispatchError as exc:
                # the record exists (its supervisor resolves the start) unless the error came before it
                jid = getattr(exc, "job_id", None)
                submitted.append(Submitted(t.name, jid, f"{type(exc).__name__}: {exc}"))
                log(f"submit {t.name} #{i}: {type(exc).__name__}: {exc}")

        return go

    timing: dict[str, float] = {}
    try:
        for group in sups.values():
            for s in group:
                s.start()
        window = args.window or max(30.0, 3.0 * args.faults / len(targets))
        camp.started_at = time.time()
        for t in targets:
            for i in range(args.jobs):
                schedule(rng.uniform(0, window * 0.7), submit(t, i))
        for _ in range(args.faults):
            t = rng.choice(targets)
            kind = rng.choice(camp.kinds(t))
            schedule(rng.uniform(1.0, window), lambda t=t, kind=kind: camp.inject(t, kind, schedule))
        log(f"campaign: {args.jobs} jobs x {len(targets)} cluster(s), {args.faults} faults over {window:.0f}s")
        while events:
            at, _, fn = events[0]
            if at > time.time():
                time.sleep(min(0.2, at - time.time()))
                continue
            heapq.heappop(events)
            try:
                fn()
            except (RuntimeError, subprocess.TimeoutExpired, OSError) as exc:
                log(f"event failed: {exc}")
                camp.fault_log.append({"error": str(exc)})
        timing["inject_s"] = round(time.time() - camp.started_at, 1)
        camp.restore()
        for group in sups.values():
            for s in group:
                if not s.alive:
                    s.start()
        t_settle = time.time()
        settled = wait_settled(records, args.settle)
        timing["settle_s"] = round(time.time() - t_settle, 1)
    finally:
        for group in sups.values():
            for s in group:
                s.stop()
        camp.restore()
        for ns in spaces:
            ns.close()
    planted = plant(targets, records, submitted) if args.plant else {}
    t_check = time.time()
    jobs = records.jobs(active_only=False)  # the schema is the campaign's own: every record in it is ours
    rogue = frozenset({planted["rogue"]} if planted else ())
    accounting = {t.name: sacct_until_stable(t, camp.started_at - 120, jobs, rogue) for t in targets}
    if planted:  # what the checks read of the rogue job: the first thing to look at when they miss it
        planted["rogue_rows"] = [asdict(r) for r in accounting[targets[0].name] if r.scheduler_id in rogue]
    result = check(jobs, accounting, submitted, args.jobs * len(targets))
    result["history"] = history(records, jobs, sups)
    timing["check_s"] = round(time.time() - t_check, 1)
    leftovers = cancel_leftovers(targets, jobs, accounting)
    sup_stats = supervisor_stats(sups)
    timing["wall_s"] = round(time.time() - t_begin, 1)
    result.update(
        {
            "faults_injected": sum(camp.faults.values()),
            "faults_by_kind": dict(camp.faults),
            "settled": settled,
            "clusters": [t.name for t in targets],
            "adapter": "slurm",
            "submit_errors": dict(Counter((s.error or "").split(":")[0] for s in submitted if s.error)),
            "planted": planted or None,
            "supervisors": args.supervisors,
            "seed": args.seed,
            "timing": timing,
            "supervisor_processes": sup_stats,
            "leftovers_cancelled": leftovers,
            "fault_log": camp.fault_log if args.verbose else None,
        }
    )
    if not args.keep:
        records.drop()
    records.close()
    for c in clusters.values():
        c.close()
    for t in targets:
        if t.ssh:
            camp._cut_ssh(t)  # the control masters this campaign left (they would linger for ControlPersist)
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return result


def network_spaces(args: argparse.Namespace, targets: list[Target], sups: dict[str, list[SupervisorProc]]) -> list[Any]:
    """``--network``: put each supervisor in a network namespace of its own (tests/faults/netns.py), reaching
    slurmctld and slurmdbd through its veth and PostgreSQL through a relay the faults can cut, and draw each
    process's clock offset. The local cluster only (sid is reached over SSH from the host)."""
    if any(t.ssh for t in targets):
        raise SystemExit("faults: --network runs on the local cluster only (--cluster local)")
    sys.path.insert(0, str(ROOT))
    from tests.faults.netns import Netns, available

    why = available()
    if why is not None:
        raise SystemExit(f"faults: --network: network namespaces do not work here: {why}")
    m = re.search(r"\bport=(\d+)", args.dsn)
    pg_port = int(m.group(1)) if m else 5432
    if "host=" not in args.dsn:
        raise SystemExit("faults: --network needs a key=value DSN (host=... dbname=...)")
    offsets = random.Random(f"clocks-{args.seed}")
    spaces: list[Any] = []
    for t in targets:
        conf = Path(t.desc.get("env", {}).get("SLURM_CONF", "/etc/slurm/slurm.conf")).read_text()
        ports = [int(p) for p in re.findall(r"^(?:SlurmctldPort|AccountingStoragePort)=(\d+)", conf, re.M | re.I)]
        for s in sups[t.name]:
            ns = Netns(f"fc{s.index}")
            ns.open()
            spaces.append(ns)
            for port in ports or [6817, 6819]:
                ns.forward(port)
            s.netns, s.netns_port = ns, ns.relay(pg_port)
            dsn = re.sub(r"\bport=\d+\s*", "", args.dsn)
            s.netns_dsn = re.sub(r"\bhost=\S+", f"host={ns.host_ip} port={s.netns_port}", dsn)
            s.offsets = lambda: offsets.choice(CLOCK_OFFSETS)
    return spaces


def history(records: PostgresRecords, jobs: list[JobRecord], sups: dict[str, list[SupervisorProc]]) -> dict[str, Any]:
    """Every scheduler action each supervisor process traced (``--trace-calls``: the call, what it acts on, and
    when, on the store's time line), checked against the job's lease history in the records (its ``lease``
    events, each stamped with the taker's reading of the store's clock, which is at or after the expiry it took
    over): each action was made while the last lease event before it names the process that made it (or did
    ``HISTORY_SLACK`` earlier: the clocks' sync error). A process acting after another took the job over, or
    after it gave the job up, is a violation (``acted_without_lease``), unless the process wrote that call's intent
    while it held the lease (its last intent of that action, written before the call): that is the residual
    window docs/faults.md states (a process paused between its fenced intent write and the call), counted apart
    (``late_calls``)."""
    by_sid = {sid: j.id for j in jobs for sub in j.submissions for sid in (sub.scheduler_id, *sub.strays) if sid}
    by_id = {j.id: j for j in jobs}
    ids = {j.id for j in jobs}
    leases: dict[str, list[tuple[float, str | None]]] = {}
    calls = unattributed = 0
    bad: list[str] = []
    late: list[str] = []
    for group in sups.values():
        for s in group:
            for path in s.logs:
                try:
                    lines = path.read_text(errors="replace").splitlines()
                except OSError:
                    continue
                owner = None
                for line in lines:
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        continue
                    owner = rec.get("owner", owner)
                    target = rec.get("target")
                    if rec.get("call") not in WRITE_CALLS or not isinstance(target, str):
                        continue
                    calls += 1
                    job_id = target if target in ids else by_sid.get(target)
                    if job_id is None:
                        unattributed += 1
                        continue
                    if job_id not in leases:
                        leases[job_id] = sorted(
                            ((e.at, e.data.get("owner")) for e in records.events(job_id) if e.kind == "lease"),
                            key=lambda lease: lease[0],
                        )
                    at = float(rec["at"])

                    def holder(when: float, job_id: str = job_id) -> str | None:
                        return next((o for t, o in reversed(leases[job_id]) if t <= when), None)

                    if owner in (holder(at), holder(at - HISTORY_SLACK)):  # allowing for the clocks' sync error
                        continue
                    what = f"{owner} {rec['call']} {target} (job {job_id}) at {at:.2f}: the lease was {holder(at)}'s"
                    action = "stop" if rec["call"] == "stop_job" else rec["call"]
                    job = by_id[job_id]
                    written = [
                        i.written_at
                        for i in job.intents
                        if i.owner == owner and i.action.value == action and i.written_at <= at + HISTORY_SLACK
                    ]
                    if written and holder(max(written)) == owner:
                        late.append(f"{what} (its intent written under the lease at {max(written):.2f})")
                    else:
                        bad.append(what)
    return {
        "actions": calls,
        "unattributed": unattributed,
        "acted_without_lease": len(bad),
        "late_calls": len(late),
        "details": (bad + late)[:20],
    }


def plant(targets: list[Target], records: PostgresRecords, submitted: list[Submitted]) -> dict[str, Any]:
    """Plant known faults after the settle, to prove the checks see them (``--plant``): a rogue Slurm job that
    carries a recorded marker and runs (a duplicate submission, unknown to the records), a closed record
    rewritten to end with cause unknown, and a closed record reopened (a job nobody finishes: lost)."""
    t = targets[0]
    jobs = [records.get(s.job_id) for s in submitted if s.job_id and s.cluster == t.name]
    victim, other = jobs[0], jobs[-1]
    marker = victim.submissions[-1].marker
    out = t.run_admin(
        "sbatch", "--parsable", "-J", marker, f"--comment={marker}", "-A", t.desc["account"],
        "-p", t.desc["partitions"]["default"], "-o", "/dev/null", "--wrap", "sleep 1",
    )  # fmt: skip
    rogue = out.strip().split(";")[0]
    from dispatch.outcome import Evidence, Outcome

    other.submissions[-1].outcome = Outcome(State.UNKNOWN, Cause.UNKNOWN, Evidence("planted", time.time()))
    records.update(other)
    lost = jobs[len(jobs) // 2]
    lost.closed = False
    records.update(lost)
    deadline = time.time() + ROGUE_WAIT
    state = ""
    while time.time() < deadline:  # until the rogue job has run and ended (and accounting shows it)
        state = rogue_state(t, rogue, marker)
        if state and state not in ACTIVE_SACCT:
            break
        time.sleep(1)
    else:  # on a busy cluster it may wait in the queue: say so, rather than let the checks miss a duplicate
        raise SystemExit(f"--plant: the rogue job {rogue} had not run and ended after {ROGUE_WAIT:g}s ({state!r})")
    return {"duplicate_of": marker, "rogue": rogue, "uncaused": other.id, "lost": lost.id}


ROGUE_WAIT = 300.0
"""How long ``--plant`` waits for its rogue job to run and end (a loaded test cluster queues it for a while)."""


def rogue_state(t: Target, rogue: str, marker: str) -> str:
    """The accounting state of the rogue job itself, or "" while accounting has no row of it.

    A row is the rogue's only if it carries the rogue's name as well as its id: on Slurm 22.05 a job that starts at
    once can end in accounting as a stand-in row named ``allocation``, with no eligible time, for up to about 4 s
    before slurmdbd has the job's own record (``bench/sacct_lag.py``); the checks' window query, which selects by
    eligible time, does not see such a row, and they missed the rogue job so."""
    out = t.run_admin(
        "sacct", "-X", "-D", "-n", "-P", "--delimiter=\x1f", "-j", rogue, "-o", "JobName%200,State", check=False
    )
    for line in out.splitlines():
        name, _, state = line.partition("\x1f")
        if name == marker and state:
            return state.split()[0]
    return ""


def wait_settled(records: PostgresRecords, timeout: float) -> bool:
    """Until every campaign job is closed with no open intent (or ``timeout`` seconds)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        jobs = records.jobs(active_only=False)
        if not [j.id for j in jobs if not j.closed or j.open_intents()]:
            return True
        time.sleep(2.0)
    return False


# ----- accounting and the checks ------------------------------------------------------------------------------


@dataclass
class Run:
    """One sacct row: a Slurm job (``-D`` shows a requeued job's earlier runs as separate rows)."""

    scheduler_id: str
    name: str
    comment: str
    state: str
    exit_code: str
    start: str
    end: str

    @property
    def ran(self) -> bool:
        return self.start not in ("", "Unknown", "None")

    @property
    def base_state(self) -> str:
        return self.state.split()[0] if self.state else ""


def sacct(t: Target, since: float) -> list[Run]:
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since))
    out = t.run_admin(
        "sacct",
        "-a",
        "-X",
        "-D",
        "-n",
        "-P",
        "--delimiter=\x1f",
        "-S",
        start,
        "-o",
        "JobIDRaw,JobName%200,Comment%300,State,ExitCode,Start,End",
        timeout=60,
    )
    runs = []
    for line in out.splitlines():
        parts = line.split("\x1f")
        if len(parts) == 7:
            runs.append(Run(*parts))
    return runs


def marker_of(run: Run, prefixes: dict[str, str]) -> str | None:
    for text in (run.comment, run.name):
        for marker in prefixes:
            if marker in text:
                return marker
    return None


def sacct_until_stable(
    t: Target, since: float, jobs: list[JobRecord], expect: frozenset[str] = frozenset()
) -> list[Run]:
    """sacct lags the controller by seconds: read until two reads agree, nothing of ours is active and every Slurm
    job of ours and of ``expect`` (the planted rogue job) has its row (a job that has just ended may have none yet
    in a window query: :func:`rogue_state`)."""
    previous: list[Run] | None = None
    ids = {s.scheduler_id for j in jobs if j.cluster == t.name for s in j.submissions if s.scheduler_id}
    for _ in range(15):
        runs = sacct(t, since)
        active = [r for r in runs if r.scheduler_id in ids and r.base_state in ACTIVE_SACCT]
        missing = (ids | expect) - {r.scheduler_id for r in runs}
        if previous is not None and runs == previous and not active and not missing:
            return runs
        previous = runs
        time.sleep(2.0)
    return previous or []


def check(
    jobs: list[JobRecord], accounting: dict[str, list[Run]], submitted: list[Submitted], expected: int
) -> dict[str, Any]:
    details: dict[str, list[str]] = {"lost": [], "duplicates": [], "without_cause": [], "disagreements": []}
    by_id = {j.id: j for j in jobs}
    for _ in range(max(0, expected - len(jobs))):
        errors = [s.error for s in submitted if s.job_id is None]
        details["lost"].append(f"a submission left no record (submit errors without a job id: {errors[:3]})")
    executions = 0
    executions_recorded = 0
    for cluster, runs in accounting.items():
        cjobs = [j for j in jobs if j.cluster == cluster]
        markers = {sub.marker: j.id for j in cjobs for sub in j.submissions}
        runs_of: dict[str, list[Run]] = {}
        for r in runs:
            m = marker_of(r, markers)
            if m is not None:
                runs_of.setdefault(m, []).append(r)
        known_ids = {
            sid for j in cjobs for sub in j.submissions for sid in [sub.scheduler_id, *sub.strays] if sid is not None
        }
        for m, rs in runs_of.items():
            executions += sum(1 for r in rs if r.ran)
            for r in rs:
                if r.scheduler_id not in known_ids:
                    details["disagreements"].append(
                        f"{cluster}: Slurm job {r.scheduler_id} carries {m} but no record knows it"
                    )
            ran_objects = {r.scheduler_id for r in rs if r.ran}
            if len(ran_objects) > 1:
                details["duplicates"].append(f"{cluster}: {m} ran as {sorted(ran_objects)}")
        for j in cjobs:
            executions_recorded += sum(len(s.executions) for s in j.submissions)
            _check_job(j, runs_of, details)
    lost_ids = {j for j in by_id if not by_id[j].closed or by_id[j].open_intents()}
    for jid in sorted(lost_ids):
        details["lost"].append(f"{jid}: not closed after settling (state {by_id[jid].state.value})")
    return {
        "jobs": expected,
        "jobs_recorded": len(jobs),
        "executions": executions,
        "executions_recorded": executions_recorded,
        "jobs_lost": len(details["lost"]),
        "duplicate_submissions": len(details["duplicates"]),
        "ended_without_cause": len(details["without_cause"]),
        "disagreements": len(details["disagreements"]),
        "outcomes": dict(Counter(f"{j.state.value}/{j.cause.value if j.cause else None}" for j in jobs)),
        "submissions": sum(len(j.submissions) for j in jobs),
        "escalated": sum(1 for j in jobs if j.escalations),
        "details": {k: v[:20] for k, v in details.items() if v},
    }


def _check_job(j: JobRecord, runs_of: dict[str, list[Run]], details: dict[str, list[str]]) -> None:
    # duplicate runs across submissions of one job: two objects running at the same time
    spans = []
    for sub in j.submissions:
        for r in runs_of.get(sub.marker, []):
            if r.ran:
                spans.append((r.start, r.end if r.end not in ("", "Unknown") else "9999", r.scheduler_id))
    spans.sort()
    for (_s1, e1, a), (s2, _e2, b) in itertools.pairwise(spans):
        if s2 < e1 and a != b:
            details["duplicates"].append(f"{j.id}: {a} and {b} ran at the same time")
    out = j.outcome
    uncaused = out is None or not out.state.ended or out.cause is None or out.cause is Cause.UNKNOWN
    if j.closed and uncaused and (not j.escalations or any(e.cause is Cause.UNKNOWN for e in j.escalations)):
        state = out.state.value if out else None
        details["without_cause"].append(f"{j.id}: closed as {state}/{out.cause.value if out and out.cause else None}")
    for sub in j.submissions:
        if sub.scheduler_id is None:
            continue
        rs = [r for r in runs_of.get(sub.marker, []) if r.scheduler_id == sub.scheduler_id]
        if not rs:
            details["disagreements"].append(f"{j.id}: submission {sub.n} ({sub.scheduler_id}) is not in sacct")
            continue
        last = rs[-1]
        expect = SACCT_STATES.get(last.base_state)
        got = sub.outcome
        if last.base_state in ACTIVE_SACCT:
            details["disagreements"].append(f"{j.id}: {sub.scheduler_id} is still {last.state} in Slurm")
            continue
        if expect is None or got is None:
            if got is None or got.state.ended:
                details["disagreements"].append(
                    f"{j.id}: {sub.scheduler_id} Slurm {last.state}, record {got.state.value if got else None}"
                )
            continue
        state, cause = expect
        if last.base_state == "COMPLETED" and last.exit_code.split(":")[0] != "0":
            state = State.FAILED
        if last.base_state == "CANCELLED" and not last.ran and sub.gate.value in ("closed", "abandoned"):
            continue  # stopped behind its gate: dispatch may record it as gone or cancelled
        if got.state is not state or (cause is not None and got.cause is not cause):
            details["disagreements"].append(
                f"{j.id}: {sub.scheduler_id} Slurm {last.state} {last.exit_code}, record "
                f"{got.state.value}/{got.cause.value if got.cause else None}"
            )


def cancel_leftovers(targets: list[Target], jobs: list[JobRecord], accounting: dict[str, list[Run]]) -> int:
    """scancel any Slurm job of this campaign still queued or running (only after a failed settle)."""
    n = 0
    for t in targets:
        ids = {sid for j in jobs if j.cluster == t.name for s in j.submissions for sid in [s.scheduler_id, *s.strays]}
        active = sorted({r.scheduler_id for r in accounting.get(t.name, []) if r.base_state in ACTIVE_SACCT} & ids)
        if active:
            t.run_admin("scancel", *[i for i in active if i], check=False)
            n += len(active)
    return n


def supervisor_stats(sups: dict[str, list[SupervisorProc]]) -> dict[str, Any]:
    calls: Counter[str] = Counter()
    cycles = conflicts = lost = errors = 0
    for group in sups.values():
        for s in group:
            for path in s.logs:
                try:
                    lines = path.read_text(errors="replace").splitlines()
                except OSError:
                    continue
                for line in lines:
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        continue
                    if "call" in rec:
                        calls[rec["call"]] += 1
                    elif "cycle" in rec:
                        cycles += 1
                        conflicts += rec["cycle"].get("conflicts", 0)
                        lost += rec["cycle"].get("lost", 0)
                    elif rec.get("event") == "cycle-error":
                        errors += 1
    return {
        "processes_started": sum(s.generation for g in sups.values() for s in g),
        "cycles": cycles,
        "conflicts": conflicts,
        "leases_lost": lost,
        "cycle_errors": errors,
        "scheduler_calls": dict(calls),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print the result as JSON (the default output)")
    p.add_argument("--cluster", choices=["local", "sid", "both"], default="local")
    p.add_argument("--jobs", type=int, default=20, help="jobs per cluster")
    p.add_argument("--supervisors", type=int, default=2, help="supervisor processes per cluster")
    p.add_argument("--faults", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--dsn", default=DEFAULT_DSN)
    p.add_argument("--poll", type=float, default=2.0)
    p.add_argument("--lease-ttl", type=float, default=8.0)
    p.add_argument("--window", type=float, default=None, help="seconds over which faults are spread")
    p.add_argument("--settle", type=float, default=300.0, help="seconds to wait for every job to close")
    p.add_argument("--keep", action="store_true", help="keep the PostgreSQL schema and the supervisors' logs")
    p.add_argument("--verbose", action="store_true", help="include the fault log")
    p.add_argument("--plant", action="store_true", help="plant known faults after the settle (checks the checks)")
    p.add_argument(
        "--kinds",
        help="draw faults of these kinds only (comma-separated), e.g. kill-supervisor,cut-records: a campaign that"
        " leaves the cluster's daemons and nodes alone",
    )
    p.add_argument(
        "--network",
        action="store_true",
        help="faults from the network too: each supervisor in a network namespace, cut off from PostgreSQL now and"
        " then, its clock off by up to two minutes (the local cluster only)",
    )
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        print("faults: run as root (admin.sh and the sid SSH key need it)", file=sys.stderr)
        return 2
    result = run(args)
    if not args.verbose:
        result.pop("fault_log", None)
    print(json.dumps(result, indent=None if args.json else 2, sort_keys=True))
    bad = ("jobs_lost", "duplicate_submissions", "ended_without_cause", "disagreements")
    if args.plant:
        planted = ("jobs_lost", "duplicate_submissions", "ended_without_cause", "disagreements")
        planted_seen = all(result[k] > 0 for k in planted)
        return 0 if planted_seen else 1
    history_ok = result["history"]["acted_without_lease"] == 0
    return 0 if all(result[k] == 0 for k in bad) and result["settled"] and history_ok else 1


if __name__ == "__main__":
    sys.exit(main())
