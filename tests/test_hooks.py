"""Hooks: installed into real repositories and driven by the real git executable."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pygit2
import pytest

from gitmem import Store
from gitmem.hooks import CHAINED_SUFFIX, EDITED_SUFFIX, HOOKS, script

from conftest import ROOT, git, gitmem

USER_HOOK = b"#!/bin/sh\n# the user's own hook\necho ran >> \"$(git rev-parse --git-dir)/user-hook.log\"\nexit 0\n"


def write_hook(folder: Path, name: str, body: bytes, mode: int = 0o755) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(body)
    path.chmod(mode)
    return path


def commit(repo: Path, name: str, message: str = None) -> subprocess.CompletedProcess:
    (repo / name).write_text(name + "\n")
    git(repo, "add", name)
    return subprocess.run(["git", "commit", "-q", "-m", message or f"add {name}"], cwd=repo,
                          capture_output=True, text=True)


def install(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Install the hooks; post-commit waits for gitmem (foreground) so tests can look right after."""
    git(repo, "config", "gitmem.hookMode", "foreground")
    return gitmem(repo, "hooks", "install", *args, check=check)


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def test_the_repository_hooks_folder_holds_the_same_scripts_gitmem_installs():
    for name in HOOKS:
        path = ROOT / "hooks" / name
        assert path.read_text() == script(name), f"regenerate hooks/{name} from gitmem.hooks.script"
        assert os.access(path, os.X_OK)


def test_post_commit_links_the_commit_and_the_memories_written_since(repo):
    install(repo)
    first = Store.open(str(repo)).add("decision", "Use SKIP LOCKED", paths=["queue.py"]).memory
    second = Store.open(str(repo)).add("fact", "Jobs are idempotent").memory
    assert commit(repo, "queue.py").returncode == 0
    sha = head(repo)
    store = Store.open(str(repo))
    assert store.get(first.id).commits == (sha,) and store.get(second.id).commits == (sha,)
    link = store.log(limit=1)[0]
    assert link.op == "link" and set(link.memory_ids) == {first.id, second.id}
    assert sha in store.repo[link.commit].message
    assert commit(repo, "other.py").returncode == 0  # nothing new written: nothing linked again
    assert Store.open(str(repo)).get(first.id).commits == (sha,)


def test_an_existing_hook_is_chained_and_uninstall_restores_it_byte_for_byte(repo):
    hooks = repo / ".git" / "hooks"
    original = write_hook(hooks, "post-commit", USER_HOOK, 0o750)
    before = (original.read_bytes(), stat.S_IMODE(original.stat().st_mode))
    install(repo)
    assert (hooks / ("post-commit" + CHAINED_SUFFIX)).read_bytes() == USER_HOOK
    states = {h["name"]: h for h in json.loads(gitmem(repo, "hooks", "status", "--json").stdout)["hooks"]}
    assert states["post-commit"] == {**states["post-commit"], "state": "installed", "chained": True}

    m = Store.open(str(repo)).add("fact", "linked by the hook").memory
    assert commit(repo, "a.txt").returncode == 0
    assert (repo / ".git" / "user-hook.log").read_text() == "ran\n"  # the user's hook still runs
    assert Store.open(str(repo)).get(m.id).commits == (head(repo),)  # and so does gitmem

    gitmem(repo, "hooks", "uninstall")
    assert (original.read_bytes(), stat.S_IMODE(original.stat().st_mode)) == before
    assert not (hooks / ("post-commit" + CHAINED_SUFFIX)).exists()
    assert not (hooks / "post-merge").exists()


def test_a_gitmem_hook_someone_edited_is_kept_aside_not_deleted_by_uninstall_or_a_new_install(repo):
    hooks = repo / ".git" / "hooks"
    install(repo)
    edited = hooks / "post-checkout"
    edited.write_text(edited.read_text() + "echo mine >> \"$(git rev-parse --git-dir)/mine.log\"\n")
    gitmem(repo, "hooks", "uninstall")
    kept = hooks / ("post-checkout" + EDITED_SUFFIX)
    assert "echo mine" in kept.read_text() and not edited.exists()
    assert not (hooks / "post-commit").exists() and not (hooks / ("post-commit" + EDITED_SUFFIX)).exists()

    install(repo)  # a fresh, unedited hook: a second install leaves it, and keeps nothing
    assert json.loads(gitmem(repo, "hooks", "install", "--json").stdout)["hooks"][0]["kept"] is None
    edited.write_text(edited.read_text().replace("hook=post-checkout", "hook=post-checkout  # mine"))
    states = {h["name"]: h for h in json.loads(gitmem(repo, "hooks", "install", "--json").stdout)["hooks"]}
    again = Path(states["post-checkout"]["kept"])
    assert again.name == "post-checkout" + EDITED_SUFFIX + ".1" and "# mine" in again.read_text()
    assert edited.read_text() == script("post-checkout", _installed_python(edited))  # gitmem's own, fresh
    assert "echo mine" in kept.read_text()  # the first copy is still there


