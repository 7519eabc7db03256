"""The web UI in a real headless Chromium, against the real server process (`python -m gitmem.web`).

Needs Debian's ``chromium`` and the ``playwright`` Python package (its own browser download is
never used: we launch the system binary). Skipped with the reason when either is missing.
Screenshots of every page go to test-artifacts/web/ for a person to look at.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from conftest import ROOT, git

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
SHOTS = ROOT / "test-artifacts" / "web"


def _playwright():
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium; .ci/run does it)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright Python package is not installed (pip install playwright)")
    return sync_playwright


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _conflict(repo, store):
    """A feature branch that learned something, and a merge into main that left one conflict."""
    from gitmem import Store
    from gitmem.merge import merge_into
    from gitmem.model import Author

    shared = store.add("convention", "Timeouts are 30 seconds").memory
    git(repo, "branch", "feature")
    feature = Store.open(str(repo), "feature")
    feature.edit(shared.id, text="Timeouts are 10 seconds", author=Author("Claude", "a@example.com", "agent"))
    store.edit(shared.id, text="Timeouts are 60 seconds")
    assert merge_into(store, feature.own_tip()).conflicts
    feature.add("rejection", "Retry payouts forever", reason="it hides outages from on-call")


@pytest.fixture
def server(repo, store):
    """The real server on a free 127.0.0.1 port, over a repository with memory and a recorded demo run."""
    from gitmem.bill import record_run
    from gitmem.demo import run_demo

    store.add("decision", "Use pygit2 for git access", reason="no subprocess per write", tags=["git"])
    store.add("rejection", "Cache memory in Redis", reason="one more service to run for a local tool")
    store.add("fact", "A memory with <script>alert(1)</script> in it renders as text")
    _conflict(repo, store)
    record_run(store, run_demo(runs=1).run)
    with _serve(repo) as address:
        yield address


@contextlib.contextmanager
def _serve(repo, env=None):
    """``python -m gitmem.web`` on a free port over ``repo`` (with ``env`` as its environment, default
    ours): yields its address, stops it after."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "gitmem.web", str(repo), "--port", str(port)],
                            cwd=str(repo), env={**(os.environ if env is None else env), "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"server did not start: {proc.communicate()[0]}")
            time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def page(server):
    sync_playwright = _playwright()
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            tab = browser.new_page(viewport={"width": 1200, "height": 900})
            dialogs = []
            tab.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            yield tab
            assert dialogs == [], "a script ran in the page"
        finally:
            browser.close()


def test_add_a_memory_in_the_browser_and_find_it_in_the_list_in_git_and_on_every_page(repo, server, page):
    page.goto(server + "/memory")
    assert page.locator("h1").inner_text() == "Memory"
    assert page.locator(".reason-rejection").first.inner_text().startswith("Rejected because:")
    assert any("A memory with <script>alert(1)</script> in it" in t for t in page.locator(".memory .title").all_inner_texts())
    page.screenshot(path=str(SHOTS / "memory.png"), full_page=True)

    form = page.locator("#add-form")
    form.locator("select[name=type]").select_option("rejection")
    form.locator("textarea[name=text]").fill("Store memory in a SQL database")
    form.locator("input[name=reason]").fill("git already is the database, and it travels with the code")
    form.locator("input[name=tags]").fill("storage, from-browser")
    with page.expect_navigation():
        form.locator("button[type=submit]").click()
    assert page.locator(".flash").inner_text().startswith("Added ")
    first = page.locator("article.memory").first
    assert "Store memory in a SQL database" in first.inner_text()
    assert "git already is the database" in first.locator(".reason-rejection").inner_text()
    page.screenshot(path=str(SHOTS / "memory-added.png"), full_page=True)

    search = page.locator("form.filters")  # answered by the index, as `gitmem search` is
    search.locator("input[name=q]").fill("sql database")
    with page.expect_navigation():
        search.locator("button[type=submit]").click()
    assert "best match" in page.locator("p.count").inner_text()
    assert "Store memory in a SQL database" in page.locator("article.memory").first.inner_text()
    page.goto(server + "/memory")
    first = page.locator("article.memory").first

    log = git(repo, "log", "-1", "--format=%an <%ae>%n%B", "refs/memory/main")
    assert log.startswith("Test Human <human@example.com>\nadd rejection: Store memory in a SQL database")
    assert "Memory-Source: web-ui" in log

    with page.expect_navigation():
        first.locator("a.title").click()
    assert "History" in page.locator("main").inner_text()
    assert "type: rejection" in page.locator("pre.yaml").inner_text()
    page.screenshot(path=str(SHOTS / "one-memory.png"), full_page=True)

    page.goto(server + "/audit")
    assert "Store memory in a SQL database" in page.locator("table.audit tbody tr").first.inner_text()
    page.screenshot(path=str(SHOTS / "audit.png"), full_page=True)

    page.goto(server + "/branches")
    assert "Retry payouts forever" in page.locator("section.branch:has(#branch-feature) ul.diff-list").inner_text()
    box = page.locator(".conflict")
    assert "Timeouts are 10 seconds" in box.inner_text() and "Timeouts are 60 seconds" in box.inner_text()
    page.screenshot(path=str(SHOTS / "branches.png"), full_page=True)
    with page.expect_navigation():
        box.locator("button", has_text="Keep theirs").click()
    assert page.locator(".flash").inner_text().startswith("Resolved the conflict in ")
    assert page.locator(".conflict").count() == 0
    assert "Memory-Source: web-ui" in git(repo, "log", "-1", "--format=%B", "refs/memory/main")
    page.screenshot(path=str(SHOTS / "branches-resolved.png"), full_page=True)

    page.goto(server + "/cost")
    chart = page.locator("figure.chart svg")
    assert chart.count() == 1 and chart.bounding_box()["width"] > 300
    assert chart.locator("polyline").count() == 4  # one line per policy
    assert "Last demo run" in page.locator("main").inner_text()
    page.screenshot(path=str(SHOTS / "cost.png"), full_page=True)


def test_the_add_form_sent_again_after_going_back_adds_nothing(repo, server):
    """Back restores the page as it was (a desktop Chrome keeps it in its back/forward cache, which
    Playwright turns off unless told), with the text typed; clicking Add on it again sends the same form."""
    sync_playwright = _playwright()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True,
                                    ignore_default_args=["--disable-back-forward-cache"])
        try:
            page = browser.new_page()
            page.goto(server + "/memory")
            form = page.locator("#add-form")
            form.locator("textarea[name=text]").fill("Sent from the browser once")
            with page.expect_navigation():
                form.locator("button[type=submit]").click()
            added = page.locator(".flash").inner_text()
            page.go_back(wait_until="commit")
            assert form.locator("textarea[name=text]").input_value() == "Sent from the browser once"
            with page.expect_navigation():
                form.locator("button[type=submit]").click()
            assert page.locator(".flash").inner_text() == added
        finally:
            browser.close()
    assert git(repo, "log", "--format=%s", "refs/memory/main").count("Sent from the browser once") == 1


