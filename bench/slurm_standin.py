"""A minimal Slurm backend for the fault campaign, registered as ``slurm-standin``: used only while the real
Slurm adapter (``dispatch.slurm``) is not on the branch, so the campaign and the supervisor processes can run on
the real clusters. It is NOT the Slurm adapter: no holds, no requeue, no output, no preflight; text output only.

* start: ``sbatch --parsable --hold`` (the start gate is Slurm's user hold), job name and comment = the marker;
* open: ``scontrol release`` (idempotent: a job no longer held is not an error);
* inspect_many: ``squeue`` for live jobs (one call) and ``sacct -D`` for the others (one call);
* find / find_many: ``squeue -n`` and ``sacct --name`` by marker;
* stop_job: ``scancel``.

Commands run locally or over OpenSSH (``BatchMode=yes``, host keys checked, a ControlMaster in ``controlDir``);
every argument is quoted with :func:`shlex.join` for the remote shell.

Settings: ``{"transport": "local"|"ssh", "defaults": {"partition", "account"}, "environment": {"set": {...}},
"ssh": {"host", "user", "port", "identityFile", "knownHostsFile", "controlDir"}}``.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dispatch.capabilities import Capabilities, Capability, no, yes
from dispatch.declarations import Declarations, PolledLoss
from dispatch.errors import NotFound, OutcomeUnknown, ReadOnly, Rejected, Unavailable
from dispatch.extensions import ExtensionPolicy
from dispatch.identity import RestartId
from dispatch.outcome import Cause, Evidence, Outcome, State
from dispatch.registry import OpenOptions, register
from dispatch.spi import ExecutionEvidence, Found, Gate, JobEvidence, StartRequest

NAME = "slurm-standin"
TIMEOUT = 30.0
_TRANSPORT_DOWN = (
    "Unable to contact slurm controller",
    "Socket timed out",
    "Connection refused",
    "Zero Bytes were transmitted",
    "Communication connection failure",
)
_SACCT = {
    "COMPLETED": (State.SUCCEEDED, Cause.EXIT),
    "FAILED": (State.FAILED, Cause.EXIT),
    "OUT_OF_MEMORY": (State.FAILED, Cause.OUT_OF_MEMORY),
    "NODE_FAIL": (State.FAILED, Cause.NODE_LOST),
    "PREEMPTED": (State.FAILED, Cause.PREEMPTED),
    "TIMEOUT": (State.FAILED, Cause.TIMEOUT),
    "DEADLINE": (State.FAILED, Cause.TIMEOUT),
    "BOOT_FAIL": (State.FAILED, Cause.LAUNCH_FAILED),
    "CANCELLED": (State.CANCELLED, Cause.CANCELLED),
    "REVOKED": (State.CANCELLED, Cause.CANCELLED),
}


@dataclass(frozen=True)
class SSHSettings:
    host: str
    user: str
    port: int = 22
    identity_file: str | None = None
    known_hosts_file: str | None = None
    control_dir: str | None = None


@dataclass(frozen=True)
class Defaults:
    partition: str | None = None
    account: str | None = None


@dataclass(frozen=True)
class Environment:
    set: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StandinSettings:
    transport: str = "local"
    defaults: Defaults = field(default_factory=Defaults)
    environment: Environment = field(default_factory=Environment)
    ssh: SSHSettings | None = None

    def __post_init__(self) -> None:
        if self.transport not in ("local", "ssh"):
            raise ValueError("transport must be local or ssh")
        if (self.transport == "ssh") != (self.ssh is not None):
            raise ValueError("ssh is required with transport ssh, and only then")


class TransportError(Exception):
    pass


class StandinBackend:
    def __init__(self, settings: StandinSettings, options: OpenOptions) -> None:
        self.s = settings
        self.clock = options.clock
        self._read_only = options.read_only

    # ----- transport -------------------------------------------------------------------------------------------

    def _argv(self, argv: Sequence[str]) -> list[str]:
        if self.s.ssh is None:
            return list(argv)
        ssh = self.s.ssh
        opts = [
            "-p",
            str(ssh.port),
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "ConnectTimeout=10",
        ]
        if ssh.identity_file:
            opts += ["-i", ssh.identity_file, "-o", "IdentitiesOnly=yes"]
        if ssh.known_hosts_file:
            opts += ["-o", f"UserKnownHostsFile={ssh.known_hosts_file}", "-o", "GlobalKnownHostsFile=/dev/null"]
        if ssh.control_dir:
            opts += [
                "-o", "ControlMaster=auto", "-o", f"ControlPath={ssh.control_dir}/cm-%C", "-o", "ControlPersist=60",
            ]  # fmt: skip
        return ["ssh", *opts, f"{ssh.user}@{ssh.host}", shlex.join(argv)]

    def _run(self, argv: Sequence[str], timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, **self.s.environment.set)
        try:
            r = subprocess.run(
                self._argv(argv), capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired:
            raise TransportError(f"{argv[0]} timed out after {timeout:g}s") from None
        except OSError as exc:
            raise TransportError(f"{argv[0]}: {exc.strerror}") from None
        if self.s.ssh is not None and r.returncode == 255:
            raise TransportError(f"ssh: {r.stderr.strip()[-300:]}")
        if r.returncode != 0 and any(m in r.stderr for m in _TRANSPORT_DOWN):
            raise TransportError(f"{argv[0]}: {r.stderr.strip()[-300:]}")
        return r

    def _read(self, argv: Sequence[str]) -> str:
        try:
            r = self._run(argv)
        except TransportError as exc:
            raise Unavailable(str(exc)) from None
        if r.returncode != 0:
            raise Unavailable(f"{argv[0]} failed ({r.returncode}): {r.stderr.strip()[-300:]}")
        return r.stdout

    def _write(self, what: str) -> None:
        if self._read_only:
            raise ReadOnly(f"{NAME}: {what} on a read-only backend")

    # ----- the SPI -----------------------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return NAME

    @property
    def read_only(self) -> bool:
        return self._read_only

    def capabilities(self) -> Capabilities:
        return Capabilities(
            {
                Capability.CONTAINER_IMAGE: no("stand-in: no images"),
                Capability.NATIVE_REQUEUE: no("stand-in: jobs are submitted without --requeue"),
                Capability.NATIVE_RESTART: no("stand-in: no native restart"),
                Capability.HOLD: no("stand-in: no Holder"),
                Capability.PRE_TERMINATION_SIGNAL: yes("scancel sends SIGTERM, then SIGKILL after KillWait"),
                Capability.ACCOUNTING_HISTORY: yes("sacct (slurmdbd) keeps every job"),
                Capability.ATTEMPT_INJECTION: no("stand-in: no execution identity in the job's environment"),
                Capability.WORKING_DIRECTORY: no("stand-in: no --chdir"),
                Capability.PROCS_PER_NODE: no("stand-in: one task per node"),
                Capability.OUTPUT_PATH: no("stand-in: output goes to /dev/null"),
                Capability.OUTPUT_READ: no("stand-in: no OutputReader"),
                Capability.OUTPUT_FOLLOW: no("stand-in: no OutputReader"),
                Capability.OUTPUT_RETAINED: no("stand-in: no output"),
                Capability.READMISSION_GATE: no("stand-in: no requeue"),
            }
        )

    def declarations(self) -> Declarations:
        # sacct keeps everything: no evidence is lost to polling; a lost node is reported after SlurmdTimeout
        inf = float("inf")
        return Declarations(node_loss_window=60.0, call_bound=TIMEOUT + 5.0, polled_loss=PolledLoss(inf, inf, inf, inf))

    def extension_policy(self) -> ExtensionPolicy:
        return ExtensionPolicy()

    def start(self, request: StartRequest) -> str:
        self._write("start")
        spec = request.spec
        argv = ["sbatch", "--parsable", "--hold", "-J", request.marker, f"--comment={request.marker}"]
        argv += ["-N", str(spec.nodes), "-o", "/dev/null", "-e", "/dev/null"]
        if self.s.defaults.partition:
            argv += ["-p", self.s.defaults.partition]
        if self.s.defaults.account:
            argv += ["-A", self.s.defaults.account]
        if spec.time_limit is not None:
            argv += ["-t", str(max(1, int((spec.time_limit + 59) // 60)))]
        argv += ["--wrap", shlex.join(spec.command)]
        try:
            r = self._run(argv)
        except TransportError as exc:
            raise OutcomeUnknown(f"sbatch: {exc}") from None
        if r.returncode != 0:
            raise Rejected(f"sbatch refused the job: {r.stderr.strip()[-300:]}")
        sid = r.stdout.strip().split(";")[0]
        if not sid.isdigit():
            raise OutcomeUnknown(f"sbatch printed no job id: {r.stdout.strip()[-100:]!r}")
        return sid

    def open(self, scheduler_id: str) -> None:
        self._write("open")
        try:
            r = self._run(["scontrol", "release", scheduler_id])
        except TransportError as exc:
            raise Unavailable(str(exc)) from None
        if r.returncode == 0:
            return
        ev = self.inspect(scheduler_id)  # released already (idempotent), or gone
        if ev.gate is Gate.OPEN:
            return
        raise Rejected(f"scontrol release {scheduler_id}: {r.stderr.strip()[-200:]}")

    def inspect(self, scheduler_id: str) -> JobEvidence:
        got = self.inspect_many([scheduler_id])
        if scheduler_id not in got:
            raise NotFound(f"Slurm has no trace of job {scheduler_id}")
        return got[scheduler_id]

    def inspect_many(self, scheduler_ids: Sequence[str]) -> Mapping[str, JobEvidence]:
        ids = [i for i in dict.fromkeys(scheduler_ids) if i.isdigit()]
        if not ids:
            return {}
        now = self.clock.now()
        out: dict[str, JobEvidence] = {}
        live = self._squeue(now)
        rest = [i for i in ids if i not in live or live[i][1] == "ended"]
        for i in ids:
            if i in live and live[i][1] != "ended":
                out[i] = live[i][0]
        if rest:
            out.update(self._sacct(rest, now))
        return out

    def _squeue(self, now: float) -> dict[str, tuple[JobEvidence, str]]:
        text = self._read(["squeue", "-h", "-a", "-t", "all", "-o", "%i|%T|%r|%j|%k|%S"])
        ev = Evidence("squeue", now)
        out: dict[str, tuple[JobEvidence, str]] = {}
        for line in text.splitlines():
            parts = line.split("|")
            if len(parts) != 6:
                continue
            sid, state, reason, name, _comment, _start = parts
            n = _submission(name)
            if n is None:
                continue
            ident = str(RestartId(n, sid, 0))
            gate, foreign = Gate.OPEN, ()
            if state == "PENDING":
                if reason == "JobHeldUser":
                    outcome = Outcome(State.PENDING, Cause.GATED, ev)
                    gate = Gate.CLOSED
                elif reason == "JobHeldAdmin":
                    outcome = Outcome(State.HELD, Cause.ADMIN_HELD, ev)
                    foreign = ("admin",)
                else:
                    outcome = Outcome(State.PENDING, Cause.QUEUED, ev, detail=reason)
                out[sid] = (JobEvidence(sid, name, outcome, gate, foreign_holds=foreign), "live")
            elif state in ("RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STOPPED", "SIGNALING"):
                outcome = Outcome(State.RUNNING, None, ev)
                ex = ExecutionEvidence(ident, 0, outcome)
                out[sid] = (JobEvidence(sid, name, outcome, Gate.OPEN, executions=(ex,)), "live")
            elif state in ("REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING"):
                outcome = Outcome(State.PENDING, Cause.QUEUED, ev, detail=state)
                out[sid] = (JobEvidence(sid, name, outcome, Gate.OPEN), "live")
            else:
                out[sid] = (JobEvidence(sid, name, Outcome(State.UNKNOWN, Cause.UNKNOWN, ev), Gate.OPEN), "ended")
        return out

    def _sacct(self, ids: list[str], now: float) -> dict[str, JobEvidence]:
        text = self._read(
            [
                "sacct",
                "-X",
                "-D",
                "-n",
                "-P",
                "-j",
                ",".join(ids),
                "-o",
                "JobIDRaw,State,ExitCode,JobName%200,Start,End",
            ]
        )
        ev = Evidence("sacct", now)
        rows: dict[str, list[list[str]]] = {}
        for line in text.splitlines():
            parts = line.split("|")
            if len(parts) == 6 and parts[0] in ids:
                rows.setdefault(parts[0], []).append(parts)
        out: dict[str, JobEvidence] = {}
        for sid, rs in rows.items():
            name = rs[-1][3]
            n = _submission(name) or 1  # a name sacct has not caught up with yet
            execs = []
            for r, (_, state, code, _name, start, end) in enumerate(rs):
                execs.append(ExecutionEvidence(str(RestartId(n, sid, r)), r, _outcome(state, code, ev),
                                               _time(start), _time(end)))  # fmt: skip
            outcome = execs[-1].outcome
            gate = Gate.OPEN
            if outcome.state is State.PENDING:
                gate = Gate.CLOSED if execs[-1].started_at is None and outcome.cause is Cause.GATED else Gate.OPEN
            out[sid] = JobEvidence(sid, name, outcome, gate, executions=tuple(e for e in execs if e.started_at) or ())
            if not out[sid].executions and outcome.state.ended:
                out[sid] = JobEvidence(sid, name, outcome, gate, executions=(execs[-1],))
        return out

    def find(self, marker: str, since: float) -> list[Found]:
        return self.find_many([marker], since).get(marker, [])

    def find_many(self, markers: Sequence[str], since: float) -> Mapping[str, list[Found]]:
        out: dict[str, list[Found]] = {m: [] for m in markers}
        if not markers:
            return out
        names = ",".join(markers)
        seen: set[str] = set()
        for line in self._read(["squeue", "-h", "-a", "-t", "all", "-n", names, "-o", "%i|%j"]).splitlines():
            sid, _, name = line.partition("|")
            if name in out and sid not in seen:
                seen.add(sid)
                out[name].append(Found(sid, name))
        start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since - 120))
        text = self._read(["sacct", "-X", "-n", "-P", "-S", start, "--name", names, "-o", "JobIDRaw,JobName%200"])
        for line in text.splitlines():
            sid, _, name = line.partition("|")
            if name in out and sid not in seen:
                seen.add(sid)
                out[name].append(Found(sid, name))
        return out

    def stop_job(self, scheduler_id: str) -> float:
        self._write("stop")
        try:
            r = self._run(["scancel", scheduler_id])
        except TransportError as exc:
            raise Unavailable(str(exc)) from None
        if r.returncode != 0:
            raise Unavailable(f"scancel {scheduler_id}: {r.stderr.strip()[-200:]}")
        return 5.0 + 10.0

    def close(self) -> None:
        """Nothing to release: a ControlMaster ends by itself after ControlPersist."""


def _submission(name: str) -> int | None:
    if not name.startswith("dsp-"):
        return None
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


def _time(text: str) -> float | None:
    if text in ("", "Unknown", "None"):
        return None
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def _outcome(state: str, code: str, ev: Evidence) -> Outcome:
    base = state.split()[0] if state else ""
    if base in ("PENDING", "REQUEUED", "REQUEUE_HOLD"):
        return Outcome(State.PENDING, Cause.QUEUED, ev, detail=state)
    if base in ("RUNNING", "COMPLETING", "SUSPENDED"):
        return Outcome(State.RUNNING, None, ev)
    mapped = _SACCT.get(base)
    if mapped is None:
        return Outcome(State.UNKNOWN, Cause.UNKNOWN, ev, detail=f"sacct state {state!r}")
    st, cause = mapped
    exit_code, _, sig = code.partition(":")
    ec = int(exit_code) if exit_code.isdigit() else None
    sg = int(sig) if sig.isdigit() and sig != "0" else None
    if base == "COMPLETED" and ec != 0:
        st = State.FAILED
    if base == "FAILED" and ec == 0 and sg is None:
        cause = Cause.LAUNCH_FAILED
    if st is State.SUCCEEDED:
        return Outcome(st, cause, ev, exit_code=0)
    return Outcome(st, cause, ev, exit_code=ec if cause is Cause.EXIT else None, signal=sg, detail=state)


def _factory(settings: StandinSettings | None, options: OpenOptions) -> Any:
    return StandinBackend(settings or StandinSettings(), options)


register(NAME, _factory, settings=StandinSettings, description="bench-only Slurm stand-in", replace=True)
