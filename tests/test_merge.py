"""The record merge (pure, property-tested) and merge_into on real memory refs."""

from __future__ import annotations

from typing import Dict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitmem import Store
from gitmem.merge import list_conflicts, merge_into, merge_records, resolve
from gitmem.model import Author, Memory

from conftest import git

ALICE = Author("Alice", "alice@example.com", "human")
IDS = [f"0mabcdefgh0000{n:02d}" for n in range(6)]


def mem(i: str, text: str = "text", **kw) -> Memory:
    return Memory(id=i, type=kw.pop("type", "fact"), text=text, author=ALICE, source="cli",
                  created="2026-01-01T00:00:00Z", **kw)


# --- pure record merge ---------------------------------------------------------


def test_additions_on_both_sides_are_kept():
    a, b = mem(IDS[0], "ours"), mem(IDS[1], "theirs")
    r = merge_records({}, {a.id: a}, {b.id: b})
    assert r.merged == {a.id: a, b.id: b} and r.conflicts == []


def test_a_change_on_one_side_wins_over_no_change():
    base = mem(IDS[0])
    retracted = base.evolve(status="retracted", updated="2026-01-02T00:00:00Z")
    r = merge_records({base.id: base}, {base.id: base}, {base.id: retracted})
    assert r.merged[base.id].status == "retracted" and not r.conflicts


def test_different_fields_changed_on_each_side_merge_field_by_field():
    base = mem(IDS[0], "old text", tags=("a",))
    ours = base.evolve(text="new text", updated="2026-01-02T00:00:00Z")
    theirs = base.evolve(tags=("a", "b"), title="A title", updated="2026-01-03T00:00:00Z")
    r = merge_records({base.id: base}, {base.id: ours}, {base.id: theirs})
    m = r.merged[base.id]
    assert (m.text, m.tags, m.title, m.updated) == ("new text", ("a", "b"), "A title", "2026-01-03T00:00:00Z")
    assert r.conflicts == []


def test_the_same_field_changed_both_ways_is_a_conflict_keeping_both_versions():
    base = mem(IDS[0], "old")
    ours = base.evolve(text="ours", updated="2026-01-02T00:00:00Z")
    theirs = base.evolve(text="theirs", updated="2026-01-03T00:00:00Z")
    r = merge_records({base.id: base}, {base.id: ours}, {base.id: theirs})
    [c] = r.conflicts
    assert c.fields == ("text",) and (c.base, c.ours, c.theirs) == (base, ours, theirs)
    assert r.merged[base.id].text == "theirs"  # the newer side stands in until resolved


def test_retraction_on_one_side_and_edit_on_the_other_keeps_both_changes():
    base = mem(IDS[0], "old")
    ours = base.evolve(status="retracted", updated="2026-01-02T00:00:00Z")
    theirs = base.evolve(text="edited", updated="2026-01-03T00:00:00Z")
    r = merge_records({base.id: base}, {base.id: ours}, {base.id: theirs})
    assert (r.merged[base.id].status, r.merged[base.id].text) == ("retracted", "edited")
    assert not r.conflicts


# --- properties ----------------------------------------------------------------

texts = st.sampled_from(["alpha", "beta", "gamma"])
tags = st.lists(st.sampled_from(["x", "y", "z"]), unique=True, max_size=3).map(tuple)
times = st.sampled_from(["2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z", None])


@st.composite
def side(draw, base: Dict[str, Memory]) -> Dict[str, Memory]:
    """A branch's memory: the base with some memories changed and some added."""
    out = dict(base)
    for i in IDS:
        action = draw(st.sampled_from(["keep", "keep", "edit", "add", "drop"]))
        if action == "edit" and i in out:
            out[i] = out[i].evolve(text=draw(texts), tags=draw(tags), updated=draw(times),
                                   status=draw(st.sampled_from(["active", "retracted"])))
        elif action == "add" and i not in out:
            out[i] = mem(i, draw(texts), tags=draw(tags))
        elif action == "drop":
            out.pop(i, None)
    return out


@st.composite
def histories(draw):
    base = {i: mem(i, draw(texts), tags=draw(tags)) for i in IDS[:draw(st.integers(0, len(IDS)))]}
    return base, draw(side(base)), draw(side(base))


@settings(max_examples=300, deadline=None)
@given(histories())
def test_merge_never_loses_a_memory_either_side_has(h):
    base, ours, theirs = h
    assert set(merge_records(base, ours, theirs).merged) == set(ours) | set(theirs)


@settings(max_examples=300, deadline=None)
@given(histories())
def test_merge_is_symmetric_up_to_which_side_is_ours(h):
    base, ours, theirs = h
    a, b = merge_records(base, ours, theirs), merge_records(base, theirs, ours)
    assert a.merged == b.merged
    assert a.conflicts == [c.swapped() for c in b.conflicts]


@settings(max_examples=300, deadline=None)
@given(histories())
def test_merge_is_idempotent(h):
    base, ours, theirs = h
    first = merge_records(base, ours, theirs)
    # once merged, theirs is the new merge base: merging it again changes nothing
    again = merge_records(theirs, first.merged, theirs)
    assert again.merged == first.merged and again.conflicts == []
    assert merge_records(base, ours, ours).merged == ours


# --- merge_into on real refs ----------------------------------------------------


def two_branches(repo):
    main = Store.open(str(repo), "main")
    shared = main.add("decision", "Use Postgres", reason="we know it", author=ALICE).memory
    git(repo, "branch", "feature")
    return main, Store.open(str(repo), "feature"), shared


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


def test_a_checkpoint_advanced_on_both_sides_merges_to_the_newer_commit_without_a_conflict():
    base = mem(IDS[0], "parser done / next: wire it", type="checkpoint", commit="a" * 40, commits=("a" * 40,))
    ours = base.evolve(commit="b" * 40, commits=("a" * 40, "b" * 40), updated="2026-01-02T00:00:00Z")
    theirs = base.evolve(commit="c" * 40, commits=("a" * 40, "c" * 40), updated="2026-01-03T00:00:00Z")
    for left, right in ((ours, theirs), (theirs, ours)):
        r = merge_records({base.id: base}, {base.id: left}, {base.id: right})
        m = r.merged[base.id]
        assert r.conflicts == []
        assert (m.commit, m.commits, m.updated) == ("c" * 40, ("a" * 40, "b" * 40, "c" * 40), "2026-01-03T00:00:00Z")


def test_a_persons_field_changed_both_ways_on_a_checkpoint_is_still_a_conflict():
    base = mem(IDS[0], "step one", type="checkpoint", commit="a" * 40, next="step two")
    ours = base.evolve(next="step three", commit="b" * 40, updated="2026-01-02T00:00:00Z")
    theirs = base.evolve(next="step four", commit="c" * 40, updated="2026-01-03T00:00:00Z")
    [c] = merge_records({base.id: base}, {base.id: ours}, {base.id: theirs}).conflicts
    assert c.fields == ("next",)
