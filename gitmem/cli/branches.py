"""Branch commands: branch, diff, prune, merge, sync, conflicts, resolve,
hooks install/uninstall/status, hook, checkpoint, resume."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Dict, Optional

import click

from ..text import inert, plural
from .base import author_options, echo, edit_in_editor, emit_json, json_option, main, pad, pass_store

if TYPE_CHECKING:
    from ..branches import SyncResult
    from ..store import Store


def _short(oid: Optional[str]) -> str:
    return oid[:10] if oid else "-"


@main.command()
@click.option("--move", "-m", "move", nargs=2, metavar="OLD NEW",
              help="Rename OLD's memory to NEW, after `git branch -m OLD NEW` (git moves only the code).")
@json_option
@pass_store
def branch(store: Store, move, as_json: bool) -> None:
    """List memory branches: parent, tip, memory count, whether the code branch
    still exists and whether it is merged into its parent. With --move, rename one.

    JSON: {"current", "branches": [{"name", "ref", "tip", "parent", "memories", "active", "code", "merged",
    "conflicts", "memory_merged", "renamed_to", "merged_into", "set_aside_from"}]} (memories: every blob; active: as
    status counts; set_aside_from: for memory set aside here, BRANCH.earlier-TIP, BRANCH (its "code" is "deleted": it
    never had code of its own); merged_into: for that memory, BRANCH once its memory holds all of it, as prune
    counts it; renamed_to: set by prune only);
    with --move: {"from", "to", "ref", "tip"}.

    Example: git branch -m payments billing && gitmem branch -m payments billing
    """
    from ..branches import list_branches

    if move:
        from ..branches import move as move_memory
        from ..repo import memory_ref

        tip = move_memory(store.repo, *move)
        if as_json:
            emit_json({"from": move[0], "to": move[1], "ref": memory_ref(move[1]), "tip": tip})
        elif move[0] == move[1]:
            click.echo(f"the memory of {move[0]!r} is already on {memory_ref(move[1])} (at {_short(tip)}): nothing to move")
        else:
            click.echo(f"moved the memory of {move[0]!r} to {memory_ref(move[1])} (at {_short(tip)})")
        return
    found = list_branches(store.repo)
    if as_json:
        emit_json({"current": store.branch, "branches": [b.to_dict() for b in found]})
        return
    from ..branches import carry_over, renames

    moved = renames(store.repo)  # renamed here, its code may still be on a remote under the old name
    if found and store.branch not in {b.name for b in found}:  # checked out, nothing written on it yet
        reads, at = store.read_from()
        click.echo(f"* {pad(store.branch, 24)} {'-':<10} no memory of its own yet"
                   + (f": reading {reads!r} at {_short(at)}" if reads else ""))
    for b in found:
        mark = "*" if b.name == store.branch else " "
        notes = [f"from {b.parent}"] if b.parent else []
        notes += [f"code renamed to {moved[b.name]}: {carry_over(store.repo, b.name, moved[b.name])}"] if b.name in moved \
            else [f"set aside from {b.set_aside_from}"] if b.set_aside_from \
            else ["code deleted"] if b.code == "deleted" else []
        notes += ([f"code and memory merged into {b.parent or 'the default branch'}"] if b.memory_merged else
                  [f"code merged, memory not yet: gitmem merge {b.name}"]) if b.merged else \
            [f"memory merged into {b.merged_into}"] if b.merged_into else []
        notes += [plural(b.conflicts, "conflict")] if b.conflicts else []
        click.echo(f"{mark} {pad(b.name, 24)} {_short(b.tip)} {b.active:>5} active of {b.memories:<5} {', '.join(notes)}")
    if not found:
        click.echo("no memory branches yet", err=True)


@main.command()
@click.argument("range_", metavar="[A..B]", required=False)
@click.option("--markdown", is_flag=True, help="Markdown, to paste into a pull request.")
@json_option
@pass_store
def diff(store: Store, range_: Optional[str], markdown: bool, as_json: bool) -> None:
    """Memory changes B made since it diverged from A (like `git diff A...B`).

    A and B are branches (their memory) or memory commits. Without a range:
    the current branch against the branch it was forked from. A single name B
    means <current>..B.

    JSON: {"from", "to", "base", "tip", "added": [memory], "changed": [{"id", "fields", "before", "after"}],
    "removed": [memory]}.

    Example: gitmem diff main..feature/queue --markdown
    """
    from ..branches import diff as memory_diff, parent_chain, render_diff

    if not range_:
        chain = parent_chain(store.repo, store.branch)
        if not chain:
            raise click.UsageError(f"{store.branch!r} has no parent branch: give a range such as main..BRANCH")
        left, right = chain[0], store.branch
    elif ".." in range_:
        left, _, right = range_.replace("...", "..").partition("..")
        left, right = left or store.branch, right or store.branch
    else:
        left, right = store.branch, range_
    d = memory_diff(store, left, right)
    if as_json:
        emit_json(d.to_dict())
    else:
        click.echo(render_diff(d, markdown=markdown), nl=False)


@main.command()
@click.option("--yes", is_flag=True, help="Really delete (default: only list what would go).")
@click.option("--force", is_flag=True, help="With --yes, delete memory that is not in its parent's too.")
@json_option
@pass_store
def prune(store: Store, yes: bool, force: bool, as_json: bool) -> None:
    """Drop the memory of code branches that no longer exist (here or on a remote).

    Lists what it would drop first; pass --yes to delete. A branch whose memory is not all in its
    parent's is kept unless --force (it may exist nowhere else: `gitmem merge NAME` keeps it). Each
    line names the ref and the tip, so `git update-ref REF TIP` brings one back until gc (REF:
    refs/memory/NAME, or refs/memory-aside/NAME for memory set aside here, NAME.earlier-TIP).

    A branch renamed with `git branch -m` whose memory was merged into the new name's since counts as merged
    (its branch's "renamed_to" and "merged_into" name the new name), and so does memory set aside here,
    BRANCH.earlier-TIP, once merged into BRANCH's ("merged_into": BRANCH).

    JSON: {"deleted": bool, "branches": [branch], "kept": [name]} (kept: not deleted, for want of --force).

    Example: gitmem prune --yes
    """
    from ..branches import prunable, prune as prune_branches

    gone = prune_branches(store.repo, dry_run=not yes, force=force)
    held = [b.name for b in gone if not prunable(b, force)]  # what --yes keeps, for want of --force
    kept = held if yes else []
    if as_json:
        emit_json({"deleted": yes, "branches": [b.to_dict() for b in gone if b.name not in kept], "kept": kept})
        return
    for b in gone:
        into = b.merged_into or b.parent or "its parent"
        verb = ("kept" if yes else "would keep") if b.name in held else "deleted" if yes else "would delete"
        state = (f"all of it is in {into}'s memory" if b.memory_merged else
                 f"some of it was not in {into}'s memory: `git update-ref {b.ref} {b.tip}` brings it back until gc"
                 if verb == "deleted" else
                 f"some of it is not in {into}'s memory: `gitmem merge {b.name}` keeps it, "
                 f"`gitmem prune --yes --force` drops it")
        click.echo(f"{verb} {b.ref} at {b.tip} ({plural(b.memories, 'memory')}; {state})")
    if not gone:
        click.echo("nothing to prune")
    elif not yes:
        rest = len(gone) - len(held)
        click.echo("run `gitmem prune --yes` to delete them" if not held else
                   "run `gitmem prune --yes --force` to delete them" if not rest else
                   f"run `gitmem prune --yes` to delete the {rest} merged, `gitmem prune --yes --force` all {len(gone)}",
                   err=True)


def _report_merges(result: SyncResult, as_json: bool, extra: Optional[Dict[str, Any]] = None) -> None:
    from ..branches import aside_notice, blocked_notice
    from ..merge import arrival_notice

    merged = result.merged
    if as_json:
        emit_json({**(extra or {}), "merged": merged, "set_aside": result.set_aside, "blocked": result.blocked})
        return
    for entry in result.blocked:
        click.echo(f"gitmem: {blocked_notice(entry)}", err=True)
    for name, aside in result.set_aside.items():
        click.echo(f"gitmem: {aside_notice(name, aside)}", err=True)
    for m in merged:
        line = (f"{m['branch']}: {m['kind']}" if m["kind"] == "up-to-date" else
                f"{m['branch']}: {m['kind']} at {_short(m['commit'])} "
                f"({len(m['added'])} added, {len(m['changed'])} changed)")
        if m.get("as_of"):  # this branch started before its parent's memory arrived (branches.take_late_parent)
            line += f", as of {m['as_of'][:10]}, where this branch forked (it started before that memory arrived)"
        click.echo(line)
        for c in m["conflicts"]:
            click.echo(f"  conflict {c['id']} ({', '.join(c['fields'])}): run `gitmem resolve {c['id']} --ours|--theirs|--edit`")
        if m.get("redacted"):
            click.echo(f"  {arrival_notice(m['redacted'])}", err=True)
    if not merged and not result.blocked:
        click.echo("nothing to merge")


@main.command()
@click.argument("source_", metavar="BRANCH|COMMIT")
@pass_store
@author_options
@json_option
def merge(store: Store, source_: str, who, source, as_json: bool) -> None:
    """Merge the memory of BRANCH (or a memory commit) into this branch's memory.

    For merges git does not show as merges (squash, rebase) or when hooks are
    not installed. Merging the same thing twice changes nothing.

    JSON: {"merged": [{"branch", "ref", "refs"?, "kind", "commit", "added", "changed", "conflicts", "kept",
    "redacted"}], "set_aside": {branch: name}, "blocked": [{"branch", "ref", "id", "why"}]} (refs: every copy of
    BRANCH's memory merged, this clone's and fetched ones, none for a commit; kept and redacted: as in `gitmem pull
    --json`; set_aside: this clone's memory of an earlier
    BRANCH, put aside, not merged, because the fetched one is a new branch of that name; blocked, exit 1: a
    copy that clashes again on memory "id", whose conflict is pending, or whose memory is damaged, "id" "").

    Example: gitmem merge feature/queue
    """
    from ..branches import SyncResult, check_side, memory_tips, merge_branches, resolve_side
    from ..errors import BranchError
    from .remote import fail_if_refused
    from ..merge import merge_into
    from ..repo import check_branch_name

    check_side(source_)
    try:
        tips = memory_tips(store.repo, check_branch_name(source_))
    except BranchError:  # not a branch name: a commit
        tips = []
    if tips:
        result = merge_branches(store, [source_], author=who, source=source)
    else:  # a code branch without memory of its own is the memory it reads, never its code commit
        commit = resolve_side(store, source_)
        result = SyncResult(merged=[] if commit is None else [
            {"branch": source_, "ref": None, **merge_into(store, commit, author=who, source=source).to_dict()}])
    _report_merges(result, as_json)
    fail_if_refused(result.blocked)


@main.command()
@click.option("--remote", "remote", metavar="REMOTE", help="Fetch memory from REMOTE (default: the branch's upstream).")
@click.option("--no-fetch", is_flag=True, help="Merge only what was fetched before (no network).")
@pass_store
@author_options
@json_option
def sync(store: Store, remote: Optional[str], no_fetch: bool, who, source, as_json: bool) -> None:
    """Fetch memory, then merge the memory of code branches this branch's code
    already contains (for example a pull request merged on the server, seen
    after `git pull`), and this branch's own fetched memory once its code is here.

    A plain `git pull` fetches no memory, so sync fetches it first (from the
    branch's upstream remote; none in a repository without remotes).

    JSON: {"fetched": REMOTE|null, "merged": [{"branch", "ref", "refs", "kind", "commit", "added", "changed",
    "conflicts", "kept", "redacted", "as_of"?}], "refused": [{"what", "why", "remote"}], "unmerged": [branch], "set_aside":
    {branch: name}, "late": [{"branch", "parent", "fork", "as_of", "notice"}], "blocked": [{"branch", "ref", "id",
    "why"}], "held": [branch]}; exit 1 when the trust gate refused anything, or a branch is blocked: its merge clashes again on
    memory "id", whose conflict is pending, or its memory is damaged ("id" "": run the doctor the line names)
    (the other branches are merged; resolve it, then sync again). kept and redacted: as in `gitmem pull --json`.
    as_of: this branch started before its parent's memory arrived, and that entry merged the parent's
    memory as of the commit this branch forked at; late: such a branch whose parent's memory at the fork cannot
    be told (the notice names the command that brings it all). unmerged: branches whose code is gone and whose memory
    this branch lacks (a squash merge on the server leaves that: `gitmem merge NAME` brings one, and sync names
    each). set_aside: this clone's memory of an earlier branch, put aside, not merged, because the fetched one is
    a new branch of that name. held: branches whose code is here but whose memory is linked to code that is not (reset
    or rewritten away from it): `gitmem merge NAME` brings one.

    Example: git pull && gitmem sync
    """
    from ..branches import held_notice
    from ..remote import sync as sync_remote
    from .remote import fail_if_refused, say_refused

    result = sync_remote(store, remote, fetch_first=not no_fetch, author=who, source="sync")
    say_refused(result.refused)
    if result.fetched and not as_json:
        click.echo(f"fetched memory from {result.fetched}")
    _report_merges(result, as_json, {"fetched": result.fetched,
                                            "refused": [r.to_dict() for r in result.refused],
                                            "unmerged": result.unmerged, "held": result.held,
                                            "late": [x.to_dict() for x in result.late]})
    if not result.merged and no_fetch and not as_json:
        click.echo("(merged only what was fetched before: run `gitmem sync` without --no-fetch to fetch)")
    for late in [] if as_json else result.late:
        click.echo(f"gitmem: {late.notice()}", err=True)
    for name in [] if as_json else result.unmerged:
        click.echo(f"{name}: its code branch is gone and its memory is not in {store.branch}'s (squash- or "
                   f"rebase-merged?): `gitmem merge {name}` brings it, `gitmem prune` drops it", err=True)
    for name in [] if as_json else result.held:
        click.echo(f"gitmem: {held_notice(name, store.branch)}", err=True)
    fail_if_refused(result.refused or result.blocked)


@main.command()
@json_option
@pass_store
def conflicts(store: Store, as_json: bool) -> None:
    """List memory conflicts left by merges (both versions are kept until resolved).

    A conflict file gitmem cannot trust (too large, YAML aliases, fields that
    are not memory fields) is not read: one stderr line names it.

    JSON: {"ref", "conflicts": [{"id", "type", "fields", "base", "ours", "theirs"}],
    "refused": [{"path", "why"}]}.

    Example: gitmem conflicts
    """
    from ..merge import conflicts_and_problems

    found, refused = conflicts_and_problems(store)
    for path, why in refused:
        click.echo(inert(f"gitmem: refused {path}: {why}"), err=True)
    if as_json:
        emit_json({"ref": store.ref, "conflicts": [c.to_dict() for c in found],
                   "refused": [{"path": p, "why": w} for p, w in refused]})
        return
    for c in found:
        click.echo(f"{c.id}  {c.ours.type}: {', '.join(c.fields)} differ "
                   f"(ours as of {c.ours.updated or c.ours.created}, theirs as of {c.theirs.updated or c.theirs.created})")
        for f in c.fields:
            click.echo(f"    ours:   {getattr(c.ours, f)!r}")
            click.echo(f"    theirs: {getattr(c.theirs, f)!r}")
    if found:  # a pull can bring a teammate's conflict: its sides are then theirs and whoever they merged
        click.echo("ours: the side of the merge that found the conflict, theirs: what it merged in "
                   "(`gitmem log --id ID` shows who wrote each)", err=True)
    else:
        click.echo("no conflicts")


@main.command()
@click.argument("memory_id", metavar="ID")
@click.option("--ours", is_flag=True, help="Keep this branch's values.")
@click.option("--theirs", is_flag=True, help="Take the merged-in values.")
@click.option("--edit", "edit_", is_flag=True, help="Write the values yourself in $EDITOR.")
@pass_store
@author_options
@json_option
def resolve(store: Store, memory_id: str, ours: bool, theirs: bool, edit_: bool, who, source, as_json: bool) -> None:
    """Resolve a memory conflict: keep ours, take theirs, or edit (one commit).

    A conflict on superseded_by comes from two supersedes of one memory: the side taken is its successor, and
    the other replacement, still active, is named on stderr with what settles it (edit, then retract).

    JSON: {"id", "commit", "ref", "redacted", "memory", "rivals": [{"id", "supersedes", "note"}]} (memory: the
    stored memory, as `gitmem show --json`; rivals: replacements that still say they supersede it).

    Example: gitmem resolve 4vhr --theirs
    """
    from ..merge import list_conflicts, resolve as resolve_conflict, rivals_after
    from ..model import matching_ids
    from ..records import rival_note
    from .memory import report_write, write_json

    if ours + theirs + edit_ != 1:  # contradictory flags are refused, never settled by their order
        raise click.UsageError("give exactly one of --ours, --theirs, --edit")
    take = "ours" if ours else "theirs" if theirs else None
    pending = {c.id: c for c in list_conflicts(store)}
    found = [pending[i] for i in matching_ids(memory_id, pending)]
    values = _edit_conflict(found) if edit_ else None
    w = resolve_conflict(store, memory_id, take=take, values=values, author=who, source=source,
                         seen=found[0].version() if len(found) == 1 else None)  # the conflict read here, no other
    left = rivals_after(store, found[0], w.commit)
    if as_json:
        emit_json({**write_json(store, w), "rivals": [{"id": r.id, "supersedes": r.supersedes,
                                                       "note": rival_note(r, old)} for r, old in left]})
        return
    report_write(store, w, "Resolved", False)
    for r, old in left:
        click.echo(f"gitmem: {rival_note(r, old)}", err=True)


def _edit_conflict(found) -> Dict[str, Any]:
    import yaml

    if len(found) != 1:
        raise click.ClickException("no single unresolved conflict matches that id")
    c = found[0]
    theirs = yaml.safe_dump({f: _plain(getattr(c.theirs, f)) for f in c.fields}, sort_keys=False)
    header = f"# Conflict on {c.id}. Theirs was:\n" + "".join(f"#   {line}\n" for line in theirs.splitlines())
    ours = {f: _plain(getattr(c.ours, f)) for f in c.fields}
    data = edit_in_editor(header + "# Edit our values below; save and quit to resolve.\n", ours, c.fields)
    return {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


@main.group()
def hooks() -> None:
    """Install, remove and inspect gitmem's git hooks (post-commit, post-checkout,
    post-merge, post-rewrite, pre-push). See docs/branches.md.

    Example: gitmem hooks install
    """


def _report_hooks(states, as_json: bool, repo, strict: bool = False, uninstalled: bool = False) -> None:
    """The hooks, one a line, then what the user must do for memory to follow commits (see hooks.placement).
    ``strict`` (install): exit 1 while a hook file does not call gitmem's yet."""
    from ..hooks import placement

    where = placement(repo)

    def shown(path: str) -> str:  # the team's files, as the team names them
        root = os.path.realpath(repo.workdir or repo.path)
        return os.path.relpath(path, root) if os.path.realpath(path).startswith(root + os.sep) else path

    pending = [s for s in states if s.state == "needs-line"]
    missing = [s.name for s in states if s.state in ("other", "absent") and where.entry is None]
    if as_json:
        emit_json({"hooks_dir": where.entry or where.folder, "reason": where.reason,
                   "hooks": [s.to_dict() for s in states]})
    else:
        for s in states:
            state = f"needs a line in {shown(s.path)}" if s.state == "needs-line" else s.state
            click.echo(f"{s.name:<14} {state}{' (chains the previous hook)' if s.chained else ''}"
                       + (f"; its edited copy of gitmem's hook is kept in {shown(s.kept)}" if s.kept else ""))
        click.echo(f"in {where.folder}")
    if where.missing:
        click.echo(f"gitmem: {where.reason}, so git runs no hooks here, gitmem's nor any other: memory does not "
                   "follow this worktree's commits, checkouts, merges or pushes. It is untracked, most likely made by a "
                   "tool: run that here (husky: `npm install`), then `gitmem hooks status`. gitmem wrote no file in "
                   f"this worktree; its hooks are in {shown(where.folder)}", err=True)
        if strict:
            raise SystemExit(1)
    elif pending:
        click.echo(f"gitmem: {where.reason}, so gitmem wrote no file there (git status is unchanged); its hooks are "
                   f"in {shown(where.folder)}. Until each hook file below calls them (add the line at its top, below any "
                   "`#!` line; create the missing files, executable, and commit them: the line does nothing in a clone "
                   "without `gitmem hooks install`), memory does not follow commits:", err=True)
        for s in pending:
            click.echo(f"  {shown(s.path)}:\n    {s.line}", err=True)
        if strict:
            raise SystemExit(1)
    elif missing and not uninstalled:
        click.echo(f"gitmem: {', '.join(missing)}: not gitmem's (never installed, or another tool wrote over it), so "
                   "memory does not follow commits, checkouts, merges or pushes there: `gitmem hooks install` puts "
                   "gitmem's back, chaining the hook it finds", err=True)


@hooks.command("install")
@json_option
@pass_store
def hooks_install(store: Store, as_json: bool) -> None:
    """Install the hooks (honours core.hooksPath and linked worktrees); an
    existing hook is kept and still runs first. A hooks folder git tracks
    or would show is left as it is: the hooks go under .git/gitmem/hooks,
    and the command names the line each hook file there must call them with
    (exit 1 until it does; `gitmem hooks status` shows them again).

    JSON: {"hooks_dir", "reason", "hooks": [{"name", "path", "state", "chained", "line", "kept"}]};
    state is installed, absent, other or needs-line (add line to the file at path); kept: where a
    gitmem hook someone edited was moved (<hook>.gitmem-edited) before gitmem replaced it.

    Example: gitmem hooks install
    """
    from ..hooks import hooks_dir, hooks_path_beyond, install

    if hooks_path_beyond(store.repo):
        click.echo(f"gitmem: warning: core.hooksPath ({hooks_dir(store.repo)}) is set in your user or system git "
                   "config, so these hooks will run in every repository that uses it; to keep them to this one, "
                   "set core.hooksPath in this repository (`git config core.hooksPath .git/hooks`) and install "
                   "again", err=True)
    if store.repo.is_bare:  # a server's copy, most often: the team's clones are where the hooks belong
        click.echo("gitmem: warning: this repository is bare: git runs no commit, checkout or merge here, so "
                   "only the pre-push hook can ever run; install the hooks in each clone", err=True)
    _report_hooks(install(store.repo), as_json, store.repo, strict=True)


@hooks.command("uninstall")
@json_option
@pass_store
def hooks_uninstall(store: Store, as_json: bool) -> None:
    """Remove gitmem's hooks and restore what was there, byte for byte. A gitmem hook someone
    edited is kept, as <hook>.gitmem-edited, not deleted.

    JSON: as `gitmem hooks install --json`.

    Example: gitmem hooks uninstall
    """
    from ..hooks import uninstall

    _report_hooks(uninstall(store.repo), as_json, store.repo, uninstalled=True)


@hooks.command("status")
@json_option
@pass_store
def hooks_status(store: Store, as_json: bool) -> None:
    """Show which hooks are installed, absent, someone else's, or waiting for
    the line that calls them in a hook file git tracks.

    JSON: as `gitmem hooks install --json`.

    Example: gitmem hooks status
    """
    from ..hooks import status as hook_status

    _report_hooks(hook_status(store.repo), as_json, store.repo)


@main.command(context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def hook(ctx: click.Context, name: str, args) -> None:
    """Run hook NAME as git would (the hook scripts and pre-commit call this).
    Exits 0: a memory problem never blocks git. The one exception: pre-push
    exits 3 (refused) when memory being pushed holds a secret.

    \b
    `gitmem hook claude-code EVENT` is Claude Code's hook (SessionStart,
    UserPromptSubmit, PostToolUse, PreCompact, SessionEnd): it reads the
    event's JSON on stdin, prints Claude Code's hook answer and always exits 0
    (see `gitmem setup claude-code --write`, docs/tools.md).

    Example: gitmem hook post-commit
    """
    settings = ctx.find_root().obj
    if name == "claude-code":
        from ..claude_code import main as run_claude_hook

        explicit = settings.path if settings and settings.path != "." else None
        raise SystemExit(run_claude_hook(args[0] if args else "", path=explicit,
                                         branch=settings.branch if settings else None))
    from ..hooks import main as run_hook

    raise SystemExit(run_hook([name, *args], cwd=settings.path if settings else "."))


@main.command("checkpoint")
@click.argument("text")
@click.option("--next", "next_", metavar="STEP", help='What comes next (default: the part after " / ").')
@pass_store
@author_options
@json_option
def checkpoint_cmd(store: Store, text: str, next_: Optional[str], who, source, as_json: bool) -> None:
    """Record where a run stands, tied to HEAD, so a crash resumes from here.

    JSON: {"id", "commit", "ref", "redacted", "memory"} (memory: the stored memory, as `gitmem show --json`).

    Example: gitmem checkpoint "parser done / next: wire it into the CLI"
    """
    from ..checkpoint import checkpoint
    from .memory import report_write

    w = checkpoint(store, text, next=next_, author=who, source=source)
    report_write(store, w, "Wrote", as_json)


@main.command()
@click.option("--prompt", is_flag=True, help="Print it as prompt text for an agent.")
@click.option("--limit", "-n", "limit", metavar="N", default=50, show_default=True, type=click.IntRange(1, 1000),
              help="At most this many commits and memories.")
@json_option
@pass_store
def resume(store: Store, prompt: bool, limit: int, as_json: bool) -> None:
    """Where the run on this branch stands: the latest checkpoint, commits and
    memories since, decisions and rejections about the files the branch
    changed, and the next step. On a branch with no memory of its own yet, it
    says whose checkpoint it shows (inherits, note); when HEAD's history lacks
    the checkpoint's commit (a reset or rebase left it behind), it says so
    (off_head).

    JSON: {"branch", "head", "inherits", "checkpoint", "off_head", "commits_since": [{"commit", "subject"}],
    "memories_since", "changed_files", "relevant", "next", "note"?}.

    Example: gitmem resume --prompt
    """
    from ..checkpoint import render_resume, resume as build

    r = build(store, limit=limit)
    if as_json:
        emit_json(r.to_dict())
    else:
        echo(render_resume(r, prompt=prompt), nl=False)
