"""The derived index under .git/gitmem/: a cache keyed by object ids, never the source of truth."""

import json
import os
import random
import subprocess
import sys

import pytest
from conftest import git

from gitmem import Store
from gitmem import warm as warm_module
from gitmem.errors import StorageError
from gitmem.model import dump_yaml, memory_path
from gitmem.recall import recall


def _index_file(repo) -> str:
    return os.path.join(str(repo), ".git", "gitmem", "index.sqlite")


def _fresh(repo, branch=None) -> Store:
    """A store as a new process sees it: nothing remembered in memory, only the index on disk."""
    warm_module.forget_warm()
    return Store.open(str(repo), branch=branch)


def _answers(repo, branch=None):
    s = _fresh(repo, branch)
    listing = [(m.id, m.text, m.status) for m in s.list(status=None)]
    hits = [h.memory.id for h in recall(s, "job queue redis postgres", paths=[], limit=5)]
    return listing, hits, [p.to_dict() for p in s.problems]


def _seed(store: Store, n: int = 30):
    rng = random.Random(7)
    words = ["queue", "redis", "postgres", "cache", "deploy", "billing", "auth", "search", "job", "css"]
    ids = []
    for i in range(n):
        text = " ".join(rng.choice(words) for _ in range(5)) + f" {i}"
        kind = rng.choice(["fact", "decision", "convention"])
        ids.append(store.add(kind, text, reason="r" if kind == "decision" else None).memory.id)
    return ids


def test_an_index_rebuilt_from_nothing_gives_the_same_answers(repo, store):
    _seed(store)
    before = _answers(repo)
    assert os.path.exists(_index_file(repo))
    warm_module.forget_warm()
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(_index_file(repo) + suffix):
            os.unlink(_index_file(repo) + suffix)
    assert _answers(repo) == before


def test_a_corrupt_index_file_is_rebuilt_not_trusted(repo, store):
    _seed(store, 10)
    before = _answers(repo)
    warm_module.forget_warm()
    for suffix in ("-wal", "-shm"):
        if os.path.exists(_index_file(repo) + suffix):
            os.unlink(_index_file(repo) + suffix)
    with open(_index_file(repo), "r+b") as f:
        f.seek(0)
        f.write(b"this is not a database" * 200)
    assert _answers(repo) == before
    warm_module.forget_warm()
    import sqlite3

    with sqlite3.connect(_index_file(repo)) as db:  # rebuilt: a real index again, serving the next command
        assert db.execute("SELECT count(*) FROM blobs").fetchone()[0] == 10


@pytest.mark.parametrize("damage", ["not json", "[1, 2]", '{"no": "reason"}', '"a string"'])
def test_a_damaged_row_in_a_sound_index_is_read_again_from_its_blob_not_trusted(repo, store, damage):
    _seed(store, 10)
    before = _answers(repo)
    loaded = _fresh(repo).memories()
    warm_module.forget_warm()
    import sqlite3

    with sqlite3.connect(_index_file(repo)) as db:  # a sound database, one of its rows damaged
        (blob,) = db.execute("SELECT blob FROM blobs ORDER BY blob LIMIT 1").fetchone()
        db.execute("UPDATE blobs SET row = ? WHERE blob = ?", (damage, blob))
    assert _answers(repo) == before  # the same memories, none called invalid, none dropped
    fresh = _fresh(repo)
    assert fresh.memories() == loaded and fresh.problems == []  # a full load reads the same


def test_the_index_agrees_with_a_full_scan_after_writes_merges_and_branch_switches(repo, store):
    ids = _seed(store, 12)
    rng = random.Random(3)
    git(repo, "checkout", "-q", "-b", "feature")
    feature = Store.open(str(repo))
    for _ in range(8):
        op = rng.choice(["add", "edit", "retract"])
        if op == "add":
            ids.append(feature.add("fact", f"feature fact {rng.random()}").memory.id)
        elif op == "edit":
            feature.edit(rng.choice(ids), text=f"edited on feature {rng.random()}")
        else:
            try:
                feature.retract(rng.choice(ids))
            except Exception:  # noqa: BLE001 - retracting twice is refused; the index must still agree
                pass
    git(repo, "checkout", "-q", "main")
    Store.open(str(repo), branch="main").add("fact", "main moved on")
    from gitmem.merge import merge_into

    merge_into(Store.open(str(repo), branch="main"), Store.open(str(repo), branch="feature").own_tip())
    for branch in ("main", "feature"):
        s = _fresh(repo, branch)
        scanned = {}
        for path, blob in s.snapshot().entries():
            data = s.repo[blob].data
            scanned[path.rsplit("/", 1)[1][:-5]] = data
        indexed = {m.id: dump_yaml(m) for m in s.memories().values()}
        assert {k: memory_path(_fresh(repo, branch).get(k)) for k in indexed}  # every id resolves
        assert indexed == scanned


def test_a_read_after_a_write_parses_only_the_new_blob(repo, store):
    _seed(store, 20)
    store.memories()
    warm = store.warm
    parsed_before = set(warm.parsed)
    store.add("fact", "one more")
    after = store.memories()
    assert len(after) == 21
    assert len(set(warm.parsed) - parsed_before) == 1


def test_two_processes_filling_the_index_at_once_lose_nothing(repo, store):
    _seed(store, 40)
    warm_module.forget_warm()
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(_index_file(repo) + suffix):
            os.unlink(_index_file(repo) + suffix)
    code = ("import sys; from gitmem import Store; s = Store.open(sys.argv[1]);"
            "[s.add('fact', f'from process {sys.argv[2]} {i}') for i in range(10)]; print(len(s.memories()))")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(repo), str(n)], stdout=subprocess.PIPE, text=True)
             for n in range(2)]
    for p in procs:
        p.communicate(timeout=120)
        assert p.returncode == 0
    listing, _, problems = _answers(repo)
    assert len(listing) == 60 and problems == []


