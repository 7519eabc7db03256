"""The ADR benchmark's data (bench/data/recall) holds together: it is read only by bench/recall.py,
so these checks are what keep a hand edit from silently skewing the figures."""

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import recall  # noqa: E402

from gitmem.model import ID_RE, Author, Memory, validate  # noqa: E402


@pytest.fixture(scope="module")
def bench():
    return recall.load()


def test_every_label_points_at_a_memory_on_the_same_side(bench):
    # load() refuses unknown keys, cross-split labels and repeats of non-rejections; check it did its job.
    for q in bench.questions:
        assert q.answers and all(bench.items[k].split == q.split for k in q.answers)
    for p in bench.proposals:
        if p.repeats:
            assert bench.items[p.repeats].type == "rejection"
            assert bench.items[p.repeats].split == p.split
        else:
            assert p.fresh in ("chosen", "opposite", "other")


def test_tune_and_held_out_share_no_source_document(bench):
    sides = {}
    for item in bench.items.values():
        assert sides.setdefault(item.doc, item.split) == item.split
    for q in bench.questions:
        assert sides.get(q.doc, q.split) == q.split
    held_out = sum(s == "heldout" for s in bench.docs.values()) / len(bench.docs)
    assert 0.4 <= held_out <= 0.6


def test_at_least_a_third_of_the_questions_share_almost_no_words_with_their_answer(bench):
    for split in recall.SPLITS:
        qs = [q for q in bench.questions if q.split == split]
        assert sum(q.overlap <= 1 for q in qs) >= len(qs) / 3


def test_both_sides_have_repeats_and_fresh_proposals(bench):
    for split in recall.SPLITS:
        kinds = {p.fresh or "repeat" for p in bench.proposals if p.split == split}
        assert kinds == {"repeat", "chosen", "opposite", "other"}


def test_every_labelled_memory_is_a_valid_gitmem_memory(bench):
    for i, (key, it) in enumerate(sorted(bench.items.items())):
        m = Memory(id=recall.memory_id(i, key), type=it.type, text=it.text, author=Author("bench"),
                   source=f"adr:{it.repo}", created="2025-01-01T00:00:00Z", title=it.title, reason=it.reason,
                   tags=it.tags)
        validate(m)
        assert ID_RE.match(m.id)


def test_distractors_are_the_same_for_the_same_seed_and_are_valid_memories():
    first, again = recall.distractors(300), recall.distractors(300)
    assert first == again
    assert len({d["title"] for d in first}) == 300
    for i, d in enumerate(first):
        validate(Memory(id=recall.memory_id(i, f"d{i}"), type=d["type"], text=d["text"], author=Author("bench"),
                        source="bench", created="2025-01-01T00:00:00Z", title=d["title"], reason=d["reason"],
                        tags=tuple(d["tags"])))


def test_overlap_counts_shared_content_words_after_stemming():
    item = recall.Item(key="k", type="decision", text="Queues are drained by workers", doc="d", split="tune",
                       repo="r", title="Draining queues")
    assert recall.shared_words("how do we drain the queue", item) == 2  # drain, queue
    assert recall.shared_words("what is the weather", item) == 0
    assert [recall.overlap_bucket(n) for n in (0, 1, 2, 3, 4)] == ["0-1", "0-1", "2-3", "2-3", "4+"]


def test_lexical_env_forces_lexical_recall_and_restores_the_setting(monkeypatch):
    monkeypatch.setenv("GITMEM_ENCODER", "auto")
    assert recall.lexical_env(lambda: recall.recall_mode(None)).startswith("lexical")
    assert recall.os.environ["GITMEM_ENCODER"] == "auto"
    monkeypatch.delenv("GITMEM_ENCODER")
    recall.lexical_env(lambda: None)
    assert "GITMEM_ENCODER" not in recall.os.environ


def test_a_fresh_first_search_starts_from_no_index_and_answers_the_same(bench):
    import sqlite3

    from gitmem.repo import common_dir

    store, _ = recall.build_store(bench, 0, "test-fresh")
    question = bench.questions[0].text
    before = recall.ask(store, question)
    index = Path(common_dir(store.repo)) / "gitmem" / "index.sqlite"
    with sqlite3.connect(index) as db:  # a mark the rebuilt index cannot have
        db.execute("CREATE TABLE bench_mark(x)")
    store, ms = recall.fresh_first_search(store, question)
    assert ms > 0
    with sqlite3.connect(index) as db:
        assert not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'bench_mark'").fetchall()
    assert recall.ask(store, question) == before
