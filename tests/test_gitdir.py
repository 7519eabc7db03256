"""gitmem.gitdir answers what git answers, or says it cannot (Unsure), on real repositories; a warm read
through the command line answers from it without loading libgit2; and the repository opened is the one
git's environment names (GIT_DIR, GIT_WORK_TREE), as git would open it."""

from __future__ import annotations

import json
import os

import pygit2
import pytest

from conftest import git, gitmem, gitmem_process, make_repo
from gitmem import Store
from gitmem import gitdir
from gitmem.gitdir import Unsure
from gitmem.warm import forget_warm


def test_discover_finds_the_repository_from_a_subfolder_and_a_linked_worktree(repo, tmp_path):
    (repo / "src" / "deep").mkdir(parents=True)
    found = gitdir.discover(str(repo / "src" / "deep"))
    assert (found.workdir, found.path, found.common) == (str(repo), str(repo / ".git"), str(repo / ".git"))

    git(repo, "worktree", "add", "-q", "-b", "side", str(tmp_path / "wt"))
    linked = gitdir.discover(str(tmp_path / "wt"))
    assert linked.workdir == str(tmp_path / "wt")
    assert linked.common == str(repo / ".git")
    assert linked.path == pygit2.Repository(str(tmp_path / "wt")).path.rstrip("/")
    assert gitdir.head_branch(linked) == "side" and gitdir.head_branch(found) == "main"


def test_discover_leaves_relocated_missing_and_bare_repositories_to_libgit2(repo, tmp_path, monkeypatch):
    with pytest.raises(Unsure):
        gitdir.discover(str(repo / "no-such-folder"))  # not the enclosing repository
    git(tmp_path, "init", "-q", "--bare", "bare.git")
    with pytest.raises(Unsure):
        gitdir.discover(str(tmp_path / "bare.git"))
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))
    with pytest.raises(Unsure):
        gitdir.discover(str(repo))


def test_git_dir_names_the_repository_written_to_as_git_reads_it(tmp_path):
    """GIT_DIR is the git directory, with no search; relative, it is read from where the command runs (after
    -C, as git does); the work tree is then the current directory."""
    alice, bob = make_repo(tmp_path / "alice"), make_repo(tmp_path / "bob")
    gitmem(bob, "add", "fact", "Written for alice", env={"GIT_DIR": str(alice / ".git")})
    assert git(bob, "for-each-ref", "refs/memory/") == ""
    assert [m.text for m in Store.open(str(alice)).memories().values()] == ["Written for alice"]

    assert "Written for alice" in gitmem(tmp_path, "list", env={"GIT_DIR": "alice/.git"}).stdout  # outside any repo
    assert "Written for alice" in gitmem(tmp_path, "-C", "alice", "list", env={"GIT_DIR": ".git"}).stdout
    init = json.loads(gitmem(bob, "init", "--json", env={"GIT_DIR": "../alice/.git"}).stdout)
    assert (init["tip"], init["repository"]) == (git(alice, "rev-parse", "refs/memory/main").strip(), f"{bob}/")


def test_git_work_tree_is_where_a_path_given_from_a_subfolder_is_read_against(tmp_path):
    alice = make_repo(tmp_path / "alice")
    (alice / "src").mkdir()
    env = {"GIT_DIR": str(alice / ".git"), "GIT_WORK_TREE": ".."}
    added = json.loads(gitmem(alice / "src", "add", "fact", "Parses lazily", "--path", "app.py", "--json",
                              env=env).stdout)
    assert added["memory"]["paths"] == ["src/app.py"]


@pytest.mark.parametrize("named", ["missing/.git", "alice"])
def test_a_git_dir_that_is_no_git_directory_is_refused_in_one_line(tmp_path, named):
    make_repo(tmp_path / "alice")
    result = gitmem(tmp_path / "alice", "list", check=False, env={"GIT_DIR": str(tmp_path / named)})
    assert (result.returncode, result.stderr) == (1, f"Error: not a git repository: {tmp_path / named} (GIT_DIR)\n")


def test_a_git_common_dir_libgit2_would_not_read_is_refused_rather_than_ignored(tmp_path):
    alice, bob = make_repo(tmp_path / "alice"), make_repo(tmp_path / "bob")
    env = {"GIT_DIR": str(alice / ".git"), "GIT_COMMON_DIR": str(bob / ".git")}
    result = gitmem(alice, "add", "fact", "x", check=False, env=env)
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"Error: GIT_COMMON_DIR={bob / '.git'} is not supported")
    assert git(alice, "for-each-ref", "refs/memory/") == git(bob, "for-each-ref", "refs/memory/") == ""


