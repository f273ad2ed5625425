"""``dispatch ui``: the read-only web dashboard over the records (needs the ``ui`` extra)."""

from __future__ import annotations

from urllib.parse import urlencode

import click

from dispatch.cli.app import App

pass_app = click.make_pass_decorator(App)
CTX = {"help_option_names": ["-h", "--help"]}


@click.command(context_settings=CTX)
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to listen on (not loopback: needs a token)."
)
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="Port (0: any free one).")
@click.option(
    "--token",
    envvar="DISPATCH_UI_TOKEN",
    metavar="TEXT",
    help="The token every request must carry (default: a new random one, printed in the address). "
    "Env: DISPATCH_UI_TOKEN.",
)
@click.option(
    "--no-token",
    is_flag=True,
    help="Serve without a token, on loopback only: then every user of this machine can read every job's "
    "command and output. For a single-user machine.",
)
@pass_app
def ui(app: App, host: str, port: int, token: str | None, no_token: bool) -> None:
    """Serve a read-only dashboard of the jobs: table, timelines, output, clusters.

    \b
    Opens the records and every cluster read-only. Listens on 127.0.0.1 unless
    --host says otherwise. Every request needs a token, a new one each start
    unless --token gives it: open the address printed on stdout once (it
    carries the token and sets a session cookie for this instance only).
    """
    import secrets

    from dispatch.errors import ConfigError

    try:
        from dispatch.ui.app import create_app
        from dispatch.ui.server import bind, check_bind, is_loopback, serve
        from dispatch.ui.source import Source
    except ImportError as exc:
        raise ConfigError("ui", f"the dashboard needs its extra: pip install 'dispatch-jobs[ui]' ({exc})") from None
    if no_token and token:
        raise ConfigError("--no-token", "--no-token and a token (--token or DISPATCH_UI_TOKEN) exclude each other")
    if not no_token:
        token = token or secrets.token_urlsafe(24)
    check_bind(host, token)
    records = app.records_read_only()
    source = Source(
        records,
        lambda name: app.cluster(name, read_only=True, store=False),
        str(app.config().records),
        policy_of=lambda name: app.cluster_config(name).suspects,
    )
    hosts = None if is_loopback(host) else ["*"]
    web = create_app(source, token=token, allowed_hosts=hosts)
    sock = bind(host, port)

    def announce(url: str) -> None:
        if token:
            click.echo(f"dispatch ui: serving {url}; open the address below once (it carries the token)", err=True)
            click.echo(f"{url}?{urlencode({'token': token})}")
        else:
            click.echo(
                f"dispatch ui: serving {url} without a token (--no-token): every user of this machine can read "
                "every job's command and output through it",
                err=True,
            )
            click.echo(url)

    try:
        serve(web, sock, announce)
    finally:
        source.close()
