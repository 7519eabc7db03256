"""The store against real repositories: one commit per write, CAS, layout, history."""

from __future__ import annotations

import os

import pytest
import yaml

from conftest import DAMAGES, git
from gitmem import Author, GitmemError, InvalidMemory, NotARepository, NotFound, Store
from gitmem.model import TYPES, Memory, dump_yaml, memory_path
from gitmem.doctor import doctor

AGENT = Author("claude", "agent@example.com", "agent")


def test_add_then_get_round_trips_every_type(store):
    for type_ in TYPES:
        kw = {"reason": "it was slow"} if type_ == "rejection" else {}
        paths = ["README.md"] if type_ == "file" else []
        w = store.add(type_, f"a {type_}", paths=paths, **kw)
        assert store.get(w.memory.id) == w.memory
    assert sorted(m.type for m in store.list()) == sorted(TYPES)


def test_each_write_is_one_commit_with_author_and_trailers(store, repo):
    w1 = store.add("decision", "Use Postgres", reason="team knows it", author=AGENT, source="mcp:claude-code")
    store.edit(w1.memory.id, text="Use Postgres 16")
    store.retract(w1.memory.id, reason="moved to sqlite")
    lines = git(repo, "log", "--format=%an|%ae|%cn|%s", "refs/memory/main").splitlines()
    assert len(lines) == 3
    assert lines[-1] == "claude|agent@example.com|gitmem|add decision: Use Postgres"
    assert lines[0].startswith("Test Human|human@example.com|gitmem|retract decision")
    body = git(repo, "log", "-1", "--format=%B", w1.commit)
    assert f"Memory-Id: {w1.memory.id}" in body
    assert "Memory-Source: mcp:claude-code" in body and "Author-Kind: agent" in body
    assert git(repo, "log", "--format=%H", "--author=claude", "refs/memory/main").split() == [w1.commit]
    assert len(git(repo, "log", "--format=%H", "--grep=Memory-Op: edit", "refs/memory/main").split()) == 1


@pytest.mark.parametrize("author", [Author("x"), Author("x", ""), Author("x", "not-an-email")])
def test_an_author_without_an_email_is_refused_not_signed_with_a_made_up_one(store, repo, author):
    """As `git commit --author x` and `gitmem add --author x` refuse: neither x <> in the memory nor
    x <unknown@localhost> on the commit, and nothing written."""
    with pytest.raises(InvalidMemory, match=r"invalid author.email: '.*' is not an email address"):
        store.add("fact", "who wrote this?", author=author)
    w = store.add("fact", "signed", author=Author("x", "x@example.com"))
    with pytest.raises(InvalidMemory, match="author.email"):
        store.edit(w.memory.id, text="signed again", author=author)
    assert git(repo, "log", "--format=%an <%ae>", "refs/memory/main").splitlines() == ["x <x@example.com>"]


@pytest.mark.skipif(os.name != "posix", reason="file modes")
@pytest.mark.parametrize("shared, readable", [("group", 0o040), ("all", 0o044), ("0640", 0o040)])
def test_a_shared_repositorys_memory_is_readable_by_the_group_whatever_the_umask(tmp_path, shared, readable):
    """`git init --shared=group`: git writes every object and ref group-readable under umask 077; libgit2
    does not, and the teammates' git then failed on the memory ref ("fatal: bad object")."""
    repo = tmp_path / "shared"
    git(tmp_path, "init", "-q", "-b", "main", f"--shared={shared}", str(repo))
    mask = os.umask(0o077)
    try:
        git(repo, "commit", "-q", "--allow-empty", "-m", "initial")
        Store.open(str(repo)).add("fact", "the team shares this repository")
    finally:
        os.umask(mask)
    objects = repo / ".git" / "objects"
    written = [p for p in objects.rglob("*") if p.parent != objects / "info" and p.name != "pack"]
    written.append(repo / ".git" / "refs" / "memory" / "main")
    assert written and all(p.stat().st_mode & readable == readable for p in written), \
        [(str(p), oct(p.stat().st_mode)) for p in written if p.stat().st_mode & readable != readable]


def test_blobs_are_browsable_and_parse_with_safe_load(store, repo):
    w = store.add("convention", "Tests use real git repos", tags=["testing"])
    assert set(git(repo, "show", "refs/memory/main:").split()[2:]) == {"convention/"}
    blob = git(repo, "show", f"refs/memory/main:convention/{w.memory.id[-2]}/{w.memory.id[-1]}/{w.memory.id}.yaml")
    data = yaml.safe_load(blob)
    assert data["type"] == "convention" and data["tags"] == ["testing"] and data["schema"] == 1
    assert Memory.from_dict(data) == w.memory


def test_writes_never_touch_worktree_index_or_code_refs(store, repo):
    (repo / "wip.txt").write_text("uncommitted")
    git(repo, "add", "wip.txt")
    before = (git(repo, "status", "--porcelain"), git(repo, "rev-parse", "HEAD"), git(repo, "for-each-ref", "refs/heads"))
    store.add("fact", "The API is versioned")
    assert (git(repo, "status", "--porcelain"), git(repo, "rev-parse", "HEAD"),
            git(repo, "for-each-ref", "refs/heads")) == before


