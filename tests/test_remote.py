"""Sharing memory through a real bare remote and real clones, driving the real git executable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pygit2
import pytest
import yaml

from conftest import DAMAGES, ROOT, ReadSpy, clone, damage_ref, git, gitmem, make_origin, make_repo, seeded
from gitmem import Store
from gitmem import redact as redact_mod
from gitmem import remote as remote_mod
from gitmem.errors import RemoteError, SecretFound
from gitmem.redact import RULES


@pytest.fixture
def origin(tmp_path) -> Path:
    return make_origin(tmp_path)


@pytest.fixture
def alice(origin, tmp_path) -> Path:
    return teammate(origin, tmp_path / "alice", "Alice")


@pytest.fixture
def bob(origin, tmp_path) -> Path:
    return teammate(origin, tmp_path / "bob", "Bob")


def teammate(origin: Path, path: Path, name: str) -> Path:
    """A clone whose post-commit hook (once installed) runs in the foreground: a commit's link to memory is made
    before `git commit` returns, so a push right after sends it (in the background it may land mid-push)."""
    path = clone(origin, path, name)
    git(path, "config", "gitmem.hookMode", "foreground")
    return path


def remote_tip(origin: Path, branch: str = "main"):
    out = git(origin, "for-each-ref", "--format=%(objectname)", f"refs/memory/{branch}")
    return out.strip() or None


def texts(path: Path) -> set:
    return {m.text for m in Store.open(str(path)).memories().values()}


def test_writes_on_both_clones_end_as_the_union_with_merge_commits(alice, bob, origin):
    gitmem(alice, "add", "decision", "Queue jobs in Postgres", "--because", "no new service")
    gitmem(bob, "add", "fact", "Refunds are idempotent")
    gitmem(alice, "push")

    pulled = json.loads(gitmem(bob, "pull", "--json").stdout)
    assert [m["kind"] for m in pulled["merged"]] == ["merge"]
    merge = Store.open(str(bob)).repo[pulled["merged"][0]["commit"]]
    assert len(merge.parents) == 2
    assert str(merge.parents[1].id) == remote_tip(origin)  # the remote's side is the second parent

    gitmem(bob, "push")
    assert json.loads(gitmem(alice, "pull", "--json").stdout)["merged"][0]["kind"] == "fast-forward"
    union = {"Queue jobs in Postgres", "Refunds are idempotent"}
    assert texts(alice) == texts(bob) == union
    assert Store.open(str(alice)).own_tip() == Store.open(str(bob)).own_tip() == remote_tip(origin)


def test_fetch_puts_the_remotes_memory_beside_local_memory_never_over_it(alice, bob):
    gitmem(alice, "add", "fact", "from alice")
    gitmem(alice, "push")
    gitmem(bob, "add", "fact", "from bob")
    local_before = Store.open(str(bob)).own_tip()

    fetched = json.loads(gitmem(bob, "fetch", "--json").stdout)

    bob_store = Store.open(str(bob))
    assert bob_store.own_tip() == local_before
    assert texts(bob) == {"from bob"}
    assert fetched["branches"] == [{"branch": "main", "ref": "refs/memory-remotes/origin/main", "old": None,
                                    "new": Store.open(str(alice)).own_tip()}]
    assert bob_store.repo.references["refs/memory-remotes/origin/main"].target == \
        Store.open(str(alice)).repo.references["refs/memory/main"].target
    tip = Store.open(str(alice)).own_tip()
    assert gitmem(bob, "fetch").stdout == f"refs/memory-remotes/origin/main: up to date {tip[:10]}\n"
    gitmem(alice, "add", "fact", "more from alice")
    gitmem(alice, "push")
    moved = Store.open(str(alice)).own_tip()
    assert gitmem(bob, "fetch").stdout == f"refs/memory-remotes/origin/main: {tip[:10]}..{moved[:10]}\n"  # once each


def test_a_tracking_ref_lock_a_killed_gitmem_left_is_taken_over_once_stale(alice, bob):
    """A gitmem killed while it recorded a fetched tip leaves that ref's lock, which no process holds: the next
    fetch waits until it is stale and takes it over, as a write does, instead of refusing the branch for good."""
    gitmem(alice, "add", "fact", "from alice")
    gitmem(alice, "push")
    lock = bob / ".git" / "refs" / "memory-remotes" / "origin" / "main.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")  # just left by a killed process: no holder, not yet stale
    fetched = json.loads(gitmem(bob, "fetch", "--json").stdout)
    assert fetched["refused"] == [] and not lock.exists()
    assert Store.open(str(bob)).repo.references["refs/memory-remotes/origin/main"].target == \
        Store.open(str(alice)).repo.references["refs/memory/main"].target


def test_push_after_a_teammate_pushed_fetches_merges_and_lands_without_force(alice, bob, origin):
    gitmem(alice, "add", "fact", "alice's")
    gitmem(alice, "push")
    alice_tip = remote_tip(origin)
    gitmem(bob, "add", "fact", "bob's")

    [result] = json.loads(gitmem(bob, "push", "--json").stdout)["branches"]

    assert result["status"] == "pushed" and result["merges"] == 1 and result["attempts"] == 2
    assert remote_tip(origin) == result["commit"]
    git(origin, "merge-base", "--is-ancestor", alice_tip, result["commit"])  # nothing was overwritten
    assert texts(bob) == {"alice's", "bob's"}


_PUSHER = """
import sys
from gitmem import Store
from gitmem.remote import push
path, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = Store.open(path)
for i in range(n):
    store.add("fact", f"{name} fact {i}")
    [r] = push(store, "origin")
    assert r.status == "pushed", r
print("ok")
"""


def test_concurrent_pushes_from_two_clones_both_land_and_nothing_is_lost(alice, bob, origin, tmp_path):
    carol = clone(origin, tmp_path / "carol", "Carol")
    n = 6
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", _PUSHER, str(p), name, str(n)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for p, name in ((alice, "alice"), (bob, "bob"))]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs

    gitmem(carol, "pull")
    expected = {f"{who} fact {i}" for who in ("alice", "bob") for i in range(n)}
    assert texts(carol) == expected
    assert Store.open(str(carol)).own_tip() == remote_tip(origin)


def test_a_conflicting_edit_stops_the_push_and_reaches_gitmem_conflicts(alice, bob, origin):
    memory_id = json.loads(gitmem(alice, "add", "convention", "Tabs", "--json").stdout)["id"]
    gitmem(alice, "push")
    gitmem(bob, "pull")
    gitmem(alice, "edit", memory_id, "--text", "Four spaces")
    gitmem(alice, "push")
    agreed = remote_tip(origin)
    gitmem(bob, "edit", memory_id, "--text", "Two spaces")

    pushed = gitmem(bob, "push", check=False)

    assert pushed.returncode == 1
    assert "conflict" in pushed.stderr and "gitmem conflicts" in pushed.stderr
    assert remote_tip(origin) == agreed  # a conflicted merge does not go out on its own
    found = json.loads(gitmem(bob, "conflicts", "--json").stdout)["conflicts"]
    assert [c["id"] for c in found] == [memory_id]
    assert {found[0]["ours"]["text"], found[0]["theirs"]["text"]} == {"Four spaces", "Two spaces"}

    gitmem(bob, "resolve", memory_id, "--theirs")
    gitmem(bob, "push")
    gitmem(alice, "pull")
    assert Store.open(str(alice)).get(memory_id).text == Store.open(str(bob)).get(memory_id).text


@pytest.mark.parametrize("alice_takes", ["ours", "theirs"])
def test_one_conflict_resolved_differently_in_two_clones_conflicts_again(alice, bob, origin, alice_takes):
    """A resolve that keeps the value the conflict showed meanwhile is a choice too: against another
    clone's other choice it clashes, it does not lose as if nothing had been chosen."""
    memory_id = json.loads(gitmem(alice, "add", "convention", "Tabs", "--json").stdout)["id"]
    gitmem(alice, "push")
    gitmem(bob, "pull")
    gitmem(alice, "edit", memory_id, "--text", "Four spaces")
    gitmem(alice, "push")
    gitmem(bob, "edit", memory_id, "--text", "Two spaces")
    gitmem(bob, "pull")
    gitmem(bob, "push")  # the merge and its conflict: now both clones hold it
    gitmem(alice, "pull")
    assert [c["id"] for c in json.loads(gitmem(alice, "conflicts", "--json").stdout)["conflicts"]] == [memory_id]

    gitmem(alice, "resolve", memory_id, f"--{alice_takes}")
    gitmem(alice, "push")
    gitmem(bob, "resolve", memory_id, "--theirs" if alice_takes == "ours" else "--ours")
    pushed = gitmem(bob, "push", check=False)

    assert pushed.returncode == 1 and "conflict" in pushed.stderr
    found = json.loads(gitmem(bob, "conflicts", "--json").stdout)["conflicts"]
    assert [c["id"] for c in found] == [memory_id]
    assert {found[0]["ours"]["text"], found[0]["theirs"]["text"]} == {"Four spaces", "Two spaces"}


def test_a_fresh_clone_sees_the_teams_memory_after_gitmem_pull(alice, origin, tmp_path):
    gitmem(alice, "add", "rejection", "Redis for the job queue", "--because", "ops won't run it")
    gitmem(alice, "push")
    newcomer = clone(origin, tmp_path / "newcomer", "Newcomer")
    assert gitmem(newcomer, "list", "--json").stdout and texts(newcomer) == set()

    init = gitmem(newcomer, "init")
    assert "origin has memory this clone lacks" in init.stdout and "gitmem pull" in init.stdout

    gitmem(newcomer, "pull")
    listed = gitmem(newcomer, "list").stdout
    assert "Redis for the job queue" in listed and "because: ops won't run it" in listed


def test_a_partial_clone_pulls_the_memory_whole(alice, origin, tmp_path):
    """`git clone --filter=blob:none`: the clone's filter would leave the memory's blobs behind too."""
    gitmem(alice, "add", "decision", "Queue jobs in Postgres", "--because", "no new service")
    gitmem(alice, "push")
    git(origin, "config", "uploadpack.allowFilter", "true")
    git(tmp_path, "clone", "-q", "--filter=blob:none", origin.as_uri(), "partial")
    partial = tmp_path / "partial"
    assert git(partial, "config", "remote.origin.partialclonefilter").strip() == "blob:none"

    pulled = json.loads(gitmem(partial, "pull", "--json").stdout)

    assert pulled["refused"] == [] and texts(partial) == {"Queue jobs in Postgres"}
    assert "ok" in gitmem(partial, "doctor").stdout


def unfetched_objects(path: Path) -> list:
    """The memory objects a partial clone lacks (listed without git's lazy fetch)."""
    out = git(path, "rev-list", "--objects", "--missing=print", "--glob=refs/memory*")
    return [line for line in out.splitlines() if line.startswith("?")]


def _plain_fetch_in_partial_clone(alice, origin, tmp_path, filter_="blob:none", refspec="refs/memory/*:refs/memory/*"):
    """alice's three facts on origin, and a `--filter` clone of it whose memory came by a plain `git fetch`."""
    for i in range(3):
        gitmem(alice, "add", "fact", f"fact number {i}")
    gitmem(alice, "push")
    git(origin, "config", "uploadpack.allowFilter", "true")
    git(tmp_path, "clone", "-q", f"--filter={filter_}", origin.as_uri(), "partial")
    partial = tmp_path / "partial"
    git(partial, "fetch", "-q", "origin", refspec)
    return partial


@pytest.mark.parametrize("filter_", ["blob:none", "tree:0"])
@pytest.mark.parametrize("refspec", ["refs/memory/*:refs/memory/*", "refs/memory/*:refs/memory-remotes/origin/*"])
def test_a_pull_fetches_what_a_partial_clones_plain_git_fetch_of_memory_left_behind(alice, origin, tmp_path, filter_,
                                                                                     refspec):
    """A plain `git fetch` of memory in a partial clone takes the clone's filter; the commits are then here, so
    `gitmem pull` fetched nothing (git negotiates by commit) and the memory stayed unreadable."""
    partial = _plain_fetch_in_partial_clone(alice, origin, tmp_path, filter_, refspec)
    assert unfetched_objects(partial)
    if refspec.startswith("refs/memory/*:refs/memory/*"):
        r = gitmem(partial, "list", check=False)
        assert r.returncode == 1 and "not in this partial clone yet; fetch it with `gitmem fetch`" in r.stderr

    pulled = json.loads(gitmem(partial, "pull", "--json").stdout)

    assert pulled["refused"] == [] and unfetched_objects(partial) == []
    assert texts(partial) == {f"fact number {i}" for i in range(3)}
    assert "ok" in gitmem(partial, "doctor").stdout


