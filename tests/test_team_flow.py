"""A team's first week on real git: two clones of one bare origin, with the hooks and
`gitmem remote setup`, sharing memory through plain `git push` and `git pull`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import git, gitmem, make_repo
from gitmem import Store


def texts(path: Path) -> set:
    return {m.text for m in Store.open(str(path)).list()}


def commit_code(path: Path, name: str) -> None:
    (path / name).write_text(f"{name}\n")
    git(path, "add", name)
    git(path, "commit", "-q", "-m", f"add {name}")


@pytest.fixture
def team(tmp_path):
    """(alice, bob, origin): clones with the hooks installed (foreground) and `remote setup` done."""
    seed = make_repo(tmp_path / "seed")
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    git(seed, "push", "-q", str(origin), "main")
    clones = []
    for name in ("Alice", "Bob"):
        path = tmp_path / name.lower()
        git(tmp_path, "clone", "-q", str(origin), path.name)
        git(path, "config", "user.name", name)
        git(path, "config", "user.email", f"{name.lower()}@example.com")
        git(path, "config", "gitmem.hookMode", "foreground")
        gitmem(path, "remote", "setup")
        gitmem(path, "hooks", "install")
        clones.append(path)
    return clones[0], clones[1], origin


def test_a_fast_forward_git_pull_brings_the_teams_memory(team):
    alice, bob, _ = team
    gitmem(bob, "add", "fact", "bob was here first")
    commit_code(bob, "b.txt")
    git(bob, "push", "-q")
    git(alice, "pull", "-q")  # the first pull: alice has no memory yet
    assert texts(alice) == {"bob was here first"}

    gitmem(bob, "add", "decision", "Queue jobs in Postgres", "--because", "no new service")
    commit_code(bob, "c.txt")
    git(bob, "push", "-q")
    git(alice, "pull", "-q", "--ff-only")  # a fast-forward of code and of memory

    assert texts(alice) == texts(bob) == {"bob was here first", "Queue jobs in Postgres"}


def test_a_non_fast_forward_git_pull_merges_both_sides_memory(team):
    alice, bob, _ = team
    gitmem(alice, "add", "fact", "from alice")
    commit_code(alice, "a.txt")
    git(alice, "push", "-q")
    gitmem(bob, "add", "fact", "from bob")
    commit_code(bob, "b.txt")
    git(bob, "pull", "-q", "--no-rebase", "--no-edit")
    git(bob, "push", "-q")
    git(alice, "pull", "-q", "--ff-only")

    assert texts(alice) == texts(bob) == {"from alice", "from bob"}


def conflicts(path: Path) -> list:
    return json.loads(gitmem(path, "conflicts", "--json").stdout)["conflicts"]


def test_two_active_branches_with_checkpoints_merge_with_no_conflict(team):
    alice, bob, _ = team
    gitmem(alice, "checkpoint", "parser started / next: the lexer")
    commit_code(alice, "parser.txt")
    git(alice, "checkout", "-q", "-b", "feature")
    gitmem(alice, "add", "fact", "the lexer is hand-written")
    commit_code(alice, "lexer.txt")  # the hook advances the checkpoint on feature...
    git(alice, "checkout", "-q", "main")
    commit_code(alice, "docs.txt")  # ...and on main
    git(alice, "merge", "-q", "--no-edit", "feature")

    assert conflicts(alice) == []
    head = git(alice, "rev-parse", "HEAD").strip()
    [cp] = [m for m in Store.open(str(alice)).list(type="checkpoint")]
    assert cp.commit == head  # the checkpoint stands at the merge commit
    git(alice, "push", "-q")
    git(bob, "pull", "-q")
    assert texts(alice) == texts(bob) == {"parser started / next: the lexer", "the lexer is hand-written"}
    assert conflicts(bob) == []