def test_supersede_is_one_commit_linking_both(store, repo):
    old = store.add("decision", "Deploy on Fridays").memory
    new = store.supersede(old.id, "Never deploy on Fridays").memory
    assert new.supersedes == old.id
    assert store.get(old.id).status == "superseded" and store.get(old.id).superseded_by == new.id
    assert [m.id for m in store.list()] == [new.id]
    assert len(git(repo, "rev-list", "refs/memory/main").split()) == 2


def test_supersede_keeps_a_title_or_reason_given_as_none_and_clears_one_given_empty(store):
    """A None title or reason kept the old one and there was no way to clear it ("" was refused as empty)."""
    old = store.add("decision", "Use pygit2", title="Git access", reason="no subprocess").memory
    kept = store.supersede(old.id, "Use pygit2 1.15").memory
    assert (kept.title, kept.reason) == ("Git access", "no subprocess")
    cleared = store.supersede(kept.id, "Use pygit2 1.16", title="", reason="").memory
    assert (cleared.title, cleared.reason) == (None, None)
    assert (store.get(cleared.id).title, store.get(cleared.id).reason) == (None, None)
    rejection = store.add("rejection", "Use GitPython", reason="spawns git").memory
    with pytest.raises(InvalidMemory, match="needs the reason"):  # a rejection keeps needing one
        store.supersede(rejection.id, "Use GitPython 3", reason="")


def test_a_supersede_decided_on_a_memory_superseded_since_names_its_successor_and_writes_nothing(store, repo):
    """A form sent twice finds its own successor (``same``: answered with it); another person's edit finds the
    first one's (not ``same``): neither writes, and the old memory stays superseded once."""
    from gitmem.errors import Superseded
    from gitmem.model import version

    old = store.add("decision", "Use pygit2", reason="no subprocess", tags=["git"]).memory
    first = store.supersede(old.id, "Use pygit2 1.15", seen=version(old)).memory
    tip = git(repo, "rev-parse", "refs/memory/main")
    for text, same in (("Use pygit2 1.15", True), ("Use pygit2 and git gc", False)):
        with pytest.raises(Superseded) as e:
            store.supersede(old.id, text, seen=version(old))
        assert (e.value.successor, e.value.same) == (first.id, same)
    assert git(repo, "rev-parse", "refs/memory/main") == tip
    with pytest.raises(GitmemError, match="already superseded"):  # without a version seen: as before
        store.supersede(old.id, "Use pygit2 1.15")


def test_a_superseded_file_summary_is_tied_to_the_file_as_it_is_now(store, repo):
    """The successor of a file memory records the file's blob, as an added one does: else it never reads stale."""
    from gitmem.recall import recall

    (repo / "app.py").write_text("print(1)\n")
    old = store.add("file", "app.py prints 1", paths=["app.py"]).memory
    (repo / "app.py").write_text("print(2)\n")
    new = store.supersede(old.id, "app.py prints 2").memory
    assert new.blob == store.current_blob("app.py") != old.blob
    (repo / "app.py").write_text("print(3)\n")
    assert [h.stale for h in recall(store, "what does app.py print", paths=["app.py"])] == [True]


def test_history_lists_every_commit_that_touched_a_memory(store):
    m = store.add("fact", "v1").memory
    store.add("fact", "unrelated")
    store.edit(m.id, text="v2")
    ops = [c.op for c in store.history(m.id)]
    assert ops == ["edit", "add"]


def test_history_across_a_merge_lists_each_change_once(repo, store):
    """A merge commit that takes one side's blob is not a change; the edit made on the branch is."""
    from gitmem.merge import merge_into

    m = store.add("fact", "v1").memory
    git(repo, "checkout", "-q", "-b", "feature")
    Store.open(str(repo)).edit(m.id, text="v2 on the feature branch")
    git(repo, "checkout", "-q", "main")
    main = Store.open(str(repo), branch="main")
    main.add("fact", "unrelated, on main")  # so the merge is a merge commit, not a fast-forward
    merge_into(main, Store.open(str(repo), branch="feature").own_tip())
    assert len(main.repo[main.own_tip()].parents) == 2
    assert [c.op for c in main.history(m.id)] == ["edit", "add"]
    assert main.get(m.id).text == "v2 on the feature branch"


def test_id_prefix_resolution(store):
    m = store.add("fact", "x").memory
    assert store.get(m.id[:8]).id == m.id
    with pytest.raises(NotFound):
        store.get("zzzzzzzz")
    with pytest.raises(NotFound) as huge:  # a pasted file as an id: named, not echoed back whole
        store.get("z" * 100_000)
    assert len(str(huge.value)) < 200


def test_reflog_records_each_ref_move(store, repo):
    store.add("fact", "one")
    store.add("fact", "two")
    assert len(git(repo, "reflog", "refs/memory/main").splitlines()) == 2


