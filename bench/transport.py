"""What one script costs through each Slurm transport, kept shell against a shell of its own, side by side.

For every cluster: a one-line script (``printf`` of the start marker and ``hostname``) and the opening script a
single gate takes (:data:`dispatch.slurm.gates.RELEASE_GATES` on one id, with ``scontrol`` standing in by ``true``:
the script's shape without the scheduler's own cost), each run ``--scripts`` times through the backend's executor
(``run``: the kept login-node shell) and through ``_once`` (a ``bash -s``, or ``ssh ... bash -s``, of its own),
interleaved, median milliseconds. Prints {"results": [{cluster, transport, script, kept_ms, own_ms, own_over_kept}]}.

    python bench/transport.py --clusters local,trixie,sid --scripts 200 --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from _slurm_clusters import clusters, settings_for


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clusters", default="local,trixie,sid")
    p.add_argument("--scripts", type=int, default=200)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()

    import dispatch.slurm as slurm
    from dispatch.slurm.gates import RANGES, RELEASE_GATES
    from dispatch.slurm.scripts import Script

    gate = Script()
    gate.shell(RELEASE_GATES.replace("scontrol release", "true"), "7", RANGES)
    scripts = {"one line": "printf '@@x:start\\n'; hostname", "open one gate": gate.render()}
    results = []
    for name, desc in clusters(a.clusters.split(",")).items():
        backend = slurm.new(settings_for(desc))
        executor = backend._executor
        try:
            for label, text in scripts.items():
                kept: list[float] = []
                own: list[float] = []
                for _ in range(a.scripts):
                    for run, into in ((executor.run, kept), (executor._once, own)):
                        t = time.perf_counter()
                        run(text, 30)
                        into.append(time.perf_counter() - t)
                k, o = statistics.median(kept) * 1000, statistics.median(own) * 1000
                results.append(
                    {
                        "cluster": name,
                        "transport": desc["transport"],
                        "script": label,
                        "kept_ms": round(k, 2),
                        "own_ms": round(o, 2),
                        "own_over_kept": round(o / k, 2),
                    }
                )
        finally:
            backend.close()
    print(json.dumps({"results": results}, indent=None if a.json else 2))


if __name__ == "__main__":
    main()
