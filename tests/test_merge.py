"""merge_into on real memory refs: fast-forwards, merge commits, and conflicts stored, listed and resolved."""

from __future__ import annotations

import time

import pytest

from gitmem import Store
from gitmem.merge import list_conflicts, merge_into, resolve
from gitmem.errors import GitmemError, InvalidMemory, Untrusted
from gitmem.model import Author

from conftest import DAMAGES, ReadSpy, damage_ref, git, gitmem, make_repo, seeded

ALICE = Author("Alice", "alice@example.com", "human")


# --- merge_into on real refs ----------------------------------------------------


def two_branches(repo):
    main = Store.open(str(repo), "main")
    shared = main.add("decision", "Use Postgres", reason="we know it", author=ALICE).memory
    git(repo, "branch", "feature")
    return main, Store.open(str(repo), "feature"), shared


@pytest.mark.parametrize("damage", DAMAGES)
def test_merging_into_a_damaged_memory_ref_names_it_and_moves_nothing(repo, damage):
    """`gitmem merge feature` into a refs/memory/main that points at a missing object or at no commit was
    libgit2's merge-base traceback (from merge, sync, pull and the post-merge hook alike): one line names the
    ref merged into and its doctor, and no ref moves."""
    _, feature, _ = two_branches(repo)
    feature.add("fact", "feature fact", author=ALICE)
    damage_ref(repo, "refs/memory/main", damage)
    before = (repo / ".git" / "refs" / "memory" / "main").read_text()

    r = gitmem(repo, "merge", "feature", check=False)

    assert r.returncode == 1 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert "refs/memory/main is damaged" in r.stderr and "`gitmem --branch main doctor`" in r.stderr
    assert (repo / ".git" / "refs" / "memory" / "main").read_text() == before


def test_merging_a_code_branch_whose_commits_are_all_empty_is_refused_not_merged_as_memory(tmp_path):
    """merge_into(store, "feature") resolves "feature" as git does, to the code commit. A code history of
    `git commit --allow-empty` commits has the layout of an empty memory, so it passed the trust gate and was
    merged: "merge", nothing added (feature's memory stayed off main), and the code's commits joined
    refs/memory/main's history, shown by `gitmem log` and pushed with it. The gate refuses it now."""
    repo = make_repo(tmp_path / "empty-code", commit=False)
    git(repo, "commit", "-q", "--allow-empty", "-m", "code: start")
    git(repo, "branch", "feature")
    main, feature = Store.open(str(repo), "main"), Store.open(str(repo), "feature")
    main.add("fact", "main fact", author=ALICE)
    f = feature.add("fact", "feature fact", author=ALICE)
    before = main.own_tip()
    code = git(repo, "rev-parse", "feature").strip()

    for theirs in ("feature", "HEAD", code):
        with pytest.raises(Untrusted, match="a root commit with an empty tree is no memory"):
            merge_into(main, theirs)
    r = gitmem(repo, "merge", "HEAD", check=False)
    assert r.returncode == 1 and "a code commit? name a memory ref" in r.stderr and r.stderr.count("\n") == 1
    assert main.own_tip() == before
    assert code not in git(repo, "rev-list", "refs/memory/main").split()

    assert merge_into(main, "refs/memory/feature").added == [f.memory.id]  # the memory ref merges as ever


def test_merge_into_fast_forwards_when_ours_did_not_move(repo):
    main, feature, _ = two_branches(repo)
    w = feature.add("fact", "feature fact", author=ALICE)
    r = merge_into(main, feature.own_tip())
    assert (r.kind, r.commit, r.added) == ("fast-forward", w.commit, [w.memory.id])
    assert main.own_tip() == w.commit


def test_merge_into_writes_a_merge_commit_with_both_tips_as_parents(repo):
    main, feature, _ = two_branches(repo)
    f = feature.add("fact", "feature fact", author=ALICE)
    m = main.add("fact", "main fact", author=ALICE)
    r = merge_into(main, feature.own_tip())
    assert r.kind == "merge" and r.added == [f.memory.id]
    commit = main.repo[main.own_tip()]
    assert [str(p) for p in commit.parent_ids] == [m.commit, f.commit]
    assert set(main.memories()) >= {f.memory.id, m.memory.id}
    assert main.log(limit=1)[0].op == "merge"


