"""doctor after doctor: a run starts from the last commit a doctor found sound and reads only
what came after it; --full reads the whole history again."""

from __future__ import annotations

import json
import os

import pytest

from conftest import clone, damage_ref, git, gitmem, make_origin
from gitmem import Author, Store
from gitmem.doctor import doctor
from gitmem.model import dump_yaml, memory_path

AGENT = Author("agent", "agent@example.com", "agent")


def _object_file(repo, oid: str):
    return repo / ".git" / "objects" / oid[:2] / oid[2:]


def _errors(store, full=False):
    return [p for p in doctor(store, full=full) if p.level == "error"]


def test_a_second_doctor_reads_only_what_came_after_the_sound_tip(repo, monkeypatch):
    store = Store.open(str(repo))
    for n in range(20):
        store.add("fact", f"fact {n}")
    assert _errors(store) == []
    read = []
    real = Store.memories
    monkeypatch.setattr(Store, "memories", lambda self, at=None: read.append(at) or real(self, at))
    store.add("fact", "one more")
    assert _errors(Store.open(str(repo))) == []
    assert read == []  # no full load of every memory after a sound tip
    assert _errors(Store.open(str(repo)), full=True) == []
    assert read  # --full loads everything


def test_damage_after_the_sound_tip_is_found_and_damage_before_it_needs_full(repo):
    store = Store.open(str(repo))
    old = store.add("fact", "written before the sound check").memory
    assert _errors(store) == []
    new = store.add("fact", "written after the sound check").memory
    new_blob = git(repo, "rev-parse", f"refs/memory/main:{memory_path(new)}").strip()
    old_blob = git(repo, "rev-parse", f"refs/memory/main:{memory_path(old)}").strip()
    os.unlink(_object_file(repo, new_blob))
    errors = _errors(Store.open(str(repo)))
    assert errors and "history is damaged" in errors[0].message and new_blob in errors[0].message

    gitmem(repo, "doctor", "--recover")  # back to the intact tip; then an object it holds rots
    assert _errors(Store.open(str(repo))) == []
    os.unlink(_object_file(repo, old_blob))
    assert _errors(Store.open(str(repo))) == []  # the incremental run trusts what it found sound
    errors = _errors(Store.open(str(repo)), full=True)
    assert errors and old_blob in errors[0].message


def test_problems_written_after_the_sound_tip_are_found(repo):
    store = Store.open(str(repo))
    kept = store.add("decision", "a decision").memory
    assert _errors(store) == []
    tip = store.own_tip()
    twin = kept.evolve(type="fact")  # the same id under a second type
    store.move_ref(tip, store.commit_tree({memory_path(twin): dump_yaml(twin)}, "hand edit", AGENT, base=tip), "t")
    assert any(f"duplicate id {kept.id}" in p.message for p in _errors(Store.open(str(repo))))

    store = Store.open(str(repo))
    tip = store.own_tip()
    bad = "note/0/0/0000000000000000.yaml"
    store.move_ref(tip, store.commit_tree({bad: b"::: not yaml ["}, "hand edit", AGENT, base=tip), "t")
    assert any(p.where == bad for p in _errors(Store.open(str(repo))))

    store = Store.open(str(repo))
    tip = store.own_tip()
    store.move_ref(tip, store.commit_tree({"stray.txt": b"hello"}, "hand edit", AGENT, base=tip), "t")
    assert any("not gitmem's layout" in p.message for p in _errors(Store.open(str(repo))))


def test_a_sound_tip_hint_that_names_nothing_here_means_a_full_check(repo):
    store = Store.open(str(repo))
    store.add("fact", "one")
    assert _errors(store) == []
    for hint in ("0" * 40, "not a commit id"):
        store.warm.index.put_verified(store.ref, hint)
        assert _errors(Store.open(str(repo))) == []
        assert store.warm.index.verified(store.ref) == store.own_tip()  # the check ran and recorded the tip


