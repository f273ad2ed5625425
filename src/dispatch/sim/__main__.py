"""``python -m dispatch.sim``: run seeds, or replay one.

* ``--seeds 0-999 [--json]``: run each seed (both shapes alternate unless ``--shape`` is given) and print the
  number of seeds, steps and violations, with a summary of the failing seeds.
* ``--seed S [--stop-at STEP]``: run one seed and print its trace; with ``--stop-at`` the run stops at that
  step and the record and the ground truth are dumped too (JSON with ``--json``).
* ``--actors``: the writers of the records the simulator drives, one a line (name, then what it is).
* ``--mutations [--json]``: every planted bug (the supervisor's and the other writers') over ``--seeds``.
* ``--network``: with faults from the network too (``Config.network``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from dispatch.sim.mutation import Mutation
from dispatch.sim.planted import Planted
from dispatch.sim.world import ACTORS, Config, Result, run, run_quiet

PLANTED: list[Mutation | Planted] = [*Mutation, *Planted]
"""Every planted bug: the supervisor's (:mod:`dispatch.sim.mutation`), then the other writers'
(:mod:`dispatch.sim.planted`)."""


def _range(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-", 1)
            out.extend(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return out


def _config(args: argparse.Namespace, seed: int) -> Config:
    shape = args.shape if args.shape != "both" else ("slurm" if seed % 2 == 0 else "kubeflow")
    return Config(
        seed=seed,
        shape=shape,
        supervisors=args.supervisors,
        jobs=args.jobs,
        steps=args.steps,
        quiet=args.quiet,
        stop_at=args.stop_at,
        unmatched=args.unmatched or ("escalate" if seed % 3 else "close"),
        mutations=frozenset(Mutation(m) for m in args.mutation if m in Mutation.__members__.values()),
        planted=frozenset(Planted(m) for m in args.mutation if m in Planted.__members__.values()),
        network=args.network,
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dispatch.sim", description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", help="seeds to run, e.g. 0-999 or 1,5,9")
    p.add_argument("--seed", type=int, help="one seed to run and trace")
    p.add_argument("--stop-at", type=int, default=None, help="stop the replay at this step and dump everything")
    p.add_argument("--shape", choices=["slurm", "kubeflow", "both"], default="both")
    p.add_argument("--supervisors", type=int, default=2)
    p.add_argument("--jobs", type=int, default=3)
    p.add_argument("--steps", type=int, default=150, help="steps of the fault phase")
    p.add_argument("--quiet", type=int, default=80, help="the liveness bound K, in supervisor rounds")
    p.add_argument("--unmatched", choices=["escalate", "close"], default=None)
    p.add_argument(
        "--network",
        action="store_true",
        help="faults from the network too: supervisors' clocks set off, supervisors cut off from the records or the"
        " cluster (on by itself for their planted bugs)",
    )
    p.add_argument(
        "--mutation",
        action="append",
        default=[],
        choices=[m.value for m in PLANTED],
        help="plant a known bug (tests of the simulator itself)",
    )
    p.add_argument(
        "--mutations",
        action="store_true",
        help="the mutation check: every planted bug over --seeds (default 0-39); fails if one is never caught",
    )
    p.add_argument("--actors", action="store_true", help="list the writers of the records it drives, one a line")
    p.add_argument("--procs", type=int, default=1, help="worker processes for --seeds (seeds are independent)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.actors:
        for name, what in ACTORS:
            print(f"{name:<14} {what}")
        return 0
    if args.mutations:
        if args.seed is not None or args.mutation:
            p.error("--mutations runs every planted bug over --seeds; it takes no --seed or --mutation")
        return _mutations(args)
    if (args.seeds is None) == (args.seed is None):
        p.error("give exactly one of --seeds or --seed")
    if args.supervisors < 1 or args.jobs < 1 or args.steps < 0 or args.quiet < 1:
        p.error("--supervisors, --jobs and --quiet must be at least 1, --steps at least 0")

    if args.seed is not None:
        result = run(_config(args, args.seed))
        if args.json:
            print(json.dumps({**result.summary(), "trace": result.trace, "dump": result.dump}, indent=2))
        else:
            print("\n".join(result.trace))
            print(json.dumps(result.summary(), indent=2))
            if result.dump is not None:
                print(json.dumps(result.dump, indent=2, default=str))
        return 0 if result.ok or args.stop_at is not None else 1

    seeds = _range(args.seeds)
    started = time.perf_counter()
    configs = [_config(args, s) for s in seeds]
    if args.procs > 1:
        import multiprocessing

        with multiprocessing.get_context("spawn").Pool(args.procs) as pool:
            results: list[Result] = pool.map(run_quiet, configs, chunksize=8)
    else:
        results = [run_quiet(c) for c in configs]
    elapsed = time.perf_counter() - started
    bad = [r for r in results if not r.ok]
    out: dict[str, Any] = {
        "seeds": len(results),
        "steps": sum(r.steps for r in results),
        "violations": sum(len(r.violations) for r in results),
        "failing_seeds": [r.seed for r in bad],
        "failing_seeds_by_invariant": _by_invariant(bad),
        "unsettled": sum(1 for r in results if not r.settled),
        "seconds": round(elapsed, 2),
        "seeds_per_second": round(len(results) / elapsed, 2) if elapsed > 0 else None,
        "summary": {
            "shapes": {sh: sum(1 for r in results if r.shape == sh) for sh in ("slurm", "kubeflow")},
            "events": _sum_counts(results),
            "first_failures": [r.summary() for r in bad[:5]],
        },
    }
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(
            f"{out['seeds']} seeds, {out['steps']} steps, {out['violations']} violations, "
            f"{len(bad)} failing, {out['seeds_per_second']} seeds/s"
        )
        for r in bad[:5]:
            print(json.dumps(r.summary(), indent=2))
    return 1 if bad else 0


def caught_by(result: Result, invariant: str) -> bool:
    """Whether ``result`` has a violation of ``invariant`` (violations read ``step N: <invariant>: ...``)."""
    return any(v.split(": ", 2)[1:2] == [invariant] or f": {invariant}:" in v for v in result.violations)


def _mutations(args: argparse.Namespace) -> int:
    """Run each planted bug over the seeds; a row per bug with the seeds whose run broke its invariant, and the
    invariants held by construction with the reason. Fails if a bug is never caught, or if an invariant is
    neither the target of a planted bug nor held by construction."""
    from dispatch.sim.invariants import INVARIANTS
    from dispatch.sim.mutation import BY_CONSTRUCTION
    from dispatch.sim.mutation import TARGETS as SUPERVISOR_TARGETS
    from dispatch.sim.planted import TARGETS as PLANTED_TARGETS

    targets: dict[Mutation | Planted, str] = dict(SUPERVISOR_TARGETS.items())
    targets.update(PLANTED_TARGETS.items())
    seeds = _range(args.seeds or "0-39")
    rows: list[dict[str, Any]] = []
    for m in PLANTED:
        args.mutation = [m.value]
        configs = [_config(args, s) for s in seeds]
        if args.procs > 1:
            import multiprocessing

            with multiprocessing.get_context("spawn").Pool(args.procs) as pool:
                results: list[Result] = pool.map(run_quiet, configs, chunksize=4)
        else:
            results = [run_quiet(c) for c in configs]
        invariant = targets[m]
        rows.append(
            {
                "name": m.value,
                "invariant": invariant,
                "seeds": len(seeds),
                "caught_seeds": [r.seed for r in results if caught_by(r, invariant)],
            }
        )
    built = [{"invariant": name, "reason": BY_CONSTRUCTION[name]} for name in INVARIANTS if name in BY_CONSTRUCTION]
    uncovered = [name for name in INVARIANTS if name not in BY_CONSTRUCTION and name not in targets.values()]
    if args.json:
        print(json.dumps({"mutations": rows, "by_construction": built, "not_planted": uncovered}, indent=2))
    else:
        for r in rows:
            print(f"{r['name']:<30} {r['invariant']:<32} caught by {len(r['caught_seeds'])} of {r['seeds']} seeds")
        for b in built:
            print(f"{'(by construction)':<30} {b['invariant']:<32} {b['reason']}")
        for name in uncovered:
            print(f"{'(no planted bug)':<30} {name}")
    return 0 if all(r["caught_seeds"] for r in rows) and not uncovered else 1


def _by_invariant(bad: list[Result]) -> dict[str, list[int]]:
    """The failing seeds by the invariant (or ``liveness``, ``supervisor-error``) each broke."""
    out: dict[str, list[int]] = {}
    for r in bad:
        names = {v.split(": ", 2)[1] if v.startswith("step ") else v.split(":", 1)[0] for v in r.violations}
        for name in sorted(names) or ["unsettled"]:
            out.setdefault(name, []).append(r.seed)
    return dict(sorted(out.items()))


def _sum_counts(results: list[Result]) -> dict[str, int]:
    total: dict[str, int] = {}
    for r in results:
        for k, v in r.counts.items():
            total[k] = total.get(k, 0) + v
    return dict(sorted(total.items()))


if __name__ == "__main__":
    sys.exit(main())