def test_head_detached_is_left_to_libgit2(repo):
    git(repo, "checkout", "-q", "--detach")
    with pytest.raises(Unsure):
        gitdir.head_branch(gitdir.discover(str(repo)))


def test_refs_and_trees_agree_with_libgit2_loose_and_packed(store, repo):
    store.add("decision", "Use pygit2, not subprocess")
    found = gitdir.discover(str(repo))
    tip = str(store.repo.references["refs/memory/main"].target)
    assert gitdir.ref(found, "refs/memory/main") == tip
    assert gitdir.ref(found, "refs/memory/absent") is None
    assert gitdir.tree_of(found, tip) == str(store.repo[tip].peel(pygit2.Tree).id)

    git(repo, "symbolic-ref", "refs/memory/alias", "refs/memory/main")
    with pytest.raises(Unsure):
        gitdir.ref(found, "refs/memory/alias")

    git(repo, "gc", "-q", "--prune=now")  # refs into packed-refs, objects into a pack
    assert not (repo / ".git" / "refs" / "memory" / "main").exists()
    assert gitdir.ref(found, "refs/memory/main") == tip
    with pytest.raises(Unsure):
        gitdir.tree_of(found, tip)  # packed: the index or libgit2 answers


@pytest.mark.parametrize("name", ["main", "feature/x-1", "a.b", "a..b", "a.lock", "x/.y", "-x", "a b", "a~1",
                                  "a@{1}", "é", "a/", "a//b", "trailing.", "_under", "x" * 300])
def test_a_ref_name_judged_plain_is_one_libgit2_accepts(name):
    full = f"refs/memory/{name}"
    if gitdir.plain_ref_name(full):
        assert pygit2.reference_is_valid_name(full)


def test_a_store_opened_by_path_reads_without_libgit2_until_a_read_needs_git(store, repo):
    w = store.add("convention", "Tabs, never spaces")
    Store.open(str(repo)).newest(5)  # the first read after a write reads the new trees from git
    forget_warm()  # as a new process
    light = Store.open(str(repo))
    assert light._repo is None
    assert light.tip() == w.commit
    assert light.summary()["counts"] == {"convention/active": 1}
    assert [m.id for m in light.newest(5)] == [w.memory.id]
    assert light._repo is None  # all of it from the loose commit, the index and gitdir
    assert light.get(w.memory.id).text == "Tabs, never spaces"


def _loads_libgit2(repo, *args) -> bool:
    result = gitmem_process(repo, *args, env={"PYTHONPROFILEIMPORTTIME": "1"})
    return "pygit2._pygit2" in result.stderr


def test_warm_list_and_status_do_not_load_libgit2_even_after_gc(tmp_path):
    repo = make_repo(tmp_path / "r")
    gitmem_process(repo, "add", "decision", "Use SQLite for the derived index", "--because", "FTS5")
    assert _loads_libgit2(repo, "add", "fact", "Deploys run on Fridays")  # a write needs libgit2
    first = gitmem_process(repo, "list", "-n", "5").stdout
    assert "Use SQLite" in first and "Fridays" in first
    assert not _loads_libgit2(repo, "list", "-n", "5")
    assert not _loads_libgit2(repo, "status")

    git(repo, "gc", "-q", "--prune=now")  # the tip commit is now in a pack
    assert gitmem_process(repo, "list", "-n", "5").stdout == first  # libgit2 reads it, the index keeps its tree
    assert not _loads_libgit2(repo, "list", "-n", "5")
    assert gitmem_process(repo, "list", "-n", "5").stdout == first


