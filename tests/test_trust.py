"""What arrives from a remote, built with plain git plumbing against a bare remote, and what leaves on
a push. After each hostile case: local memory intact, `git fsck --strict` clean, no traceback, no
command slow, and one line names what was refused."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import git, gitmem, make_repo

from gitmem import Store

TIMEOUT = 60  # generous: a hostile payload must not make a command hang or take minutes
MALLORY = ("Mallory", "m@example.com")
KEPT = {"keep me", "and me", "me too"}


def run(cwd, *args, check=True) -> subprocess.CompletedProcess:
    """gitmem that must finish well within TIMEOUT, without a traceback."""
    result = gitmem(cwd, *args, check=check, timeout=TIMEOUT)
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    return result


@pytest.fixture(scope="module")
def team_template(tmp_path_factory) -> Path:
    """origin.git, mine and mallory as :func:`team` starts them, built once per module."""
    base = tmp_path_factory.mktemp("team")
    seed = make_repo(base / "seed")
    origin = base / "origin.git"
    git(base, "init", "-q", "--bare", "-b", "main", str(origin))
    git(seed, "push", "-q", str(origin), "main")
    mine = base / "mine"
    git(base, "clone", "-q", str(origin), "mine")
    for text in sorted(KEPT):
        gitmem(mine, "add", "fact", text)
    gitmem(mine, "push")
    mallory = base / "mallory"
    git(base, "clone", "-q", str(origin), "mallory")
    git(mallory, "fetch", "-q", "origin", "refs/memory/main:refs/memory/main")
    return base


@pytest.fixture
def team(team_template, tmp_path):
    """(mine, mallory, origin): two clones of a bare origin whose memory holds three memories; a copy of
    :func:`team_template` of this test's own, each clone's origin pointed at its copy."""
    for name in ("origin.git", "mine", "mallory"):
        shutil.copytree(team_template / name, tmp_path / name, symlinks=True)
    origin = tmp_path / "origin.git"
    for name in ("mine", "mallory"):
        git(tmp_path / name, "config", "remote.origin.url", str(origin))
    return tmp_path / "mine", tmp_path / "mallory", origin


def blob(repo: Path, data: str) -> str:
    return subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, capture_output=True, text=True,
                          check=True, input=data).stdout.strip()


def tree_with(repo: Path, base: str, entries) -> str:
    """The tree of commit ``base`` plus ``entries`` [(mode, oid, path)], through a scratch index."""
    env = {"GIT_INDEX_FILE": str(repo / ".git" / "scratch-index")}
    git(repo, "read-tree", base, env=env)
    for mode, oid, path in entries:
        git(repo, "update-index", "--add", "--cacheinfo", f"{mode},{oid},{path}", env=env)
    out = git(repo, "write-tree", env=env).strip()
    os.unlink(env["GIT_INDEX_FILE"])
    return out


def commit(repo: Path, tree: str, parent: str, message: str = "add fact: planted") -> str:
    return git(repo, "commit-tree", tree, "-p", parent, "-m", message).strip()


def plant(mallory: Path, entries, ref: str = "refs/memory/main", message: str = "add fact: planted") -> str:
    """Mallory pushes, with plain git, a commit on top of the shared memory adding ``entries``."""
    shared = git(mallory, "rev-parse", "refs/memory/main").strip()
    evil = commit(mallory, tree_with(mallory, shared, entries), shared, message)
    git(mallory, "push", "-q", "-f", "origin", f"{evil}:{ref}")
    return evil


def memory_yaml(memory_id: str, text: str = "planted", updated: str = "") -> str:
    return (f"schema: 1\nid: {memory_id}\ntype: fact\nstatus: active\ntext: {text}\n"
            "author:\n  name: Mallory\n  email: m@example.com\n  kind: human\nsource: cli\n"
            "created: '2026-12-01T00:00:00Z'\n" + (f"updated: '{updated}'\n" if updated else ""))


NEW_ID = "zzzzzzzzzzzzzzzz"
NEW_PATH = f"fact/z/z/{NEW_ID}.yaml"


def assert_intact(mine: Path) -> None:
    store = Store.open(str(mine))
    assert KEPT <= {m.text for m in store.list()}
    git(mine, "fsck", "--strict", "--no-dangling")
    run(mine, "status")
    run(mine, "conflicts")
    run(mine, "list")


def pull_refused(mine: Path, *needles: str) -> dict:
    """`gitmem pull` refuses: one stderr line per refusal naming it; JSON has it too."""
    before = git(mine, "rev-parse", "refs/memory/main").strip()
    human = run(mine, "pull", check=False)
    lines = [line for line in human.stderr.splitlines() if line.startswith("gitmem: refused")]
    assert lines, human.stderr
    assert "\x1b" not in human.stderr  # names from outside are escaped, never raw terminal sequences
    for needle in needles:
        assert any(needle in line for line in lines), (needle, human.stderr)
    data = json.loads(run(mine, "pull", "--json", check=False).stdout)
    assert data["refused"]
    assert git(mine, "rev-parse", "refs/memory/main").strip() == before  # nothing merged
    assert_intact(mine)
    return data


# --- deletions, future timestamps, planted conflicts ---------------------------------------------


def test_a_pulled_fast_forward_that_deletes_memory_is_merged_and_the_memory_kept(team):
    mine, mallory, origin = team
    shared = git(mallory, "rev-parse", "refs/memory/main").strip()
    # A hostile teammate: a commit on top of the shared tip whose tree holds one new memory only.
    b = blob(mallory, memory_yaml(NEW_ID))
    tree = git(mallory, "mktree", input=f"100644 blob {b}\t{NEW_ID}.yaml\n").strip()
    for name in ("z", "z"):
        tree = git(mallory, "mktree", input=f"040000 tree {tree}\t{name}\n").strip()
    tree = git(mallory, "mktree", input=f"040000 tree {tree}\tfact\n").strip()
    git(mallory, "push", "-q", "origin", f"{commit(mallory, tree, shared)}:refs/memory/main")

    result = run(mine, "pull", "--json")
    merged = json.loads(result.stdout)["merged"][0]

    assert merged["kind"] == "merge" and len(merged["kept"]) == 3
    assert {m.text for m in Store.open(str(mine)).list()} == KEPT | {"planted"}
    assert_intact(mine)


@pytest.mark.parametrize("broken", ["text: [unclosed\n", "text: no author, no dates\n"], ids=["yaml", "memory"])
def test_a_pulled_fast_forward_that_makes_a_known_memory_unreadable_is_merged_and_the_memory_kept(team, broken):
    """Overwriting a memory with a blob that is no valid memory takes it out of every list as surely as
    deleting it: the merge keeps the readable version, as it keeps a deleted one, and says so."""
    mine, mallory, origin = team
    victim = Store.open(str(mine)).list()[0]
    path = f"fact/{victim.id[-2]}/{victim.id[-1]}/{victim.id}.yaml"
    plant(mallory, [("100644", blob(mallory, f"schema: 1\nid: {victim.id}\ntype: fact\n{broken}"), path)],
          message="edit fact")

    result = run(mine, "pull", "--json")

    merged = json.loads(result.stdout)["merged"][0]
    assert merged["kind"] == "merge" and merged["kept"] == [victim.id]
    assert {m.text for m in Store.open(str(mine)).list()} == KEPT
    assert_intact(mine)


def _forged_from_the_future(mine):
    """A known memory of ``mine``, its path, and a forged version of it stamped as updated in 2099."""
    victim = Store.open(str(mine)).list()[0]
    path = f"fact/{victim.id[-2]}/{victim.id[-1]}/{victim.id}.yaml"
    forged = memory_yaml(victim.id, "forged", updated="2099-01-01T00:00:00Z").replace(
        "created: '2026-12-01T00:00:00Z'", f"created: '{victim.created}'")
    return victim, path, forged


@pytest.mark.parametrize("shape", ["on the shared tip", "on a history of its own"])
def test_an_incoming_version_of_a_known_memory_never_wins_by_a_timestamp_from_the_future(team, shape):
    mine, mallory, origin = team
    victim, path, forged = _forged_from_the_future(mine)
    shared = git(mallory, "rev-parse", "refs/memory/main").strip()
    tree = tree_with(mallory, shared, [("100644", blob(mallory, forged), path)])
    if shape == "on the shared tip":
        evil = commit(mallory, tree, shared, "edit fact")
    else:
        evil = git(mallory, "commit-tree", tree, "-m", "edit fact").strip()
    git(mallory, "push", "-q", "-f", "origin", f"{evil}:refs/memory/main")

    result = run(mine, "pull", "--json")

    merged = json.loads(result.stdout)["merged"][0]
    assert merged["kind"] == "merge" and victim.id in merged["conflicts"]
    assert Store.open(str(mine)).get(victim.id).text == victim.text
    conflicts = json.loads(run(mine, "conflicts", "--json").stdout)["conflicts"]
    assert [c["theirs"]["text"] for c in conflicts] == ["forged"]  # kept for a person to judge
    assert_intact(mine)


@pytest.mark.parametrize("take", ["ours", "theirs"])
def test_a_conflict_kept_over_a_timestamp_from_the_future_resolves_either_way(team, take):
    """Such a conflict names `updated` among its fields; a resolve stamps its own time, whichever side it takes."""
    mine, mallory, origin = team
    victim, path, forged = _forged_from_the_future(mine)
    plant(mallory, [("100644", blob(mallory, forged), path)], message="edit fact")
    run(mine, "pull")

    run(mine, "resolve", victim.id[-4:], f"--{take}")

    resolved = Store.open(str(mine)).get(victim.id)
    assert resolved.text == {"ours": victim.text, "theirs": "forged"}[take]
    assert resolved.updated and resolved.updated < "2099"
    assert json.loads(run(mine, "conflicts", "--json").stdout)["conflicts"] == []


@pytest.mark.parametrize("fields", [["id"], ["__class__"], []])
def test_a_planted_conflict_naming_no_real_memory_field_is_refused_at_pull(team, fields):
    mine, mallory, origin = team
    victim = Store.open(str(mine)).list()[0]
    plant(mallory, [("100644", blob(mallory, _conflict_yaml(victim, fields)), f"conflicts/{victim.id}.yaml")])

    pull_refused(mine, "refs/memory/main", "conflict")

    assert Store.open(str(mine)).get(victim.id).text == victim.text


@pytest.mark.parametrize("fields", [["id"], ["__class__"]])
def test_a_planted_conflict_already_in_local_history_is_refused_and_resolve_keeps_the_memory(team, fields):
    mine, mallory, origin = team
    victim = Store.open(str(mine)).list()[0]
    tip = git(mine, "rev-parse", "refs/memory/main").strip()
    tree = tree_with(mine, tip, [("100644", blob(mine, _conflict_yaml(victim, fields)),
                                  f"conflicts/{victim.id}.yaml")])
    git(mine, "update-ref", "refs/memory/main", commit(mine, tree, tip))  # past any gate: a hand edit

    listed = run(mine, "conflicts")
    resolved = run(mine, "resolve", victim.id, "--theirs", check=False)
    doctor = run(mine, "doctor", "--offline", check=False)

    assert f"refused conflicts/{victim.id}.yaml" in listed.stderr
    assert resolved.returncode == 1 and resolved.stderr.startswith("Error:")
    assert doctor.returncode == 1 and "conflict file refused" in doctor.stdout
    assert Store.open(str(mine)).get(victim.id).text == victim.text
    git(mine, "fsck", "--strict", "--no-dangling")


def test_a_planted_conflict_files_name_in_local_history_is_listed_inert(team):
    """A name from a tree is an outsider's: ``gitmem conflicts`` and ``doctor`` show its escapes, never act on them."""
    mine, _, _ = team
    tip = git(mine, "rev-parse", "refs/memory/main").strip()
    name = "conflicts/\x1b]0;owned\x07\u202eevil.yaml"
    git(mine, "update-ref", "refs/memory/main",
        commit(mine, tree_with(mine, tip, [("100644", blob(mine, "id: [\n"), name)]), tip))  # a hand edit

    listed = run(mine, "conflicts")
    doctor = run(mine, "doctor", "--offline", check=False)

    assert "refused conflicts/\\x1b]0;owned\\x07\\u202eevil.yaml" in listed.stderr
    assert not re.search("[\x1b\x07\u202e]", listed.stderr + listed.stdout + doctor.stdout + doctor.stderr)