@pytest.mark.parametrize("action", ["add", "supersede"])
def test_a_form_on_another_site_cannot_write(repo, store, server, page, action):
    """A page on a foreign origin posting to the UI (cross-site request forgery): the browser sends
    that page's Origin and the form has no token, so the server refuses it and nothing is written."""
    before = git(repo, "rev-parse", "refs/memory/main").strip()
    target = store.list(type="decision")[0].id  # what a supersede would replace
    evil = (f'<form method="post" action="{server}/{action}"><input name="type" value="fact">'
            f'<input name="id" value="{target}"><input name="text" value="planted"><input name="csrf" value="guessed">'
            '<button id="go" type="submit">win a prize</button></form>')
    page.route("http://evil.example/**", lambda route: route.fulfill(status=200, content_type="text/html", body=evil))
    page.goto("http://evil.example/")
    with page.expect_response(f"{server}/{action}") as response:
        page.click("#go")
    assert response.value.status == 403
    assert "Origin 'http://evil.example' is not this machine's loopback address" in page.locator("body").inner_text()
    assert git(repo, "rev-parse", "refs/memory/main").strip() == before
    page.wait_for_load_state("load")  # the refusal came from another site's process: let its document settle
    page.screenshot(path=str(SHOTS / f"refused-{action}.png"))