def origin(tmp_path: Path, repo: Path) -> Path:
    """A bare repository in ``tmp_path``, ``repo``'s remote ``origin``."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    return remote


def _installed_python(hook: Path) -> str:
    return next(line.split(":-", 1)[1].rstrip('}"') for line in hook.read_text().splitlines()
                if line.startswith('py="${GITMEM_PYTHON:-'))


def test_a_failing_chained_pre_push_hook_still_stops_the_push(tmp_path, repo):
    origin(tmp_path, repo)
    hooks = repo / ".git" / "hooks"
    write_hook(hooks, "pre-push", b"#!/bin/sh\ncat >/dev/null\necho 'user says no' >&2\nexit 1\n")
    install(repo)
    refused = subprocess.run(["git", "push", "-q", "origin", "main"], cwd=repo, capture_output=True, text=True)
    assert refused.returncode != 0 and "user says no" in refused.stderr
    write_hook(hooks, "pre-push" + CHAINED_SUFFIX, b"#!/bin/sh\ncat >/dev/null\nexit 0\n")
    git(repo, "push", "-q", "origin", "main")


def test_a_chained_hook_that_takes_its_name_from_dollar_zero_still_does_its_work(tmp_path, repo):
    """husky v4, yorkie and hook dispatchers read the hook's name from $0 (and helpers from its folder): run as
    pre-push.gitmem-chained they found no work, and a pre-push gate that runs the tests let every push through."""
    origin(tmp_path, repo)
    hooks = repo / ".git" / "hooks"
    write_hook(hooks, "dispatch.sh", b'[ "$hookName" = pre-push ] && { echo "tests fail" >&2; exit 1; }\nexit 0\n')
    for shell in (b"/bin/sh", b"/usr/bin/env bash"):
        write_hook(hooks, "pre-push", b'#!' + shell + b'\nhookName=`basename "$0"`\n. "$(dirname "$0")/dispatch.sh"\n')
        install(repo)
        refused = subprocess.run(["git", "push", "-q", "origin", "main"], cwd=repo, capture_output=True, text=True)
        assert refused.returncode != 0 and "tests fail" in refused.stderr
        gitmem(repo, "hooks", "uninstall")


def test_a_chained_hook_in_another_language_sees_its_own_name(tmp_path, repo):
    """overcommit's Ruby hook reads its hook type from $0: run as pre-push.gitmem-chained it failed to load a
    "pre-push.gitmem-chained" context and stopped every push. Any program, not only a shell script, is run by
    the hook's own name; its exit status still decides."""
    origin(tmp_path, repo)
    hooks = repo / ".git" / "hooks"
    write_hook(hooks, "pre-push", b"#!/usr/bin/env python3\nimport os, sys\nsys.stdin.read()\n"
               b"name = os.path.basename(sys.argv[0])\nprint('hook type', name, file=sys.stderr)\n"
               b"sys.exit(0 if name == 'pre-push' else 1)\n")
    install(repo)
    pushed = subprocess.run(["git", "push", "-q", "origin", "main"], cwd=repo, capture_output=True, text=True)
    assert pushed.returncode == 0 and "hook type pre-push" in pushed.stderr, pushed.stderr
    write_hook(hooks, "pre-push" + CHAINED_SUFFIX, b"#!/usr/bin/env python3\nimport sys\nsys.exit(1)\n")
    assert subprocess.run(["git", "push", "-q", "origin", "main"], cwd=repo, capture_output=True).returncode != 0


def test_pre_push_reminds_about_unpushed_memory_unless_turned_off(tmp_path, repo):
    origin(tmp_path, repo)
    install(repo)
    Store.open(str(repo)).add("fact", "not pushed yet")
    pushed = subprocess.run(["git", "push", "origin", "main"], cwd=repo, capture_output=True, text=True)
    assert pushed.returncode == 0 and "memory of main is not known to be on origin" in pushed.stderr
    gitmem(repo, "push", "origin")
    Store.open(str(repo)).add("fact", "written after the memory push")  # origin has main's memory, not this
    commit(repo, "a.txt")
    behind = subprocess.run(["git", "push", "origin", "main"], cwd=repo, capture_output=True, text=True)
    assert behind.returncode == 0 and "memory of main has writes origin lacks: run `gitmem push origin`" in \
        behind.stderr and "not on origin" not in behind.stderr, behind.stderr
    git(repo, "checkout", "-q", "-b", "spike")  # origin's memory is known here now: a branch it lacks is not on it
    Store.open(str(repo)).add("fact", "spike only")
    spike = subprocess.run(["git", "push", "origin", "spike"], cwd=repo, capture_output=True, text=True)
    assert spike.returncode == 0 and "memory of spike is not on origin" in spike.stderr, spike.stderr
    git(repo, "checkout", "-q", "main")
    git(repo, "config", "gitmem.prePush", "off")
    commit(repo, "b.txt")
    quiet = subprocess.run(["git", "push", "origin", "main"], cwd=repo, capture_output=True, text=True)
    assert quiet.returncode == 0 and "gitmem" not in quiet.stderr


def test_pre_push_takes_a_push_of_head_for_the_branch_head_names(tmp_path, repo):
    """git hands the hook `HEAD` as the local ref for `git push origin HEAD`, and for every plain `git push` after
    `gitmem remote setup` (its `HEAD` push refspec): the hook looked only at `refs/heads/*`, so it neither reminded
    nor pushed, and a memory push git refused as a non-fast-forward was left to git's "git pull" hint."""
    remote = origin(tmp_path, repo)
    install(repo)
    Store.open(str(repo)).add("fact", "not pushed yet")

    reminded = subprocess.run(["git", "push", "origin", "HEAD"], cwd=repo, capture_output=True, text=True)
    git(repo, "config", "gitmem.prePush", "push")
    commit(repo, "a.txt")
    pushed = subprocess.run(["git", "push", "origin", "HEAD"], cwd=repo, capture_output=True, text=True)

    assert reminded.returncode == 0 and "memory of main is not known to be on origin" in reminded.stderr, reminded.stderr
    assert pushed.returncode == 0 and "main pushed" in pushed.stderr, pushed.stderr
    assert git(remote, "rev-parse", "refs/memory/main") == git(repo, "rev-parse", "refs/memory/main")


def test_pre_push_does_not_remind_about_memory_the_same_push_sends(tmp_path, repo):
    """`git push origin main refs/memory/main` and `git push --mirror` send the memory with the code: "memory of
    main is not on origin: run `gitmem push origin`" was said of the very push that sent it."""
    origin(tmp_path, repo)
    backup = tmp_path / "backup.git"
    git(tmp_path, "init", "-q", "--bare", str(backup))
    install(repo)
    Store.open(str(repo)).add("fact", "goes out with the code")

    both = subprocess.run(["git", "push", "origin", "main", "refs/memory/main"], cwd=repo, capture_output=True,
                          text=True)
    mirrored = subprocess.run(["git", "push", "--mirror", str(backup)], cwd=repo, capture_output=True, text=True)

    assert both.returncode == 0 and "gitmem" not in both.stderr, both.stderr
    assert mirrored.returncode == 0 and "gitmem" not in mirrored.stderr, mirrored.stderr
    assert git(backup, "rev-parse", "refs/memory/main") == git(repo, "rev-parse", "refs/memory/main")