def test_lost_race_is_retried_on_the_new_tip(store, repo):
    """A second writer moving the ref between read and CAS does not lose either write."""
    other = Store.open(str(repo))
    original = store.commit_tree
    fired = []

    def racing(*args, **kwargs):
        if not fired:
            fired.append(other.add("fact", "sneaked in").memory)
        return original(*args, **kwargs)

    store.commit_tree = racing
    mine = store.add("fact", "mine").memory
    texts = {m.text for m in Store.open(str(repo)).list()}
    assert texts == {"sneaked in", "mine"}
    assert len(git(repo, "rev-list", "refs/memory/main").split()) == 2
    assert Store.open(str(repo)).get(mine.id).text == "mine"


def test_invalid_input_leaves_the_ref_unchanged(store, repo):
    store.add("fact", "keep me")
    tip = store.own_tip()
    objects = git(repo, "cat-file", "--batch-all-objects", "--batch-check")
    for bad in (dict(type_="idea", text="x"), dict(type_="rejection", text="no reason"),
                dict(type_="fact", text=""), dict(type_="fact", text="x", paths=["../../etc"])):
        with pytest.raises(InvalidMemory):
            store.add(bad.pop("type_"), **bad)
    assert store.own_tip() == tip
    assert git(repo, "cat-file", "--batch-all-objects", "--batch-check") == objects  # no half-written object


def test_a_wrongly_typed_argument_is_invalid_memory_never_a_traceback_or_a_string_split_into_tags(store):
    store.add("fact", "keep me")
    tip = store.own_tip()
    for bad, field in ((dict(text=5), "text"), (dict(text=None), "text"), (dict(text="x", tags="abc"), "tags"),
                       (dict(text="x", paths={"src": 1}), "paths"), (dict(text="x", title=["t"]), "title")):
        with pytest.raises(InvalidMemory, match=f"^invalid {field}: expected"):
            store.add("fact", **bad)
    assert store.own_tip() == tip


def test_secrets_are_redacted_before_storing(store, repo):
    key = "sk-ant-api03-" + "Zq7xY2" * 15 + "AA"
    w = store.add("fact", f"the staging key is {key}")
    assert w.redacted == 1
    assert key not in git(repo, "log", "-p", "refs/memory/main")
    assert "[REDACTED:" in store.get(w.memory.id).text


def test_works_in_a_repo_with_no_commits(empty_repo):
    s = Store.open(str(empty_repo))
    assert s.branch == "main"
    s.add("fact", "first memory before the first commit")
    assert [m.text for m in s.list()] == ["first memory before the first commit"]
    assert git(empty_repo, "rev-parse", "--verify", "-q", "HEAD", check=False) == ""


def test_works_in_a_linked_worktree(repo, tmp_path):
    git(repo, "worktree", "add", "-q", "-b", "side", str(tmp_path / "wt"))
    Store.open(str(tmp_path / "wt")).add("fact", "from the worktree")
    assert Store.open(str(repo), branch="side").list()[0].text == "from the worktree"
    assert git(repo, "reflog", "refs/memory/side").strip()


def test_detached_head_says_what_it_does(repo):
    git(repo, "checkout", "-q", "--detach")
    s = Store.open(str(repo))
    assert s.branch == "main" and "detached" in s.notice


def test_a_memory_written_while_a_branch_is_rebased_or_bisected_stays_on_that_branch(repo):
    """git detaches HEAD for a rebase (and a bisect): what is written meanwhile is the branch's, not main's."""
    git(repo, "checkout", "-q", "-b", "feat")
    for name in ("a", "b"):
        (repo / name).write_text(name)
        git(repo, "add", name)
        git(repo, "commit", "-q", "-m", name)
    git(repo, "rebase", "-q", "-i", "HEAD~2", env={"GIT_SEQUENCE_EDITOR": "sed -i -e '1s/^pick/edit/'"})
    during = Store.open(str(repo))
    during.add("decision", "decided while rebasing feat")
    assert during.branch == "feat" and "rebasing 'feat'" in during.notice
    git(repo, "rebase", "--continue")
    assert [m.text for m in Store.open(str(repo), branch="feat").list()] == ["decided while rebasing feat"]
    assert Store.open(str(repo), branch="main").list() == []
    git(repo, "bisect", "start", "HEAD", "HEAD~2")  # HEAD detaches at a commit between them
    assert git(repo, "symbolic-ref", "-q", "HEAD", check=False) == "" and Store.open(str(repo)).branch == "feat"
    git(repo, "bisect", "reset")
    git(repo, "checkout", "-q", "--detach")
    assert Store.open(str(repo)).branch == "main"  # detached by hand: the default branch, as before


def test_branch_without_memory_reads_the_default_branch_and_creates_no_ref(repo):
    Store.open(str(repo)).add("decision", "main's decision")
    git(repo, "checkout", "-q", "-b", "feature/x")
    s = Store.open(str(repo))
    assert [m.text for m in s.list()] == ["main's decision"]
    assert "refs/memory/feature/x" not in git(repo, "for-each-ref", "refs/memory")
    s.add("fact", "feature fact")
    assert len(s.list()) == 2
    assert len(Store.open(str(repo), branch="main").list()) == 1


def test_not_a_repository(tmp_path):
    with pytest.raises(NotARepository):
        Store.open(str(tmp_path))