def _conflict_yaml(victim, fields) -> str:
    import yaml

    theirs = {**victim.to_dict(), "text": "theirs"}
    return yaml.safe_dump({"id": victim.id, "type": "fact", "fields": fields, "base": None,
                           "ours": victim.to_dict(), "theirs": theirs})


BILLION_LAUGHS = ("id: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
                  + "".join(f"{n}: &{n} [{', '.join(['*' + p] * 9)}]\n" for p, n in zip("abcdefghi", "bcdefghij"))
                  + "fields: *j\nours: *j\ntheirs: *j\n")


def test_a_billion_laughs_conflict_file_is_refused_at_pull(team):
    mine, mallory, origin = team
    assert len(BILLION_LAUGHS) < 1000
    victim = Store.open(str(mine)).list()[0]
    plant(mallory, [("100644", blob(mallory, BILLION_LAUGHS), f"conflicts/{victim.id}.yaml")])

    pull_refused(mine, "anchors or aliases")


def test_a_billion_laughs_conflict_file_in_local_history_is_not_expanded(team):
    mine, mallory, origin = team
    victim = Store.open(str(mine)).list()[0]
    tip = git(mine, "rev-parse", "refs/memory/main").strip()
    tree = tree_with(mine, tip, [("100644", blob(mine, BILLION_LAUGHS), f"conflicts/{victim.id}.yaml")])
    git(mine, "update-ref", "refs/memory/main", commit(mine, tree, tip))

    listed = run(mine, "conflicts", "--json")

    assert json.loads(listed.stdout)["refused"][0]["path"] == f"conflicts/{victim.id}.yaml"
    assert "refused" in listed.stderr and "aliases" in listed.stderr
    run(mine, "status")
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from gitmem.web import create_app

    page = TestClient(create_app(str(mine)), base_url="http://127.0.0.1").get("/branches")
    assert page.status_code == 200  # the branches page reads conflicts with the same limits