def test_pre_push_can_push_memory_with_the_code(tmp_path, repo):
    remote = origin(tmp_path, repo)
    install(repo)
    git(repo, "config", "gitmem.prePush", "push")
    tip = Store.open(str(repo)).add("fact", "travels with the code").commit
    pushed = subprocess.run(["git", "push", "origin", "main"], cwd=repo, capture_output=True, text=True)
    assert pushed.returncode == 0 and "main pushed" in pushed.stderr
    assert git(remote, "rev-parse", "refs/memory/main").strip() == tip
    assert git(remote, "rev-parse", "refs/heads/main").strip() == head(repo)


def test_core_hooks_path_is_honoured(repo):
    """A folder in the work tree that git ignores is gitmem's to write (one git sees is not: see below)."""
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text(".githooks/\n")
    git(repo, "config", "core.hooksPath", ".githooks")
    out = json.loads(install(repo, "--json").stdout)
    assert Path(out["hooks_dir"]) == (repo / ".githooks").resolve()
    assert (repo / ".githooks" / "post-commit").exists() and not (repo / ".git" / "hooks" / "post-commit").exists()
    m = Store.open(str(repo)).add("fact", "seen through core.hooksPath").memory
    commit(repo, "a.txt")
    assert Store.open(str(repo)).get(m.id).commits == (head(repo),)


def test_uninstall_cleans_every_folder_gitmem_installed_to_after_core_hooks_path_changed(repo, tmp_path):
    """Installed into .git/hooks (chaining the user's hook), then again after core.hooksPath was set, which then
    moved on: uninstall finds both folders. Else gitmem's scripts, and the user's hooks renamed aside, stay
    where a later change of core.hooksPath puts them back in use."""
    default, first = repo / ".git" / "hooks", tmp_path / "team-hooks"
    original = write_hook(default, "post-commit", USER_HOOK)
    theirs = write_hook(first, "pre-push", b"#!/bin/sh\nexit 0\n")
    install(repo)
    git(repo, "config", "core.hooksPath", str(first))
    install(repo)
    git(repo, "config", "core.hooksPath", str(tmp_path / "other-hooks"))
    gitmem(repo, "hooks", "uninstall")
    assert sorted(p.name for p in default.iterdir() if not p.name.endswith(".sample")) == ["post-commit"]
    assert original.read_bytes() == USER_HOOK
    assert sorted(p.name for p in first.iterdir()) == ["pre-push"] and theirs.read_bytes() == b"#!/bin/sh\nexit 0\n"
    git(repo, "config", "--unset", "core.hooksPath")
    Store.open(str(repo)).add("fact", "not linked: the hooks are gone")
    assert commit(repo, "a.txt").returncode == 0
    assert (repo / ".git" / "user-hook.log").read_text() == "ran\n"  # the user's own hook, back in its place
    assert gitmem(repo, "hooks", "status", "--json").stdout.count('"installed"') == 0


def test_a_hooks_path_from_the_user_config_is_named_with_what_it_means(repo, tmp_path):
    """A user-wide core.hooksPath runs the hooks in every repository: the install says so (a repository's
    own setting does not need saying)."""
    assert "every repository" not in install(repo).stderr
    git(repo, "config", "--global", "core.hooksPath", str(tmp_path / "all-hooks"))
    try:
        out = install(repo)
    finally:
        git(repo, "config", "--global", "--unset", "core.hooksPath")
    assert "core.hooksPath" in out.stderr and "every repository" in out.stderr
    assert (tmp_path / "all-hooks" / "post-commit").exists()  # installed as asked, and said


def test_hooks_installed_from_a_linked_worktree_serve_every_worktree(tmp_path, repo):
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "-b", "topic", str(wt))
    out = json.loads(install(wt, "--json").stdout)
    assert Path(out["hooks_dir"]) == (repo / ".git" / "hooks").resolve()
    m = Store.open(str(wt)).add("decision", "Written in the worktree", reason="isolated").memory
    commit(wt, "w.txt")
    store = Store.open(str(wt))
    assert store.branch == "topic" and store.get(m.id).commits == (head(wt),)
    assert m.id not in Store.open(str(repo), "main").memories()


def test_hooks_serve_a_git_directory_kept_apart_from_its_work_tree(tmp_path):
    """The dotfiles layout (`git --git-dir=... --work-tree=...`, no .git in the work tree): git runs the hooks
    there with GIT_DIR and GIT_WORK_TREE set, and gitmem follows them as git does."""
    home, dotfiles = tmp_path / "home", tmp_path / "dotfiles.git"
    home.mkdir()
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(dotfiles))
    env = {"GIT_DIR": str(dotfiles), "GIT_WORK_TREE": str(home)}
    git(home, "config", "gitmem.hookMode", "foreground", env=env)
    gitmem(home, "hooks", "install", env=env)
    m = json.loads(gitmem(home, "add", "fact", "The shell is zsh", "--json", env=env).stdout)["memory"]
    (home / ".zshrc").write_text("setopt autocd\n")
    git(home, "add", ".zshrc", env=env)
    done = subprocess.run(["git", "commit", "-q", "-m", "zshrc"], cwd=home, capture_output=True, text=True,
                          env={**os.environ, **env})
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    assert Store.open(str(dotfiles)).get(m["id"]).commits == (git(home, "rev-parse", "HEAD", env=env).strip(),)


def test_a_failing_hook_warns_and_never_fails_the_commit(repo):
    install(repo)
    blob = git(repo, "hash-object", "-w", "README.md").strip()
    git(repo, "update-ref", "refs/memory/main", blob)  # memory ref pointing at a blob: every read fails
    done = commit(repo, "a.txt")
    assert done.returncode == 0 and "gitmem: warning: post-commit hook skipped" in done.stderr
    assert git(repo, "log", "-1", "--format=%s").strip() == "add a.txt"


def test_a_hook_whose_python_is_gone_still_lets_git_work(repo):
    """gitmem uninstalled (its python gone, none on PATH): each hook skips with one line, not that line and
    "hook failed" after it, as if something had gone wrong in a hook that was never run."""
    install(repo)
    env = {"GITMEM_PYTHON": "/nonexistent/python", "PATH": "/usr/bin:/bin"}
    for args in (["commit", "-q", "--allow-empty", "-m", "x"], ["checkout", "-q", "-b", "feature"]):
        done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, env={**os.environ, **env})
        assert done.returncode == 0, done.stderr
        assert done.stderr == ("gitmem: not found (set GITMEM_PYTHON or run gitmem hooks install again); "
                               f"post-{args[0]} skipped\n"), done.stderr


