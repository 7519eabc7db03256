"""Core commands: init, add, fact add, list, show, search, edit, supersede, retract, log, doctor, status."""

from __future__ import annotations

import time
from itertools import islice
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Optional

import click

from ..model import AUTHOR_KINDS, STATUSES, TYPES, Memory, source_matches
from ..text import plural
from .base import (REPO_PATH, UTF8_TEXT, author_options, echo, edit_in_editor, emit_json, emit_json_list, json_option, main,
                   note_backlog, pad, pass_store, read_text_argument)

if TYPE_CHECKING:
    from ..store import Store


def _short(oid: Optional[str]) -> str:
    return oid[:10] if oid else "-"


def memory_line(m: Memory, short: Optional[Dict[str, str]] = None, conflicts: Optional[Dict[str, Any]] = None) -> str:
    """One memory per line, led by its short id (``short``: Store.short_ids) or its full id; a memory
    in ``conflicts`` (:func:`gitmem.conflicts.pending`) is marked with the command that settles it."""
    flag = "" if m.status == "active" else f" [{m.status}]"
    extra = f"  (because: {m.reason})" if m.type == "rejection" and m.reason else ""
    from ..conflicts import marked

    return f"{(short or {}).get(m.id, m.id):<6} {m.type:<10} {m.summary}{extra}{flag}{marked(m.id, conflicts)}"


def write_json(store: Store, w) -> Dict[str, Any]:
    return {"id": w.memory.id, "commit": w.commit, "ref": store.ref, "redacted": w.redacted,
            "memory": w.memory.to_dict()}


def report_write(store: Store, w, verb: str, as_json: bool) -> None:
    if as_json:
        emit_json(write_json(store, w))
        return
    click.echo(f"{verb} {w.memory.type} {w.memory.id} on {store.ref} (commit {_short(w.commit)})")
    if w.redacted:
        click.echo(f"gitmem: redacted {plural(w.redacted, 'secret')} before storing", err=True)


def limit_option(default: Optional[int] = None):
    """``--limit N`` / ``-n N``: the same option, meaning "at most N", on every command that lists."""
    return click.option("--limit", "-n", "limit", type=click.IntRange(1), default=default, show_default=default is not None,
                        metavar="N", help="At most N results.")


def _add(store: Store, type_: str, text: str, title, because, tags, paths, who, source, as_json, **extra) -> None:
    text = read_text_argument(text)
    w = store.add(type_, text, title=title, reason=because, tags=tags, paths=paths,
                  author=who, source=source, **extra)
    if type_ == "file" and w.memory.blob is None:
        echo(f"gitmem: warning: {w.memory.paths[0]} is no file in this repository (a typo, a folder?): the summary "
             "is tied to no version of it, so it is never flagged stale", err=True)
    report_write(store, w, "Added", as_json)


def write_options(f):
    for option in reversed([
        click.option("--title", help="A one-line title (default: the text's first line)."),
        click.option("--because", "because", metavar="REASON",
                     help="Why: required for a rejection (why it was turned down), optional otherwise."),
        click.option("--tag", "tags", multiple=True, help="A tag (repeatable)."),
        click.option("--path", "paths", multiple=True, type=REPO_PATH, help="A repository path it concerns (repeatable)."),
    ]):
        f = option(f)
    return f


@main.command()
@click.option("--fetch", "fetch_", is_flag=True, help="Fetch and merge the remote's memory now (first use of a clone).")
@json_option
@pass_store
def init(store: Store, fetch_: bool, as_json: bool) -> None:
    """Check the repository and say where this branch's memory lives.

    Nothing is written until the first memory is added. On a clone whose remote
    has memory this clone lacks, says so; --fetch pulls it (as `gitmem pull`).

    JSON: {"repository", "branch", "ref", "tip", "inherits", "inherited_tip",
    "pulled": pull JSON or null, "remote_missing": [{"remote", "branch", "tip", "fetched"}]}.

    Example: gitmem init --fetch
    """
    from ..remote import missing_here, pull

    has_remotes = bool(list(store.repo.remotes.names()))
    pulled = pull(store, source="init").to_dict() if fetch_ and has_remotes else None
    missing = missing_here(store.repo)[0] if has_remotes else []
    branch, tip = store.read_from()
    data = {"repository": store.repo.workdir or store.repo.path, "branch": store.branch, "ref": store.ref,
            "tip": store.own_tip(), "inherits": branch if branch != store.branch else None,
            "inherited_tip": tip if branch != store.branch else None,
            "pulled": pulled, "remote_missing": missing}
    if as_json:
        emit_json(data)
        return
    click.echo(f"gitmem is ready in {data['repository']}")
    click.echo(f"memory of branch {store.branch!r} is stored on {store.ref}")
    if data["inherits"]:
        click.echo(f"until its first write it reads the memory of {branch!r} ({_short(tip)})")
    if pulled:
        for m in pulled.get("merged", []):
            click.echo(f"pulled memory of {m['branch']} from {pulled['remote']}: {m['kind']} {_short(m['commit'])}")
    for r in (pulled or {}).get("refused", []):  # what the trust gate kept out (docs/remotes.md)
        from ..trust import Refusal

        click.echo(f"gitmem: {Refusal(**r).line()}", err=True)
    for remote in dict.fromkeys(m["remote"] for m in missing):
        names = ", ".join(m["branch"] for m in missing if m["remote"] == remote)
        click.echo(f"{remote} has memory this clone lacks ({names}): get it with `gitmem pull {remote}`"
                   " (or `gitmem init --fetch`)")
    click.echo('add one with: gitmem add decision "..." --because "..."')


