"""The pages of the web UI, rendered from plain data with escaping (see :mod:`gitmem.web.html`).

Each function takes what the route gathered from the library and returns HTML;
nothing here reads git or the store.
"""

from __future__ import annotations

import time
from typing import Any, Dict, Mapping, Optional, Sequence

from ..model import AUTHOR_KINDS, MAX_TEXT_BYTES, MAX_TITLE_CHARS, STATUSES, TYPES, Memory, version
from ..policy import FIXED
from ..repo import memory_ref
from ..text import plural
from .html import Safe, h, join, options, typed, url

NAV = (("memory", "/memory", "Memory"), ("audit", "/audit", "Audit trail"),
       ("branches", "/branches", "Branches"), ("cost", "/cost", "Cost"))


def when(seconds: Optional[float]) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds)) if seconds else "-"


def short(oid: Optional[str]) -> str:
    return oid[:10] if oid else "-"


def layout(title: str, active: str, body: Safe, *, repo: str, branch: Optional[str] = None,
           flash: Optional[str] = None, error: Optional[str] = None) -> Safe:
    nav = join(h('<a href="{}"{}>{}</a>', url(href, branch=branch if key == "memory" else None),
                 Safe(' class="active" aria-current="page"' if key == active else ""), label)
               for key, href, label in NAV)
    notes = join([h('<p class="flash" role="status">{}</p>', flash) if flash else "",
                  h('<p class="error" role="alert">{}</p>', error) if error else ""])
    return h("""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} - gitmem</title><link rel="stylesheet" href="/static/style.css"></head>
<body><header><span class="brand">gitmem</span><nav>{nav}</nav><span class="repo">{repo}</span></header>
<main><h1>{title}</h1>{notes}{body}</main></body></html>
""", title=title, nav=nav, repo=repo, notes=notes, body=body)


def signer_line(who: Any) -> Safe:
    """Who a form's write is recorded as (an :class:`~gitmem.model.Author`, kind human), or the message (a str)
    saying why none can be yet."""
    if isinstance(who, str):
        return h('<span class="error">nobody yet: {}</span>', who)
    return author_line(who.name, who.email, "human")


def csrf_field(token: str) -> Safe:
    return h('<input type="hidden" name="csrf" value="{}">', token)


def author_line(name: str, email: str, kind: str) -> Safe:
    return h('<span class="who">{}{}</span> <span class="kind kind-{}">{}</span>',
             name, f" <{email}>" if email else "", kind, kind)


# --- memory ----------------------------------------------------------------------


def memory_card(m: Memory, branch: str, *, stale: bool, score: Optional[float] = None,
                conflict: Any = None) -> Safe:
    flags = []
    if m.status != "active":
        flags.append(h('<span class="badge status">{}</span>', m.status))
    if conflict is not None:  # a merge left it holding one side for now: the branches page holds both
        flags.append(h('<a class="badge conflict" href="{}" title="a merge found a clash in {}: this shows one '
                       'side only until a person chooses (or gitmem resolve {})">in conflict: resolve</a>',
                       url("/branches") + f"#conflict-{m.id}", ", ".join(conflict.fields), m.id))
    if stale:
        flags.append(Safe('<span class="badge stale" title="the file changed since this summary was written">'
                          'stale: file changed</span>'))
    if score is not None:
        flags.append(h('<span class="score">score {:.2f}</span>', score))
    reason = ""
    if m.reason:
        label = "Rejected because" if m.type == "rejection" else "Because"
        reason = h('<p class="reason reason-{}"><strong>{}:</strong> {}</p>', m.type, label, m.reason)
    meta = [h('<a href="{}"><code>{}</code></a>', url(f"/memory/{m.id}", branch=branch), m.id),
            author_line(m.author.name, m.author.email, m.author.kind),
            h('<span class="source">via {}</span>', m.source), h("<time>{}</time>", m.created)]
    tags = join(h('<a class="tag" href="{}">#{}</a>', url("/memory", branch=branch, tag=t), t) for t in m.tags)
    paths = join(h('<a class="path" href="{}"><code>{}</code></a>', url("/memory", branch=branch, path=p), p)
                 for p in m.paths)
    return h("""<article class="memory type-{type}{dim}" data-id="{id}">
<div class="head"><span class="badge type">{type}</span> <a class="title" href="{href}">{summary}</a> {flags}</div>
{reason}{text}<div class="meta">{meta} {tags} {paths}</div></article>
""", type=m.type, dim=" inactive" if m.status != "active" else "", id=m.id, href=url(f"/memory/{m.id}", branch=branch),
             summary=m.summary, flags=join(flags, " "), reason=reason,
             text="" if m.title is None and m.text.strip() == m.summary else h('<div class="text">{}</div>', m.text),
             meta=join(meta, " · "),
             tags=tags, paths=paths)