def test_a_hook_whose_python_lost_gitmem_says_so_in_one_line_without_a_traceback(repo, tmp_path):
    """The python the hooks were installed with is still there but no longer has gitmem (its virtualenv rebuilt,
    gitmem uninstalled): every commit and checkout printed Python's traceback of the failed import."""
    install(repo)
    bare = tmp_path / "python-without-gitmem"
    bare.write_text(f'#!/bin/sh\nexec "{os.path.realpath(sys.executable)}" -S -I "$@"\n')
    bare.chmod(0o755)
    env = {**os.environ, "GITMEM_PYTHON": str(bare)}
    for args in (["commit", "-q", "--allow-empty", "-m", "x"], ["checkout", "-q", "-b", "feature"]):
        done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr and "gitmem: cannot load gitmem" in done.stderr, done.stderr
        assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("gitmem: "), done.stderr
        assert done.stderr.rstrip().endswith(f"post-{args[0]} skipped"), done.stderr


def test_post_rewrite_moves_links_to_the_rewritten_commits(repo):
    install(repo)
    m = Store.open(str(repo)).add("fact", "linked, then amended").memory
    commit(repo, "a.txt")
    old = head(repo)
    git(repo, "commit", "-q", "--amend", "-m", "add a.txt (amended)")
    new = head(repo)
    assert new != old and Store.open(str(repo)).get(m.id).commits == (new,)


def test_post_checkout_records_the_fork_point_of_a_new_branch(repo):
    install(repo)
    git(repo, "checkout", "-q", "-b", "one")
    git(repo, "checkout", "-q", "-b", "two")
    config = pygit2.Repository(str(repo)).config
    assert config["gitmem.branch.one.parent"] == "main" and config["gitmem.branch.two.parent"] == "one"
    assert config["gitmem.branch.two.forkPoint"] == head(repo)
    git(repo, "checkout", "-q", "main")
    git(repo, "checkout", "-q", "one")  # switching back records nothing new
    assert config["gitmem.branch.one.parent"] == "main"


@pytest.mark.parametrize("name", HOOKS)
def test_every_hook_exits_zero_outside_its_normal_input(repo, name):
    install(repo)
    path = repo / ".git" / "hooks" / name
    done = subprocess.run([str(path), "garbage", "args", "here"], cwd=repo, input="not a valid line\n",
                          capture_output=True, text=True)
    assert done.returncode == 0


def test_post_commit_runs_in_the_background_by_default_and_still_links(repo):
    gitmem(repo, "hooks", "install")
    m = Store.open(str(repo)).add("fact", "linked after git returned").memory
    assert commit(repo, "a.txt").returncode == 0
    sha = head(repo)
    wait_for_background_link(repo, m.id, sha)
    assert Store.open(str(repo)).get(m.id).commits == (sha,)
    assert "linked" in (repo / ".git" / "gitmem" / "hooks.log").read_text()


def wait_for_background_link(checkout, memory_id: str, sha: str, log=None) -> None:
    """Until the detached post-commit hook has linked the memory to ``sha`` in ``checkout`` and logged it in
    ``log`` (default: the checkout's own hooks.log), or a bound for a slow machine passed (not a speed assertion):
    the link is written first and the log line after it, so a test that reads the log must wait for both."""
    log = log or Path(checkout) / ".git" / "gitmem" / "hooks.log"
    deadline = time.monotonic() + 60
    while (Store.open(str(checkout)).get(memory_id).commits != (sha,) or not log.exists()
           or "linked" not in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)


def test_git_commit_whose_output_is_read_does_not_wait_for_the_background_post_commit(repo, tmp_path):
    """An IDE, a script or `$(git commit)` reads git's output to its end: the background hook's shell kept a copy
    of that pipe open while gitmem ran, so the commit seemed to take as long as the hook (25 s under load)."""
    gitmem(repo, "hooks", "install")
    release = tmp_path / "release"
    slow = write_hook(tmp_path, "slow-python", f"#!/bin/sh\nwhile [ ! -e '{release}' ]; do sleep 0.1; done\n"
                                               f"exec '{sys.executable}' \"$@\"\n".encode())
    m = Store.open(str(repo)).add("fact", "linked once the hook is let go").memory
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "a.txt")
    try:
        done = subprocess.run(["git", "commit", "-q", "-m", "a"], cwd=repo, capture_output=True, text=True,
                              env={**os.environ, "GITMEM_PYTHON": str(slow)}, timeout=30)
    finally:
        release.touch()
    assert done.returncode == 0, done.stderr
    sha = head(repo)
    wait_for_background_link(repo, m.id, sha)
    assert Store.open(str(repo)).get(m.id).commits == (sha,)


def test_post_rewrite_after_a_rebase_maps_recorded_commits(repo):
    install(repo)
    git(repo, "checkout", "-q", "-b", "topic")
    m = Store.open(str(repo)).add("fact", "linked, then rebased").memory
    commit(repo, "t.txt")
    old = head(repo)
    git(repo, "checkout", "-q", "main")
    commit(repo, "m.txt")
    git(repo, "checkout", "-q", "topic")
    git(repo, "rebase", "-q", "main")
    new = head(repo)
    assert new != old and Store.open(str(repo), "topic").get(m.id).commits == (new,)