def test_bad_branch_names_are_refused(repo):
    for bad in ("../x", "a..b", "x.lock", "", "a\x00b", "-rf"):
        with pytest.raises(GitmemError):
            Store.open(str(repo), branch=bad)
    Store.open(str(repo), branch="feature/ünïcode").add("fact", "ok")
    assert "refs/memory/feature/ünïcode" in git(repo, "for-each-ref", "--format=%(refname)", "refs/memory")


def plant(store, path, data: bytes) -> None:
    """Write a blob around validation, as a careless hand edit with plain git would."""
    tip = store.own_tip()
    store.move_ref(tip, store.commit_tree({path: data}, "hand edit", AGENT, base=tip), "hand edit")


def test_hand_corrupted_blob_is_reported_not_fatal(store, repo):
    good = store.add("fact", "good").memory
    plant(store, "fact/0/0/0000000000000000.yaml", b"::: not yaml [")
    s = Store.open(str(repo))
    assert [m.id for m in s.list()] == [good.id]
    assert any("0000000000000000.yaml" in p.where for p in s.problems)
    assert any(p.level == "error" for p in doctor(s))
    assert "0000000000000000" in git(repo, "ls-tree", "-r", "refs/memory/main")


def test_an_invalid_memory_is_named_by_its_path_once(store, repo):
    """A hand edit that breaks a field: doctor's line and show's error said the path twice ("invalid P: invalid
    P: source: ..."), as the blob's verdict, which names it already, was wrapped again."""
    m = store.add("fact", "signed by a tool").memory
    path = memory_path(m)
    plant(store, path, dump_yaml(m).replace(b"source: api", b'source: "tool\\u0007"'))
    s = Store.open(str(repo))
    s.list()
    assert [p.where for p in s.problems] == [path]
    assert s.problems[0].message.startswith("source: 'tool\\x07': ") and path not in s.problems[0].message
    with pytest.raises(InvalidMemory) as e:
        s.get(m.id)
    assert str(e.value).count(path) == 1 and str(e.value).startswith(f"invalid {path}: source: 'tool\\x07'")


def test_one_write_rewrites_only_a_few_small_trees(store, repo):
    for i in range(30):
        store.add("fact", f"fact {i}")
    def objects():
        return {line.split()[0] for line in git(repo, "rev-list", "--objects", "refs/memory/main").splitlines()}

    before = objects()
    store.add("fact", "one more")
    after = objects()
    new_objects = after - before
    # commit + root tree + type tree + two bucket trees + blob
    assert len(new_objects) == 6


def test_short_ids_of_a_few_memories_equal_their_forms_among_every_memory(store):
    """`list -n` and `search` print short ids read from the few folders that can share a tail
    with the ids shown; they must be the forms computed among every id (tails sharing 2-6 chars,
    across types)."""
    from gitmem.model import dump_yaml, memory_path

    base = store.add("fact", "the seed memory").memory
    tails = ["abcdef", "xbcdef", "xxcdef", "xxxdef", "xxxxef", "kkkkkf", "mnpqrs"]
    updates = {}
    for n, tail in enumerate(tails):
        m = base.evolve(id=base.id[:10] + tail, type=("fact", "decision", "convention")[n % 3])
        updates[memory_path(m)] = dump_yaml(m)
    tip = store.tip()
    store.move_ref(tip, store.commit_tree(updates, "crafted ids", base.author, base=tip), "test")
    every = store.short_ids()
    ids = sorted(every)
    assert len({every[i] for i in ids}) == len(ids) and max(len(v) for v in every.values()) >= 6
    for page in (store.SHORT_ID_PAGE, 2):  # read by folder, and past a page by one sort of every id
        store.SHORT_ID_PAGE = page
        for chosen in (ids, ids[:3], [i for i in ids if i.endswith("ef")], [base.id]):
            assert store.short_ids(of=chosen) == {i: every[i] for i in chosen}


def test_a_page_of_short_ids_listed_again_on_the_same_tree_reads_no_folder(store, repo, monkeypatch):
    """The neighbours of a page's ids are kept per tree: `gitmem list` run twice reads the folders once;
    after a write (a new tree) they are read again and the new memory's neighbour shows."""
    from gitmem import warm as warm_module
    from gitmem.store import Snapshot

    first = store.add("fact", "the first memory").memory
    page = [first.id]
    forms = store.short_ids(of=page)
    warm_module.forget_warm()
    read = []
    real = Snapshot.listings
    monkeypatch.setattr(Snapshot, "listings", lambda self, paths: read.append(paths) or real(self, paths))
    again = Store.open(str(repo))
    assert again.short_ids(of=page) == forms and read == []
    other = "0" if first.id[-5] != "0" else "1"
    twin = first.evolve(id=first.id[:-5] + other + first.id[-4:])  # shares the page's last four chars
    tip = again.tip()
    again.move_ref(tip, again.commit_tree({memory_path(twin): dump_yaml(twin)}, "a twin", first.author, base=tip), "t")
    longer = again.short_ids(of=page)
    assert read and len(longer[first.id]) > len(forms[first.id])