def memory_page(*, repo: str, branch: str, branches: Sequence[str], read_from: Optional[str], tip: Optional[str],
                filters: Mapping[str, str], items: Sequence[Any], listed: Any, number: int, more: bool, per_page: int,
                last_page: int, stale_ids: set,
                csrf: str, key: str, who: Any, form: Mapping[str, str], flash: Optional[str] = None,
                error: Optional[str] = None, problems: Sequence[Any] = (),
                conflicts: Optional[Mapping[str, Any]] = None, by_words: Optional[int] = None) -> Safe:
    """``by_words``: a search ranked by words alone, as that many memories still wait for their vectors."""
    conflicts = conflicts or {}
    f = filters
    switcher = h("""<form class="switcher" method="get" action="/memory">
<label>Branch <select name="branch">{opts}</select></label> <button type="submit">Switch</button></form>""",
                 opts=options(branches, branch))
    if tip is None:
        where = h('<p class="note">No memory on <code>{}</code> yet: the first memory added here starts it.</p>',
                  branch)
    elif read_from != branch:
        where = h('<p class="note">Branch <code>{}</code> has no memory of its own yet: showing what it inherits '
                  'from <code>{}</code> (tip <code>{}</code>). The first write forks it.</p>', branch, read_from,
                  short(tip))
    else:
        where = h('<p class="note">Memory of <code>{}</code> on <code>{}</code>, tip <code>{}</code>.'
                  '</p>', branch, memory_ref(branch), short(tip))
    filter_form = h("""<form class="filters" method="get" action="/memory">
<input type="hidden" name="branch" value="{branch}">
<label>Search <input type="search" name="q" value="{q}" placeholder="words, as gitmem search ranks them"></label>
<label>Type <select name="type">{types}</select></label>
<label>Tag <input name="tag" value="{tag}" size="10"></label>
<label>Path <input name="path" value="{path}" size="14"></label>
<label>Author <select name="author_kind">{kinds}</select></label>
<label>Source <input name="source" value="{source}" size="8" placeholder="cli, mcp..."></label>
<label>Status <select name="status">{statuses}</select></label>
<button type="submit">Filter</button> <a href="{clear}">clear</a></form>""",
                    branch=branch, types=options(TYPES, f.get("type"), "any"),
                    **{k: typed(f.get(k, "")) for k in ("q", "tag", "path", "source")},
                    kinds=options(AUTHOR_KINDS, f.get("author_kind"), "any"),
                    statuses=options([("active", "active"), ("all", "all")] + [(s, s) for s in STATUSES[1:]],
                                     f.get("status") or "active"),
                    clear=url("/memory", branch=branch))
    params = {"branch": branch, **{k: v for k, v in f.items() if v}}  # what the pager's links carry on
    if listed is None:  # a search: pages of the ranking
        cards = [memory_card(hit.memory, branch, stale=hit.stale, score=hit.score,
                             conflict=conflicts.get(hit.memory.id)) for hit in items]
        start, end = (number - 1) * per_page + 1, (number - 1) * per_page + len(items)
        which = h("{} best match(es)", end) if number == 1 and not more else \
            h("The best matches {}-{}{}", start, end, "" if more else f" of {end}") if items else "No more matches"
        deepest = more and number >= last_page
        # While vectors are computed in the background the page ranks by words, which `gitmem search` does not
        ranked = h("by words only: {} wait for vectors, embedded in the background", plural(by_words, "memory")) \
            if by_words else Safe("ranked as <code>gitmem search</code> does")
        count = h('<p class="count">{} for <q>{}</q>, {}{}.</p>', which, typed(f.get("q", "")), ranked,
                  "; a search pages no further: add words or a filter for the others" if deepest else "")
        nav = pager(url("/memory", **params, page=number - 1) if number > 1 else None,
                    url("/memory", **params, page=number + 1) if more and not deepest else None,
                    h("<span>page {}</span>", number),
                    labels=("better matches", "more matches"))
    else:
        cards = [memory_card(m, branch, stale=m.id in stale_ids, conflict=conflicts.get(m.id)) for m in items]
        count = h('<p class="count">{}</p>', listed_count(listed))
        nav = pager(url("/memory", **params, after=listed.newer) if listed.newer else None,
                    url("/memory", **params, before=listed.older) if listed.older else None,
                    first=url("/memory", **params) if listed.newer else None) \
            if listed.newer or listed.older else Safe("")
    listing = join(cards) if cards else Safe('<p class="empty">Nothing matches.</p>')
    skipped = join(h('<li><code>{}</code>: {}</li>', p.where, p.message) for p in problems)
    broken = h('<div class="error"><p>Skipped invalid memory blobs:</p><ul>{}</ul></div>', skipped) if problems else ""
    body = h("""<div class="toolbar">{switcher}</div>{where}{filters}{count}{broken}
<section class="memories">{listing}</section>{nav}{add}""", switcher=switcher, where=where, filters=filter_form,
             count=count, broken=broken, listing=listing, nav=nav, add=add_form(branch, csrf, key, tip, who, form))
    return layout("Memory", "memory", body, repo=repo, branch=branch, flash=flash, error=error)


