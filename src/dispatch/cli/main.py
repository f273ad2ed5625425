"""The ``dispatch`` command: the click group, global options, and the one place errors become exit codes.

Nothing heavy is imported here: each command imports what it needs when it runs, so ``dispatch --help`` and
shell completion stay fast and never load an adapter.
"""

from __future__ import annotations

import sys

import click

from dispatch.cli import admin, conformance, dashboard, jobs, views
from dispatch.cli.app import App, debug_requested
from dispatch.cli.exitcodes import HINTS, Exit, exit_for

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

EPILOG = """\b
Exit codes: 0 ok, 1 job failed or cancelled, 2 usage or configuration error, 3 not found,
4 refused (unsupported, rejected, read-only), 5 outcome unknown, 6 cluster unavailable,
7 conflict, 70 internal error, 130 interrupted.
"""


class OrderedGroup(click.Group):
    """Lists commands in the order of a newcomer's workflow, not alphabetically."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


@click.group(cls=OrderedGroup, context_settings=CONTEXT, epilog=EPILOG)
@click.option(
    "-c",
    "--cluster",
    envvar="DISPATCH_CLUSTER",
    metavar="NAME",
    help="Cluster from the config file (default: its 'default', else the local adapter). Env: DISPATCH_CLUSTER.",
)
@click.option(
    "--config",
    "config_path",
    envvar="DISPATCH_CONFIG",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="Config file (default: $XDG_CONFIG_HOME/dispatch/config.toml). Env: DISPATCH_CONFIG.",
)
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.version_option(package_name="dispatch-jobs", prog_name="dispatch")
@click.pass_context
def cli(ctx: click.Context, cluster: str | None, config_path: str | None, debug: bool) -> None:
    """Submit and supervise multi-node training jobs on the scheduler you already have.

    \b
    With no configuration, jobs run on this machine (the local adapter) and
    records live in $XDG_STATE_HOME/dispatch/records.db. Start with:
      dispatch run --nodes 2 -- python train.py
      dispatch status
      dispatch logs JOB
    """
    app = App(config_path=config_path, cluster_name=cluster, debug=debug)
    ctx.obj = app
    ctx.call_on_close(app.close)


for command in (
    jobs.run,
    jobs.submit,
    views.status,
    views.show,
    views.logs,
    dashboard.ui,
    jobs.hold,
    jobs.release,
    jobs.stop,
    jobs.ack,
    admin.supervise,
    admin.prune_outputs,
    admin.capabilities,
    admin.preflight,
    admin.schema,
    admin.clusters,
    admin.nodes,
    conformance.conformance,
    admin.completion,
):
    cli.add_command(command)


def _set_global(ctx: click.Context, param: click.Parameter, value: object) -> None:
    """A global option given after the subcommand: it overrides the one given before (or the environment)."""
    if value is None or value is False or ctx.resilient_parsing:
        return
    app = ctx.find_object(App)
    if app is None:
        return
    if param.name == "cluster":
        app.cluster_name = str(value)
    elif param.name == "config_path":
        app.config_path = str(value)
    elif param.name == "debug":
        app.debug = True


def _global_options() -> list[click.Option]:
    """The group's options, accepted after a subcommand too (``dispatch status -c hpc``). Hidden in each
    command's help: the group's help and docs/cli.md list them once."""
    return [
        click.Option(["-c", "--cluster"], metavar="NAME", expose_value=False, callback=_set_global, hidden=True),
        click.Option(
            ["--config", "config_path"],
            metavar="FILE",
            type=click.Path(dir_okay=False),
            expose_value=False,
            callback=_set_global,
            hidden=True,
        ),
        click.Option(["--debug"], is_flag=True, expose_value=False, callback=_set_global, hidden=True),
    ]


for _command in cli.commands.values():
    taken = {o for p in _command.params for o in (*p.opts, *p.secondary_opts)}
    _command.params.extend(o for o in _global_options() if not taken & set(o.opts))


SHORT_HELP = {
    "run": "Submit a command, show its output, wait for the end.",
    "submit": "Submit a command as a job; print its id.",
    "status": "Table of jobs: state, cause, execution, age.",
    "show": "Everything about one job, with its history.",
    "logs": "A job's output, per rank and execution.",
    "ui": "Web dashboard of the jobs (read-only).",
    "hold": "Keep a waiting job from starting.",
    "release": "Lift your hold on a job.",
    "stop": "Stop a job (SIGTERM, then SIGKILL).",
    "ack": "Acknowledge a closed job's escalations.",
    "supervise": "Apply recovery rules to the cluster's jobs.",
    "prune-outputs": "Delete old archived output of closed jobs.",
    "capabilities": "What the cluster can do, with reasons.",
    "preflight": "Check the cluster can be used from here.",
    "schema": "JSON Schema of an adapter's settings.",
    "clusters": "The configured clusters.",
    "nodes": "Suspect nodes every resubmission avoids.",
    "conformance": "Run the conformance suites against a cluster.",
    "completion": "Shell completion script (bash, zsh, fish).",
}
for _name, _text in SHORT_HELP.items():
    cli.commands[_name].short_help = _text


def _fail(message: str, code: int, hint: str | None = None) -> int:
    text = f"dispatch: error: {message}"
    if hint:
        text += f" ({hint})"
    click.echo(" ".join(text.split("\n")), err=True)
    return code


def _usage_hint(exc: click.ClickException) -> str | None:
    """Where to read the right usage, for a usage error (a bad option value, an unknown option, a missing
    argument): click's own report is four lines, with the usage text; dispatch's errors are one."""
    if not isinstance(exc, click.UsageError):
        return None
    path = exc.ctx.command_path if exc.ctx is not None else "dispatch"
    return f"see '{path} --help'"


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns (and as a console script, exits with) the exit code."""
    args = sys.argv[1:] if argv is None else argv
    debug = debug_requested(args)
    try:
        rv = cli.main(args=args, prog_name="dispatch", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("", err=True)
        return int(Exit.INTERRUPTED)
    except click.ClickException as exc:
        if debug:
            raise
        return _fail(exc.format_message().rstrip("."), int(exc.exit_code), _usage_hint(exc))
    except KeyboardInterrupt:
        click.echo("\ndispatch: interrupted", err=True)
        return int(Exit.INTERRUPTED)
    except BrokenPipeError:
        return int(Exit.OK)
    except Exception as exc:
        from dispatch.errors import DispatchError

        if debug:
            raise
        if isinstance(exc, DispatchError):
            name = type(exc).__name__
            return _fail(str(exc), int(exit_for(exc)), HINTS.get(name))
        return _fail(
            f"internal error: {type(exc).__name__}: {exc}",
            int(Exit.INTERNAL),
            "run again with --debug for the traceback, and please report it",
        )
    except SystemExit as exc:
        return int(exc.code or 0) if isinstance(exc.code, int) else 1
    return rv if isinstance(rv, int) else int(Exit.OK)


def console() -> None:
    sys.exit(main())


if __name__ == "__main__":
    console()