def test_a_first_summary_after_a_clone_reads_each_blob_from_git_once(store, repo, monkeypatch):
    """The cold path parses the whole backlog in one batch, then sums the buckets from it: forgetting
    that batch (the bound on parsed blobs a server keeps) once made it parse the whole store twice."""
    import os

    from gitmem import warm
    from gitmem.repo import common_dir

    for i in range(60):
        store.add("fact", f"note {i}")
    warm.forget_warm()
    for suffix in ("", "-wal", "-shm"):  # as after a clone: no derived index
        path = os.path.join(common_dir(store.repo), "gitmem", "index.sqlite" + suffix)
        if os.path.exists(path):
            os.unlink(path)
    monkeypatch.setattr(warm.Warm, "PARSED", 5)  # so that 60 blobs overflow what a process keeps parsed
    reads = []
    real = warm.read_memory
    monkeypatch.setattr(warm, "read_memory", lambda *a: reads.append(a[2]) or real(*a))
    assert Store.open(str(repo)).summary()["counts"] == {"fact/active": 60}
    assert len(reads) == len(set(reads)) == 60


def test_a_long_lived_store_keeps_bounded_caches_however_many_writes_it_makes(store, repo, monkeypatch):
    """An MCP server or the web UI holds one Store for hours: each write adds trees and a parsed
    memory, and recall reads them; what the process keeps of them stays under its bounds (RSS over
    100,000 writes: bench/server_memory.py)."""
    from gitmem.recall import recall
    from gitmem.warm import Warm

    monkeypatch.setattr(Warm, "TREE_ENTRIES", 200)
    monkeypatch.setattr(Warm, "PARSED", 30)
    seen_trees, seen_parsed = 0, 0
    for i in range(120):
        store.add("fact", f"note {i}: the worker retries queue {i % 7}")
        if i % 10 == 0:
            assert recall(store, "worker retries", paths=[])  # from the index: no whole snapshot is kept
        assert store.warm.tree_size == sum(len(e) for e in store.warm.trees.values())
        seen_trees, seen_parsed = max(seen_trees, store.warm.tree_size), max(seen_parsed, len(store.warm.parsed))
    kept = sum(len(s[2]) for s in store.warm.loaded.values())
    assert seen_parsed <= 2 * kept + 30 + 1 < 120
    walk = len(git(repo, "ls-tree", "-r", "-t", store.ref).splitlines()) + 1  # every entry of every tree
    assert seen_trees <= 200 + walk < 120 * 8  # the bound, plus one whole walk; unbounded, ~8 entries a write
    assert len(store.memories()) == 120


def test_short_ids_from_the_search_index_are_those_the_tree_gives(store, repo, monkeypatch):
    """A page's short ids come from the search view's index when a search has brought it to the tip;
    they must be the forms a full listing of the tree gives, ids sharing 2, 3 and 4 last chars included."""
    from gitmem import model, postings
    from gitmem.warm import forget_warm

    tails = iter(["4k", "4k", "a4k", "ba4k", "ca4k", "zz", "qzz", "9m", "x1", "x1"] * 3)
    real = model.new_id
    monkeypatch.setattr(model, "new_id", lambda: (lambda i, t: i[:-len(t)] + t)(real(), next(tails)))
    ids = [store.add("fact", f"retry note {n}").memory.id for n in range(30)]
    everyone = model.short_ids(ids)
    forget_warm()
    fresh = Store.open(str(repo))
    tree = fresh.snapshot().tree_id
    assert fresh.warm.index.ids_ending_with("refs/memory/main", tree, ["a4k"]) is None  # no view: folders answer
    assert fresh.short_ids(of=ids[:12]) == {i: everyone[i] for i in ids[:12]}
    assert postings.rank(fresh, "retry note", 5)  # a search brings the ref's view to the tip
    forget_warm()
    fresh = Store.open(str(repo))
    threes = sorted({i[-3:] for i in ids})  # every id's, those sharing 2 chars too
    near = fresh.warm.index.ids_ending_with("refs/memory/main", tree, threes)
    assert near == {t: sorted(i for i in ids if i.endswith(t)) for t in threes}
    near = fresh.warm.index.ids_ending_with("refs/memory/main", tree, ["a4k", "qzz"])  # what a page asks
    assert near == {t: sorted(i for i in ids if i.endswith(t)) for t in ("a4k", "qzz")} and all(near.values())
    assert fresh.short_ids(of=ids[:12]) == {i: everyone[i] for i in ids[:12]}
    assert fresh.short_ids(of=ids) == everyone
    from gitmem.store import Snapshot

    listed = Snapshot.ids
    fresh.SHORT_ID_PAGE = 2  # past a page the view answers too (a few ids a tail), never a sort of every id
    monkeypatch.setattr(Snapshot, "ids", lambda self: pytest.fail("every id was listed"))
    assert fresh.short_ids(of=ids) == everyone
    monkeypatch.setattr(Snapshot, "ids", listed)
    monkeypatch.setattr(model, "new_id", real)
    fresh.add("fact", "one more")  # the view is behind the new tip: the folders answer again
    assert fresh.warm.index.ids_ending_with("refs/memory/main", fresh.snapshot().tree_id, ["4k"]) is None


