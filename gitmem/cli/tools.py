"""Cross-tool commands: mcp (the server), check (a proposal against rejections), export, setup."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence

import click

from .base import (REPO_PATH, UTF8_TEXT, Settings, echo, emit_json, json_option, main, note_backlog, pass_store,
                   read_text_argument)

if TYPE_CHECKING:
    from ..store import Store


@main.command()
@click.option("--repo", metavar="PATH", help="Repository to serve (default: -C, else the current directory).")
@click.option("--http", is_flag=True, help="Serve streamable HTTP on 127.0.0.1 instead of stdio.")
@click.option("--port", default=8767, show_default=True, type=click.IntRange(0, 65535),
              help="Port for --http (8765 is the emulator's, 8766 the router's: all three can run at once; "
              "0: any free one, printed).")
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

    if not http and ctx.get_parameter_source("port") is not click.core.ParameterSource.DEFAULT:
        raise click.UsageError("--port is for --http: over stdio the client talks on the process's stdin and stdout")
    settings: Settings = ctx.find_object(Settings) or Settings()
    serve(repo or settings.path, settings.branch, http=http, port=port, echo=click.echo)


@main.command()
@click.argument("proposal", type=UTF8_TEXT)
@click.option("--path", "paths", multiple=True, type=REPO_PATH, help="A file the proposal touches (repeatable).")
@json_option
@pass_store
def check(store: Store, proposal: str, paths: Sequence[str], as_json: bool) -> None:
    """Check a proposal against earlier rejections.

    Two answers: a **repeat** (the proposal re-proposes an option the team rejected: exit 1, with
    the rejection, its reason, who and when), or **related** rejections (the same topic, another
    option: listed for information, exit 0). The last line names the judge that decided. A plan of
    several sentences is judged whole and sentence by sentence (a sentence needs stronger evidence than a
    whole proposal), so a rejected option buried in it is often, not always, caught: about half of such
    plans in bench/check_long.py. Checking each approach on its own is surer.

    JSON: {"proposal", "proposal_chars"?, "repeat", "judge", "rejections": [{"id", "proposal", "reason", "author",
    "kind", "source", "when", "match", "tier", "similarity"?, "conflict"?}], "related": [...]}; "conflict"
    (as in search) marks a rejection whose merge conflict is pending; a proposal over 200 characters is echoed
    as its first 200 and "…" (proposal_chars: its length).

    PROPOSAL - reads it from stdin (a plan in a file: gitmem check - < plan.md).

    As `gitmem search`, it judges by words at once when the memories still waiting for vectors would take over
    4 s of CPU to embed (about 50), says so, and leaves them to the background (`gitmem embed` embeds them now).

    Example: gitmem check "move the job queue to Redis" --path src/jobs/queue.py
    """
    from ..backlog import allowance
    from ..recall import PERSON_BUDGET
    from ..recall import check as check_proposal

    proposal = read_text_argument(proposal, "PROPOSAL")
    if not proposal.strip():
        raise click.UsageError("PROPOSAL is empty: say what you are about to do")
    from ..conflicts import check_json, marked, pending

    verdict = check_proposal(store, proposal, paths=paths, budget=allowance(store, PERSON_BUDGET))
    note_backlog(store)
    conflicts = pending(store) if verdict.hits else {}
    if as_json:
        emit_json(check_json(verdict, conflicts))
    else:
        for h in verdict.repeats:  # memory text and authors come from anyone who can push: made inert
            m = h.memory
            echo(f"repeat: rejected {m.created[:10]} by {m.author.name} ({m.source}): {m.summary}")
            echo(f"  because: {m.reason}")
            echo(f"  id {m.id}, match {h.match:.2f}{marked(m.id, conflicts)}")
        for h in verdict.related:
            m = h.memory
            echo(f"related (another option on the same topic): {m.summary}")
            echo(f"  rejected because: {m.reason}  (id {m.id}){marked(m.id, conflicts)}")
        if not verdict.hits:
            click.echo("no earlier rejection matches", err=True)
        click.echo(f"judge: {verdict.judge}", err=True)
    if verdict.repeat:
        raise SystemExit(1)


@main.command("export")
@click.option("--format", "fmt", required=True,
              type=click.Choice(["agents-md", "claude-md", "cursor-rules", "copilot-instructions", "windsurf-rules",
                                 "windsurf-workspace-rules"]),  # export.FORMATS (not imported: --help stays quick)
              help="agents-md: AGENTS.md, claude-md: CLAUDE.md, cursor-rules: .cursor/rules/gitmem.mdc, "
                   "copilot-instructions: .github/copilot-instructions.md (GitHub Copilot), "
                   "windsurf-rules: .windsurfrules (Windsurf's older place), "
                   "windsurf-workspace-rules: .windsurf/rules/gitmem.md (trigger: always_on).")
@click.option("--write", is_flag=True, help="Update the file (default: print what it would contain).")
@click.option("--check", is_flag=True,
              help="Write nothing; exit 1 when the file's section is not what memory gives now (CI: a committed "
                   "AGENTS.md kept in step).")
@click.option("--force", is_flag=True,
              help="Replace the section even if it was edited by hand since gitmem wrote it (the edit is lost).")
@click.option("--on-commit", is_flag=True,
              help="Also refresh this file after every commit (post-commit hook); only for a file git does not "
                   "track (it is added to .git/info/exclude), so commits never leave the work tree dirty.")
@json_option
@pass_store
def export_(store: Store, fmt: str, write: bool, check: bool, force: bool, on_commit: bool, as_json: bool) -> None:
    """Render memory into a marked, generated section of a tool's rules file.

    Only the text between the gitmem markers is replaced; the rest of the file
    stays as you wrote it, and running it twice changes nothing. Memory text is
    escaped so it stays quoted data: it cannot open HTML, links, code or headings.
    A section edited by hand since gitmem wrote it is refused unless --force;
    without --write, a line on stderr says so first.

    JSON: {"format", "path", "changed", "left_out", "edited_by_hand", "written", "on_commit": [format, ...]}
    (changed: the file's section differs from what memory gives now; with --check, exit 1 when it does;
    edited_by_hand: the section was edited since gitmem wrote it, so --write refuses it without --force).

    Example: gitmem export --format agents-md --write
    """
    from ..export import check_on_commit, enable_on_commit, export, on_commit_formats

    if check and (write or on_commit):
        raise click.UsageError("--check writes nothing: use it without --write and --on-commit")
    if on_commit:
        check_on_commit(store, fmt)  # refused before anything is written
    result = export(store, fmt, write=write, force=force)
    formats = enable_on_commit(store, fmt) if on_commit else on_commit_formats(store)
    if result.edited_by_hand and not (write or as_json):  # before --write refuses it
        click.echo(result.edit_note(), err=True)
    if as_json:
        emit_json({**result.to_dict(), "written": write and result.changed, "on_commit": list(formats)})
    elif check:
        how = f"`gitmem export --format {fmt} --write{' --force' if result.edited_by_hand else ''}`"
        click.echo(f"stale: {result.path}: {how} brings it in step" if result.changed
                   else f"up to date: {result.path}", err=result.changed)
    elif not write:
        echo(result.text, nl=False)
    if check and result.changed:
        raise SystemExit(1)
    if as_json or not write:
        return
    click.echo(f"{'updated' if result.changed else 'unchanged'}: {result.path}")
    if result.left_out:
        click.echo(result.note())
    if on_commit:
        click.echo(f"refreshed after every commit: {', '.join(formats)}")


@main.command()
@click.argument("tool", type=click.Choice(["claude-code", "cursor", "windsurf", "ci"]))
@click.option("--write", is_flag=True, help="Write or merge the config file (default: print it).")
@click.option("--undo", is_flag=True, help="Take out what --write put in (other servers, keys and hooks stay).")
@click.option("--command", "command", metavar="COMMAND",
              help="How the tool should start gitmem (default: the absolute path of this gitmem; "
                   "e.g. `gitmem` when it is on everyone's PATH, or `uvx --from gitmem-memory gitmem`).")
@json_option
@pass_store
def setup(store: Store, tool: str, write: bool, undo: bool, command: Optional[str], as_json: bool) -> None:
    """Print or write the configuration TOOL reads to start `gitmem mcp`.

    \b
    claude-code  .mcp.json (project scope; same as `claude mcp add --scope project`)
                 and gitmem's hooks in .claude/settings.json (`gitmem hook claude-code EVENT`)
    cursor       .cursor/mcp.json (project scope)
    windsurf     ~/.codeium/windsurf/mcp_config.json (user scope, with --repo)
    ci           .github/workflows/gitmem-agent.yml: fetch memory, run an agent, push memory
    Other servers, keys and hooks in an existing file are kept; --undo takes
    out only gitmem's entries (and removes a file left empty).

    JSON: {"tool", "path", "changed", "commands", "content", "notes", "written", "hooks": {the same
    for .claude/settings.json} (claude-code)}; with --undo: {"tool", "undone": [{"path", "changed",
    "delete"}]}.

    Example: gitmem setup claude-code --write
    """
    from ..agent_setup import apply, hooks_plan, plan, undo as undo_plan

    if undo:
        if write:
            raise click.UsageError("--undo and --write do not go together")
        results = undo_plan(store, tool)
        apply(*results)
        if as_json:
            emit_json({"tool": tool, "undone": [{"path": r.path, "changed": r.changed, "delete": r.delete}
                                                for r in results]})
            return
        for r in results:
            click.echo(f"{'removed' if r.delete else 'updated' if r.changed else 'unchanged'}: {r.path}")
        if not results:
            click.echo("nothing to undo")
        return
    results = [plan(store, tool, command=command)]
    if tool == "claude-code":
        results.append(hooks_plan(store, command=command))
    if write:
        apply(*results)
    if as_json:
        out = {**results[0].to_dict(), "written": write and results[0].changed}
        if len(results) > 1:
            out["hooks"] = {**results[1].to_dict(), "written": write and results[1].changed}
        emit_json(out)
        return
    for result in results:
        if write:
            click.echo(f"{'wrote' if result.changed else 'unchanged'}: {result.path}")
        else:
            click.echo(f"# {result.path}")
            click.echo(result.content, nl=False)
    for line in results[0].commands:
        click.echo(f"# or: {line}")
    for result in results:
        if result.notes:
            click.echo(f"# note: {result.notes}", err=True)


@main.command("memory-tool")
@click.argument("command_json", required=False, metavar="JSON")
@click.option("--source", default="memory-tool", show_default=True, help="Source recorded on writes.")
@click.pass_context
def memory_tool(ctx: click.Context, command_json: Optional[str], source: str) -> None:
    """Execute one Anthropic memory-tool command (memory_20250818) against this branch's memory.

    JSON is the tool_use input Claude sent (or read from stdin); the result text
    is printed for the tool_result. A refused command exits 1 with its message,
    which is what Claude should get back as an error result.

    Example: gitmem memory-tool '{"command": "view", "path": "/memories"}'
    """
    import json

    from ..errors import GitmemError
    from ..memory_tool import MemoryTool

    settings: Settings = ctx.find_object(Settings) or Settings()
    if command_json in (None, "-"):  # stdin, as `-` means for every TEXT
        import sys

        data = sys.stdin.buffer.read()
        try:
            raw = data.decode("utf-8")
        except UnicodeDecodeError:
            raise GitmemError("the command on stdin is not UTF-8") from None
    else:
        raw = command_json
    try:
        command = json.loads(raw)
    except ValueError as e:
        raise GitmemError(f"not a JSON command: {e}") from None
    click.echo(MemoryTool(settings.path, settings.branch, source=source).execute(command))


@main.group()
def server() -> None:
    """The command server: a resident gitmem that runs read commands and Claude Code's hooks without
    re-importing gitmem.

    `context`, `search`, `list`, `status`, the other read commands an agent runs over and over, and
    `hook claude-code EVENT` skip 25-100 ms of imports when a server runs: the first such command
    starts one in the background, and
    it leaves after 10 minutes without a command, or when gitmem changes on disk. Set GITMEM_SERVER=0
    to run every command in its own process.

    Example: gitmem server status
    """


@server.command("status")
@json_option
def server_status(as_json: bool) -> None:
    """Whether a server runs for this gitmem, and what it has done.

    JSON: {"running", "pid", "socket", "started", "commands", "idle_seconds"}; {"running": false, "socket"}
    when none runs.

    Example: gitmem server status --json
    """
    import time

    from ..cmdserver import control, socket_path

    info = control("status")
    if as_json:
        emit_json(info if info is not None else {"running": False, "socket": socket_path()})
        return
    if info is None:
        echo(f"no command server listens at {socket_path()}")
        return
    echo(f"command server {info['pid']} at {info['socket']}: {info['commands']} commands in "
         f"{time.time() - info['started']:.0f} s; leaves after {info['idle_seconds']:.0f} s idle")


@server.command("stop")
def server_stop() -> None:
    """Stop the server; the next read command starts another (commands it runs still finish).

    Example: gitmem server stop
    """
    from ..cmdserver import control

    echo("stopped the command server" if control("stop") is not None else "no command server was running")