@main.command()
@click.argument("type_", metavar="TYPE", type=click.Choice(TYPES))
@click.argument("text")
@write_options
@click.option("--next", "next_", metavar="STEP", help="For a checkpoint: what comes next.")
@pass_store
@author_options
@json_option
def add(store: Store, type_: str, text: str, title, because, tags, paths, next_, who, source, as_json) -> None:
    """Add a memory of TYPE.

    \b
    Types: decision, rejection (needs --because), convention, fact, action,
    file (needs --path; tied to the file's current blob), checkpoint, note.
    TEXT `-` reads the text from stdin.

    JSON: {"id", "commit", "ref", "redacted", "memory"} (memory: the stored memory, as `gitmem show --json`).

    Example: gitmem add rejection "Use Redis for the job queue" --because "ops won't run another stateful service"
    """
    if next_ is not None and type_ != "checkpoint":
        raise click.UsageError(f"--next is a checkpoint's next step; a {type_} has none")
    _add(store, type_, text, title, because, tags, paths, who, source, as_json, next=next_)


@main.group()
def fact() -> None:
    """Shorthand for facts: `gitmem fact add TEXT`.

    Example: gitmem fact add "Refunds are idempotent on payment_intent id" --tag payments
    """


@fact.command("add")
@click.argument("text")
@write_options
@pass_store
@author_options
@json_option
def fact_add(store: Store, text: str, title, because, tags, paths, who, source, as_json) -> None:
    """Add a fact (same as `gitmem add fact TEXT`; TEXT `-` reads stdin).

    JSON: {"id", "commit", "ref", "redacted", "memory"} (memory: the stored memory, as `gitmem show --json`).

    Example: gitmem fact add "Refunds are idempotent on payment_intent id" --tag payments
    """
    _add(store, "fact", text, title, because, tags, paths, who, source, as_json)


def filter_options(f=None, *, path_help: str = "Only memories about this path (or a directory around it)."):
    if f is None:
        return lambda g: filter_options(g, path_help=path_help)
    for option in reversed([
        click.option("--type", "type_", type=click.Choice(TYPES), help="Only this type."),
        click.option("--tag", help="Only memories with this tag."),
        click.option("--path", type=REPO_PATH, help=path_help),
        click.option("--kind", "author_kind", type=click.Choice(AUTHOR_KINDS), help="Only agent or human writes."),
        click.option("--source", help="Only from this tool (cli, hook, mcp:cursor, ...)."),
        click.option("--status", type=click.Choice(STATUSES + ("any",)), default="active", show_default=True),
    ]):
        f = option(f)
    return f


@main.command("list")
@filter_options
@limit_option()
@click.option("--before", metavar="ID", help="Only memories older than ID (its id, short id or a prefix): with -n N, "
              "the next page of a newest-first listing is --before the first ID of the page before.")