def test_writing_trees_keeps_nothing(repo):
    """Each write rewrites the trees on its path, looking names up in its parent trees: asked as
    ``name in tree`` and ``tree[name]``, pygit2 1.21 kept every name alive, so a server grew by
    about 0.3 KiB per write (bench/server_memory.py's residual growth)."""
    import gc
    import tracemalloc

    from gitmem.model import Memory, dump_yaml, memory_path, new_id, utc_now

    store = Store.open(str(repo))
    author = Author("bench", "bench@example.com", "agent")

    def memory(n: int) -> Memory:
        return Memory(id=new_id(1_760_000_000_000 + n), type="fact", text=f"fact {n}", author=author,
                      source="test", created=utc_now())

    tip = None
    for n in range(50):  # buckets at every level, and a first pass through the code
        m = memory(n)
        tip = store.commit_tree({memory_path(m): dump_yaml(m)}, "w", author, base=tip)
    tracemalloc.start()
    try:
        traced = []
        for start in (50, 250, 450):  # the first 200 also fill bounded caches (statements, patterns)
            for n in range(start, start + 200):
                m = memory(n)
                tip = store.commit_tree({memory_path(m): dump_yaml(m)}, "w", author, base=tip)
            gc.collect()  # what a cycle still holds is garbage, not kept: the collector runs when it runs
            traced.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    assert traced[2] - traced[1] < 16 * 1024, traced  # 200 writes at 0.3 KiB each would keep 60 KiB


def test_reading_and_moving_the_ref_keeps_nothing(repo):
    """A server opens a new Store (so a new ref string) on every call: pygit2 1.21 kept every ref name
    it was asked for alive, until the name was interned."""
    import tracemalloc

    from gitmem.repo import ref_target

    store = Store.open(str(repo))
    store.add("fact", "first")
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(2000):
            assert ref_target(store.repo, "/".join(["refs", "memory", "main"])) == store.own_tip()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 16 * 1024, kept


def test_a_listing_reads_a_chunk_at_a_time_so_the_first_memories_come_before_the_rest_are_read(repo):
    from conftest import seeded

    seeded(repo, 700)
    store = Store.open(str(repo))
    assert len(store.list()) == 700  # the index holds them all now
    fresh = Store.open(str(repo))
    read = []
    parse = fresh.warm.parse
    fresh.warm.parse = lambda git, entries, ref, *rest: read.extend(entries) or parse(git, entries, ref, *rest)
    listing = fresh.listing()
    first = next(listing)
    assert first.text.startswith("Note 0 ") and 0 < len(read) <= 256
    assert len([first, *listing]) == 700 and len(read) == 700


def test_a_page_is_counted_where_the_index_narrows_it_to_a_few_and_otherwise_says_it_is_not(store, monkeypatch):
    """A type, status, path, author kind or source is counted by the summary or the index; a tag by reading
    the few memories the index narrows it to (every page, not only the first), else not at all: reading every
    memory to count a tag cost 1.7 s at 100,000."""
    ids = [store.add("fact", f"fact {i}", paths=["src/a.py"], tags=["queue"]).memory.id for i in range(5)]
    store.retract(ids[0], reason="wrong")
    store.add("fact", "queue without the tag")
    newest = ids[:0:-1]
    assert store.page(2, path="src")[:2] == ([store.get(i) for i in newest[:2]], 4)
    assert store.page(2, type="fact", status=None).total == 6
    assert store.page(2, path="src", status=None).total == 5  # the index answers no other status: read in full
    assert store.page(2, tag="queue")[:2] == ([store.get(i) for i in newest[:2]], 4)
    assert store.page(2, tag="queue", before=newest[1])[:2] == ([store.get(i) for i in newest[2:]], 4)
    assert store.page(2, source="api", before=newest[1]).total == 5
    monkeypatch.setattr("gitmem.store.COUNTED", 4)  # more than the index narrows it to: not counted
    assert store.page(2, tag="queue")[:2] == ([store.get(i) for i in newest[:2]], None)
    assert store.page(2, source="api")[:2] == (store.list()[:-3:-1], 5)  # the index's ids are the matches


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_memory_ref_at_a_missing_object_or_no_commit_is_named_as_damaged_by_reads_and_writes(repo, damage):
    """`gitmem log` was a libgit2 traceback; on a ref at a tree `gitmem list` read that tree as memory (while
    doctor called it damaged) and `gitmem add` said "could not write memory objects: the requested type does not
    match". Each now says, in one line, that the ref is damaged and to run doctor, and moves nothing."""
    from conftest import damage_ref, gitmem

    gitmem(repo, "add", "fact", "a fact")
    damage_ref(repo, "refs/memory/main", damage)
    before = (repo / ".git" / "refs" / "memory" / "main").read_text()
    for args in (["log"], ["list"], ["add", "fact", "another fact"]):
        r = gitmem(repo, *args, check=False)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.count("\n") == 1 and "refs/memory/main is damaged" in r.stderr and "doctor" in r.stderr
    assert (repo / ".git" / "refs" / "memory" / "main").read_text() == before


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_branch_reading_its_parents_damaged_memory_names_the_parents_ref(repo, damage):
    """feature has no memory of its own and reads main's: when refs/memory/main is damaged, reads and the first
    write on feature named refs/memory/feature (which does not exist) and `gitmem --branch feature doctor`."""
    from conftest import damage_ref, gitmem

    gitmem(repo, "add", "fact", "a fact")
    git(repo, "checkout", "-q", "-b", "feature")
    damage_ref(repo, "refs/memory/main", damage)
    for args in (["log"], ["list"], ["add", "fact", "another fact"]):
        r = gitmem(repo, *args, check=False)
        assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
        assert "refs/memory/main is damaged" in r.stderr and "`gitmem --branch main doctor`" in r.stderr, r.stderr
    assert "refs/memory/feature" not in git(repo, "for-each-ref", "--format=%(refname)", "refs/memory/")


