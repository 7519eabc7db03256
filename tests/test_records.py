"""The record merge (pure, property-tested): plain memories in, merged memories and conflicts out."""

from __future__ import annotations

from typing import Dict

from hypothesis import given, settings
from hypothesis import strategies as st

from gitmem.model import Author, Memory
from gitmem.records import merge_records

ALICE = Author("Alice", "alice@example.com", "human")
IDS = [f"0mabcdefgh0000{n:02d}" for n in range(6)]


def mem(i: str, text: str = "text", **kw) -> Memory:
    return Memory(id=i, type=kw.pop("type", "fact"), text=text, author=ALICE, source="cli",
                  created="2026-01-01T00:00:00Z", **kw)


# --- cases ---------------------------------------------------------------------


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


def test_two_resolutions_of_one_conflict_clash_even_when_one_keeps_the_stand_in():
    stand_in = mem(IDS[0], "theirs", tags=("a",), updated="2026-01-03T00:00:00Z")  # what the conflict showed
    kept = stand_in.evolve(tags=("a", "b"))  # and a field the conflict did not name, changed on one side
    took_ours = stand_in.evolve(text="ours", updated="2026-01-04T00:00:00Z")
    r = merge_records({stand_in.id: stand_in}, {stand_in.id: kept}, {stand_in.id: took_ours},
                      unsettled={stand_in.id: ("text",)})
    [c] = r.conflicts
    assert c.fields == ("text",) and {c.ours.text, c.theirs.text} == {"theirs", "ours"}
    assert r.merged[stand_in.id].tags == ("a", "b")
    same = merge_records({stand_in.id: stand_in}, {stand_in.id: took_ours}, {stand_in.id: took_ours},
                         unsettled={stand_in.id: ("text",)})
    assert same.conflicts == [] and same.merged[stand_in.id] == took_ours


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




# --- hooks' bookkeeping fields ------------------------------------------------


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