@json_option
@pass_store
def list_(store: Store, type_, tag, path, author_kind, source, status, limit, before, as_json) -> None:
    """List memories of the branch, oldest first (with -n N: the newest N).

    The lines are printed as they are read, so a listing of the whole memory starts at once (`gitmem list |
    less`) and holds little of it at a time; so is --json.

    JSON: {"branch", "ref", "tip", "memories": [memory, ...]}; a memory in conflict after a merge also has
    "conflict": {"fields", "ours", "theirs", "note"} (as MCP get), and its line ends "(in conflict: gitmem
    resolve ID)".

    Example: gitmem list --type rejection --path src/payments

    Example: gitmem list -n 20 --before 4vhr   (the 20 memories before 4vhr)
    """
    cursor = store.get(before).id if before else None  # a short id or prefix, resolved as every ID argument is
    found = store.listing(type=type_, tag=tag, path=path, author_kind=author_kind, source=source,
                          status=None if status == "any" else status, limit=limit or None, before=cursor)
    from ..conflicts import pending, with_conflict

    tip = store.tip()
    conflicts = pending(store, tip) if tip else {}
    shown = 0
    if as_json:
        shown = emit_json_list({"branch": store.branch, "ref": store.ref, "tip": tip}, "memories",
                               (with_conflict(m.to_dict(), m.id, conflicts) for m in found))
    else:
        for page in _pages(found):
            short = store.short_ids(of=[m.id for m in page])
            for m in page:
                echo(memory_line(m, short, conflicts))
            shown += len(page)
    for problem in store.problems:  # a full load's, known once it is read
        echo(f"gitmem: warning: skipped {problem.where}: {problem.message}", err=True)
    if not shown and not as_json:
        click.echo("no memories match", err=True)


def _pages(memories: Iterable[Memory], size: int = 256) -> Iterator[List[Memory]]:
    """``memories`` a few at a time: each page's short ids are read together, and printed before the next is read."""
    it = iter(memories)
    while page := list(islice(it, size)):
        yield page


@main.command()
@click.argument("memory_id", metavar="ID")
@json_option
@pass_store
def show(store: Store, memory_id: str, as_json: bool) -> None:
    """Show one memory as stored (YAML). ID is the full id or the short id
    `gitmem list` prints (or a unique prefix); case does not matter.

    A memory in conflict after a merge holds one side only until `gitmem resolve`: the YAML ends with a
    comment "# (in conflict: gitmem resolve ID)" naming the clashing fields. A retracted memory's ends with
    "# retracted by WHO on WHEN: REASON", read from the commit that retracted it.

    JSON: the memory, the YAML document as a JSON object; in conflict, also "conflict": {"fields", "ours",
    "theirs", "note"} (as MCP get); retracted, also "retraction": {"commit", "time", "author", "reason"} (as a
    `gitmem log` entry's; null when no retract commit changed it).

    Example: gitmem show 4vhr
    """
    from ..conflicts import marker, pending, with_conflict
    from ..model import dump_yaml

    m = store.get(memory_id)
    conflicts = pending(store)
    retracted = None
    if m.status == "retracted":
        from ..audit import retraction

        retracted = retraction(store, m.id)
    if as_json:
        out = with_conflict(m.to_dict(), m.id, conflicts)
        if m.status == "retracted":
            out["retraction"] = None if retracted is None else {
                k: v for k, v in retracted.to_dict().items() if k in ("commit", "time", "author", "reason")}
        emit_json(out)
        return
    echo(dump_yaml(m).decode("utf-8"), nl=False)
    if retracted is not None:
        because = f": {retracted.reason}".replace("\n", "\n#   ") if retracted.reason else " (no reason given)"
        echo(f"# retracted by {retracted.author.name} <{retracted.author.email}> on {_when(retracted.time)}{because}")
    c = conflicts.get(m.id)
    if c is not None:
        echo(f"# {marker(m.id)}: {', '.join(c.fields)} shows one side only until a person chooses "
             f"(gitmem conflicts shows both)")


@main.command()
@click.argument("query", type=UTF8_TEXT)
@limit_option(10)
@filter_options(path_help="Rank memories about this path (or a directory around it) higher: a file in play, "
                "not a filter (use `gitmem list --path` for only those).")