def test_doctor_full_drops_a_search_view_that_disagrees_with_its_tree(repo, store):
    """The index is a cache: a view edited behind gitmem's back (here a memory deleted from it) is
    found by `doctor --full`, dropped, and built again right by the next search."""
    import sqlite3

    from gitmem import postings
    from gitmem import warm as warm_module

    for i in range(5):
        store.add("fact", f"redis note {i}")
    assert len(postings.rank(store, "redis", 10)) == 5
    path = os.path.join(str(repo), ".git", "gitmem", "index.sqlite")
    warm_module.forget_warm()
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM members WHERE doc = (SELECT MIN(doc) FROM members)")
    fresh = Store.open(str(repo))
    assert len(postings.rank(fresh, "redis", 10)) == 4  # what a damaged cache would answer
    report = json.loads(gitmem(repo, "doctor", "--full", "--json", check=False).stdout)
    assert any("search view" in p["message"] for p in report["problems"]), report
    warm_module.forget_warm()
    assert len(postings.rank(Store.open(str(repo)), "redis", 10)) == 5


def test_the_history_walks_keep_nothing_once_done(repo):
    """doctor --full's damage walk and the trust gate's layout walk compare each changed tree with
    its parents' by entry name: done by looking names up in pygit2 trees, every name asked stayed
    alive (pygit2 1.21), and a 100,000-commit history held 650 MB by the end."""
    import tracemalloc

    from gitmem.doctor import damage
    from gitmem.model import TYPES, Memory, new_id, utc_now
    from gitmem.trust import history_problem

    store = Store.open(str(repo))
    seed = [Memory(id=new_id(1_760_000_000_000 + n), type=TYPES[n % 8], text=f"memory {n}", author=AGENT,
                   source="test", created=utc_now()) for n in range(3000)]  # wide trees at every level
    tip = store.commit_tree({memory_path(m): dump_yaml(m) for m in seed}, "seed", AGENT, base=None)
    for n in range(40):  # then a history of small commits, each changing a tree at every level
        m = Memory(id=new_id(1_770_000_000_000 + n), type=TYPES[n % 8], text=f"later {n}", author=AGENT,
                   source="test", created=utc_now())
        tip = store.commit_tree({memory_path(m): dump_yaml(m)}, f"write {n}", AGENT, base=tip)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        assert damage(store.repo, tip) is None
        assert history_problem(store.repo, tip) is None
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 16 * 1024, kept


def test_a_ref_moved_onto_an_annotated_tag_is_an_error_that_recover_repairs(repo):
    """A walk peels a tag, so its history looked intact while every write failed on it."""
    first = json.loads(gitmem(repo, "fact", "add", "kept", "--json").stdout)["id"]
    git(repo, "tag", "-a", "-m", "a tag", "memtag", "refs/memory/main")
    git(repo, "update-ref", "refs/memory/main", git(repo, "rev-parse", "memtag").strip())
    checked = gitmem(repo, "doctor", "--json", check=False)
    assert checked.returncode == 1
    [problem] = json.loads(checked.stdout)["problems"]
    assert problem["level"] == "error" and "is a tag, not a commit" in problem["message"]
    assert "run `gitmem doctor --recover`" in problem["message"]  # HEAD's branch: no --branch to name
    gitmem(repo, "doctor", "--recover")
    assert git(repo, "cat-file", "-t", "refs/memory/main").strip() == "commit"
    added = json.loads(gitmem(repo, "fact", "add", "written after", "--json").stdout)["id"]
    listed = json.loads(gitmem(repo, "list", "--json").stdout)["memories"]
    assert [m["id"] for m in listed] == [first, added]


@pytest.mark.parametrize("branch, named", [("feature", "feature"), ("fix&co", "'fix&co'")])
def test_recover_named_for_another_branch_names_that_branch(repo, branch, named):
    # `gitmem --branch feature doctor` said to run `gitmem doctor --recover`, which checks HEAD's branch;
    # a name the shell reads otherwise (`&` ran `gitmem --branch fix` in the background) is quoted
    git(repo, "branch", branch)
    gitmem(repo, "--branch", branch, "fact", "add", "kept")
    git(repo, "tag", "-a", "-m", "a tag", "memtag", f"refs/memory/{branch}")
    git(repo, "update-ref", f"refs/memory/{branch}", git(repo, "rev-parse", "memtag").strip())
    [problem] = json.loads(gitmem(repo, "--branch", branch, "doctor", "--json", check=False).stdout)["problems"]
    assert f"run `gitmem --branch {named} doctor --recover`" in problem["message"]
    gitmem(repo, "--branch", branch, "doctor", "--recover")
    assert git(repo, "cat-file", "-t", f"refs/memory/{branch}").strip() == "commit"