def test_supersede_a_memory_in_the_browser_and_follow_the_links_both_ways(repo, store, server, page):
    """The memory's page holds a supersede form filled with the memory as it is: changing the text and sending
    it opens the new memory's page, which links back to the one it replaced, which links forward to it."""
    old = next(m for m in store.list() if m.text == "Use pygit2 for git access")
    page.goto(server + f"/memory/{old.id}")
    form = page.locator("#supersede-form")
    assert not form.is_visible()  # closed until asked for: the page reads as it did
    page.locator("details.supersede summary").click()
    assert form.locator("textarea[name=text]").input_value() == "Use pygit2 for git access"
    assert form.locator("input[name=reason]").input_value() == "no subprocess per write"
    assert form.locator("input[name=tags]").input_value() == "git"
    form.locator("textarea[name=text]").fill("Use pygit2 for git access, and libgit2 1.9 or newer")
    page.screenshot(path=str(SHOTS / "supersede.png"), full_page=True)
    with page.expect_navigation():
        form.locator("button[type=submit]").click()
    assert page.locator(".flash").inner_text() == f"Superseded {old.id}."
    card = page.locator("article.memory")
    assert "Use pygit2 for git access, and libgit2 1.9 or newer" in card.inner_text()
    assert "no subprocess per write" in card.inner_text() and "#git" in card.inner_text()
    new_id = card.get_attribute("data-id")
    assert new_id != old.id and page.locator("#supersede-form").count() == 1  # the new one can be replaced in turn
    page.screenshot(path=str(SHOTS / "superseded.png"), full_page=True)
    with page.expect_navigation():
        page.locator("main p", has_text="Supersedes:").locator("a").click()
    assert page.url.startswith(server + f"/memory/{old.id}")
    assert "superseded" in page.locator("article.memory .badge.status").inner_text().lower()
    assert page.locator("#supersede-form").count() == 0 and page.locator("form.retract").count() == 0
    with page.expect_navigation():
        page.locator("main p", has_text="Superseded by:").locator("a").click()
    assert page.url.startswith(server + f"/memory/{new_id}")
    log = git(repo, "log", "-1", "--format=%an <%ae>%n%B", "refs/memory/main")
    assert log.startswith("Test Human <human@example.com>\nsupersede decision: Use pygit2 for git access, and")
    assert "Memory-Source: web-ui" in log and f"Supersedes: {old.id}" in log