@json_option
@pass_store
def search(store: Store, query: str, limit: int, type_, tag, path, author_kind, source, status, as_json) -> None:
    """Ranked search over the branch's memory (the ranking MCP recall uses):
    words, then files in play (--path), then recency. Stale file memories are marked.

    Words and meaning both count when a sentence encoder is installed (hybrid recall; the JSON's
    "recall" says which ran), else words alone. A memory's meaning is embedded once (about 65 ms of a
    core): when the memories still waiting would take over 4 s of CPU (about 50: a fresh clone, a large
    pull), or while a background process embeds them, the search answers by words at once, says so on
    stderr and leaves them to the background; `gitmem embed` embeds them now.

    JSON: {"query", "ref", "recall", "hits": [{"score", "match", "similarity"?, "stale"?, "memory"}]}; a memory
    in conflict after a merge also has "conflict": {"fields", "ours", "theirs", "note"} (as MCP get), and its
    line ends "(in conflict: gitmem resolve ID)".

    Example: gitmem search "job queue redis"
    """
    from ..backlog import allowance
    from ..recall import PERSON_BUDGET, find, mode

    if not query.strip():
        raise click.UsageError("QUERY is empty: give words to search for (or use `gitmem list`)")
    hits = find(store, query, limit, filters={"type": type_, "tag": tag, "author_kind": author_kind, "source": source},
                paths=[path] if path else [], status=None if status == "any" else status,
                budget=allowance(store, PERSON_BUDGET))
    note_backlog(store)
    from ..conflicts import pending, with_conflict

    conflicts = pending(store) if hits else {}
    if as_json:
        out = [h.to_dict() for h in hits]
        for hit in out:
            with_conflict(hit["memory"], hit["memory"]["id"], conflicts)
        emit_json({"query": query, "ref": store.ref, "recall": mode(store), "hits": out})
        return
    short = store.short_ids(of=[h.memory.id for h in hits])
    for h in hits:
        echo(f"{h.score:6.2f}  {memory_line(h.memory, short, conflicts)}{'  [stale: file changed]' if h.stale else ''}")
    if not hits:
        from ..search import tokenize

        click.echo("no matches" if tokenize(query) else  # say why, rather than let it read as "no such memory"
                   "no matches: nothing in the query is searched for (only common words, symbols or emoji)", err=True)


@main.command()
@json_option
@pass_store
def embed(store: Store, as_json: bool) -> None:
    """Embed every memory that has no vector yet, now, in the foreground (a progress line on a terminal).

    `gitmem search` and `check` embed at most 50 waiting memories before they answer, and leave more (a
    fresh clone, a large pull) to a background process at the lowest CPU priority; this waits for all of it
    (CI: a clone whose first search is by meaning). A background embedding already running is waited for,
    then whatever it left is embedded: the same vectors are never computed twice at once. Exit 1 when no
    sentence encoder is installed.

    JSON: {"ref", "recall", "computed", "waited", "seconds"} (computed: vectors this command computed;
    waited: it first waited for a background embedding).

    Example: gitmem embed
    """
    import time

    from ..backlog import embed as embed_backlog
    from ..errors import GitmemError
    from ..recall import mode

    if mode().startswith("lexical"):
        raise GitmemError(f"nothing to embed with: recall is {mode()}")
    waited = []

    def waiting() -> None:
        waited.append(True)
        click.echo("gitmem: a background process is embedding this memory; waiting for it to finish", err=True)

    started = time.monotonic()
    computed = embed_backlog(store, waiting) or 0
    seconds = round(time.monotonic() - started, 1)
    if as_json:
        emit_json({"ref": store.ref, "recall": mode(store), "computed": computed, "waited": bool(waited),
                   "seconds": seconds})
    elif computed:
        click.echo(f"computed {computed:,} vectors for semantic recall in {seconds} s")
    else:
        click.echo("every memory has its vectors: nothing to compute")


_EDITABLE = ("text", "title", "reason", "tags", "paths", "next")


@main.command()
@click.argument("memory_id", metavar="ID")
@click.option("--text", help="New text ('-': read it from stdin).")
@click.option("--title", help="New title.")
@click.option("--because", "reason", metavar="REASON", help="New reason.")
@click.option("--tag", "tags", multiple=True, help="Replace the tags (repeatable).")
@click.option("--path", "paths", multiple=True, type=REPO_PATH, help="Replace the paths (repeatable).")
@click.option("--next", "next_", metavar="STEP", help="New next step (checkpoints).")
@pass_store
@author_options
@json_option
def edit(store: Store, memory_id, text, title, reason, tags, paths, next_, who, source, as_json) -> None:
    """Edit a memory in place (one commit). With no field options, opens $EDITOR.

    JSON: {"id", "commit", "ref", "redacted", "memory"} (memory: the stored memory, as `gitmem show --json`).

    Example: gitmem edit 4vhr --text "Use advisory locks, not SELECT ... FOR UPDATE"
    """
    changes: Dict[str, Any] = {k: v for k, v in
                               (("text", text if text is None else read_text_argument(text)), ("title", title),
                                ("reason", reason), ("next", next_))
                               if v is not None}
    if tags:
        changes["tags"] = tags
    if paths:
        changes["paths"] = paths
    opened = None
    if not changes:
        opened = store.get(memory_id)
        changes = _edit_in_editor(opened)
    w = store.edit(memory_id, author=who, source=source, opened=opened, **changes)
    report_write(store, w, "Edited", as_json)


