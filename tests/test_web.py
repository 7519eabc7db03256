"""The web UI through the ASGI test client: every page and action, the DNS-rebinding and CSRF
defences, and escaping. The repositories are real; writes are checked with the real `git log`."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

from conftest import FOREIGN_HOSTS, LOOPBACK_HOSTS, ROOT, git, gitmem, gitmem_process  # noqa: E402
from gitmem import Store  # noqa: E402
from gitmem.model import Author  # noqa: E402
from gitmem.web import create_app  # noqa: E402

LOCAL = "http://127.0.0.1:8737"
AGENT = Author("Claude", "agent@example.com", "agent")


def client(path, base_url=LOCAL) -> TestClient:
    return TestClient(create_app(str(path)), base_url=base_url, follow_redirects=False)


def csrf(page_html: str) -> str:
    """The token exactly as a browser gets it: from the hidden field of a form on the page."""
    return re.search(r'name="csrf" value="([^"]+)"', page_html).group(1)


def seen(page_html: str) -> str:
    """The version of the memory (or of the conflict) the first write form on the page showed (its hidden field)."""
    return re.search(r'name="seen" value="([^"]+)"', page_html).group(1)


def ids_on(page_html: str):
    return re.findall(r'<article class="memory[^"]*" data-id="([0-9a-z]{16})"', page_html)


def memory_log(repo, ref="refs/memory/main", n=1) -> str:
    return git(repo, "log", f"-{n}", "--format=%an <%ae>%n%B", ref)


@pytest.fixture
def web(repo):
    return client(repo)


# --- the memory page ---------------------------------------------------------------------


def test_memory_page_lists_memories_with_the_rejection_reason_prominent(repo, store, web):
    store.add("decision", "Use pygit2 for git access", reason="no subprocess per write")
    store.add("rejection", "Cache memory in Redis", reason="one more service to run for a local tool")
    page = web.get("/memory")
    assert page.status_code == 200
    assert "Use pygit2 for git access" in page.text
    assert re.search(r'class="reason reason-rejection"><strong>Rejected because:</strong> '
                     r'one more service to run for a local tool', page.text)


def test_memory_set_aside_here_is_shown_on_the_ref_it_is_kept_on(repo, store, web):
    """Memory set aside here (``B.earlier-TIP``) is kept on refs/memory-aside/, not refs/memory/: the pages that
    name its ref (the branches page, its memory page, the add form) said refs/memory/<name>."""
    store.add("fact", "an abandoned spike's")
    aside = f"wip.earlier-{store.own_tip()[:8]}"
    git(repo, "update-ref", f"refs/memory-aside/{aside}", store.own_tip())

    for page in (web.get("/branches"), web.get("/memory", params={"branch": aside})):
        assert page.status_code == 200 and f"refs/memory-aside/{aside}" in page.text, page.url
        assert f"refs/memory/{aside}" not in page.text, page.url


def test_a_memory_with_script_renders_as_text_everywhere(repo, store, web):
    evil = '<script>alert("x")</script>'
    w = store.add("rejection", f"text {evil}", title=f"title {evil}", reason=f"reason {evil}", paths=["a<b>.py"])
    pages = [web.get("/memory"), web.get("/memory", params={"q": evil}), web.get(f"/memory/{w.memory.id}"),
             web.get("/audit"), web.get("/branches"), web.get("/memory", params={"tag": evil})]
    for page in pages:
        assert "<script" not in page.text.lower(), page.url
    assert "text &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in pages[0].text
    assert "&lt;script&gt;" in pages[2].text  # the YAML too
    assert "Content-Security-Policy" in pages[0].headers or "content-security-policy" in pages[0].headers
    assert "script-src" not in pages[0].headers["content-security-policy"]  # default-src 'none': no scripts at all


CONTROLS = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x1b[0m\rover\x9b31m\u202eevil"


def test_control_characters_in_stored_memory_and_authors_show_as_the_cli_shows_them(repo, store, web):
    """Raw, an ESC or a C1 control is invisible on a page (or a U+FFFD) and a bidi override reorders the line:
    each is shown as its escape, as `gitmem show` prints it."""
    w = store.add("rejection", f"plan {CONTROLS}", title=f"t {CONTROLS[:12]}", reason=f"bad {CONTROLS}",
                  author=Author("Mallory\x1b[8m", "m@example.com", "human"))
    pages = {url: web.get(url).text for url in ("/memory", f"/memory/{w.memory.id}", "/audit", "/branches")}
    pages["search"] = web.get("/memory", params={"q": "plan"}).text
    for name, page in pages.items():
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", page), name
    shown = r"\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x1b[0m\x0dover\x9b31m\u202eevil"
    for page in (pages["/memory"], pages[f"/memory/{w.memory.id}"], pages["search"]):
        assert f"plan {shown}" in page and f"bad {shown}" in page
    assert "Mallory\\x1b[8m" in pages["/audit"]


def test_filters_by_type_tag_path_author_kind_and_source(repo, store, web):
    a = store.add("decision", "Retry refunds with backoff", tags=["payments"], paths=["src/refunds.py"],
                  source="cli").memory
    b = store.add("fact", "The ledger is append-only", author=AGENT, source="mcp:cursor").memory
    c = store.add("convention", "Money is integer cents", tags=["payments"], paths=["src/money/"], source="hook").memory
    cases = {
        (("type", "fact"),): {b.id},
        (("tag", "payments"),): {a.id, c.id},
        (("path", "src/money/cents.py"),): {c.id},
        (("author_kind", "agent"),): {b.id},
        (("author_kind", "human"),): {a.id, c.id},
        (("source", "mcp"),): {b.id},
        (("tag", "payments"), ("source", "hook")): {c.id},
    }
    for params, expected in cases.items():
        assert set(ids_on(web.get("/memory", params=dict(params)).text)) == expected, params


def test_a_path_filter_reads_a_path_as_the_cli_does_typed_at_the_root(repo, store, web):
    """`gitmem list --path ./src/money` finds the memories of src/money/; the page's Path box did not."""
    money = store.add("convention", "Money is integer cents", paths=["src/money/"]).memory
    store.add("fact", "Docs are in Markdown", paths=["docs/"])
    for typed in ("./src/money/cents.py", "src//money", "./src", "src/./money/"):
        cli = json.loads(gitmem(repo, "list", "--path", typed, "--json").stdout)["memories"]
        assert [m["id"] for m in cli] == [money.id], typed
        assert ids_on(web.get("/memory", params={"path": typed}).text) == [money.id], typed
        assert ids_on(web.get("/memory", params={"path": typed, "q": "money cents"}).text) == [money.id], typed


def test_a_path_filter_outside_the_repository_is_refused_in_the_clis_words(repo, store, web):
    """`gitmem list --path ../x` says the path must stay inside the repository; the page showed "0 memories"."""
    docs = store.add("fact", "Docs are in Markdown", paths=["docs/"]).memory
    store.add("fact", "Code is in src", paths=["src/"])
    for typed in ("../x", "/etc", "docs/../../x"):
        cli = gitmem(repo, "list", "--path", typed, check=False)
        line = f"invalid path {typed!r}: must stay inside the repository"
        assert cli.returncode != 0 and line in cli.stderr, typed
        for params in ({"path": typed}, {"path": typed, "q": "markdown"}):
            page = web.get("/memory", params=params)
            assert page.status_code == 400 and html.escape(line) in page.text, params
    assert ids_on(web.get("/memory", params={"path": "src/../docs"}).text) == [docs.id]  # inside: read as the CLI does