def test_a_branch_reading_its_parents_memory_names_the_parents_ref_for_a_missing_blob(repo):
    """A memory's blob gone from main's memory (a lost loose object), read on feature, which has no memory of
    its own: list, show, search, status and resume said refs/memory/feature was damaged and to run its doctor, which
    finds nothing to repair there. Every read names the ref it read, refs/memory/main, and main's doctor."""
    import shutil

    from conftest import gitmem

    m = Store.open(str(repo)).add("fact", "the ledger retries payments").memory
    blob = git(repo, "rev-parse", f"refs/memory/main:{memory_path(m)}").strip()
    os.remove(repo / ".git" / "objects" / blob[:2] / blob[2:])
    git(repo, "checkout", "-q", "-b", "feature")
    for args in (["list"], ["list", "-n", "5"], ["show", m.id], ["search", "ledger"], ["status"], ["resume"]):
        shutil.rmtree(repo / ".git" / "gitmem", ignore_errors=True)  # derived: nothing parsed before this read
        r = gitmem(repo, *args, check=False)
        assert r.returncode == 1 and r.stderr.count("\n") == 1, (args, r.stderr)
        assert f"refs/memory/main is damaged: object {blob} is missing; run `gitmem --branch main doctor`" \
            in r.stderr, (args, r.stderr)


def test_the_log_names_a_memory_commit_missing_below_the_tip(store, repo):
    """A history missing one of its commits (a lost loose object) lists from the intact tip, but the log's walk
    reached the hole with libgit2's error: it names the ref and doctor, as every read of damage does."""
    first = store.add("fact", "first").commit
    store.add("fact", "second")
    os.remove(repo / ".git" / "objects" / first[:2] / first[2:])

    assert [m.text for m in Store.open(str(repo)).list()] == ["first", "second"]
    with pytest.raises(GitmemError, match=f"refs/memory/main is damaged: object {first} is missing; "
                                          "run `gitmem --branch main doctor`"):
        Store.open(str(repo)).log()


def test_reading_at_a_commit_the_repository_lacks_names_that_commit_not_damage(store, repo):
    """``at`` is the caller's: a mistyped commit, a blob or a name like HEAD said that refs/memory/main was
    damaged and to run its doctor, which finds it sound. Now it names the commit, in one line; a real commit
    still reads."""
    w = store.add("fact", "the ledger retries payments")
    blob = git(repo, "rev-parse", "HEAD:README.md").strip()
    for at in ("deadbeef", "0" * 40, blob, "HEAD", "x" * 100_000):
        for read, args in ((store.list, ()), (store.log, ()), (store.get, (w.memory.id,))):
            with pytest.raises(GitmemError) as e:
                read(*args, at=at)
            assert str(e.value) == f"no commit {at[:40] + '...' if len(at) > 80 else at!r} in this repository"
    assert store.get(w.memory.id, at=w.commit[:10]) == w.memory
    assert doctor(store) == []


def test_a_limit_below_one_is_refused_as_the_command_line_refuses_it(store):
    """``limit`` is "at most N": list(limit=0) gave every memory, list(limit=-1) all but the oldest (a slice),
    log(limit=0) one change and page(0) a full page. Each is refused in one line, like `gitmem list -n 0`."""
    for i in range(3):
        store.add("fact", f"fact {i}")
    for limit in (0, -1, True, "2"):
        for read in (store.list, store.log, store.page):
            with pytest.raises(GitmemError, match=r"^limit must be a whole number of at least 1 \(got "):
                read(limit=limit)
    assert [len(store.list(limit=2)), len(store.log(limit=2)), len(store.page(2).memories)] == [2, 2, 2]


