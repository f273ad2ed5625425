"""Slurm rows of the cycle bench: the cost of one supervisor observation (inspect_many of every job).

    python bench/slurm_cycle.py --jobs 1000,10000 --clusters local,trixie,sid --running 0.25 --json
    python bench/slurm_cycle.py --jobs 1000 --src main=/work/main/src,this=src --json
    python bench/slurm_cycle.py --replay --jobs 1000,10000 --json

Brings the project's clusters up if they are down, creates N gated jobs on each cluster (``start_many``), makes
a share of them (``--running``, default a quarter) look running and reporting, then times one batched
observation of all of them (best of 7 rounds) and counts the Slurm commands and transport round trips it took.
Each row also has, measured in the same run over the same transport:

* ``bare_ms``: the very scripts the observation ran, run again alone (no parsing, no mapping);
* ``floor_ms``: one plain-text ``squeue -h -t all -j IDS -o '%i|%T|%r'`` of the same jobs (id, state,
  reason): the cheapest question the scheduler answers;
* ``ratio`` = ``cycle_ms / floor_ms`` and ``bare_ratio`` = ``cycle_ms / bare_ms``;
* ``fs_ops_per_cycle``: the file system operations the observation's scripts made under the jobs' output root
  (where the pointers and progress reports live: opens, stats, directory reads, reads, closes), counted by
  running them once more under ``strace -f -y`` on the login node (where strace is installed there; else
  null), and ``fs_ops_by_call``, the same by system call.

Running and reporting: the test clusters have a few CPUs, so the chosen jobs (every ``1/share``-th task) stay
gated, and the cluster's ``squeue`` is wrapped for the cycle (a ``PATH`` entry on the login node) so that its
listing shows them RUNNING; each has a report of rank 0 for its execution where the adapter reads reports (both
the layout of this code and the older one, beside the output files, are written, so either code finds them).
The wrapper (an ``awk`` over squeue's output) runs for the floor's ``squeue`` too, so its cost cancels.

``--no-progress`` asks for no job's progress (``inspect_many(ids, progress_of=())``: what the supervisor asks
when no rule judges stalls; this code only). ``--src NAME=DIR,...`` runs the whole bench once per source tree
(``DISPATCH_BENCH_SRC``), one after the other, and tags each row with its ``src``. Prints {"results": [{src,
cluster, release, jobs, running, reporting, progress_read, slurm_commands_per_cycle, ssh_round_trips_per_cycle,
scripts_per_cycle, fs_ops_per_cycle, fs_ops_by_call, cycle_ms, bare_ms, floor_ms, ratio, bare_ratio}, ...]}.
(bench/cycle.py --adapter slurm delegates here.)

``--replay`` needs no cluster: it times the Python side of one observation alone (``inspect_many`` against an
executor that answers the observation's script with a replayed output: framing, parsing the listing and the
reports, mapping, evidence), for each ``--jobs`` count, best of ``--rounds``. The replayed output is what the
observation prints for the bench's own set-up (one gated array of N tasks, every ``1/share``-th task shown
RUNNING by the wrapper and reporting rank 0), built from the bytes the captured transcripts show
(``tests/slurm/transcripts``): the array's record row, one row per running task, ``ROOT`` and one report line
each. ``--profile N`` prints the N costliest functions (cProfile, cumulative) to stderr. Rows: {src, mode:
"replay", release, jobs, reporting, cycle_ms, per_job_us, listing_bytes, reports_bytes}.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import subprocess
import sys
import time
from typing import Any

from _slurm_clusters import admin, clusters, settings_for

SHIM = r"""#!/bin/bash
# bench only: the real squeue, with every SHARE-th job of the adapter's listing shown RUNNING (a pending
# array's record row stays, followed by a row of each such task, as if it had been split off to run)
printf -v now '%(%s)T' -1
REAL "$@" | awk -F'|' -v OFS='|' -v share=SHARE -v now="$now" '
  NF < 8 || $2 !~ /PENDING/ { print; next }
  $1 ~ /_\[/ {
    print; a = $1; sub(/_.*/, "", a); r = $1; sub(/.*_\[/, "", r); sub(/[%\]].*/, "", r)
    n = split(r, parts, ",")
    for (i = 1; i <= n; i++) {
      m = split(parts[i], lh, "-"); lo = lh[1] + 0; hi = (m > 1 ? lh[2] : lh[1]) + 0
      for (t = lo; t <= hi; t++)
        if (t % share == 0) { $1 = a "_" t; $2 = "RUNNING"; $3 = "None"; $6 = now; $7 = "n1"; print }
    }
    next
  }
  { m = split($1, id, "_"); if (id[m] % share == 0) { $2 = "RUNNING"; $3 = "None"; $6 = now; $7 = "n1" } print }'
exit "${PIPESTATUS[0]}"
"""

REPORTS = r"""
out=$1 root=$2 cluster=$3 now=$4; shift 4
(umask 077; mkdir -p -- "$root")
for jid in "$@"; do
  r="{\"rank\":0,\"step\":7,\"total\":100,\"at\":$now,\"execution\":\"1.$jid.0\",\"first\":{\"step\":1,\"at\":$now}}"
  (umask 077; mkdir -p -- "$root/$jid"; printf '%s\n' "$r" >"$root/$jid/rank-0.json")
  base=; { IFS= read -r base <"$out/.jobs/$cluster.$jid"; } 2>/dev/null
  [ -n "$base" ] || continue
  (umask 077; mkdir -p -- "$base.$jid.progress"; printf '%s\n' "$r" >"$base.$jid.progress/rank-0.json")
done
"""
"""Writes a report of rank 0 for each job ``$5...``: in ``$2/<job id>/`` and, through the job's pointer in
``$1/.jobs/$3.<job id>``, in ``<base>.<job id>.progress/`` (the layout before the cluster's progress directory)."""

NOT_STORAGE = {"dup", "dup2", "dup3", "fcntl", "ioctl", "lseek", "mmap", "munmap", "pread64", "fadvise64"}


class CountingExecutor:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.scripts = 0
        self.calls = 0
        self.seen: list[str] = []

    def run(self, script: str, timeout: float) -> Any:
        self.scripts += 1
        self.calls += sum(1 for line in script.splitlines() if line.startswith("_dsp_call "))
        self.seen.append(script)
        return self.inner.run(script, timeout)

    def close(self) -> None:
        self.inner.close()


def timed(fn: Any, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, (time.perf_counter() - t0) * 1000)
    return best


def login(ex: Any, text: str, *args: str) -> str:
    """Run bash ``text`` with ``args`` on the login node (outside the adapter's scripts); its stdout."""
    quoted = " ".join("'" + a.replace("'", "'\\''") + "'" for a in args)
    b64 = base64.b64encode(text.encode()).decode()
    result = ex.run(
        f'f=$(mktemp); printf %s {b64} | base64 -d >"$f"; bash "$f" {quoted}; rc=$?; rm -f "$f"; exit $rc', 300
    )
    return str(result.stdout)


def fs_ops(ex: Any, scripts: list[str], under: str) -> tuple[int | None, dict[str, int]]:
    """The system calls ``scripts`` make on files under ``under``, run once more under ``strace -f -y`` on the
    login node: (total, by call); (None, {}) without strace there."""
    # the scripts travel inside the probe's text (a builtin's argument), never as a program's argument: the
    # listing of 10,000 jobs is longer than one argument may be
    runs = "".join(
        f'printf %s {base64.b64encode(x.encode()).decode()} | base64 -d >"$f"\n'
        'strace -f -qq -y -e trace=%file,%desc -o "$t" bash "$f" >/dev/null 2>&1; cat "$t"\n'
        for x in scripts
    )
    probe = "command -v strace >/dev/null || { echo NOSTRACE; exit 0; }\nt=$(mktemp); f=$(mktemp)\n" + runs
    out = login(ex, probe + 'rm -f "$t" "$f"\n')
    if out.startswith("NOSTRACE") or not out.strip():
        return None, {}
    by: dict[str, int] = {}
    call = re.compile(r"^\d+\s+(\w+)\((.*)$")
    for line in out.splitlines():
        m = call.match(line)
        if m is None or m.group(1) in NOT_STORAGE:
            continue
        name, args = m.groups()
        first, _, rest = args.partition(", ")
        target = ""
        fd = re.fullmatch(r"(?:AT_FDCWD|\d+)<([^>]*)>", first)
        if first.startswith('"'):
            target = first.strip('"')
        elif fd is not None and name in ("openat", "newfstatat", "statx", "faccessat", "faccessat2", "readlinkat"):
            path = rest.split('"')[1] if rest.startswith('"') else ""
            target = path if path.startswith("/") else f"{fd.group(1)}/{path}"
        elif fd is not None:
            target = fd.group(1)
        if target == under or target.startswith(under + "/"):
            by[name] = by.get(name, 0) + 1
    return sum(by.values()), dict(sorted(by.items()))


def rows(
    job_counts: list[int], names: list[str], share: int, cycles: int = 7, *, progress: bool = True
) -> list[dict[str, Any]]:
    import dispatch
    import dispatch.slurm as slurm
    from dispatch.settings import decode
    from dispatch.slurm.scripts import Script
    from dispatch.slurm.settings import SlurmSettings
    from dispatch.slurm.transport import make_transport
    from dispatch.spec import JobSpec
    from dispatch.spi import StartRequest

    src = os.path.dirname(os.path.dirname(dispatch.__file__))
    out = []
    for name, desc in clusters(names).items():
        tag = f"bc{int(time.time())}"
        out_dir = f"/tmp/dispatch-bench-cycle-{tag}"
        raw = settings_for(desc)
        raw["output"] = {"dir": out_dir}
        plain = decode(SlurmSettings, raw)
        probe = make_transport(plain)
        try:
            path, real = login(
                probe,
                'printf "%s\\n" "$PATH"; command -v squeue',
            ).splitlines()[:2]
            shim_dir = f"{out_dir}.shim"
            shim = SHIM.replace("REAL", real).replace("SHARE", str(share))
            login(probe, 'mkdir -p -- "$1" && printf %s "$2" >"$1/squeue" && chmod 755 "$1/squeue"', shim_dir, shim)
        finally:
            probe.close()
        raw["env"] = {**raw.get("env", {}), "PATH": f"{shim_dir}:{path}"}
        settings = decode(SlurmSettings, raw)
        counter = CountingExecutor(make_transport(settings))
        b = slurm.new(settings, executor=counter)
        cluster = re.sub(r"[^A-Za-z0-9_.-]", "_", b.facts.cluster_name) or "slurm"
        ids: list[str] = []
        try:
            for n in job_counts:
                if len(ids) < n:
                    reqs = [
                        StartRequest(tag, k, f"dsp-{tag}-{k}", JobSpec(("true",))) for k in range(len(ids) + 1, n + 1)
                    ]
                    made = b.start_many(reqs)
                    bad = [m for m in made if not isinstance(m, str)]
                    assert not bad, f"{len(bad)} submissions failed: {bad[0]}"
                    fresh = [str(m) for m in made]
                    running = [j for j in fresh if int(j.split("_")[-1]) % share == 0]
                    for i in range(0, len(running), 2000):
                        now = str(time.time() + b.facts.offset)
                        root = f"{out_dir}/.progress/{cluster}"
                        login(counter.inner, REPORTS, out_dir, root, cluster, now, *running[i : i + 2000])
                    ids.extend(fresh)
                reporting = sum(1 for j in ids[:n] if int(j.split("_")[-1]) % share == 0)
                floor_script = Script(env=settings.env)  # through the same wrapper: its cost cancels
                floor_script.call(["squeue", "-h", "-t", "all", "-j", ",".join(ids[:n]), "-o", "%i|%T|%r"])
                floor_text = floor_script.render()
                # rounds interleave the three measures, so load on the shared machine hits them alike; the
                # best of each is kept
                cycle_ms = bare_ms = floor_ms = float("inf")
                best: dict[str, Any] = {}
                last: list[str] = []
                for _ in range(cycles):
                    s0, c0, seen0 = counter.scripts, counter.calls, len(counter.seen)
                    t0 = time.perf_counter()
                    got = b.inspect_many(ids[:n]) if progress else b.inspect_many(ids[:n], progress_of=())
                    ms = (time.perf_counter() - t0) * 1000
                    assert len(got) == n, f"saw {len(got)} of {n} jobs"
                    shown = sum(1 for ev in got.values() if ev.current is not None and ev.current.progress)
                    assert shown == (reporting if progress else 0), f"{shown} jobs with progress, {reporting} reported"
                    scripts = last = counter.seen[seen0:]
                    bare_ms = min(bare_ms, timed(lambda s=scripts, ex=counter.inner: [ex.run(x, 120) for x in s], 1))
                    floor_ms = min(floor_ms, timed(lambda t=floor_text, ex=counter.inner: ex.run(t, 120), 1))
                    if ms < cycle_ms:
                        cycle_ms = ms
                        best = {
                            "src": src,
                            "cluster": name,
                            "release": b.slurm_release,
                            "jobs": n,
                            "running": reporting,
                            "reporting": reporting,
                            "progress_read": progress,
                            "slurm_commands_per_cycle": counter.calls - c0,
                            "ssh_round_trips_per_cycle": (counter.scripts - s0) if desc["transport"] == "ssh" else 0,
                            "scripts_per_cycle": counter.scripts - s0,
                        }
                ops, by_call = fs_ops(counter.inner, last, out_dir)
                best.update(
                    fs_ops_per_cycle=ops,
                    fs_ops_by_call=by_call,
                    cycle_ms=round(cycle_ms, 1),
                    bare_ms=round(bare_ms, 1),
                    floor_ms=round(floor_ms, 1),
                    ratio=round(cycle_ms / floor_ms, 2),
                    bare_ratio=round(cycle_ms / bare_ms, 2),
                )
                out.append(best)
                print(json.dumps(best), file=sys.stderr, flush=True)
                counter.seen.clear()
        finally:
            for i in range(0, len(ids), 500):
                admin(desc, "scancel", *ids[i : i + 500])
            try:
                login(counter.inner, 'rm -rf -- "$1" "$1.shim"', out_dir)
            finally:
                b.close()
    return out


REPLAY_NOW = 1_800_000_000.0


def replay_output(jobs: int, share: int, array_id: int = 4242) -> tuple[str, int]:
    """The observation's stdout for the bench's set-up of ``jobs`` tasks (:func:`rows`), and how many report."""
    from dispatch.slurm import progress

    name = "dspa-0123456789abcdef"
    now = int(REPLAY_NOW) - 60
    listing = [f"{array_id}_[0-{jobs - 1}]|PENDING|JobHeldUser|0|N/A|N/A||{name}"]
    running = [f"{array_id}_{t}" for t in range(jobs) if t % share == 0]
    listing += [f"{jid}|RUNNING|None|0|N/A|{now}|n1|{name}" for jid in running]
    reports = ["ROOT"]
    for jid in running:
        r = f'{{"rank":0,"step":7,"total":100,"at":{now},"execution":"1.{jid}.0","first":{{"step":1,"at":{now}}}}}'
        reports.append(f"./{jid}/rank-0.json {r}")
    text = "\n".join(listing) + "\n" + progress.SEPARATOR + "\n" + "\n".join(reports) + "\n"
    return text, len(running)


class ReplayExecutor:
    """Answers a read-only open's preflight (``first``), then every script with one replayed stdout, framed as
    the script's single call."""

    def __init__(self, stdout: str, first: Any) -> None:
        from dispatch.slurmtest import ok, wrapped

        self.first = first
        self.result = wrapped(ok(stdout))

    def run(self, script: str, timeout: float) -> Any:
        from dataclasses import replace

        from dispatch.slurm.scripts import NONCE_RE
        from dispatch.slurmtest import NONCE

        if self.first.remaining:
            return self.first.run(script, timeout)
        m = NONCE_RE.search(script)
        return replace(self.result, stdout=self.result.stdout.replace(NONCE, m.group(0) if m else NONCE))

    def close(self) -> None:
        pass


def replay_rows(job_counts: list[int], share: int, rounds: int, profile: int = 0) -> list[dict[str, Any]]:
    """Rows of ``--replay``: the Python side of one observation of each count, best of ``rounds``."""
    import tempfile

    import dispatch
    import dispatch.slurm as slurm
    from dispatch.clock import FakeClock
    from dispatch.slurmtest import RELEASE_2605, TranscriptExecutor, ready_preflight

    src = os.path.dirname(os.path.dirname(dispatch.__file__))
    out = []
    with tempfile.TemporaryDirectory() as cache:
        pre = TranscriptExecutor(ready_preflight(RELEASE_2605, now=REPLAY_NOW))
        settings = {"preflight": {"cacheDir": cache}}
        slurm.new(settings, executor=pre, clock=FakeClock(REPLAY_NOW)).close()
        for n in job_counts:
            text, reporting = replay_output(n, share)
            first = TranscriptExecutor(ready_preflight(RELEASE_2605, now=REPLAY_NOW + 1, read_only=True))
            ex = ReplayExecutor(text, first)
            b = slurm.new(settings, executor=ex, clock=FakeClock(REPLAY_NOW + 1), read_only=True)
            ids = [f"4242_{t}" for t in range(n)]
            best = float("inf")
            for _ in range(rounds):
                t0 = time.perf_counter()
                got = b.inspect_many(ids)
                best = min(best, time.perf_counter() - t0)
            shown = sum(1 for ev in got.values() if ev.current is not None and ev.current.progress)
            assert len(got) == n and shown == reporting, f"{len(got)} jobs, {shown} with progress"
            if profile:
                import cProfile
                import pstats

                prof = cProfile.Profile()
                prof.runcall(b.inspect_many, ids)
                print(f"--- {n} jobs", file=sys.stderr)
                pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(profile)
            listing, _, reports = text.partition("\n:dispatch-progress:\n")
            row = {"src": src, "mode": "replay", "release": b.slurm_release, "jobs": n, "reporting": reporting,
                   "cycle_ms": round(best * 1000, 2), "per_job_us": round(best * 1e6 / n, 1),
                   "listing_bytes": len(listing), "reports_bytes": len(reports)}  # fmt: skip
            out.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            b.close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Slurm commands, SSH round trips and file operations per supervisor cycle")
    p.add_argument("--jobs", default="1000,10000")
    p.add_argument("--clusters", default="local,trixie,sid")
    p.add_argument("--running", type=float, default=0.25, help="the share of jobs running and reporting (1/k)")
    p.add_argument("--src", default="", help="NAME=DIR,...: run once per source tree, one after the other")
    p.add_argument("--no-progress", action="store_true", help="ask for no progress (a supervisor without stall rules)")
    p.add_argument("--replay", action="store_true", help="no cluster: time the Python side on a replayed output")
    p.add_argument("--rounds", type=int, default=7, help="--replay: rounds per count (the best is kept)")
    p.add_argument("--profile", type=int, default=0, help="--replay: print the N costliest functions (cProfile)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    share = max(1, round(1 / a.running)) if a.running > 0 else 10**9
    if a.src:
        res = []
        for item in a.src.split(","):
            label, _, path = item.partition("=")
            env = dict(os.environ, DISPATCH_BENCH_SRC=os.path.abspath(path))
            cmd = [sys.executable, __file__, "--jobs", a.jobs, "--clusters", a.clusters, "--running", str(a.running)]
            cmd += ["--no-progress"] if a.no_progress else []
            cmd += ["--replay", "--rounds", str(a.rounds), "--profile", str(a.profile)] if a.replay else []
            done = subprocess.run([*cmd, "--json"], env=env, stdout=subprocess.PIPE, text=True, check=True)
            for row in json.loads(done.stdout)["results"]:
                res.append({**row, "src": label})
    elif a.replay:
        res = replay_rows([int(x) for x in a.jobs.split(",")], share, a.rounds, a.profile)
    else:
        res = rows([int(x) for x in a.jobs.split(",")], a.clusters.split(","), share, progress=not a.no_progress)
    print(json.dumps({"results": res}, indent=None if a.json else 2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