def test_merging_the_same_thing_twice_changes_nothing(repo):
    main, feature, _ = two_branches(repo)
    feature.add("fact", "feature fact", author=ALICE)
    main.add("fact", "main fact", author=ALICE)
    merge_into(main, feature.own_tip())
    tip = main.own_tip()
    assert merge_into(main, feature.own_tip()).kind == "up-to-date"
    assert main.own_tip() == tip


def test_merging_in_both_directions_converges(repo):
    main, feature, shared = two_branches(repo)
    feature.edit(shared.id, tags=["db"], author=ALICE)
    main.edit(shared.id, text="Use Postgres 16", author=ALICE)
    merge_into(main, feature.own_tip())
    assert merge_into(feature, main.own_tip()).kind == "fast-forward"
    assert main.memories() == feature.memories()
    assert main.get(shared.id).tags == ("db",) and main.get(shared.id).text == "Use Postgres 16"


def test_a_conflict_is_stored_listed_and_resolvable(repo):
    main, feature, shared = two_branches(repo)
    feature.edit(shared.id, text="Use Postgres 15", author=ALICE)
    main.edit(shared.id, text="Use Postgres 16", author=ALICE)
    r = merge_into(main, feature.own_tip())
    assert [c.id for c in r.conflicts] == [shared.id]
    [c] = list_conflicts(main)
    assert (c.ours.text, c.theirs.text, c.fields) == ("Use Postgres 16", "Use Postgres 15", ("text",))
    assert shared.id in main.memories()  # conflicts/ is not read as memory
    resolve(main, shared.id[:6], take="theirs", author=ALICE)
    assert list_conflicts(main) == [] and main.get(shared.id).text == "Use Postgres 15"


@pytest.mark.parametrize("reverted_on", ["main", "feature"])
def test_a_change_after_criss_cross_merges_is_kept_whichever_merge_base_git_picks(repo, reverted_on):
    # main and feature merge each other (two merge bases: main's edit and feature's add), then one side
    # sets the memory back. Measured against feature's base alone that looks like no change: it was lost.
    main, feature, shared = two_branches(repo)
    feature.add("fact", "feature fact", author=ALICE)
    main.edit(shared.id, text="Use Postgres 16", author=ALICE)
    feature.add("fact", "another feature fact", author=ALICE)
    ours_before, theirs_before = main.own_tip(), feature.own_tip()
    merge_into(main, theirs_before)
    merge_into(feature, ours_before)
    {"main": main, "feature": feature}[reverted_on].edit(shared.id, text="Use Postgres", author=ALICE)
    r = merge_into(main, feature.own_tip())
    assert r.conflicts == [] and main.get(shared.id).text == "Use Postgres"
    assert merge_into(feature, main.own_tip()).kind == "fast-forward"


@pytest.mark.parametrize("resolved_on", ["main", "feature"])
def test_a_conflict_both_sides_found_and_one_resolved_stays_resolved_whichever_merge_base_git_picks(
        repo, resolved_on):
    """main and feature merge each other's clashing edits (a criss-cross): each holds the conflict, ours and
    theirs the other way round. One side resolves it and merges the other: the conflict came back when the
    virtual merge base held it the resolving side's way round, as a change the other side made to it."""
    main, feature, shared = two_branches(repo)
    feature.add("fact", "feature fact", author=ALICE)  # feature's memory forks here, before either edit
    resolver, other = (main, feature) if resolved_on == "main" else (feature, main)
    other.edit(shared.id, text="Use Postgres 15", author=ALICE)
    time.sleep(1.01 - time.time() % 1)  # libgit2 takes the newer of two merge bases first: the resolver's
    resolver.edit(shared.id, text="Use Postgres 16", author=ALICE)
    ours_before, theirs_before = main.own_tip(), feature.own_tip()
    merge_into(main, theirs_before)
    merge_into(feature, ours_before)
    resolve(resolver, shared.id, take="ours", author=ALICE)
    text = resolver.get(shared.id).text

    r = merge_into(resolver, other.own_tip())

    assert r.conflicts == [] and list_conflicts(resolver) == [] and resolver.get(shared.id).text == text
    assert merge_into(other, resolver.own_tip()).kind == "fast-forward" and list_conflicts(other) == []