def test_a_move_of_memory_gitmem_did_not_make_is_seen_from_the_reflog_s_last_line(store, repo):
    """status asks libgit2 whether a move it did not make dropped memory (refs.dropped_writes) only when the
    tip gitmem last wrote, as the memory ref's reflog says, is not its tip: a warm status after gitmem's writes
    reads one line of it, and memory gitmem never wrote (seeded by other tools) needs no libgit2 either."""
    found = gitdir.discover(str(repo))
    first = store.add("fact", "first").commit
    store.add("fact", "second")
    assert not gitdir.may_be_dropped(found, store.ref)
    assert not gitdir.may_be_dropped(found, "refs/memory/never-written")  # no reflog
    git(repo, "update-ref", "-m", "fetch: forced-update", store.ref, first)  # as a forced `git fetch` moves it
    assert gitdir.may_be_dropped(found, store.ref)
    store.add("fact", "third")  # gitmem's own move is the newest again
    assert not gitdir.may_be_dropped(found, store.ref)
    git(repo, "update-ref", "--create-reflog", "-m", "seeded", "refs/memory/seeded", first)
    assert not gitdir.may_be_dropped(found, "refs/memory/seeded")  # gitmem wrote nothing there to drop


def test_memory_set_aside_is_seen_loose_packed_and_where_an_earlier_gitmem_kept_it(store, repo):
    """status names memory set aside here with no remote configured too: gitdir says when there can be none, so
    a warm status still need not load libgit2, and never misses one."""
    tip = store.add("fact", "spike fact").commit
    found = gitdir.discover(str(repo))
    git(repo, "update-ref", "refs/memory/wip", tip)
    assert not gitdir.may_hold_aside(found)
    for ref in ("refs/memory-aside/wip.earlier-0123abcd", "refs/memory/team/wip.earlier-0123abcd"):  # now, before
        git(repo, "update-ref", ref, tip)
        assert gitdir.may_hold_aside(found)
        git(repo, "pack-refs", "--all")
        assert not (repo / ".git" / ref).exists() and gitdir.may_hold_aside(found)
        git(repo, "update-ref", "-d", ref)
        assert not gitdir.may_hold_aside(found)


def test_status_with_a_remote_still_reports_divergence(tmp_path):
    from conftest import clone, make_origin

    mine = clone(make_origin(tmp_path), tmp_path / "mine", "Ann")
    gitmem_process(mine, "add", "fact", "Ledger writes are idempotent")
    gitmem_process(mine, "push")
    gitmem_process(mine, "add", "fact", "Retries back off exponentially")
    import json

    remotes = json.loads(gitmem_process(mine, "status", "--json").stdout)["remotes"]
    assert [(r["remote"], r["branch"], r["ahead"], r["behind"]) for r in remotes] == [("origin", "main", 1, 0)]


@pytest.mark.parametrize("key,value", [
    ("gitmem.guide", "docs/agents.md"),
    ("gitmem.branch.main.contextAnchor", "0123456789abcdef0123456789abcdef01234567"),
    ("gitmem.branch.Feature/X.contextAnchor", "abc"),
    ("gitmem.prices", "prices with spaces.yaml"),
])
def test_config_reads_what_git_config_wrote(repo, key, value):
    found = gitdir.discover(str(repo))
    assert gitdir.config(found, key) is None
    git(repo, "config", key, value)
    assert gitdir.config(found, key) == git(repo, "config", "--get", key).strip() == value
    git(repo, "config", "--add", key, value + "2")  # the last of several wins, as `git config --get` reads it
    assert gitdir.config(found, key) == value + "2"


def test_config_reads_the_global_file_under_the_repositorys(repo):
    found = gitdir.discover(str(repo))
    git(repo, "config", "--global", "gitmem.prices", "/global/prices.yaml")
    try:
        assert gitdir.config(found, "gitmem.prices") == "/global/prices.yaml"
        git(repo, "config", "gitmem.prices", "local.yaml")
        assert gitdir.config(found, "gitmem.prices") == "local.yaml"
    finally:
        git(repo, "config", "--global", "--unset", "gitmem.prices")


def test_with_home_unset_no_user_config_is_read_as_git_reads_none(repo, tmp_path, monkeypatch):
    """git finds ~/.gitconfig through HOME alone: unset, it reads no ~/.gitconfig, and the XDG file only under
    XDG_CONFIG_HOME. The account's home directory (where Python's expanduser looks) is not read either."""
    import pwd
    import subprocess

    account = tmp_path / "account-home"
    (account / ".config" / "git").mkdir(parents=True)
    for file in (account / ".gitconfig", account / ".config" / "git" / "config"):
        file.write_text('[gitmem]\n\tprices = /account/prices.yaml\n[remote "origin"]\n\turl = /elsewhere\n')
    real = pwd.getpwuid(os.getuid())
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: pwd.struct_passwd((*real[:5], str(account), real[6])))
    for name in ("HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL"):
        monkeypatch.delenv(name)
    found = gitdir.discover(str(repo))

    def git_says(key: str) -> str:
        return subprocess.run(["env", "-u", "HOME", "git", "config", "--get", key], cwd=repo, capture_output=True,
                              text=True).stdout.strip()

    assert git_says("gitmem.prices") == "" and gitdir.config(found, "gitmem.prices") is None
    assert git_says("remote.origin.url") == "" and gitdir.has_no_remotes(found)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(account / ".config"))  # without HOME, git reads the XDG file
    assert git_says("gitmem.prices") == gitdir.config(found, "gitmem.prices") == "/account/prices.yaml"


