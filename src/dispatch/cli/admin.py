"""Cluster and store commands: ``capabilities``, ``preflight``, ``schema``, ``clusters``, ``supervise``,
``prune-outputs``, ``nodes``, ``completion``."""

from __future__ import annotations

import os
from typing import Any

import click

from dispatch import present
from dispatch.cli.adapternames import AdapterOption, ListsAdapters
from dispatch.cli.app import App, option_duration
from dispatch.cli.exitcodes import Exit
from dispatch.errors import ConfigError

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
                "accelerators": _accelerators(cluster.backend),
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
    gpus = _accelerators(cluster.backend)
    if gpus is not None:
        source = gpus["source"] + (", " + gpus["note"] if "note" in gpus else "")
        click.echo(f"accelerators: {'no GPUs ' if not gpus['pools'] else ''}({source})")
        for p in gpus["pools"]:
            kind = p["gpuType"] or "GPU(s) of no named type"
            click.echo(f"  {p['pool']:<16} {p['nodes']} node(s) x {p['perNode']} {kind}")


def _accelerators(backend: Any) -> dict[str, Any] | None:
    """The cluster's GPU inventory as JSON (None when the adapter has none to give, or could not read it)."""
    from dispatch.spi import AcceleratorInventory

    inventory = backend.accelerators() if isinstance(backend, AcceleratorInventory) else None
    return None if inventory is None else inventory.to_json()


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