def listed_count(p: Any) -> str:
    """How many memories a list's page (a :class:`gitmem.store.Page`) shows of how many match."""
    shown, total = len(p.memories), p.total
    if p.newer is None and p.older is None:  # every match on one page
        n = shown if total is None else total
        return f"{plural(n, 'memory')}."
    uncounted = "not counted: that would read every memory"  # see Store.page
    if p.newer is None:
        return f"The newest {shown} of {plural(total, 'memory')}." if total is not None else \
            f"The newest {shown} shown; more match ({uncounted})."
    return (f"{shown} of {plural(total, 'memory')}" if total is not None else f"{plural(shown, 'memory')} ({uncounted})") + \
        f", created {p.memories[-1].created} to {p.memories[0].created}."


def pager(newer: Optional[str], older: Optional[str], middle: Any = "", *, first: Optional[str] = None,
          labels: Sequence[str] = ("newer", "older")) -> Safe:
    """The links to the pages around this one (a list's, a search's, the audit trail's; None where there is
    none) and to the ``first``, around ``middle`` (where this one is)."""
    parts = [h('<a rel="first" href="{}">&laquo; newest</a>', first) if first else "",
             h('<a rel="prev" href="{}">&larr; {}</a>', newer, labels[0]) if newer else "", middle,
             h('<a rel="next" href="{}">{} &rarr;</a>', older, labels[1]) if older else ""]
    return h('<nav class="pager" aria-label="pages">{}</nav>', join((p for p in parts if p), " "))


def add_form(branch: str, csrf: str, key: str, since: Optional[str], who: Any, form: Mapping[str, str]) -> Safe:
    """The add form; ``key`` (fresh for each page) and ``since`` (the tip shown) make a second send of this
    page's form answer the memory the first one added (:meth:`gitmem.store.Store.add`)."""
    return h("""<section class="add"><h2>Add a memory</h2>
<form method="post" action="/add" id="add-form">{csrf}<input type="hidden" name="branch" value="{branch}">
<input type="hidden" name="key" value="{key}"><input type="hidden" name="since" value="{since}">
{fields}
<p class="hint">Recorded as {who} with source <code>web-ui</code> on <code>{ref}</code>.</p>
<button type="submit">Add memory</button></form></section>""",
             csrf=csrf_field(csrf), branch=branch, ref=memory_ref(branch), key=key, since=since or "",
             fields=memory_fields(form, h('<label>Type <select name="type" required>{}</select></label>',
                                          options(TYPES, form.get("type") or "decision"))),
             who=signer_line(who))