def test_memory_written_while_a_rebase_is_stopped_is_linked_to_the_commit_that_lands(repo):
    """The rebase stops on a conflict; a fact written while resolving belongs to the commit `--continue` makes
    (post-commit skips the detached HEAD, so the link is made when the rebase lands), not to the pick after it,
    nor to the next commit on the branch; a memory written before the rebase is linked to neither."""
    install(repo)
    git(repo, "checkout", "-q", "-b", "topic")
    (repo / "README.md").write_text("topic\n")
    git(repo, "commit", "-q", "-am", "topic readme")
    commit(repo, "t.txt")
    git(repo, "checkout", "-q", "main")
    (repo / "README.md").write_text("main\n")
    git(repo, "commit", "-q", "-am", "main readme")
    git(repo, "checkout", "-q", "topic")
    later = Store.open(str(repo)).add("fact", "for the next commit").memory
    assert git(repo, "rebase", "-q", "main", check=False) is not None and (repo / ".git" / "rebase-merge").exists()
    during = json.loads(gitmem(repo, "add", "fact", "README merges keep both lines", "--json").stdout)["id"]
    (repo / "README.md").write_text("main\ntopic\n")
    git(repo, "add", "README.md")
    git(repo, "rebase", "--continue", env={"GIT_EDITOR": "true"})
    resolved = git(repo, "rev-parse", "HEAD~1").strip()  # the commit --continue made; t.txt's pick is HEAD
    assert Store.open(str(repo)).get(during).commits == (resolved,)
    assert not Store.open(str(repo)).get(later.id).commits  # not about either rebased commit
    commit(repo, "next.txt")
    assert Store.open(str(repo)).get(during).commits == (resolved,)


def test_a_rebase_that_brings_a_branchs_memory_leaves_the_checkpoint_at_head(repo):
    """The rebase onto main brings feat's memory (merged there by git); feat's checkpoint is newer, and a
    record merge would keep its commit: the checkpoint must stand at the rebased HEAD, as after a merge."""
    from gitmem.checkpoint import latest_checkpoint

    install(repo)
    gitmem(repo, "checkpoint", "step 1 / next: step 2")
    git(repo, "checkout", "-q", "-b", "long")
    Store.open(str(repo)).add("fact", "long fact")
    commit(repo, "l.txt")
    git(repo, "checkout", "-q", "main")
    git(repo, "checkout", "-q", "-b", "feat")
    Store.open(str(repo)).add("fact", "feat fact")
    commit(repo, "f.txt")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge feat", "feat")
    git(repo, "checkout", "-q", "long")
    git(repo, "rebase", "-q", "main")
    assert latest_checkpoint(Store.open(str(repo), "long"))[1].commit == head(repo)


def _topic_behind_main_with_memory_of_its_own(repo: Path) -> None:
    """topic forks main and writes memory but no commit; then main writes memory and moves on."""
    install(repo)
    git(repo, "checkout", "-q", "-b", "topic")
    Store.open(str(repo)).add("fact", "topic fact")
    git(repo, "checkout", "-q", "main")
    Store.open(str(repo)).add("fact", "main fact")
    commit(repo, "m.txt")
    git(repo, "checkout", "-q", "topic")


@pytest.mark.parametrize("command", [["merge", "-q", "main"], ["rebase", "-q", "main"]])
def test_a_rebase_that_picks_nothing_brings_mains_memory_as_a_merge_does(repo, command):
    """With no commits of its own, `git rebase main` moves the branch to main's tip and runs no post-rewrite:
    the memory main's code brings merges all the same (at the rebase's checkout, which cannot stop after it)."""
    _topic_behind_main_with_memory_of_its_own(repo)
    git(repo, *command)
    assert head(repo) == git(repo, "rev-parse", "main").strip()
    assert {m.text for m in Store.open(str(repo), "topic").list()} == {"topic fact", "main fact"}


def test_without_a_git_identity_a_fast_forward_says_on_the_terminal_why_memory_was_not_merged(repo):
    """A fast-forward needs no identity, but merging the branches' memory writes a commit: refused, never signed
    with a made-up address, and said where the person ran git, with what to run (no --author: git takes none)."""
    _topic_behind_main_with_memory_of_its_own(repo)
    git(repo, "config", "--unset", "user.email")
    anonymous = {**os.environ, "GIT_AUTHOR_EMAIL": "", "GIT_COMMITTER_EMAIL": "", "EMAIL": ""}
    done = subprocess.run(["git", "merge", "-q", "main"], cwd=repo, capture_output=True, text=True, env=anonymous)
    assert done.returncode == 0 and head(repo) == git(repo, "rev-parse", "main").strip()
    assert "post-merge" in done.stderr and "`git config user.email you@example.com`" in done.stderr
    assert "--author" not in done.stderr
    assert {m.text for m in Store.open(str(repo), "topic").list()} == {"topic fact"}


def test_a_rebase_that_stops_before_it_ends_merges_no_memory_and_an_abort_leaves_none(repo):
    _topic_behind_main_with_memory_of_its_own(repo)
    git(repo, "rebase", "-q", "-i", "main", env={"GIT_SEQUENCE_EDITOR": "sh -c 'echo break >> \"$1\"' --"})
    assert (repo / ".git" / "rebase-merge").exists()  # stopped at the break: it may yet be aborted
    assert {m.text for m in Store.open(str(repo), "topic").list()} == {"topic fact"}
    git(repo, "rebase", "--abort")
    assert {m.text for m in Store.open(str(repo), "topic").list()} == {"topic fact"}


def test_a_rebase_by_the_apply_backend_that_fast_forwards_names_the_merge_that_brings_mains_memory(repo):
    """`git rebase --apply` fast-forwards without a trace of which branch it moves: the hook cannot merge, so
    it names the command that does."""
    _topic_behind_main_with_memory_of_its_own(repo)
    done = subprocess.run(["git", "rebase", "-q", "--apply", "main"], cwd=repo, capture_output=True, text=True)
    assert done.returncode == 0 and "`gitmem merge main`" in done.stderr, done.stderr
    assert head(repo) == git(repo, "rev-parse", "main").strip()


def test_the_pre_commit_framework_route_reads_git_arguments_from_its_variables(repo):
    git(repo, "branch", "made-by-pre-commit")
    git(repo, "symbolic-ref", "HEAD", "refs/heads/made-by-pre-commit")
    sha = head(repo)
    env = {"PRE_COMMIT_FROM_REF": sha, "PRE_COMMIT_TO_REF": sha, "PRE_COMMIT_CHECKOUT_TYPE": "1"}
    assert gitmem(repo, "hook", "post-checkout", env=env).returncode == 0
    assert pygit2.Repository(str(repo)).config["gitmem.branch.made-by-pre-commit.parent"] == "main"


def test_pre_commit_hooks_yaml_offers_every_hook_at_its_own_stage():
    import yaml

    entries = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert [(e["id"], e["stages"], e["entry"]) for e in entries] == [
        (f"gitmem-{name}", [name], f"gitmem hook {name}") for name in HOOKS]