# --- tree shape ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode,path,why", [
    ("120000", NEW_PATH, "symlink"),
    ("160000", NEW_PATH, "submodule"),
    ("100644", "README.md", "unknown top-level entry"),
    ("100644", "\x1b[2J\x1b]0;pwned\x07.md", "unknown top-level entry"),
    ("100644", f"fact/z/{NEW_ID}.yaml", "layout"),
    ("100644", f"fact/a/b/{NEW_ID}.yaml", "wrong folder"),
    ("100755", NEW_PATH, "plain file"),
])
def test_a_tree_that_is_not_gitmems_layout_stays_out(team, mode, path, why):
    mine, mallory, origin = team
    oid = (git(mallory, "rev-parse", "HEAD").strip() if mode == "160000"
           else blob(mallory, "../../../../etc/passwd" if mode == "120000" else memory_yaml(NEW_ID)))
    plant(mallory, [(mode, oid, path)])

    data = pull_refused(mine, why)

    assert data["refused"][0]["what"] == "refs/memory/main"
    assert not git(mine, "for-each-ref", "refs/gitmem-incoming/").strip()
    tracking = git(mine, "rev-parse", "refs/memory-remotes/origin/main").strip()
    assert tracking == git(mine, "rev-parse", "refs/memory/main").strip()  # the refused tip is not recorded