def memory_fields(form: Mapping[str, str], first: Safe = Safe(""), *, kept: str = "") -> Safe:
    """The fields a person writes a memory with, filled from ``form``: the add form's and the supersede form's.
    ``first``: a field before the title (the add form's type); ``kept``: what an emptied title or reason means."""
    return h("""<div class="row">{first}
<label class="wide">Title <input name="title" value="{title}" maxlength="{title_limit}" placeholder="{title_hint}"></label></div>
<label>Text <textarea name="text" rows="3" required maxlength="{limit}" aria-describedby="text-limit">{text}</textarea></label>
<p class="limit" id="text-limit">At most {kb} KB of text ({limit:,} bytes as UTF-8: a character outside ASCII takes 2 to 4).</p>
<label>Reason <input name="reason" value="{reason}" placeholder="{reason_hint}"></label>
<div class="row"><label>Tags <input name="tags" value="{tags}" placeholder="comma or space separated"></label>
<label>Paths <input name="paths" value="{paths}" placeholder="src/app.py, docs/"></label></div>""",
             first=first, title_limit=MAX_TITLE_CHARS, title_hint=kept or "optional one line",
             # maxlength counts UTF-16 units, never more than UTF-8's bytes: it refuses no text the server takes
             limit=MAX_TEXT_BYTES, kb=MAX_TEXT_BYTES // 1024,
             reason_hint=kept or "required for a rejection: why it was turned down",
             **{k: typed(form.get(k, "")) for k in ("title", "text", "reason", "tags", "paths")})


def as_typed(m: Memory) -> Dict[str, str]:
    """``m``'s fields as the supersede form shows them, ready to change (the route reads its paths back)."""
    return {"title": m.title or "", "text": m.text, "reason": m.reason or "", "tags": ", ".join(m.tags),
            "paths": ", ".join(m.paths)}


def supersede_form(branch: str, m: Memory, csrf: str, who: Any, form: Optional[Mapping[str, str]]) -> Safe:
    """The supersede form, filled with what ``m`` holds, or with ``form`` (what was typed, refused): closed
    until opened, unless it comes back refused. ``seen`` refuses a send decided on an older version."""
    return h("""<details class="supersede"{open}><summary>Supersede: replace it with a new version</summary>
<form method="post" action="/supersede" id="supersede-form">{csrf}<input type="hidden" name="branch" value="{branch}">
<input type="hidden" name="id" value="{id}"><input type="hidden" name="seen" value="{seen}">
{fields}
<p class="hint">A new {type} takes its place, recorded as {who} with source <code>web-ui</code>; this one stays in
its history, marked superseded, as <code>gitmem supersede</code> leaves it.</p>
<button type="submit">Supersede</button></form></details>""",
             open=Safe(" open" if form is not None else ""), csrf=csrf_field(csrf), branch=branch, id=m.id,
             seen=version(m), fields=memory_fields(as_typed(m) if form is None else form,
                                                     kept="left empty: stays as it is"),
             type=m.type, who=signer_line(who))


def one_memory_page(*, repo: str, branch: str, m: Memory, yaml_text: str, versions: Sequence[Any],
                    commits: Sequence[Any], stale: bool, csrf: str, who: Any, flash: Optional[str] = None,
                    error: Optional[str] = None, conflict: Any = None,
                    form: Optional[Mapping[str, str]] = None) -> Safe:
    history = []
    for v in versions:
        c = v.change
        history.append(h("""<li><div class="meta"><strong>{op}</strong> {who} via <span class="source">{source}</span>
<time>{when}</time> commit <code>{commit}</code></div><div class="summary">{summary}</div>{reason}
<pre class="diff">{diff}</pre></li>""", op=c.op, who=author_line(c.author.name, c.author.email, c.author.kind),
                         source=c.source, when=when(c.time), commit=short(c.commit), summary=c.summary,
                         reason=_write_reason(c), diff=_diff_lines(v.diff())))
    retraction = next((v.change for v in versions if v.change.op == "retract"), None) \
        if m.status == "retracted" else None  # who retracted it, and why, as `gitmem show` says it
    linked = []
    for cc in commits:
        if cc.found:
            linked.append(h("<li><code>{}</code> {} <span class=\"who\">{}</span> <time>{}</time></li>",
                            short(cc.id), cc.summary, cc.author, when(cc.time)))
        else:
            linked.append(h('<li><code>{}</code> <em>not in this repository</em></li>', short(cc.id)))
    links = []
    for label, other in (("Supersedes", m.supersedes), ("Superseded by", m.superseded_by)):
        if other:
            links.append(h('<p>{}: <a href="{}"><code>{}</code></a></p>', label, url(f"/memory/{other}", branch=branch),
                           other))
    retract = supersede = ""
    if m.status == "active":  # what a retracted or superseded memory said is kept as it was
        supersede = supersede_form(branch, m, csrf, who, form)
        retract = h("""<form method="post" action="/retract" class="retract">{csrf}
<input type="hidden" name="branch" value="{branch}"><input type="hidden" name="id" value="{id}">
<input type="hidden" name="seen" value="{seen}">
<label>Reason <input name="reason" placeholder="why it no longer holds"></label>
<button type="submit" class="danger">Retract</button> <span class="hint">as {who}, source web-ui</span></form>""",
                    csrf=csrf_field(csrf), branch=branch, id=m.id, seen=version(m),
                    who=signer_line(who))
    if retraction is not None:
        retract = h('<p class="note retraction">Retracted by {} on <time>{}</time>{}</p>',
                    author_line(retraction.author.name, retraction.author.email, retraction.author.kind),
                    when(retraction.time), f": {retraction.reason}" if retraction.reason else " (no reason given).")
    body = h("""<p><a href="{back}">&larr; memory of {branch}</a></p>{card}{links}{supersede}{retract}
<section><h2>YAML</h2><pre class="yaml">{yaml}</pre></section>
<section><h2>Linked code commits</h2>{linked}</section>
<section><h2>History</h2><ol class="history">{history}</ol></section>""",
             back=url("/memory", branch=branch), branch=branch, card=memory_card(m, branch, stale=stale, conflict=conflict),
             links=join(links), retract=retract, supersede=supersede, yaml=yaml_text,
             linked=h("<ul>{}</ul>", join(linked)) if linked else Safe('<p class="empty">None.</p>'),
             history=join(history))
    return layout(f"{m.type} {m.id}", "memory", body, repo=repo, branch=branch, flash=flash, error=error)


