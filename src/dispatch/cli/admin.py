"""Cluster commands: ``capabilities``, ``preflight``, ``schema``, ``clusters``, ``supervise``, ``completion``."""

from __future__ import annotations

from typing import Any

import click

from dispatch.cli.app import App
from dispatch.cli.exitcodes import Exit

pass_app = click.make_pass_decorator(App)
CTX = {"help_option_names": ["-h", "--help"]}


def _interfaces(backend: Any) -> list[str]:
    from dispatch.spi import interfaces_of

    return interfaces_of(backend)


@click.command(context_settings=CTX)
@click.option("--json", "as_json", is_flag=True, help="Print capabilities and declarations as JSON.")
@pass_app
def capabilities(app: App, as_json: bool) -> None:
    """What the cluster can do: each capability yes/no/unknown, with its Reason and provenance."""
    from dispatch.cli import ui

    with ui.spinner("opening the cluster"):
        cluster = app.cluster()
    caps = cluster.capabilities()
    decl = cluster.declarations()
    if as_json:
        ui.print_json(
            {
                "cluster": cluster.name,
                "adapter": cluster.backend.name,
                "capabilities": caps.to_json(),
                "declarations": decl.to_json(),
                "interfaces": _interfaces(cluster.backend),
            }
        )
        return
    rows = [[c.value, a.answer.value, a.provenance.value, a.reason] for c, a in caps.items()]
    styles: list[Any] = [None, lambda text, pad: ui.state_style(pad, text), None, None]
    click.echo(f"cluster {cluster.name} (adapter {cluster.backend.name})")
    click.echo(ui.table(["CAPABILITY", "ANSWER", "PROVENANCE", "REASON"], rows, styles))
    d = decl.to_json()
    click.echo("")
    click.echo(
        f"declarations: NodeLossWindow {d['nodeLossWindow']}, CallBound {d['callBound']}, PolledLoss "
        + (", ".join(f"{k} {v}" for k, v in d["polledLoss"].items()) if d["polledLoss"] else "none (watched)")
    )
    click.echo(f"interfaces:   {', '.join(_interfaces(cluster.backend)) or 'none'}")


@click.command(context_settings=CTX)
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@pass_app
def preflight(app: App, as_json: bool) -> None:
    """Check that the cluster can be used from here: open it (running the adapter's preflight) and report."""
    from dispatch.cli import ui

    cc = app.cluster_config()
    with ui.spinner(f"preflight of {cc.name}"):
        cluster = app.cluster()
    backend: Any = getattr(cluster.backend, "unrestricted", cluster.backend)
    checks: list[tuple[str, bool, str]] = [("the adapter opened and its declarations are valid", True, cc.adapter)]
    extra = getattr(backend, "preflight", None)
    if callable(extra):
        checks.extend(extra())
    unknown = [c.value for c, a in cluster.capabilities().items() if a.answer.value == "unknown"]
    ok = all(c[1] for c in checks)
    if as_json:
        ui.print_json(
            {
                "cluster": cc.name,
                "adapter": cc.adapter,
                "ok": ok,
                "checks": [{"check": n, "ok": good, "detail": d} for n, good, d in checks],
                "unknownCapabilities": unknown,
            }
        )
    else:
        rows = [["ok" if good else "FAIL", n, d] for n, good, d in checks]
        styles: list[Any] = [lambda t, p: ui.style(p, fg="green" if t == "ok" else "red", bold=t != "ok"), None, None]
        click.echo(ui.table(["", "CHECK", "DETAIL"], rows, styles))
        if unknown:
            ui.note(f"capabilities not known here: {', '.join(unknown)} (see: dispatch capabilities)")
    if not ok:
        raise click.exceptions.Exit(int(Exit.UNAVAILABLE))


@click.command(context_settings=CTX)
@click.argument("adapter")
def schema(adapter: str) -> None:
    """Print the JSON Schema of ADAPTER's settings (what goes under [clusters.NAME.settings])."""
    from dispatch.cli import ui
    from dispatch.registry import adapter as find_adapter
    from dispatch.settings import schema as settings_schema

    info = find_adapter(adapter)
    if info.settings is None:
        ui.print_json(
            {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "additionalProperties": False,
                "title": f"{adapter} settings (none)",
            }
        )
        return
    ui.print_json(settings_schema(info.settings, title=f"{adapter} adapter settings"))


@click.command(context_settings=CTX)
@click.option("--json", "as_json", is_flag=True, help="Print the clusters as JSON.")
@pass_app
def clusters(app: App, as_json: bool) -> None:
    """The clusters the configuration names (the default marked with *)."""
    from dispatch.cli import ui
    from dispatch.settings import redact_secrets

    cfg = app.config()
    if as_json:
        ui.print_json(
            {
                "config": str(cfg.path) if cfg.path else None,
                "records": app.records_where(),
                "default": cfg.default,
                "clusters": [
                    {"name": c.name, "adapter": c.adapter, "settings": redact_secrets(c.settings)}
                    for c in cfg.clusters.values()
                ],
            }
        )
        return
    rows = [
        [("* " if c.name == cfg.default else "  ") + c.name, c.adapter, ", ".join(sorted(c.settings)) or "-"]
        for c in cfg.clusters.values()
    ]
    click.echo(ui.table(["  CLUSTER", "ADAPTER", "SETTINGS"], rows))
    ui.note(f"config: {cfg.path or 'none (embedded default)'}; records: {app.records_where()}")


@click.command(context_settings=CTX)
@click.option(
    "--rules", "rules_file", type=click.Path(dir_okay=False), required=True, help="Rules file (TOML/YAML/JSON)."
)
@click.option("--poll", type=click.FloatRange(0.1), default=5.0, show_default=True, help="Seconds between cycles.")
@click.option("--once", is_flag=True, help="Run one cycle and exit.")
@pass_app
def supervise(app: App, rules_file: str, poll: float, once: bool) -> None:
    """Supervise the cluster's jobs with a rules file: observe, decide, act (until Ctrl-C)."""
    from dispatch.cli import ui
    from dispatch.declarations import check_poll_interval
    from dispatch.errors import Unsupported
    from dispatch.rules import RuleSet

    rules = RuleSet.load(rules_file)
    cluster = app.cluster()
    rules.check_against(cluster.backend, cluster.capabilities())
    check_poll_interval(cluster.declarations(), poll)
    try:
        from dispatch.supervise import Supervisor  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        raise Unsupported(
            "the supervisor (dispatch.supervise) is not part of this installation yet; the rules file is valid"
        ) from None
    sup: Any = Supervisor(
        cluster.backend, app.records(), clock=cluster.clock, poll=poll, default_rules=rules, cluster=cluster.name
    )
    ui.note(f"supervising cluster {cluster.name} every {poll:g}s with {len(rules.rules)} rule(s); Ctrl-C to stop")
    if once:
        sup.cycle()
        return
    try:
        sup.run()
    except KeyboardInterrupt:
        ui.note("supervisor stopped")


@click.command(context_settings=CTX)
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL.

    \b
    Add to your shell's startup file, e.g. for bash:
      eval "$(dispatch completion bash)"
    """
    from click.shell_completion import get_completion_class

    from dispatch.cli.main import cli

    cls = get_completion_class(shell)
    assert cls is not None
    comp = cls(cli, {}, "dispatch", "_DISPATCH_COMPLETE")
    click.echo(comp.source())
