"""What arrives from a remote, built with plain git plumbing against a bare remote: gitmem
never lets a pulled change delete local memory silently."""

from __future__ import annotations

import json
import subprocess

from conftest import git, gitmem, make_repo
from gitmem import Store


def test_a_pulled_fast_forward_that_deletes_memory_is_merged_and_the_memory_kept(tmp_path):
    seed = make_repo(tmp_path / "seed")
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    git(seed, "push", "-q", str(origin), "main")
    mine = tmp_path / "mine"
    git(tmp_path, "clone", "-q", str(origin), "mine")
    for text in ("keep me", "and me", "me too"):
        gitmem(mine, "add", "fact", text)
    gitmem(mine, "push")
    shared = Store.open(str(mine)).own_tip()

    # A hostile teammate: a commit on top of the shared tip whose tree holds one new memory only.
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=mine, capture_output=True, text=True,
                          check=True, input=_memory_yaml()).stdout.strip()
    tree = git(mine, "mktree", input=f"100644 blob {blob}\tzzzzzzzzzzzzzzzz.yaml\n").strip()
    for name in ("z", "z"):
        tree = git(mine, "mktree", input=f"040000 tree {tree}\t{name}\n").strip()
    tree = git(mine, "mktree", input=f"040000 tree {tree}\tfact\n").strip()
    evil = git(mine, "commit-tree", tree, "-p", shared, "-m", "add fact: planted").strip()
    git(mine, "push", "-q", str(origin), f"{evil}:refs/memory/main")
    git(mine, "update-ref", "refs/memory/main", shared)  # back to the shared tip, as before the pull

    result = gitmem(mine, "pull", "--json")
    merged = json.loads(result.stdout)["merged"][0]

    assert merged["kind"] == "merge" and len(merged["kept"]) == 3
    assert {m.text for m in Store.open(str(mine)).list()} == {"keep me", "and me", "me too", "planted"}
    human = gitmem(mine, "pull").stderr
    assert "Traceback" not in human
    git(mine, "fsck", "--strict", "--no-dangling")


def _memory_yaml() -> str:
    return ("schema: 1\nid: zzzzzzzzzzzzzzzz\ntype: fact\nstatus: active\ntext: planted\n"
            "author:\n  name: Mallory\n  email: m@example.com\n  kind: human\nsource: cli\n"
            "created: '2026-12-01T00:00:00Z'\n")