def _third_version_over_a_pending_conflict(repo):
    """main holds a conflict on one memory (its 16 against feature's 15); another branch edited it a third way
    (17)."""
    main, feature, shared = two_branches(repo)
    git(repo, "branch", "other")
    other = Store.open(str(repo), "other")
    feature.edit(shared.id, text="Use Postgres 15", author=ALICE)
    other.edit(shared.id, text="Use Postgres 17", author=ALICE)
    main.edit(shared.id, text="Use Postgres 16", author=ALICE)
    merge_into(main, feature.own_tip())
    return main, other, shared


def test_a_second_clash_on_a_memory_with_a_conflict_pending_is_refused_not_written_over_it(repo):
    main, other, shared = _third_version_over_a_pending_conflict(repo)
    pending, tip = list_conflicts(main), main.own_tip()
    with pytest.raises(GitmemError, match=f"{shared.id}.*unresolved conflict.*gitmem resolve"):
        merge_into(main, other.own_tip())  # a conflict file holds two versions: one of the three would go
    assert main.own_tip() == tip and list_conflicts(main) == pending  # nothing written
    resolve(main, shared.id, take="ours", author=ALICE)
    r = merge_into(main, other.own_tip())  # settled: the next clash is a conflict of its own
    assert [(c.ours.text, c.theirs.text) for c in r.conflicts] == [("Use Postgres 16", "Use Postgres 17")]


def test_a_second_clash_on_a_conflict_pending_in_the_memory_merged_in_says_where_to_settle_it(repo):
    """The refusal named `gitmem resolve ID`, which on the branch merged into says there is no such conflict:
    the conflict is pending on the branch merged in, where it must be settled."""
    main, other, shared = _third_version_over_a_pending_conflict(repo)
    with pytest.raises(GitmemError, match=f"conflict in the memory merged in .*gitmem --branch BRANCH resolve {shared.id}"):
        merge_into(other, main.own_tip())
    assert list_conflicts(other) == []  # nothing to resolve where the merge went
    resolve(main, shared.id, take="ours", author=ALICE)
    assert [(c.ours.text, c.theirs.text) for c in merge_into(other, main.own_tip()).conflicts] == [
        ("Use Postgres 17", "Use Postgres 16")]


@pytest.mark.parametrize("held_by", ["ours", "theirs"])
def test_a_merge_that_changes_a_field_of_a_pending_conflict_is_refused_not_left_showing_a_stale_conflict(
        repo, held_by):
    """A conflict pending on one side whose stand-in is the merge base's value, and the other side edits the
    field: the record merge saw one side's change, took it, and kept the conflict file, whose two versions
    were then neither what the memory held: `resolve --ours` (or --theirs) silently undid the new edit."""
    main, feature, shared = two_branches(repo)
    feature.add("fact", "feature fact", author=ALICE)  # feature's memory forks here, before either edit
    holder, other = (main, feature) if held_by == "ours" else (feature, main)
    other.edit(shared.id, text="Use Postgres 16", author=ALICE)  # the stand-in: the larger, in the same second
    holder.edit(shared.id, text="Use Postgres 15", author=ALICE)
    merge_into(holder, other.own_tip())
    other.edit(shared.id, text="Use Postgres 17", author=ALICE)  # a third version
    ours, theirs = (holder, other) if held_by == "ours" else (other, holder)
    tip, pending = ours.own_tip(), list_conflicts(ours)

    with pytest.raises(GitmemError, match=f"{shared.id} has an unresolved conflict.*gitmem.* resolve {shared.id}"):
        merge_into(ours, theirs.own_tip())

    assert ours.own_tip() == tip and list_conflicts(ours) == pending  # nothing written
    resolve(holder, shared.id, take="theirs", author=ALICE)
    r = merge_into(ours, theirs.own_tip())  # 16 chosen over 15, and 17 was written on 16
    assert r.conflicts == [] and list_conflicts(ours) == [] and ours.get(shared.id).text == "Use Postgres 17"


def test_a_conflict_travels_with_the_merge_and_a_resolution_merges_back(repo):
    main, feature, shared = two_branches(repo)
    feature.edit(shared.id, text="Use Postgres 15", author=ALICE)
    main.edit(shared.id, text="Use Postgres 16", author=ALICE)
    merge_into(main, feature.own_tip())
    merge_into(feature, main.own_tip())
    assert [c.id for c in list_conflicts(feature)] == [shared.id]
    resolve(feature, shared.id, values={"text": "Use Postgres 16.2"}, author=ALICE)
    assert merge_into(main, feature.own_tip()).kind == "fast-forward"
    assert list_conflicts(main) == [] and main.get(shared.id).text == "Use Postgres 16.2"