def test_pages_before_and_after_an_id_walk_every_match_once_each_way(repo, store):
    """Keyset paging: each page's ``older`` cursor gives the next older page and its ``newer`` the one before,
    until the oldest and back to the newest, as a full listing has them (the web UI's older/newer links)."""
    from gitmem.model import new_id

    who = Author("Seed", "seed@example.com", "human")
    updates = {}
    for i in range(40):
        m = Memory(id=new_id(1_760_000_000_000 + i), type=("fact", "note")[i % 5 == 0], author=who, source="test",
                   created="2026-01-01T00:00:00Z", text=f"Note {i}", status="retracted" if i % 3 == 0 else "active",
                   tags=("queue",) if i % 2 else (), paths=("src/q.py",) if i % 2 else ())
        updates[memory_path(m)] = dump_yaml(m)
    store.move_ref(None, store.commit_tree(updates, "seed", who, base=None), "seed")
    for filters in ({}, {"type": "fact"}, {"status": None}, {"status": "retracted"}, {"path": "src"},
                    {"tag": "queue"}, {"source": "test"}, {"path": "src", "status": None}):  # the last read in full
        full = [m.id for m in store.list(**{"status": "active", **filters})][::-1]
        assert len(full) > 9, filters
        pages, cursor = [], None
        while True:
            page = store.page(4, before=cursor, **filters)
            pages.append([m.id for m in page.memories])
            assert (page.newer is None) == (cursor is None)
            assert page.total in (None, len(full)), filters
            if page.older is None:
                break
            cursor = page.older
        assert sum(pages, []) == full and all(len(p) == 4 for p in pages[:-1]), filters
        back = []
        while page.newer is not None:
            page = store.page(4, after=page.newer, **filters)
            back.append([m.id for m in page.memories])
        assert back[-1] == pages[0], filters  # the newest page, whole, though fewer than a page were newer
        assert back[:-1] == pages[1:-1][::-1], filters
        oldest = store.page(4, before=full[-1], **filters)  # past the oldest (a link older than a retract): the oldest
        assert [m.id for m in oldest.memories] == full[-4:] and oldest.older is None, filters


def test_a_new_memory_s_paths_never_name_a_file_inside_git(store, repo):
    """A memory's paths name files of the work tree: .git/config is git's own (git tracks no path with a .git
    part, in any case). New writes refuse one in one line; a memory stored with one before still loads."""
    kept = store.add("file", "summary of the readme", paths=["README.md"]).memory
    tip = store.own_tip()
    for bad in (".git/config", "./.git/hooks/pre-commit", "vendor/lib/.GIT/HEAD", ".git"):
        with pytest.raises(InvalidMemory, match="is inside .git: a memory's paths name files of the work tree") as e:
            store.add("fact", "the remote is origin", paths=[bad])
        assert "\n" not in str(e.value)
        with pytest.raises(InvalidMemory, match="is inside .git"):
            store.edit(kept.id, paths=[bad])
        with pytest.raises(InvalidMemory, match="is inside .git"):
            store.supersede(kept.id, "the readme, again", paths=[bad])
    assert store.own_tip() == tip
    assert store.add("fact", "dotfiles are fine", paths=[".gitignore", "docs/.github/x.md"]).memory.paths == (
        ".gitignore", "docs/.github/x.md")
    old = Memory.from_dict({**kept.to_dict(), "id": "0000000000000001", "type": "fact", "paths": [".git/config"],
                            "blob": None})
    plant(store, memory_path(old), dump_yaml(old))
    again = Store.open(str(repo))
    assert again.get(old.id).paths == (".git/config",) and not again.problems
    assert again.edit(old.id, text="the remote is upstream").memory.paths == (".git/config",)  # its own paths stay


@pytest.mark.parametrize("filter_", ["blob:none", "tree:0"])
def test_memory_a_partial_clones_git_fetch_left_on_the_remote_is_said_to_be_unfetched_not_damaged(repo, tmp_path,
                                                                                                  filter_):
    """A partial clone's `git fetch` of memory (remote setup's refspecs) leaves blobs, or trees, on the remote,
    and libgit2 does not fetch them lazily: `gitmem list` called the memory damaged and sent the user to doctor
    (which found it damaged beyond repair), and `gitmem search` was a KeyError traceback. Each now says what to
    run, and after it the memory reads."""
    from conftest import gitmem

    gitmem(repo, "add", "fact", "tests run with pytest")
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(remote))
    git(repo, "push", "-q", str(remote), "refs/memory/*:refs/memory/*")
    git(remote, "config", "uploadpack.allowFilter", "true")
    clone = tmp_path / "partial"
    git(tmp_path, "clone", "-q", f"--filter={filter_}", f"file://{remote}", str(clone))
    git(clone, "fetch", "-q", "origin", "refs/memory/*:refs/memory/*")
    for args in (["list"], ["search", "pytest"]):
        r = gitmem(clone, *args, check=False)
        assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
        assert "not in this partial clone" in r.stderr and "damaged" not in r.stderr, r.stderr
    # doctor says so too, and offers no recovery: moving the ref back would drop the memory it cannot read
    checked = gitmem(clone, "doctor", "--offline", check=False)
    assert checked.returncode == 1 and "not in this partial clone yet" in checked.stdout + checked.stderr
    assert "damaged" not in checked.stdout + checked.stderr and "--recover" not in checked.stdout + checked.stderr
    tip = git(clone, "rev-parse", "refs/memory/main").strip()
    refused = gitmem(clone, "doctor", "--recover", check=False)
    assert refused.returncode == 1 and "nothing to recover" in refused.stderr and "`gitmem fetch`" in refused.stderr
    assert git(clone, "rev-parse", "refs/memory/main").strip() == tip
    gitmem(clone, "fetch")
    assert "tests run with pytest" in gitmem(clone, "list").stdout