def test_a_process_killed_while_filling_the_index_leaves_one_the_next_command_can_trust(repo, store):
    import signal
    import time

    from gitmem.model import Author, Memory, new_id

    who = Author("Seed", "seed@example.com", "human")
    updates = {}
    for i in range(3000):
        m = Memory(id=new_id(1_760_000_000_000 + i), type="fact", author=who, source="test",
                   created="2026-01-01T00:00:00Z", text=f"fact number {i} about queue {i % 17}")
        updates[memory_path(m)] = dump_yaml(m)
    store.move_ref(None, store.commit_tree(updates, "seed", who, base=None), "seed")
    expected = sorted(m.id for m in _fresh(repo).memories().values())
    for delay in (0.3, 0.6, 0.9):
        warm_module.forget_warm()
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(_index_file(repo) + suffix):
                os.unlink(_index_file(repo) + suffix)
        proc = subprocess.Popen([sys.executable, "-c",
                                 "import sys; from gitmem import Store; Store.open(sys.argv[1]).memories()", str(repo)])
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        s = _fresh(repo)
        assert sorted(m.id for m in s.memories().values()) == expected and s.problems == []


def test_a_first_build_takes_its_place_whole_and_one_whose_process_died_is_removed(repo, store):
    """A cold start writes the index in a file of its own (no journal to write twice) and links it into
    place when done: others never open it half made, and a build whose process died is never read."""
    _seed(store, 20)
    listing = _answers(repo)
    _drop_index(repo)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    leftover = f"{_index_file(repo)}.new-{dead.pid}"
    with open(leftover, "w") as f:
        f.write("a build its process never finished")
    s = _fresh(repo)
    assert s.warm.index.tree_of("0" * 40) is None  # opens the index: a new file, this process's own
    assert os.path.exists(s.warm.index._building) and not os.path.exists(_index_file(repo))
    assert not os.path.exists(leftover)
    s.memories()  # the read stores what it learned: the build is done and linked into place
    assert os.path.exists(_index_file(repo))
    assert sorted(os.listdir(os.path.dirname(_index_file(repo)))) == ["index.sqlite"]
    assert _answers(repo) == listing
    with open(leftover, "w") as f:  # a dead builder's file beside an index that exists: removed by any open
        f.write("a build its process never finished")
    assert _fresh(repo).warm.index.tree_of("0" * 40) is None and not os.path.exists(leftover)
    _drop_index(repo)  # a build one of whose writes failed (a full disk, say) is dropped, not linked: no journal undoes it
    s = _fresh(repo)
    s.warm.index._write("INSERT INTO no_such_table VALUES (?)", [(1,)])
    s.memories()
    assert os.listdir(os.path.dirname(_index_file(repo))) == [] and _answers(repo) == listing


def test_a_process_is_known_to_have_ended_only_where_asking_cannot_end_it(monkeypatch):
    """What a dead process left (a first build, a fetch's quarantine refs) is removed when its pid is gone;
    on Windows ``os.kill(pid, 0)`` ends the process it names, so there nothing is asked and nothing removed."""
    from gitmem import index

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert index.process_gone(str(dead.pid)) and not index.process_gone(str(os.getpid()))
    assert not index.process_gone("not-a-pid")
    asked = []
    monkeypatch.setattr(index.os, "name", "nt")
    monkeypatch.setattr(index.os, "kill", lambda *a: asked.append(a))
    assert not index.process_gone(str(dead.pid)) and asked == []


def test_the_search_terms_the_index_keeps_change_only_with_its_schema():
    """Each blob's search terms are kept under the blob id alone, and ranking and tag filters trust them: what
    gitmem.search.tokenize makes of text may change only with a new gitmem.index.SCHEMA, which starts the index
    again. Changed tokenize on purpose? Bump SCHEMA and record the new digest here."""
    import hashlib

    from gitmem.index import SCHEMA
    from gitmem.search import tokenize

    texts = ["Use Redis for the job queue; retries are idempotent", "end-to-end tests run on back-end pods",
             "payment_intent ids", "k8s db config auth repo deps env js ts pg", "東京のキャッシュ設定",
             "Кэш для очереди задач", "המטמון של התור", "memory-tool c++ api:v2 x.y a/b İstanbul straße",
             "running queued migrations 2026-12-05 v1.2.3", "the a an of to-do", "cafe\u0301 cr\u00e8me",
             "retryPolicy RetryPolicy HTTPServer s3Bucket utf8 \u00d8rsted \u00c6ble",
             "हिन्दी সংযোগ สวัสดี הַתּוֹר مُخَزَّنَة Spin\u0308al gRPC OAuth iOS e-mail dbConfig",
             "می\u200cخواهیم data\u00adbase"]
    digest = hashlib.sha1(json.dumps([tokenize(t) for t in texts], ensure_ascii=False).encode()).hexdigest()
    assert (SCHEMA, digest) == (20, "713fbc3847eab15d7db82c73a174fc1254e7040a")


def test_memos_of_one_kind_never_push_out_another_kind(repo, store):
    """Each kind of memo (a key's first word) keeps its newest Index.MEMOS: a page's short ids, kept for
    every tree a list reads, never push out a context's cached part, which costs far more to make again."""
    from gitmem.index import Index

    store.add("fact", "opens the index")
    index = store.warm.index
    index.put_memo("a" * 40, "standing 50000 code", {"part": "kept"})
    for n in range(Index.MEMOS + 5):
        index.put_memo(f"{n:040d}", "ids ending with abc code", {"abc": []})
    assert index.memo("a" * 40, "standing 50000 code") == {"part": "kept"}
    kept = [n for n in range(Index.MEMOS + 5) if index.memo(f"{n:040d}", "ids ending with abc code") is not None]
    assert len(kept) == Index.MEMOS and kept[-1] == Index.MEMOS + 4  # the newest of its kind among them