def test_an_oversized_memory_blob_stays_out(team):
    mine, mallory, origin = team
    plant(mallory, [("100644", blob(mallory, memory_yaml(NEW_ID, "x" * 70_000)), NEW_PATH)])

    pull_refused(mine, "byte limit")


def test_a_branch_an_oversized_blob_blocks_is_unblocked_by_the_command_the_refusal_names(team):
    """A blob over the size cap, pushed with plain git (or another client), refuses every teammate's pull and
    push of the branch for as long as the remote's ref holds it, and nothing of gitmem's moves that ref back
    (a push is never forced; the pre-push hook refuses a plain forced one). The refusal names the command
    that does; after it, pull and push work again and the oversized blob is in none of the remote's history."""
    mine, mallory, origin = team
    shared = git(mallory, "rev-parse", "refs/memory/main").strip()
    evil = plant(mallory, [("100644", blob(mallory, memory_yaml(NEW_ID, "x" * 70_000)), NEW_PATH)])
    gitmem(mine, "hooks", "install")
    gitmem(mine, "add", "fact", "written while blocked")

    pulled = run(mine, "pull", check=False)
    pushed = run(mine, "push", check=False)

    assert pulled.returncode == pushed.returncode == 1
    commands = []
    for said in (pulled.stderr, pushed.stderr):
        assert "byte limit" in said
        commands += re.findall(r"`(git push --no-verify [^`]*)`", said)
    assert len(commands) == 2 and commands[0] == commands[1], (pulled.stderr, pushed.stderr)
    subprocess.run(shlex.split(commands[0]), cwd=mine, check=True, capture_output=True)

    assert run(mine, "push").returncode == 0
    assert run(mine, "pull").returncode == 0
    git(origin, "merge-base", "--is-ancestor", shared, "refs/memory/main")  # what was there before stays
    assert evil not in git(origin, "rev-list", "refs/memory/main")
    assert "written while blocked" in {m.text for m in Store.open(str(mine)).list()}
    assert_intact(mine)


def test_a_memory_blob_with_yaml_anchors_or_aliases_stays_out(team):
    mine, mallory, origin = team
    planted = memory_yaml(NEW_ID, "&t planted").replace("source: cli\n", "source: cli\ntitle: *t\n")
    plant(mallory, [("100644", blob(mallory, planted), NEW_PATH)])

    pull_refused(mine, "anchors or aliases")