def test_a_push_that_lands_at_once_fetches_what_a_partial_clones_plain_git_fetch_left_behind(alice, origin, tmp_path):
    """In a blob:none clone after a plain `git fetch` of memory, an add and a push both worked, and the next status
    failed: the push landed at once, so it fetched nothing, where the docs say push fetches what memory lacks."""
    partial = _plain_fetch_in_partial_clone(alice, origin, tmp_path)
    gitmem(partial, "add", "fact", "written in the partial clone")

    gitmem(partial, "push")

    assert unfetched_objects(partial) == []
    assert texts(partial) == {f"fact number {i}" for i in range(3)} | {"written in the partial clone"}


def test_a_write_on_memory_whose_trees_a_partial_clone_lacks_says_what_to_run_and_moves_no_ref(alice, origin,
                                                                                                 tmp_path):
    """`git clone --filter=tree:0` and a plain `git fetch` of memory: the tip's tree is on the remote. `gitmem add`
    failed with libgit2's "can not be successfully peeled into a tree"; it says what to run, and writes nothing."""
    gitmem(alice, "add", "fact", "tests run with pytest")
    gitmem(alice, "push")
    git(origin, "config", "uploadpack.allowFilter", "true")
    git(tmp_path, "clone", "-q", "--filter=tree:0", origin.as_uri(), "partial")
    partial = tmp_path / "partial"
    git(partial, "fetch", "-q", "origin", "refs/memory/*:refs/memory/*")
    before = git(partial, "for-each-ref", "refs/memory")

    r = gitmem(partial, "add", "fact", "written in a partial clone", check=False)

    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert "not in this partial clone yet; fetch it with `gitmem fetch`" in r.stderr, r.stderr
    assert git(partial, "for-each-ref", "refs/memory") == before
    gitmem(partial, "fetch")
    gitmem(partial, "add", "fact", "written in a partial clone")
    assert texts(partial) == {"tests run with pytest", "written in a partial clone"}


def test_an_add_on_a_tip_whose_blobs_a_partial_clone_lacks_keeps_every_memory_as_it_was(alice, origin, tmp_path):
    """`git clone --filter=blob:none` and a plain `git fetch` of memory: an add succeeds without the other memories'
    blobs. Its commit holds each of them by the same id, and once they are fetched the history is whole."""
    partial = _plain_fetch_in_partial_clone(alice, origin, tmp_path)
    held = git(partial, "ls-tree", "-r", "refs/memory/main").splitlines()
    assert len(unfetched_objects(partial)) == 3

    gitmem(partial, "add", "fact", "written in a partial clone")

    now = git(partial, "ls-tree", "-r", "refs/memory/main").splitlines()
    assert set(held) < set(now) and len(now) == len(held) + 1
    gitmem(partial, "fetch")
    assert unfetched_objects(partial) == []
    assert git(partial, "fsck", "--no-dangling").strip() == ""
    assert "ok" in gitmem(partial, "doctor", "--offline").stdout
    assert texts(partial) == {"written in a partial clone"} | {f"fact number {i}" for i in range(3)}
    gitmem(partial, "push")
    gitmem(alice, "pull")
    assert texts(alice) == texts(partial)


def shallow_clone(origin: Path, path: Path, name: str) -> Path:
    """`git clone --depth 1` (over file://: git ignores --depth for a local path), as CI and big repositories
    clone, whose plain `git fetch` also fetches memory (`gitmem remote setup`)."""
    git(path.parent, "clone", "-q", "--depth", "1", origin.as_uri(), path.name)
    git(path, "config", "user.name", name)
    git(path, "config", "user.email", f"{name.lower()}@example.com")
    gitmem(path, "remote", "setup")
    return path


def _cut_by_a_depth_fetch(alice: Path, origin: Path, tmp_path: Path) -> Path:
    """A shallow clone that edited the team's memory while Alice pushed more, then ran `git fetch --depth 1`:
    its copy of the remote's memory is cut at Alice's tip, which hides the merge base."""
    (alice / "code.txt").write_text("code\n")  # a second code commit, so the clone's code is cut too
    git(alice, "add", "code.txt")
    git(alice, "commit", "-q", "-m", "code")
    git(alice, "push", "-q", "origin", "main")
    gitmem(alice, "add", "fact", "Refunds are idempotent")
    gitmem(alice, "push")
    ci = shallow_clone(origin, tmp_path / "ci", "Ci")
    gitmem(ci, "pull")
    [memory_id] = Store.open(str(ci)).memories()
    gitmem(ci, "edit", memory_id, "--text", "Refunds are idempotent, keyed by order id")
    gitmem(alice, "add", "fact", "Queue jobs in Postgres")
    gitmem(alice, "push")
    git(ci, "fetch", "-q", "--depth", "1", "origin")
    assert remote_tip(origin) in (ci / ".git" / "shallow").read_text()
    return ci


def _merged_whole(ci: Path) -> None:
    """The edit and Alice's new memory both stand, the memory history is whole, and the code is still shallow."""
    assert texts(ci) == {"Refunds are idempotent, keyed by order id", "Queue jobs in Postgres"}
    assert gitmem(ci, "conflicts").stdout.startswith("no conflicts")
    shallow = set((ci / ".git" / "shallow").read_text().split())
    assert shallow == {git(ci, "rev-list", "--max-parents=0", "HEAD").strip()}  # the code's cut, no memory's


def test_a_shallow_clone_pulls_memory_a_depth_fetch_cut_against_its_true_base(alice, origin, tmp_path):
    """A merge base hidden by a shallow fetch made every memory one side edited a conflict: a pull fetches the
    memory's history whole (the code's stays shallow) and merges it as any clone would."""
    ci = _cut_by_a_depth_fetch(alice, origin, tmp_path)

    pulled = json.loads(gitmem(ci, "pull", "--json").stdout)

    assert [(m["kind"], m["conflicts"]) for m in pulled["merged"]] == [("merge", [])]
    _merged_whole(ci)


def test_a_merge_whose_base_a_shallow_fetch_hid_says_so_and_merges_nothing(alice, origin, tmp_path):
    ci = _cut_by_a_depth_fetch(alice, origin, tmp_path)
    before = Store.open(str(ci)).own_tip()

    refused = gitmem(ci, "merge", "main", check=False)

    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "shallow fetch" in refused.stderr and "`gitmem fetch`" in refused.stderr
    assert Store.open(str(ci)).own_tip() == before
    gitmem(ci, "fetch")
    assert [m["conflicts"] for m in json.loads(gitmem(ci, "merge", "main", "--json").stdout)["merged"]] == [[]]
    _merged_whole(ci)


def test_memory_fetched_with_depth_1_gives_answers_or_one_line_errors_and_a_diff_never_guesses(alice, origin,
                                                                                               tmp_path):
    """`git fetch --depth 1` of memory refs leaves each tip without its parents. Readers answer from what is here;
    a diff whose merge base lies behind the cut said every memory of the branch was its change: it says why it
    cannot tell, and tells once the history is fetched whole."""
    gitmem(alice, "add", "fact", "Refunds are idempotent")
    git(alice, "branch", "feature")
    gitmem(alice, "--branch", "feature", "add", "fact", "Feature flags live in config")
    gitmem(alice, "add", "fact", "Queue jobs in Postgres")
    gitmem(alice, "push", "--all")
    clone(origin, tmp_path / "cut", "Cut")
    cut = tmp_path / "cut"
    git(cut, "fetch", "-q", "--depth", "1", "origin", "refs/memory/*:refs/memory/*")
    assert remote_tip(origin, "feature") in (cut / ".git" / "shallow").read_text()

    for args in (["status"], ["log"], ["--branch", "feature", "log", "-n", "1"], ["branch"], ["doctor", "--offline"],
                 ["--branch", "feature", "doctor", "--offline"], ["diff", "main..feature"]):
        r = gitmem(cut, *args, check=False)
        assert "Traceback" not in r.stderr and r.stderr.count("\n") <= 1, (args, r.stderr)
    refused = gitmem(cut, "diff", "main..feature", check=False)
    assert refused.returncode == 1 and "shallow fetch" in refused.stderr and "`gitmem fetch`" in refused.stderr
    assert "Refunds are idempotent" not in refused.stdout

    gitmem(cut, "fetch")
    told = gitmem(cut, "diff", "main..feature", "--json").stdout
    assert [m["text"] for m in json.loads(told)["added"]] == ["Feature flags live in config"]


def _cut_notice(tip: str) -> str:
    return (f"  memory history cut at {tip[:10]} by a shallow fetch (`git fetch --depth`): `gitmem fetch` brings the "
            "rest from a remote that holds it (diff and merge need it)\n")


def test_status_names_memory_history_a_shallow_fetch_cut_and_the_fetch_that_brings_the_rest(alice, origin, tmp_path):
    """`git fetch --depth 1` of memory refs left the memory here without its history: status said nothing, and
    only a later diff or merge refused. It says so in one line, with the fetch that brings the rest."""
    gitmem(alice, "add", "fact", "first")
    gitmem(alice, "add", "fact", "second")
    gitmem(alice, "push")
    cut = clone(origin, tmp_path / "cut", "Cut")
    git(cut, "fetch", "-q", "--depth", "1", "origin", "refs/memory/*:refs/memory/*")
    tip = remote_tip(origin)

    assert _cut_notice(tip) in gitmem(cut, "status").stdout
    assert json.loads(gitmem(cut, "status", "--json").stdout)["shallow"] == tip
    assert _cut_notice(tip).strip() in gitmem(cut, "doctor").stdout  # a warning: sound, but diff and merge refuse it
    gitmem(cut, "fetch")
    assert "shallow" not in gitmem(cut, "status").stdout
    assert "shallow" not in gitmem(cut, "doctor").stdout
    assert json.loads(gitmem(cut, "status", "--json").stdout)["shallow"] is None


def test_status_of_a_shallow_clone_names_a_cut_copy_of_its_memory_but_not_its_cut_code(alice, origin, tmp_path):
    """A shallow CI clone's code stays cut, which is no concern of memory's; the remote's copy of its memory, cut by
    a `git fetch --depth 1`, is what a merge refuses on: named until a fetch brings the rest."""
    ci = _cut_by_a_depth_fetch(alice, origin, tmp_path)

    assert _cut_notice(remote_tip(origin)) in gitmem(ci, "status").stdout
    gitmem(ci, "fetch")
    assert (ci / ".git" / "shallow").exists() and "shallow" not in gitmem(ci, "status").stdout


def test_status_of_a_ci_clone_cut_by_depth_walks_no_memory_history(alice, origin, tmp_path, monkeypatch):
    """A `git clone --depth 1` (CI's checkout) keeps a shallow file that lists only code commits: whether one of
    them cut memory's history is told from their trees, not from a walk of every memory commit on each status."""
    for i in range(3):
        gitmem(alice, "add", "fact", f"fact {i}")
    gitmem(alice, "push")
    ci = tmp_path / "ci"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{origin}", str(ci))
    gitmem(ci, "pull")
    assert (ci / ".git" / "shallow").exists()

    def no_walk(*args, **kwargs):
        raise AssertionError("status walked the memory history")

    monkeypatch.setattr(pygit2.Repository, "walk", no_walk)
    shown = gitmem(ci, "status", "--json")
    assert json.loads(shown.stdout)["shallow"] is None and json.loads(shown.stdout)["counts"] == {"fact": 3}


def test_the_pre_push_hook_of_a_shallow_clone_merges_memory_a_depth_fetch_cut_and_pushes_it(alice, origin, tmp_path):
    ci = _cut_by_a_depth_fetch(alice, origin, tmp_path)
    git(ci, "config", "gitmem.hookMode", "foreground")
    _push_code_with_the_push_hook(ci, "more.txt")

    assert remote_tip(origin) == Store.open(str(ci)).own_tip()
    _merged_whole(ci)


def test_a_pull_from_a_remote_whose_memory_is_cut_says_so_and_merges_nothing(alice, origin, tmp_path):
    """A remote that holds the memory shallow itself (a mirror made with --depth) cannot give the merge base:
    the pull names the branch as not merged and why, instead of conflicts that are not real."""
    ci = _cut_by_a_depth_fetch(alice, origin, tmp_path)
    mirror = tmp_path / "mirror.git"
    git(tmp_path, "init", "-q", "--bare", str(mirror))
    git(mirror, "fetch", "-q", "--depth", "1", origin.as_uri(), "refs/memory/main:refs/memory/main")
    git(ci, "remote", "add", "mirror", mirror.as_uri())
    before = Store.open(str(ci)).own_tip()

    pulled = gitmem(ci, "pull", "mirror", check=False)

    assert pulled.returncode == 1 and "Traceback" not in pulled.stderr
    assert "main: not merged: cannot merge" in pulled.stderr and "shallow fetch" in pulled.stderr
    assert Store.open(str(ci)).own_tip() == before and gitmem(ci, "conflicts").stdout.startswith("no conflicts")