def test_hooks_with_nothing_to_do_do_not_start_python(repo, tmp_path):
    """post-checkout, post-merge, post-rewrite and pre-push decide in shell first: switching to an
    existing branch, merging a branch without memory, or amending without memory starts no Python;
    creating a branch and merging a branch with memory still do their work."""
    import sys

    calls = tmp_path / "python-calls.log"
    counting = write_hook(tmp_path / "bin", "python", f'#!/bin/sh\necho "$@" >> {calls}\nexec {sys.executable} "$@"\n'
                          .encode())
    git(repo, "config", "gitmem.hookMode", "foreground")
    gitmem(repo, "hooks", "install", env={"PYTHONPATH": str(ROOT)})
    env = {"GITMEM_PYTHON": str(counting), "PYTHONPATH": str(ROOT)}

    def started() -> list:
        found = calls.read_text().splitlines() if calls.exists() else []
        calls.unlink(missing_ok=True)
        # the -c program spans lines: its last one is followed by the hook's name and arguments
        names = [next(w for w in line.split() if w in HOOKS) for line in found if "sys.argv[1:]))" in line]
        return [n for n in names if n != "post-commit"]  # post-commit always has work: it detaches instead

    commit(repo, "second.txt")  # main has moved since it was created
    git(repo, "branch", "plain")
    git(repo, "checkout", "-q", "-b", "other", env=env)
    assert started() == ["post-checkout"]  # a new branch: its fork point is recorded
    git(repo, "checkout", "-q", "main", env=env)
    git(repo, "checkout", "-q", "other", env=env)
    git(repo, "checkout", "-q", "plain", env=env)
    git(repo, "checkout", "-q", "plain", env=env)
    assert started() == ["post-checkout"]  # switching back to other (seen): nothing; plain, never seen: once
    git(repo, "checkout", "-q", "main", env=env)
    git(repo, "checkout", "-q", "plain", env=env)
    git(repo, "checkout", "-q", "other", env=env)
    assert started() == []  # plain, seen now
    (repo / "o.txt").write_text("o\n")
    git(repo, "add", "o.txt")
    git(repo, "commit", "-q", "-m", "o", env={**env, "GITMEM_HOOKS": "0"})
    git(repo, "checkout", "-q", "main", env=env)
    git(repo, "merge", "-q", "--no-edit", "other", env=env)
    git(repo, "commit", "-q", "--amend", "-m", "amended", env=env)
    git(repo, "merge", "-q", "--no-edit", "plain", env=env)
    git(repo, "checkout", "-q", "plain", env=env)
    git(repo, "rebase", "-q", "main", env=env)  # picks nothing: main's memory would merge, but there is none
    git(repo, "checkout", "-q", "main", env=env)
    assert started() == []  # no memory anywhere: nothing to merge, no commit ids to rewrite

    gitmem(repo, "add", "fact", "main has memory now")
    git(repo, "checkout", "-q", "-b", "feature", env=env)
    gitmem(repo, "add", "fact", "feature memory")
    (repo / "f.txt").write_text("f\n")
    git(repo, "add", "f.txt")
    git(repo, "commit", "-q", "-m", "f", env={**env, "GITMEM_HOOKS": "0"})
    git(repo, "checkout", "-q", "main", env=env)
    started()
    git(repo, "merge", "-q", "--no-edit", "feature", env=env)
    assert started() == ["post-merge"]  # a branch with memory came in
    assert "feature memory" in {m.text for m in Store.open(str(repo)).list()}
def test_a_detached_hook_in_a_worktree_whose_path_has_spaces_logs_inside_the_repository(tmp_path):
    from conftest import make_repo

    repo = make_repo(tmp_path / "my repo")
    wt = tmp_path / "my work tree"
    git(repo, "worktree", "add", "-q", "-b", "topic", str(wt))
    gitmem(wt, "hooks", "install")  # post-commit detached (the default)
    m = Store.open(str(wt)).add("fact", "linked from a worktree with spaces").memory
    assert commit(wt, "w.txt").returncode == 0
    sha = head(wt)
    wait_for_background_link(wt, m.id, sha, log=repo / ".git" / "gitmem" / "hooks.log")
    assert Store.open(str(wt)).get(m.id).commits == (sha,)
    assert "linked" in (repo / ".git" / "gitmem" / "hooks.log").read_text()
    strays = [p for p in tmp_path.rglob("hooks.log") if repo / ".git" not in p.parents]
    assert strays == [] and sorted(p.name for p in tmp_path.iterdir()) == ["my repo", "my work tree"]


def test_installing_the_hooks_in_a_bare_repository_says_only_pre_push_can_run(tmp_path):
    bare = tmp_path / "server.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    result = gitmem(bare, "hooks", "install")
    assert "repository is bare" in result.stderr and "install the hooks in each clone" in result.stderr


def test_a_hooks_folder_git_tracks_is_left_unchanged_and_the_line_to_add_is_named(tmp_path, repo):
    """core.hooksPath at a folder the team commits: gitmem writes nothing git sees (no tracked file renamed,
    no new untracked one), says which line each hook file needs, and exits 1 until the lines are there."""
    team_hook = b"#!/bin/sh\necho team-check >&2\n"
    write_hook(repo / ".githooks", "pre-push", team_hook)
    git(repo, "add", ".githooks")
    git(repo, "commit", "-q", "-m", "team hooks")
    git(repo, "config", "core.hooksPath", ".githooks")
    before = git(repo, "status", "--porcelain", "--untracked-files=all")

    done = install(repo, "--json", check=False)
    assert done.returncode == 1
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == before
    assert (repo / ".githooks" / "pre-push").read_bytes() == team_hook
    out = json.loads(done.stdout)
    assert out["reason"] and "tracks" in out["reason"]
    states = {h["name"]: h for h in out["hooks"]}
    assert {h["state"] for h in states.values()} == {"needs-line"}
    assert Path(states["pre-push"]["path"]) == (repo / ".githooks" / "pre-push").resolve()
    assert "gitmem/hooks/pre-push" in states["pre-push"]["line"]
    plain = install(repo, check=False)
    assert plain.returncode == 1 and states["pre-push"]["line"] in plain.stderr
    assert "git status is unchanged" in plain.stderr

    remote = tmp_path / "remote.git"  # the line added by hand, as the message says: gitmem runs from it
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    hook = repo / ".githooks" / "pre-push"
    lines = hook.read_text().splitlines()
    hook.write_text("\n".join([lines[0], states["pre-push"]["line"], *lines[1:]]) + "\n")
    Store.open(str(repo)).add("fact", "not pushed yet")
    pushed = subprocess.run(["git", "push", "origin", "main"], cwd=repo, capture_output=True, text=True)
    assert pushed.returncode == 0 and "memory of main is not known to be on origin" in pushed.stderr
    assert "team-check" in pushed.stderr
    status = {h["name"]: h["state"] for h in json.loads(gitmem(repo, "hooks", "status", "--json").stdout)["hooks"]}
    assert status["pre-push"] == "installed" and status["post-commit"] == "needs-line"

    gitmem(repo, "hooks", "uninstall")  # takes gitmem's scripts away; the team's file is the team's to edit
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == " M .githooks/pre-push\n"
    assert subprocess.run(["git", "push", "origin", "main"], cwd=repo, capture_output=True).returncode == 0


