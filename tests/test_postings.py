"""The word ranking answered from the index gives rank()'s answer over the loaded memories, hit for hit."""

import json
import random
import re
import signal
import subprocess
import sys
from datetime import datetime, timezone
from typing import List, Set, Tuple

import pygit2
import pytest
from conftest import git, gitmem

from gitmem import Store, postings
from gitmem import model
from gitmem import warm as warm_module
from gitmem.errors import GitmemError
from gitmem.merge import merge_into
from gitmem.model import Author, Memory, dump_yaml, memory_path, new_id
from gitmem.recall import recall
from gitmem.search import rank, tokenize

NOW = datetime(2026, 12, 4, tzinfo=timezone.utc)
WORDS = ("queue redis retries postgres cache token auth deploy migration frontend worker job backoff "
         "logging billing end-to-end payment_intent").split()
PATHS = ("src/a.py", "src/b.py", "src/lib/x.py", "docs", "README.md")
QUERIES = ("redis queue", "auth token deploy", "end-to-end billing", "worker retries backoff", "nothing matches")
ASKS = [dict(paths=()), dict(paths=("src/a.py",)), dict(paths=("src",)), dict(paths=("docs/new.md",)),
        dict(types_first=("rejection", "decision")), dict(only_types=("rejection",)),
        dict(paths=("src/lib/x.py",), only_types=("fact", "decision"))]


@pytest.fixture(autouse=True)
def few_candidates_at_a_time(monkeypatch):
    """Read candidates two at a time, so the stop rule (no later candidate can make the cut) is what
    decides, not the first read holding every match; keep as few bounds per sort as a query's limit allows,
    so a sort is run again for more when all it kept reach the cut; and call a word rare up to a third of
    the store, so the small stores here take the pruned path (MaxScore) as a large one does."""
    monkeypatch.setattr(postings, "FETCH", 2)
    monkeypatch.setattr(postings, "TOP", 1)
    monkeypatch.setattr(postings, "RARE", 0.3)


def _fresh(repo, branch=None) -> Store:
    warm_module.forget_warm()
    return Store.open(str(repo), branch=branch)


def _add(store: Store, rng: random.Random) -> str:
    kind = rng.choice(["decision", "rejection", "fact", "convention", "file"])
    extra = {"reason": "because " + " ".join(rng.sample(WORDS, 3))} if kind in ("decision", "rejection") else {}
    if kind == "file":
        extra = {"blob": "0" * 40}
    paths = rng.sample(PATHS, rng.randint(0 if kind != "file" else 1, 2))
    return store.add(kind, " ".join(rng.sample(WORDS, rng.randint(2, 6))), title=" ".join(rng.sample(WORDS, 2)),
                     paths=paths, **extra).memory.id


def _same_answers(store: Store, queries=QUERIES, limits=(3, 10)) -> None:
    loaded = [m for _, m in sorted(store.memories().items())]
    some = {m.id for m in loaded[::3]}  # the ids a filter keeps (a tag's, an author's): the hits only among them
    for query in queries + ("",):
        for ask in ASKS + [dict(only_ids=some), dict(paths=("src",), only_ids=some, only_types=("fact", "decision"))]:
            for limit in limits:
                indexed = postings.rank(store, query, limit, now=NOW, **ask)
                assert indexed is not None
                assert indexed == rank(loaded, query, limit, now=NOW, blobs=store.current_blobs(loaded), **ask), \
                    (query, ask, limit)