def _edit_in_editor(m: Memory) -> Dict[str, Any]:
    current = {k: v for k, v in m.to_dict().items() if k in _EDITABLE}
    header = f"# Editing {m.type} {m.id}. Fields: {', '.join(_EDITABLE)}. Save and quit to commit.\n"
    data = edit_in_editor(header, current, _EDITABLE)
    return {k: v for k, v in data.items() if current.get(k) != v}


@main.command()
@click.argument("memory_id", metavar="ID")
@click.argument("text")
@click.option("--title", help='Title of the new memory (default: keep the old one; --title "" clears it).')
@click.option("--because", "reason", metavar="REASON",
              help='Reason of the new memory (default: keep the old one; --because "" clears it).')
@pass_store
@author_options
@json_option
def supersede(store: Store, memory_id, text, title, reason, who, source, as_json) -> None:
    """Replace a memory with a new one (the old one is kept, marked superseded). TEXT '-' reads stdin.

    JSON: {"id", "commit", "ref", "redacted", "memory"} (memory: the stored memory, as `gitmem show --json`).

    Example: gitmem supersede 4vhr "Queue jobs in Postgres with SKIP LOCKED"
    """
    w = store.supersede(memory_id, read_text_argument(text), title=title, reason=reason, author=who, source=source)
    report_write(store, w, f"Superseded {memory_id} with", as_json)


@main.command()
@click.argument("memory_id", metavar="ID")
@click.option("--because", "reason", metavar="REASON",
              help="Why it no longer holds (kept in its commit; `gitmem show` and `gitmem log` print it).")
@pass_store
@author_options
@json_option
def retract(store: Store, memory_id, reason, who, source, as_json) -> None:
    """Retract a memory: it leaves lists and context but stays in history.

    JSON: {"id", "commit", "ref", "redacted", "memory"} (memory: the stored memory, as `gitmem show --json`).

    Example: gitmem retract 4vhr --because "we moved off Heroku"
    """
    w = store.retract(memory_id, reason=reason, author=who, source=source)
    report_write(store, w, "Retracted", as_json)


@main.command()
@limit_option()
@click.option("--id", "memory_id", metavar="ID", help="Only the history of this memory.")
@click.option("--type", "type_", type=click.Choice(TYPES), help="Only writes to memories of this type.")
@click.option("--since", metavar="WHEN", help="Only writes since WHEN: a date (2026-12-01) or an age (3d, 2 hours ago).")
@click.option("--kind", "author_kind", type=click.Choice(AUTHOR_KINDS), help="Only agent or human writes.")
@click.option("--source", help="Only writes from this tool or its family (mcp matches mcp:cursor).")
@click.option("--author", help="Only writes whose author name or email contains this.")
@json_option
@pass_store
def log(store: Store, limit, memory_id, type_, since, author_kind, source, author, as_json) -> None:
    """The audit trail: who wrote what, when, from which tool (newest first).

    A retraction's line ends with its reason: "(because: REASON)".

    JSON: {"ref", "entries": [{"commit", "time", "author": {name, email, kind}, "source", "op",
    "memory_ids", "type", "summary", "parents", "reason"}]} (reason: a retraction's --because, else null).

    Example: gitmem log --kind agent --since 2d -n 20
    """
    from ..model import parse_since

    try:
        after = parse_since(since, time.time()) if since else None
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--since") from None
    changes = store.history(memory_id) if memory_id else store.log()
    selected: List[Any] = []
    for c in changes:
        if after is not None and c.time < after:
            continue
        if type_ and c.type != type_:
            continue
        if author_kind and c.author.kind != author_kind:
            continue
        if not source_matches(c.source, source):
            continue
        if author and author.lower() not in f"{c.author.name} {c.author.email}".lower():
            continue
        selected.append(c)
        if limit and len(selected) >= limit:
            break
    if as_json:
        emit_json({"ref": store.ref, "entries": [c.to_dict() for c in selected]})
        return
    # the forms `gitmem list` prints, read for the ids shown (a memory gone from the tip keeps its full id)
    short = store.short_ids(of=list(dict.fromkeys(c.memory_ids[0] for c in selected if c.memory_ids)))
    for c in selected:
        ids = ",".join(short.get(i, i) for i in c.memory_ids[:1]) + ("+" if len(c.memory_ids) > 1 else "")
        because = f"  (because: {' / '.join(c.reason.splitlines())})" if c.reason else ""
        echo(f"{c.commit[:10]} {_when(c.time)} {c.author.kind:<5} {pad(c.author.name, 16)} {c.source:<12} "
             f"{ids or '-':<6} {c.summary}{because}")