def test_a_read_that_meets_another_branchs_damaged_memory_names_the_doctor_that_sees_it(repo):
    """`gitmem branch` on main, with refs/memory/feature at a tree, said to run `gitmem doctor`, which checks
    main's memory and says it is fine: the line names the doctor of the damaged ref, which repairs it."""
    gitmem(repo, "fact", "add", "on main")
    git(repo, "branch", "feature")
    gitmem(repo, "--branch", "feature", "fact", "add", "kept")
    intact = git(repo, "rev-parse", "refs/memory/feature").strip()
    git(repo, "update-ref", "refs/memory/feature", git(repo, "rev-parse", "HEAD^{tree}").strip())

    listed = gitmem(repo, "branch", check=False)
    assert listed.returncode == 1 and "refs/memory/feature is damaged" in listed.stderr
    assert "run `gitmem --branch feature doctor`" in listed.stderr, listed.stderr
    gitmem(repo, "--branch", "feature", "doctor", "--recover")
    assert git(repo, "rev-parse", "refs/memory/feature").strip() == intact
    assert "feature" in gitmem(repo, "branch").stdout


def test_contradictory_doctor_options_are_refused_before_anything_is_changed(repo):
    """--remotes with --offline is a usage error; it once came after --drop-invalid had already
    written its commit."""
    gitmem(repo, "fact", "add", "a good memory")
    tree = git(repo, "rev-parse", "refs/memory/main^{tree}").strip()
    blob = git(repo, "hash-object", "-w", "--stdin", input="# not memory\n").strip()
    entries = git(repo, "ls-tree", tree) + f"100644 blob {blob}\tREADME.md\n"
    planted = git(repo, "mktree", input=entries).strip()
    tip = git(repo, "commit-tree", planted, "-p", "refs/memory/main", "-m", "planted").strip()
    git(repo, "update-ref", "refs/memory/main", tip)
    result = gitmem(repo, "doctor", "--drop-invalid", "--remotes", "--offline", check=False)
    assert result.returncode == 2 and "contradict" in result.stderr
    assert git(repo, "rev-parse", "refs/memory/main").strip() == tip


def test_a_replacement_beside_the_successor_a_resolve_took_is_found_after_the_sound_tip(repo):
    """Two supersedes of one memory merged and resolved after a doctor found the ref sound: the incremental run
    reads the memories the settled conflict named (not every one) and names the replacement nobody took."""
    from gitmem.merge import merge_into, resolve

    main = Store.open(str(repo))
    shared = main.add("decision", "Use Postgres", author=AGENT).memory
    git(repo, "branch", "feature")
    theirs = Store.open(str(repo), "feature").supersede(shared.id, "Use Postgres 15", author=AGENT).memory
    kept = main.supersede(shared.id, "Use Postgres 16", author=AGENT).memory
    merge_into(main, Store.open(str(repo), "feature").own_tip())
    assert doctor(main) == []  # sound, the conflict pending
    resolve(main, shared.id, take="ours", author=AGENT)
    [found] = doctor(Store.open(str(repo)))
    assert (found.level, found.where) == ("warning", memory_path(theirs))
    assert f"`gitmem retract {theirs.id} --because \"{kept.id} supersedes {shared.id}\"`" in found.message
    shown = gitmem(repo, "doctor").stdout
    assert f"warning: {memory_path(theirs)}: {theirs.id} still supersedes {shared.id}" in shown
    assert shown.rstrip().endswith("refs/memory/main: ok, with 1 warning")  # intact: a question for a person


