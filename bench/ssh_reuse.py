"""Two ``dispatch`` commands in a row against an SSH cluster: the second reuses the first one's connection.

    python bench/ssh_reuse.py --json [--clusters trixie,sid] [--repeat 5]

Each round starts with a fresh ``ssh.controlDir`` (no connection), then runs ``dispatch -c NAME capabilities``
twice as fresh processes: ``first_s`` pays the SSH handshake, ``second_s`` rides on the connection the first
left behind (closing the adapter leaves it to ControlPersist). ``master_alive_after_close`` checks that the
connection outlived the first process. Medians over ``--repeat`` rounds; prints {"results": [...]}.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from _slurm_clusters import cli_env, clusters, settings_for
from run_latency import ENTRY


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clusters", default="trixie,sid")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    results = []
    for name, desc in clusters(a.clusters.split(",")).items():
        assert desc["transport"] == "ssh", f"{name} is not reached over SSH"
        first, second, alive = [], [], []
        for _ in range(a.repeat):
            with tempfile.TemporaryDirectory(prefix="dsp-r-", dir="/tmp") as home:
                control = os.path.join(home, "cm")
                os.mkdir(control, 0o700)
                settings = settings_for(desc)
                settings["ssh"]["controlDir"] = control
                env = cli_env(home, name, settings)
                argv = [sys.executable, "-c", ENTRY, "-c", name, "capabilities"]
                for out in (first, second):
                    t0 = time.perf_counter()
                    subprocess.run(argv, env=env, capture_output=True, check=True, timeout=120)
                    out.append(time.perf_counter() - t0)
                    if out is first:
                        sockets = glob.glob(os.path.join(control, "cm-*"))
                        alive.append(bool(sockets))
                for sock in glob.glob(os.path.join(control, "cm-*")):
                    subprocess.run(["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "x"], capture_output=True)
        results.append(
            {
                "cluster": name,
                "first_s": round(statistics.median(first), 3),
                "second_s": round(statistics.median(second), 3),
                "saved_s": round(statistics.median(first) - statistics.median(second), 3),
                "master_alive_after_close": all(alive),
                "rounds": a.repeat,
            }
        )
    print(json.dumps({"results": results}, indent=None if a.json else 2))


if __name__ == "__main__":
    main()