def _when(seconds: int) -> str:
    """A commit's time as `log` and `show` print it: UTC, and says so (a team spans zones)."""
    return time.strftime("%Y-%m-%d %H:%MZ", time.gmtime(seconds))


@main.command()
@click.option("--fix", is_flag=True,
              help="Remove the ref's lock file if it is stale (no process holds it, older than 5 s); on a branch "
                   "without memory of its own, the lock of the parent's ref it reads too.")
@click.option("--recover", is_flag=True,
              help="If objects are missing or corrupt, move the ref back to the last intact tip in its "
                   "reflog, re-adding every memory that can still be read (on a branch without memory of its "
                   "own, the parent's ref it reads).")
@click.option("--drop-invalid", is_flag=True,
              help="Remove, in one commit, the blobs that are not valid memories and whatever is outside "
                   "gitmem's folders (they stay in history); on a branch without memory of its own, from the "
                   "parent's ref it reads.")
@click.option("--full", is_flag=True,
              help="Read the whole history again, not only what came after the last sound check.")
@click.option("--remotes", "ask_remotes", is_flag=True,
              help="Also ask each git remote (over the network) for memory this clone lacks.")
@click.option("--offline", is_flag=True, hidden=True, help="The default: the remotes are not asked.")
@json_option
@pass_store
def doctor(store: Store, fix: bool, recover: bool, drop_invalid: bool, full: bool, ask_remotes: bool, offline: bool,
           as_json: bool) -> None:
    """Validate the memory ref, its history and every blob; report, never crash.

    Reads every object reachable from the ref, once: later runs start from the last commit a
    doctor found sound (kept in .git/gitmem/) and read only what came after it; --full reads
    everything again. Nothing is changed without
    --fix, --recover or --drop-invalid. No network unless --remotes: then it also asks each
    git remote for memory this clone lacks. Exit code 1 when an error remains.

    JSON: {"ref", "checked" (the ref checked and repaired: on a branch without memory of its own, the
    parent's it reads), "ok", "problems": [{"level", "where", "message"}], "fixed": [lock, ...],
    "recovered": {"ref", "damaged", "good", "tip", "kept", "lost"} or null, "dropped": [path, ...]}.

    Example: gitmem doctor --fix
    """
    from ..doctor import checked, doctor as check, drop_invalid as drop, recover as recover_ref
    from ..refs import clear_stale_lock, lock_file
    from ..remote import doctor_problems

    if ask_remotes and offline:  # before --fix, --recover or --drop-invalid change anything
        raise click.UsageError("--remotes and --offline contradict each other: give one")
    repaired = checked(store).ref  # a branch without memory of its own: the parent's it reads, as doctor checks
    whose = "" if repaired == store.ref else f", whose memory {store.branch} reads,"
    recovered = None
    fixed = {ref: clear_stale_lock(store.repo, ref) for ref in dict.fromkeys((store.ref, repaired))
             if fix and lock_file(store.repo, ref) is not None}  # doctor reports both refs' locks
    if recover:
        recovered = recover_ref(store)
    dropped = drop(store) if drop_invalid else []
    problems = check(store, full=full) + (doctor_problems(store.repo) if ask_remotes else [])
    errors = [p for p in problems if p.level == "error"]
    if as_json:
        emit_json({"ref": store.ref, "checked": repaired, "ok": not errors, "problems": [p.to_dict() for p in problems],
                   "fixed": [lock.to_dict() for lock in fixed.values()],
                   "recovered": recovered.to_dict() if recovered else None, "dropped": dropped})
    else:
        for ref, lock in fixed.items():
            click.echo(f"removed stale lock {lock.path} ({lock.age:.0f}s old)" +
                       (f": {ref}'s{whose[:-1]}" if ref != store.ref else ""))
        if recovered:
            click.echo(f"moved {recovered.ref}{whose} back from damaged {_short(recovered.damaged)} to intact "
                       f"{_short(recovered.good)}; kept {plural(len(recovered.kept), 'later memory')}"
                       f" (now {_short(recovered.tip)})")
            for path in recovered.lost:
                click.echo(f"lost (unreadable): {path}")
        for path in dropped:
            echo(f"dropped (not a valid memory, kept in history) from {repaired}{whose[:-1]}: {path}")
        for p in problems:
            echo(f"{p.level}: {p.where}: {p.message}")
        verdict = plural(len(errors), "error") if errors else "ok"
        if len(problems) > len(errors):  # a bare "ok" under a warning read as if there were none
            verdict += f"{', ' if errors else ', with '}{plural(len(problems) - len(errors), 'warning')}"
        click.echo(f"{repaired}{whose[:-1]}: {verdict}")
    if errors:
        raise SystemExit(1)