def _write_reason(c: Any) -> Safe:
    """Why a write was made, as it quoted it in its commit (a retraction's reason): `gitmem show` prints it."""
    return h('<p class="reason">Because: {}</p>', c.reason) if c.reason else Safe("")


def _diff_lines(diff: str) -> Safe:
    out = []
    for line in diff.splitlines():
        cls = "add" if line.startswith("+") and not line.startswith("+++") else \
            "del" if line.startswith("-") and not line.startswith("---") else "ctx"
        out.append(h('<span class="{}">{}</span>', cls, line))
    return join(out, "\n")


# --- audit -------------------------------------------------------------------------


def audit_page(*, repo: str, page: Any, filters: Mapping[str, str], branches: Sequence[str], number: int) -> Safe:
    f = filters
    form = h("""<form class="filters" method="get" action="/audit">
<label>Branch <select name="branch">{branches}</select></label>
<label>Author <select name="kind">{kinds}</select></label>
<label>Source <input name="source" value="{source}" size="8" placeholder="cli, mcp, hook..."></label>
<label>From <input type="date" name="since" value="{since}"></label>
<label>To <input type="date" name="until" value="{until}"></label>
<button type="submit">Filter</button> <a href="/audit">clear</a></form>""",
             branches=options(branches, f.get("branch"), "all branches"), kinds=options(AUTHOR_KINDS, f.get("kind"), "any"),
             source=f.get("source", ""), since=f.get("since", ""), until=f.get("until", ""))
    rows = []
    for e in page.entries:
        c = e.change
        home = e.branches[0]
        ids = join((h('<a href="{}"><code>{}</code></a>', url(f"/memory/{i}", branch=home), i)
                    for i in c.memory_ids[:5]), " ")
        more = h(" +{}", len(c.memory_ids) - 5) if len(c.memory_ids) > 5 else ""
        rows.append(h("""<tr><td><time>{when}</time></td><td>{branches}</td><td>{who}</td><td>{source}</td>
<td>{op}</td><td>{summary}{reason}</td><td>{ids}{more}</td><td><code>{commit}</code></td></tr>""",
                      when=when(c.time), branches=join(e.branches, ", "),
                      who=author_line(c.author.name, c.author.email, c.author.kind), source=c.source, op=c.op,
                      summary=c.summary, reason=_write_reason(c), ids=ids, more=more, commit=short(c.commit)))
    params = {k: v for k, v in f.items() if v}
    nav = pager(url("/audit", **params, page=number - 1) if number > 1 else None,
                url("/audit", **params, page=number + 1) if page.more else None, h("<span>page {}</span>", number))
    table = h("""<table class="audit"><thead><tr><th>When</th><th>Branches</th><th>Who</th><th>Source</th><th>Op</th>
<th>Summary</th><th>Memories</th><th>Commit</th></tr></thead><tbody>{}</tbody></table>""", join(rows)) \
        if rows else Safe('<p class="empty">No writes match.</p>')
    body = h('<p class="note">Every write on every memory branch, newest first ({} per page).</p>{form}{table}{nav}',
             page.limit, form=form, table=table, nav=nav)
    return layout("Audit trail", "audit", body, repo=repo)