def test_status_counts_and_the_first_page_of_list_agree_with_a_full_scan_and_follow_each_write(repo, store):
    from gitmem.cli import main as cli
    from click.testing import CliRunner

    ids = _seed(store, 25)
    store.retract(ids[3])
    store.add("rejection", "Use Redis for the job queue", reason="ops")

    def counts_by_scan():
        out = {}
        for m in _fresh(repo).memories().values():
            if m.status == "active":
                out[m.type] = out.get(m.type, 0) + 1
        return out

    runner = CliRunner()
    for step in range(3):
        status = json.loads(runner.invoke(cli, ["-C", str(repo), "status", "--json"]).output)
        assert status["counts"] == counts_by_scan()
        page = json.loads(runner.invoke(cli, ["-C", str(repo), "list", "-n", "5", "--json"]).output)["memories"]
        full = json.loads(runner.invoke(cli, ["-C", str(repo), "list", "--json"]).output)["memories"]
        assert [m["id"] for m in page] == [m["id"] for m in full][-5:]
        Store.open(str(repo)).add("fact", f"written after step {step}")
    warm = Store.open(str(repo)).warm
    Store.open(str(repo)).summary()
    before = set(warm.parsed)
    Store.open(str(repo)).add("fact", "one more")
    assert Store.open(str(repo)).summary()["counts"]["fact/active"] >= 1
    assert len(set(warm.parsed) - before) == 1  # the summary after a write parsed only the new blob


def test_summary_lists_and_the_choices_about_files_match_a_full_scan(repo, monkeypatch):
    """resume and the SessionStart hook read short lists and a path-pruned walk instead of every
    memory; they must give what a scan of every memory gives, including where a summary keeps too
    many paths to list (PATHS) and says "look inside"."""
    from gitmem.checkpoint import _touching

    monkeypatch.setattr(warm_module.Warm, "PATHS", 3)
    store = Store.open(str(repo))
    for i in range(70):
        store.add("convention", f"convention {i}")
        kind = "rejection" if i % 3 == 0 else "decision"
        w = store.add(kind, f"choice {i}", reason="because", paths=[f"src/m{i % 7}.py", f"lib/{i % 5}/x.py"])
        if i % 10 == 0:
            store.retract(w.memory.id, reason="changed our mind")
    store.add("checkpoint", "halfway / next: finish")
    for touched in (["src/m3.py"], ["lib/2"], ["lib/4/x.py", "src/m0.py"], ["nowhere.py"]):
        s = _fresh(repo)
        everything = sorted(s.memories().values(), key=lambda m: m.id)
        active_choices = [m for m in everything if m.type in ("decision", "rejection") and m.status == "active"]
        touches = _touching(touched)
        assert [m.id for m in s.choices_touching(touches)] == [m.id for m in active_choices if touches(m.paths)]
        assert [m.id for m in s.listed("choices", 50)] == [m.id for m in active_choices[::-1][:50]]
        conventions = [m.id for m in everything if m.type == "convention"]
        assert [m.id for m in s.listed("conventions", 50)] == conventions[:50]
        recent = [m.id for m in everything if m.type != "checkpoint"][::-1][:50]
        assert [m.id for m in s.listed("recent", 50)] == recent
        assert s.listed("recent", 51) is None  # more than a summary keeps: the caller reads everything
        store.add("decision", f"touching {touched[0]}", paths=[touched[0]])  # the next round sees a write


def test_session_start_reads_past_the_summary_lists_when_the_budget_has_room(repo):
    """With a budget larger than the lists a summary keeps, SessionStart still gives every
    convention, oldest first, then every choice, newest first, as a scan of every memory would."""
    from gitmem.claude_code import HookInput, session_start

    store = Store.open(str(repo))
    conventions = [store.add("convention", f"convention {i}").memory.id for i in range(60)]
    choices = [store.add("decision", f"decision {i}").memory.id for i in range(60)]
    hook = HookInput("SessionStart", {"session_id": "s", "cwd": str(repo), "source": "startup"})
    text = session_start(hook, _fresh(repo), budget=100_000).output["hookSpecificOutput"]["additionalContext"]
    shown = [line.split('id="')[1].split('"')[0] for line in text.splitlines() if line.startswith("<memory ")]
    assert shown == conventions + choices[::-1]
    assert "more not shown" not in text