@main.command()
@json_option
@pass_store
def status(store: Store, as_json: bool) -> None:
    """Where memory is read from and written to, and what it holds.

    JSON: {"branch", "ref", "own_tip", "reads", "tip", "counts": {type: active memories}, "notice",
    "conflicts": [id], "remotes": [{"branch", "remote", "local", "fetched", "ahead", "behind", "skipped", "aside",
    "aside_merged", "new_branch", "renamed_to", "unfetched", "reads"}] (reads: for a branch without memory of
    its own here, the branch whose memory it reads, which behind counts against; unfetched: fetched is null
    because this clone holds no copy of that remote's memory at all, not because the remote lacks it: a push
    sends it or finds it there; skipped: a pull does not take that copy, the branch's memory was dropped, set
    aside or renamed here; renamed_to: null, or the name the branch's memory was renamed to here
    (`gitmem branch -m`), which a pull never makes again: behind counts what that name's memory lacks of the copy;
    aside: null, or for memory set aside here, BRANCH.earlier-TIP, the branch whose earlier memory it holds, kept in
    this clone and not pushed; aside_merged: BRANCH's memory holds all of it, `gitmem prune --yes` drops it;
    new_branch: the copy is a new branch's memory of that name, which set the earlier one's aside: a
    pull sets this clone's aside too and takes the copy), "set_aside": [{"branch", "aside", "aside_merged"}] (every
    memory set aside here, remote or none, as in remotes),
    "late_parent":
    null or {"branch", "parent", "fork", "as_of", "notice"}} (late_parent: this branch's memory started before its
    parent's arrived here, and lacks what the parent's held at the fork; the notice names the command), "dropped": null
    or a notice: memory gitmem wrote on this ref that a move it did not make (a forced `git fetch`) took away, with
    the `gitmem merge` that brings it back, "shallow": null or the commit a shallow fetch (`git fetch --depth`) cut
    the history of the memory read here (or of a remote's copy of it) at, whose parents `gitmem fetch` brings.

    Example: gitmem status
    """
    branch, tip = store.read_from()
    counts: Dict[str, int] = {}
    for key, n in store.summary()["counts"].items():  # kept per tree: costs what changed since the last command
        kind, _, state = key.partition("/")
        if state == "active":
            counts[kind] = counts.get(kind, 0) + n
    data: Dict[str, Any] = {"branch": store.branch, "ref": store.ref, "own_tip": store.own_tip(), "reads": branch,
            "tip": tip, "counts": counts, "notice": store.notice}
    from ..conflicts import pending
    from ..gitdir import has_no_remotes

    data["late_parent"] = None
    if data["own_tip"] and store.config(f"gitmem.branch.{store.branch}.startedWithout"):  # else nothing to read
        from ..branches import late_parent

        late = late_parent(store.repo, store.branch)
        data["late_parent"] = late.to_dict() if late else None
    data["dropped"] = store.dropped() if data["own_tip"] else None
    data["conflicts"] = list(pending(store, tip))  # the merge machinery loads only when there are some
    remotes = store.git is None or not has_no_remotes(store.git)
    if remotes:
        from ..remote import divergence

        data["remotes"] = [d.to_dict() for d in divergence(store.repo)]
    else:
        data["remotes"] = []  # known without loading libgit2
    from ..gitdir import may_hold_aside

    if store.git is None or may_hold_aside(store.git):
        from ..branches import kept_aside

        data["set_aside"] = [a.to_dict() for a in kept_aside(store.repo)]
    else:
        data["set_aside"] = []  # known without loading libgit2
    from ..gitdir import may_be_shallow

    data["shallow"] = None
    if tip and (store.git is None or may_be_shallow(store.git)):  # else known without loading libgit2
        from ..merge import shallow_cut

        copies = [d["fetched"] for d in data["remotes"] if d["branch"] == branch and d["fetched"]]  # merged with it
        data["shallow"] = shallow_cut(store.repo, [tip, *copies], None, memory_shaped=True)
    if as_json:
        emit_json(data)
        return
    click.echo(f"branch {store.branch}: memory {store.ref} at {_short(store.own_tip())}")
    if branch and branch != store.branch:
        click.echo(f"  no memory of its own yet: reading {branch!r} at {_short(tip)}")
    from ..gitdir import may_be_renamed

    if store.git is None or may_be_renamed(store.git, store.branch):  # renamed by git, the memory left behind
        from ..branches import carry_over, renamed_from

        old = renamed_from(store.repo, store.branch)
        if old:
            click.echo(f"  renamed from {old!r}, whose memory stayed behind: `{carry_over(store.repo, old, store.branch)}`")
    if data["late_parent"]:
        click.echo(f"  {data['late_parent']['notice']}")
    if data["dropped"]:
        click.echo(f"  {data['dropped']}")
    if data["shallow"]:  # else only a diff or merge says so, refusing
        from ..merge import shallow_notice

        click.echo(f"  {shallow_notice(data['shallow'])}")
    empty = "no memories"
    if not data["own_tip"] and remotes:
        empty += " here yet (`gitmem pull` brings a remote's, if it has any)"  # a new clone's first status
    click.echo("  " + (", ".join(plural(n, t) for t, n in sorted(counts.items())) or empty))
    if data["conflicts"]:
        click.echo(f"  {plural(len(data['conflicts']), 'unresolved memory conflict')}: see `gitmem conflicts`")
    # pushed by name to every remote: compared with their copies below
    shared = {d["branch"] for d in data["remotes"] if d["fetched"]} - {d["branch"] for d in data["remotes"] if not d["fetched"]}
    for a in data["set_aside"]:
        if a["branch"] not in shared:
            click.echo(f"  memory {a['branch']}: your memory of the earlier {a['aside']!r}, set aside here, is all in "
                       f"{a['aside']}'s memory: `gitmem prune --yes` drops it" if a["aside_merged"] else
                       f"  memory {a['branch']}: your memory of the earlier {a['aside']!r}, set aside here and kept in "
                       f"this clone, not pushed: `gitmem merge {a['branch']}` brings it in, `gitmem prune` drops it")
    for d in data["remotes"]:
        if d["aside"] and d["fetched"] is None:  # this clone's to keep apart, named above: no push to suggest
            continue
        if d["fetched"] is None and d["unfetched"]:  # memory fetched with plain git records no copy
            click.echo(f"  memory {d['branch']}: not known to be on {d['remote']} (no copy of {d['remote']}'s "
                       f"memory here): `gitmem push {d['remote']} --branch {d['branch']}` sends it, or finds it there")
            continue
        if d["fetched"] is None:  # "N ahead" would count its whole history, as if the remote were behind it
            click.echo(f"  memory {d['branch']}: not on {d['remote']} (as of the last fetch or push): "
                       f"`gitmem push {d['remote']} --branch {d['branch']}`")
            continue
        if d["renamed_to"]:  # renamed here: not made again, whatever it holds
            from ..branches import renamed_notice

            click.echo(f"  memory {renamed_notice(d['branch'], d['renamed_to'], d['remote'], lacking=d['behind'] > 0)}")
            continue
        if d["skipped"]:  # "N behind" would promise what a pull does not take
            from ..branches import skipped_notice

            click.echo(f"  memory {skipped_notice(d['branch'], d['remote'])}")
            continue
        if d["new_branch"]:  # "N ahead, M behind" would promise a merge of the two
            from ..branches import new_branch_notice

            click.echo(f"  memory {new_branch_notice(d['branch'], d['remote'])}")
            continue
        if d["local"] is None:  # "0 ahead, 1 behind" of memory it does not have
            reading, lacks = (f", reading {d['reads']}'s", f" {d['reads']}'s lacks") if d["reads"] else ("", "")
            click.echo(f"  memory {d['branch']}: no memory of its own here yet{reading}" +
                       (f"; {d['remote']}'s holds {plural(d['behind'], 'commit')}{lacks}: `gitmem pull` takes it"
                        if d["behind"] else f", which holds all of {d['remote']}'s"))
            continue
        click.echo(f"  memory {d['branch']} vs {d['remote']}: {d['ahead']} ahead, {d['behind']} behind"
                   " (as of the last fetch or push)")