def test_a_push_of_memory_a_depth_fetch_cut_to_a_remote_without_it_says_what_makes_it_whole(alice, origin, tmp_path):
    gitmem(alice, "add", "fact", "Refunds are idempotent")
    gitmem(alice, "push")
    ci = shallow_clone(origin, tmp_path / "ci", "Ci")
    gitmem(ci, "pull")
    git(ci, "fetch", "-q", "--depth", "1", "origin")  # cuts this clone's memory too: it is the remote's tip
    backup = tmp_path / "backup.git"
    git(tmp_path, "init", "-q", "--bare", str(backup))
    git(ci, "remote", "add", "backup", backup.as_uri())

    refused = gitmem(ci, "push", "backup", check=False)

    assert refused.returncode == 1 and "shallow update not allowed" in refused.stderr
    assert "`gitmem fetch` it whole" in refused.stderr
    gitmem(ci, "fetch", "origin")
    gitmem(ci, "push", "backup")
    assert remote_tip(backup) == Store.open(str(ci)).own_tip()


def test_init_fetch_does_the_first_fetch(alice, origin, tmp_path):
    gitmem(alice, "add", "fact", "the team knows this")
    gitmem(alice, "push")
    newcomer = clone(origin, tmp_path / "newcomer", "Newcomer")
    gitmem(newcomer, "init", "--fetch")
    assert texts(newcomer) == {"the team knows this"}


def test_pull_starts_local_memory_for_a_branch_only_the_remote_has(alice, bob):
    git(alice, "branch", "feature")  # --branch names a branch that exists (a typo is refused)
    gitmem(alice, "--branch", "feature", "add", "fact", "feature detail")
    gitmem(alice, "add", "fact", "main detail")
    assert gitmem(alice, "push", "--all").returncode == 0

    merged = json.loads(gitmem(bob, "pull", "--json").stdout)["merged"]

    assert {m["branch"]: m["kind"] for m in merged} == {"feature": "new", "main": "new"}
    assert {m["branch"]: len(m["added"]) for m in merged} == {"feature": 1, "main": 1}  # never "0 added"
    assert {m.text for m in Store.open(str(bob), "feature").memories().values()} == {"feature detail"}
    assert texts(bob) == {"main detail"}


def test_remote_setup_makes_plain_git_carry_memory_and_undo_restores_the_config(alice, bob, origin):
    config = Path(alice, ".git", "config")
    before = config.read_bytes()
    setup = json.loads(gitmem(alice, "remote", "setup", "--json").stdout)
    assert {(c["key"], c["value"], c["action"]) for c in setup["changes"]} == {
        ("remote.origin.fetch", "+refs/memory/*:refs/memory-remotes/origin/*", "added"),
        ("remote.origin.push", "HEAD", "added"),
        ("remote.origin.push", "refs/memory/*:refs/memory/*", "added"),
    }
    again = json.loads(gitmem(alice, "remote", "setup", "--json").stdout)["changes"]
    assert {c["action"] for c in again} == {"kept"}

    gitmem(alice, "add", "fact", "travels with plain git")
    (alice / "code.txt").write_text("code\n")
    git(alice, "add", "code.txt")
    git(alice, "commit", "-q", "-m", "code")
    git(alice, "push", "-q")  # no refspec on the command line
    assert remote_tip(origin) == Store.open(str(alice)).own_tip()
    assert git(origin, "rev-parse", "main").strip() == git(alice, "rev-parse", "HEAD").strip()

    assert "pre-push hook is not installed" in setup["warnings"][0]  # alice's plain push is not scanned
    gitmem(bob, "hooks", "install")
    bob_setup = gitmem(bob, "remote", "setup")
    assert "warning" not in bob_setup.stderr
    git(bob, "fetch", "-q")
    assert git(bob, "rev-parse", "refs/memory-remotes/origin/main").strip() == remote_tip(origin)

    undone = json.loads(gitmem(alice, "remote", "setup", "--undo", "--json").stdout)["changes"]
    assert len(undone) == 3 and {c["action"] for c in undone} == {"removed"}
    assert config.read_bytes() == before


def test_remote_setup_undo_prints_lines_a_shell_runs_to_remove_exactly_what_setup_added(repo):
    """git reads `--unset`'s value as a regular expression: printed as given, the fetch refspec's leading
    `+` is an invalid pattern, `HEAD` matches any push refspec holding it, and `refs/memory/*:refs/memory/*`
    matches `refs/memory:refs/memory-archive`. The printed lines, pasted into a shell, make undo's change."""
    git(repo, "remote", "add", "origin", str(repo.parent / "origin.git"))
    gitmem(repo, "remote", "setup")
    for unrelated in ("HEAD:refs/for/main", "refs/memory:refs/memory-archive"):  # set by hand after setup
        git(repo, "config", "--add", "remote.origin.push", unrelated)
    config = repo / ".git" / "config"
    set_up = config.read_bytes()
    lines = gitmem(repo, "remote", "setup", "--undo").stdout.splitlines()
    assert len(lines) == 3 and all(line.startswith("git config ") and " --unset remote.origin." in line for line in lines)
    undone = config.read_bytes()
    assert git(repo, "config", "--get-all", "remote.origin.fetch").split() == ["+refs/heads/*:refs/remotes/origin/*"]
    assert git(repo, "config", "--get-all", "remote.origin.push").split() == [
        "HEAD:refs/for/main", "refs/memory:refs/memory-archive"]

    config.write_bytes(set_up)
    for line in lines:
        subprocess.run(["sh", "-c", line], cwd=repo, check=True)
    assert config.read_bytes() == undone


def test_a_forced_plain_push_never_forces_memory_back(alice, bob, origin):
    """git applies `git push -f` (given for code) to `remote setup`'s memory refspec too: bob's memory of main,
    behind the remote's, would rewind the team's memory. The pre-push hook refuses such a push whole."""
    for who in (alice, bob):
        gitmem(who, "hooks", "install")
        gitmem(who, "remote", "setup")
    gitmem(bob, "add", "fact", "bob's, pushed first")
    gitmem(bob, "push")
    gitmem(alice, "pull")
    gitmem(alice, "add", "fact", "alice's, which bob has not pulled")
    gitmem(alice, "push")
    team = remote_tip(origin)
    (bob / "b.txt").write_text("b\n")
    git(bob, "add", "b.txt")
    git(bob, "commit", "-q", "-m", "rewritten history")
    forced = subprocess.run(["git", "push", "-q", "--force"], cwd=bob, capture_output=True, text=True)
    assert forced.returncode != 0 and "never forced back" in forced.stderr
    assert remote_tip(origin) == team
    gitmem(bob, "pull")
    git(bob, "push", "-q", "--force")  # with the team's memory merged in, the code goes, and memory fast-forwards
    assert git(origin, "rev-parse", "main").strip() == git(bob, "rev-parse", "HEAD").strip()
    assert subprocess.run(["git", "merge-base", "--is-ancestor", team, "refs/memory/main"], cwd=origin).returncode == 0


def test_a_plain_push_with_prune_never_deletes_memory_the_remote_alone_holds(alice, bob, origin):
    """`git push --prune` over `remote setup`'s refspec deletes every remote memory ref the pusher lacks: bob's
    pushed memory of spike, which alice never pulled, went with exit 0, and each clone's next fetch dropped its
    copy. The pre-push hook refuses the push whole; memory the remote keeps under another ref may go."""
    for who in (alice, bob):
        gitmem(who, "hooks", "install")
        gitmem(who, "remote", "setup")
    git(bob, "branch", "spike")
    gitmem(bob, "--branch", "spike", "add", "fact", "only on bob's spike")
    gitmem(bob, "push", "--branch", "spike")
    spike = remote_tip(origin, "spike")
    git(alice, "branch", "done")
    gitmem(alice, "--branch", "done", "add", "fact", "merged into main")
    gitmem(alice, "push", "--branch", "done")
    gitmem(alice, "merge", "done")
    gitmem(alice, "push")
    git(alice, "branch", "-q", "-D", "done")
    gitmem(alice, "prune", "--yes")

    pruned = subprocess.run(["git", "push", "--prune"], cwd=alice, capture_output=True, text=True)

    assert pruned.returncode != 0, pruned.stderr
    assert "refusing to delete origin's refs/memory/spike" in pruned.stderr, pruned.stderr
    assert "refs/memory/done" not in pruned.stderr.split("refusing", 1)[1]  # merged into main's: not named
    assert remote_tip(origin, "spike") == spike and remote_tip(origin, "done")
    git(alice, "push", "-q", "origin", ":refs/memory/done")  # all of it is in the remote's main memory
    assert remote_tip(origin, "done") is None and remote_tip(origin, "spike") == spike


def test_remote_setup_keeps_an_existing_push_refspec_and_undo_leaves_it(alice):
    git(alice, "config", "--add", "remote.origin.push", "refs/heads/main:refs/heads/main")
    config = Path(alice, ".git", "config")
    before = config.read_bytes()
    changes = remote_mod.carry_memory(Store.open(str(alice)).repo, "origin")
    assert "HEAD" not in [c.value for c in changes]
    remote_mod.carry_memory(Store.open(str(alice)).repo, "origin", undo=True)
    assert config.read_bytes() == before