def test_doctor_on_a_branch_without_memory_checks_the_parents_memory_it_reads(repo):
    """Every command on feature (no memory of its own) reads main's memory and names main's damaged ref; its
    doctor only warned "no memory ref on this branch" and called the damage feature's, with no intact tip to go
    back to. It says whose memory the branch reads and checks that ref, naming the repair there."""
    gitmem(repo, "add", "fact", "first")
    gitmem(repo, "add", "fact", "second")
    intact = git(repo, "rev-parse", "refs/memory/main").strip()
    git(repo, "checkout", "-q", "-b", "feature")
    damage_ref(repo, "refs/memory/main", "a missing object")
    assert "refs/memory/main is damaged" in gitmem(repo, "list", check=False).stderr

    r = gitmem(repo, "--branch", "feature", "doctor", "--json", check=False)

    assert r.returncode == 1
    found = json.loads(r.stdout)
    assert not found["ok"]
    [reads, damaged] = [(p["level"], p["where"], p["message"]) for p in found["problems"]]
    assert reads[:2] == ("warning", "refs/memory/feature") and "reads main's memory, refs/memory/main" in reads[2]
    assert damaged[:2] == ("error", "refs/memory/main") and "history is damaged" in damaged[2]
    assert f"last intact tip in the reflog is {intact[:10]}: run `gitmem --branch main doctor --recover`" \
        in damaged[2]
    gitmem(repo, "--branch", "main", "doctor", "--recover")
    assert gitmem(repo, "doctor").stdout.rstrip().endswith("refs/memory/main, whose memory feature reads: ok, with 1 "
                                                           "warning")


def test_doctor_on_a_branch_without_memory_names_the_parents_ref_it_found_ok(repo):
    """A new branch reads main's memory, and doctor checks main's ref: it printed "refs/memory/wip: ok", of a ref
    that does not exist and was never checked. Its verdict names the ref it checked, and whose memory that is."""
    gitmem(repo, "add", "fact", "on main")
    git(repo, "checkout", "-q", "-b", "wip")

    shown = gitmem(repo, "doctor").stdout
    report = json.loads(gitmem(repo, "doctor", "--json").stdout)

    assert shown.splitlines()[-1] == "refs/memory/main, whose memory wip reads: ok, with 1 warning"
    assert (report["ref"], report["checked"], report["ok"]) == ("refs/memory/wip", "refs/memory/main", True)


def test_doctor_verdict_counts_the_warnings_printed_above_it(repo):
    """doctor printed a warning and then ended "refs/memory/main: ok", the line a script or a glance reads, as if
    it had found nothing. The verdict counts the warnings above it; only an error fails the run."""
    r = gitmem(repo, "doctor")
    assert r.stdout.splitlines() == ["warning: refs/memory/main: no memory ref on this branch (no memory yet)",
                                     "refs/memory/main: ok, with 1 warning"]

    gitmem(repo, "add", "fact", "first")
    gitmem(repo, "add", "fact", "second")
    git(repo, "checkout", "-q", "-b", "feature")  # reads main's memory: a warning says so
    damage_ref(repo, "refs/memory/main", "a missing object")
    r = gitmem(repo, "doctor", check=False)
    assert r.returncode == 1
    assert r.stdout.splitlines()[-1] == "refs/memory/main, whose memory feature reads: 1 error, 1 warning"


def test_recover_on_a_branch_without_memory_recovers_the_parents_memory_it_reads(repo):
    """`gitmem --branch feature doctor --recover` on a branch reading main's damaged memory said "nothing to
    recover: the history of refs/memory/feature is intact", a ref that does not exist, while its doctor reports
    main's damage. It repairs the ref its doctor checks, main's, and says so; feature still has no ref."""
    gitmem(repo, "add", "fact", "first")
    gitmem(repo, "add", "fact", "second")
    intact = git(repo, "rev-parse", "refs/memory/main").strip()
    git(repo, "branch", "feature")
    damage_ref(repo, "refs/memory/main", "a missing object")

    r = gitmem(repo, "--branch", "feature", "doctor", "--recover")

    assert r.stdout.startswith(f"moved refs/memory/main, whose memory feature reads, back from damaged 1234567890 "
                               f"to intact {intact[:10]}"), r.stdout
    assert git(repo, "rev-parse", "refs/memory/main").strip() == intact
    assert "refs/memory/feature" not in git(repo, "for-each-ref", "--format=%(refname)", "refs/memory/")
    assert [m["text"] for m in json.loads(gitmem(repo, "--branch", "feature", "list", "--json").stdout)
            ["memories"]] == ["first", "second"]
    again = gitmem(repo, "--branch", "feature", "doctor", "--recover", check=False)
    assert again.returncode == 1
    assert again.stderr == "Error: nothing to recover: the history of refs/memory/main is intact\n"


