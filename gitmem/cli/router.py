"""`gitmem router serve`: the memory router, a Messages API server on loopback.

uvicorn, httpx2 and the emulator are imported inside the command, so `gitmem --help` stays quick.
"""

from __future__ import annotations

from typing import Optional

import click

from .base import main


@main.group()
def router() -> None:
    """The memory router: point an agent's ANTHROPIC_BASE_URL at it and every request
    carries the team memory as a prompt-cached block (see docs/router.md).

    Example: gitmem router serve --port 8766 --policy auto
    """


@router.command()
@click.option("--port", type=click.IntRange(0, 65535), default=8766, show_default=True, help="TCP port on 127.0.0.1.")
@click.option("--policy", type=click.Choice(["none", "5m", "1h", "keepalive", "auto"]), default="5m",
              show_default=True, help="Cache policy for the router's breakpoints and pings (header gitmem-policy overrides).")
@click.option("--upstream", metavar="URL",
              help="Forward to this Messages API (default: the real API with ANTHROPIC_API_KEY set, else the embedded emulator).")
@click.option("--repo", "repo", metavar="PATH",
              help="The repository whose memory to attach (default: the -C path; header gitmem-repo overrides).")
@click.option("--guide/--no-guide", default=False, show_default=True,
              help="Also attach the repository guide (gitmem guide set), as `gitmem context` does.")
@click.option("--virtual-clock", is_flag=True,
              help="TTLs and pings on a virtual clock moved by POST /_router/clock {\"advance\": SECONDS}.")
@click.pass_context
def serve(ctx: click.Context, port: int, policy: str, upstream: Optional[str], repo: Optional[str], guide: bool,
          virtual_clock: bool) -> None:
    """Serve the router on http://127.0.0.1:PORT until interrupted.

    It attaches the memory of the repository's branch after the client's system
    prompt and tools, keeps within the 4-breakpoint limit, forwards to the upstream
    (streams pass through as they arrive), names the upstream in a gitmem-upstream
    header, records every request and ping in .git/gitmem/requests.jsonl (never
    the API key) and, with keepalive or auto, pings while the client is idle.
    `gitmem bill --router` shows the traffic by session and break.

    Request headers: gitmem-memory: off, gitmem-policy, gitmem-repo, gitmem-branch,
    gitmem-session.

    \b
    Example: gitmem router serve --port 8766 --policy auto &
             ANTHROPIC_BASE_URL=http://127.0.0.1:8766 claude
    """
    import os

    from ..price_table import configured_price_table
    from ..emulator import VirtualClock
    from ..router_app import Router
    from ..router_app import serve as run
    from .base import Settings

    settings = ctx.find_object(Settings) or Settings()
    if repo:  # named, it must be one, as for `gitmem mcp`; by default, requests from outside one pass through
        from ..repo import open_repository

        open_repository(repo)
    where = os.path.abspath(repo or settings.path)
    table = configured_price_table(None)
    r = Router(policy=policy, repo=where, upstream=upstream, clock=VirtualClock() if virtual_clock else None,
               guide=guide, table=table)
    from ..serving import listen

    sock = listen("127.0.0.1", port)
    port = sock.getsockname()[1]
    clock = "virtual clock: POST /_router/clock to advance" if virtual_clock else "real clock"
    click.echo(f"gitmem router on http://127.0.0.1:{port} -> {r.upstream_name} (policy {policy}, {clock}, "
               f"memory of {where}); use ANTHROPIC_BASE_URL=http://127.0.0.1:{port}", err=True)
    run(r, sock)