@pytest.mark.parametrize("text", [
    '[gitmem]\n\tguide = "quoted; value"\n',
    "[gitmem]\n\tguide = a\\\n b\n",
    "[include]\n\tpath = other.config\n",
    '[includeIf "gitdir:/x/"]\n\tpath = other.config\n',
    "[gitmem]\n\tguide = a # comment\n",
])
def test_config_leaves_what_it_does_not_follow_to_libgit2(repo, text):
    with open(repo / ".git" / "config", "a", encoding="utf-8") as f:
        f.write(text)
    with pytest.raises(Unsure):
        gitdir.config(gitdir.discover(str(repo)), "gitmem.guide")


def test_warm_context_does_not_load_libgit2_and_reads_the_configured_guide(tmp_path):
    repo = make_repo(tmp_path / "r")
    (repo / "docs").mkdir()
    (repo / "docs" / "agents.md").write_text("# Agents\nRun the tests before you push.\n")
    gitmem_process(repo, "guide", "set", "docs/agents.md")
    gitmem_process(repo, "add", "convention", "Tabs, never spaces")
    (repo / "parser.py").write_text("def parse(): ...\n")
    gitmem_process(repo, "add", "file", "parser.py parses indentation", "--path", "parser.py")
    (repo / "parser.py").write_text("def parse(text): ...\n")  # changed since: the summary is stale
    first = gitmem_process(repo, "context", "--query", "indentation").stdout
    assert "Run the tests before you push." in first and "Tabs, never spaces" in first
    assert not _loads_libgit2(repo, "context", "--query", "indentation")  # a file's blob is hashed in Python
    assert not _loads_libgit2(repo, "search", "tabs")
    assert not _loads_libgit2(repo, "search", "parser indentation")
    assert Store.open(str(repo)).current_blob("parser.py") == git(repo, "hash-object", "parser.py").strip()
    assert gitmem_process(repo, "context", "--query", "indentation").stdout == first


def test_a_working_files_blob_id_is_the_one_git_commits_for_crlf_files_and_links(repo):
    """A file memory keeps its file's blob id to tell when the file changed: for a file checked out with CRLF
    (git turns it to LF in the blob) and for a symbolic link (git keeps its target), the id must be git's, or
    a teammate whose checkout differs sees every summary of the file as stale."""
    from gitmem.gitdir import blob_id

    (repo / ".gitattributes").write_text("*.txt text=auto\n")
    (repo / "notes.txt").write_bytes(b"one\r\ntwo\r\n")
    (repo / "raw.bin").write_bytes(b"kept\r\nas is\r\n")  # no attribute: the bytes as they are
    (repo / "link").symlink_to("notes.txt")
    git(repo, "add", ".gitattributes", "notes.txt", "raw.bin", "link")
    git(repo, "commit", "-qm", "files")
    for name in ("notes.txt", "raw.bin", "link"):
        assert blob_id(str(repo / name)) == git(repo, "rev-parse", f"HEAD:{name}").strip(), name
    assert blob_id(str(repo / "missing.txt")) is None


def test_crlf_files_of_a_repository_that_converts_nothing_are_hashed_without_asking_git(repo, monkeypatch):
    """No core.autocrlf and no attributes file: git stores CRLF as it is, so no process is started per file."""
    import subprocess

    from gitmem.gitdir import blob_id

    (repo / "win.txt").write_bytes(b"one\r\ntwo\r\n")
    git(repo, "add", "win.txt")
    git(repo, "commit", "-qm", "crlf as is")
    expected = git(repo, "rev-parse", "HEAD:win.txt").strip()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(repo / "no-such-config"))

    def no_git(*args, **kwargs):
        raise AssertionError("git was started")

    monkeypatch.setattr(subprocess, "run", no_git)
    assert blob_id(str(repo / "win.txt")) == expected