def test_a_hooks_folder_in_the_work_tree_not_committed_yet_gets_no_gitmem_files_either(repo):
    """Not tracked yet, not ignored: the next `git add .` would commit gitmem's scripts, with this machine's
    python in them, for the whole team."""
    git(repo, "config", "core.hooksPath", ".githooks")
    done = install(repo, check=False)
    assert done.returncode == 1 and not (repo / ".githooks").exists()
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""


HUSKY_H = b"""#!/usr/bin/env sh
[ "$HUSKY" = "2" ] && set -x
n=$(basename "$0")
s=$(dirname "$(dirname "$0")")/$n

[ ! -f "$s" ] && exit 0

[ "${HUSKY-}" = "0" ] && exit 0

export PATH="node_modules/.bin:$PATH"
sh -e "$s" "$@"
c=$?

[ $c != 0 ] && echo "husky - $n script failed (code $c)"
[ $c = 127 ] && echo "husky - command not found in PATH=$PATH"
exit $c
"""


def husky_prepare(repo: Path) -> None:
    """What husky v9's `prepare` script does on every `npm install` (husky/index.js, 9.1): hooksPath at
    .husky/_, a folder that ignores itself, its dispatcher `h`, and one two-line script per git hook."""
    git(repo, "config", "core.hooksPath", ".husky/_")
    folder = repo / ".husky" / "_"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".gitignore").write_text("*")
    (folder / "h").write_bytes(HUSKY_H)
    for name in (*HOOKS, "pre-commit", "commit-msg"):
        write_hook(folder, name, b'#!/usr/bin/env sh\n. "$(dirname "$0")/h"')


def husky_repo(repo: Path) -> Path:
    husky_prepare(repo)
    (repo / ".husky" / "pre-commit").write_text("echo team-pre-commit >&2\n")
    git(repo, "add", ".husky/pre-commit")
    git(repo, "commit", "-q", "-m", "husky")
    return repo


def add_line(hook_file: Path, line: str) -> None:
    """What the user does with the line install names: at the top of their own hook file."""
    body = hook_file.read_text() if hook_file.exists() else ""
    hook_file.write_text(f"{line}\n{body}")


def test_husky_v9s_regenerated_folder_is_left_to_husky_and_the_line_goes_into_the_husky_files(repo):
    """husky rewrites .husky/_ on every `npm install`: scripts written there would vanish, and a husky script
    moved aside stops running the team's .husky/<hook> (its `h` finds the hook by $0's name). gitmem leaves
    .husky/_ alone, names .husky/<hook> and its line, and runs from that line across npm installs."""
    husky_repo(repo)
    husky_files = {p.name: p.read_bytes() for p in (repo / ".husky" / "_").iterdir()}
    done = install(repo, "--json", check=False)
    assert done.returncode == 1
    assert {p.name: p.read_bytes() for p in (repo / ".husky" / "_").iterdir()} == husky_files
    out = json.loads(done.stdout)
    assert "npm install" in out["reason"] and Path(out["hooks_dir"]) == (repo / ".husky").resolve()
    states = {h["name"]: h for h in out["hooks"]}
    assert Path(states["post-commit"]["path"]) == (repo / ".husky" / "post-commit").resolve()
    assert "husky" in install(repo, check=False).stderr

    for name in HOOKS:
        add_line(repo / ".husky" / name, states[name]["line"])
    assert install(repo).returncode == 0
    husky_prepare(repo)  # the next `npm install`
    m = Store.open(str(repo)).add("fact", "followed through husky").memory
    done = commit(repo, "a.txt")
    assert done.returncode == 0 and "team-pre-commit" in done.stderr  # the team's husky hook still runs
    assert Store.open(str(repo)).get(m.id).commits == (head(repo),)
    assert {h["state"] for h in json.loads(gitmem(repo, "hooks", "status", "--json").stdout)["hooks"]} == {"installed"}


def test_installing_again_puts_back_the_husky_scripts_an_earlier_install_moved_aside(repo):
    husky_repo(repo)
    folder = repo / ".husky" / "_"
    husky_script = (folder / "post-commit").read_bytes()
    (folder / "post-commit").rename(folder / ("post-commit" + CHAINED_SUFFIX))  # as gitmem did before
    write_hook(folder, "post-commit", script("post-commit").encode())
    install(repo, check=False)
    assert (folder / "post-commit").read_bytes() == husky_script
    assert not (folder / ("post-commit" + CHAINED_SUFFIX)).exists()