def _plant(repo_path: Path, path: str, content: str, message: str = "hand edit") -> str:
    """Commit a blob onto refs/memory/main with plain git plumbing, bypassing gitmem's redaction."""
    index = str(repo_path / ".git" / "plant-index")
    env = {"GIT_INDEX_FILE": index}
    tip = git(repo_path, "rev-parse", "refs/memory/main").strip()
    git(repo_path, "read-tree", tip, env=env)
    blob = git(repo_path, "hash-object", "-w", "--stdin", input=content).strip()
    git(repo_path, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
    tree = git(repo_path, "write-tree", env=env).strip()
    commit = git(repo_path, "commit-tree", tree, "-p", tip, "-m", message).strip()
    git(repo_path, "update-ref", "refs/memory/main", commit, tip)
    os.unlink(index)
    return commit


def _github_token() -> str:
    return next(r for r in RULES if r.id == "github-pat").true_samples[0]


def _secret_pushed_past_the_hooks(alice: Path) -> str:
    """Alice's first, clean memory pushed, then a memory holding a token (returned) pushed with plain git past
    the pre-push hook that would refuse it: what a teammate without gitmem's hooks can do."""
    gitmem(alice, "add", "fact", "clean")
    gitmem(alice, "push")
    token = _github_token()
    _plant(alice, "fact/b/b/01m92e2bbbbbbbbb.yaml",
           "schema: 1\nid: 01m92e2bbbbbbbbb\ntype: fact\nstatus: active\n"
           f"text: 'deploy key {token}'\nauthor:\n  name: M\n  email: m@x.com\n  kind: human\n"
           "source: cli\ncreated: '2026-01-01T00:00:00Z'\n")
    git(alice, "config", "core.hooksPath", "/dev/null")
    git(alice, "push", "-q", "origin", "refs/memory/main:refs/memory/main")
    return token


def test_a_secret_planted_with_plain_git_is_caught_at_push(alice, origin):
    gitmem(alice, "add", "fact", "clean")
    gitmem(alice, "push")
    pushed_before = remote_tip(origin)
    token = _github_token()
    _plant(alice, "note/zz/planted.yaml", f"text: deploy with {token}\n")
    gitmem(alice, "add", "fact", "a later, clean write")  # the secret stays in history

    result = gitmem(alice, "push", check=False)

    assert result.returncode == 1
    assert "secret" in result.stderr and "note/zz/planted.yaml" in result.stderr and "github-pat" in result.stderr
    assert token not in result.stderr + result.stdout
    assert remote_tip(origin) == pushed_before
    assert "git update-ref refs/memory/main refs/memory-remotes/origin/main" in result.stderr  # origin's is clean
    git(alice.parent, "init", "-q", "--bare", "mirror.git")
    git(alice, "remote", "add", "mirror", str(alice.parent / "mirror.git"))
    to_mirror = gitmem(alice, "push", "mirror", check=False)  # no memory there to go back to
    assert to_mirror.returncode == 1 and "rotate them" in to_mirror.stderr and "update-ref" not in to_mirror.stderr


def test_plain_git_push_of_memory_with_a_planted_secret_is_refused_by_the_hook(alice, origin):
    gitmem(alice, "remote", "setup")
    gitmem(alice, "hooks", "install")
    gitmem(alice, "add", "fact", "clean")
    git(alice, "push", "-q")
    assert remote_tip(origin) is not None
    pushed_before = remote_tip(origin)
    _plant(alice, "note/zz/planted.yaml", f"text: deploy with {_github_token()}\n")

    result = subprocess.run(["git", "push"], cwd=alice, capture_output=True, text=True)

    assert result.returncode != 0
    assert "github-pat" in result.stderr and "push refused" in result.stderr
    assert remote_tip(origin) == pushed_before


@pytest.mark.parametrize("ref", ["refs/memory-aside/main.earlier-{tip}", "refs/memory-remotes/origin/main",
                                 "refs/gitmem-incoming/999999999/origin/main"])
def test_a_mirror_push_scans_gitmems_other_refs_as_it_scans_memory(alice, tmp_path, ref):
    """`git push --mirror` (a backup, a move to a new host) sends every ref: memory set aside here, fetched copies
    and a fetch's quarantine refs too, which went out unscanned. A secret in one stays here; clean, they go."""
    gitmem(alice, "hooks", "install")
    gitmem(alice, "add", "fact", "clean")
    clean = git(alice, "rev-parse", "refs/memory/main").strip()
    planted = _plant(alice, "note/zz/planted.yaml", f"text: deploy with {_github_token()}\n")
    ref = ref.format(tip=planted[:8])
    git(alice, "update-ref", ref, planted)
    git(alice, "update-ref", "refs/memory/main", clean)  # this clone's own memory is clean
    backup = tmp_path / "backup.git"
    git(tmp_path, "init", "-q", "--bare", str(backup))

    refused = subprocess.run(["git", "push", "--mirror", str(backup)], cwd=alice, capture_output=True, text=True)

    assert refused.returncode != 0 and "github-pat" in refused.stderr and "push refused" in refused.stderr
    assert git(backup, "for-each-ref") == ""
    git(alice, "update-ref", ref, clean)
    mirrored = subprocess.run(["git", "push", "--mirror", str(backup)], cwd=alice, capture_output=True, text=True)
    assert mirrored.returncode == 0, mirrored.stderr
    assert git(backup, "rev-parse", ref).strip() == clean
    assert ("`gitmem fetch` removes such refs" in mirrored.stderr) == ref.startswith("refs/gitmem-incoming/")


def test_a_mirror_push_of_gitmems_other_refs_that_cannot_be_checked_is_refused(alice, tmp_path):
    """Memory never leaves unscanned: a check that fails, or a gitmem the hook cannot start, refuses a push of
    set-aside memory as it does one of refs/memory/*."""
    gitmem(alice, "hooks", "install")
    blob = git(alice, "hash-object", "-w", "README.md").strip()
    git(alice, "update-ref", "refs/memory-aside/wip.earlier-00000000", blob)  # not a commit: the scan fails
    backup = tmp_path / "backup.git"
    git(tmp_path, "init", "-q", "--bare", str(backup))
    push = ["git", "push", str(backup), "refs/memory-aside/*:refs/memory-aside/*"]

    failed = subprocess.run(push, cwd=alice, capture_output=True, text=True)
    git(alice, "update-ref", "refs/memory-aside/wip.earlier-00000000", git(alice, "rev-parse", "HEAD").strip())
    unstarted = subprocess.run(push, cwd=alice, capture_output=True, text=True,
                               env={**os.environ, "GITMEM_PYTHON": "/nonexistent/python", "PATH": "/usr/bin:/bin"})

    assert failed.returncode != 0 and "could not check the memory being pushed" in failed.stderr, failed.stderr
    assert unstarted.returncode != 0 and "was not checked; push refused" in unstarted.stderr, unstarted.stderr
    assert git(backup, "for-each-ref") == ""


def test_a_branch_named_with_a_secret_is_refused_by_gitmem_push_and_by_the_hook(alice, origin):
    """Memory goes out under its branch's name, which no object scan reads: a token pasted into a branch name
    stays here, whichever way the push goes, and the message names the rule, never the token."""
    token = _github_token()
    gitmem(alice, "remote", "setup")
    gitmem(alice, "hooks", "install")
    git(alice, "checkout", "-q", "-b", f"fix/{token}")
    gitmem(alice, "add", "fact", "clean text")

    pushed = gitmem(alice, "push", check=False)
    assert pushed.returncode == 1 and "github-pat" in pushed.stderr and "gitmem branch -m" in pushed.stderr
    assert token not in pushed.stdout + pushed.stderr
    plain = subprocess.run(["git", "push", "origin", f"refs/memory/fix/{token}"], cwd=alice, capture_output=True,
                           text=True)
    assert plain.returncode != 0 and "github-pat" in plain.stderr
    assert git(origin, "for-each-ref", "refs/memory/") == ""


def test_the_secret_scan_looks_only_at_what_the_remote_lacks(alice):
    token = _github_token()
    gitmem(alice, "add", "fact", "first")
    repo = Store.open(str(alice)).repo
    planted = _plant(alice, "note/zz/planted.yaml", f"token: {token}\n")
    clean = Store.open(str(alice)).add("fact", "second").commit

    assert [rule for _, rule in remote_mod.outgoing_secrets(repo, [clean])] == ["github-pat"]
    assert remote_mod.outgoing_secrets(repo, [clean], known=[planted]) == []
    with pytest.raises(SecretFound):
        remote_mod.push(Store.open(str(alice)), "origin")


def test_a_secret_pushed_with_plain_git_is_redacted_when_it_arrives_by_fast_forward_or_first_pull(
        alice, bob, origin, tmp_path):
    """Someone plants a secret on the remote with plain git. Taken as it is (a fast-forward, a new clone's
    first pull), it would become local memory unread: listed, searched, sent to a model. It arrives
    redacted instead, in a commit on the remote's tip (the next push takes it there too)."""
    gitmem(alice, "add", "fact", "clean")
    gitmem(alice, "push")
    gitmem(bob, "pull")
    token = _github_token()
    git(alice, "config", "core.hooksPath", "/dev/null")  # no pre-push hook: the plain push goes through
    planted = _plant(alice, "fact/b/b/01m92e2bbbbbbbbb.yaml",
                     "schema: 1\nid: 01m92e2bbbbbbbbb\ntype: fact\nstatus: active\n"
                     f"text: 'deploy key {token}'\nauthor:\n  name: M\n  email: m@x.com\n  kind: human\n"
                     "source: cli\ncreated: '2026-01-01T00:00:00Z'\n")
    _plant(alice, "note/z/z/01m92e2zzzzzzzzz.yaml", f"token: {token}\n", message="and a blob that is no memory")
    git(alice, "push", "-q", "origin", "refs/memory/main:refs/memory/main")

    carol = clone(origin, tmp_path / "carol", "Carol")
    dave = clone(origin, tmp_path / "dave", "Dave")
    gitmem(dave, "add", "fact", "dave's own, not pushed")
    merged = gitmem(dave, "pull")  # a merge: every memory taken is written again
    assert "redacted 2 secrets that arrived" in merged.stderr and "rotate them" in merged.stderr
    assert token not in gitmem(dave, "list", "--json").stdout
    for who in (bob, carol):  # a fast-forward, and a first pull
        pulled = json.loads(gitmem(who, "pull", "--json").stdout)
        tip = git(who, "rev-parse", "refs/memory/main").strip()
        assert git(who, "rev-parse", f"{tip}^").strip() == remote_tip(origin)  # one commit on the remote's tip
        assert "redact 2 secrets" in git(who, "log", "-1", "--format=%s", tip)
        assert [(m["commit"], m["redacted"]) for m in pulled["merged"]] == [(tip, 2)]  # and the pull says so
        shown = gitmem(who, "list", "--json").stdout + gitmem(who, "context", "--query", "deploy key").stdout
        assert token not in shown and "deploy key [REDACTED:github-pat]" in shown
        assert token not in git(who, "show", f"{tip}:note/z/z/01m92e2zzzzzzzzz.yaml")
    assert planted  # the blob as it arrived stays in history, below the redaction
    gitmem(bob, "push")
    assert token not in git(origin, "show", "refs/memory/main:note/z/z/01m92e2zzzzzzzzz.yaml")


def test_memory_a_pull_brought_is_never_linked_to_this_clones_next_commit(alice, bob):
    """The post-commit hook links what this clone wrote since its last commit: a teammate's decision taken
    by a fast-forward pull was written for the teammate's code, not for the next unrelated commit here."""
    gitmem(alice, "hooks", "install")
    mine = json.loads(gitmem(alice, "add", "fact", "alice fact", "--json").stdout)["id"]
    (alice / "a.txt").write_text("a\n")
    git(alice, "add", "a.txt")
    git(alice, "commit", "-q", "-m", "c1")
    gitmem(alice, "push")
    pushed = json.loads(gitmem(alice, "add", "fact", "alice's, pushed before her next commit", "--json").stdout)["id"]
    gitmem(alice, "push")
    gitmem(bob, "pull")
    gitmem(bob, "hooks", "install")
    theirs = json.loads(gitmem(bob, "add", "decision", "Use gRPC for billing", "--json").stdout)["id"]
    git(bob, "commit", "-q", "--allow-empty", "-m", "bob's code")  # his link commit lands above alice's write
    gitmem(bob, "push")
    assert json.loads(gitmem(alice, "pull", "--json").stdout)["merged"][0]["kind"] == "fast-forward"
    own = json.loads(gitmem(alice, "add", "fact", "written after the pull", "--json").stdout)["id"]
    (alice / "css.txt").write_text("css\n")
    git(alice, "add", "css.txt")
    git(alice, "commit", "-q", "-m", "unrelated css fix")
    head = git(alice, "rev-parse", "HEAD").strip()
    store = Store.open(str(alice))
    assert head not in store.get(theirs).commits and head not in store.get(mine).commits
    assert store.get(own).commits == (head,) and store.get(pushed).commits == (head,)  # hers, pulled back or not


def test_a_remote_that_dropped_its_memory_ref_gets_no_history_unscanned(alice, bob, origin):
    """The remote's tip as last fetched is what the push takes the remote to have, and scans past: when an
    admin has since deleted the ref to purge a secret, the push must not send that history back unscanned."""
    _secret_pushed_past_the_hooks(alice)
    gitmem(bob, "pull")  # redacted on arrival; the history below still holds it
    git(origin, "update-ref", "-d", "refs/memory/main")  # the purge
    gitmem(bob, "add", "fact", "written after the purge")

    result = gitmem(bob, "push", check=False)

    assert result.returncode == 1 and "possible secret" in result.stderr
    assert remote_tip(origin) is None


def test_a_new_branchs_memory_goes_out_when_the_secret_in_its_history_is_on_the_remote_already(alice, bob, origin):
    """A secret someone pushed with plain git is on the remote in main's memory; a pull redacted it here, and
    the history below keeps it. A feature branch's memory, new to the remote, shares that history, which the
    remote holds: neither `gitmem push` nor a plain `git push` may be refused for it (it was, for good: the
    whole history was scanned, as for a remote with none of it)."""
    _secret_pushed_past_the_hooks(alice)
    gitmem(bob, "hooks", "install")
    gitmem(bob, "remote", "setup")
    gitmem(bob, "pull")  # redacted on arrival; the history below (on the remote too) still holds it
    gitmem(bob, "push")  # main's memory is up to date there: a plain push below sends only the new branch's

    git(bob, "switch", "-q", "-c", "feature")
    gitmem(bob, "add", "fact", "the feature's own")
    pushed = gitmem(bob, "push", check=False)
    assert pushed.returncode == 0, pushed.stderr
    assert remote_tip(origin, "feature") == git(bob, "rev-parse", "refs/memory/feature").strip()

    git(bob, "switch", "-q", "-c", "feature2")
    gitmem(bob, "add", "fact", "the second feature's own")
    git(bob, "commit", "-q", "--allow-empty", "-m", "feature2")
    plain = subprocess.run(["git", "push"], cwd=bob, capture_output=True, text=True)
    assert plain.returncode == 0, plain.stderr
    assert remote_tip(origin, "feature2") == git(bob, "rev-parse", "refs/memory/feature2").strip()

    git(bob.parent, "init", "-q", "--bare", "mirror.git")  # a remote with none of it: the history would go
    git(bob, "remote", "add", "mirror", str(bob.parent / "mirror.git"))
    assert gitmem(bob, "push", "mirror", check=False).returncode == 1
    assert subprocess.run(["git", "push", "mirror", "refs/memory/feature:refs/memory/feature"], cwd=bob,
                          capture_output=True, text=True).returncode != 0
    assert remote_tip(bob.parent / "mirror.git", "feature") is None


def test_a_secret_blob_at_two_paths_arrives_redacted_at_both(alice, origin, tmp_path):
    """A stray copy of a memory's blob under another folder shares its blob: redacting the blob at one of
    its paths only would leave the memory at its own path holding the secret."""
    gitmem(alice, "add", "fact", "clean")
    gitmem(alice, "push")
    token = _github_token()
    blob = ("schema: 1\nid: 01m92e2bbbbbbbbb\ntype: fact\nstatus: active\n"
            f"text: 'deploy key {token}'\nauthor:\n  name: M\n  email: m@x.com\n  kind: human\n"
            "source: cli\ncreated: '2026-01-01T00:00:00Z'\n")
    _plant(alice, "fact/b/b/01m92e2bbbbbbbbb.yaml", blob)
    _plant(alice, "note/b/b/01m92e2bbbbbbbbb.yaml", blob)  # sorts after the memory's own path
    git(alice, "config", "core.hooksPath", "/dev/null")
    git(alice, "push", "-q", "origin", "refs/memory/main:refs/memory/main")
    carol = clone(origin, tmp_path / "carol", "Carol")
    gitmem(carol, "pull")
    assert token not in gitmem(carol, "list", "--json").stdout
    for path in ("fact/b/b/01m92e2bbbbbbbbb.yaml", "note/b/b/01m92e2bbbbbbbbb.yaml"):
        assert token not in git(carol, "show", f"refs/memory/main:{path}")


def _main_moved_on_since_bob_fetched(alice, bob) -> None:
    """Bob pulls the secret (redacted on arrival; the history below, on the remote too, still holds it) and
    pushes; Alice then pushes main's memory on, and Bob, not fetching, starts a feature branch with a memory."""
    gitmem(bob, "pull")
    gitmem(bob, "push")
    gitmem(alice, "pull")
    gitmem(alice, "add", "fact", "alice moves main on")
    gitmem(alice, "push")
    git(bob, "switch", "-q", "-c", "feature")
    gitmem(bob, "add", "fact", "the feature's own")

def test_a_new_branchs_memory_goes_out_when_the_remote_moved_on_since_the_last_fetch(alice, bob, origin):
    """As above, but a teammate pushed main's memory again meanwhile: the remote's tips are then commits this
    clone lacks, so none told the scan what the remote holds, and the push was refused for the secret below
    (saying the remote has none of this memory, to rotate it). It fetches them first, then scans past them."""
    _secret_pushed_past_the_hooks(alice)
    _main_moved_on_since_bob_fetched(alice, bob)
    pushed = gitmem(bob, "push", check=False)

    assert pushed.returncode == 0, pushed.stderr
    assert remote_tip(origin, "feature") == git(bob, "rev-parse", "refs/memory/feature").strip()


@pytest.mark.parametrize("refspecs", [["origin", "feature", "refs/memory/feature"], []])
def test_a_plain_push_of_a_new_branchs_memory_is_scanned_past_what_the_remote_moved_to_since_the_last_fetch(
        alice, bob, origin, refspecs):
    """As above, through the pre-push hook (a plain `git push` that sends the new branch's memory): its scan
    shares `gitmem push`'s fetch of the tips this clone lacks. It read the whole history instead and refused
    the push for the secret a pull had redacted here. Sending all memory (`remote setup`'s refspec) sends
    main's too, behind the remote's: refused for that, saying to pull first, and after the pull it goes."""
    _secret_pushed_past_the_hooks(alice)
    gitmem(bob, "hooks", "install")
    gitmem(bob, "remote", "setup")
    _main_moved_on_since_bob_fetched(alice, bob)
    git(bob, "commit", "-q", "--allow-empty", "-m", "feature")
    plain = subprocess.run(["git", "push", *refspecs], cwd=bob, capture_output=True, text=True)

    assert "possible secret" not in plain.stderr
    if not refspecs:
        assert plain.returncode != 0 and "run `gitmem pull` first" in plain.stderr
        gitmem(bob, "pull")
        plain = subprocess.run(["git", "push"], cwd=bob, capture_output=True, text=True)
    assert plain.returncode == 0, plain.stderr
    assert remote_tip(origin, "feature") == git(bob, "rev-parse", "refs/memory/feature").strip()


@pytest.mark.parametrize("url", ["missing.git", "file:///nonexistent/gitmem/origin.git"])
def test_a_push_to_an_unreachable_remote_says_it_could_not_reach_it_not_to_rotate_a_redacted_secret(
        alice, bob, tmp_path, url):
    """A secret a pull redacted here stays in the history below, on the remote already. A new branch's push to a
    remote that cannot be asked (a moved or mistyped URL, a dead server) scanned that whole history and told the
    user the remote has none of it, to rotate the secret: it says it could not reach the remote, and why."""
    _secret_pushed_past_the_hooks(alice)
    gitmem(bob, "pull")  # redacted on arrival; the history below still holds it
    git(bob, "switch", "-q", "-c", "feature")
    gitmem(bob, "add", "fact", "the feature's own")
    git(bob, "remote", "set-url", "origin", url)
    refs_before = git(bob, "for-each-ref")

    pushed = gitmem(bob, "push", check=False)

    assert pushed.returncode == 1
    assert "could not reach origin" in pushed.stderr and "rotate" not in pushed.stderr
    assert "possible secret" not in pushed.stderr and "Traceback" not in pushed.stderr
    assert len(pushed.stderr.strip().splitlines()) == 1
    assert git(bob, "for-each-ref") == refs_before


def test_a_push_to_a_pushurl_apart_from_the_fetch_url_goes_through(alice, tmp_path):
    """The lease names the tip fetched from the remote's url; pushes go to its pushurl, which may hold another
    tip: a refused lease that a fetch cannot explain is dropped, and the push scans everything instead."""
    gitmem(alice, "add", "fact", "one")
    gitmem(alice, "push")
    fork = tmp_path / "fork.git"
    git(tmp_path, "init", "-q", "--bare", str(fork))
    git(alice, "remote", "set-url", "--push", "origin", str(fork))
    gitmem(alice, "add", "fact", "two")
    pushed = json.loads(gitmem(alice, "push", "--json").stdout)
    assert [b["status"] for b in pushed["branches"]] == ["pushed"]
    assert git(fork, "rev-parse", "refs/memory/main").strip() == git(alice, "rev-parse", "refs/memory/main").strip()
    git(alice, "push", "-q", str(fork), "main")  # (code to clone)
    other = clone(fork, tmp_path / "other", "Other")  # the fork's memory moves on where fetching does not look
    git(other, "checkout", "-q", "main")
    gitmem(other, "pull")
    gitmem(other, "add", "fact", "only on the fork")
    gitmem(other, "push")
    gitmem(alice, "add", "fact", "three")
    stuck = json.loads(gitmem(alice, "push", "--json", check=False).stdout)["branches"][0]
    assert stuck["status"] == "rejected" and stuck["attempts"] <= 3 and "pushurl" in stuck["message"]  # not 8


def test_a_secret_in_a_conflict_file_arrives_redacted_by_a_first_pull_and_by_a_merge(alice, origin, tmp_path):
    """A conflict file travels with the memory: one planted with a secret in a version arrives redacted,
    whether a new clone takes the remote's tip or a clone with memory of its own merges it."""
    from gitmem.records import Conflict, dump_conflict

    mid = json.loads(gitmem(alice, "add", "fact", "Port 8080", "--json").stdout)["id"]
    gitmem(alice, "push")
    token = _github_token()
    ours = Store.open(str(alice)).get(mid)
    data = Conflict(mid, ("text",), ours, ours, ours).to_dict()
    data["theirs"]["text"] = f"token {token}"  # as a teammate's side would hold it, written by hand
    raw = yaml.safe_dump(data)
    assert Conflict.from_dict(yaml.safe_load(raw)).theirs.text == f"token {token}"
    assert token not in dump_conflict(Conflict.from_dict(data)).decode()  # gitmem never writes one so
    git(alice, "config", "core.hooksPath", "/dev/null")
    _plant(alice, f"conflicts/{mid}.yaml", raw)
    git(alice, "push", "-q", "origin", "refs/memory/main:refs/memory/main")

    carol = clone(origin, tmp_path / "carol", "Carol")  # a first pull
    dave = clone(origin, tmp_path / "dave", "Dave")
    gitmem(dave, "add", "fact", "dave's own, not pushed")  # a merge
    for who in (carol, dave):
        pulled = json.loads(gitmem(who, "pull", "--json").stdout)
        assert [m["redacted"] for m in pulled["merged"]] == [1]  # and the pull says so: rotate it
        shown = gitmem(who, "conflicts", "--json").stdout
        assert mid in shown and token not in shown and "[REDACTED:github-pat]" in shown
        assert token not in git(who, "show", f"refs/memory/main:conflicts/{mid}.yaml")


def test_a_blob_that_is_no_memory_arrives_by_any_pull_and_once_dropped_stays_dropped(alice, bob, origin, tmp_path):
    """A blob that is no valid memory (a hand edit, or a newer gitmem's memory) arrives as it is, by a
    fast-forward or a merge alike, for doctor to name. A merge never lets the other side delete a memory,
    but such a blob is none: once doctor --drop-invalid removed it, a teammate's pull must not bring it back."""
    gitmem(alice, "add", "fact", "first")
    token = _github_token()
    _plant(alice, "fact/a/a/01m92e2aaaaaaaaa.yaml", f"schema: 1\nid: 01m92e2aaaaaaaaa\ntext: [unclosed {token}\n")
    git(alice, "config", "core.hooksPath", "/dev/null")
    git(alice, "push", "-q", "origin", "refs/memory/main:refs/memory/main")
    carol = clone(origin, tmp_path / "carol", "Carol")
    for who in (bob, carol):
        gitmem(who, "pull")
    assert "fact/a/a/01m92e2aaaaaaaaa.yaml" in git(bob, "ls-tree", "-r", "--name-only", "refs/memory/main")
    dave = clone(origin, tmp_path / "dave", "Dave")
    gitmem(dave, "add", "fact", "dave's own")  # dave's pull merges: the blob arrives as a fast-forward brings it
    gitmem(dave, "pull")
    assert "fact/a/a/01m92e2aaaaaaaaa.yaml" in git(dave, "ls-tree", "-r", "--name-only", "refs/memory/main")
    assert "not valid" in gitmem(dave, "doctor", check=False).stdout
    for who in (bob, dave):  # by a fast-forward and by a merge: its text redacted, as it is no memory
        assert token not in git(who, "show", "refs/memory/main:fact/a/a/01m92e2aaaaaaaaa.yaml")
    gitmem(alice, "fetch")  # her push scan then knows the remote holds the planted commit already
    gitmem(alice, "doctor", "--drop-invalid")
    gitmem(alice, "push")
    gitmem(bob, "add", "fact", "bob's own")  # bob has diverged: his pull merges
    for who in (bob, carol):  # carol's pull is a fast-forward
        gitmem(who, "pull")
        assert "fact/a/a/01m92e2aaaaaaaaa.yaml" not in git(who, "ls-tree", "-r", "--name-only", "refs/memory/main")
        assert gitmem(who, "doctor").returncode == 0
    gitmem(bob, "push")
    gitmem(alice, "pull")
    assert gitmem(alice, "doctor").returncode == 0
    assert {m["text"] for m in json.loads(gitmem(alice, "list", "--json").stdout)["memories"]} == {"first", "bob's own"}


def test_a_remote_with_a_relative_url_works_from_any_directory_as_git_does(tmp_path):
    """git resolves a remote's relative URL from the repository's work tree: so does gitmem -C."""
    git(tmp_path, "init", "-q", "--bare", "r.git")
    make_repo(tmp_path / "a")
    git(tmp_path / "a", "remote", "add", "origin", "../r.git")
    gitmem(tmp_path, "-C", "a", "add", "fact", "pushed from elsewhere")
    gitmem(tmp_path, "-C", "a", "push")
    assert git(tmp_path / "r.git", "for-each-ref", "refs/memory/") != ""
    gitmem(tmp_path, "-C", "a", "pull")


def test_the_secret_scan_reads_a_clean_blob_once_and_a_secret_every_time(alice, monkeypatch):
    """gitmem scans each blob it writes, and the push scan each blob nobody scanned yet; a clean
    blob is remembered under a hash of the rules and not read again. The blob with a secret is
    scanned (and refused) on every push; new rules scan everything again."""
    for n in range(3):
        gitmem(alice, "add", "fact", f"clean memory {n}")
    planted = _plant(alice, "note/zz/planted.yaml", f"token: {_github_token()}\n")
    repo = Store.open(str(alice)).repo
    scanned = []
    real = redact_mod.blob_texts
    monkeypatch.setattr(redact_mod, "blob_texts", lambda data: scanned.append(data) or real(data))

    first = remote_mod.outgoing_secrets(repo, [planted])
    assert len(scanned) == 1  # gitmem scanned its own writes as it made them: only the planted blob is read
    second = remote_mod.outgoing_secrets(repo, [planted])

    assert [rule for _, rule in first] == [rule for _, rule in second] == ["github-pat"]
    assert len(scanned) == 2  # the blob with the secret, again
    monkeypatch.setattr(redact_mod, "rules_key", lambda: "other rules")
    del scanned[:]
    remote_mod.outgoing_secrets(repo, [planted])
    assert len(scanned) == 4  # new rules: every blob again


def test_the_push_scan_reads_what_the_push_sends_not_every_tree_the_remote_holds(repo):
    """A push of one memory to a remote holding 100,000 reads the few trees that changed (a walk of every tree
    the remote holds was 0.2 s a push), and still finds a secret in what it sends."""
    held = seeded(repo, 400).own_tip()
    gitmem(repo, "add", "fact", "one new memory")
    git_repo = Store.open(str(repo)).repo  # as a push opens it: no tree read yet
    spy = ReadSpy()
    git_repo.odb.add_backend(spy, 2000)

    assert remote_mod.outgoing_secrets(git_repo, [Store.open(str(repo)).own_tip()], [held]) == []
    assert spy.reads < 40  # 400 memories fill some 300 buckets: reading them all is hundreds
    planted = _plant(repo, "fact/zz/planted.yaml", f"token: {_github_token()}\n")
    assert [rule for _, rule in remote_mod.outgoing_secrets(git_repo, [planted], [held])] == ["github-pat"]


def test_an_unreachable_remote_gives_a_clear_error_and_leaves_memory_alone(alice, tmp_path):
    gitmem(alice, "add", "fact", "stays here")
    git(alice, "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    tip = Store.open(str(alice)).own_tip()

    for command in (["push"], ["fetch"], ["pull"]):
        result = gitmem(alice, *command, check=False)
        assert result.returncode == 1, command
        [line] = result.stderr.strip().splitlines()
        assert line.startswith("Error: could not") and "origin" in line and "gone.git" in line
    assert Store.open(str(alice)).own_tip() == tip
    assert "refs/memory-remotes/origin/main" not in Store.open(str(alice)).repo.references


def test_a_push_of_a_branch_with_no_memory_of_its_own_says_so_and_is_no_failure(alice, origin):
    """Nothing to push is not a refused push (`gitmem push --help`, docs/remotes.md): no-memory exits 0, so a
    script or the pre-push hook's push mode does not fail on a branch that has written nothing."""
    git(alice, "checkout", "-q", "-b", "quiet")

    result = gitmem(alice, "push", "--branch", "quiet", check=False)

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("quiet: no-memory")
    assert json.loads(gitmem(alice, "push", "--branch", "quiet", "--json").stdout)["branches"][0]["status"] == "no-memory"
    assert "refs/memory/quiet" not in git(origin, "for-each-ref")


def test_a_remote_that_rejects_the_push_gives_a_clear_error(alice, origin):
    hook = origin / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'memory is frozen' >&2\nexit 1\n")
    hook.chmod(0o755)
    gitmem(alice, "add", "fact", "not accepted")
    tip = Store.open(str(alice)).own_tip()

    result = gitmem(alice, "push", check=False)

    assert result.returncode == 1
    assert "main: rejected" in result.stdout
    assert result.stderr.startswith("Error:") and "hook declined" in result.stderr
    assert Store.open(str(alice)).own_tip() == tip and remote_tip(origin) is None


def test_a_named_remote_must_exist(alice):
    with pytest.raises(RemoteError, match="no remote named 'upstream'"):
        remote_mod.fetch(Store.open(str(alice)).repo, "upstream")


def test_a_pull_does_not_bring_back_the_memory_prune_dropped_unless_the_remote_has_more(alice, bob):
    git(alice, "branch", "spike")
    gitmem(alice, "--branch", "spike", "add", "fact", "spike fact")
    gitmem(alice, "push", "--all")
    git(alice, "branch", "-D", "spike")  # its memory stays on the remote; its code is nowhere
    gitmem(bob, "pull")
    gitmem(bob, "prune", "--yes", "--force")
    assert "refs/memory/spike" not in git(bob, "for-each-ref", "refs/memory")
    again = gitmem(bob, "pull")
    assert "refs/memory/spike" not in git(bob, "for-each-ref", "refs/memory")
    assert "spike" not in again.stderr and "no memory yet" not in again.stderr  # the prune said it; status says so
    assert "memory spike: not taken again, it was dropped or set aside here" in gitmem(bob, "status").stdout
    gitmem(alice, "--branch", "spike", "add", "fact", "spike goes on")  # something new: it is taken
    gitmem(alice, "push", "--all")
    gitmem(bob, "pull")
    assert "refs/memory/spike" in git(bob, "for-each-ref", "refs/memory")


def test_a_pull_does_not_make_memory_of_a_name_renamed_away_here_again(alice, bob):
    """alice renamed old to new (`git branch -m`, then `gitmem branch -m`); origin still held refs/memory/old, and
    her next pull made memory of old again, a branch of its own that prune later dropped. A name renamed away
    here is skipped as dropped memory is, and status says where it went. What bob, still on old, writes there
    since is named with the command that brings it into new; bob's old and his pushes are untouched."""
    git(alice, "checkout", "-q", "-b", "old")
    gitmem(alice, "add", "fact", "written on old")
    git(alice, "commit", "-q", "--allow-empty", "-m", "old work")
    git(alice, "push", "-q", "origin", "old")
    gitmem(alice, "push")
    git(bob, "fetch", "-q", "origin")
    git(bob, "checkout", "-q", "old")
    gitmem(bob, "pull")
    git(alice, "branch", "-m", "old", "new")
    gitmem(alice, "branch", "-m", "old", "new")

    quiet = gitmem(alice, "pull")

    assert "refs/memory/old" not in git(alice, "for-each-ref", "refs/memory")
    assert "old" not in quiet.stdout + quiet.stderr
    assert "memory old: renamed to new here, whose memory holds all of origin's" in gitmem(alice, "status").stdout
    gitmem(bob, "add", "fact", "bob goes on with old")
    gitmem(bob, "push")
    more = gitmem(alice, "pull")
    command = "`gitmem --branch new merge refs/memory-remotes/origin/old`"
    assert "refs/memory/old" not in git(alice, "for-each-ref", "refs/memory")
    assert f"old: renamed to new here; origin's holds memory new lacks, not taken ({command} brings it)" \
        in more.stderr
    assert "memory old: renamed to new here; origin's holds memory new lacks" in gitmem(alice, "status").stdout
    status = json.loads(gitmem(alice, "status", "--json").stdout)["remotes"]
    assert [(r["branch"], r["renamed_to"], r["skipped"], r["behind"]) for r in status if r["branch"] == "old"] == [
        ("old", "new", True, 1)]
    gitmem(alice, "--branch", "new", "merge", "refs/memory-remotes/origin/old")
    assert {"written on old", "bob goes on with old"} <= texts(alice)  # alice is on new
    gitmem(alice, "push", "--all")
    gitmem(bob, "pull")
    assert {"written on old", "bob goes on with old"} <= texts(bob)  # bob is still on old
    gitmem(bob, "add", "fact", "bob still on old")
    assert gitmem(bob, "push").returncode == 0


def test_status_shows_ahead_and_behind_per_memory_branch_and_remote(alice, bob):
    gitmem(alice, "add", "fact", "one")
    gitmem(alice, "push")
    gitmem(bob, "pull")
    gitmem(alice, "add", "fact", "two")
    gitmem(alice, "push")
    gitmem(bob, "add", "fact", "three")
    gitmem(bob, "add", "fact", "four")
    gitmem(bob, "fetch")

    status = json.loads(gitmem(bob, "status", "--json").stdout)

    assert status["remotes"] == [{"branch": "main", "remote": "origin", "ahead": 2, "behind": 1, "skipped": False,
                                  "aside": None, "aside_merged": False, "new_branch": False, "renamed_to": None,
                                  "unfetched": False, "reads": None, "local": Store.open(str(bob)).own_tip(),
                                  "fetched": Store.open(str(alice)).own_tip()}]
    assert "origin: 2 ahead, 1 behind" in gitmem(bob, "status").stdout
    git(alice, "branch", "feature")  # a branch bob has no memory of: counted against what it inherits, main's
    gitmem(alice, "--branch", "feature", "add", "fact", "feature fact")
    gitmem(alice, "push", "--all")
    gitmem(bob, "fetch")
    feature = next(r for r in json.loads(gitmem(bob, "status", "--json").stdout)["remotes"] if r["branch"] == "feature")
    assert (feature["ahead"], feature["behind"]) == (0, 2)  # alice's "two" and the feature fact, not all of history
    git(bob, "branch", "spike")
    gitmem(bob, "--branch", "spike", "add", "fact", "never pushed")
    shown = gitmem(bob, "status").stdout
    assert "memory spike: not on origin (as of the last fetch or push): `gitmem push origin --branch spike`" in shown
    assert "spike vs origin" not in shown  # not "5 ahead": the remote is not behind on a branch it never had


def test_status_says_a_branch_without_memory_here_has_none_yet_and_what_it_reads(alice, bob):
    """bob fetched alice's feature memory; his feature branch has none of its own yet and reads main's. status said
    "memory feature vs origin: 0 ahead, 1 behind", as if feature had memory here that lagged. It says there is none
    yet, whose it reads, and what the pull takes."""
    gitmem(alice, "add", "fact", "on main")
    gitmem(alice, "push")
    gitmem(bob, "pull")
    git(alice, "checkout", "-q", "-b", "feature")
    gitmem(alice, "add", "fact", "feature fact")
    gitmem(alice, "push")
    git(bob, "checkout", "-q", "-b", "feature")
    gitmem(bob, "fetch")

    shown = gitmem(bob, "status").stdout

    assert "feature vs origin" not in shown
    assert "memory feature: no memory of its own here yet, reading main's; origin's holds 1 commit main's lacks: " \
        "`gitmem pull` takes it" in shown
    feature = next(r for r in json.loads(gitmem(bob, "status", "--json").stdout)["remotes"] if r["branch"] == "feature")
    assert (feature["local"], feature["reads"], feature["behind"]) == (None, "main", 1)
    gitmem(bob, "pull")
    assert "memory feature vs origin: 0 ahead, 0 behind" in gitmem(bob, "status").stdout


def test_status_after_a_plain_git_fetch_of_memory_does_not_say_it_is_missing_from_the_remote(alice, bob):
    """bob fetched the team's memory with plain git (`git fetch origin 'refs/memory/*:refs/memory/*'`), which
    records no fetched copy: status said "not on origin", though origin has it, and then "not known to be on
    origin", though that fetch had just taken his very tip from origin. Its FETCH_HEAD says so: status counts
    against that tip. Once a later fetch rewrote FETCH_HEAD it cannot know without the network, so it says so,
    with the push that sends it or finds it there, after which it knows. An empty remote leaves no copy either:
    the same line, whose push then sends it."""
    gitmem(alice, "add", "fact", "from alice")
    gitmem(alice, "push")
    git(bob, "fetch", "-q", "origin", "refs/memory/*:refs/memory/*")

    shown = gitmem(bob, "status").stdout

    assert "not on origin" not in shown and "not known" not in shown
    assert "memory main vs origin: 0 ahead, 0 behind (as of the last fetch or push)" in shown
    [remote] = json.loads(gitmem(bob, "status", "--json").stdout)["remotes"]
    assert remote["fetched"] == remote["local"] and remote["unfetched"] is False

    git(bob, "fetch", "-q", "origin")  # code only: FETCH_HEAD no longer names memory
    shown = gitmem(bob, "status").stdout
    assert "not on origin" not in shown
    assert "memory main: not known to be on origin (no copy of origin's memory here): `gitmem push origin --branch " \
        "main` sends it, or finds it there" in shown
    [remote] = json.loads(gitmem(bob, "status", "--json").stdout)["remotes"]
    assert remote["fetched"] is None and remote["unfetched"] is True
    assert gitmem(bob, "push").stdout.startswith("main: up-to-date")
    assert "memory main vs origin: 0 ahead, 0 behind" in gitmem(bob, "status").stdout
    gitmem(bob, "fetch")
    assert "memory main vs origin: 0 ahead, 0 behind" in gitmem(bob, "status").stdout
    git(bob, "branch", "spike")
    gitmem(bob, "--branch", "spike", "add", "fact", "never pushed")  # origin's whole memory was listed: it lacks spike
    assert "memory spike: not on origin (as of the last fetch or push)" in gitmem(bob, "status").stdout


@pytest.mark.parametrize("url, written", [
    ("git@github.com:team/repo.git", "github.com:team/repo"),
    ("https://me:token@github.com/team/repo.git/", "https://github.com/team/repo"),
    ("ssh://git@host:2222/srv/repo.git", "ssh://host:2222/srv/repo"),
    ("/srv/a@b/repo.git", "/srv/a@b/repo"),
    ("../origin.git/", "../origin"),
])
def test_a_remote_is_known_by_the_url_git_writes_in_fetch_head(url, written):
    """git writes FETCH_HEAD's URL without credentials, trailing slashes or ".git": a remote whose configured URL
    has any of them (a GitHub ssh remote has two) is still recognised there."""
    from gitmem.remote import _fetch_head_url

    assert _fetch_head_url(url) == written


def _two_writes_dropped_by_a_forced_fetch(alice, bob) -> str:
    """bob's two unpushed writes, dropped by a forced `git fetch origin '+refs/memory/*:refs/memory/*'` of alice's
    memory: the tip they were at."""
    gitmem(alice, "add", "fact", "from alice")
    gitmem(alice, "push")
    gitmem(bob, "add", "fact", "bob's first")
    gitmem(bob, "add", "fact", "bob's second")
    lost = Store.open(str(bob)).own_tip()
    git(bob, "fetch", "-q", "origin", "+refs/memory/*:refs/memory/*")
    return lost


def test_memory_a_forced_plain_git_fetch_dropped_is_named_with_the_merge_that_brings_it_back(alice, bob):
    """A forced `git fetch origin '+refs/memory/*:refs/memory/*'` moved bob's memory ref to origin's, dropping two
    writes he had not pushed: status, log and doctor showed nothing wrong and `doctor --recover` said the history
    was intact. The ref's reflog still holds his last write: status and doctor name it and the merge that brings
    it back, and once merged they say nothing more."""
    lost = _two_writes_dropped_by_a_forced_fetch(alice, bob)
    assert texts(bob) == {"from alice"}

    notice = (f"memory written here at {lost[:10]} is no longer in refs/memory/main: a move gitmem did not make "
              f"(fetch -q origin +refs/memory/*:refs/memory/*: forced-update) dropped it; bring it back with "
              f"`gitmem merge {lost}`")
    assert notice in gitmem(bob, "status").stdout
    assert f"warning: refs/memory/main: {notice}" in gitmem(bob, "doctor").stdout
    recovered = gitmem(bob, "doctor", "--recover", check=False)
    assert recovered.returncode == 1 and notice in recovered.stderr and "Traceback" not in recovered.stderr

    gitmem(bob, "merge", lost)

    assert texts(bob) == {"from alice", "bob's first", "bob's second"}
    assert "no longer in" not in gitmem(bob, "status").stdout + gitmem(bob, "doctor").stdout


def test_a_new_clone_s_empty_status_names_the_pull_that_brings_the_team_s_memory(alice, bob):
    """A teammate's fresh clone: `gitmem status` said "no memories" and nothing more, though origin holds the
    team's memory (no copy of it here yet, so status cannot know)."""
    gitmem(alice, "add", "fact", "from alice")
    gitmem(alice, "push")

    assert "no memories here yet (`gitmem pull` brings a remote's, if it has any)" in gitmem(bob, "status").stdout
    gitmem(bob, "pull")
    assert "1 fact" in gitmem(bob, "status").stdout


def test_a_push_behind_the_remote_says_what_it_took_in(alice, bob):
    """bob had nothing of his own to send and was behind origin: `gitmem push` took origin's memory in (a
    fast-forward) and printed only "main: up-to-date", while his memory had grown by alice's writes. It says
    how many came in, and the JSON counts them."""
    gitmem(bob, "add", "fact", "bob's, pushed")
    gitmem(bob, "push")
    gitmem(alice, "pull")
    gitmem(alice, "add", "fact", "alice's first")
    gitmem(alice, "add", "fact", "alice's second")
    gitmem(alice, "push")

    pushed = gitmem(bob, "push").stdout

    assert "main: up-to-date" in pushed and "2 memories of origin's taken in here" in pushed, pushed
    assert texts(bob) == {"bob's, pushed", "alice's first", "alice's second"}
    gitmem(alice, "add", "fact", "alice's third")
    gitmem(alice, "push")
    [branch] = json.loads(gitmem(bob, "push", "--json").stdout)["branches"]
    assert branch["status"] == "up-to-date" and branch["taken"] == 1
    assert "taken in" not in gitmem(bob, "push").stdout  # nothing came in this time


def test_memory_a_forced_plain_git_fetch_dropped_is_kept_aside_by_the_next_write(alice, bob):
    """After the forced fetch bob wrote one more memory before any status: gitmem's write became the ref's newest
    move, status, doctor and `doctor --recover` said all was well, and the two dropped writes were named nowhere but
    in git's reflog (then pushed away for good by the next push). The write keeps them aside first, as this
    clone's own set-aside memory: status names them and the merge that brings them back, as for a branch's."""
    lost = _two_writes_dropped_by_a_forced_fetch(alice, bob)

    gitmem(bob, "add", "fact", "bob's third, after the fetch")
    gitmem(bob, "push")

    aside = f"main.earlier-{lost[:8]}"
    assert git(bob, "rev-parse", f"refs/memory-aside/{aside}").strip() == lost
    shown = gitmem(bob, "status").stdout
    assert aside in shown and f"gitmem merge {aside}" in shown, shown
    gitmem(bob, "merge", aside)
    assert texts(bob) == {"from alice", "bob's first", "bob's second", "bob's third, after the fetch"}


def test_status_names_memory_set_aside_here_as_kept_in_this_clone_not_as_unpushed(alice, bob, origin):
    """alice deleted feature and made a new one; bob's pull set his memory of the earlier feature aside, as
    feature.earlier-<his tip>. status told him "not on origin: `gitmem push origin --branch feature.earlier-...`",
    though set-aside memory is this clone's to keep apart (docs/branches.md), under a name its own tip gives: it
    says so once, with what brings it in or drops it, and the JSON marks it."""
    git(alice, "checkout", "-q", "-b", "feature")
    gitmem(alice, "add", "fact", "old spike")
    git(alice, "commit", "-q", "--allow-empty", "-m", "spike")
    git(alice, "push", "-q", "origin", "feature")
    gitmem(alice, "push")
    gitmem(bob, "pull")
    git(alice, "checkout", "-q", "main")
    git(alice, "branch", "-q", "-D", "feature")
    git(alice, "push", "-q", "origin", ":feature", ":refs/memory/feature")
    gitmem(alice, "prune", "--yes", "--force")  # records what it dropped: the new feature's writes name it
    git(alice, "checkout", "-q", "-b", "feature")
    gitmem(alice, "add", "fact", "new work")
    gitmem(alice, "push")
    git(bob, "remote", "add", "mirror", str(origin))  # a second remote: still said once
    gitmem(bob, "fetch", "mirror")
    aside = json.loads(gitmem(bob, "pull", "--json").stdout)["set_aside"]["feature"]
    assert aside.startswith("feature.earlier-")

    shown = gitmem(bob, "status").stdout

    assert f"not on origin (as of the last fetch or push): `gitmem push origin --branch {aside}`" not in shown
    assert shown.count(f"memory {aside}: ") == 1
    assert f"memory {aside}: your memory of the earlier 'feature', set aside here and kept in this clone, not pushed: " \
        f"`gitmem merge {aside}` brings it in, `gitmem prune` drops it" in shown
    status = json.loads(gitmem(bob, "status", "--json").stdout)
    assert {(r["branch"], r["remote"], r["aside"]) for r in status["remotes"]} == {
        ("feature", "origin", None), ("feature", "mirror", None), (aside, "origin", "feature"), (aside, "mirror", "feature")}
    gitmem(bob, "push", "--all")  # as status says: not pushed
    assert git(origin, "for-each-ref", "--format=%(refname)", "refs/memory/") == "refs/memory/feature\n"


def _set_aside_here(path: Path) -> str:
    """wip deleted and made again on ``path``: the post-checkout hook sets the earlier wip's memory aside here;
    returns the name it is kept under."""
    gitmem(path, "hooks", "install")
    git(path, "checkout", "-q", "-b", "wip")
    gitmem(path, "add", "fact", "abandoned spike")
    git(path, "commit", "-q", "--allow-empty", "-m", "spike")
    git(path, "checkout", "-q", "main")
    git(path, "branch", "-q", "-D", "wip")
    git(path, "checkout", "-q", "-b", "wip", env={"GIT_COMMITTER_DATE": "2031-01-01T00:00:00Z"})  # see created_now
    gitmem(path, "add", "fact", "new work")
    git(path, "commit", "-q", "--allow-empty", "-m", "work")
    return next(b["name"] for b in json.loads(gitmem(path, "branch", "--json").stdout)["branches"]
                if b["name"].startswith("wip.earlier-"))


def _memory_on(origin: Path) -> set:
    return set(git(origin, "for-each-ref", "--format=%(refname)").split()) - {"refs/heads/main", "refs/heads/wip"}


def test_plain_git_push_after_remote_setup_never_sends_memory_set_aside_here(alice, bob, origin):
    """`gitmem remote setup`'s refspec pushes refs/memory/*, and a pre-push hook can only refuse a whole push:
    memory set aside here is kept outside refs/memory/, so a plain `git push` (or one of every branch) never
    shares it, while gitmem still reads it, and pushes it when a person names it."""
    gitmem(alice, "add", "fact", "on main")
    aside = _set_aside_here(alice)
    gitmem(alice, "remote", "setup")

    git(alice, "push", "-q")  # on wip: HEAD and the refspec's refs/memory/*
    git(alice, "checkout", "-q", "main")
    git(alice, "push", "-q")

    assert _memory_on(origin) == {"refs/memory/main", "refs/memory/wip"}
    assert {m.text for m in Store.open(str(alice), aside).memories().values()} == {"on main", "abandoned spike"}
    gitmem(alice, "push", "--all")
    assert _memory_on(origin) == {"refs/memory/main", "refs/memory/wip"}
    gitmem(alice, "push", "--branch", aside)  # named: sent, under the name it has here
    assert _memory_on(origin) == {"refs/memory/main", "refs/memory/wip", f"refs/memory/{aside}"}
    gitmem(bob, "pull")
    assert "abandoned spike" in {m.text for m in Store.open(str(bob), aside).memories().values()}
    assert git(bob, "for-each-ref", "--format=%(refname)", f"refs/memory-aside/{aside}").strip()  # kept apart there too
    gitmem(alice, "--branch", "main", "merge", aside)
    assert "abandoned spike" in texts(alice)


def test_a_plain_push_of_a_new_branch_meeting_the_remotes_earlier_memory_of_its_name_says_what_settles_it(
        alice, bob, origin):
    """alice deleted wip and made it again; the remote still holds the earlier wip's memory, with a write of bob's
    alice never fetched. The pre-push hook said it "moved since the last fetch": run `gitmem pull` first; but the
    pull does not take that memory (an earlier branch's), and the next push failed with git's non-fast-forward
    hint. The hook gives `gitmem push`'s advice: delete it on the remote, or push under another name."""
    gitmem(alice, "hooks", "install")
    git(alice, "checkout", "-q", "-b", "wip")
    gitmem(alice, "add", "fact", "abandoned spike")
    git(alice, "commit", "-q", "--allow-empty", "-m", "spike")
    gitmem(alice, "push")
    gitmem(bob, "pull")
    gitmem(bob, "--branch", "wip", "add", "fact", "bob adds to the spike")
    gitmem(bob, "push", "--branch", "wip")
    git(alice, "checkout", "-q", "main")
    git(alice, "branch", "-q", "-D", "wip")
    git(alice, "checkout", "-q", "-b", "wip", env={"GIT_COMMITTER_DATE": "2031-01-01T00:00:00Z"})  # see created_now
    gitmem(alice, "add", "fact", "new work")
    git(alice, "commit", "-q", "--allow-empty", "-m", "work")
    gitmem(alice, "remote", "setup")

    refused = subprocess.run(["git", "push"], cwd=alice, capture_output=True, text=True)

    assert refused.returncode != 0 and "gitmem pull" not in refused.stderr, refused.stderr
    assert "origin holds the memory of an earlier 'wip', dropped or set aside here: delete it there " \
        "(git push origin :refs/memory/wip) or push this branch's memory under another name (`gitmem branch -m`)" \
        in refused.stderr, refused.stderr
    assert "bob adds to the spike" not in texts(alice)
    git(alice, "push", "-q", "origin", ":refs/memory/wip")  # as it says
    git(alice, "push", "-q")
    assert remote_tip(origin, "wip") == Store.open(str(alice)).own_tip()


def _as_an_earlier_gitmem_kept_it(path: Path, aside: str) -> None:
    """Move set-aside memory back to refs/memory/, where gitmem kept it before refs/memory-aside/."""
    tip = git(path, "rev-parse", f"refs/memory-aside/{aside}").strip()
    git(path, "update-ref", f"refs/memory/{aside}", tip)
    git(path, "update-ref", "-d", f"refs/memory-aside/{aside}")


def test_memory_an_earlier_gitmem_set_aside_under_refs_memory_is_moved_apart_on_first_use_and_kept(alice, origin):
    gitmem(alice, "remote", "setup")
    aside = _set_aside_here(alice)
    tip = git(alice, "rev-parse", f"refs/memory-aside/{aside}").strip()
    _as_an_earlier_gitmem_kept_it(alice, aside)

    status = json.loads(gitmem(alice, "status", "--json").stdout)

    assert git(alice, "for-each-ref", "--format=%(refname) %(objectname)", "refs/memory/", "refs/memory-aside/") \
        .split("\n").count(f"refs/memory-aside/{aside} {tip}") == 1
    assert git(alice, "rev-parse", "-q", "--verify", f"refs/memory/{aside}", check=False) == ""
    assert any(r["aside"] == "wip" for r in status["remotes"])
    git(alice, "config", "core.hooksPath", "/dev/null")  # no hook to catch it: it is out of the refspec's reach
    git(alice, "push", "-q")
    assert _memory_on(origin) == {"refs/memory/wip"}
    assert "abandoned spike" in {m.text for m in Store.open(str(alice), aside).memories().values()}
    gitmem(alice, "prune", "--yes", "--force")
    assert git(alice, "for-each-ref", "refs/memory-aside/") == ""


def test_a_plain_push_of_memory_an_earlier_gitmem_set_aside_is_refused_once_and_it_is_moved_apart(alice, origin):
    """No gitmem command ran since the upgrade: the pre-push hook cannot leave that ref out of git's push, so it
    refuses the push, moves it, and the same push again sends the rest."""
    gitmem(alice, "remote", "setup")
    aside = _set_aside_here(alice)
    _as_an_earlier_gitmem_kept_it(alice, aside)

    refused = subprocess.run(["git", "push"], cwd=alice, capture_output=True, text=True)

    assert refused.returncode != 0 and f"refs/memory/{aside}: memory set aside here" in refused.stderr
    assert _memory_on(origin) == set()
    git(alice, "push", "-q")
    assert _memory_on(origin) == {"refs/memory/wip"}
    assert "abandoned spike" in {m.text for m in Store.open(str(alice), aside).memories().values()}


def test_doctor_reports_memory_on_the_remote_but_not_here(alice, bob):
    gitmem(alice, "add", "fact", "only on the remote")
    gitmem(alice, "push")

    report = gitmem(bob, "doctor", "--remotes", check=False)
    assert "memory on the remote but not here" in report.stdout and "origin" in report.stdout

    gitmem(bob, "pull")
    assert "memory on the remote but not here" not in gitmem(bob, "doctor", "--remotes", check=False).stdout


def test_doctor_does_not_contact_the_remotes_unless_asked(alice, bob, tmp_path):
    gitmem(alice, "add", "fact", "only on the remote")
    gitmem(alice, "push")
    assert "memory on the remote but not here" not in gitmem(bob, "doctor", check=False).stdout
    git(bob, "remote", "set-url", "origin", str(tmp_path / "unreachable.git"))
    assert json.loads(gitmem(bob, "doctor", "--json").stdout)["ok"]  # no network step to fail


def _push_code_with_the_push_hook(clone, name="code.txt"):
    """A new code commit (file ``name``) and a plain `git push` of it, with gitmem's hooks and the pre-push hook in
    push mode."""
    gitmem(clone, "hooks", "install")
    git(clone, "config", "gitmem.prePush", "push")
    (clone / name).write_text("code\n")
    git(clone, "add", name)
    git(clone, "commit", "-q", "-m", f"add {name}")
    git(clone, "push", "-q", "origin", "main")


def test_the_pre_push_hook_in_push_mode_sends_the_branchs_memory_with_the_code(alice, origin):
    gitmem(alice, "add", "fact", "goes out with the code")
    _push_code_with_the_push_hook(alice)

    assert remote_tip(origin) == Store.open(str(alice)).own_tip()


def test_a_push_a_server_hook_declines_shows_what_the_server_said(alice, origin):
    """Branch protection or a policy hook on the server declines the push: its own words say why and what to do."""
    hook = origin / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'memory is frozen for the release, ask #ops' >&2\nexit 1\n")
    hook.chmod(0o755)
    gitmem(alice, "add", "fact", "clean")
    result = gitmem(alice, "push", check=False)
    assert result.returncode == 1 and "rejected" in result.stdout
    assert "origin said: memory is frozen for the release, ask #ops" in result.stdout


def test_a_secret_spelled_with_yaml_escapes_is_caught_at_push_and_redacted_when_pulled(alice, bob, origin):
    """A double-quoted YAML scalar can spell a token its bytes do not hold (``gh\\x70_...``, an escaped line
    break inside it): the memory gitmem loads holds the token all the same, so the scan reads it as loaded."""
    gitmem(alice, "add", "fact", "clean")
    gitmem(alice, "push")
    gitmem(bob, "pull")
    token = _github_token()
    spelled = token[:2] + "\\x70" + token[3:20] + "\\\n  " + token[20:]  # "p" escaped, then an escaped line break
    _plant(alice, "fact/b/b/01m92e2bbbbbbbbb.yaml",
           "schema: 1\nid: 01m92e2bbbbbbbbb\ntype: fact\nstatus: active\n"
           f'text: "deploy key {spelled}"\nauthor:\n  name: M\n  email: m@x.com\n  kind: human\n'
           "source: cli\ncreated: '2026-01-01T00:00:00Z'\n")
    assert Store.open(str(alice)).get("01m92e2bbbbbbbbb").text == f"deploy key {token}"  # what gitmem reads

    refused = gitmem(alice, "push", check=False)
    assert refused.returncode == 1 and "github-pat" in refused.stderr

    git(alice, "config", "core.hooksPath", "/dev/null")  # pushed with plain git, it arrives redacted all the same
    git(alice, "push", "-q", "origin", "refs/memory/main:refs/memory/main")
    assert "redacted 1 secret that arrived" in gitmem(bob, "pull").stderr
    assert token not in gitmem(bob, "list", "--json").stdout
    assert "deploy key [REDACTED:github-pat]" in gitmem(bob, "show", "01m92e2bbbbbbbbb").stdout


def _damaged_feature(alice, bob, damage):
    """bob has memory on main and on feature, both pushed; alice writes more on both; bob's feature memory ref is
    then damaged."""
    gitmem(bob, "add", "fact", "bob on main")
    git(bob, "checkout", "-q", "-b", "feature")
    gitmem(bob, "add", "fact", "bob on feature")
    git(bob, "checkout", "-q", "main")
    gitmem(bob, "push", "--all")
    gitmem(alice, "pull")
    gitmem(alice, "add", "fact", "alice on main")
    gitmem(alice, "--branch", "feature", "add", "fact", "alice on feature")
    gitmem(alice, "push", "--all")
    intact = git(bob, "rev-parse", "refs/memory/feature").strip()
    damage_ref(bob, "refs/memory/feature", damage)
    return intact


def _says_feature_is_damaged(r) -> None:
    lines = [line for line in r.stderr.splitlines() if "damaged" in line]
    assert r.returncode == 1 and "Traceback" not in r.stderr and len(lines) == 1, r.stderr
    assert "refs/memory/feature is damaged" in lines[0] and "`gitmem --branch feature doctor`" in lines[0], r.stderr
    assert "refused" not in r.stderr and "from origin" not in r.stderr  # the damage is this clone's, not origin's


@pytest.mark.parametrize("damage", DAMAGES)
def test_pull_names_a_local_branchs_damaged_memory_not_the_remote(alice, bob, damage):
    """A clone whose refs/memory/feature points at a missing object, a tree or a blob: `gitmem pull` said
    "refused refs/memory/main from origin: git refused its objects: bad object refs/memory/feature" (blaming the
    remote, nothing merged), or was libgit2's merge-base traceback. It names this clone's damaged ref and the
    doctor that repairs it, merges main where git can fetch at all, and after the doctor a pull brings the rest."""
    intact = _damaged_feature(alice, bob, damage)

    r = gitmem(bob, "pull", check=False)

    _says_feature_is_damaged(r)
    if damage != "a missing object":  # git fetches nothing while a local ref names a missing object
        assert "alice on main" in texts(bob)
    gitmem(bob, "--branch", "feature", "doctor", "--recover")
    assert git(bob, "rev-parse", "refs/memory/feature").strip() == intact
    gitmem(bob, "pull")
    assert {m.text for m in Store.open(str(bob), "feature").memories().values()} >= {"alice on feature"}
    assert "alice on main" in texts(bob)


@pytest.mark.parametrize("command", [["status"], ["init"]])
def test_status_and_init_name_a_local_branchs_damaged_memory(alice, bob, command):
    """Comparing each branch's memory with the remote's copy walked refs/memory/feature into libgit2's
    traceback when it pointed at a tree; it names that ref and its doctor."""
    _damaged_feature(alice, bob, "a tree")
    git(bob, "fetch", "-q", "origin", "+refs/memory/*:refs/memory-remotes/origin/*")

    _says_feature_is_damaged(gitmem(bob, *command, check=False))


@pytest.mark.parametrize("here,there", [("feature", "feature/billing"), ("feature/billing", "feature")])
def test_a_branch_whose_ref_clashes_with_a_local_one_waits_and_the_others_merge(alice, bob, here, there):
    """git keeps no ref that is also a folder of refs: bob's refs/memory/feature and origin's
    refs/memory/feature/billing (or the reverse) cannot both be here. The pull stopped at that branch with "could
    not create ...", main's memory never merged; now that branch waits, reported with what to do, and main merges."""
    git(alice, "branch", there)
    gitmem(alice, "--branch", there, "add", "fact", "theirs")
    gitmem(alice, "add", "fact", "main detail")
    gitmem(alice, "push", "--all")
    git(bob, "branch", here)
    gitmem(bob, "--branch", here, "add", "fact", "mine")

    r = gitmem(bob, "pull", "--json", check=False)

    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    pulled = json.loads(r.stdout)
    assert [(m["branch"], m["kind"]) for m in pulled["merged"]] == [("main", "new")]
    [waits] = pulled["blocked"]
    assert waits["branch"] == there and waits["ref"] == f"refs/memory-remotes/origin/{there}"
    assert f"refs/memory/{here} exists" in waits["why"] and "rename one of the two branches" in waits["why"]
    assert texts(bob) == {"main detail"}
    assert {m.text for m in Store.open(str(bob), here).memories().values()} == {"mine"}
    said = [line for line in gitmem(bob, "pull", check=False).stderr.splitlines() if "not merged" in line]
    assert len(said) == 1 and said[0].startswith(f"gitmem: {there}: not merged: could not create refs/memory/{there}")
    assert said[0].endswith("whose code is gone (`gitmem prune`), then `gitmem pull`")


def test_a_fetch_takes_a_new_branch_under_the_name_of_one_the_remote_deleted(alice, bob, origin):
    """origin deleted `feature`, then got `feature/billing`: bob's fetched copy of the old `feature` kept the new
    branch out ("refused ... could not record it: ... not a directory") until a second fetch had pruned it."""
    git(alice, "branch", "feature")
    gitmem(alice, "--branch", "feature", "add", "fact", "old feature")
    gitmem(alice, "push", "--all")
    gitmem(bob, "fetch")
    git(origin, "update-ref", "-d", "refs/memory/feature")
    git(alice, "update-ref", "-d", "refs/memory/feature")
    git(alice, "branch", "-D", "feature")
    git(alice, "branch", "feature/billing")
    gitmem(alice, "--branch", "feature/billing", "add", "fact", "billing")
    gitmem(alice, "push", "--all")

    fetched = json.loads(gitmem(bob, "fetch", "--json").stdout)

    assert fetched["refused"] == []
    assert {b["branch"]: bool(b["new"]) for b in fetched["branches"]} == {"feature": False, "feature/billing": True}


@pytest.mark.parametrize("here,there", [("feature", "feature/billing"), ("feature/billing", "feature")])
def test_a_push_whose_ref_clashes_with_one_on_the_remote_says_so_once_and_pushes_the_others(alice, bob, origin,
                                                                                             here, there):
    """The remote says only "failed to update ref" when bob's refs/memory/feature clashes with its
    refs/memory/feature/billing (or the reverse): taken for a lost race, the push retried 8 times and said "the
    remote kept moving for 8 attempts". Now it names the clash and what to do at once, and main goes out."""
    git(alice, "branch", there)
    gitmem(alice, "--branch", there, "add", "fact", "theirs")
    gitmem(alice, "push", "--all")
    git(bob, "branch", here)
    gitmem(bob, "--branch", here, "add", "fact", "mine")
    gitmem(bob, "add", "fact", "main detail")

    r = gitmem(bob, "push", "--all", "--json", check=False)

    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    pushed = {p["branch"]: p for p in json.loads(r.stdout)["branches"]}
    assert pushed["main"]["status"] == "pushed" and remote_tip(origin) == Store.open(str(bob)).own_tip()
    clash = pushed[here]
    assert clash["status"] == "rejected" and clash["attempts"] == 1
    assert clash["message"].startswith(f"could not create refs/memory/{here} on origin: refs/memory/{there} exists")
    assert "rename one of the two branches" in clash["message"] and "kept moving" not in clash["message"]
    assert git(origin, "for-each-ref", "--format=%(refname)", "refs/memory/").split() == \
        [f"refs/memory/{there}", "refs/memory/main"]
    text = gitmem(bob, "push", "--branch", here, check=False)
    assert text.returncode == 1
    assert text.stdout.startswith(f"{here}: rejected ") and text.stdout.count("\n") == 1
    assert f"refs/memory/{there} exists there" in text.stdout
