#!/usr/bin/env python3
"""Capture Slurm's raw answers about one job array's tasks, each in another state, on a real test cluster.

    sudo python3 scripts/slurm/capture_arrays.py --cluster local|trixie|sid [--out DIR]

Submits a held array of three tasks named ``dsp-capture-array`` (as dispatch does: ``--hold``), then: task 0
stays behind its gate (inside the array's own record), task 1 is released and completes, task 2 is given a
record of its own (a no-op update, as dispatch's stop does) and cancelled. Once squeue and sacct show that,
it captures exactly the commands the adapter runs on the array (see capture.py; squeue's text with ``-r``):
``squeue_text``, ``squeue_json`` (22.05's unfiltered answer filtered to the array here, ``filtered`` says so),
``sacct_text`` and ``sacct_json``. The transcript goes to ``tests/slurm/transcripts/arrays-<release>.json``;
tests/slurm/test_array_transcripts.py reads it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "src"))

from capture import OUT, STATE_DIR, Cluster  # noqa: E402

from dispatch.slurm.parse import SACCT_TEXT_FIELDS, SQUEUE_TEXT_FIELDS  # noqa: E402


def _until(what: str, check: object, timeout: float = 180.0) -> None:
    end = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > end:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.5)


def capture(c: Cluster) -> dict[str, object]:
    jid = c.sbatch("--hold", "--array=0-2", "--job-name=dsp-capture-array", wrap="true")
    try:
        c.run(["scontrol", "release", f"{jid}_1"])
        c.run(["scontrol", "update", f"JobId={jid}_2", "Requeue=0"])
        c.run(["scancel", f"{jid}_2"])

        def ended() -> bool:
            lines = c.run(["sacct", "-X", "-P", "-n", "-o", "JobID,State", "-j", jid], check=False).stdout.split()
            acct = dict(line.split("|", 1) for line in lines if "|" in line)
            lines = c.run(["squeue", "-r", "-h", "-t", "all", "-o", "%i|%T", "-j", jid], check=False).stdout.split()
            live = dict(line.split("|", 1) for line in lines if "|" in line)
            return acct.get(f"{jid}_1") == "COMPLETED" and live.get(f"{jid}_2") == "CANCELLED"

        # a task cancelled before it ever started reaches accounting late or never (26.05): squeue is the witness
        _until("task 1 completed in accounting and task 2 cancelled in squeue", ended)
        env = {"SLURM_TIME_FORMAT": "%s"}
        if c.old:
            doc = json.loads(c.run(["squeue", "--json"]).stdout)
            doc["jobs"] = [j for j in doc.get("jobs") or [] if str(j.get("array_job_id")) == jid]
            squeue_json, filtered = json.dumps(doc, indent=2), True
        else:
            squeue_json, filtered = c.run(["squeue", "--json", "-t", "all", "-j", jid]).stdout, False
        return {
            "release": c.release,
            "cluster": c.name,
            "captured_at": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": f"python3 scripts/slurm/capture_arrays.py --cluster {c.name}",
            "array_job_id": jid,
            "tasks": {"0": "gated", "1": "completed", "2": "cancelled"},
            "squeue_text_fields": SQUEUE_TEXT_FIELDS,
            "sacct_text_fields": SACCT_TEXT_FIELDS,
            "squeue_text": c.run(
                ["squeue", "-h", "-r", "-t", "all", "-j", jid, "-O", SQUEUE_TEXT_FIELDS], env=env
            ).stdout,
            "squeue_json": squeue_json,
            "filtered": filtered,
            "sacct_text": c.run(["sacct", "-D", "-P", "-n", "-o", SACCT_TEXT_FIELDS, "-j", jid], env=env).stdout,
            "sacct_json": c.run(["sacct", "--json", "-D", "-j", jid]).stdout,
        }
    finally:
        c.run(["scancel", jid], check=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cluster", required=True)
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()
    with open(os.path.join(STATE_DIR, "clusters.json")) as f:
        desc = json.load(f)[args.cluster]
    c = Cluster(args.cluster, desc)
    doc = capture(c)
    path = os.path.join(args.out, f"arrays-{c.release}.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