@click.command(cls=ListsAdapters, context_settings=CTX)
@click.argument("adapter")
def schema(adapter: str) -> None:
    """Print the JSON Schema of ADAPTER's settings (what goes under [clusters.NAME.settings]).

    ADAPTER is one of those installed here: {adapters}.
    """
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
    "--rules",
    "rules_file",
    type=click.Path(dir_okay=False),
    help="Default rules (TOML/YAML/JSON) for jobs without rules.",
)
@click.option(
    "--poll", type=click.FloatRange(0.1), help="Seconds between cycles [default: from the backend's declarations]."
)
@click.option("--once", is_flag=True, help="Run one cycle and exit.")
@click.option("--until", type=click.FloatRange(0), help="Stop after this many seconds.")
@click.option("--owner", help="This supervisor's unique name [default: supervisor:HOST:PID].")
@click.option(
    "--lease-ttl", type=click.FloatRange(0, min_open=True), help="Seconds a lease lasts unrenewed [default: 120]."
)
@click.option(
    "--records",
    help="Records setting for this process (a SQLite path or postgresql:// DSN) [default: the configured one].",
)
@click.option("--store", "old_store", hidden=True, help="The old spelling of --records (deprecated).")
@click.option("--schema", help="PostgreSQL schema [default: the setting's schema=, else dispatch].")
@click.option(
    "--adapter",
    cls=AdapterOption,
    help="Supervise an adapter given here instead of a configured cluster (installed: {adapters}).",
)
@click.option("--settings", "settings_text", help="With --adapter: its settings, JSON text or @FILE.")
@click.option(
    "--cluster", "cluster_name", help="The cluster's name in the records [default: --cluster / the adapter's name]."
)
@click.option(
    "--plugin", multiple=True, help="Import this module (or .py file) first: an adapter that registers itself."
)
@click.option(
    "--metrics-port", type=click.IntRange(0, 65535), help="Serve /metrics and /healthz on this port (0: any)."
)
@click.option("--metrics-host", default="127.0.0.1", show_default=True, help="Address the metrics listen on.")
@click.option("--log-json", is_flag=True, help="Write log lines (stderr) as JSON.")
@click.option("--trace-calls", is_flag=True, help="Print one JSON line per backend call.")
@click.option(
    "--archive-max-bytes",
    type=click.IntRange(0),
    metavar="BYTES",
    default=1 << 20,
    show_default=True,
    help="Keep this much of rank 0's log of each ended execution where the cluster does not keep output"
    " (its tail; 0: keep none).",
)
@click.option(
    "--archive-keep",
    metavar="DURATION",
    help="Delete archived output this long after it was archived, once its job is closed: 30d, 12h, 3600"
    " (pruned hourly; 0: never) [default: keep forever].",
)
@click.option("--test-pause-before-intent", "pause_action", hidden=True)
@click.option("--test-clock-offset", "clock_offset", type=float, default=0.0, hidden=True)
@pass_app
def supervise(
    app: App,
    rules_file: str | None,
    poll: float | None,
    once: bool,
    until: float | None,
    owner: str | None,
    lease_ttl: float | None,
    records: str | None,
    old_store: str | None,
    schema: str | None,
    adapter: str | None,
    settings_text: str | None,
    cluster_name: str | None,
    plugin: tuple[str, ...],
    metrics_port: int | None,
    metrics_host: str,
    log_json: bool,
    trace_calls: bool,
    archive_max_bytes: int,
    archive_keep: str | None,
    pause_action: str | None,
    clock_offset: float,
) -> None:
    """Run the supervisor: observe the cluster's jobs, decide by their rules, act (until SIGTERM or Ctrl-C).

    \b
    Standard output: one JSON line per cycle ({"owner", "cycle"}), and with --trace-calls one per backend
    call. Several supervisors may share one PostgreSQL record store: each job is worked on by one of them
    under a lease, and a stopped one's jobs are taken over after --lease-ttl (docs/supervisor.md).
    `python -m dispatch.supervise` is the same command.
    """
    import sys

    from dispatch.actions import default_owner
    from dispatch.cli.config import is_postgres, open_records
    from dispatch.records.base import store_clock
    from dispatch.rules import RuleSet
    from dispatch.supervise import Supervisor
    from dispatch.supervise.archive import ArchiveSettings
    from dispatch.supervise.service import Emitter, PausingRecords, load_plugin, parse_settings, serve, traced

    if settings_text is not None and adapter is None:
        raise ConfigError("settings", "--settings goes with --adapter (a configured cluster has its own)")
    records = renamed_option(old_store, "--store", records, "--records")
    keep = option_duration(archive_keep, "--archive-keep") if archive_keep is not None else None
    for module in plugin:
        load_plugin(module)
    settings = parse_settings(settings_text)
    rules = RuleSet.load(rules_file) if rules_file else None
    who = owner or default_owner("supervisor")
    emit = Emitter(sys.stdout, who)
    log = _logger(who, log_json)
    setting = records or app.records_setting()

    def redact(text: str) -> str:
        if is_postgres(setting):
            from dispatch.records.postgres import redact as hide

            return text.replace(setting, hide(setting))
        return text

    store = open_records(setting, schema=schema) if (records or schema) else app.records()
    try:
        from dispatch.clock import SkewedClock, StoreTime, SystemClock

        # this host's clock (off by --test-clock-offset), carried onto the store's, which judges leases: the
        # supervisor and its backend share it, so the times they write (evidence included) are on one time line
        clock: Any = SystemClock() if not clock_offset else SkewedClock(SystemClock(), clock_offset)
        lease_clock = store_clock(store)
        if lease_clock is not None:
            clock = StoreTime(clock, lease_clock)
        if adapter is not None:
            from dispatch.cluster import new_backend

            backend = new_backend(adapter, settings, clock=clock)
            name: str | None = cluster_name
        else:
            if cluster_name is not None:
                app.cluster_name = cluster_name
            app._records = store
            cluster = app.cluster(clock=clock)
            backend, name = cluster.backend, cluster.name
        metrics = None
        used: Any = store
        if metrics_port is not None:
            from dispatch.supervise.metrics import Metrics

            metrics = Metrics(stale_after=0.0)
            metrics.watch(backend)
            used = metrics.timed(store)
        timeline: list[Any] = [clock]  # the supervisor's own once it exists: on the store's time line
        if trace_calls:

            def trace(call: str, target: str | None) -> None:
                emit(call=call, at=timeline[0].now(), **({} if target is None else {"target": target}))

            backend = traced(backend, trace)
        if pause_action:
            used = PausingRecords(used, pause_action, emit)
        extra: dict[str, Any] = {} if lease_ttl is None else {"lease_ttl": lease_ttl}
        extra["archive"] = ArchiveSettings(max_bytes=archive_max_bytes, keep=keep)
        if adapter is None:
            extra["suspects"] = app.cluster_config().suspects
        sup = Supervisor(backend, used, clock=clock, owner=who, poll=poll, default_rules=rules, cluster=name, **extra)
        timeline[0] = sup.clock
        if metrics is not None:
            metrics.set_poll(sup.poll)
            host, port = metrics.serve(metrics_host, metrics_port or 0)
            emit(event="metrics", url=f"http://{host}:{port}/metrics")
            log(f"metrics on http://{host}:{port}/metrics, health on /healthz")
        emit(event="started", pid=os.getpid(), poll=sup.poll, leaseTtl=sup.lease_ttl, adapter=adapter or "")
        log(f"supervising cluster {sup.cluster} every {sup.poll:g}s as {who}; SIGTERM or Ctrl-C stops")
        try:
            serve(sup, emit, once=once, until=until, metrics=metrics, redact=redact, log=log)
        finally:
            if metrics is not None:
                metrics.close()
            if adapter is not None:
                backend.close()
        log("supervisor stopped")
    finally:
        store.close()