def test_a_resolution_typed_with_a_secret_is_redacted_and_its_commit_says_so(repo):
    main, feature, shared = two_branches(repo)
    feature.edit(shared.id, text="Use Postgres 15", author=ALICE)
    main.edit(shared.id, text="Use Postgres 16", author=ALICE)
    merge_into(main, feature.own_tip())
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    w = resolve(main, shared.id, values={"text": f"Use Postgres 16; deploy with {token}"}, author=ALICE)
    assert w.redacted == 1 and token not in main.get(shared.id).text
    assert "Redacted: 1" in main.repo[w.commit].message


@pytest.mark.parametrize("saved,problem", [("text: [1, 2]", "invalid text: expected text"),
                                           ("text: null", "invalid text: expected text, got NoneType"),
                                           ("text: 2026-01-01", "invalid text: expected text, got date")])
def test_a_wrongly_typed_value_saved_by_resolve_edit_is_one_line_and_the_conflict_stays(repo, tmp_path, saved,
                                                                                       problem):
    main, feature, shared = two_branches(repo)
    feature.edit(shared.id, text="Use Postgres 15", author=ALICE)
    main.edit(shared.id, text="Use Postgres 16", author=ALICE)
    merge_into(main, feature.own_tip())
    (tmp_path / "saved.yaml").write_text(saved + "\n")
    refused = gitmem(repo, "resolve", shared.id, "--edit", check=False,
                     env={"EDITOR": f"cp {tmp_path / 'saved.yaml'}"})
    assert refused.returncode == 1 and refused.stderr.startswith(f"Error: {problem}"), refused.stderr
    assert [c.id for c in list_conflicts(main)] == [shared.id]
    with pytest.raises(InvalidMemory, match="tags: expected a list of strings"):
        resolve(main, shared.id, values={"text": "Use Postgres 16", "tags": 5}, author=ALICE)


@pytest.mark.parametrize("saved", ["", "# nothing\n"])
def test_resolve_edit_saved_without_the_clashing_field_settles_nothing(repo, tmp_path, saved):
    # An emptied file (how one aborts a git commit message) took the newer side's value for the
    # clashing field and deleted the conflict: the other side's value was dropped, nobody chose it.
    main, feature, shared = two_branches(repo)
    feature.edit(shared.id, text="Use Postgres 15", author=ALICE)
    main.edit(shared.id, text="Use Postgres 16", author=ALICE)
    merge_into(main, feature.own_tip())
    (tmp_path / "saved.yaml").write_text(saved)
    refused = gitmem(repo, "resolve", shared.id, "--edit", check=False,
                     env={"EDITOR": f"cp {tmp_path / 'saved.yaml'}"})
    assert refused.returncode == 1 and "text" in refused.stderr, refused.stderr
    assert [c.id for c in list_conflicts(main)] == [shared.id]


def test_an_edit_of_a_field_in_conflict_is_refused_so_a_resolve_cannot_undo_it(repo):
    # `gitmem edit ID --text` on a memory in conflict was stored, the conflict kept showing the two merged
    # versions only, and `gitmem resolve ID --theirs` then wrote theirs over the edit: the newest choice was gone.
    main, feature, shared = two_branches(repo)
    feature.edit(shared.id, text="Use Postgres 15", author=ALICE)
    main.edit(shared.id, text="Use Postgres 16", author=ALICE)
    merge_into(main, feature.own_tip())
    tip = main.own_tip()
    refused = gitmem(repo, "edit", shared.id[-4:], "--text", "Use Postgres 16.2, as agreed", check=False)
    assert refused.returncode == 1 and refused.stderr.startswith(f"Error: {shared.id} is in conflict on text"), \
        refused.stderr
    assert f"gitmem resolve {shared.id}" in refused.stderr and len(refused.stderr.splitlines()) == 1
    assert main.own_tip() == tip and [c.id for c in list_conflicts(main)] == [shared.id]  # nothing written
    main.edit(shared.id, tags=["db"], author=ALICE)  # a field that did not clash stays editable
    resolve(main, shared.id, take="theirs", author=ALICE)
    main.edit(shared.id, text="Use Postgres 16.2, as agreed", author=ALICE)  # settled: editable again
    assert (main.get(shared.id).text, main.get(shared.id).tags) == ("Use Postgres 16.2, as agreed", ("db",))