def test_status_filter_shows_retracted_memories_only_when_asked(repo, store, web):
    kept = store.add("fact", "Kept").memory
    gone = store.add("fact", "Gone").memory
    store.retract(gone.id, reason="wrong")
    assert ids_on(web.get("/memory").text) == [kept.id]
    assert set(ids_on(web.get("/memory", params={"status": "all"}).text)) == {kept.id, gone.id}
    assert ids_on(web.get("/memory", params={"status": "retracted"}).text) == [gone.id]


def test_search_ranks_like_the_cli(repo, store, web):
    for text in ("Refunds retry with exponential backoff", "Webhooks are signed with HMAC",
                 "Refunds over 1000 EUR need a second approval", "Retry webhooks at most five times"):
        store.add("fact", text)
    shown = ids_on(web.get("/memory", params={"q": "refund retry"}).text)
    cli = json.loads(gitmem(repo, "search", "refund retry", "--json").stdout)
    assert len(shown) >= 2 and shown == [h["memory"]["id"] for h in cli["hits"]]


def test_stale_file_memory_is_marked(repo, store, web):
    (repo / "app.py").write_text("print('v1')\n")
    fresh = store.add("file", "Entry point, prints the version", paths=["README.md"]).memory
    stale = store.add("file", "Prints v1", paths=["app.py"]).memory
    (repo / "app.py").write_text("print('v2')\n")
    page = web.get("/memory").text
    cards = dict(re.findall(r'data-id="([0-9a-z]{16})">(.*?)</article>', page, re.S))
    assert "stale: file changed" in cards[stale.id]
    assert "stale" not in cards[fresh.id]


def test_branch_switcher_shows_a_feature_branch_inheriting_then_its_own_memory(repo, store, web):
    store.add("decision", "Main knows this")
    git(repo, "branch", "feature")
    page = web.get("/memory", params={"branch": "feature"}).text
    assert "has no memory of its own yet" in page and "Main knows this" in page
    assert re.search(r'<option value="feature" selected>feature</option>', page)
    Store.open(str(repo), "feature").add("fact", "Only the feature knows this")
    assert "Only the feature knows this" in web.get("/memory", params={"branch": "feature"}).text
    assert "Only the feature knows this" not in web.get("/memory", params={"branch": "main"}).text


def test_the_memory_page_and_a_search_read_only_what_they_show(repo, store, web, monkeypatch):
    """The plain page comes from the tree's summary and a search from the index, as `gitmem list` and
    `gitmem search` do: at 100,000 memories reading every one cost 2 s a view and grew the server."""
    from gitmem.postings import IndexedMemories
    from gitmem.warm import Warm
    from gitmem.web.app import LIST_LIMIT

    written = [store.add("fact", f"fact number {i} about the queue").memory.id for i in range(4 * LIST_LIMIT)]
    web.get("/memory")  # the server's first view builds the index for this tip
    read = []
    for cls, name in ((IndexedMemories, "get"), (Warm, "parse")):
        real = getattr(cls, name)
        monkeypatch.setattr(cls, name, lambda self, *a, _real=real, **k: read.append(len(a[-1] if len(a) < 3 else a[1]))
                            or _real(self, *a, **k))
    page = web.get("/memory").text
    assert ids_on(page) == written[::-1][:LIST_LIMIT]
    assert f"The newest {LIST_LIMIT} of {4 * LIST_LIMIT} memories" in page
    assert sum(read) <= LIST_LIMIT
    decisions = [store.add("decision", f"decision number {i}", reason="r").memory.id for i in range(3)]
    store.retract(written[0], reason="wrong")
    page = web.get("/memory", params={"type": "fact"}).text  # the newest facts, counted by the summary
    assert ids_on(page) == written[::-1][:LIST_LIMIT]
    assert f"The newest {LIST_LIMIT} of {4 * LIST_LIMIT - 1} memories" in page
    assert ids_on(web.get("/memory", params={"type": "decision", "status": "all"}).text) == decisions[::-1]
    assert ids_on(web.get("/memory", params={"status": "retracted"}).text) == [written[0]]
    monkeypatch.setattr(Store, "list", lambda *a, **k: pytest.fail("the search listed the branch to rank it"))
    assert ids_on(web.get("/memory", params={"q": "number 7 queue"}).text)[0] == written[7]


def test_a_path_author_or_source_filter_reads_only_the_page_and_is_counted_by_the_index(repo, store, web, monkeypatch):
    """At 100,000 memories `?path=src` read every match to show 50 and a total (2.3 s a view), and
    `?source=bench` every memory (1.7 s): a path, a source and an author kind are counted by the index."""
    from gitmem.postings import IndexedMemories
    from gitmem.web.app import LIST_LIMIT

    written = [store.add("fact", f"fact number {i}", paths=["src/queue.py"], source="bench").memory.id
               for i in range(4 * LIST_LIMIT)]
    few = [store.add("fact", f"agent fact {i}", author=AGENT).memory.id for i in range(3)]
    web.get("/memory")  # the server's first view builds the index for this tip
    monkeypatch.setattr("gitmem.store._CHUNK", 16)  # a page's read, not one chunk that holds them all
    monkeypatch.setattr("gitmem.store.COUNTED", LIST_LIMIT)  # more than a count reads: as at 100,000
    read = []
    real = IndexedMemories.get
    monkeypatch.setattr(IndexedMemories, "get", lambda self, ids: read.append(len(ids)) or real(self, ids))
    page = web.get("/memory", params={"path": "src"}).text
    assert ids_on(page) == written[::-1][:LIST_LIMIT]
    assert f"The newest {LIST_LIMIT} of {4 * LIST_LIMIT} memories" in page
    assert sum(read) <= LIST_LIMIT + 1
    read.clear()
    page = web.get("/memory", params={"source": "bench"}).text
    assert ids_on(page) == written[::-1][:LIST_LIMIT]
    assert f"The newest {LIST_LIMIT} of {4 * LIST_LIMIT} memories" in page
    assert sum(read) <= LIST_LIMIT + 1  # the newest few, not from it, are not read
    page = web.get("/memory", params={"author_kind": "agent"}).text
    assert ids_on(page) == few[::-1] and "3 memories." in page
    older = follow(web.get("/memory", params={"source": "bench"}).text, web)
    assert ids_on(older) == written[::-1][LIST_LIMIT:2 * LIST_LIMIT]
    assert f"{LIST_LIMIT} of {4 * LIST_LIMIT} memories, created" in older


def test_the_page_and_a_search_name_the_blobs_that_are_not_valid_memories(repo, store, web):
    m = store.add("fact", "Refunds are idempotent").memory
    bad = f"fact/x/y/{m.id[:-2]}xy.yaml"
    tip = store.tip()
    store.move_ref(tip, store.commit_tree({bad: b"id: [not valid\n"}, "a broken blob", m.author, base=tip), "t")
    for params in ({}, {"q": "refunds"}):
        page = web.get("/memory", params=params).text
        assert "Skipped invalid memory blobs" in page and bad in page


def follow(page_html: str, web, rel: str = "next"):
    """The page the link ``rel`` (next: older, prev: newer) leads to, as a click would; None where it has none."""
    link = re.search(rf'rel="{rel}" href="([^"]+)"', page_html)
    return link and web.get(html.unescape(link.group(1))).text