@click.command("prune-outputs", context_settings=CTX)
@click.option(
    "--older-than",
    required=True,
    metavar="DURATION",
    help="Delete output archived longer ago than this (30d, 12h, 3600), of closed jobs.",
)
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the count as JSON.")
@pass_app
def prune_outputs(app: App, older_than: str, dry_run: bool, as_json: bool) -> None:
    """Delete the supervisor's archived output (docs/supervisor.md) older than --older-than, of closed jobs.

    \b
    A job still open keeps its archived output whatever its age. Deletes in batches of 1000 entries, one short
    transaction each, so supervisors sharing the store are not held up. `dispatch supervise --archive-keep`
    does the same every hour.
    """
    import time

    from dispatch.cli import ui
    from dispatch.supervise.archive import PRUNE_LIMIT

    seconds = option_duration(older_than, "--older-than")
    if seconds == 0:
        raise ConfigError("--older-than", "must be more than 0 (to delete every closed job's output, say 1s)")
    before = time.time() - seconds
    records: Any = app.records_if_present()
    count = 0
    if records is not None and dry_run:
        count = records.prune_outputs(before, dry_run=True)
    elif records is not None:
        with ui.spinner("deleting archived output"):
            while True:
                n = records.prune_outputs(before, limit=PRUNE_LIMIT)  # one short transaction each
                count += n
                if n < PRUNE_LIMIT:
                    break
    when = present.when(before)
    if as_json:
        ui.print_json(
            {
                "records": app.records_where(),
                "olderThan": seconds,
                "before": before,
                "dryRun": dry_run,
                "entries": count,
            }
        )
        return
    verb = "would delete" if dry_run else "deleted"
    click.echo(f"{verb} {count} archived output{'' if count == 1 else 's'} of closed jobs, archived before {when}")
    ui.note(f"records: {app.records_where()}" if records is not None else f"no records yet at {app.records_where()}")


def renamed_option(old_value: str | None, old: str, value: str | None, new: str) -> str | None:
    """The value of option ``new``, also given by its deprecated spelling ``old`` (with a note on stderr)."""
    from dispatch.cli import ui

    if old_value is None:
        return value
    ui.note(f"{old} is deprecated, use {new} ({old} is accepted until the next release)")
    if value is not None and value != old_value:
        raise ConfigError(new.lstrip("-"), f"{new} and {old} (its old spelling) differ: give one")
    return old_value


def _logger(owner: str, as_json: bool) -> Any:
    """Log lines on stderr: ``dispatch supervise: ...`` text, or one JSON object a line."""
    import json
    import sys
    import time

    def log(message: str) -> None:
        if as_json:
            line = json.dumps({"ts": time.time(), "level": "info", "owner": owner, "msg": message})
        else:
            line = f"dispatch supervise: {message}"
        print(line, file=sys.stderr, flush=True)

    return log


@click.command(context_settings=CTX)
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL.

    \b
    Add to your shell's startup file, e.g. for bash:
      eval "$(dispatch completion bash)"
    """
    from click.shell_completion import get_completion_class

    cls = get_completion_class(shell)
    assert cls is not None
    root = click.get_current_context().find_root().command  # the `dispatch` group, without importing it
    comp = cls(root, {}, "dispatch", "_DISPATCH_COMPLETE")
    click.echo(comp.source())


@click.command(context_settings=CTX)
@click.argument("action", required=False, type=click.Choice(["clear"]))
@click.argument("node", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the suspects (or what was cleared) as JSON.")
@pass_app
def nodes(app: App, action: str | None, node: str | None, as_json: bool) -> None:
    """The cluster's suspect nodes, which every resubmission avoids: each with its blames, their count and until
    when (docs/supervisor.md, Bad nodes). `dispatch nodes clear NODE` deletes the node's blames, which ends its
    suspicion now.

    \b
    A node is a suspect once blamed (an execution on it ended node-lost, launch-failed or stalled) by `after` distinct
    jobs (at least 2) within `window`, for `ttl` after the last of those blames: [clusters.<name>.suspects] in the
    config file (defaults: 3 jobs, 1 day, 1 day). A job's own launch failure (not-launchable) blames no node.
    """
    import time

    from dispatch.cli import ui
    from dispatch.errors import NotFound
    from dispatch.records.nodes import NodeBlames, current_suspects

    cc = app.cluster_config()
    policy = cc.suspects
    if action == "clear":
        if not node:
            raise ConfigError("NODE", "`dispatch nodes clear` needs the node to clear")
        store: Any = app.records()
        cleared = store.clear_node_blames(cc.name, node) if isinstance(store, NodeBlames) else 0
        if as_json:
            ui.print_json({"cluster": cc.name, "node": node, "cleared": cleared})
            return
        if cleared == 0:
            raise NotFound(f"node {node} of cluster {cc.name} has no blame to clear")
        click.echo(f"cleared {cleared} blame{'' if cleared == 1 else 's'} of node {node} on cluster {cc.name}")
        return
    if node:
        raise ConfigError("NODE", f"a node ({node!r}) goes with `dispatch nodes clear`")
    now = time.time()
    records: Any = app.records_if_present()
    found = []
    if isinstance(records, NodeBlames):
        found = current_suspects(records, cc.name, policy, now)
    if as_json:
        ui.print_json(
            {
                "cluster": cc.name,
                "policy": {"after": policy.after, "window": policy.window, "ttl": policy.ttl},
                "suspects": [s.to_json() for s in found],
            }
        )
        return
    if not found:
        click.echo(f"no suspect nodes on cluster {cc.name}")
        return
    rows = [
        [
            s.node,
            str(len(s.blames)),
            ", ".join(sorted({b.cause.value for b in s.blames})),
            ", ".join(sorted({b.job_id for b in s.blames})),
            present.when(s.until),
        ]
        for s in found
    ]
    click.echo(ui.table(["NODE", "BLAMES", "CAUSES", "JOBS", "UNTIL"], rows))
