"""Sharing commands: push, fetch, pull, remote setup (thin layer over gitmem.remote)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Optional, Sequence, Tuple

import click

from ..text import plural
from .base import author_options, emit_json, json_option, main, open_store, pass_store

if TYPE_CHECKING:
    from ..store import Store


def _short(oid: Optional[str]) -> str:
    return oid[:10] if oid else "-"


def _branches(store: Store, branch: Tuple[str, ...], all_: bool) -> Optional[Sequence[str]]:
    from ..branches import set_aside_from
    from ..remote import local_branches

    if all_:  # memory set aside here is this clone's to keep apart: pushed only when named
        return sorted(b for b in local_branches(store.repo) if not set_aside_from(store.repo, b))
    return list(branch) or None


@main.command()
@click.argument("remote", required=False)
@click.option("--branch", "branch", multiple=True, metavar="B", help="Push the memory of branch B (repeatable).")
@click.option("--all", "all_", is_flag=True,
              help="Push every local memory branch (not memory set aside here, B.earlier-TIP: name it with --branch).")
@pass_store
@author_options
@json_option
def push(store: Store, remote, branch, all_, who, source, as_json) -> None:
    """Push memory to REMOTE (default: the branch's upstream remote, else origin).

    Sends refs/memory/<branch> to the same ref on the remote, never forced.
    If teammates pushed meanwhile, their memory is fetched and merged and the
    push is tried again; a merge conflict stops it for you to resolve
    (`gitmem conflicts`). Memory that looks like it holds a secret is refused.

    JSON: {"remote", "branches": [{"branch", "status", "commit", "merges", "attempts",
    "conflicts", "message", "taken"}]}; status is pushed, up-to-date, no-memory (nothing to push), conflict or
    rejected; taken counts the remote's memories that came in here on the way (added or changed). Exit code 1
    when a branch ends in conflict or rejected.

    Example: gitmem push origin --all
    """
    from ..errors import RemoteError, SecretFound
    from ..remote import default_remote, push as push_memory

    remote = remote or default_remote(store.repo, store.branch)
    try:
        results = push_memory(store, remote, _branches(store, branch, all_), author=who, source=source)
    except SecretFound as e:
        fetched = f"refs/memory-remotes/{remote}/{store.branch}"
        if all(where.startswith("the name ") for where, _ in e.findings):
            click.echo("gitmem: nothing was pushed. Memory goes out under its branch's name: rename the branch "
                       "(`git branch -m OLD NEW`, then `gitmem branch -m OLD NEW`) and push again", err=True)
        elif fetched in store.repo.references:
            click.echo("gitmem: nothing was pushed. Those commits stay in history even if the memory is retracted: "
                       f"move the memory ref back past them (e.g. `git update-ref {store.ref} {fetched}`, "
                       f"{remote}'s memory) and re-add what came after (see docs/remotes.md)", err=True)
        else:
            click.echo(f"gitmem: nothing was pushed. {remote} has none of this memory yet, so its whole history "
                       "would go, and the secrets stay in history even if the memory is retracted (a pull redacts "
                       "what arrives, not the history it came with): rotate them; only a rewrite of the "
                       "history removes them (see docs/remotes.md)", err=True)
        raise
    failed = [r for r in results if r.status in ("conflict", "rejected")]
    if as_json:
        emit_json({"remote": remote, "branches": [r.to_dict() for r in results]})
        if failed:
            raise SystemExit(1)
        return
    for r in results:
        merged = f", after merging {plural(r.merges, 'time')}" if r.merges else ""
        took = f", {plural(r.taken, 'memory')} of {remote}'s taken in here" if r.taken else ""
        click.echo(f"{r.branch}: {r.status} {_short(r.commit)}{merged}{took}" + (f" ({r.message})" if r.message else ""))
    if failed:
        raise RemoteError(f"{plural(len(failed), 'memory branch')} not pushed to {remote}: "
                          + "; ".join(f"{r.branch}: {r.message}" for r in failed))


def say_refused(refused) -> None:
    """One stderr line per thing the trust gate kept out (JSON has them under "refused")."""
    for r in refused:
        click.echo(f"gitmem: {r.line()}", err=True)


def fail_if_refused(refused) -> None:
    """Exit 1 once everything else is said when something was kept out (by the trust gate, or a merge refused
    over a pending conflict), as git fetch exits non-zero when a ref is rejected: a script must not take a
    partial fetch or merge for the whole."""
    if refused:
        raise SystemExit(1)


@main.command()
@click.argument("remote", required=False)
@click.option("--branch", "branch", multiple=True, metavar="B", help="Only the memory of branch B (repeatable).")
@json_option
@click.pass_context
def fetch(ctx, remote, branch, as_json) -> None:
    """Fetch REMOTE's memory into refs/memory-remotes/<remote>/ (local memory is untouched).

    Everything fetched passes the trust gate (docs/remotes.md): a bad ref name,
    objects git's strict checks refuse, or a history that is not gitmem's layout
    is kept out, with one line on stderr saying what and why (and exit 1); the rest arrives.

    JSON: {"remote", "branches": [{"branch", "ref", "old", "new"}], "refused": [{"what", "why", "remote"}]}.

    Example: gitmem fetch origin
    """
    from ..remote import fetch as fetch_memory

    store = open_store(ctx)
    result = fetch_memory(store.repo, remote, list(branch) or None)
    say_refused(result.refused)
    if as_json:
        emit_json(result.to_dict())
    else:
        for b in result.branches:
            change = f"new {_short(b.new)}" if not b.old else (f"deleted (was {_short(b.old)})" if not b.new else (
                f"up to date {_short(b.new)}" if b.old == b.new else f"{_short(b.old)}..{_short(b.new)}"))
            click.echo(f"{b.ref}: {change}")
        if not result.branches:
            click.echo(f"{result.remote} has no memory yet", err=True)
    fail_if_refused(result.refused)


@main.command()
@click.argument("remote", required=False)
@click.option("--branch", "branch", multiple=True, metavar="B", help="Only the memory of branch B (repeatable).")
@pass_store
@author_options
@json_option
def pull(store: Store, remote, branch, who, source, as_json) -> None:
    """Fetch REMOTE's memory and merge each branch into the local one.

    Fast-forwards where possible, otherwise writes a merge commit; clashing
    edits of one memory are kept for `gitmem conflicts`. A branch with no local
    memory yet starts at the remote's tip, unless it is a code branch here whose
    parent's memory (which it reads) holds more: then the two merge. On a fresh
    clone this is how the team's memory arrives.

    JSON: {"remote", "fetched": [{"branch", "ref", "old", "new"}], "merged": [{"branch", "kind",
    "commit", "added", "changed", "conflicts", "kept", "redacted"}]}; kind is new, up-to-date, fast-forward or
    merge; kept lists memories the remote's history deleted, which the merge kept; redacted counts the secrets
    the remote's memory held, redacted on arrival (its history still holds them: rotate them); "refused": [{"what", "why",
    "remote"}] is what the trust gate kept out (also one line each on stderr, and exit 1); "skipped": branches
    whose memory `gitmem prune` dropped or a new branch of that name set aside here, and whose remote memory,
    fetched by this pull, holds nothing newer (left fetched; `gitmem status` names them after); "renamed":
    {branch: name} for a branch whose memory was renamed to that name here (`gitmem branch -m`), whose remote
    memory, fetched by this pull, holds memory that name's lacks: never made a branch here again (on stderr, with
    the command that merges it into that name); "set_aside":
    {branch: name} where this clone's memory of an earlier branch was put because the remote's is a new branch
    of that name (not merged); a merged entry with "as_of" and "into" merged the branch's memory as of the
    commit "into" forked at, because "into" started before that memory arrived; "late": [{"branch", "parent",
    "fork", "as_of", "notice"}] such a branch whose parent's memory at the fork cannot be told (the notice names
    the command that brings it all); "blocked": [{"branch", "ref",
    "id", "why"}] branches not merged because they clash again on memory "id", whose conflict is pending, or (id
    "") whose memory is damaged, or whose ref git cannot keep beside a local branch's (`feature` and
    `feature/billing`) (also on stderr, and exit 1): "why" says what to do, then pull again.

    Example: gitmem pull
    """
    from ..remote import pull as pull_memory

    result = pull_memory(store, remote, list(branch) or None, author=who, source=source)
    say_refused(result.fetch.refused)
    if as_json:
        emit_json(result.to_dict())
    else:
        _say_pulled(result)
    fail_if_refused(result.fetch.refused or result.blocked)


def _say_pulled(result) -> None:
    from ..branches import aside_notice, blocked_notice, renamed_notice, skipped_notice
    from ..merge import arrival_notice

    for m in result.merged:
        counts = f" ({len(m['added'])} added, {len(m['changed'])} changed)" if m["kind"] != "up-to-date" else ""
        if m.get("as_of"):  # a branch that started before its parent's memory arrived (branches.take_late_parent)
            click.echo(f"{m['into']} started before {m['branch']}'s memory arrived: merged it as of "
                       f"{m['as_of'][:10]}, where {m['into']} forked: {m['kind']} {_short(m['commit'])}{counts}")
        else:
            click.echo(f"{m['branch']}: {m['kind']} {_short(m['commit'])}{counts}")
        if m["conflicts"]:
            click.echo(f"  {plural(len(m['conflicts']), 'conflict')}: see `gitmem conflicts`", err=True)
        if m.get("kept"):
            click.echo(f"  refused to delete {plural(len(m['kept']), 'memory')} the remote's history removed or made"
                       " unreadable: kept them (retract a memory to take it out of use)", err=True)
        if m.get("redacted"):
            click.echo(f"  {arrival_notice(m['redacted'])}", err=True)
    for name, aside in result.set_aside.items():
        click.echo(f"gitmem: {aside_notice(name, aside)}", err=True)
    for late in result.late:
        click.echo(f"gitmem: {late.notice()}", err=True)
    for b in result.blocked:
        click.echo(f"gitmem: {blocked_notice(b, 'gitmem pull')}", err=True)
    for name in result.skipped:
        click.echo(skipped_notice(name, result.fetch.remote), err=True)
    for name, heir in result.renamed.items():
        click.echo(renamed_notice(name, heir, result.fetch.remote, lacking=True), err=True)
    if not result.fetch.refused and not any(b.new for b in result.fetch.branches):
        click.echo(f"{result.fetch.remote} has no memory yet", err=True)


@main.group("remote")
def remote_group() -> None:
    """Configure how plain git commands share memory with a remote.

    Example: gitmem remote setup origin
    """


@remote_group.command("setup")
@click.argument("remote", required=False)
@click.option("--undo", is_flag=True, help="Remove what an earlier setup added.")
@json_option
@click.pass_context
def remote_setup(ctx, remote, undo, as_json) -> None:
    """Make plain `git fetch` / `git push` carry memory, and say exactly what changed.

    Adds to REMOTE (default origin) a fetch refspec into refs/memory-remotes/
    and a push refspec for refs/memory/* (memory set aside here is kept on
    refs/memory-aside/, which it does not send); and, when the remote had no
    push refspec, `HEAD`, because git ignores push.default once one exists.
    `--undo` removes exactly those values.

    A plain `git push` scans memory for secrets only through the pre-push hook: without it, setup warns.

    JSON: {"remote", "changes": [{"key", "value", "action", "why"}], "warnings"}; action is added, kept or removed.

    Example: gitmem remote setup origin
    """
    from ..hooks import status as hook_status
    from ..remote import carry_memory, default_remote

    store = open_store(ctx)
    remote = remote or default_remote(store.repo, store.branch)
    changes = carry_memory(store.repo, remote, undo=undo)
    warnings = []
    if not undo and not any(h.name == "pre-push" and h.state == "installed" for h in hook_status(store.repo)):
        warnings.append("the pre-push hook is not installed, so a plain `git push` now sends memory without the "
                        "secret scan `gitmem push` makes: run `gitmem hooks install`")
    if as_json:
        emit_json({"remote": remote, "changes": [c.to_dict() for c in changes], "warnings": warnings})
        return
    for c in changes:  # a line as git runs it: pasted into a shell, it makes the same change
        line = f"unchanged: {c.key} {shlex.quote(c.value)}" if c.action == "kept" else shlex.join(["git", *c.config_args()])
        click.echo(line + (f"  # {c.why}" if c.why else ""))
    if not changes:
        click.echo("nothing to change", err=True)
    for warning in warnings:
        click.echo(f"gitmem: warning: {warning}", err=True)
