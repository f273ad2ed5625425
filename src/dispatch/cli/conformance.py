"""``dispatch conformance``: run the conformance suites against a cluster through a harness factory."""

from __future__ import annotations

import json
import tomllib
from typing import Any

import click

from dispatch.cli.adapternames import ListsAdapters
from dispatch.cli.exitcodes import Exit

CTX = {"help_option_names": ["-h", "--help"]}


def _read_config(path: str | None) -> dict[str, Any]:
    from dispatch.errors import ConfigError

    if path is None:
        return {}
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ConfigError("harness-config", f"cannot read {path}: {exc.strerror}") from None
    try:
        parsed = tomllib.loads(data.decode()) if path.endswith(".toml") else json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        kind = "TOML" if path.endswith(".toml") else "JSON"
        raise ConfigError("harness-config", f"{path} is not valid {kind}: {exc}") from None
    if not isinstance(parsed, dict):
        raise ConfigError("harness-config", f"{path} must hold an object")
    return parsed


@click.command(cls=ListsAdapters, context_settings=CTX)
@click.option(
    "--harness",
    "factory",
    required=True,
    metavar="MODULE:CALLABLE",
    help="Harness factory for the cluster under test, e.g. dispatch.slurm.harness:harness.",
)
@click.option(
    "--harness-config",
    metavar="FILE",
    type=click.Path(dir_okay=False, exists=True),
    help="JSON or TOML object passed to the factory (the cluster's description).",
)
@click.option(
    "--suite",
    "suites",
    multiple=True,
    type=click.Choice(["backend", "core"]),
    help="Suite to run (repeatable; default: both).",
)
@click.option("--check", "checks", multiple=True, metavar="NAME", help="Run only this check (repeatable).")
@click.option("--strict", is_flag=True, help="A check that applies but skips counts as failed.")
@click.option(
    "--details",
    is_flag=True,
    help="Print each failed or skipped check's whole detail (traceback, preconditions), not only its first line.",
)
@click.option("--report", metavar="FILE", type=click.Path(dir_okay=False), help="Write the results as JSON.")
def conformance(
    factory: str,
    harness_config: str | None,
    suites: tuple[str, ...],
    checks: tuple[str, ...],
    strict: bool,
    details: bool,
    report: str | None,
) -> int:
    """Run the conformance suites against a real cluster.

    \b
    The factory is called with the --harness-config object and returns a
    dispatch.conformance Harness or CoreHarness (docs/spi.md). Each check
    prints one line: passed, failed, skipped (with why) or not-applicable.
    Exit 0 when no check failed, 1 otherwise.

    Adapters installed here: {adapters}. Each brings its own harness factory;
    dispatch ships dispatch.slurm.harness:harness,
    dispatch.gridengine.harness:harness and dispatch.local.harness:harness.
    A failure's first line is printed; --details prints all of it, and the
    --report file always holds it whole.
    """
    from dispatch.conformance.runner import Result, load_factory, run_suites, summary

    make = load_factory(factory)
    harness = make(_read_config(harness_config))

    def show(r: Any) -> None:
        line = f"{r.result.value:<14} {r.suite:<7} {r.check:<48} {r.seconds:7.1f}s"
        lines = r.detail.splitlines()
        if lines:
            line += "  " + lines[0]
        click.echo(line)
        if details and len(lines) > 1 and r.result is not Result.PASSED:
            click.echo("\n".join("    " + text for text in lines[1:]))

    results = run_suites(harness, suites or ("backend", "core"), checks or None, strict=strict, progress=show)
    counts = summary(results)
    click.echo(", ".join(f"{n} {k}" for k, n in counts.items()))
    if report:
        with open(report, "w") as f:
            json.dump({"harness": factory, "summary": counts, "checks": [r.to_json() for r in results]}, f, indent=2)
    return int(Exit.JOB_FAILED) if counts[Result.FAILED.value] else int(Exit.OK)