# --- branches ----------------------------------------------------------------------


def branches_page(*, repo: str, rows: Sequence[Mapping[str, Any]], default: str, csrf: str, who: Any,
                  flash: Optional[str] = None, error: Optional[str] = None) -> Safe:
    sections = []
    for r in rows:
        b = r["info"]
        head = h("""<h2 id="branch-{name}"><a href="{href}">{name}</a></h2><p class="meta">
<code>{ref}</code> tip <code>{tip}</code> · {count} · code branch {code}{merged}{parent}</p>""",
                 name=b.name, href=url("/memory", branch=b.name), ref=b.ref, tip=short(b.tip), count=plural(b.memories, "memory"),
                 code=b.code, merged=" · its code is merged into the parent" if b.merged else "",
                 parent=h(" · parent <code>{}</code>", b.parent) if b.parent else " · default branch")
        parts = [head]
        d = r.get("diff")
        if r.get("no_diff"):
            parts.append(h('<p class="empty">{}</p>', r["no_diff"]))
        if d is not None:
            if d.added or d.changed or d.removed:
                items = [h('<li class="added">+ {} <a href="{}"><code>{}</code></a> {}{}</li>', m.type,
                           url(f"/memory/{m.id}", branch=b.name), m.id, m.summary, _because(m)) for m in d.added]
                items += [h('<li class="changed">~ {} <a href="{}"><code>{}</code></a> {} (<em>{}</em>)</li>',
                            new.type, url(f"/memory/{new.id}", branch=b.name), new.id, new.summary,
                            ", ".join(fields) or "metadata") for old, new, fields in d.changed]
                items += [h('<li class="removed">- {} <code>{}</code> {}</li>', m.type, m.id, m.summary)
                          for m in d.removed]
                parts.append(h("<p>What <code>{}</code> knows that <code>{}</code> does not yet "
                               "({} added, {} changed, {} removed):</p><ul class=\"diff-list\">{}</ul>",
                               b.name, b.parent, len(d.added), len(d.changed), len(d.removed), join(items)))
            else:
                parts.append(h('<p class="empty">Nothing that <code>{}</code> does not already know.</p>', b.parent))
        for c in r.get("conflicts", ()):
            parts.append(conflict_box(b.name, c, csrf, who))
        sections.append(h('<section class="branch">{}</section>', join(parts)))
    body = h('<p class="note">Each memory branch against its parent (default branch <code>{}</code>); conflicts '
             'from merges wait here for a person.</p>{}', default,
             join(sections) if sections else Safe('<p class="empty">No memory branches yet.</p>'))
    return layout("Branches", "branches", body, repo=repo, flash=flash, error=error)


def _because(m: Memory) -> Safe:
    return h(' <span class="reason-inline">(because: {})</span>', m.reason) if m.type == "rejection" and m.reason \
        else Safe("")


def conflict_box(branch: str, c: Any, csrf: str, who: Any) -> Safe:
    rows = []
    for name in c.fields:
        rows.append(h("<tr><th>{}</th><td>{}</td><td>{}</td><td>{}</td></tr>", name,
                      _field(c.base, name), _field(c.ours, name), _field(c.theirs, name)))
    buttons = join(h("""<form method="post" action="/resolve" class="inline">{csrf}
<input type="hidden" name="branch" value="{branch}"><input type="hidden" name="id" value="{id}">
<input type="hidden" name="take" value="{take}"><input type="hidden" name="seen" value="{seen}">
<button type="submit">Keep {label}</button></form>""",
                     csrf=csrf_field(csrf), branch=branch, id=c.id, take=take, seen=c.version(), label=label)
                   for take, label in (("ours", "ours"), ("theirs", "theirs")))
    return h("""<div class="conflict" id="conflict-{id}"><h3>Conflict in {type} <a href="{href}"><code>{id}</code></a></h3>
<table><thead><tr><th>Field</th><th>Base</th><th>Ours</th><th>Theirs</th></tr></thead><tbody>{rows}</tbody></table>
<p>{buttons} <span class="hint">as {who}, source web-ui</span></p></div>""",
             id=c.id, type=c.ours.type, href=url(f"/memory/{c.id}", branch=branch), rows=join(rows), buttons=buttons,
             who=signer_line(who))


