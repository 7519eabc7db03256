"""`gitmem ui`: the local web UI (Starlette is imported only when it runs)."""

from __future__ import annotations

import click

from .base import main


@main.command()
@click.option("--port", default=8737, show_default=True, metavar="P", help="Port on 127.0.0.1.")
@click.option("--open", "open_browser", is_flag=True, help="Open the UI in the default browser.")
@click.pass_context
def ui(ctx: click.Context, port: int, open_browser: bool) -> None:
    """Serve a local web UI: memory, one memory's history, audit trail, branches, cost.

    Listens on 127.0.0.1 only and refuses requests whose Host or Origin is not
    local; writes (add, supersede, retract, resolve a conflict) carry a CSRF
    token and are recorded with your git identity and source web-ui. Ctrl-C
    stops it.

    Example: gitmem ui --port 8737 --open
    """
    from ..web import serve
    from .base import Settings

    settings = ctx.find_object(Settings) or Settings()
    serve(settings.path, port, open_browser, echo=click.echo)