def test_drop_invalid_on_a_branch_without_memory_drops_from_the_parents_memory_it_reads(repo):
    """On feature (no memory of its own) doctor reported main's planted blob, and `--drop-invalid` looked at
    feature's ref, which does not exist, and silently dropped nothing. It acts on the ref doctor checked, and
    says whose it is; feature still has no ref."""
    good = json.loads(gitmem(repo, "add", "fact", "a good memory", "--json").stdout)["id"]
    main = Store.open(str(repo))
    planted = memory_path("fact", "0mzzzzzzzz000001")
    tip = main.own_tip()
    main.move_ref(tip, main.commit_tree({planted: b"not: [a memory\n"}, "hand edit", AGENT, base=tip), "hand edit")
    git(repo, "checkout", "-q", "-b", "feature")
    assert gitmem(repo, "doctor", check=False).returncode == 1

    r = gitmem(repo, "doctor", "--drop-invalid")

    assert r.stdout.splitlines()[0] == (f"dropped (not a valid memory, kept in history) from refs/memory/main, "
                                        f"whose memory feature reads: {planted}")
    assert r.stdout.rstrip().endswith("refs/memory/main, whose memory feature reads: ok, with 1 warning")
    assert "refs/memory/feature" not in git(repo, "for-each-ref", "--format=%(refname)", "refs/memory/")
    assert [m["id"] for m in json.loads(gitmem(repo, "--branch", "main", "list", "--json").stdout)["memories"]] == [good]
    report = json.loads(gitmem(repo, "doctor", "--drop-invalid", "--json").stdout)
    assert (report["ref"], report["checked"], report["dropped"]) == ("refs/memory/feature", "refs/memory/main", [])


def test_fix_on_a_branch_without_memory_removes_the_stale_lock_of_the_parents_memory_it_reads(repo):
    """doctor on feature warned of main's stale lock and said `doctor --fix` removes it; --fix looked for
    feature's lock only, and the warning stayed."""
    gitmem(repo, "add", "fact", "something")
    git(repo, "branch", "feature")
    lock = repo / ".git" / "refs" / "memory" / "main.lock"
    lock.touch()
    os.utime(lock, (lock.stat().st_mtime - 120,) * 2)
    assert "stale lock file" in gitmem(repo, "--branch", "feature", "doctor").stdout

    r = gitmem(repo, "--branch", "feature", "doctor", "--fix")

    assert not lock.exists() and "stale lock" not in r.stdout.split("\n", 1)[1]
    assert r.stdout.startswith("removed stale lock ") and \
        r.stdout.splitlines()[0].endswith(": refs/memory/main's, whose memory feature reads")


def test_with_the_reflog_expired_a_fetched_copy_is_the_intact_tip_recovery_goes_back_to(tmp_path):
    """`git gc` expires reflog entries (`git reflog expire --expire=now --all` all of them): a blob lost from the
    unpushed tip then left doctor with "no intact earlier tip" and every command refusing the branch, though the
    pushed memory this clone fetched was an intact earlier tip. Recovery goes back to it and keeps the rest."""
    me = clone(make_origin(tmp_path), tmp_path / "me", "Me")
    store = Store.open(str(me))
    pushed = store.add("fact", "pushed").commit
    gitmem(me, "push")
    kept = store.add("fact", "kept, written after the push").memory
    lost = store.add("fact", "lost with its blob").memory
    blob = git(me, "rev-parse", f"refs/memory/main:{memory_path(lost)}").strip()
    git(me, "reflog", "expire", "--expire=now", "--all")
    _object_file(me, blob).unlink()

    report = gitmem(me, "doctor", check=False)
    offer = f"last intact tip in refs/memory-remotes/origin/main is {pushed[:10]}: run `gitmem doctor --recover`"
    assert report.returncode == 1 and offer in report.stdout, report.stdout
    recovered = json.loads(gitmem(me, "doctor", "--recover", "--json").stdout)["recovered"]
    assert recovered["good"] == pushed and recovered["lost"] == [memory_path(lost)]
    assert {m.text for m in Store.open(str(me)).memories().values()} == {"pushed", kept.text}