def test_the_index_ranks_as_the_loaded_memories_after_random_writes_merges_and_branch_switches(repo, store):
    rng = random.Random(11)
    ids = [_add(store, rng) for _ in range(25)]
    _same_answers(store)
    git(repo, "checkout", "-q", "-b", "feature")
    for step in range(30):
        current = _fresh(repo) if step % 4 == 0 else Store.open(str(repo))
        op = rng.choice(["add", "add", "edit", "retract", "supersede", "switch"])
        try:
            if op == "add":
                ids.append(_add(current, rng))
            elif op == "edit":
                current.edit(rng.choice(ids), text=" ".join(rng.sample(WORDS, 4)))
            elif op == "retract":
                current.retract(rng.choice(ids))
            elif op == "supersede":
                ids.append(current.supersede(rng.choice(ids), " ".join(rng.sample(WORDS, 3))).memory.id)
            else:
                git(repo, "checkout", "-q", "main" if current.branch == "feature" else "feature")
        except GitmemError:  # an id the other branch lacks, or a memory no longer active: refused, as it should be
            pass
        _same_answers(Store.open(str(repo)), queries=QUERIES[:3], limits=(5,))
    git(repo, "checkout", "-q", "main")
    main = Store.open(str(repo), branch="main")
    merge_into(main, Store.open(str(repo), branch="feature").own_tip())
    _same_answers(_fresh(repo, "main"))
    _same_answers(_fresh(repo, "feature"))


def test_after_a_write_the_view_takes_in_only_the_new_memory(repo, store, monkeypatch):
    rng = random.Random(5)
    for _ in range(40):
        _add(store, rng)
    assert postings.rank(store, "redis", 5) is not None
    taken = []
    real = postings._add_docs
    monkeypatch.setattr(postings, "_add_docs", lambda db, docs, progress: (taken.append(len(docs)), real(db, docs, progress)))
    store.add("fact", "a brand new redis fact")
    fresh = _fresh(repo)
    hits = postings.rank(fresh, "brand new redis", 1)
    assert [h.memory.text for h in hits] == ["a brand new redis fact"]
    assert taken == [1]


def test_a_first_search_writes_the_postings_of_every_memory_many_to_a_statement(repo, store):
    """The first search after a clone writes a posting for each word of each memory (1.2 million at 100,000
    memories): a statement each spent more on binding them than SQLite on writing them."""
    for i in range(60):
        store.add("fact", f"note {i}: the payments service retries webhooks with backoff to a dead letter queue")
    fresh = _fresh(repo)
    statements: List[str] = []
    fresh.warm.index._conn().set_trace_callback(statements.append)
    assert postings.rank(fresh, "note 7", 1)[0].memory.text.startswith("note 7:")
    written = fresh.warm.index._conn().execute("SELECT COUNT(*) FROM postings").fetchone()[0]
    inserts = [s for s in statements if re.match(r"INSERT INTO \S*postings", s)]
    assert written > 500 and 0 < len(inserts) <= written / 100


SPELLINGS = ("retryPolicy", "RetryPolicy", "retry_policy", "retry-policy", "retry policy", "café", "Cafe", "s3Bucket",
             "utf8", "UTF-8")


def test_the_index_ranks_identifiers_and_accented_words_as_the_loaded_memories(repo, store):
    for n, spelling in enumerate(SPELLINGS):
        store.add("fact", f"The webhook client's {spelling}, note {n}")
    _same_answers(_fresh(repo), queries=SPELLINGS)
    assert postings.rank(_fresh(repo), "retry_policy", 5)[0].memory.text == "The webhook client's retry_policy, note 2"


def test_an_index_of_the_words_before_accents_were_folded_is_started_again_not_mixed_with_new_ones(repo, store,
                                                                                                    monkeypatch):
    """Each blob's terms are kept under its id alone: an index schema 15 wrote keeps "café" and "retryPolicy"
    whole, so trusted it would miss them for "cafe" and "retry policy" and find only memories written since."""
    from gitmem import index as index_module

    store.add("fact", "The café webhook client sets retryPolicy")
    with monkeypatch.context() as old:
        old.setattr(index_module, "SCHEMA", 15)
        old.setattr(postings, "memory_terms", lambda m: re.findall(r"\w+", f"{m.title or ''} {m.text}".lower()))
        assert [h.memory.text for h in postings.rank(_fresh(repo), "webhook", 5)] == \
            ["The café webhook client sets retryPolicy"]  # written, and read
    _fresh(repo).add("fact", "Payments set retry_policy too")
    _same_answers(_fresh(repo), queries=("cafe", "retry policy", "retryPolicy"))