def test_a_write_goes_through_while_another_process_holds_the_index(repo):
    """The write path only records what it scanned clean; a locked index never blocks or fails a write."""
    import sqlite3

    from gitmem.redact import rules_key

    store = Store.open(str(repo))
    store.add("fact", "opens the index")
    store.memories()  # a read stores what it learned, which makes a first build the index others open
    holder = sqlite3.connect(str(repo / ".git" / "gitmem" / "index.sqlite"), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        w = store.add("fact", "written while the index is locked")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert Store.open(str(repo)).get(w.memory.id).text == "written while the index is locked"
    from gitmem.model import memory_path

    blob = git(repo, "rev-parse", f"refs/memory/main:{memory_path(w.memory)}").strip()
    assert store.warm.index.clean(rules_key(), [blob]) == []  # given up, not waited for: a push will scan it


def _drop_index(repo) -> None:
    warm_module.forget_warm()
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(_index_file(repo) + suffix):
            os.unlink(_index_file(repo) + suffix)


def _index_rows(repo):
    import sqlite3

    db = sqlite3.connect(_index_file(repo))
    try:
        return {table: sorted(db.execute(f"SELECT * FROM {table}").fetchall())
                for table in ("blobs", "trees", "summaries")}
    finally:
        db.close()


def test_a_cold_backlog_shared_with_a_helper_process_gives_what_one_process_gives(repo, store, monkeypatch):
    """Past Warm.PARALLEL blobs a cold summary shares them with a second process (it parses from
    the front, this one from the back): the summary, the memories, the problems and every index
    row must be what one process makes."""
    import time

    _seed(store, 40)
    store.retract(store.list()[3].id, reason="changed")
    tip = store.own_tip()
    store.move_ref(tip, store.commit_tree({"fact/0/0/0000000000000000.yaml": b"::: not yaml ["}, "hand edit",
                                          store.list()[0].author, base=tip), "hand edit")
    from_helper = []
    put_row = warm_module.Index.put_row
    monkeypatch.setattr(warm_module.Index, "put_row", lambda self, *a: from_helper.append(1) or put_row(self, *a))
    read = warm_module.read_memory
    monkeypatch.setattr(warm_module._Helper, "usable", staticmethod(lambda: True))  # whatever the machine's load
    answers = []
    for parallel in (10**9, 10):
        monkeypatch.setattr(warm_module.Warm, "PARALLEL", parallel)
        monkeypatch.setattr(warm_module.Warm, "STEAL", 1)
        monkeypatch.setattr(warm_module.Warm, "SPILL", 1)  # a first build writes its rows as it goes
        # This process slowed down, so the helper answers its share before this one gets there.
        monkeypatch.setattr(warm_module, "read_memory", lambda *a: time.sleep(0.03) or read(*a))
        _drop_index(repo)
        s = _fresh(repo)
        summary = s.summary()
        answers.append((summary, _index_rows(repo), sorted((m.id, m.text) for m in s.memories().values()),
                        [p.to_dict() for p in s.problems]))
    assert from_helper  # the second round took the helper's answers
    assert answers[0] == answers[1]
    assert answers[1][0]["counts"]["invalid"] == 1


def test_a_helper_that_stops_at_a_missing_object_answers_only_what_it_read(repo, store, monkeypatch):
    """A helper process that dies (here: at an object that is not there) answers the blobs before
    it and nothing after; the caller parses the rest itself and names the damage as one process would."""
    _seed(store, 6)
    entries = store.warm.entries(store.repository, store.snapshot().tree_id)
    missing = ("fact/z/z/zzzzzzzzzzzzzzzz.yaml", "0" * 40)
    helper = warm_module._Helper()
    helper.send(store.repo, entries[:3] + [missing] + entries[3:])
    assert helper.proc.wait() != 0
    answered = helper.answered()
    helper.stop()
    assert [found.id for _, found in answered] == [path.rsplit("/", 1)[1][:-5] for path, _ in entries[:3]]
    monkeypatch.setattr(warm_module.Warm, "PARALLEL", 2)
    _drop_index(repo)
    with pytest.raises(StorageError, match="is damaged: object 0{40} is missing"):
        _fresh(repo).warm.parse(store.repository, [missing] + entries, store.ref)


def test_a_helper_that_dies_while_it_reads_buckets_leaves_them_to_this_process(repo, store, monkeypatch):
    """A first build hands the helper whole buckets from the front. One that dies at a blob that is not there
    answers the buckets before it; this process reads the rest up to the damage and names it as one process
    would. What the index keeps is sound (the buckets read whole, by their tree ids): it holds no summary of the
    damaged bucket or of a tree above it, so the next command names the damage again."""
    _seed(store, 40)
    tip = store.own_tip()
    tree = store.repo[tip].tree
    kind = next(e.name for e in tree if e.type_str == "tree")
    x = next(e for e in store.repo[tree[kind].id] if e.type_str == "tree")
    y = next(e for e in store.repo[x.id] if e.type_str == "tree")
    ghost = "0" * 40

    def mktree(lines):
        return git(repo, "mktree", "--missing", input="".join(f"{mode} {t} {oid}\t{name}\n"
                                                                for mode, t, oid, name in lines)).strip()

    def entries(oid, replace):
        return [(f"{e.filemode:06o}", e.type_str, replace.get(e.name, str(e.id)), e.name)
                for e in store.repo[oid]]

    bucket = mktree(entries(y.id, {}) + [("100644", "blob", ghost, f"zzzzzzzzzzzzzz{x.name}{y.name}.yaml")])
    upper = mktree(entries(x.id, {y.name: bucket}))
    kind_tree = mktree(entries(tree[kind].id, {x.name: upper}))
    root = mktree(entries(tree.id, {kind: kind_tree}))
    commit = git(repo, "commit-tree", root, "-p", tip, "-m", "a bucket names a missing blob").strip()
    git(repo, "update-ref", store.ref, commit)
    monkeypatch.setattr(warm_module._Helper, "usable", staticmethod(lambda: True))
    monkeypatch.setattr(warm_module.Warm, "PARALLEL", 10)
    monkeypatch.setattr(warm_module.Warm, "STEAL_BUCKETS", 1)
    shared = []
    real = warm_module._Helper.send_buckets
    monkeypatch.setattr(warm_module._Helper, "send_buckets", lambda self, *a: shared.append(a) or real(self, *a))
    _drop_index(repo)
    with pytest.raises(StorageError, match=f"is damaged: object {ghost} is missing"):
        _fresh(repo).summary()
    assert shared  # the helper was handed the buckets
    kept = {key.split(":")[1] for key, _ in _index_rows(repo)["summaries"]} if os.path.exists(_index_file(repo)) else set()
    assert not kept & {bucket, upper, kind_tree, root}
    with pytest.raises(StorageError, match=f"is damaged: object {ghost} is missing"):
        _fresh(repo).summary()


def test_a_helper_answering_a_bucket_of_a_negative_number_of_rows_is_not_listened_to():
    """A bucket's first line says how many row lines follow: one that says fewer than none is not of that shape
    (read as an empty bucket, it moved the reader back onto the same line, for ever)."""
    import signal

    helper = warm_module._Helper()
    helper.proc.kill()
    helper.proc.wait()
    os.write(helper.out.fileno(), (json.dumps({"tree": "t", "entries": [], "bucket": {}, "rows": -1}) + "\n").encode())
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("the helper's answer was read for ever"))
    signal.alarm(5)
    try:
        assert helper.buckets() == [] and helper.broken
    finally:
        signal.alarm(0)
        helper.stop()