def test_a_commit_below_a_clean_tip_is_checked_too(team):
    """Every new commit is gitmem's layout, not only the tip: a symlink added and removed again stays out."""
    mine, mallory, origin = team
    shared = git(mallory, "rev-parse", "refs/memory/main").strip()
    evil = commit(mallory, tree_with(mallory, shared, [("120000", blob(mallory, "/etc/passwd"), NEW_PATH)]), shared)
    clean = commit(mallory, git(mallory, "rev-parse", f"{shared}^{{tree}}").strip(), evil, "add fact: tidy")
    git(mallory, "push", "-q", "-f", "origin", f"{clean}:refs/memory/main")

    pull_refused(mine, "symlink")
    assert evil not in git(mine, "rev-list", "--all")  # the refused commit is in no local ref's history


def test_a_refused_tip_brought_in_by_plain_git_fetch_is_not_merged(team):
    mine, mallory, origin = team
    plant(mallory, [("120000", blob(mallory, "/etc/passwd"), NEW_PATH)])
    git(mine, "fetch", "-q", "origin", "+refs/memory/*:refs/memory-remotes/origin/*")  # no gate on this path

    pull_refused(mine, "symlink")


def test_a_refused_tip_is_not_recorded_where_remote_setup_maps_memory_refs_too(team):
    """`remote setup`'s fetch refspec would let git update the tracking ref opportunistically beside the
    quarantine ref the gate fetches into: the refused tip must not land there by that side door."""
    mine, mallory, origin = team
    run(mine, "remote", "setup")
    recorded = git(mine, "rev-parse", "refs/memory-remotes/origin/main").strip()
    evil = plant(mallory, [("120000", blob(mallory, "/etc/passwd"), NEW_PATH)])

    pull_refused(mine, "symlink")
    assert git(mine, "rev-parse", "refs/memory-remotes/origin/main").strip() == recorded
    assert evil not in git(mine, "rev-list", "--all")
    fetched = json.loads(run(mine, "fetch", "--json", check=False).stdout)
    assert [b["new"] for b in fetched["branches"] if b["branch"] == "main"] == [recorded]


# --- ref names -------------------------------------------------------------------------------------


def test_bad_remote_ref_names_are_skipped_one_by_one_and_the_rest_merge(team):
    mine, mallory, origin = team
    good = plant(mallory, [("100644", blob(mallory, memory_yaml(NEW_ID)), NEW_PATH)])
    long_name = "a" * 200 + "/" + "b" * 100
    for name in ("HEAD", "-rf", long_name, os.fsdecode(b"b\xff")):  # the last: git allows it, but not UTF-8
        git(origin, "update-ref", f"refs/memory/{name}", good)

    human = run(mine, "pull", check=False)
    fetched = run(mine, "fetch", "--json", check=False)
    data = json.loads(fetched.stdout)
    assert human.returncode == fetched.returncode == 1  # a script must not take a partial fetch for the whole
    synced = run(mine, "sync", "--json", check=False)
    assert synced.returncode == 1 and len(json.loads(synced.stdout)["refused"]) == 4

    refused = [line for line in human.stderr.splitlines() if line.startswith("gitmem: refused")]
    assert len(refused) == 4 and all("skipped" in line for line in refused)
    assert any("refs/memory/HEAD" in line for line in refused) and any("-rf" in line for line in refused)
    assert any("301 characters" in line for line in refused)
    assert any("refs/memory/b\\udcff from origin" in line for line in refused)  # named in one line, escaped
    assert {r["what"][:16] for r in data["refused"]} == {"refs/memory/HEAD", "refs/memory/-rf", "refs/memory/aaaa",
                                                         "refs/memory/b\\ud"}
    assert {m.text for m in Store.open(str(mine)).list()} == KEPT | {"planted"}
    assert_intact(mine)