def test_a_store_with_two_memories_of_one_id_is_ranked_from_the_loaded_memories(repo, store):
    m = store.get(store.add("fact", "redis is the cache").memory.id)
    store.add("fact", "postgres is the database")
    # The same memory again under another type's folder: a damaged store, reported by a full load.
    moved = m.evolve(type="convention")
    index = pygit2.Index()
    index.read_tree(store.repo[store.tip()].peel(pygit2.Tree))
    index.add(pygit2.IndexEntry(memory_path(moved), store.repo.create_blob(dump_yaml(moved)),
                                pygit2.GIT_FILEMODE_BLOB))
    sig = pygit2.Signature("t", "t@example.com")
    new = store.repo.create_commit(None, sig, sig, "dup", index.write_tree(store.repo), [store.tip()])
    store.repo.references["refs/memory/main"].set_target(new)
    fresh = _fresh(repo)
    assert postings.rank(fresh, "redis cache", 5) is None
    hits = recall(fresh, "redis cache", paths=[], limit=5)
    assert [h.memory.id for h in hits] == [m.id]
    assert any("duplicate id" in p.message for p in fresh.problems)


def test_a_new_branch_starts_from_a_copy_of_a_kept_view(repo, store, monkeypatch):
    rng = random.Random(2)
    for _ in range(30):
        _add(store, rng)
    assert postings.rank(store, "redis", 5) is not None
    git(repo, "checkout", "-q", "-b", "feature")
    feature = Store.open(str(repo))
    feature.add("fact", "only on the feature branch, about redis")
    taken = []
    real = postings._add_docs
    monkeypatch.setattr(postings, "_add_docs", lambda db, docs, progress: (taken.append(len(docs)), real(db, docs, progress)))
    _same_answers(_fresh(repo), queries=("redis",), limits=(5,))
    assert taken[0] == 1  # the feature's one memory; the other thirty came with the copy


