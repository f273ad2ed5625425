#!/usr/bin/env python3
"""Provoke every job state a real test cluster can produce and capture Slurm's raw answers.

    sudo python3 scripts/slurm/capture.py --cluster trixie [--states gated,completed] [--out DIR]

For each state (see STATES) it submits a job on the cluster named in ``clusters.json`` (as the cluster's own
user, over its own transport: the host shell or OpenSSH), drives it into that state (admin actions through
``admin.sh``), and captures, at each phase (``live``: while squeue knows the job; ``acct``: once accounting
has the state), exactly the commands the adapter runs:

* ``squeue_json``: ``squeue --json -t all -j ID`` (22.05 ignores the filters: its whole answer is filtered
  to the job here and re-serialised, the job objects themselves untouched; ``filtered`` says so);
* ``squeue_text``: ``SLURM_TIME_FORMAT=%s squeue -h -t all -j ID -O`` SQUEUE_TEXT_FIELDS;
* ``sacct_json``: ``sacct --json -D -j ID``;
* ``sacct_text``: ``SLURM_TIME_FORMAT=%s sacct -D -P -n -o`` SACCT_TEXT_FIELDS ``-j ID``.

The transcript goes to ``tests/slurm/transcripts/slurm-<release>.json`` (one per release); the parser and
mapping tests (tests/slurm/test_transcripts.py) read it. Faults (node DOWN, preemption) last seconds and are
always undone. Needs root (admin.sh, the clusters' SSH keys) and the clusters up (scripts/slurm/up.sh).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "src"))

from dispatch.slurm.holds import encode_hold  # noqa: E402
from dispatch.slurm.parse import SACCT_TEXT_FIELDS, SQUEUE_TEXT_FIELDS  # noqa: E402

STATE_DIR = os.environ.get("DISPATCH_TEST_STATE", "/var/lib/dispatch-test")
OUT = os.path.join(HERE, "..", "..", "tests", "slurm", "transcripts")
HOLD_INSTANCE = "h0000abcd"


class Cluster:
    def __init__(self, name: str, desc: dict[str, Any]) -> None:
        self.name, self.desc = name, desc
        self.release = desc["version"]
        self.old = self.release.startswith("22.05")
        self.default = desc["partitions"]["default"]
        self.preempt = desc["partitions"]["preempt"]
        self.nodes = desc["nodes"]
        self.lock = threading.Lock()

    def run(
        self, argv: list[str], check: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess:
        """Run a Slurm command as the cluster's user (env: variables for the command)."""
        words = ["env", *(f"{k}={v}" for k, v in (env or {}).items()), *argv]
        if self.desc["transport"] == "local":
            full = {**os.environ, **self.desc.get("env", {})}
            cmd = words
        else:
            control = f"/tmp/dsp-capture-{self.name}-%C"
            mux = ["-o", "ControlMaster=auto", "-o", f"ControlPath={control}", "-o", "ControlPersist=60"]
            cmd = [
                "ssh",
                *self.desc["ssh_options"],
                *mux,
                f"{self.desc['user']}@{self.desc['host']}",
                shlex.join(words),
            ]
            full = None
        proc = subprocess.run(cmd, capture_output=True, text=True, env=full, timeout=120)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{self.name}: {shlex.join(argv)}: rc={proc.returncode} {proc.stderr.strip()}")
        return proc

    def admin(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run([*self.desc["admin"]["command"], *argv], capture_output=True, text=True, check=check,
                              timeout=120)  # fmt: skip

    def sbatch(self, *args: str, wrap: str) -> str:
        out = self.run(["sbatch", "--parsable", "-o", "/dev/null", "-e", "/dev/null", *args, "--wrap", wrap])
        return out.stdout.strip().split(";")[0]

    def text_state(self, jid: str) -> tuple[str, str, str]:
        """(state, reason, restart count) from squeue's text, ("", "", "") once the job left squeue."""
        out = self.run(["squeue", "-h", "-t", "all", "-j", jid, "-o", "%T|%r|%i"], check=False)
        line = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""
        parts = line.split("|")
        return (parts[0], parts[1], jid) if len(parts) >= 2 else ("", "", "")

    def wait(self, jid: str, pred: Callable[[str, str], bool], what: str, timeout: float = 180.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            state, reason, _ = self.text_state(jid)
            if pred(state, reason):
                return
            time.sleep(0.3)
        raise RuntimeError(f"{self.name}: job {jid}: timed out waiting for {what} (last {self.text_state(jid)})")

    def wait_acct(self, jid: str, pred: Callable[[str], bool], what: str, timeout: float = 60.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            lines = self.run(["sacct", "-X", "-D", "-P", "-n", "-o", "State", "-j", jid], check=False).stdout.split(
                "\n"
            )
            states = [line.split()[0] for line in lines if line.strip()]  # "CANCELLED by 7900"
            if states and pred(states[-1]):
                return
            time.sleep(0.5)
        raise RuntimeError(f"{self.name}: job {jid}: accounting never showed {what}")

    def capture(self, jid: str, phase: str) -> dict[str, Any]:
        if self.old:
            doc = json.loads(self.run(["squeue", "--json"]).stdout)
            doc["jobs"] = [j for j in doc.get("jobs") or [] if str(j.get("job_id")) == jid]
            squeue_json, filtered = json.dumps(doc, indent=2), True
        else:
            sq = self.run(["squeue", "--json", "-t", "all", "-j", jid], check=False)
            squeue_json, filtered = (sq.stdout if sq.returncode == 0 else ""), False
        sq_text = self.run(["squeue", "-h", "-t", "all", "-j", jid, "-O", SQUEUE_TEXT_FIELDS], check=False,
                           env={"SLURM_TIME_FORMAT": "%s"})  # fmt: skip
        return {
            "phase": phase,
            "at": round(time.time(), 3),
            "squeue_json": squeue_json,
            "filtered": filtered,
            "squeue_text": sq_text.stdout if sq_text.returncode == 0 else "",
            "squeue_rc": sq_text.returncode,
            "sacct_json": self.run(["sacct", "--json", "-D", "-j", jid]).stdout,
            "sacct_text": self.run(
                ["sacct", "-D", "-P", "-n", "-o", SACCT_TEXT_FIELDS, "-j", jid], env={"SLURM_TIME_FORMAT": "%s"}
            ).stdout,
        }


# --------------------------------------------------------------------------- the states
# Each returns (job id, [captures]). Ended jobs are captured live (squeue still knows them, MinJobAge) and
# once more from accounting after it caught up.

ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL",
         "DEADLINE")  # fmt: skip


def _ended_job(c: Cluster, jid: str, final: str, timeout: float = 180.0) -> list[dict[str, Any]]:
    c.wait(jid, lambda s, r: s in ENDED, f"{final} in squeue", timeout)
    live = c.capture(jid, "live")
    c.wait_acct(jid, lambda s: s.startswith(final[:8]), final)
    time.sleep(1.0)  # the step records land a moment after the job's
    return [live, c.capture(jid, "acct")]


def _pending(c: Cluster, jid: str, reason: str) -> list[dict[str, Any]]:
    c.wait(jid, lambda s, r: s == "PENDING" and r.startswith(reason), f"PENDING {reason}")
    c.wait_acct(jid, lambda s: s == "PENDING", "PENDING")
    return [c.capture(jid, "live")]


def gated(c: Cluster) -> tuple[str, list]:
    jid = c.sbatch("--hold", "-J", "cap-gated", wrap="true")
    try:
        return jid, _pending(c, jid, "JobHeldUser")
    finally:
        c.run(["scancel", jid])


def dispatch_held(c: Cluster) -> tuple[str, list]:
    jid = c.sbatch("--hold", "-J", "cap-held", wrap="true")
    try:
        c.run(["scontrol", "update", f"JobId={jid}", f"StartTime=uts{encode_hold(HOLD_INSTANCE)}"])
        c.run(["scontrol", "release", jid])
        return jid, _pending(c, jid, "BeginTime")
    finally:
        c.run(["scancel", jid])


def admin_held(c: Cluster) -> tuple[str, list]:
    jid = c.sbatch("--begin=now+3600", "-J", "cap-adminheld", wrap="true")
    try:
        c.admin("scontrol", "hold", jid)
        return jid, _pending(c, jid, "JobHeldAdmin")
    finally:
        c.admin("scancel", jid, check=False)


def running_and_pending_on_resources(c: Cluster) -> list[tuple[str, str, list]]:
    run_id = c.sbatch("-J", "cap-running", wrap="sleep 300")
    try:
        c.wait(run_id, lambda s, r: s == "RUNNING", "RUNNING")
        c.wait_acct(run_id, lambda s: s == "RUNNING", "RUNNING")
        time.sleep(1.0)
        running = c.capture(run_id, "live")
        node = json.loads(running["sacct_json"])["jobs"][0].get("nodes", "") if not c.old else ""
        if not node:
            node = c.run(["squeue", "-h", "-j", run_id, "-o", "%N"]).stdout.strip()
        res_id = c.sbatch("-J", "cap-resources", "--exclusive", "-w", node, wrap="true")
        try:
            pend = _pending(c, res_id, "Resources")
        finally:
            c.run(["scancel", res_id])
        return [("running", run_id, [running]), ("pending-resources", res_id, pend)]
    finally:
        c.run(["scancel", run_id])


def completed(c: Cluster) -> tuple[str, list]:
    jid = c.sbatch("-J", "cap-completed", wrap="srun true")
    return jid, _ended_job(c, jid, "COMPLETED")


def failed_exit_3(c: Cluster) -> tuple[str, list]:
    jid = c.sbatch("-J", "cap-failed", wrap="exit 3")
    return jid, _ended_job(c, jid, "FAILED")


def signal_killed(c: Cluster) -> tuple[str, list]:
    jid = c.sbatch("-J", "cap-signal", wrap="kill -9 $$")
    return jid, _ended_job(c, jid, "FAILED")


def cancelled(c: Cluster) -> tuple[str, list]:
    jid = c.sbatch("-J", "cap-cancelled", wrap="sleep 300")
    c.wait(jid, lambda s, r: s == "RUNNING", "RUNNING")
    time.sleep(1.0)
    c.run(["scancel", jid])
    return jid, _ended_job(c, jid, "CANCELLED")


def timeout(c: Cluster) -> tuple[str, list]:
    jid = c.sbatch("-J", "cap-timeout", "-t", "1", wrap="sleep 600")
    return jid, _ended_job(c, jid, "TIMEOUT", timeout=240)


def oom_batch(c: Cluster) -> tuple[str, list]:
    jid = c.sbatch("-J", "cap-oom-batch", "--mem=100M", wrap="tail /dev/zero")
    return jid, _ended_job(c, jid, "OUT_OF_MEMORY")


def oom_step(c: Cluster) -> tuple[str, list]:
    jid = c.sbatch("-J", "cap-oom-step", "--mem=100M", wrap="srun tail /dev/zero")
    c.wait(jid, lambda s, r: s in ENDED, "the end")
    live = c.capture(jid, "live")
    c.wait_acct(jid, lambda s: s not in ("RUNNING", "PENDING"), "the end")
    time.sleep(1.0)
    return jid, [live, c.capture(jid, "acct")]


def requeued(c: Cluster) -> tuple[str, list]:
    """``scontrol requeue`` of a running job: captured at once (22.05's completing window), pending again,
    running again (execution 1), and from accounting after it was cancelled."""
    jid = c.sbatch("-J", "cap-requeued", "--requeue", wrap="sleep 300")
    try:
        c.wait(jid, lambda s, r: s == "RUNNING", "RUNNING")
        time.sleep(1.0)
        c.run(["scontrol", "requeue", jid])
        caps = [c.capture(jid, "just-requeued")]
        c.wait(jid, lambda s, r: s == "PENDING", "PENDING after the requeue")
        caps.append(c.capture(jid, "pending-again"))
        c.wait(jid, lambda s, r: s == "RUNNING", "RUNNING again", timeout=300)
        c.wait_acct(jid, lambda s: s == "RUNNING", "RUNNING again")
        time.sleep(1.0)
        caps.append(c.capture(jid, "running-again"))
    finally:
        c.run(["scancel", jid])
    c.wait_acct(jid, lambda s: s.startswith("CANCELLED"), "CANCELLED")
    time.sleep(1.0)
    caps.append(c.capture(jid, "acct"))
    return jid, caps


def requeued_held(c: Cluster) -> tuple[str, list]:
    jid = c.sbatch("-J", "cap-requeuehold", "--requeue", wrap="sleep 300")
    try:
        c.wait(jid, lambda s, r: s == "RUNNING", "RUNNING")
        time.sleep(1.0)
        c.run(["scontrol", "requeuehold", jid])
        c.wait(jid, lambda s, r: s == "PENDING", "PENDING after requeuehold")
        time.sleep(2.0)
        return jid, [c.capture(jid, "live")]
    finally:
        c.run(["scancel", jid])


def preempted(c: Cluster) -> tuple[str, list]:
    node = c.nodes[0]
    jid = c.sbatch("-J", "cap-preempted", "--exclusive", "-w", node, "-t", "10", wrap="sleep 300")
    c.wait(jid, lambda s, r: s == "RUNNING", "RUNNING", timeout=300)
    time.sleep(1.0)
    c.admin("sbatch", "-p", c.preempt, "--exclusive", "-w", node, "-J", "cap-preemptor", "-o", "/dev/null",
            "--wrap", "sleep 5")  # fmt: skip
    return jid, _ended_job(c, jid, "PREEMPTED")


def node_fail(c: Cluster) -> tuple[str, list]:
    node = c.nodes[-1]
    jid = c.sbatch("-J", "cap-nodefail", "-w", node, "-t", "10", wrap="sleep 300")
    c.wait(jid, lambda s, r: s == "RUNNING", "RUNNING", timeout=300)
    time.sleep(1.0)
    c.admin("scontrol", "update", f"NodeName={node}", "State=DOWN", "Reason=dispatch-capture")
    try:
        c.wait(jid, lambda s, r: s in ENDED, "NODE_FAIL in squeue")
        live = c.capture(jid, "live")
    finally:
        c.admin("scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)
    c.wait_acct(jid, lambda s: s.startswith("NODE_FAIL"), "NODE_FAIL")
    time.sleep(1.0)
    return jid, [live, c.capture(jid, "acct")]


PARALLEL: dict[str, Callable[[Cluster], tuple[str, list]]] = {
    "gated": gated,
    "dispatch-held": dispatch_held,
    "admin-held": admin_held,
    "completed": completed,
    "failed-exit-3": failed_exit_3,
    "signal-killed": signal_killed,
    "cancelled": cancelled,
    "timeout": timeout,
    "oom-batch": oom_batch,
    "oom-step": oom_step,
    "requeued": requeued,
    "requeued-held": requeued_held,
}
EXCLUSIVE: dict[str, Callable[[Cluster], tuple[str, list]]] = {"preempted": preempted, "node-fail": node_fail}
STATES = [*PARALLEL, "running", "pending-resources", *EXCLUSIVE]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cluster", required=True, help="a cluster of clusters.json: local, sid, trixie")
    ap.add_argument("--states", default="", help=f"comma-separated subset of: {','.join(STATES)}")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()
    with open(os.path.join(STATE_DIR, "clusters.json")) as f:
        desc = json.load(f)
    if args.cluster not in desc:
        ap.error(f"no cluster {args.cluster!r} in clusters.json (have {', '.join(k for k in desc if k[0] != 's')})")
    c = Cluster(args.cluster, desc[args.cluster])
    wanted = [s for s in args.states.split(",") if s] or STATES
    unknown = sorted(set(wanted) - set(STATES))
    if unknown:
        ap.error(f"unknown states: {', '.join(unknown)}")
    if not c.desc.get("memory_enforced"):
        wanted = [s for s in wanted if not s.startswith("oom")]
    path = os.path.join(args.out, f"slurm-{c.release}.json")
    old: dict[str, Any] = {}
    if os.path.exists(path):
        with open(path) as f:
            old = json.load(f).get("states", {})
    results: dict[str, Any] = {}
    errors: list[str] = []
    t0 = time.monotonic()

    def one(name: str, fn: Callable[[Cluster], Any]) -> None:
        try:
            got = fn(c)
            for state, jid, caps in got if isinstance(got, list) else [(name, *got)]:
                results[state] = {"job_id": jid, "captures": caps}
            print(f"[capture {c.name}] {name}: done ({time.monotonic() - t0:.0f} s)", file=sys.stderr)
        except Exception as exc:  # report every state's failure, keep the others
            errors.append(f"{name}: {exc}")
            print(f"[capture {c.name}] {name}: FAILED: {exc}", file=sys.stderr)

    jobs = [(n, fn) for n, fn in PARALLEL.items() if n in wanted]
    if {"running", "pending-resources"} & set(wanted):
        jobs.append(("running", running_and_pending_on_resources))
    threads = [threading.Thread(target=one, args=j) for j in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for n, fn in EXCLUSIVE.items():
        if n in wanted:
            one(n, fn)
    states = {**old, **{k: v for k, v in results.items() if k in wanted}}
    doc = {
        "release": c.release,
        "cluster": c.name,
        "transport": c.desc["transport"],
        "captured_at": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": f"python3 scripts/slurm/capture.py --cluster {c.name}",
        "squeue_text_fields": SQUEUE_TEXT_FIELDS,
        "sacct_text_fields": SACCT_TEXT_FIELDS,
        "states": dict(sorted(states.items())),
    }
    os.makedirs(args.out, exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=1, sort_keys=False)
        f.write("\n")
    os.replace(path + ".tmp", path)
    print(f"[capture {c.name}] wrote {path}: {len(states)} states, {time.monotonic() - t0:.0f} s", file=sys.stderr)
    for e in errors:
        print(f"[capture {c.name}] ERROR {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