def test_a_remote_branch_named_with_a_terminal_control_or_a_bidi_override_is_skipped(team):
    """git allows both in a ref name; pull, fetch, status and the branch list printed them as they are: a CSI
    (U+009B) drives a terminal, a right-to-left override makes ``x<RLO>gnp.exe`` read as ``xexe.png``."""
    mine, mallory, origin = team
    good = plant(mallory, [("100644", blob(mallory, memory_yaml(NEW_ID)), NEW_PATH)])
    for name in ("ev\u009b2Jil", "x\u202egnp.exe"):
        git(origin, "update-ref", f"refs/memory/{name}", good)

    human = run(mine, "pull", check=False)
    assert human.returncode == 1
    refused = [line for line in human.stderr.splitlines() if line.startswith("gitmem: refused")]
    assert len(refused) == 2 and all("control or text-reordering" in line for line in refused)
    for shown in (human.stdout, human.stderr, run(mine, "branch").stdout, run(mine, "status").stdout):
        assert "\u009b" not in shown and "\u202e" not in shown
    assert git(mine, "for-each-ref", "--format=%(refname)", "refs/memory/").split() == ["refs/memory/main"]
    assert {m.text for m in Store.open(str(mine)).list()} == KEPT | {"planted"}


# --- git's own object checks -----------------------------------------------------------------------


def _literally(repo: Path, kind: str, data: bytes) -> str:
    return subprocess.run(["git", "hash-object", "-t", kind, "-w", "--literally", "--stdin"], cwd=repo,
                          capture_output=True, check=True, input=data).stdout.decode().strip()


@pytest.mark.parametrize("flaw", ["a commit with a bad date", "a zero-padded file mode (an error only with --strict)"])
def test_objects_that_fail_git_fsck_strict_stay_out_and_the_other_branches_arrive(team, flaw):
    mine, mallory, origin = team
    shared = git(mallory, "rev-parse", "refs/memory/main").strip()
    tree = git(mallory, "rev-parse", f"{shared}^{{tree}}").strip()
    date = "1700000000 +0000"
    if flaw.startswith("a commit"):
        date = "not-a-date +0000"
    else:
        inner = _literally(mallory, "tree", b"0100644 " + f"{NEW_ID}.yaml".encode() + b"\0"
                           + bytes.fromhex(blob(mallory, memory_yaml(NEW_ID))))
        for name in ("z", "z", "fact"):
            inner = git(mallory, "mktree", input=f"040000 tree {inner}\t{name}\n").strip()
        tree = inner
    broken = (f"tree {tree}\nparent {shared}\nauthor Mallory <m@example.com> {date}\n"
              "committer Mallory <m@example.com> 1700000000 +0000\n\nadd fact: broken\n")
    bad = _literally(mallory, "commit", broken.encode())
    git(mallory, "push", "-q", "-f", "origin", f"{bad}:refs/memory/main")
    plant(mallory, [("100644", blob(mallory, memory_yaml(NEW_ID)), NEW_PATH)], ref="refs/memory/feature")

    human = run(mine, "pull", "--branch", "main", "--branch", "feature", check=False)

    refused = [line for line in human.stderr.splitlines() if line.startswith("gitmem: refused")]
    assert human.returncode == 1 and len(refused) == 1
    assert "refs/memory/main" in refused[0] and "git refused its objects" in refused[0]
    assert "planted" in {m.text for m in Store.open(str(mine), "feature").list()}
    assert git(mine, "rev-parse", "refs/memory/main").strip() == shared
    assert_intact(mine)


# --- doctor ----------------------------------------------------------------------------------------


def test_a_submodule_entry_in_local_memory_is_reported_and_recover_does_not_rewind(team):
    mine, mallory, origin = team
    tip = git(mine, "rev-parse", "refs/memory/main").strip()
    foreign = "5eb" * 13 + "5"  # a submodule names a commit of another repository: not an object here
    planted = commit(mine, tree_with(mine, tip, [("160000", foreign, NEW_PATH)]), tip)
    git(mine, "update-ref", "refs/memory/main", planted)

    doctor = run(mine, "doctor", "--offline", check=False)
    recover = run(mine, "doctor", "--offline", "--recover", check=False)

    assert doctor.returncode == 1 and "submodule entry" in doctor.stdout and "--recover" not in doctor.stdout
    assert recover.returncode == 1 and "nothing to recover" in recover.stderr
    assert git(mine, "rev-parse", "refs/memory/main").strip() == planted  # no rewind
    assert KEPT <= {m.text for m in Store.open(str(mine)).list()}
    git(mine, "fsck", "--strict", "--no-dangling")


# --- what leaves: the pre-push scan and gitmem push -------------------------------------------------


def _token() -> str:
    from gitmem.redact import RULES

    return next(r for r in RULES if r.id == "github-pat").true_samples[0]


def _has(origin: Path, oid: str) -> bool:
    return subprocess.run(["git", "cat-file", "-e", oid], cwd=origin, capture_output=True).returncode == 0