def test_a_killed_view_update_leaves_an_index_the_next_command_trusts(repo, store):
    rng = random.Random(9)
    for _ in range(30):
        _add(store, rng)
    code = ("import os, random, sys\n"
            "os.environ['GITMEM_ENCODER'] = 'none'\n"
            "from gitmem import Store, postings\n"
            "real = postings._add_docs\n"
            "def slow(db, docs, progress):\n"
            "    real(db, docs, progress)\n"
            "    print('inside', flush=True)\n"
            "    import time; time.sleep(30)\n"
            "postings._add_docs = slow\n"
            "postings.rank(Store.open(sys.argv[1]), 'redis', 5)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(repo)], stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"inside"  # the docs are written, the view not yet committed
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    _same_answers(_fresh(repo), queries=QUERIES[:2], limits=(5,))


def test_two_processes_moving_views_at_once_lose_nothing(repo, store):
    rng = random.Random(4)
    for _ in range(20):
        _add(store, rng)
    git(repo, "branch", "other")
    code = ("import os, sys\n"
            "os.environ['GITMEM_ENCODER'] = 'none'\n"
            "from gitmem import Store, postings\n"
            "from gitmem.model import Author\n"
            "s = Store.open(sys.argv[1], branch=sys.argv[2])\n"
            "for i in range(8):\n"
            "    s.add('fact', f'{sys.argv[2]} redis fact {i}', author=Author('t', 't@example.com', 'human'))\n"
            "    postings.rank(s, 'redis', 3)\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(repo), b]) for b in ("main", "other", "main")]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    for branch in ("main", "other"):
        _same_answers(_fresh(repo, branch), queries=("redis fact", "redis"), limits=(30,))


def test_a_query_with_a_rare_word_ranks_only_the_memories_that_have_it(repo, store, monkeypatch):
    monkeypatch.setattr(postings, "RARE", 0.05)
    for i in range(40):
        store.add("fact", f"the service number {i} logs to stdout")
    store.add("fact", "the zebra service logs to a file")
    statements = []
    postings.rank(store, "x", 1)  # the view is built
    store.warm.index._conn().set_trace_callback(statements.append)
    hits = postings.rank(store, "zebra service logs", 1, now=NOW)
    bounded = [s for s in statements if "ORDER BY most" in s]
    assert [h.memory.text for h in hits] == ["the zebra service logs to a file"]
    assert len(bounded) == 1 and re.search(r"VALUES \(\d+, [^)]+\)\)", bounded[0])  # one word's: the common ones could not win
    assert _scored_in_full(statements) == 1
    _same_answers(store, queries=("zebra service logs",), limits=(1, 5))


COMMON = ("service", "logs", "queue")


def _crowd(store: Store, rng: random.Random, monkeypatch, n: int = 60) -> None:
    """``n`` memories nearly all of which hold the common words, written at three times far apart (a longer
    memory may outscore a shorter, older one), in few lengths and types: many tie on score (same words, length,
    type and time) and are told apart by their ids alone. Some are edited, retracted or superseded (postings
    of inactive memories and of older blobs stay)."""
    times = ("2024-01-01T00:00:00Z", "2026-06-01T00:00:00Z", "2026-12-01T00:00:00Z")
    stamps = iter(times[i % 3] for i in range(10 * n))
    monkeypatch.setattr(model, "utc_now", lambda: next(stamps))
    ids = []
    for _ in range(n):
        kind = rng.choice(["decision", "rejection", "fact", "fact", "convention", "file"])
        words = [w for w in COMMON if rng.random() < 0.85] + rng.sample(WORDS, rng.randint(0, 1))
        extra = {"blob": "0" * 40} if kind == "file" else {"reason": "ops"} if kind == "rejection" else {}
        paths = rng.sample(PATHS, 1 if kind == "file" else rng.randint(0, 1))
        ids.append(store.add(kind, " ".join(words) or "service", paths=paths, **extra).memory.id)
    for k, i in enumerate(rng.sample(ids, 6)):
        if k % 3 == 0:
            store.edit(i, text="service logs queue " + rng.choice(WORDS))
        elif k % 3 == 1:
            store.retract(i)
        else:
            store.supersede(i, "service queue")


@pytest.mark.parametrize("share, words", [(0.0, postings.BEST_FIRST), (postings.IMPACT, postings.BEST_FIRST),
                                          (1e9, 9)])
def test_a_query_of_only_common_words_ranks_as_the_loaded_memories_ties_included(repo, store, monkeypatch, share,
                                                                                  words):
    """Up to ``words`` words in most memories are read best first (by their impact) until no later posting can
    make the cut; past a cost of ``share`` of their postings, the rest are bounded in SQL (0: at once; 1e9:
    never). Either way the answer is rank()'s, score for score, ties told apart by id as rank does."""
    _crowd(store, random.Random(7), monkeypatch)
    monkeypatch.setattr(postings, "IMPACT", share)
    monkeypatch.setattr(postings, "BEST_FIRST", words)
    queries = ("service", "service logs", "queue logs service", "service redis", "logs queue")
    _same_answers(store, queries=queries, limits=(1, 3, 10))
    fresh = _fresh(repo)
    fresh.add("fact", "service logs queue")  # a memory written now: recency tells it from its ties
    _same_answers(fresh, queries=queries[:2], limits=(1, 3))


def test_a_query_of_only_common_words_scores_in_full_only_what_reaches_the_cut(repo, store):
    """A query whose every word is in most memories does not bound each memory that has one: it reads the
    words' postings shortest memory first and scores in full only those that could make the cut."""
    for i in range(60):  # each longer than the last: the shorter, the higher a match scores
        store.add("fact", " ".join(["service", "logs"] + [f"filler{j}" for j in range(i)]))
    statements = []
    postings.rank(store, "x", 1)  # the view is built
    store.warm.index._conn().set_trace_callback(statements.append)
    hits = postings.rank(store, "service logs", 3, now=NOW)
    assert [h.memory.text for h in hits] == ["service logs", "service logs filler0", "service logs filler0 filler1"]
    assert _scored_in_full(statements) == 3
    assert not [s for s in statements if "ORDER BY most" in s]  # no memory's bound computed in SQL
    _same_answers(store, queries=("service logs", "logs", "filler0 service"), limits=(1, 3, 50))


def _written_together(store: Store, n: int) -> None:
    """``n`` memories of four types written in one commit at one time (an import), alike but for their numbers:
    each holds "service" and "retries" once in as many words (every 37th "service" twice, a word longer), so
    those of a type tie on score and only their ids tell them apart."""
    who = Author("Seed", "seed@example.com", "human")
    updates = {}
    for i in range(n):
        twice = " (a service)" if i % 37 == 0 else ""
        m = Memory(id=new_id(1_760_000_000_000 + i), type=("decision", "fact", "convention", "file")[i % 4],
                   author=who, source="test", created="2026-11-01T00:00:00Z", blob="0" * 40 if i % 4 == 3 else None,
                   text=f"Memory {i}: the service {i % 97} uses queue {i % 13} for retries{twice}",
                   tags=(f"t{i % 7}",), paths=(f"src/mod{i % 50}.py",))
        updates[memory_path(m)] = dump_yaml(m)
    store.move_ref(None, store.commit_tree(updates, "import", who, base=None), "import")


def test_memories_written_together_rank_as_the_loaded_memories_ties_told_apart_by_id(repo, store):
    _written_together(store, 300)
    _same_answers(store, queries=("retries service", "service", "service queue retries", "retries service 42"),
                  limits=(1, 3, 10, 50, 200))


def test_a_common_query_over_memories_written_together_scores_in_full_only_the_ties_it_keeps(repo, store):
    """Among exact ties no memory's bound falls below the cut, so the threshold alone never stops: only the
    newest of the tied memories are scored in full (the tie goes to the newer id), not every memory."""
    statements, _ = _traced_ranking(store, 300, "retries service", 10)
    assert _scored_in_full(statements) < 3 * 10  # of 300: the first ten read, then those newer than the cut
    assert not [s for s in statements if "ORDER BY most" in s]  # no memory's bound computed in SQL


@pytest.mark.parametrize("query", ["retries service", "service", "service queue retries", "retries service 42"])
def test_a_long_ranking_over_memories_written_together_scores_in_full_about_what_it_keeps(repo, store, query):
    """A long ranking (the context builder's second round asks four times the first) over an import: the cut is
    filled with the newest of the tied memories (a tie goes to the newer id), not any of them, so about as many
    are scored in full as are kept, the rest passed unread, and no memory is bounded in SQL by the common words
    (which scored every tied one); the order is rank()'s, ties told apart by the newer id."""
    statements, common = _traced_ranking(store, 600, query, 200)
    # of 600: the newest until 200 tie (the file memories among them, a quarter, are stale and score less)
    assert _scored_in_full(statements) < 300
    assert not [tids for tids in _bound_in_sql(statements) if tids & common]


def _traced_ranking(store, n: int, query: str, limit: int) -> Tuple[List[str], Set[int]]:
    """Rank ``query`` over ``n`` memories written together with the index's SQL traced, checking the hits are
    rank()'s over the loaded memories: (the statements run, the term ids of "service", "queue" and "retries")."""
    _written_together(store, n)
    statements: List[str] = []
    postings.rank(store, "x", 1)  # the view is built
    db = store.warm.index._conn()
    common = {tid for (tid,) in db.execute("SELECT tid FROM terms WHERE term IN (?, ?, ?)",
                                           tokenize("service queue retries"))}
    db.set_trace_callback(statements.append)
    hits = postings.rank(store, query, limit, now=NOW)
    loaded = [m for _, m in sorted(store.memories().items())]
    assert hits == rank(loaded, query, limit, now=NOW, blobs=store.current_blobs(loaded))
    return statements, common


def _bound_in_sql(statements) -> List[Set[int]]:
    """The term ids of each SQL pass in the traced ``statements`` that bounded every memory holding them."""
    return [{int(t) for t in re.findall(r"\((\d+), ", s.split("), s AS", 1)[0])} for s in statements
            if "ORDER BY most" in s]


@pytest.mark.parametrize("query", ["service queue retries", "queue retries service 42"])
def test_three_common_words_over_memories_written_together_score_in_full_only_the_ties_kept(repo, store, query):
    """Past two common words reading best first pays only among memories written together (their bounds add up
    long after the cut elsewhere); there it stops among the ties as for one or two words, with or without a rare
    word ("42") first: the newest tied memories are scored in full, and no memory is bounded by the common words
    in SQL."""
    statements, common = _traced_ranking(store, 300, query, 10)
    assert _scored_in_full(statements) < 3 * 10  # of 300
    assert len(common) == 3 and not [tids for tids in _bound_in_sql(statements) if tids & common]


@pytest.mark.parametrize("alike", [1, 3, postings.ALIKE])
def test_many_common_words_rank_as_the_loaded_memories_written_together_or_one_by_one(repo, store, monkeypatch,
                                                                                       alike):
    """Memories of an import (tied) and memories written one by one after it (each of its own length and time):
    three to five common words read best first a group of memories alike at a time, give way to the SQL bounds
    after ``alike`` steps, and either way rank as rank() does, score for score, ties told apart by the newer id,
    under every filter."""
    monkeypatch.setattr(postings, "ALIKE", alike)
    _written_together(store, 300)
    queries = ("service queue retries", "retries queue service memory", "queue service retries for mod7 t3",
               "service retries memory queue 42")
    _same_answers(store, queries=queries, limits=(1, 3, 10, 50))
    for i in range(8):
        store.add(("fact", "decision")[i % 2], f"the service {i} uses queue {i} for retries" + " and more" * i)
    _same_answers(store, queries=queries, limits=(1, 3, 10, 50))


def test_a_type_gitmem_does_not_know_boosts_nothing_and_the_index_still_answers(repo, store):
    for i in range(6):
        store.add("fact", f"the cache {i} expires hourly")
    hits = postings.rank(store, "cache expires", 3, types_first=("bogus",), now=NOW)
    assert hits is not None and hits == postings.rank(store, "cache expires", 3, now=NOW)
    _same_answers(store, queries=("cache expires",), limits=(3,))


def test_a_search_reads_each_file_in_play_once_not_once_per_memory_about_it(repo, store, monkeypatch):
    """Whether a file memory is stale needs its file's blob now: a file 30 memories describe is read and hashed
    once per ranking (a 30 MB file under 300 summaries took 16 s when each read it again)."""
    from gitmem import gitdir

    (repo / "telemetry.bin").write_bytes(b"x" * 1000)
    for i in range(30):
        store.add("file", f"summary of the telemetry blob part {i}", paths=["telemetry.bin"])
    postings.rank(store, "x", 1)  # the view is built
    reads = []
    real = gitdir.blob_id
    monkeypatch.setattr(gitdir, "blob_id", lambda path: reads.append(path) or real(path))
    hits = postings.rank(store, "telemetry blob summary", 30, now=NOW)
    assert len(hits) == 30 and len(reads) == 1
    _same_answers(store, queries=("telemetry blob summary",), limits=(3, 30))


def _scored_in_full(statements) -> int:
    """How many memories the traced ``statements`` scored in full (not only bounded from a posting)."""
    return sum(len(s.split("WHERE d.doc IN (", 1)[1].split(")", 1)[0].split(","))
               for s in statements if "WHERE d.doc IN (" in s)


def test_a_search_scores_in_full_only_the_memories_whose_bound_reaches_the_cut(repo, store):
    """Each posting bounds its memory's score from its own row; a memory is read and scored in full only if
    that bound could still make the cut, not every memory that has one of the words."""
    for i in range(60):  # each longer than the last: the shorter, the higher a match scores
        store.add("fact", " ".join(["zebra"] + [f"filler{j}" for j in range(i)]))
    for i in range(60):
        store.add("fact", f"the service number {i} logs to stdout")
    statements = []
    postings.rank(store, "x", 1)  # the view is built
    store.warm.index._conn().set_trace_callback(statements.append)
    hits = postings.rank(store, "zebra", 3, now=NOW)
    assert [h.memory.text for h in hits] == ["zebra", "zebra filler0", "zebra filler0 filler1"]
    assert _scored_in_full(statements) == 3  # of the 60 that have the word: one word's bound is its score
    _same_answers(store, queries=("zebra", "zebra filler3", "filler7 service", "service logs"), limits=(1, 3, 50))


def test_a_long_question_scores_in_full_only_what_can_make_the_cut(repo, store):
    """A memory is bounded by the shares of the question's words it holds, not by every word it might hold:
    a proposal's whole text as the query scores a few memories in full, not each that shares a word."""
    rng = random.Random(5)
    vocab = [f"word{i}" for i in range(300)]
    for _ in range(150):
        store.add("fact", " ".join(rng.sample(vocab, 4)))
    query = " ".join(rng.sample(vocab, 80))
    sharing = sum(1 for m in store.memories().values() if set(m.text.split()) & set(query.split()))
    statements = []
    postings.rank(store, "x", 1)  # the view is built
    store.warm.index._conn().set_trace_callback(statements.append)
    postings.rank(store, query, 3, now=NOW)
    assert _scored_in_full(statements) * 5 < sharing
    _same_answers(store, queries=(query,), limits=(1, 3, 10))


def test_after_pulls_each_clone_ranks_as_its_loaded_memories(tmp_path):
    """Pulls fast-forward and merge memory refs under a view; each clone's next ranking follows."""
    from conftest import clone, gitmem, make_origin

    origin = make_origin(tmp_path)
    clones = [clone(origin, tmp_path / name.lower(), name) for name in ("Alice", "Bob")]
    alice, bob = clones
    rng = random.Random(8)
    for _ in range(15):
        _add(Store.open(str(alice)), rng)
    gitmem(alice, "push")
    _same_answers(_fresh(bob), limits=(5,))  # nothing yet
    gitmem(bob, "pull")  # a fast-forward
    _same_answers(_fresh(bob), limits=(5,))
    for _ in range(5):
        _add(Store.open(str(alice)), rng)
        _add(Store.open(str(bob)), rng)
    Store.open(str(bob)).retract(sorted(Store.open(str(bob)).memories())[0])
    gitmem(alice, "push")
    gitmem(bob, "pull")  # a merge
    gitmem(bob, "push")
    gitmem(alice, "pull")
    for path in clones:
        _same_answers(_fresh(path), limits=(5,))


def test_a_filtered_list_read_through_the_index_is_the_full_list(repo, store, monkeypatch):
    rng = random.Random(6)
    ids = [_add(store, rng) for _ in range(40)]
    store.retract(ids[0])
    store.supersede(ids[1], "redis queue, superseded")
    store.add("fact", "tagged one", tags=["ops"], paths=["src/lib"])
    store.add("note", "kept by the memory tool", tags=["memory-tool"])
    gone = store.add("note", "tagged in three ways", tags=["memory-tool", "日本語", "the"]).memory.id
    store.retract(gone)
    asks = [dict(), dict(type="rejection"), dict(path="src"), dict(path="src/lib/x.py", type="fact"),
            dict(tag="ops"), dict(status=None), dict(status="retracted"), dict(status="superseded", type="fact"),
            dict(author_kind="agent"), dict(source="api"), dict(tag="memory-tool"), dict(tag="memory-tool", status=None),
            dict(tag="日本語", status=None), dict(tag="the", status=None), dict(tag="memory", status=None)]
    for limit in (None, 1, 3):
        indexed = [[m.id for m in _fresh(repo).list(limit=limit, **ask)] for ask in asks]
        with monkeypatch.context() as patched:
            patched.setattr(Store, "_listed", lambda *a, **k: None)
            full = [[m.id for m in _fresh(repo).list(limit=limit, **ask)] for ask in asks]
        assert indexed == full
    assert any(indexed) and all(len(ids) <= 3 for ids in indexed)
    read: list = []  # a tag is narrowed by the postings of its words: only the two notes that have them are read
    real = postings.IndexedMemories.get
    monkeypatch.setattr(postings.IndexedMemories, "get", lambda self, ids: read.extend(ids) or real(self, ids))
    assert len(_fresh(repo).list(tag="memory-tool", status=None)) == 2 and len(read) == 2
    who = Author("Seed", "seed@example.com", "human")  # a tag on more than 64 memories a listed one asks for:
    common = [Memory(id=new_id(1_760_000_000_000 + i), type="fact", author=who, source="test",  # its newest are read
                     created="2026-01-01T00:00:00Z", text=f"common {i}", tags=("common",)) for i in range(70)]
    store.move_ref(store.tip(), store.commit_tree({memory_path(m): dump_yaml(m) for m in common}, "seed", who,
                                                  base=store.tip()), "seed")
    monkeypatch.setattr(Store, "memories", lambda *a, **k: pytest.fail("a tagged list loaded every memory"))
    assert [m.id for m in _fresh(repo).list(tag="common", limit=1)] == [common[-1].id]


def test_the_paths_in_play_are_found_by_their_indexes_not_once_per_memory(repo, store):
    """The work SQLite does for a query's paths grows with the memories that touch them, not with their
    square: all in one folder, each is a sibling of the file in play (counted in SQLite's VM steps; the plan
    that read the view's members first and the siblings' index for each took 22 s at 10,000)."""
    from gitmem.model import Author, Memory, new_id

    who = Author("Seed", "seed@example.com", "human")

    def seeded(n: int) -> Store:
        updates = {}
        for i in range(n):
            m = Memory(id=new_id(1_760_000_000_000 + i), type="fact", author=who, source="test",
                       created="2026-01-01T00:00:00Z", text=f"module {i} retries", paths=(f"src/mod{i}.py",))
            updates[memory_path(m)] = dump_yaml(m)
        store.move_ref(store.own_tip(), store.commit_tree(updates, "seed", who, base=None), "seed")
        return _fresh(repo)

    def steps(s: Store) -> int:
        postings.rank(s, "retries", 5, paths=["src/mod7.py"])  # bring the view to the tip first
        count = [0]
        db = s.warm.index._conn()
        db.set_progress_handler(lambda: count.__setitem__(0, count[0] + 1), 1000)
        try:
            hits = postings.rank(s, "retries", 5, paths=["src/mod7.py"])
        finally:
            db.set_progress_handler(None, 0)
        assert hits[0].memory.paths == ("src/mod7.py",)
        return count[0]

    small, large = steps(seeded(200)), steps(seeded(800))
    assert large < 8 * max(small, 1), (small, large)  # four times the memories: about four times the work (was 18)


def test_the_newest_active_memories_are_read_a_page_at_a_time_as_the_commit_has_them(repo, store):
    """A context without a question reads the newest memories: page after page they are the commit's active
    ids, newest first, also for a commit read through another's view (what differs stands in for its rows)."""

    from gitmem.context import Loaded
    from gitmem.postings import IndexedMemories

    ids = [store.add("fact", f"note {i}").memory.id for i in range(23)]
    store.retract(ids[3])
    tip = str(pygit2.Repository(str(repo)).references[store.ref].target)
    rng = random.Random(3)
    later = store.memories()
    changed = {i: None for i in rng.sample(ids, 5)}  # gone at the commit read
    changed.update({i: later[i] for i in rng.sample(ids, 3)})  # as they are
    changed.update({i: later[i]._replace(status="retracted") for i in rng.sample(ids, 2)})  # withdrawn since
    extra = [store.add("fact", f"added {i}").memory for i in range(4)]
    changed.update({m.id: m for m in extra[:3]})
    for view_changed in ({}, changed):
        at = {i: m for i, m in later.items() if i not in view_changed}
        at.update({i: m for i, m in view_changed.items() if m is not None})
        want = Loaded(at)
        view = IndexedMemories(store, tip, changed=dict(view_changed))
        for limit in (1, 2, 5, 64):
            pages, before = [], None
            while page := view.newest_active(before, limit):
                assert len(page) <= limit and page == sorted(page, reverse=True)
                pages += page
                before = page[-1]
            assert pages == want.active_ids()[::-1] == want.newest_active(None, 10**6)


def test_a_limit_past_64_bits_ranks_every_match_not_a_sqlite_overflow(repo, store):
    store.add("fact", "redis is the cache")
    store.add("rejection", "use redis for the queue", reason="ops")
    for limit in (2**63 - 1, 10**20):
        hits = postings.rank(store, "redis", limit, now=NOW)
        assert sorted(h.memory.text for h in hits) == ["redis is the cache", "use redis for the queue"]
    result = gitmem(repo, "search", "redis", "-n", str(10**20), "--json", check=False)
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)["hits"]) == 2