def test_a_helper_started_while_the_trees_are_read_is_given_the_blobs_or_stopped(repo, store, monkeypatch):
    """A cold walk starts the helper before it reads the buckets when a sample of them says the blobs
    are many, so Python starts while the trees are read. Given the blobs, it answers its share; when the
    index turns out to know them (only the summaries were lost), it is stopped and leaves no file."""
    import sqlite3
    import tempfile

    _seed(store, 24)
    monkeypatch.setattr(warm_module._Helper, "usable", staticmethod(lambda: True))
    monkeypatch.setattr(warm_module.Warm, "PARALLEL", 10)
    started = []
    real = warm_module._Helper.__init__
    monkeypatch.setattr(warm_module._Helper, "__init__", lambda self: started.append(self) or real(self))
    _drop_index(repo)
    first = _fresh(repo).summary()
    assert len(started) == 1 and started[0].proc.returncode is not None
    db = sqlite3.connect(_index_file(repo))
    with db:
        db.execute("DELETE FROM summaries")
    db.close()
    assert _fresh(repo).summary() == first
    assert len(started) == 2 and started[1].proc.wait() != 0  # killed: it was never given a job
    assert not [f for f in os.listdir(tempfile.gettempdir()) if f in {os.path.basename(h.job) for h in started}]