def _field(m: Optional[Memory], name: str) -> str:
    if m is None:
        return "-"
    v = getattr(m, name)
    return ", ".join(v) if isinstance(v, tuple) else ("-" if v is None else str(v))


# --- cost --------------------------------------------------------------------------


def cost_page(*, repo: str, bill: Any, run_path: Optional[str], run: Optional[Mapping[str, Any]],
              svg: Optional[str], request: Optional[Mapping[str, Any]], labels: Mapping[str, str],
              error: Optional[str] = None) -> Safe:
    parts = []
    if bill is None:
        parts.append(Safe('<p class="empty">No demo run is recorded in this repository yet: run '
                          '<code>gitmem demo cache-ttl</code> here, then reload.</p>'))
    else:
        rows = []
        for p in bill.policies:
            after = ", ".join(f"{state} {n}/{p.runs}" for state, n in sorted(p.after_break.items())) or "-"
            rows.append(h("<tr><th>{}</th><td>${:.4f}</td><td>${:.4f}</td><td>${:.4f}</td><td>${:.4f}</td>"
                          "<td>{:.2f}</td><td>{}</td></tr>", labels.get(p.policy, p.policy), p.phases["session1"],
                          p.phases["break"], p.phases["session2"], p.total, p.ratio, after))
        table_rows = []
        for row in bill.table:
            cells = join(h('<td class="{}">${:.4f} ({:.2f})</td>', "cheapest" if row.cheapest == p else "",
                           row.totals[p], row.ratio(p)) for p in FIXED)
            table_rows.append(h("<tr><th>{:g} min</th>{}<td>{}</td></tr>", row.break_minutes, cells, row.auto_chose))
        parts.append(h("""<section><h2>Last demo run</h2>
<p class="meta">Backend <strong>{backend}</strong>, model <code>{model}</code>, {runs}, break {brk:g} min,
recorded {created} (<code>{path}</code>). Prices: {source}, checked {checked}.</p>
<table class="bill"><thead><tr><th>Policy</th><th>Session 1</th><th>Break</th><th>Session 2</th><th>Total per run</th>
<th>vs uncached</th><th>Guide after the break</th></tr></thead><tbody>{rows}</tbody></table></section>
<section><h2>Break length</h2><p class="note">The same workload priced for other break lengths: cost relative to
uncached, one line per TTL policy (a dot marks the cheapest).</p><figure class="chart">{svg}</figure>
<table class="breaks"><thead><tr><th>Break</th>{heads}<th>auto picks</th></tr></thead><tbody>{table}</tbody></table>
</section>""", backend=bill.backend, model=bill.model, runs=plural(bill.policies[0].runs if bill.policies else 0, "run"),
                       brk=bill.break_seconds / 60, created=(run or {}).get("created", "-"), path=run_path or "-",
                       source=bill.source, checked=bill.checked, rows=join(rows), svg=Safe(svg or ""),
                       heads=join(h("<th>{}</th>", labels.get(p, p)) for p in FIXED), table=join(table_rows)))
    if request:
        u = request.get("usage") or {}  # a failed request has none
        parts.append(h("""<section><h2>Last request (<code>gitmem {command}</code>)</h2><p class="meta">{time}, backend
<strong>{backend}</strong>, model <code>{model}</code>, memory commit <code>{commit}</code></p>
<p class="question">{question}</p><table class="bill"><tbody>
<tr><th>Input</th><td>{inp}</td></tr><tr><th>Cache write</th><td>{write}</td></tr>
<tr><th>Cache read</th><td>{read}</td></tr><tr><th>Output</th><td>{out}</td></tr>
<tr><th>Cost</th><td>${total:.6f}</td></tr></tbody></table></section>""",
                       command=request.get("command", "ask"), time=request.get("time", "-"),
                       backend=request.get("backend", "-"),
                       model=request.get("model", "-"), commit=short(request.get("memory_commit")),
                       question=request.get("question", ""), inp=u.get("input_tokens", 0),
                       write=u.get("cache_creation_input_tokens", 0), read=u.get("cache_read_input_tokens", 0),
                       out=u.get("output_tokens", 0), total=float((request.get("cost") or {}).get("total", 0.0))))
    return layout("Cost", "cost", join(parts), repo=repo, error=error)


def error_page(*, repo: str, status: int, message: str) -> Safe:
    return layout("Error" if status != 404 else "Not found", "", h('<p class="error">{}</p>', message), repo=repo)
