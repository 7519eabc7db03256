"""The audit trail across memory branches (gitmem.audit), checked against the real `git log`."""

from __future__ import annotations

from conftest import git
from gitmem import Store
from gitmem.audit import code_commits, trail, versions
from gitmem.model import Author

AGENT = Author("Claude", "agent@example.com", "agent")


def all_pages(repo, **filters):
    out, offset = [], 0
    while True:
        page = trail(repo, offset=offset, limit=3, **filters)
        out += page.entries
        if not page.more:
            return out
        offset += 3


def test_pages_cover_every_write_on_every_branch_once_in_git_log_order(repo, store):
    for i in range(4):
        store.add("fact", f"main {i}")
    git(repo, "branch", "feature")
    feature = Store.open(str(repo), "feature")
    for i in range(3):
        feature.add("fact", f"feature {i}")
        store.add("fact", f"main again {i}")
    entries = all_pages(store.repo)
    expected = git(repo, "log", "--date-order", "--format=%H", "refs/memory/main",
                   "refs/memory/feature").split()
    assert [e.change.commit for e in entries] == expected


def test_each_write_names_the_branches_that_hold_it_across_forks_and_merges(repo, store):
    from gitmem.merge import merge_into

    before = store.add("fact", "before the fork").commit
    git(repo, "branch", "feature")
    feature = Store.open(str(repo), "feature")
    only_feature = feature.add("fact", "feature only").commit
    only_main = store.add("fact", "main only").commit
    merged = merge_into(store, feature.own_tip()).commit
    branches = {e.change.commit: e.branches for e in all_pages(store.repo)}
    assert branches[before] == ("feature", "main")
    assert branches[only_feature] == ("feature", "main")  # merged into main
    assert branches[only_main] == ("main",)
    assert branches[merged] == ("main",)
    assert [e.change.commit for e in all_pages(store.repo, branches=["feature"])] == [only_feature, before]


def test_filters_by_author_kind_source_and_time(repo, store):
    human = store.add("fact", "by a person", source="cli").commit
    agent = store.add("fact", "by an agent", author=AGENT, source="mcp:cursor").commit
    when = int(git(repo, "log", "-1", "--format=%ct", agent).strip())
    assert [e.change.commit for e in all_pages(store.repo, author_kind="agent")] == [agent]
    assert [e.change.commit for e in all_pages(store.repo, source="mcp")] == [agent]
    assert [e.change.commit for e in all_pages(store.repo, source="cli")] == [human]
    assert all_pages(store.repo, since=when + 1) == []
    assert len(all_pages(store.repo, until=when)) == 2 and all_pages(store.repo, until=when - 3600) == []


def test_an_empty_repository_has_an_empty_trail(repo):
    page = trail(Store.open(str(repo)).repo)
    assert page.entries == [] and not page.more


def test_versions_give_the_yaml_before_and_after_each_change(store):
    w = store.add("decision", "Use tabs")
    store.edit(w.memory.id, text="Use spaces")
    newest, oldest = versions(store, w.memory.id)
    assert (newest.change.op, oldest.change.op) == ("edit", "add")
    assert oldest.before == "" and "text: Use tabs" in oldest.after
    assert "-text: Use tabs" in newest.diff() and "+text: Use spaces" in newest.diff()


def test_code_commits_are_looked_up_or_reported_missing(repo, store):
    head = git(repo, "rev-parse", "HEAD").strip()
    found, missing = code_commits(store.repo, [head, "f" * 40])
    assert (found.found, found.summary, found.author) == (True, "initial", "Test Human")
    assert not missing.found


def test_a_retract_reason_cannot_forge_trailers_nor_drive_the_terminal_of_git_log(repo, store):
    """`git log refs/memory/main` is the journal: a reason holding trailer lines must not change who, which
    tool, which op or which memories the trail reads (nor a Fork-Point sync trusts), and an escape sequence in
    memory text or a reason must reach the subject and body as inert text, since git prints them raw."""
    from gitmem.audit import change_from_commit, fork_in

    other = store.add("decision", "Keep the queue in Postgres", reason="no new service").memory
    m = store.add("note", "\x1b]0;owned\x07\x1b[2Jclean \u202eslate").memory
    forged = ("obsolete\n\nMemory-Op: add\nMemory-Source: mcp:cursor\nAuthor-Kind: agent\n"
              f"Memory-Id: {other.id}\nFork-Point: {'0' * 40}\n\x1b[31m")
    w = store.retract(m.id, reason=forged)

    change = change_from_commit(store.repo[w.commit])
    assert (change.op, change.source, change.author.kind, change.memory_ids) == ("retract", "api", "human", (m.id,))
    assert change.reason == forged.replace("\x1b", "\\x1b")  # read back whole, as inert text
    assert fork_in(store.repo[w.commit].message) is None
    journal = git(repo, "log", "--format=%B", "refs/memory/main")
    assert "\x1b" not in journal and "\x07" not in journal and "\u202e" not in journal
    assert "obsolete" in journal and "\\x1b]0;owned" in journal