def test_older_and_newer_links_page_through_every_memory_keeping_the_filters(repo, web):
    """The page showed the newest 50 and no way to the others: its older and newer links page by id (a write
    between two clicks shifts no page), keep the branch and the filters, and each page says how many match."""
    from conftest import seeded
    from gitmem.web.app import LIST_LIMIT

    store = seeded(repo, 2 * LIST_LIMIT + 8)  # facts, and a convention first
    gone = store.retract(store.list()[5].id, reason="wrong").memory.id
    facts = [m.id for m in store.list(type="fact")][::-1]
    page = web.get("/memory", params={"type": "fact"}).text
    assert f"The newest {LIST_LIMIT} of {len(facts)} memories." in page and 'rel="prev"' not in page
    pages = [ids_on(page)]
    new = store.add("fact", "written while the first page was read").memory.id
    while page := follow(page, web):
        assert f"of {len(facts) + 1} memories, created" in page
        assert 'value="fact" selected' in page and "type=fact" in re.search(r'rel="prev" href="([^"]+)"', page)[1]
        pages.append(ids_on(page))
        last = page
    assert sum(pages, []) == facts and [len(p) for p in pages] == [LIST_LIMIT, LIST_LIMIT, len(facts) - 2 * LIST_LIMIT]
    back = []
    while last := follow(last, web, "prev"):
        back.append(ids_on(last))
        page = last
    assert back == [pages[1], pages[0], [new] + pages[0][:-1]]  # the newest page, the new memory first
    assert 'rel="prev"' not in page and "The newest" in page
    oldest = follow(follow(web.get("/memory", params={"status": "all"}).text, web), web)
    assert gone in ids_on(oldest) and f"of {2 * LIST_LIMIT + 9} memories" in oldest  # retracted: in "all"


def test_search_results_page_by_rank_as_the_cli_ranks_them(repo, web, monkeypatch):
    from conftest import seeded
    from gitmem.web.app import LIST_LIMIT

    seeded(repo, 3 * LIST_LIMIT)
    cli = json.loads(gitmem(repo, "search", "billing invoices detail", "-n", "500", "--json").stdout)["hits"]
    page = web.get("/memory", params={"q": "billing invoices detail"}).text
    assert f"The best matches 1-{LIST_LIMIT} for" in page
    shown = [ids_on(page)]
    while page := follow(page, web):
        shown.append(ids_on(page))
        last = page
    assert sum(shown, []) == [h["memory"]["id"] for h in cli] and len(shown) == 3
    assert f"The best matches {2 * LIST_LIMIT + 1}-{3 * LIST_LIMIT} of {3 * LIST_LIMIT} for" in last
    assert ids_on(follow(last, web, "prev")) == shown[1]
    monkeypatch.setattr("gitmem.web.app.SEARCH_PAGES", 2)  # page 1,000 of a common word ranked every memory (5 s)
    deepest = web.get("/memory", params={"q": "billing invoices detail", "page": "3"}).text
    assert ids_on(deepest) == shown[1] and 'rel="next"' not in deepest and "add words or a filter" in deepest


def test_a_search_by_type_ranks_from_the_index_as_the_loaded_memories_rank(repo, store, web, monkeypatch):
    """The same hits and scores as ranking every memory loaded (words weighed over all of them, only those of the
    type kept), without loading them: loaded, a type filter cost 0.4-0.9 s at 100,000 memories."""
    from gitmem.search import rank

    for i in range(30):
        store.add(("decision", "fact", "convention")[i % 3], f"queue {i % 4} retries {i % 5} for service {i}",
                  reason="r" if i % 3 == 0 else None)
    loaded = rank(store.memories().values(), "queue retries service", 100, only_types=["fact"])
    assert len(loaded) == 10
    monkeypatch.setattr(Store, "list", lambda *a, **k: pytest.fail("the search loaded the memories to rank them"))
    page = web.get("/memory", params={"q": "queue retries service", "type": "fact"}).text
    assert ids_on(page) == [h.memory.id for h in loaded]
    assert re.findall(r'class="score">score ([0-9.]+)<', page) == [f"{h.score:.2f}" for h in loaded]
    cli = json.loads(gitmem(repo, "search", "queue retries service", "--type", "fact", "-n", "100", "--json").stdout)
    assert [(h["memory"]["id"], h["score"]) for h in cli["hits"]] == [(h.memory.id, round(h.score, 4)) for h in loaded]


def test_a_search_under_an_author_or_source_filter_loads_no_memory(repo, store, web, monkeypatch):
    """Such a search loaded every memory twice (for the words' weights, then for the filter): 1.1 s at 20,000
    memories; once, 2-2.5 s at 100,000. The index keeps each memory's author kind and source and ranks only those
    that match: no memory is loaded, only the hits are read."""
    from gitmem.postings import IndexedMemories

    few = [store.add("fact", f"agent queue note {i}", author=AGENT, source="mcp").memory.id for i in range(3)]
    for i in range(40):
        store.add("fact", f"queue note {i}")
    web.get("/memory")  # the server's first view builds the index for this tip
    read = []
    real = IndexedMemories.get
    monkeypatch.setattr(IndexedMemories, "get", lambda self, ids: read.append(len(ids)) or real(self, ids))
    for params in ({"author_kind": "agent"}, {"source": "mcp"}):
        read.clear()
        assert ids_on(web.get("/memory", params={"q": "queue note", **params}).text) == few[::-1]
        assert sum(read) == 0, params


