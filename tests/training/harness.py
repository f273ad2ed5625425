"""Running examples/train_ddp.py through dispatch, under a real supervisor process, and reading what happened
(or another example with the same command line and JSON lines: train_lightning.py, train_accelerate.py).

One :class:`Case` is one training job: its own directory (checkpoints, output files, final parameters, a SQLite
record store), submitted with the training rules, supervised by ``python -m dispatch.supervise`` (a real
process the tests may SIGKILL). :class:`Result` holds what a proof needs: the record (decisions with causes), the
final parameters' bytes, every rank's JSON log lines per execution, the executions' times from ``sacct`` and
the figures ``bench/train.py`` reports. Nothing here skips: a cluster that is not up fails the test.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import dispatch
from dispatch.extensions import CessationWarning, Output, SharedCheckpoint
from dispatch.records import SQLiteRecords
from dispatch.records.model import JobRecord
from dispatch.rules import RuleSet
from dispatch.slurm.harness import settings_for
from dispatch.spec import JobSpec

from ..slurm.clusters import admin, description

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train_ddp.py"
RULES = ROOT / "examples" / "rules" / "training.yaml"
HOST = "/opt/dispatch-host"
STEPS = 120
EVERY = 10
STEP_EVENTS = ("step", "first-step")


@dataclass
class Result:
    job: JobRecord
    params: bytes
    logs: dict[str, list[dict[str, Any]]]  # execution identity -> log lines (all ranks)
    wall: float
    """Seconds from the submission to the training's last step (its "done" line), else to the job's closing."""
    intervals: list[tuple[str, str, float, float]] = field(default_factory=list)  # (job id, state, start, end)
    interrupted_at: list[float] = field(default_factory=list)

    @property
    def causes(self) -> list[str]:
        return [d.cause.value for d in self.job.decisions]

    @property
    def executions(self) -> list[str]:
        return [e.identity for s in self.job.submissions for e in s.executions]

    def interruptions(self) -> list[str]:
        """What shows that this run was not one uninterrupted execution (empty for a clean run): more than one
        submission or execution, a decision, a resume from a checkpoint, a warning or stop seen by a rank."""
        found = []
        if len(self.job.submissions) != 1 or len(self.executions) != 1:
            found.append(f"{len(self.job.submissions)} submissions, executions {self.executions}")
        if self.causes:
            found.append(f"decisions on {self.causes}")
        if not any(ln.get("event") == "done" for lines in self.logs.values() for ln in lines):
            found.append("no rank logged 'done' (the logs were not read)")
        for execution, lines in self.logs.items():
            seen = sorted({str(ln.get("event")) for ln in lines} & {"resumed", "warned", "stopped"})
            if seen:
                found.append(f"{execution}: {', '.join(seen)}")
        return found

    def steps_redone(self) -> int:
        """Steps an interrupted execution had done beyond the checkpoint the next execution resumed from."""
        redone = 0
        ids = [i for i in self.executions if i in self.logs]
        for a, b in itertools.pairwise(ids):
            reached = max((ln["step"] for ln in self.logs[a] if ln.get("event") in STEP_EVENTS), default=0)
            resumed = next((ln["step"] for ln in self.logs[b] if ln.get("event") == "resumed"), 0)
            redone += max(0, reached - resumed)
        return redone

    def handoffs(self) -> list[tuple[int | None, int]]:
        """For each execution after the first: (the step the one before it stopped at on SIGTERM, or None if it
        was killed without stopping; the step this one resumed from, 0 without a checkpoint)."""
        ids = [i for i in self.executions if i in self.logs]
        out = []
        for a, b in itertools.pairwise(ids):
            stopped = next((ln["step"] for ln in self.logs[a] if ln.get("event") == "stopped"), None)
            resumed = next((ln["step"] for ln in self.logs[b] if ln.get("event") == "resumed"), 0)
            out.append((stopped, resumed))
        return out

    def recovery_s(self) -> float | None:
        """From each interruption to the first step of the execution after it (the mean, seconds)."""
        ids = [i for i in self.executions if i in self.logs]
        gaps = []
        for at, nxt in zip(self.interrupted_at, ids[1:], strict=False):
            first = [ln["t"] for ln in self.logs[nxt] if ln.get("event") == "first-step"]
            if first:
                gaps.append(min(first) - at)
        return round(sum(gaps) / len(gaps), 2) if gaps else None

    def assert_no_overlap(self) -> None:
        spans = sorted((s, e, j) for j, _, s, e in self.intervals if s > 0)
        assert spans, "sacct shows no execution"
        for (s1, e1, j1), (s2, _, j2) in itertools.pairwise(spans):
            assert e1 > 0 and e1 <= s2, f"executions overlap: {j1} ran {s1}-{e1}, {j2} started at {s2}"


class Case:
    """One training job on one cluster: submit, supervise, inject, wait, read."""

    def __init__(
        self,
        cluster: str,
        label: str,
        *,
        delay: float = 0.0,
        time_limit: float | None = None,
        warning: float = 20.0,
        steps: int = STEPS,
        every: int = EVERY,
        example: str = EXAMPLE.name,
    ) -> None:
        self.cluster = cluster
        self.desc = description(cluster)
        self.settings = settings_for(self.desc)
        # in a chroot cluster (sid) the job sees <chroot>/tmp as /tmp, and runs the host's Python and torch
        # mounted by scripts/training-sid.sh
        self.root = str(self.desc.get("chroot") or "")
        self.job_dir = f"/tmp/dispatch-train-{label}-{uuid.uuid4().hex[:6]}"
        self.dir = Path(self.root + self.job_dir)
        self.dir.mkdir(mode=0o777)
        os.chmod(self.dir, 0o777)  # over SSH the job runs as the cluster's user
        self.ckpt = self.dir / "ckpt"
        self.out = self.dir / "out"
        self.params = self.dir / "final.params"
        self.db = self.dir / "records.db"
        self.steps = steps
        self.every = every
        self.delay = delay
        self.time_limit = time_limit
        self.warning = warning
        if self.root:
            self.python = f"{HOST}/python/bin/python3"
            self.example = f"{HOST}/repo/examples/{example}"
            self.env = {"LD_LIBRARY_PATH": f"{HOST}/python/lib", "PYTHONPATH": f"{HOST}/site:{HOST}/repo/src"}
            if not Path(self.root + self.python).exists():
                pytest.fail(f"no host Python in {self.root}: run `sudo scripts/training-sid.sh`", pytrace=False)
        else:
            self.python = sys.executable
            self.example = str(EXAMPLE.parent / example)
            self.env = {"PYTHONPATH": str(ROOT / "src")}
        self.supervisors: list[subprocess.Popen[bytes]] = []
        self.started = 0.0
        self.job_id = ""

    def job_path(self, path: Path) -> str:
        """``path`` (on this host) as the job sees it."""
        return str(path)[len(self.root) :] if self.root else str(path)

    def spec(self) -> JobSpec:
        argv = (self.python, self.example, "--steps", str(self.steps), "--checkpoint-every", str(self.every),
                "--step-delay", str(self.delay), "--out", self.job_path(self.params))  # fmt: skip
        return JobSpec(
            argv,
            nodes=2,
            procs_per_node=1,
            time_limit=self.time_limit,
            env=self.env,
            extensions=(
                SharedCheckpoint(path=self.job_path(self.ckpt)),
                CessationWarning(seconds=self.warning),
                Output(dir=self.job_path(self.out)),
            ),
        )

    def submit(self) -> str:
        self.started = time.time()
        with dispatch.open("slurm", adapter=self.settings, records=SQLiteRecords(self.db)) as cluster:
            self.job_id = cluster.operator.submit(self.spec(), rules=RuleSet.load(RULES))
        return self.job_id

    def supervise(self, *extra: str) -> subprocess.Popen[bytes]:
        log = open(self.dir / f"supervisor-{len(self.supervisors)}.log", "wb")  # noqa: SIM115 - the child's
        proc = subprocess.Popen(
            [sys.executable, "-m", "dispatch.supervise", "--adapter", "slurm", "--settings",
             json.dumps(self.settings), "--store", str(self.db), "--poll", "1", "--lease-ttl", "8", *extra],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()
        self.supervisors.append(proc)
        return proc

    def record(self) -> JobRecord:
        store = SQLiteRecords(self.db)
        try:
            return store.get(self.job_id)
        finally:
            store.close()

    def logs(self) -> dict[str, list[dict[str, Any]]]:
        """Every JSON line the ranks printed, per execution (read from the output files of each execution)."""
        out: dict[str, list[dict[str, Any]]] = {}
        if not self.out.exists():
            return out
        for path in sorted(self.out.glob("*.out")):
            if path.name.endswith(".slurm.out"):
                continue
            # <marker>.<job id>.<restart>.out with marker dsp-<job>-<N>
            stem = path.name[: -len(".out")]
            marker, sid, restart = stem.rsplit(".", 2)
            execution = f"{marker.rsplit('-', 1)[1]}.{sid}.{restart}"
            lines = []
            for raw in path.read_text(errors="replace").splitlines():
                if raw.startswith("{"):
                    try:
                        lines.append(json.loads(raw))
                    except ValueError:
                        continue
            out[execution] = lines
        return out

    def step_reached(self) -> int:
        steps = [ln["step"] for lines in self.logs().values() for ln in lines if ln.get("event") in STEP_EVENTS]
        return max(steps, default=0)

    def wait(self, pred: Callable[[], bool], what: str, timeout: float = 240.0, every: float = 0.2) -> None:
        end = time.time() + timeout
        while not pred():
            if time.time() > end:
                raise AssertionError(f"{what}: not within {timeout:g}s; {self.describe()}")
            for p in self.supervisors:
                if p.poll() not in (None, -signal.SIGKILL):
                    raise AssertionError(f"a supervisor exited with {p.returncode}: {self.describe()}")
            time.sleep(every)

    def describe(self) -> str:
        try:
            rec = self.record()
        except Exception as exc:  # pragma: no cover - for failure messages only
            return f"(no record: {exc})"
        subs = [
            (s.n, s.scheduler_id, s.gate.value, s.outcome.state.value if s.outcome else None,
             s.outcome.cause.value if s.outcome and s.outcome.cause else None)
            for s in rec.submissions
        ]  # fmt: skip
        causes = [d.cause.value for d in rec.decisions]
        return f"dir {self.dir}; submissions {subs}; decisions {causes}; escalations {rec.escalations}\n{self.tails()}"

    def tails(self, lines: int = 12) -> str:
        """The last lines of each output file of the job (the ranks' and Slurm's), for a failure's message: the
        directory is gone after the run on a CI machine."""
        parts = []
        for f in sorted(p for p in self.out.glob("*") if p.is_file()):
            tail = f.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {f.name}\n" + "\n".join(tail))
        return "\n".join(parts) or f"(no output files in {self.out})"

    def closed(self) -> bool:
        return self.record().closed

    def finish(self, interrupted_at: list[float] | None = None) -> Result:
        self.wait(self.closed, "the job is closed", timeout=300)
        wall = time.time() - self.started
        self.stop_supervisors()
        rec = self.record()
        ids = [s.scheduler_id for s in rec.submissions if s.scheduler_id]
        logs = self.logs()
        done = [ln["t"] for lines in logs.values() for ln in lines if ln.get("event") == "done"]
        return Result(
            job=rec,
            params=self.params.read_bytes() if self.params.exists() else b"",
            logs=logs,
            wall=(max(done) - self.started) if done else wall,
            intervals=self.sacct(ids),
            interrupted_at=interrupted_at or [],
        )

    def sacct(self, ids: list[str]) -> list[tuple[str, str, float, float]]:
        """Each allocation's (job id, state, start, end) from accounting (``-D``: every execution, requeues too)."""
        rows: list[tuple[str, str, float, float]] = []
        end = time.time() + 30
        while True:
            r = subprocess.run(
                [*self.desc["admin"]["command"], "sacct", "-X", "-D", "-P", "-n", "-o", "JobID,State,Start,End",
                 "-j", ",".join(ids)],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            rows = []
            for line in r.stdout.splitlines():
                jid, state, start, stop = line.split("|")
                rows.append((jid, state, _epoch(start), _epoch(stop)))
            if (all(e > 0 for _, _, _, e in rows) and len({j for j, *_ in rows}) >= len(ids)) or time.time() > end:
                return rows
            time.sleep(2)

    def stop_supervisors(self) -> None:
        for p in self.supervisors:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()

    def cleanup(self) -> None:
        """Stop the supervisors and cancel the job's submissions; delete the directory unless the run is failing
        (called from a ``finally`` while an exception propagates) or DISPATCH_TRAIN_KEEP is set."""
        self.stop_supervisors()
        if self.job_id:
            try:
                rec = self.record()
                for s in rec.submissions:
                    if s.scheduler_id:
                        admin(self.cluster, "scancel", s.scheduler_id, check=False)
            except Exception:
                pass
        if sys.exc_info()[0] is None and not os.environ.get("DISPATCH_TRAIN_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)


def _epoch(text: str) -> float:
    text = text.strip()
    if not text or text in ("Unknown", "None"):
        return 0.0
    return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