def test_two_supersedes_of_one_memory_leave_the_replacement_a_resolve_did_not_take_named_with_its_fix(repo):
    # Both replacements stayed active after `resolve --ours`; the loser still said `supersedes: ID` while the memory
    # named the other as its successor, and nothing said so (found by QA).
    import json

    from gitmem.doctor import doctor

    main, feature, shared = two_branches(repo)
    theirs = feature.supersede(shared.id, "Use Postgres 15", author=ALICE).memory
    ours = main.supersede(shared.id, "Use Postgres 16", author=ALICE).memory
    [c] = merge_into(main, feature.own_tip()).conflicts
    assert c.fields == ("superseded_by",) and (c.ours.superseded_by, c.theirs.superseded_by) == (ours.id, theirs.id)
    assert [p for p in doctor(main) if theirs.id in p.message] == []  # pending: the conflict names both for now

    out = json.loads(gitmem(repo, "resolve", shared.id[-4:], "--ours", "--json").stdout)
    [rival] = out["rivals"]
    assert (rival["id"], rival["supersedes"]) == (theirs.id, shared.id)
    assert f"gitmem retract {theirs.id}" in rival["note"] and f"gitmem edit {ours.id}" in rival["note"]
    assert main.get(shared.id).superseded_by == ours.id and main.get(theirs.id).status == "active"
    [found] = [p for p in doctor(main, full=True) if p.where.endswith(f"{theirs.id}.yaml")]
    assert found.level == "warning" and found.message == rival["note"]

    main.retract(theirs.id, reason=f"{ours.id} supersedes {shared.id}", author=ALICE)
    assert doctor(main, full=True) == []


def test_resolve_names_on_stderr_the_replacement_it_did_not_take(repo):
    main, feature, shared = two_branches(repo)
    theirs = feature.supersede(shared.id, "Use Postgres 15", author=ALICE).memory
    main.supersede(shared.id, "Use Postgres 16", author=ALICE)
    merge_into(main, feature.own_tip())
    done = gitmem(repo, "resolve", shared.id, "--ours")
    assert done.stdout.startswith(f"Resolved decision {shared.id}")
    [line] = done.stderr.splitlines()
    assert line.startswith(f"gitmem: {theirs.id} still supersedes {shared.id}, whose successor is ")
    assert gitmem(repo, "resolve", shared.id, "--ours", check=False).stderr.startswith("Error: no unresolved conflict")


def test_resolve_without_a_conflict_is_a_clear_error(repo):
    main, _, shared = two_branches(repo)
    from gitmem.errors import GitmemError

    with pytest.raises(GitmemError, match="no unresolved conflict"):
        resolve(main, shared.id, take="ours")


def test_a_fast_forward_reports_the_memories_it_added_and_changed(store):
    kept = store.add("fact", "kept")
    edited = store.add("fact", "will be retracted")
    side = Store(store.repo, "side")
    side.retrying(lambda: side.move_ref(None, store.own_tip(), "fork"))
    new = side.add("fact", "new on side")
    side.retract(edited.memory.id, reason="wrong")
    r = merge_into(store, side.own_tip())
    assert (r.kind, r.added, r.changed) == ("fast-forward", [new.memory.id], [edited.memory.id])
    assert kept.memory.id in store.memories()


def test_a_fast_forward_by_one_memory_reads_the_trees_it_changed_not_every_tree(repo):
    """A pull of one memory into 100,000 fast-forwards: the diff it checks (no deletion, no future stamp)
    reads the few trees that changed, not every bucket of both tips (0.2 s a pull at 100,000)."""
    store = seeded(repo, 400)
    side = Store(store.repo, "side")
    side.retrying(lambda: side.move_ref(None, store.own_tip(), "fork"))
    new = side.add("fact", "new on side", author=ALICE).memory
    spy = ReadSpy()
    store.repo.odb.add_backend(spy, 2000)

    r = merge_into(store, side.own_tip())

    assert (r.kind, r.added) == ("fast-forward", [new.id])
    assert spy.reads < 40  # 400 memories fill some 300 buckets: reading them all is hundreds
