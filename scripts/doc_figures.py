#!/usr/bin/env python3
"""Figures quoted in the docs, produced here so they can be re-measured instead of copied.

    python scripts/doc_figures.py mutations   # docs/invariants.md: which seeds of 0-99 catch each planted bug
    python scripts/doc_figures.py tests       # docs/performance.md: how many tests the suite collects

Each prints JSON (one object) and, with ``--markdown``, the rows as they appear in the docs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

SEEDS = range(100)


def mutations() -> dict[str, object]:
    """For each planted bug: the first seed of 0-99 that catches it, how many do, and by which invariants."""
    from dispatch.sim import Config, run
    from dispatch.sim.mutation import Mutation

    out: dict[str, object] = {}
    for mutation in Mutation:
        caught: list[int] = []
        by: Counter[str] = Counter()
        for seed in SEEDS:
            shape = "slurm" if seed % 2 == 0 else "kubeflow"  # alternating, as python -m dispatch.sim does
            result = run(Config(seed=seed, shape=shape, mutations=frozenset({mutation})))
            if result.violations:
                caught.append(seed)
                by.update({v.split(": ", 2)[1].split(":")[0] for v in result.violations if v.startswith("step ")})
        out[str(mutation)] = {
            "first_seed": caught[0] if caught else None,
            "seeds_caught": len(caught),
            "seeds": f"{SEEDS.start}-{SEEDS.stop - 1}",
            "caught_by": dict(by.most_common()),
        }
    return out


def tests() -> dict[str, object]:
    """The number of tests ``pytest`` collects over tests/ (all markers)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    return {"collected": len(ids), "errors": done.returncode not in (0, 5)}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("figure", choices=["mutations", "tests"])
    p.add_argument("--markdown", action="store_true", help="also print the rows as the docs show them")
    args = p.parse_args(argv)
    result = mutations() if args.figure == "mutations" else tests()
    print(json.dumps(result))
    if args.markdown and args.figure == "mutations":
        for name, r in result.items():
            assert isinstance(r, dict)
            print(f"| `{name}` | {r['first_seed']} | {r['seeds_caught']} | {', '.join(r['caught_by'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