def test_an_over_long_supersede_is_refused_in_the_forms_words_and_writes_nothing(repo, store, server, page):
    """The text box takes 16,384 characters, the server 16,384 bytes: 8,193 é are under the first and over the
    second, so the browser sends them and the server refuses them, with the text kept to shorten."""
    from gitmem.model import MAX_TEXT_BYTES

    old = next(m for m in store.list() if m.text == "Use pygit2 for git access")
    before = git(repo, "rev-parse", "refs/memory/main")
    page.goto(server + f"/memory/{old.id}")
    page.locator("details.supersede summary").click()
    wide = "é" * (MAX_TEXT_BYTES // 2 + 1)
    page.locator("#supersede-form textarea[name=text]").fill(wide)
    with page.expect_navigation():
        page.locator("#supersede-form button[type=submit]").click()
    assert page.locator("p.error").inner_text() == \
        f"Not superseded: Text: {MAX_TEXT_BYTES + 2} bytes is over the {MAX_TEXT_BYTES}-byte limit"
    assert page.locator("#supersede-form").is_visible()  # open again, with what was typed
    assert page.locator("#supersede-form textarea[name=text]").input_value() == wide
    assert git(repo, "rev-parse", "refs/memory/main") == before
    page.screenshot(path=str(SHOTS / "supersede-refused.png"), full_page=True)


def test_a_retracted_memory_offers_no_supersede_form(repo, store, server, page):
    old = next(m for m in store.list() if m.text == "Use pygit2 for git access")
    page.goto(server + f"/memory/{old.id}")
    assert page.locator("#supersede-form").count() == 1
    page.locator("form.retract input[name=reason]").fill("we call git directly now")
    with page.expect_navigation():
        page.locator("form.retract button[type=submit]").click()
    assert page.locator(".flash").inner_text() == f"Retracted {old.id}."
    assert page.locator("#supersede-form").count() == page.locator("details.supersede").count() == 0
    assert "Supersede" not in page.locator("main").inner_text().split("YAML")[0]


def test_without_a_git_identity_the_pages_still_read_and_a_write_says_what_to_set(repo, store):
    """Reading needs no identity (`gitmem list` has none either): the pages show the memory, and the forms say
    a write cannot be recorded until there is one; the Add button then writes nothing."""
    sync_playwright = _playwright()
    m = store.add("decision", "Use pygit2 for git access", reason="no subprocess per write").memory
    git(repo, "config", "--unset", "user.email")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_EMAIL")}
    before = git(repo, "rev-parse", "refs/memory/main")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page = browser.new_page()
            with _serve(repo, env) as server:
                for path in ("/memory", f"/memory/{m.id}", "/branches"):
                    assert page.goto(server + path).status == 200, path
                page.goto(server + f"/memory/{m.id}")
                assert "Use pygit2 for git access" in page.locator("article.memory").inner_text()
                assert "no git identity" in page.locator("form.retract .hint").inner_text()
                page.goto(server + "/memory")
                assert "no git identity" in page.locator("#add-form .hint").inner_text()
                form = page.locator("#add-form")
                form.locator("textarea[name=text]").fill("Written by nobody")
                with page.expect_navigation():
                    form.locator("button[type=submit]").click()
                assert page.locator("p.error").inner_text().startswith("Not added: who is writing? no git identity")
                assert page.locator("textarea[name=text]").input_value() == "Written by nobody"
                page.screenshot(path=str(SHOTS / "no-identity.png"), full_page=True)
        finally:
            browser.close()
    assert git(repo, "rev-parse", "refs/memory/main") == before


def test_lines_typed_in_the_text_box_are_stored_as_the_cli_stores_them(repo, server, page):
    """A browser sends every line break of a form as CRLF (HTML's form encoding): stored as sent, a memory
    written on the page held \\r\\n where the same text from `gitmem add` holds \\n."""
    from gitmem import Store

    page.goto(server + "/memory")
    form = page.locator("#add-form")
    form.locator("select[name=type]").select_option("fact")
    form.locator("textarea[name=text]").fill("Deploys go out on Tuesdays\nnever on Fridays")
    with page.expect_navigation():
        form.locator("button[type=submit]").click()
    added = page.locator(".flash").inner_text().split()[1].rstrip(".")
    assert Store.open(str(repo)).get(added).text == "Deploys go out on Tuesdays\nnever on Fridays"


def test_a_long_unbroken_word_wraps_inside_its_card_not_past_the_window(repo, store, server, page):
    """A URL, a hash or a deep path in a memory is one word: the page widened to fit it (3,000 pixels for a
    300-character URL), so every page scrolled sideways and the cards' text ran off the screen."""
    m = store.add("fact", "The spec is at https://example.com/" + "a" * 300, title="T" + "x" * 150,
                  paths=["src/" + "d" * 200 + ".py"]).memory
    for path in ("/memory", f"/memory/{m.id}", "/audit"):
        page.goto(server + path)
        assert page.evaluate("document.documentElement.scrollWidth") <= 1200, path


def test_older_and_newer_links_lead_through_a_long_memory_with_its_filter(repo):
    """The page showed the newest 50 and no way to the others: a person filters, clicks "older" to the
    second page of that filter and "newer" back to the first."""
    from conftest import seeded
    from gitmem.web.app import LIST_LIMIT

    sync_playwright = _playwright()
    SHOTS.mkdir(parents=True, exist_ok=True)
    store = seeded(repo, 2 * LIST_LIMIT + 10)  # facts, and a convention first
    facts = [m.text for m in store.list(type="fact")][::-1]
    with sync_playwright() as p, _serve(repo) as server:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(server + "/memory")
            page.locator("form.filters select[name=type]").select_option("fact")
            with page.expect_navigation():
                page.locator("form.filters button[type=submit]").click()
            assert page.locator("p.count").inner_text() == f"The newest {LIST_LIMIT} of {len(facts)} memories."
            assert page.locator("nav.pager a[rel=prev]").count() == 0
            with page.expect_navigation():
                page.locator("nav.pager a[rel=next]").click()
            texts = page.locator("article.memory .title").all_inner_texts()
            assert texts == facts[LIST_LIMIT:2 * LIST_LIMIT]
            assert page.locator("p.count").inner_text().startswith(f"{LIST_LIMIT} of {len(facts)} memories, created")
            assert page.locator("form.filters select[name=type]").input_value() == "fact"  # the filter came along
            page.screenshot(path=str(SHOTS / "memory-older.png"), full_page=True)
            with page.expect_navigation():
                page.locator("nav.pager a[rel=prev]").click()
            assert page.locator("article.memory .title").all_inner_texts() == facts[:LIST_LIMIT]
            assert page.locator("nav.pager a[rel=prev]").count() == 0
        finally:
            browser.close()


def _supersede_in(tab, server, memory_id, text):
    """Open ``memory_id``'s page in ``tab`` and type ``text`` into its supersede form, not sent yet."""
    tab.goto(server + f"/memory/{memory_id}")
    tab.locator("details.supersede summary").click()
    tab.locator("#supersede-form textarea[name=text]").fill(text)


def test_the_supersede_form_sent_twice_is_answered_with_the_one_memory_it_wrote(repo, store, server, page):
    """The same form sent again (a double click, a second tab holding the same edit) landed on the old memory's
    page with "Not superseded: ... is already superseded" after the first send had written it: the person is told
    the edit failed when it did not. It is answered as the first send was, and nothing is written."""
    old = next(m for m in store.list() if m.text == "Use pygit2 for git access")
    other = page.context.browser.new_page()
    for tab in (page, other):
        _supersede_in(tab, server, old.id, "Use pygit2 for git access, and libgit2 1.9 or newer")
    with page.expect_navigation():
        page.locator("#supersede-form button[type=submit]").click()
    new_id = page.locator("article.memory").get_attribute("data-id")
    tip = git(repo, "rev-parse", "refs/memory/main")
    with other.expect_navigation():
        other.locator("#supersede-form button[type=submit]").click()
    assert other.locator("p.error").count() == 0, other.locator("p.error").inner_text()
    assert other.locator(".flash").inner_text() == f"Superseded {old.id}."
    assert other.locator("article.memory").get_attribute("data-id") == new_id
    assert git(repo, "rev-parse", "refs/memory/main") == tip


def test_a_supersede_from_a_second_tab_shows_the_new_version_and_keeps_what_was_typed(repo, store, server, page):
    """Two tabs edit one memory: the first supersedes it; the second's send was refused on the old memory's page,
    which (superseded) shows no form, so the second person's text was thrown away. It is shown the memory that
    replaced it, with the text typed in a form for that one (409), one line saying why, and nothing written."""
    old = next(m for m in store.list() if m.text == "Use pygit2 for git access")
    other = page.context.browser.new_page()
    _supersede_in(page, server, old.id, "Use pygit2, pinned to 1.15")
    _supersede_in(other, server, old.id, "Use pygit2, and call git for gc")
    with page.expect_navigation():
        page.locator("#supersede-form button[type=submit]").click()
    first = page.locator("article.memory").get_attribute("data-id")
    tip = git(repo, "rev-parse", "refs/memory/main")
    with other.expect_navigation() as sent:
        other.locator("#supersede-form button[type=submit]").click()
    assert sent.value is not None and git(repo, "rev-parse", "refs/memory/main") == tip
    error = other.locator("p.error").inner_text()
    assert "\n" not in error and error.startswith(f"Not superseded: {old.id} was superseded by {first}"), error
    assert other.locator("article.memory").get_attribute("data-id") == first
    assert "Use pygit2, pinned to 1.15" in other.locator("article.memory").inner_text()
    assert other.locator("#supersede-form").is_visible()
    assert other.locator("#supersede-form textarea[name=text]").input_value() == "Use pygit2, and call git for gc"
    other.screenshot(path=str(SHOTS / "supersede-second-tab.png"), full_page=True)
    with other.expect_navigation():  # sent again, it replaces the version it now shows
        other.locator("#supersede-form button[type=submit]").click()
    assert other.locator(".flash").inner_text() == f"Superseded {first}."
    assert "Use pygit2, and call git for gc" in other.locator("article.memory").inner_text()