def test_a_new_linked_worktree_without_huskys_folder_is_told_git_runs_no_hooks_there(repo, tmp_path):
    """husky's .husky/_ is untracked, made by `npm install`: a new linked worktree has none until that runs
    there, and git then runs no hooks in it at all. gitmem says so and what makes the folder, not that hook
    files in it are to be created and committed; install writes nothing into the worktree and commits nothing."""
    husky_repo(repo)
    for h in json.loads(install(repo, "--json", check=False).stdout)["hooks"]:  # the team's husky files call gitmem
        add_line(Path(h["path"]), h["line"])
    git(repo, "add", ".husky")
    git(repo, "commit", "-q", "-m", "gitmem in husky")
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "-b", "topic", str(wt))
    commits = git(repo, "rev-list", "--all", "--count")

    for done in (gitmem(wt, "hooks", "status"), install(wt, check=False)):
        said = done.stderr
        assert ".husky/_" in said and "does not exist in this worktree" in said and "git runs no hooks" in said
        assert "npm install" in said and "untracked files" not in said and "commit them" not in said
    assert done.returncode == 1  # install: memory does not follow this worktree's commits yet
    states = json.loads(gitmem(wt, "hooks", "status", "--json").stdout)["hooks"]
    assert {h["state"] for h in states} == {"absent"} and {h["line"] for h in states} == {None}
    assert not (wt / ".husky" / "_").exists() and git(wt, "status", "--porcelain") == ""
    assert git(repo, "rev-list", "--all", "--count") == commits

    husky_prepare(wt)  # `npm install` in the worktree
    assert {h["state"] for h in json.loads(gitmem(wt, "hooks", "status", "--json").stdout)["hooks"]} == {"installed"}
    m = Store.open(str(wt)).add("fact", "followed in the worktree").memory
    assert commit(wt, "w.txt").returncode == 0
    assert Store.open(str(wt)).get(m.id).commits == (head(wt),)


def test_status_says_plainly_when_gitmems_hooks_were_replaced(repo):
    """Another tool wrote over gitmem's post-commit: memory no longer follows commits, and status says so."""
    install(repo)
    write_hook(repo / ".git" / "hooks", "post-commit", b"#!/bin/sh\necho another tool\n")
    shown = gitmem(repo, "hooks", "status")
    assert "post-commit    other" in shown.stdout
    assert "memory does not follow commits" in shown.stderr and "gitmem hooks install" in shown.stderr


def test_the_line_works_with_the_real_husky_from_npm(tmp_path):
    """The real husky v9 (skipped without npm or its registry): `npm install` regenerates .husky/_,
    gitmem keeps working from the line in .husky/post-commit."""
    import shutil

    from conftest import make_repo

    if not shutil.which("npm"):
        pytest.skip("npm is not installed")
    repo = make_repo(tmp_path / "web-app")
    (repo / "package.json").write_text('{"name": "web-app", "private": true, "scripts": {"prepare": "husky"}}\n')
    npm = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefer-offline", "husky@9"], cwd=repo,
                         capture_output=True, text=True, timeout=300)
    if npm.returncode != 0:
        pytest.skip(f"npm could not install husky: {npm.stderr.strip()[-200:]}")
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefer-offline"], cwd=repo, check=True,
                   capture_output=True, timeout=300)  # runs `prepare`: husky makes .husky/_ and sets hooksPath
    (repo / ".gitignore").write_text("node_modules/\n")
    (repo / ".husky" / "pre-commit").write_text("echo team-pre-commit >&2\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "husky")
    before = git(repo, "status", "--porcelain", "--untracked-files=all")
    out = json.loads(install(repo, "--json", check=False).stdout)
    assert "husky" in out["reason"] and git(repo, "status", "--porcelain", "--untracked-files=all") == before
    add_line(repo / ".husky" / "post-commit", next(h["line"] for h in out["hooks"] if h["name"] == "post-commit"))
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefer-offline"], cwd=repo, check=True,
                   capture_output=True, timeout=300)
    m = Store.open(str(repo)).add("fact", "followed through the real husky").memory
    done = commit(repo, "a.txt")
    assert done.returncode == 0 and "team-pre-commit" in done.stderr
    assert Store.open(str(repo)).get(m.id).commits == (head(repo),)


@pytest.mark.parametrize("layout", ["tracked folder", "husky"])
def test_the_line_in_a_users_hook_file_passes_arguments_and_stdin_on_and_a_refusal_stops_the_push(
        tmp_path, repo, layout):
    """Called from the team's own files (plain sh, or husky's `sh -e`), gitmem's scripts get git's arguments
    (post-checkout, pre-push) and stdin (post-rewrite, pre-push), and a push of memory holding a secret is
    refused before the rest of the user's pre-push runs."""
    from test_remote import _github_token, _plant

    if layout == "husky":
        husky_repo(repo)
        folder = repo / ".husky"
    else:
        folder = repo / ".githooks"
        write_hook(folder, "pre-commit", b"#!/bin/sh\nexit 0\n")
        git(repo, "add", ".githooks")
        git(repo, "commit", "-q", "-m", "team hooks")
        git(repo, "config", "core.hooksPath", ".githooks")
    lines = {h["name"]: h["line"] for h in json.loads(install(repo, "--json", check=False).stdout)["hooks"]}
    for name, line in lines.items():
        body = f"#!/bin/sh\n{line}\n" + ("echo user-pre-push-ran >&2\n" if name == "pre-push" else "")
        write_hook(folder, name, body.encode())
    assert install(repo).returncode == 0
    remote = origin(tmp_path, repo)

    git(repo, "checkout", "-q", "-b", "topic")  # post-checkout's arguments
    assert pygit2.Repository(str(repo)).config["gitmem.branch.topic.parent"] == "main"
    m = Store.open(str(repo)).add("fact", "follows an amend").memory
    commit(repo, "t.txt")
    git(repo, "commit", "-q", "--amend", "-m", "amended")  # post-rewrite's stdin: old and new commit ids
    assert Store.open(str(repo)).get(m.id).commits == (head(repo),)
    pushed = subprocess.run(["git", "push", "origin", "topic"], cwd=repo, capture_output=True, text=True)
    assert pushed.returncode == 0 and "memory of topic is not known to be on origin" in pushed.stderr  # pre-push: both
    assert "user-pre-push-ran" in pushed.stderr

    git(repo, "checkout", "-q", "main")
    gitmem(repo, "add", "fact", "clean")
    _plant(repo, "note/zz/planted.yaml", f"text: deploy with {_github_token()}\n")
    refused = subprocess.run(["git", "push", "origin", "refs/memory/main"], cwd=repo, capture_output=True, text=True)
    assert refused.returncode != 0 and "push refused" in refused.stderr and "github-pat" in refused.stderr
    assert "user-pre-push-ran" not in refused.stderr
    assert git(remote, "for-each-ref", "refs/memory").strip() == ""