def _secret_commit(mine: Path, hidden: str) -> str:
    """A local commit on top of the memory tip with a secret in place ``hidden``, on no memory ref (only
    the one a test asks for: each costs a dozen git processes)."""
    token = _token()
    tip = git(mine, "rev-parse", "refs/memory/main").strip()

    def on_tip(entries, message: str = "add fact: planted") -> str:
        return commit(mine, tree_with(mine, tip, entries), tip, message)

    def with_identity(role: str) -> str:
        tree = tree_with(mine, tip, [("100644", blob(mine, memory_yaml(NEW_ID)), NEW_PATH)])
        return git(mine, "commit-tree", tree, "-p", tip, "-m", "add fact", env={f"GIT_{role}_NAME": token}).strip()

    def utf16() -> str:
        oid = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=mine, capture_output=True, check=True,
                             input=f"text: {token}\n".encode("utf-16")).stdout.decode().strip()
        return on_tip([("100644", oid, NEW_PATH)])

    build = {
        "blob text": lambda: on_tip([("100644", blob(mine, memory_yaml(NEW_ID, token)), NEW_PATH)]),
        "tree entry name": lambda: on_tip([("100644", blob(mine, memory_yaml(NEW_ID)), f"note/z/z/{token}.yaml")]),
        "commit message": lambda: on_tip([("100644", blob(mine, memory_yaml(NEW_ID)), NEW_PATH)], f"add {token}"),
        "entry name and text": lambda: on_tip([("100644", blob(mine, memory_yaml(NEW_ID, token)),
                                                f"note/z/z/{token}.yaml")]),
        "UTF-16 text": utf16,
        "author identity": lambda: with_identity("AUTHOR"),
        "committer identity": lambda: with_identity("COMMITTER"),
    }
    return build[hidden]()


def _hooked(mine: Path) -> Path:
    gitmem(mine, "hooks", "install")
    return mine


@pytest.mark.parametrize("hidden", ["blob text", "tree entry name", "commit message", "UTF-16 text",
                                    "author identity", "committer identity"])
@pytest.mark.parametrize("route", ["<sha>:refs/memory/main", "refs/heads/x:refs/memory/main"])
def test_plain_git_push_to_a_memory_ref_is_scanned_by_destination_and_refused_before_it_leaves(team, hidden,
                                                                                            route):
    mine, mallory, origin = team
    sha = _secret_commit(_hooked(mine), hidden)
    if route.startswith("refs/heads/x"):
        git(mine, "update-ref", "refs/heads/x", sha)
    spec = route.replace("<sha>", sha)

    result = subprocess.run(["git", "push", "origin", spec], cwd=mine, capture_output=True, text=True,
                            timeout=TIMEOUT)

    assert result.returncode != 0 and "push refused" in result.stderr and "github-pat" in result.stderr
    assert _token() not in result.stderr and "Traceback" not in result.stderr
    assert not _has(origin, sha)


@pytest.mark.parametrize("kind", ["blob", "annotated tag", "annotated tag with a secret",
                                  "annotated tag with a secret tagger"])
def test_plain_git_push_of_a_memory_ref_that_is_not_a_commit_fails_closed(team, kind):
    mine, mallory, origin = team
    _hooked(mine)
    tip = git(mine, "rev-parse", "refs/memory/main").strip()
    if kind == "blob":
        oid = blob(mine, "just a blob\n")
    else:
        message = f"release {_token()}" if kind.endswith("a secret") else "release"
        tagger = {"GIT_COMMITTER_NAME": f"ci {_token()}"} if kind.endswith("tagger") else {}
        git(mine, "tag", "-a", "t", tip, "-m", message, env=tagger)
        oid = git(mine, "rev-parse", "refs/tags/t").strip()

    result = subprocess.run(["git", "push", "origin", f"{oid}:refs/memory/main"], cwd=mine, capture_output=True,
                            text=True, timeout=TIMEOUT)

    assert result.returncode != 0 and "push refused" in result.stderr and "Traceback" not in result.stderr
    assert ("github-pat" in result.stderr) == ("secret" in kind)
    assert not _has(origin, oid)


@pytest.mark.parametrize("hidden", ["blob text", "tree entry name", "commit message", "UTF-16 text",
                                    "author identity", "committer identity", "entry name and text"])
def test_gitmem_push_scans_every_outgoing_object_and_refuses_before_it_leaves(team, hidden):
    mine, mallory, origin = team
    sha = _secret_commit(mine, hidden)
    git(mine, "update-ref", "refs/memory/main", sha)

    result = run(mine, "push", check=False)

    assert result.returncode == 1 and "github-pat" in result.stderr and _token() not in result.stderr
    assert not _has(origin, sha)


