"""Cross-tool commands: mcp (the server), check (a proposal against rejections), export, setup."""

from __future__ import annotations

from typing import Optional, Sequence

import click

from . import Settings, emit_json, json_option, main, pass_store


@main.command()
@click.option("--repo", metavar="PATH", help="Repository to serve (default: -C, else the current directory).")
@click.option("--http", is_flag=True, help="Serve streamable HTTP on 127.0.0.1 instead of stdio.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(1, 65535), help="Port for --http.")
@click.pass_context
def mcp(ctx: click.Context, repo: Optional[str], http: bool, port: int) -> None:
    """Run the MCP server (stdio by default) for Claude Code, Cursor, Windsurf or any MCP client.

    \b
    Tools: remember, recall, get, history, reject, check_proposal, context,
    checkpoint, resume. Resources: gitmem://memories, gitmem://memory/{id}.
    Writes are recorded as agent writes with source mcp:<client>/<version>.
    The server follows branch switches and writes nothing to stdout but protocol.

    Example: gitmem mcp --repo ~/src/shop
    """
    from ..mcp_server import serve

    settings: Settings = ctx.find_object(Settings) or Settings()
    serve(repo or settings.path, settings.branch, http=http, port=port)


@main.command()
@click.argument("proposal")
@click.option("--path", "paths", multiple=True, help="A file the proposal touches (repeatable).")
@json_option
@pass_store
def check(store, proposal: str, paths: Sequence[str], as_json: bool) -> None:
    """Check a proposal against earlier rejections (exit 1 when one matches).

    JSON: {"proposal", "rejections": [{"id", "proposal", "reason", "author", "kind", "source",
    "when", "match"}]}.

    Example: gitmem check "move the job queue to Redis" --path src/jobs/queue.py
    """
    from ..search import check_proposal, rejection_summary

    hits = check_proposal(store.memories().values(), proposal, paths=paths)
    if as_json:
        emit_json({"proposal": proposal, "rejections": [rejection_summary(h) for h in hits]})
    else:
        for h in hits:
            m = h.memory
            click.echo(f"rejected {m.created[:10]} by {m.author.name} ({m.source}): {m.summary}")
            click.echo(f"  because: {m.reason}")
            click.echo(f"  id {m.id}, match {h.match:.2f}")
        if not hits:
            click.echo("no earlier rejection matches", err=True)
    if hits:
        raise SystemExit(1)
