#!/usr/bin/env python3
"""Run the test suite as independent pytest groups in parallel: one per real cluster, the apiserver tests, the
control-plane tests, the real-pod tests, the rest.

Why groups and not pytest-xdist: the tests that use a real Slurm cluster inject faults into it (preemptions, a
killed slurmd, a restarted slurmctld), so two of them must never run on the same cluster at once; tests on
different clusters, and tests that use no cluster, share nothing and may run side by side. Each group is one
serial pytest process selected by markers; the groups run concurrently and most of their time is spent waiting
on daemons, so the wall time approaches that of the longest group rather than the sum.

Usage: ``scripts/test-groups.py [PYTEST ARGS...]`` (the arguments go to every group). Each group's output goes to
``$DISPATCH_TEST_LOGS`` (default ``/var/lib/dispatch-test/pytest``); a group's output is printed whole when it
fails and as its closing lines when it passes. The last line is the combined count, ``N passed, N failed``,
and the exit status is non-zero when any group failed or no test ran at all.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Markers that bind a test to one real cluster. A test carrying two of them runs in the group listed first.
CLUSTER_MARKERS = ("slurm_local", "slurm_sid", "slurm_trixie", "gridengine")
# Markers of their own group, run beside the cluster groups: the real apiextensions-apiserver, the real Kubernetes
# control plane and its real nodes (kubelets with containerd) are injected with no faults by anyone (each test has
# its own namespace there, and the real nodes' taint keeps every other pod off them), and their tests are long
# enough (the Kubeflow suites on them) to lengthen `rest` by minutes. A test carrying two of them runs in the group
# listed first.
OWN_GROUP_MARKERS = ("apiserver", "controlplane", "realpods")
# Markers whose daemons the test command does not start: left out of every group (none today).
NOT_STARTED_MARKERS: tuple[str, ...] = ()
# Folders of tests that need no daemon but enough CPU time that `rest`, run serially, would be the longest group:
# each runs as a group of its own (the simulator's seed sweeps, the Kubeflow adapter against the project's model,
# the wheel installed in a fresh venv, which waits mostly on the package index).
OWN_GROUP_FOLDERS = ("tests/sim", "tests/kubeflow", "tests/packaging")


@dataclass
class Group:
    name: str
    expression: str
    paths: tuple[str, ...] = ()
    """Where pytest collects (default: the configured testpaths)."""
    ignore: tuple[str, ...] = ()


def groups() -> list[Group]:
    out: list[Group] = []
    earlier: list[str] = []
    for marker in CLUSTER_MARKERS:
        expr = " and ".join([marker, *(f"not {m}" for m in earlier)])
        out.append(Group(marker.removeprefix("slurm_"), expr))
        earlier.append(marker)
    absent = [f"not {m}" for m in NOT_STARTED_MARKERS]
    for marker in OWN_GROUP_MARKERS:
        out.append(Group(marker, " and ".join([marker, *(f"not {m}" for m in earlier), *absent])))
        earlier.append(marker)
    no_daemon = " and ".join(f"not {m}" for m in (*CLUSTER_MARKERS, *OWN_GROUP_MARKERS, *NOT_STARTED_MARKERS))
    for folder in OWN_GROUP_FOLDERS:
        out.append(Group(folder.removeprefix("tests/"), no_daemon, paths=(folder,)))
    out.append(Group("rest", no_daemon, ignore=OWN_GROUP_FOLDERS))
    return out


def counts(junit: Path) -> dict[str, int]:
    """Passed/failed/errors/skipped from a JUnit XML file (zeros when pytest wrote none)."""
    result = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    if not junit.exists():
        return result
    root = ET.parse(junit).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    for suite in suites:
        tests = int(suite.get("tests", 0))
        failed = int(suite.get("failures", 0))
        errors = int(suite.get("errors", 0))
        skipped = int(suite.get("skipped", 0))
        result["failed"] += failed
        result["errors"] += errors
        result["skipped"] += skipped
        result["passed"] += tests - failed - errors - skipped
    return result


def main(argv: list[str]) -> int:
    logs = Path(os.environ.get("DISPATCH_TEST_LOGS", "/var/lib/dispatch-test/pytest"))
    logs.mkdir(parents=True, exist_ok=True)
    running: dict[str, tuple[subprocess.Popen[bytes], Path, Path, float]] = {}
    for group in groups():
        log = logs / f"{group.name}.log"
        junit = logs / f"{group.name}.xml"
        junit.unlink(missing_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-m",
            group.expression,
            *group.paths,
            *(f"--ignore={folder}" for folder in group.ignore),
            f"--junitxml={junit}",
            "-p",
            "no:cacheprovider",
            *argv,
        ]
        with log.open("wb") as f:
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
        running[group.name] = (proc, log, junit, time.monotonic())
        print(f"[groups] started {group.name}: pytest -m {group.expression!r} (log {log})", flush=True)

    total = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    bad: list[str] = []
    while running:
        for name, (proc, log, junit, t0) in list(running.items()):
            rc = proc.poll()
            if rc is None:
                continue
            del running[name]
            c = counts(junit)
            for k in total:
                total[k] += c[k]
            elapsed = time.monotonic() - t0
            text = log.read_text(errors="replace")
            # exit 5 = no test selected: a group may be empty, the combined count below catches an empty run
            ok = rc in (0, 5)
            print(f"\n[groups] {name} finished in {elapsed:.0f} s, exit {rc}: {c}", flush=True)
            if ok:
                tail = [line for line in text.splitlines() if line.strip()][-25:]
                print("\n".join(tail), flush=True)
            else:
                bad.append(name)
                print(text, flush=True)
        time.sleep(1)

    ran = total["passed"] + total["failed"] + total["errors"]
    if bad:
        print(f"\n[groups] failed groups: {', '.join(bad)}")
    line = f"{total['passed']} passed, {total['failed'] + total['errors']} failed, {total['skipped']} skipped"
    print(line)
    if ran == 0:
        print("[groups] no test ran", file=sys.stderr)
        return 1
    return 1 if bad or total["failed"] or total["errors"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