def test_a_helper_is_started_only_with_a_core_to_spare(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(warm_module, "_load", lambda: 1.0)  # this process alone
    assert warm_module._Helper.usable()
    monkeypatch.setattr(warm_module, "_load", lambda: 2.0)
    assert not warm_module._Helper.usable()
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    monkeypatch.setattr(warm_module, "_load", lambda: 0.0)
    assert not warm_module._Helper.usable()


def test_the_load_counts_this_process_where_linux_says_what_runs_now():
    if not os.path.exists("/proc/loadavg"):
        pytest.skip("no /proc/loadavg on this platform: the load average is used")
    assert warm_module._load() >= 1  # this process is running while it asks


def test_a_new_schema_starts_the_index_again_but_keeps_vectors_and_clean_blobs(repo, store, monkeypatch):
    """Vectors cost an encoder run per memory: an index another schema wrote is rebuilt around them (and
    around the blobs the secret scan found clean), unless their own layout changed too."""
    from gitmem import index as index_module

    store.add("fact", "The CDN caches product images for a day")
    index = store.warm.index
    index.put_vectors("enc", {"k1": b"\x00" * 8})
    index.put_vector_keys("enc", {"b1": ("k1", True)})
    index.put_clean("rules", ["b1"])
    assert index.parsed([git(repo, "rev-parse", "refs/memory/main:" + memory_path(store.list()[0])).strip()])

    def reopen():
        warm_module.forget_warm()
        return Store.open(str(repo)).warm.index

    monkeypatch.setattr(index_module, "SCHEMA", index_module.SCHEMA + 1)
    again = reopen()
    assert again.vectors("enc", ["k1"]) == {"k1": b"\x00" * 8}
    assert again.vector_keys("enc", ["b1"]) == {"b1": ("k1", True)} and again.clean("rules", ["b1"]) == ["b1"]
    assert again._query("SELECT count(*) FROM blobs") == [(0,)]  # the rest starts again
    assert Store.open(str(repo)).list()[0].text == "The CDN caches product images for a day"
    monkeypatch.setattr(index_module, "SCHEMA", index_module.SCHEMA + 1)
    monkeypatch.setitem(index_module.LASTING, "vectors", 2)  # the vectors' own layout changed: they go too
    monkeypatch.setattr(index_module, "_LAYOUTS", [(f"layout:{t}", str(v)) for t, v in index_module.LASTING.items()])
    again = reopen()
    assert again.vectors("enc", ["k1"]) == {} and again.clean("rules", ["b1"]) == ["b1"]


def test_an_index_of_an_old_layout_whose_tables_take_no_new_index_is_started_again(repo, store):
    import sqlite3

    store.add("fact", "Nightly exports run at 02:00 UTC")
    _drop_index(repo)
    db = sqlite3.connect(_index_file(repo))
    db.executescript("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL); INSERT INTO meta VALUES "
                     "('schema', '3'); CREATE TABLE members(view INTEGER, doc INTEGER);")  # no id: members_tail fails
    db.close()
    assert [h.memory.text for h in recall(Store.open(str(repo)), "exports", paths=[])] == \
        ["Nightly exports run at 02:00 UTC"]
    from gitmem.index import SCHEMA

    assert Store.open(str(repo)).warm.index._query("SELECT value FROM meta WHERE key='schema'") == [(str(SCHEMA),)]


def test_many_vectors_are_read_in_one_pass_with_the_answers_of_lookups_by_key(repo, store, monkeypatch):
    index = store.warm.index
    index.put_vectors("enc", {f"k{i}": bytes([i]) * 4 for i in range(40)})
    index.put_vectors("other", {f"k{i}": b"\xff" * 4 for i in range(40)})
    index.put_vector_keys("enc", {f"b{i}": (f"k{i}", i % 2 == 0) for i in range(40)})
    wanted, blobs = [f"k{i}" for i in range(0, 40, 3)] + ["missing"], [f"b{i}" for i in range(0, 40, 3)] + ["nob"]
    by_key = index.vectors("enc", wanted), index.vector_keys("enc", blobs)
    monkeypatch.setattr(type(index), "SCAN_FROM", 5)  # 15 keys of 40 rows: read in one pass
    assert (index.vectors("enc", wanted), index.vector_keys("enc", blobs)) == by_key
    assert by_key[0]["k3"] == bytes([3]) * 4 and "missing" not in by_key[0] and by_key[1]["b6"] == ("k6", True)


def test_a_bulk_batch_is_frozen_out_of_later_collections_and_a_small_one_is_not():
    """A cold start leaves hundreds of thousands of objects alive in the warm caches: the collector's
    first pass after it would walk them all. A server's small batches must not freeze what they touch,
    or the reference cycles among it (asyncio's, an exception's) would never be collected."""
    import gc

    assert gc.isenabled()
    before = gc.get_freeze_count()
    try:
        with warm_module._collector_paused():
            small = [[i] for i in range(1_000)]
        assert gc.get_freeze_count() == before and gc.isenabled()
        with warm_module._collector_paused():
            bulk = [[i] for i in range(warm_module._FREEZE_FROM + 10_000)]
        assert gc.get_freeze_count() >= before + len(bulk) and gc.isenabled()
    finally:
        gc.unfreeze()
    assert small and bulk


def _commit_tree_by_hand(repo, changes) -> str:
    """refs/memory/main moved to a commit made with plain git: ``changes`` maps a path to a blob (None: gone)."""
    env = {"GIT_INDEX_FILE": os.path.join(str(repo), ".git", "by-hand-index")}
    tip = git(repo, "rev-parse", "refs/memory/main").strip()
    git(repo, "read-tree", tip, env=env)
    for path, blob in changes.items():
        if blob is None:
            git(repo, "update-index", "--force-remove", path, env=env)
        else:
            git(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
    tree = git(repo, "write-tree", env=env).strip()
    commit = git(repo, "commit-tree", tree, "-p", tip, "-m", "by hand").strip()
    git(repo, "update-ref", "refs/memory/main", commit)
    return commit


def test_a_blob_is_a_memory_at_its_own_path_and_a_stray_copy_at_another_whatever_the_index_saw_first(repo, store):
    """What the index keeps of a blob is its content's verdict; where the blob sits is judged at each read. A
    copy of a memory's blob under another type's folder is invalid there, the memory at its own path is not,
    and both answers are the same with the index as without it, whichever the index saw first."""
    from gitmem.doctor import doctor

    _seed(store, 6)
    m = store.add("decision", "Queue jobs in Postgres", reason="no new service").memory
    own = memory_path(m)
    stray = "note/" + own.split("/", 1)[1]
    blob = git(repo, "rev-parse", f"refs/memory/main:{own}").strip()

    def answers():
        s = _fresh(repo)
        return _answers(repo), s.summary()["counts"], [p.where for p in doctor(s, full=True)]

    good = git(repo, "rev-parse", "refs/memory/main").strip()
    moved = _commit_tree_by_hand(repo, {own: None, stray: blob})  # at the wrong path only
    copied = _commit_tree_by_hand(repo, {own: blob, stray: blob})  # at both
    for tip in (moved, good, copied, moved, copied, good):  # the index sees each first in turn
        git(repo, "update-ref", "refs/memory/main", tip)
        with_index = answers()
        _drop_index(repo)
        assert answers() == with_index
        listing = with_index[0][0]
        assert (m.id in [i for i, _, _ in listing]) == (tip != moved)
        problems = with_index[2]
        assert (stray in problems) == (tip != good) and own not in problems


_ASKS = [dict(author_kind="agent"), dict(author_kind="human"), dict(source="mcp"), dict(source="mcp:cursor"),
         dict(source="mc"), dict(source="mcp_proxy"), dict(source="cli", author_kind="agent"), dict(source="merge"),
         dict(author_kind="agent", type="decision"), dict(source="mcp", status=None), dict(author_kind="human", status=None),
         dict(source="cli", status="retracted"), dict(author_kind="agent", status="superseded"),
         dict(source="cli", path="src"), dict(author_kind="agent", tag="ops"), dict(source="hook", tag="ops", status=None)]


def _by_many_hands(repo, store: Store) -> Store:
    """main's memory written by a person and two agents through five sources, some of it merged in from a
    branch (one memory edited on both sides: the merge writes a blob neither side wrote), one memory
    retracted and one superseded: the store a team's list filters are asked of."""
    from gitmem.merge import merge_into
    from gitmem.model import Author

    claude, cursor = Author("claude", "claude@example.com", "agent"), Author("cursor", "cursor@example.com", "agent")
    hands = [(None, "cli"), (claude, "mcp:claude-code/1.0"), (cursor, "mcp:cursor"), (claude, "hook"),
             (cursor, "mcp_proxy"), (claude, "cli")]
    ids = []
    for i in range(18):
        who, source = hands[i % len(hands)]
        kind = ("fact", "decision", "convention")[i % 3]
        ids.append(store.add(kind, f"main {kind} {i}", reason="r" if kind == "decision" else None, author=who,
                             source=source, tags=["ops"] if i % 4 == 0 else [],
                             paths=["src/app.py"] if i % 5 == 0 else []).memory.id)
    git(repo, "branch", "feature")
    feature = Store.open(str(repo), "feature")
    for i in range(8):
        who, source = hands[(i + 2) % len(hands)]
        feature.add("fact", f"feature fact {i}", author=who, source=source, tags=["ops"] if i % 3 == 0 else [])
    feature.edit(ids[1], text="main decision 1, as the feature branch put it", author=cursor, source="mcp:cursor")
    store.edit(ids[1], tags=["ops"], source="cli")
    store.retract(ids[6], reason="wrong")
    store.supersede(ids[8], "main convention 8, again", author=claude, source="hook")
    assert merge_into(store, feature.own_tip(), source="merge").kind == "merge"
    assert store.get(ids[1]).text.endswith("as the feature branch put it") and "ops" in store.get(ids[1]).tags
    return store


def _expected(full, ask):
    from gitmem.store import matcher

    wanted = matcher(**{**dict(type=None, tag=None, path=None, author_kind=None, source=None, status="active"), **ask})
    return [i for i in sorted(full) if wanted(full[i])]


def test_lists_and_pages_by_author_kind_and_source_from_the_index_are_a_full_scans(repo, store, monkeypatch):
    """The index answers a list by author kind or source (alone or beside a type, status, path or tag) from
    what it keeps beside each blob, and the answer is a full scan's, page by page both ways: memories merged
    in, edited on both sides, retracted and superseded among them, and one whose blob's row the index lost."""
    import sqlite3

    _by_many_hands(repo, store)
    full = _fresh(repo).memories()
    some = [_expected(full, ask) for ask in _ASKS]
    assert all(some[:4]) and not some[4] and all(len(e) < len(full) for e in some)
    assert {full[i].source for i in some[2]} == {"mcp:claude-code/1.0", "mcp:cursor"}
    merged = _expected(full, dict(source="mcp:cursor"))[-1]
    blob = git(repo, "rev-parse", "refs/memory/main:" + memory_path(full[merged])).strip()
    real = Store.memories
    monkeypatch.setattr(Store, "memories", lambda *a, **k: pytest.fail("every memory was loaded"))
    monkeypatch.setattr("gitmem.store.COUNTED", 1)  # counted from the index whatever their number, none read for it
    for lost in (False, True):
        if lost:  # as when the write of a blob's row was given up (another process held the lock)
            warm_module.forget_warm()
            with sqlite3.connect(_index_file(repo)) as db:
                assert db.execute("DELETE FROM blobs WHERE blob=?", (blob,)).rowcount == 1
        for ask, expected in zip(_ASKS, some):
            s = _fresh(repo)
            assert [m.id for m in s.list(**ask)] == expected, ask
            assert [m.id for m in s.list(limit=2, **ask)] == expected[-2:], ask
            counted = "tag" not in ask and ask.get("status", "active") in (None, "active")
            p, older = s.page(2, **ask), []
            while True:
                older += [m.id for m in p.memories]
                assert p.total == len(expected) if counted else p.total in (None, len(expected)), ask
                if p.older is None:
                    break
                p = s.page(2, before=p.older, **ask)
            assert older == expected[::-1], ask
            newer = [m.id for m in p.memories]
            while p.newer is not None:
                p = s.page(2, after=p.newer, **ask)
                newer[:0] = [m.id for m in p.memories]
            assert newer == expected[::-1], ask
    monkeypatch.setattr(Store, "memories", real)
    assert _fresh(repo).memories() == full


def test_a_list_by_author_kind_or_source_reads_only_the_memories_it_shows(repo, store, monkeypatch):
    """Once the index is warm, a list or a page by author kind or source parses no blob and reads only
    memories that match: the rest are known by what the index keeps beside their rows, and a page is counted
    from it too."""
    from gitmem import postings

    _by_many_hands(repo, store)
    full = _fresh(repo).memories()
    _fresh(repo).list(status=None)  # each blob parsed once, into the index
    monkeypatch.setattr(warm_module, "read_memory", lambda *a: pytest.fail("a blob was parsed again"))
    monkeypatch.setattr(Store, "memories", lambda *a, **k: pytest.fail("every memory was loaded"))
    read: list = []
    real = postings.IndexedMemories.get
    monkeypatch.setattr(postings.IndexedMemories, "get", lambda self, ids: read.extend(ids) or real(self, ids))
    for ask in (dict(source="mcp:cursor"), dict(author_kind="human"), dict(source="hook", author_kind="agent")):
        expected = _expected(full, ask)
        s = _fresh(repo)
        read.clear()
        page = s.page(1, **ask)
        assert [m.id for m in page.memories] == expected[-1:] and page.total == len(expected)
        assert read and set(read) <= set(expected), ask
        read.clear()
        assert [m.id for m in s.list(**ask)] == expected and sorted(read) == expected, ask


def test_an_index_written_before_it_kept_author_kinds_and_sources_is_started_again(repo, store):
    import sqlite3

    store.add("fact", "Nightly exports run at 02:00 UTC", source="cron")
    _drop_index(repo)
    db = sqlite3.connect(_index_file(repo))
    db.executescript("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL); INSERT INTO meta VALUES "
                     "('schema', '19'); CREATE TABLE members(view INTEGER NOT NULL, doc INTEGER NOT NULL, "
                     "id TEXT NOT NULL, type TEXT NOT NULL, active INTEGER NOT NULL, PRIMARY KEY(view, id));")
    db.close()
    fresh = Store.open(str(repo))
    assert [m.text for m in fresh.list(source="cron")] == ["Nightly exports run at 02:00 UTC"]
    assert fresh.warm.index._query("SELECT kind, source FROM members") == [(1, "cron")]


def test_a_list_by_author_kind_or_source_reads_the_views_members_not_every_memorys_rows(repo, store):
    """What a page by author kind or source narrows by is read from the view's members alone: through every
    member's doc and blob row, 100,000 memories took 0.3 s for any such page (a web UI filter), however few
    matched."""
    import sqlite3

    from gitmem.postings import IndexedMemories

    _by_many_hands(repo, store)
    s = _fresh(repo)
    assert s.page(50, source="mcp").total == len(_expected(s.memories(), dict(source="mcp")))
    view, read = IndexedMemories(s, s.tip()), set()

    def note(action, table, column, db, trigger):
        if action == sqlite3.SQLITE_READ:
            read.add(table)
        return sqlite3.SQLITE_OK

    db = s.warm.index._conn()
    db.set_authorizer(note)
    try:
        origins = view.origins(None, True)
    finally:
        db.set_authorizer(None)
    assert "members" in read and not read & {"docs", "blobs"}, read
    assert ("human", "cli") in origins and ("agent", "mcp:cursor") in origins


_SEARCH_ASKS = [dict(tag="ops"), dict(path="src"), dict(path="src/app.py"), dict(author_kind="human"),
                dict(author_kind="agent"), dict(source="mcp"), dict(source="mcp:cursor"), dict(source="merge"),
                dict(tag="ops", type="fact"), dict(author_kind="agent", type="decision"), dict(source="cli", path="src"),
                dict(tag="ops", author_kind="agent"), dict(tag="ops", source="cli", type="decision"),
                dict(tag="nothing-has-it"), dict(path="../src"), dict(source="cli", tag="ops", path="src")]


def _found(store: Store, ask, query: str, limit: int, paths):
    from gitmem.recall import find

    hits = find(store, query, limit, filters=ask, paths=paths)
    return [(h.memory.id, pytest.approx(h.score, rel=1e-6), h.match, h.stale, h.similarity) for h in hits]  # now moves


def test_a_search_under_a_tag_path_author_kind_or_source_filter_answers_as_the_loaded_memories(repo, store,
                                                                                              monkeypatch):
    """A search narrowed by a tag, a path, an author kind or a source (alone, together, beside a type) gives the
    hits ranking every memory loaded gives, score for score, in its order: merged, edited, retracted and
    superseded memories among them, the words weighed over every active memory, whatever the filter keeps."""
    _by_many_hands(repo, store)
    s = _fresh(repo)
    searches = [(q, limit, paths) for q in ("main fact", "decision feature branch", "convention again", "ops")
                for limit, paths in ((3, []), (10, ["src/app.py"]))] + [("", 10, ["src/app.py"])]
    indexed = {(i, n): _found(s, ask, *search) for i, ask in enumerate(_SEARCH_ASKS) for n, search in enumerate(searches)}
    assert any(indexed.values()) and not all(indexed.values())
    monkeypatch.setattr(Store, "matching_ids", lambda *a, **k: None)  # the index cannot narrow: every memory loaded
    loaded = {(i, n): _found(s, ask, *search) for i, ask in enumerate(_SEARCH_ASKS) for n, search in enumerate(searches)}
    for key, hits in loaded.items():
        assert indexed[key] == hits, (_SEARCH_ASKS[key[0]], searches[key[1]])


def test_a_search_under_filters_reads_only_the_memories_that_match(repo, store, monkeypatch):
    """Once the index is warm, a search narrowed by a tag, a path, an author kind or a source loads no memory to
    filter or rank it (2-2.5 s at 100,000): the ids come from the index as a list's do, and only a tag's
    candidates are read to check the tag."""
    from gitmem import postings

    _by_many_hands(repo, store)
    full = _fresh(repo).memories()
    want = {i: _found(_fresh(repo), ask, "main fact ops", 5, []) for i, ask in enumerate(_SEARCH_ASKS)}
    monkeypatch.setattr(warm_module, "read_memory", lambda *a: pytest.fail("a blob was parsed again"))
    monkeypatch.setattr(Store, "memories", lambda *a, **k: pytest.fail("every memory was loaded"))
    monkeypatch.setattr(Store, "list", lambda *a, **k: pytest.fail("every memory was listed"))
    read: list = []
    real = postings.IndexedMemories.get
    monkeypatch.setattr(postings.IndexedMemories, "get", lambda self, ids: read.extend(ids) or real(self, ids))
    for i, ask in enumerate(_SEARCH_ASKS):
        read.clear()
        assert _found(_fresh(repo), ask, "main fact ops", 5, []) == want[i], ask
        assert set(read) <= set(_expected(full, ask)) and (read or "tag" not in ask or not _expected(full, ask)), ask


def test_a_search_under_a_filter_ranks_at_the_tip_its_ids_were_read_at(repo, store, monkeypatch):
    """The ids a tag keeps and the ranking are read at one memory tip: a write between them (a tag taken off)
    made a memory without the tag a hit of a search under it."""
    from gitmem.recall import find

    tagged = store.add("fact", "Deploys run from the ops runner", tags=["ops"]).memory.id
    store.add("fact", "Deploy logs go to the ops channel", tags=["ops"])
    s = _fresh(repo)
    real = Store.matching_ids

    def then_untag(self, **filters):
        ids = real(self, **filters)
        Store.open(str(repo)).edit(tagged, tags=())  # another writer, between the ids and the ranking
        return ids

    monkeypatch.setattr(Store, "matching_ids", then_untag)
    hits = find(s, "deploys ops", 10, filters={"tag": "ops"}, paths=[])
    assert hits and all("ops" in h.memory.tags for h in hits), [(h.memory.id, h.memory.tags) for h in hits]


def test_what_a_cold_start_parses_is_frozen_out_of_later_collections(repo, store, monkeypatch):
    """A first search keeps every memory it parsed (100,000 at a time) while it builds the postings of them all:
    each collection meanwhile would walk them all again (0.6 s of its 7.5)."""
    import gc

    _seed(store, 20)
    fresh = _fresh(repo)
    monkeypatch.setattr(warm_module, "_FREEZE_FROM", 50)  # 20 memories' objects count as a cold start's
    before = gc.get_freeze_count()
    try:
        parsed = fresh.warm.parse(fresh.repository, list(fresh.snapshot().entries()), "refs/memory/main")
        assert gc.get_freeze_count() > before and gc.isenabled()
    finally:
        gc.unfreeze()
    assert len(parsed) == 20


def test_a_whole_stores_parsed_blobs_are_read_in_one_pass_with_the_answers_of_lookups_by_key(repo, store,
                                                                                             monkeypatch):
    """A first search after a `status` reads every memory back from the index: 100,000 rows by their keys
    took 0.33 s, in one pass over the table 0.1 s."""
    _seed(store, 20)
    entries = list(store.snapshot().entries())
    first = _fresh(repo)
    first.warm.parse(first.repository, entries, "refs/memory/main")
    first.warm.index.flush()  # the rows a `status` leaves
    blobs = [b for _, b in entries]
    by_key = _fresh(repo).warm.index.parsed(blobs)
    index = _fresh(repo).warm.index
    monkeypatch.setattr(type(index), "SCAN_FROM", 5)
    statements = []
    index._conn().set_trace_callback(statements.append)
    assert index.parsed(blobs) == by_key and len(by_key) == 20
    assert [s for s in statements if "FROM blobs" in s and " IN (" not in s and "LIMIT" not in s]
