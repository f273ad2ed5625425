"""``dispatch ui``: the read-only web dashboard over the records (needs the ``ui`` extra)."""

from __future__ import annotations

import click

from dispatch.cli.app import App

pass_app = click.make_pass_decorator(App)
CTX = {"help_option_names": ["-h", "--help"]}


@click.command(context_settings=CTX)
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to listen on; non-loopback needs --token."
)
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="Port (0: any free one).")
@click.option(
    "--token",
    envvar="DISPATCH_UI_TOKEN",
    metavar="TEXT",
    help="Require this token on every request (Bearer, or ?token= once). Env: DISPATCH_UI_TOKEN.",
)
@pass_app
def ui(app: App, host: str, port: int, token: str | None) -> None:
    """Serve a read-only dashboard of the jobs: table, timelines, output, clusters.

    \b
    Opens the records and every cluster read-only. Listens on 127.0.0.1 unless
    --host says otherwise, which then needs --token.
    """
    from dispatch.errors import ConfigError

    try:
        from dispatch.ui.app import create_app
        from dispatch.ui.server import bind, check_bind, is_loopback, serve
        from dispatch.ui.source import Source
    except ImportError as exc:
        raise ConfigError("ui", f"the dashboard needs its extra: pip install 'dispatch-jobs[ui]' ({exc})") from None
    check_bind(host, token)
    records = app.records_read_only()
    source = Source(records, lambda name: app.cluster(name, read_only=True, store=False), str(app.config().records))
    hosts = None if is_loopback(host) else ["*"]
    web = create_app(source, token=token, allowed_hosts=hosts)
    sock = bind(host, port)

    def announce(url: str) -> None:
        click.echo(f"dispatch ui: {url}" + (" (append ?token=<your token> once)" if token else ""), err=True)
        click.echo(url, nl=True)

    try:
        serve(web, sock, announce)
    finally:
        source.close()