def test_a_page_link_with_a_bad_cursor_or_number_is_answered_not_a_traceback(repo, store, web):
    from gitmem.web.app import LIST_LIMIT

    written = [store.add("fact", f"fact number {i}").memory.id for i in range(3)]
    for name in ("before", "after"):
        for bad in ("zz", "<script>x</script>", "../../etc/passwd", "0" * 17, "%ff"):
            answer = web.get("/memory", params={name: bad})
            assert answer.status_code == 400 and "is not a memory id" in answer.text, (name, bad)
            assert "<script>x" not in answer.text
    assert ids_on(web.get("/memory", params={"before": written[0]}).text) == written[::-1]  # past the oldest
    assert ids_on(web.get("/memory", params={"after": written[-1]}).text) == written[::-1]  # past the newest
    for number in ("abc", "-3", "0", "1e9"):
        assert ids_on(web.get("/memory", params={"q": "fact number", "page": number}).text) == \
            ids_on(web.get("/memory", params={"q": "fact number"}).text), number
    far = web.get("/memory", params={"q": "fact number", "page": str(10 ** 6 // LIST_LIMIT)})
    assert far.status_code == 200 and "No more matches" in far.text and 'rel="prev"' in far.text


def test_every_page_works_in_a_repository_without_commits_or_memory(empty_repo):
    web = client(empty_repo)
    assert "No memory on <code>main</code> yet" in web.get("/memory").text
    assert "No writes match" in web.get("/audit").text
    assert "No memory branches yet" in web.get("/branches").text
    assert web.get("/cost").status_code == 200
    assert web.get("/").headers["location"] == "/memory"


def test_bad_filters_and_unknown_ids_are_errors_not_tracebacks(repo, store, web):
    store.add("fact", "Something")
    assert web.get("/memory", params={"type": "bogus"}).status_code == 400
    assert "unknown type" in web.get("/memory", params={"type": "bogus"}).text
    assert web.get("/memory/zzzzzzzzzzzzzzzz").status_code == 404
    assert web.get("/memory", params={"branch": "../../etc"}).status_code == 400


# --- one memory --------------------------------------------------------------------------


def test_one_memory_shows_yaml_history_with_diffs_and_linked_code_commits(repo, store, web):
    head = git(repo, "rev-parse", "HEAD").strip()
    w = store.add("decision", "Use SQLite for the index", commits=[head], source="cli")
    store.edit(w.memory.id, text="Use SQLite with WAL for the index", author=AGENT, source="mcp:claude")
    page = web.get(f"/memory/{w.memory.id}").text
    assert "schema: 1" in page and f"id: {w.memory.id}" in page  # the YAML
    history = page.split("<h2>History</h2>")[1]
    assert history.index("edit") < history.index("add")  # newest first
    assert "via <span class=\"source\">mcp:claude</span>" in history and "Claude" in history
    assert '<span class="del">-text: Use SQLite for the index</span>' in history
    assert '<span class="add">+text: Use SQLite with WAL for the index</span>' in history
    linked = page.split("<h2>Linked code commits</h2>")[1].split("</section>")[0]
    assert head[:10] in linked and "initial" in linked


# --- write actions -----------------------------------------------------------------------


def test_add_through_the_form_is_committed_with_the_person_and_source_web_ui(repo, web):
    form = web.get("/memory").text
    r = web.post("/add", data={"csrf": csrf(form), "branch": "main", "type": "rejection", "text": "Use MongoDB",
                               "reason": "we need transactions", "tags": "db, storage", "paths": "src/db.py"})
    assert r.status_code == 303
    added = re.search(r"added=([0-9a-z]{16})", r.headers["location"]).group(1)
    page = web.get(r.headers["location"]).text
    assert f"Added {added}." in page and ids_on(page) == [added]
    log = memory_log(repo)
    assert log.startswith("Test Human <human@example.com>\nadd rejection: Use MongoDB")
    assert "Memory-Source: web-ui" in log and "Author-Kind: human" in log and f"Memory-Id: {added}" in log
    m = Store.open(str(repo)).get(added)
    assert (m.reason, m.tags, m.paths, m.source) == ("we need transactions", ("db", "storage"), ("src/db.py",), "web-ui")


def test_an_invalid_add_shows_why_and_keeps_what_was_typed(repo, web):
    form = web.get("/memory").text
    r = web.post("/add", data={"csrf": csrf(form), "branch": "main", "type": "rejection", "text": "Use <Mongo>"})
    assert r.status_code == 400
    assert "Not added: Reason: a rejection needs the reason it was turned down</p>" in r.text  # the form's label
    assert "turned down (--because)" in gitmem(repo, "add", "rejection", "Use Mongo", check=False).stderr  # the CLI's
    assert "Use &lt;Mongo&gt;</textarea>" in r.text
    assert git(repo, "for-each-ref", "refs/memory/") == ""
    body = f"csrf={csrf(form)}&branch=main&type=fact&text=%ff%fe"  # percent-escaped bytes that are no UTF-8
    r = web.post("/add", content=body, headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 400 and "form is not UTF-8" in r.text
    assert git(repo, "for-each-ref", "refs/memory/") == ""


def test_the_text_box_says_its_limit_and_the_server_still_counts_bytes(repo, web):
    """The limit is 16 KB of UTF-8: the box stops typing at 16,384 characters (never fewer than the bytes) and says
    the limit next to it; a text of fewer characters but more bytes is refused by the server, as the CLI refuses it."""
    from gitmem.model import MAX_TEXT_BYTES

    form = web.get("/memory").text
    assert re.search(rf'<textarea name="text" [^>]*maxlength="{MAX_TEXT_BYTES}"', form)
    assert "At most 16 KB of text (16,384 bytes as UTF-8" in form
    wide = "é" * (MAX_TEXT_BYTES // 2 + 1)  # under maxlength, over the bytes
    r = web.post("/add", data={"csrf": csrf(form), "branch": "main", "type": "fact", "text": wide})
    assert r.status_code == 400 and f"Text: {MAX_TEXT_BYTES + 2} bytes is over the {MAX_TEXT_BYTES}-byte limit" in r.text
    assert git(repo, "for-each-ref", "refs/memory/") == ""


def test_a_refused_add_echoes_what_was_typed_without_the_controls_html_cannot_carry(repo, web):
    """A NUL came back into the text box (a browser shows U+FFFD there, and sending it again was refused again)."""
    form = web.get("/memory").text
    r = web.post("/add", data={"csrf": csrf(form), "branch": "main", "type": "fact", "text": "Use\x00 <Redis>\x1b\x85",
                               "title": "T\x07", "tags": "a\x00b"})
    assert r.status_code == 400 and "contains a NUL byte" in r.text
    assert ">Use &lt;Redis&gt;</textarea>" in r.text and 'name="title" value="T"' in r.text and 'value="ab"' in r.text
    assert not re.search("[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]", r.text)
    search = web.get("/memory", params={"q": "redis\x00", "tag": "x\x1b"}).text  # the filters echo what was typed too
    assert 'name="q" value="redis"' in search and 'name="tag" value="x"' in search and "<q>redis</q>" in search
    assert not re.search("[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]", search)


def add_fields(page_html: str) -> dict:
    """The hidden fields of the add form as a browser sends them (its one-time key included)."""
    form = re.search(r'<form method="post" action="/add".*?</form>', page_html, re.S).group(0)
    return dict(re.findall(r'<input type="hidden" name="([a-z]+)" value="([^"]*)"', form))


def test_an_add_form_sent_twice_adds_one_memory_and_answers_both_alike(repo, store, web):
    """A double click, or a form restored by the back button and sent again, is the same form twice."""
    store.add("fact", "Already here")
    form = {**add_fields(web.get("/memory").text), "type": "fact", "text": "Sent twice"}
    first, again = web.post("/add", data=form), web.post("/add", data=form)
    assert first.status_code == again.status_code == 303
    assert again.headers["location"] == first.headers["location"]
    assert [m.text for m in Store.open(str(repo)).list()] == ["Already here", "Sent twice"]
    assert memory_log(repo, n=3).count("add fact: Sent twice") == 1


def test_an_add_form_sent_again_with_other_text_is_not_a_replay_it_asks(repo, web):
    form = {**add_fields(web.get("/memory").text), "type": "fact", "text": "First text"}
    added = re.search(r"added=([0-9a-z]{16})", web.post("/add", data=form).headers["location"]).group(1)
    r = web.post("/add", data={**form, "text": "Edited after going back"})
    assert r.status_code == 409
    assert f"it added {added}" in r.text and "Edited after going back</textarea>" in r.text
    assert [m.text for m in Store.open(str(repo)).list()] == ["First text"]
    again = web.post("/add", data={**add_fields(r.text), "type": "fact", "text": "Edited after going back"})
    assert again.status_code == 303  # the page it answered carries a new key: sending it adds the text
    assert [m.text for m in Store.open(str(repo)).list()] == ["First text", "Edited after going back"]


def test_add_on_a_branch_without_memory_forks_it(repo, store, web):
    store.add("fact", "From main")
    git(repo, "branch", "feature")
    token = csrf(web.get("/memory").text)
    r = web.post("/add", data={"csrf": token, "branch": "feature", "type": "fact", "text": "From the feature"})
    assert r.status_code == 303 and "branch=feature" in r.headers["location"]
    assert "add fact: From the feature" in memory_log(repo, "refs/memory/feature")
    assert "From the feature" not in memory_log(repo, "refs/memory/main")


def test_a_branch_that_is_not_here_is_an_error_on_a_page_and_on_a_form(repo, store, web):
    m = store.add("fact", "From main").memory
    for path in ("/memory", f"/memory/{m.id}", "/audit"):  # every page that takes branch=
        page = web.get(path, params={"branch": "mian"})
        assert page.status_code == 400 and "no branch &#x27;mian&#x27; here" in page.text, path
        assert "From main" not in page.text, path
    git(repo, "branch", "feature")  # a code branch with no memory yet is a branch here: nothing written on it
    assert "No writes match" in web.get("/audit", params={"branch": "feature"}).text
    token = csrf(web.get("/memory").text)
    r = web.post("/add", data={"csrf": token, "branch": "mian", "type": "fact", "text": "Lost on a typo"})
    assert r.status_code == 400 and "did you mean &#x27;main&#x27;" in r.text
    assert git(repo, "for-each-ref", "refs/memory") == git(repo, "for-each-ref", "refs/memory/main")


def test_retract_through_the_form(repo, store, web):
    w = store.add("fact", "The API is v1")
    page = web.get(f"/memory/{w.memory.id}").text
    r = web.post("/retract", data={"csrf": csrf(page), "branch": "main", "id": w.memory.id, "reason": "v2 shipped"})
    assert r.status_code == 303
    shown = web.get(r.headers["location"]).text
    assert "Retracted" in shown
    assert re.search(r'<p class="note retraction">Retracted by <span class="who">Test Human &lt;human@example.com&gt;'
                     r'</span> .*?</time>: v2 shipped</p>', shown)  # as `gitmem show` says why
    assert 'class="summary">retract fact: The API is v1</div><p class="reason">Because: v2 shipped</p>' in shown
    log = memory_log(repo)
    assert log.startswith("Test Human <human@example.com>\nretract fact: The API is v1")
    assert "v2 shipped" in log and "Memory-Source: web-ui" in log
    assert Store.open(str(repo)).get(w.memory.id).status == "retracted"
    again = web.post("/retract", data={"csrf": csrf(page), "branch": "main", "id": w.memory.id})
    assert again.status_code == 400 and "already retracted" in again.text


@pytest.mark.parametrize("memory_id", ["", "  "])
def test_a_retract_without_an_id_is_a_bad_request_not_a_missing_memory(repo, store, web, memory_id):
    store.add("fact", "The API is v1")
    r = web.post("/retract", data={"csrf": csrf(web.get("/memory").text), "branch": "main", "id": memory_id})
    assert r.status_code == 400 and "no memory to retract" in r.text


def test_a_retract_form_opened_before_someone_else_edited_the_memory_is_refused_and_shows_the_edit(repo, store, web):
    """The person decided on the version the page showed: a newer one (another process's edit) is shown
    to them first, never retracted unseen; the form on the refusal page then retracts it."""
    w = store.add("fact", "The API is v1")
    page = web.get(f"/memory/{w.memory.id}").text
    gitmem_process(repo, "edit", w.memory.id, "--text", "The API is v2, and v1 stays up until June")  # another process
    form = {"csrf": csrf(page), "branch": "main", "id": w.memory.id, "seen": seen(page), "reason": "old"}
    r = web.post("/retract", data=form)  # the form as the browser sends it, hidden fields and all
    assert r.status_code == 409
    assert "changed since" in r.text and "The API is v2, and v1 stays up until June" in r.text
    assert Store.open(str(repo)).get(w.memory.id).status == "active"
    r = web.post("/retract", data={**form, "seen": seen(r.text)})
    assert r.status_code == 303 and Store.open(str(repo)).get(w.memory.id).status == "retracted"


def supersede_fields(page_html: str) -> dict:
    """The supersede form on a memory's page as a browser sends it unchanged: hidden fields and prefilled values."""
    form = re.search(r'<form method="post" action="/supersede".*?</form>', page_html, re.S).group(0)
    fields = dict(re.findall(r'<input (?:type="hidden" )?name="([a-z]+)" value="([^"]*)"', form))
    fields["text"] = re.search(r"<textarea name=\"text\"[^>]*>(.*?)</textarea>", form, re.S).group(1)
    return {k: html.unescape(v) for k, v in fields.items()}


def test_supersede_through_the_form_replaces_the_memory_and_links_both_ways(repo, store, web):
    """The form holds the memory as it is (a path with a space kept whole, not split in two); the new memory's
    page says what it replaced, the old one's what replaced it, and the write is the person's, via web-ui."""
    old = store.add("decision", "Deploy <on> Fridays", title="Deploys", reason="the team is in",
                    tags=["ops", "deploy"], paths=["docs/Release Notes.md", "ops"], source="cli").memory
    page = web.get(f"/memory/{old.id}").text
    fields = supersede_fields(page)
    assert {k: fields[k] for k in ("id", "title", "text", "reason", "tags", "paths")} == {
        "id": old.id, "title": "Deploys", "text": "Deploy <on> Fridays", "reason": "the team is in",
        "tags": "ops, deploy", "paths": "docs/Release Notes.md, ops"}
    r = web.post("/supersede", data={**fields, "text": "Never deploy on Fridays", "tags": "ops, ops, release"})
    assert r.status_code == 303 and r.headers["location"].startswith("/memory/")
    new = Store.open(str(repo)).get(r.headers["location"].split("/")[2].split("?")[0])
    assert (new.text, new.title, new.reason, new.tags, new.paths, new.source, new.supersedes) == (
        "Never deploy on Fridays", "Deploys", "the team is in", ("ops", "release"),
        ("docs/Release Notes.md", "ops"), "web-ui", old.id)
    shown = web.get(r.headers["location"]).text
    assert f"Superseded {old.id}." in shown
    assert f'Supersedes: <a href="/memory/{old.id}?branch=main"><code>{old.id}</code></a>' in shown
    before = web.get(f"/memory/{old.id}").text
    assert f'Superseded by: <a href="/memory/{new.id}?branch=main"><code>{new.id}</code></a>' in before
    assert 'action="/supersede"' not in before and 'action="/retract"' not in before
    log = memory_log(repo)
    assert log.startswith("Test Human <human@example.com>\nsupersede decision: Deploys")  # its title
    assert "Memory-Source: web-ui" in log and "Author-Kind: human" in log and f"Supersedes: {old.id}" in log


def test_a_title_or_reason_emptied_in_the_supersede_form_keeps_the_memorys(repo, store, web):
    """As the fields' placeholder says ("left empty: stays as it is"), though the library now clears on ""."""
    old = store.add("decision", "Deploy on Fridays", title="Deploys", reason="the team is in").memory
    fields = supersede_fields(web.get(f"/memory/{old.id}").text)
    assert 'placeholder="left empty: stays as it is"' in web.get(f"/memory/{old.id}").text
    r = web.post("/supersede", data={**fields, "text": "Never deploy on Fridays", "title": "", "reason": " "})
    assert r.status_code == 303
    new = Store.open(str(repo)).get(r.headers["location"].split("/")[2].split("?")[0])
    assert (new.text, new.title, new.reason) == ("Never deploy on Fridays", "Deploys", "the team is in")


def test_an_invalid_supersede_says_why_in_the_forms_words_keeps_what_was_typed_and_writes_nothing(repo, store, web):
    from gitmem.model import MAX_TEXT_BYTES

    old = store.add("rejection", "Use MongoDB", reason="we need transactions").memory
    tip = git(repo, "rev-parse", "refs/memory/main")
    fields = supersede_fields(web.get(f"/memory/{old.id}").text)
    r = web.post("/supersede", data={**fields, "title": "T" * 201, "text": "Use <Mongo> 7"})
    assert r.status_code == 400
    assert "Not superseded: Title: must be one line of at most 200 characters</p>" in r.text
    assert "<details class=\"supersede\" open>" in r.text and ">Use &lt;Mongo&gt; 7</textarea>" in r.text
    r = web.post("/supersede", data={**fields, "text": "é" * (MAX_TEXT_BYTES // 2 + 1)})  # under maxlength
    assert r.status_code == 400 and f"Not superseded: Text: {MAX_TEXT_BYTES + 2} bytes is over" in r.text
    r = web.post("/supersede", data={**fields, "paths": "../outside.py"})
    assert r.status_code == 400 and "Not superseded: Paths: &#x27;../outside.py&#x27; must stay inside" in r.text
    assert git(repo, "rev-parse", "refs/memory/main") == tip
    assert Store.open(str(repo)).get(old.id).status == "active"


def test_a_memory_that_is_not_active_offers_no_supersede_form_and_a_send_says_why(repo, store, web):
    m = store.add("fact", "The API is v1").memory
    fields = supersede_fields(web.get(f"/memory/{m.id}").text)
    store.retract(m.id, reason="v2 shipped")
    tip = git(repo, "rev-parse", "refs/memory/main")
    page = web.get(f"/memory/{m.id}").text
    assert 'action="/supersede"' not in page and "Supersede" not in page
    r = web.post("/supersede", data={**fields, "text": "The API is v2"})
    assert r.status_code == 400 and f"Not superseded: {m.id} is already retracted</p>" in r.text
    assert git(repo, "rev-parse", "refs/memory/main") == tip
    r = web.post("/supersede", data={**fields, "id": "", "text": "The API is v2"})
    assert r.status_code == 400 and "no memory to supersede" in r.text
    assert web.post("/supersede", data={**fields, "id": "0" * 16}).status_code == 404


def test_a_supersede_form_opened_before_someone_else_edited_the_memory_is_refused_and_shows_the_edit(repo, store, web):
    """The form was filled from the version the page showed: a newer one is shown first, with what was typed
    kept, never replaced unseen."""
    m = store.add("fact", "The API is v1").memory
    fields = supersede_fields(web.get(f"/memory/{m.id}").text)
    gitmem_process(repo, "edit", m.id, "--text", "The API is v2, and v1 stays up until June")
    r = web.post("/supersede", data={**fields, "text": "The API is v3"})
    assert r.status_code == 409 and "changed since" in r.text
    assert "The API is v2, and v1 stays up until June" in r.text and ">The API is v3</textarea>" in r.text
    assert Store.open(str(repo)).get(m.id).status == "active"
    r = web.post("/supersede", data={**supersede_fields(r.text)})
    assert r.status_code == 303 and Store.open(str(repo)).get(m.id).status == "superseded"


# --- branches and conflicts ----------------------------------------------------------------


@pytest.fixture
def conflicted(repo, store):
    """main and feature both edited one memory's text; feature is merged into main: one conflict."""
    from gitmem.merge import merge_into

    shared = store.add("decision", "Timeouts are 30 seconds").memory
    git(repo, "branch", "feature")
    feature = Store.open(str(repo), "feature")
    feature.edit(shared.id, text="Timeouts are 10 seconds")
    store.edit(shared.id, text="Timeouts are 60 seconds")
    result = merge_into(store, feature.own_tip())
    assert [c.id for c in result.conflicts] == [shared.id]
    return shared.id


def test_branches_page_shows_what_the_feature_knows_and_the_conflict(repo, store, web, conflicted):
    assert "Nothing that <code>main</code> does not already know" in web.get("/branches").text  # just merged
    Store.open(str(repo), "feature").add("rejection", "Retry forever", reason="it hides outages")
    page = web.get("/branches").text
    feature = page.split('id="branch-feature"')[1]
    assert "What <code>feature</code> knows that <code>main</code> does not yet" in feature
    assert "Retry forever" in feature and "(because: it hides outages)" in feature
    box = page.split(f'id="conflict-{conflicted}"')[1]
    assert "Timeouts are 60 seconds" in box and "Timeouts are 10 seconds" in box and "Timeouts are 30 seconds" in box
    assert 'name="take" value="ours"' in box and 'name="take" value="theirs"' in box


def test_resolve_keeps_the_chosen_side_and_clears_the_conflict(repo, store, web, conflicted):
    page = web.get("/branches").text
    r = web.post("/resolve", data={"csrf": csrf(page), "branch": "main", "id": conflicted, "take": "theirs"})
    assert r.status_code == 303
    after = web.get(r.headers["location"]).text
    assert f"Resolved the conflict in {conflicted}." in after and f'id="conflict-{conflicted}"' not in after
    assert Store.open(str(repo)).get(conflicted).text == "Timeouts are 10 seconds"
    log = memory_log(repo)
    assert log.startswith("Test Human <human@example.com>\nresolve decision:") and "Memory-Source: web-ui" in log
    again = web.post("/resolve", data={"csrf": csrf(page), "branch": "main", "id": conflicted, "take": "theirs"})
    assert again.status_code == 400 and "no unresolved conflict" in again.text


def test_a_resolve_form_opened_before_the_conflict_changed_is_refused_and_shows_the_new_one(repo, store, web,
                                                                                           conflicted):
    """The choice was made between the two versions the page showed: settled elsewhere and then in conflict
    again on the same memory, the new conflict is shown first, never settled with a side nobody saw."""
    from gitmem.merge import merge_into, resolve

    page = web.get("/branches").text
    resolve(store, conflicted, take="ours")  # settled elsewhere...
    feature = Store.open(str(repo), "feature")
    feature.edit(conflicted, text="Timeouts are 5 seconds")
    store.edit(conflicted, text="Timeouts are 90 seconds")
    assert [c.id for c in merge_into(store, feature.own_tip()).conflicts] == [conflicted]  # ...and in conflict again
    form = {"csrf": csrf(page), "branch": "main", "id": conflicted, "take": "theirs", "seen": seen(page)}
    r = web.post("/resolve", data=form)
    assert r.status_code == 409 and "changed since" in r.text
    assert "Timeouts are 5 seconds" in r.text and "Timeouts are 90 seconds" in r.text
    assert Store.open(str(repo)).get(conflicted).text == "Timeouts are 90 seconds"  # nothing settled
    r = web.post("/resolve", data={**form, "seen": seen(r.text)})
    assert r.status_code == 303 and Store.open(str(repo)).get(conflicted).text == "Timeouts are 5 seconds"


# --- audit trail -----------------------------------------------------------------------------


def test_audit_trail_lists_every_branch_newest_first_filtered_and_paged(repo, store, web):
    from gitmem.web.app import PAGE_SIZE

    for i in range(PAGE_SIZE + 5):
        store.add("fact", f"main fact {i}", author=AGENT if i % 2 else None, source="mcp:claude" if i % 2 else "cli")
    git(repo, "branch", "feature")
    Store.open(str(repo), "feature").add("fact", "feature fact", source="hook")
    first = web.get("/audit").text
    rows = re.findall(r"<tr><td><time>.*?</tr>", first, re.S)
    assert len(rows) == PAGE_SIZE
    assert "feature fact" in rows[0] and "<td>feature</td>" in rows[0]  # newest first, on its branch
    assert "<td>feature, main</td>" in rows[1]  # history shared by both branches, listed once
    assert 'rel="next"' in first and 'rel="prev"' not in first
    second = web.get("/audit", params={"page": 2}).text
    rest = re.findall(r"<tr><td><time>.*?</tr>", second, re.S)
    assert len(rest) == PAGE_SIZE + 6 - PAGE_SIZE and 'rel="next"' not in second and "main fact 0" in rest[-1]
    agents = re.findall(r"<tr><td><time>.*?</tr>", web.get("/audit", params={"kind": "agent"}).text, re.S)
    assert len(agents) == (PAGE_SIZE + 5) // 2 and all("kind-agent" in r for r in agents)
    hooks = re.findall(r"<tr><td><time>.*?</tr>", web.get("/audit", params={"source": "hook"}).text, re.S)
    assert len(hooks) == 1 and "feature fact" in hooks[0]
    assert "No writes match" in web.get("/audit", params={"until": "2000-01-01"}).text
    assert web.get("/audit", params={"since": "yesterday"}).status_code == 400


def test_audit_trail_says_why_a_memory_was_retracted(repo, store, web):
    """The memory's page and `gitmem log` say why; the trail of every write said only that it was."""
    w = store.add("fact", "The API is v1")
    store.retract(w.memory.id, reason="v2 <shipped>")
    rows = re.findall(r"<tr><td><time>.*?</tr>", web.get("/audit").text, re.S)
    assert "<td>retract</td><td>retract fact: The API is v1<p class=\"reason\">Because: v2 &lt;shipped&gt;</p></td>" \
        in rows[0]
    assert "Because" not in rows[1]  # the add gave no reason


# --- cost --------------------------------------------------------------------------------


def test_cost_page_says_what_is_missing_before_any_run(repo, web):
    page = web.get("/cost").text
    assert "No demo run is recorded in this repository yet" in page and "gitmem demo cache-ttl" in page
    assert "<svg" not in page


@pytest.fixture(scope="module")
def demo_run():
    from gitmem.demo import run_demo

    return run_demo(runs=1).run


def test_cost_page_shows_the_last_run_bill_and_the_chart_one_line_per_policy(repo, store, web, demo_run):
    from gitmem.bill import POLICY_LABELS, make_bill, record_run
    from gitmem.policy import FIXED

    record_run(store, demo_run)
    page = web.get("/cost").text
    bill = make_bill(demo_run)
    assert f"Backend <strong>{bill.backend}</strong>" in page
    for p in bill.policies:
        assert f"<tr><th>{POLICY_LABELS[p.policy]}</th><td>${p.phases['session1']:.4f}</td>" in page
    svg = page.split("<svg", 1)[1].split("</svg>", 1)[0]
    assert svg.count("<polyline") == len(FIXED)
    assert len(re.findall(r"<tr><th>[\d.]+ min</th>", page)) == len(bill.table)


def test_cost_page_shows_the_last_ask(repo, store, web):
    from gitmem.bill import record_request

    record_request(store, {"command": "ask", "backend": "emulator", "model": "claude-haiku-4-5", "question": "Why <b>?",
                           "usage": {"input_tokens": 12, "output_tokens": 3}, "cost": {"total": 0.000027},
                           "time": "2026-12-02T10:00:00Z", "memory_commit": None})
    page = web.get("/cost").text
    assert "Last request (<code>gitmem ask</code>)" in page and "Why &lt;b&gt;?" in page and "$0.000027" in page


def test_cost_page_shows_a_failed_request_that_has_no_usage(repo, store, web):
    from gitmem.bill import record_request

    record_request(store, {"command": "router", "backend": "api", "model": "claude-haiku-4-5", "status": 502,
                           "usage": None, "cost": None, "time": "2026-12-02T10:00:00Z"})
    page = web.get("/cost")
    assert page.status_code == 200 and "Last request (<code>gitmem router</code>)" in page.text


@pytest.mark.parametrize("line", ['[1, 2]', '{"usage": null, "cost": {"total": "x"}}'])
def test_cost_page_reports_a_request_log_it_cannot_read(repo, store, web, demo_run, line):
    from gitmem.bill import record_run, requests_path

    record_run(store, demo_run)
    with open(requests_path(store), "w") as f:
        f.write(line + "\n")
    page = web.get("/cost")
    assert page.status_code == 200
    assert "requests.jsonl line 1 is not a request gitmem recorded" in page.text
    assert "Last demo run" in page.text  # the run is still billed


@pytest.mark.parametrize("text", ["[1, 2]", "{", '"x"'])
def test_cost_page_reports_a_run_file_it_cannot_read(repo, store, web, text):
    from gitmem.bill import record_request, runs_dir

    record_request(store, {"command": "ask", "backend": "emulator", "model": "claude-haiku-4-5", "question": "Why?",
                           "usage": {"input_tokens": 12, "output_tokens": 3}, "cost": {"total": 0.000027}})
    runs = Path(runs_dir(store))
    runs.mkdir(parents=True)
    (runs / "20260101T000000Z.001-cache-ttl.json").write_text(text)
    page = web.get("/cost")
    assert page.status_code == 200 and "20260101T000000Z.001-cache-ttl.json" in page.text
    assert "Last request (<code>gitmem ask</code>)" in page.text  # the request is still shown


# --- security ----------------------------------------------------------------------------


@pytest.mark.parametrize("base", ["http://evil.example:8737", "http://127.0.0.1.evil.example", "http://10.0.0.5"])
def test_foreign_host_is_refused_for_pages_and_writes(repo, base):
    c = client(repo, base)
    assert c.get("/memory").status_code == 403
    assert "is not this machine's loopback address" in c.get("/memory").text
    token = client(repo).app.state.csrf_token  # even with a valid token
    assert c.post("/add", data={"csrf": token, "type": "fact", "text": "x"}).status_code == 403
    assert git(repo, "for-each-ref", "refs/memory/") == ""


def test_only_a_loopback_host_with_at_most_a_numeric_port_is_served(repo, web):
    for host in LOOPBACK_HOSTS:
        assert web.get("/memory", headers={"Host": host}).status_code == 200, host
    for host in FOREIGN_HOSTS:
        r = web.get("/memory", headers={"Host": host})
        assert r.status_code == 403 and "is not this machine's loopback address" in r.text, host
    for origin in ("http://127.0.0.1:x@evil", "http://[::1]evil", "http://[::1", "http://127.0.0.1:8737/path"):
        r = web.post("/add", data={"csrf": web.app.state.csrf_token, "type": "fact", "text": "x"},
                     headers={"Origin": origin})
        assert r.status_code == 403 and "Origin" in r.text, origin
    assert git(repo, "for-each-ref", "refs/memory/") == ""


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://127.0.0.1.evil.example:8737",
                                    "http://127.0.0.1:3000", "https://127.0.0.1:8737", "http://localhost:8737"])
def test_foreign_origin_is_refused(repo, web, origin):
    """Another port of this machine (a dev server, a tool's page) is another site: only the UI's own pages post."""
    token = csrf(web.get("/memory").text)
    r = web.post("/add", data={"csrf": token, "type": "fact", "text": "x"}, headers={"Origin": origin})
    assert r.status_code == 403 and "Origin" in r.text
    assert git(repo, "for-each-ref", "refs/memory/") == ""


@pytest.mark.parametrize("base", ["http://localhost:8737", "http://[::1]:8737", "http://127.0.0.1"])
def test_loopback_names_and_a_same_origin_post_are_accepted(repo, base):
    c = client(repo, base)
    token = csrf(c.get("/memory").text)
    r = c.post("/add", data={"csrf": token, "type": "fact", "text": "local"}, headers={"Origin": base})
    assert r.status_code == 303


@pytest.mark.parametrize("action,extra", [("/add", {"type": "fact", "text": "x"}),
                                          ("/supersede", {"id": "0000000000000000", "text": "x"}),
                                          ("/retract", {"id": "0000000000000000"}),
                                          ("/resolve", {"id": "0000000000000000", "take": "ours"})])
@pytest.mark.parametrize("token", [None, "", "wrong"])
def test_every_write_needs_the_csrf_token(repo, web, action, extra, token):
    data = {"branch": "main", **extra}
    if token is not None:
        data["csrf"] = token
    r = web.post(action, data=data)
    assert r.status_code == 403 and "CSRF token" in r.text
    assert git(repo, "for-each-ref", "refs/memory/") == ""


def test_every_write_form_carries_the_token(repo, store, web, conflicted):
    token = web.app.state.csrf_token
    pages = [web.get("/memory").text, web.get(f"/memory/{conflicted}").text, web.get("/branches").text]
    forms = [f for page in pages for f in re.findall(r'<form method="post".*?</form>', page, re.S)]
    assert len(forms) >= 5  # add, supersede, retract, keep ours, keep theirs
    assert all(f'name="csrf" value="{token}"' in f for f in forms)


def test_each_server_has_its_own_token(repo):
    assert client(repo).app.state.csrf_token != client(repo).app.state.csrf_token


def test_flash_messages_echo_only_well_formed_ids(repo, web):
    assert "Added" not in web.get("/memory", params={"added": "<b>pwned</b>"}).text


# --- entry points ----------------------------------------------------------------------------


def test_cli_help_and_import_stay_light():
    out = subprocess.run([sys.executable, "-c", "import sys, gitmem.cli; print('starlette' in sys.modules)"],
                         capture_output=True, text=True, cwd=str(ROOT), check=True)
    assert out.stdout.strip() == "False"


def test_ui_help_teaches(tmp_path):
    out = gitmem(tmp_path, "ui", "--help").stdout
    assert "127.0.0.1" in out and "Example: gitmem ui" in out and "--port" in out


def test_entry_points_refuse_a_directory_that_is_not_a_repository(tmp_path):
    for args in (["-m", "gitmem.web", str(tmp_path), "--port", "1"], ["-m", "gitmem", "-C", str(tmp_path), "ui"]):
        out = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=str(tmp_path),
                             env={"PYTHONPATH": str(ROOT), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
        assert out.returncode == 1 and "Error:" in out.stderr, args
        assert "not a git repository" in out.stderr.lower() or "repository" in out.stderr.lower()



def test_a_form_body_over_the_limit_is_refused_while_it_streams_not_after_it_is_read(repo):
    """Driven at the ASGI level, the way a server hands the app a body in chunks: a body with no
    Content-Length is refused once the limit is passed, with most of it never read; a declared
    length over the limit is refused before the first chunk."""
    import anyio

    from gitmem.web.app import MAX_FORM_BYTES

    app = create_app(str(repo))
    chunk = b"x" * 65536
    total = 160  # 10 MiB

    def scope(headers):
        return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                "scheme": "http", "path": "/add", "raw_path": b"/add", "query_string": b"", "root_path": "",
                "headers": [(b"host", b"127.0.0.1:8737"),
                            (b"content-type", b"application/x-www-form-urlencoded")] + headers,
                "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8737)}

    async def post(headers):
        read = {"chunks": 0}
        sent = []

        async def receive():
            if read["chunks"] >= total:
                return {"type": "http.disconnect"}
            read["chunks"] += 1
            return {"type": "http.request", "body": chunk, "more_body": read["chunks"] < total}

        async def send(message):
            sent.append(message)

        await app(scope(headers), receive, send)
        status = next(m["status"] for m in sent if m["type"] == "http.response.start")
        body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        return status, body, read["chunks"]

    status, body, chunks = anyio.run(post, [])
    assert status == 413 and b"over" in body
    assert chunks <= MAX_FORM_BYTES // len(chunk) + 1 < total
    status, _, chunks = anyio.run(post, [(b"content-length", str(total * len(chunk)).encode())])
    assert (status, chunks) == (413, 0)


def test_a_search_link_to_the_root_keeps_its_query(web, store):
    store.add("rejection", "Use Redis for the job queue", reason="no new stateful services")
    store.add("fact", "Invoices are numbered per year")
    r = web.get("/?q=redis&type=rejection")
    assert r.status_code == 307 and r.headers["location"] == "/memory?q=redis&type=rejection"
    page = web.get(r.headers["location"]).text
    assert "Use Redis for the job queue" in page and "Invoices are numbered" not in page
    assert web.get("/").headers["location"] == "/memory"


def test_the_cost_chart_places_breaks_by_their_length(demo_run):
    from gitmem.bill import make_bill, render_svg

    svg = render_svg(make_bill(demo_run))
    ticks = [float(x) for x in re.findall(r'<line x1="([\d.]+)" x2="[\d.]+" y1="350" y2="355"', svg)]
    minutes = [r.break_minutes for r in make_bill(demo_run).table]
    assert len(ticks) == len(minutes) >= 3
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    assert len(set(round(g) for g in gaps)) > 1  # not one step per category
    # the distance between two breaks grows with the square root of their lengths
    assert (ticks[-1] - ticks[0]) / (ticks[1] - ticks[0]) == pytest.approx(
        (minutes[-1] ** 0.5 - minutes[0] ** 0.5) / (minutes[1] ** 0.5 - minutes[0] ** 0.5), rel=0.01)


def test_pages_and_writes_run_on_the_library_thread(repo, store, web, monkeypatch):
    """Starlette runs each synchronous page and form on whichever worker thread is free: gitmem's work runs
    on one (gitmem.serving.on_library_thread), so its caches fill one malloc arena, as in the MCP server."""
    import threading

    threads = []
    for name in ("summary", "add"):  # the memory page reads the tree's summary, the form adds
        real = getattr(Store, name)
        monkeypatch.setattr(Store, name, lambda self, *a, _real=real, **k: threads.append(
            threading.current_thread().name) or _real(self, *a, **k))
    form = web.get("/memory").text
    r = web.post("/add", data={"csrf": csrf(form), "branch": "main", "type": "fact", "text": "Refunds are idempotent"})
    assert r.status_code == 303 and web.get("/memory").status_code == 200
    assert len(threads) >= 3 and {t.split("_")[0] for t in threads} == {"gitmem-library"}


def test_memory_list_and_page_badge_a_memory_in_conflict_with_a_link_to_resolve_it(repo, store, web, conflicted):
    """A merge left the memory holding one side for now: its card, in the list, in search and on its own page,
    says so and links to the branches page, where the two versions wait for a choice."""
    from gitmem.merge import resolve

    settled = store.add("fact", "Deploys go out on Tuesdays").memory.id
    link = f'href="/branches#conflict-{conflicted}"'
    for page in (web.get("/memory").text, web.get("/memory?q=Timeouts").text, web.get(f"/memory/{conflicted}").text):
        card = page.split(f'data-id="{conflicted}"')[1].split("</article>")[0]
        assert 'class="badge conflict"' in card and link in card
    other = web.get("/memory").text.split(f'data-id="{settled}"')[1].split("</article>")[0]
    assert "badge conflict" not in other
    resolve(store, conflicted, take="ours")
    assert "badge conflict" not in web.get("/memory").text + web.get(f"/memory/{conflicted}").text


@pytest.mark.parametrize("content_type", ["text/plain", None, "multipart/form-data; boundary=x"])
def test_a_write_not_sent_as_a_form_is_refused_before_it_is_read(repo, web, content_type):
    # text/plain is what another site's page can post without a preflight; the token and Origin checks stood
    # alone against it
    page = web.get("/memory").text
    body = f"csrf={csrf(page)}&branch=main&type=fact&text=sent+as+text"
    headers = {"content-type": content_type} if content_type else {}
    r = web.post("/add", content=body, headers=headers)
    assert r.status_code == 415 and "application/x-www-form-urlencoded" in r.text
    assert git(repo, "for-each-ref", "refs/memory/") == ""