@pytest.mark.parametrize("kind", ["blob", "annotated tag"])
def test_gitmem_push_of_a_memory_ref_that_is_not_a_commit_is_refused(team, kind):
    mine, mallory, origin = team
    tip = git(mine, "rev-parse", "refs/memory/main").strip()
    if kind == "blob":
        oid = blob(mine, "just a blob\n")
    else:
        git(mine, "tag", "-a", "t", tip, "-m", "release")
        oid = git(mine, "rev-parse", "refs/tags/t").strip()
    git(mine, "update-ref", "refs/memory/main", oid)

    result = run(mine, "push", check=False)

    assert result.returncode == 1 and result.stderr.startswith("Error:") and "not a memory commit" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not _has(origin, oid)


# --- a dead writer's lock ---------------------------------------------------------------------------


@pytest.mark.parametrize("age", [120, 0], ids=["old", "just left"])
def test_a_writer_takes_over_a_lock_a_dead_writer_left_by_the_rule_doctor_fix_uses(team, age, monkeypatch):
    import time

    from gitmem import refs

    monkeypatch.setattr(refs, "STALE_LOCK_SECONDS", 1.0)  # the same rule, a shorter wait (the CLI runs in-process)
    mine, mallory, origin = team
    lock = mine / ".git" / "refs" / "memory" / "main.lock"
    lock.write_text("")  # what a writer killed between taking the lock and renaming it leaves
    os.utime(lock, (time.time() - age, time.time() - age))

    started = time.monotonic()
    added = run(mine, "add", "fact", "written after the crash", "--json")

    assert time.monotonic() - started < TIMEOUT
    assert not lock.exists() and not list(lock.parent.glob("main.lock*"))
    assert json.loads(added.stdout)["id"] in {m.id for m in Store.open(str(mine)).list()}
    assert_intact(mine)


def test_a_fresh_lock_taken_while_a_stale_one_is_cleared_is_given_back(team, monkeypatch):
    """The stale lock is moved aside, then checked to be the file that was judged: a live writer that took
    the lock in between (the old file gone, its own new one at the name) keeps its lock."""
    import time

    from gitmem import refs

    mine, mallory, origin = team
    lock = mine / ".git" / "refs" / "memory" / "main.lock"
    lock.write_text("")
    os.utime(lock, (time.time() - 120, time.time() - 120))  # left by a dead writer: stale
    rename = os.rename

    def a_writer_takes_the_lock_first(src, dst):
        if str(src) == str(lock):
            lock.unlink()  # the stale file goes, and a live writer's fresh lock takes its name
            lock.write_text("fresh\n")
        return rename(src, dst)

    monkeypatch.setattr(refs.os, "rename", a_writer_takes_the_lock_first)
    repo = Store.open(str(mine)).repo
    with pytest.raises(refs.RefLocked):
        refs.clear_stale_lock(repo, "refs/memory/main")

    assert lock.read_text() == "fresh\n"  # given back, whole, at its name
    assert [p.name for p in lock.parent.glob("main.lock*")] == ["main.lock"]  # nothing left aside


def test_merging_a_fetched_copy_that_plain_git_brought_in_goes_through_the_gate(team):
    mine, mallory, origin = team
    plant(mallory, [("120000", blob(mallory, "/etc/passwd"), NEW_PATH)], ref="refs/memory/feature")
    git(mine, "fetch", "-q", "origin", "+refs/memory/*:refs/memory-remotes/origin/*")  # no gate on this path
    before = git(mine, "rev-parse", "refs/memory/main").strip()

    result = run(mine, "merge", "feature", check=False)

    assert result.returncode == 1 and result.stderr.startswith("Error: refused to merge")
    assert "symlink" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert git(mine, "rev-parse", "refs/memory/main").strip() == before
    assert_intact(mine)


def test_printable_escapes_what_a_terminal_would_act_on_and_leaves_printable_text_as_it_is():
    """Printable text is returned unread a character at a time (export quotes 150,000 pieces at 100,000
    memories): the answer is the per-character escape's, for printable text and for text with escapes."""
    from gitmem.trust import printable

    def escaped(text, limit=400):
        text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
        return text if len(text) <= limit else text[:limit - 3] + "..."

    for text in ("plain words", "caf\u00e9 \u2014 \u65e5\u672c", "", "x" * 500, "a\nb", "\x1b[31mred", "tab\there",
                 "\u200bzero width", "\x00" * 200):
        assert printable(text) == escaped(text)
        assert printable(text, limit=10) == escaped(text, limit=10)
