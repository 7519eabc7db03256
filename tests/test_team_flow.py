"""A team's first week on real git: two clones of one bare origin, with the hooks and
`gitmem remote setup`, sharing memory through plain `git push` and `git pull`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import clone, git, gitmem, make_origin
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
    origin = make_origin(tmp_path)
    clones = []
    for name in ("Alice", "Bob"):
        path = clone(origin, tmp_path / name.lower(), name)
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


@pytest.mark.parametrize("how", [("--no-rebase", "--no-edit"), ("--rebase",)], ids=["merge", "rebase"])
def test_a_non_fast_forward_git_pull_merges_both_sides_memory(team, how):
    """By a merge (post-merge) or by a rebase (git runs no post-merge then: post-rewrite takes the memory)."""
    alice, bob, _ = team
    gitmem(alice, "add", "fact", "from alice")
    commit_code(alice, "a.txt")
    git(alice, "push", "-q")
    gitmem(bob, "add", "fact", "from bob")
    commit_code(bob, "b.txt")
    git(bob, "pull", "-q", *how)
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


def merge_on_the_server(tmp_path: Path, origin: Path, branch: str) -> None:
    """A pull request merged on the hosting side: plain git, no gitmem, code only."""
    server = tmp_path / "server"
    if not server.exists():
        git(tmp_path, "clone", "-q", str(origin), "server")
    git(server, "fetch", "-q")
    git(server, "merge", "-q", "--no-ff", "--no-edit", f"origin/{branch}")
    git(server, "push", "-q", "origin", "HEAD:main")


def test_a_merge_on_the_server_then_git_pull_and_sync_brings_the_branchs_memory_to_both(team, tmp_path):
    alice, bob, origin = team
    gitmem(alice, "add", "fact", "on main")
    commit_code(alice, "main.txt")
    git(alice, "push", "-q")
    git(bob, "pull", "-q")
    git(alice, "checkout", "-q", "-b", "feature")
    gitmem(alice, "add", "decision", "Retry webhooks with backoff", "--because", "the provider drops bursts")
    commit_code(alice, "hooks.txt")
    git(alice, "push", "-q", "origin")  # the remote-setup refspecs: HEAD and refs/memory/*
    merge_on_the_server(tmp_path, origin, "feature")

    for teammate in (alice, bob):
        git(teammate, "checkout", "-q", "main")
        git(teammate, "pull", "-q", "--ff-only")
        out = gitmem(teammate, "sync").stdout
        assert out.count("feature:") == 1, out
    assert texts(alice) == texts(bob) == {"on main", "Retry webhooks with backoff"}


def test_a_pull_keeps_what_a_branch_without_memory_of_its_own_read_from_its_parent(team):
    """bob's feature reads main's memory, which holds a decision bob has not pushed; alice writes feature's first
    memory and pushes it. bob's pull must not start his feature at alice's copy, which lacks the decision: it
    merges the two, as a `git pull` (post-merge) and sync do. A branch bob has no code of starts at the copy."""
    alice, bob, origin = team
    git(bob, "checkout", "-q", "-b", "feature")
    commit_code(bob, "f.txt")
    git(bob, "push", "-q", "origin", "feature")
    git(bob, "checkout", "-q", "main")
    gitmem(bob, "add", "decision", "Queue jobs in Postgres", "--because", "no new service")
    git(bob, "checkout", "-q", "feature")
    git(alice, "fetch", "-q")
    git(alice, "checkout", "-q", "feature")
    gitmem(alice, "add", "fact", "Feature flags live in config")
    git(alice, "branch", "-q", "spike")
    gitmem(alice, "--branch", "spike", "add", "fact", "Spike fact")
    gitmem(alice, "push", "--all")
    gitmem(bob, "pull")
    assert texts(bob) == {"Queue jobs in Postgres", "Feature flags live in config"}
    assert Store.open(str(bob), "spike").own_tip() == Store.open(str(alice), "spike").own_tip()


def test_a_teammates_branch_with_no_commit_of_its_own_keeps_its_memory_off_main(team):
    """Bob pushes a new branch with speculative memory and no commit yet: its tip is a commit main has. Only a
    commit past the branch's fork point makes its memory part of main's; bob's clone recorded that fork point,
    alice's had no record of it, so her sync (and a `git pull` that brought the commit) merged bob's
    speculation into main. The fork point travels with the branch's memory. Once bob commits and the branch
    merges, its memory reaches main as before."""
    alice, bob, origin = team
    gitmem(alice, "add", "fact", "on main")
    commit_code(alice, "main.txt")
    git(alice, "push", "-q")
    git(bob, "pull", "-q")
    git(bob, "checkout", "-q", "-b", "spike")
    gitmem(bob, "add", "decision", "Move the queue to Kafka", "--because", "just trying")
    git(bob, "push", "-q", "-u", "origin", "HEAD", "refs/memory/spike")

    git(alice, "pull", "-q")  # fetches the spike's code and memory
    gitmem(alice, "sync")
    assert texts(alice) == {"on main"}
    git(bob, "checkout", "-q", "main")
    commit_code(bob, "later.txt")  # a commit alice lacks; the next spike starts at it
    git(bob, "checkout", "-q", "-b", "spike2")
    gitmem(bob, "add", "decision", "Drop the retry queue", "--because", "just trying too")
    git(bob, "push", "-q", "origin", "main", "spike2", "refs/memory/spike2")
    git(alice, "pull", "-q", "--ff-only")  # brings spike2's tip into main: post-merge
    gitmem(alice, "sync")
    assert texts(alice) == {"on main"}

    git(bob, "checkout", "-q", "spike")
    commit_code(bob, "kafka.txt")
    git(bob, "push", "-q")
    git(alice, "fetch", "-q")
    git(alice, "merge", "-q", "--no-ff", "--no-edit", "origin/spike")
    assert texts(alice) == {"on main", "Move the queue to Kafka"}


def test_git_pull_and_sync_in_a_plain_clone_fetches_the_memory_it_needs(team, tmp_path):
    alice, _, origin = team
    git(alice, "checkout", "-q", "-b", "feature")
    gitmem(alice, "add", "fact", "feature memory")
    commit_code(alice, "f.txt")
    git(alice, "push", "-q", "origin")  # the remote-setup refspecs: HEAD and refs/memory/*
    plain = tmp_path / "plain"  # no hooks, no `remote setup`: git fetches no memory
    git(tmp_path, "clone", "-q", str(origin), "plain")
    merge_on_the_server(tmp_path, origin, "feature")

    git(plain, "pull", "-q", "--ff-only")
    out = json.loads(gitmem(plain, "sync", "--json").stdout)
    assert out["fetched"] == "origin"
    assert [(m["branch"], m["kind"]) for m in out["merged"]] == [("feature", "fast-forward")]
    assert texts(plain) == {"feature memory"}
    again = json.loads(gitmem(plain, "sync", "--json").stdout)
    assert [(m["branch"], m["kind"]) for m in again["merged"]] == [("feature", "up-to-date")]


def test_sync_says_when_it_cannot_fetch(team, tmp_path):
    alice, _, origin = team
    git(alice, "remote", "set-url", "origin", str(tmp_path / "gone.git"))
    r = gitmem(alice, "sync", check=False)
    assert r.returncode == 1 and r.stderr.startswith("Error: could not reach origin")
    assert "nothing to merge" in gitmem(alice, "sync", "--no-fetch").stdout


def test_a_cherry_pick_says_which_memory_stayed_behind_and_following_the_hint_shares_it(team):
    alice, bob, _ = team
    gitmem(alice, "add", "fact", "on main")
    commit_code(alice, "main.txt")
    git(alice, "push", "-q")
    git(bob, "pull", "-q")
    git(alice, "checkout", "-q", "-b", "hotfix")
    fix = json.loads(gitmem(alice, "add", "decision", "Retry refunds once", "--because", "the provider times out",
                            "--json").stdout)["id"]
    commit_code(alice, "fix.txt")  # the post-commit hook links the decision to this commit
    picked = git(alice, "rev-parse", "HEAD").strip()
    git(alice, "checkout", "-q", "main")

    result = subprocess.run(["git", "cherry-pick", "-x", picked], cwd=alice, capture_output=True, text=True)
    assert result.returncode == 0
    assert f"its memory on hotfix did not come along ({fix})" in result.stderr
    assert "`gitmem merge hotfix`" in result.stderr
    assert "Retry refunds once" not in texts(alice)

    gitmem(alice, "merge", "hotfix")
    git(alice, "push", "-q")
    git(bob, "pull", "-q", "--ff-only")
    assert texts(alice) == texts(bob) == {"on main", "Retry refunds once"}


def test_a_teammates_branch_that_is_on_the_remote_is_not_called_deleted(team):
    """After a pull, a teammate's branch has memory here and code only as origin/<branch>: its code exists
    (prune leaves it alone), so `gitmem branch` must not call it deleted, nor list it deleted in --json; renamed
    here, it is still named as renamed."""
    alice, bob, _ = team
    git(alice, "checkout", "-q", "-b", "feature")
    gitmem(alice, "add", "fact", "feature memory")
    commit_code(alice, "f.txt")
    git(alice, "push", "-q", "-u", "origin", "feature")
    gitmem(alice, "push")
    git(bob, "pull", "-q")  # the code of feature arrives as origin/feature
    gitmem(bob, "pull")  # and its memory as refs/memory/feature

    assert "code deleted" not in gitmem(bob, "branch").stdout
    listed = {b["name"]: b for b in json.loads(gitmem(bob, "branch", "--json").stdout)["branches"]}
    assert listed["feature"]["code"] == "exists"
    assert "nothing to prune" in gitmem(bob, "prune").stdout + gitmem(bob, "prune").stderr

    git(alice, "branch", "-m", "feature", "renamed")  # origin/feature still has the code under the old name
    assert "code renamed to renamed: gitmem branch -m feature renamed" in gitmem(alice, "branch").stdout

    git(alice, "push", "-q", "origin", ":feature")  # merged on the server and deleted there
    git(bob, "fetch", "-q", "--prune")
    assert "code deleted" in gitmem(bob, "branch").stdout


def stack_on_alices_branch(alice: Path, bob: Path, *, link: bool = True) -> None:
    """Alice pushes feat-a (a fact written before its commit, linked to it by the hook unless ``link`` is False) and
    its memory; bob, who has only main's memory, starts feat-b on origin/feat-a and writes before he pulls."""
    gitmem(alice, "add", "fact", "on main")
    commit_code(alice, "main.txt")
    git(alice, "push", "-q")
    git(bob, "pull", "-q")  # main's memory
    git(alice, "checkout", "-q", "-b", "feat-a")
    gitmem(alice, "add", "fact", "feat-a fact")
    commit_code(alice, "a.txt") if link else git(alice, "commit", "-q", "--allow-empty", "-m", "a",
                                                 env={"GITMEM_HOOKS": "0"})
    gitmem(alice, "add", "fact", "feat-a after the fork")  # written for feat-a's next commit: speculative
    git(alice, "push", "-q", "-u", "origin", "feat-a")
    gitmem(alice, "push", "--all")
    git(bob, "fetch", "-q")
    git(bob, "checkout", "-q", "-b", "feat-b", "origin/feat-a")
    gitmem(bob, "add", "fact", "bob")


def test_a_branch_started_before_its_parents_memory_arrived_takes_it_as_of_the_fork(team):
    """feat-b's first write forked main's memory (feat-a had none here yet). The memory commit that links
    feat-b's fork point tells exactly what feat-a's memory held there: pull merges that, not feat-a's later
    speculation; sync then has nothing more to do."""
    alice, bob, _ = team
    stack_on_alices_branch(alice, bob)

    out = gitmem(bob, "pull")
    assert "feat-b started before feat-a's memory arrived" in out.stdout
    assert texts(bob) == {"on main", "feat-a fact", "bob"}
    assert "nothing to merge" in gitmem(bob, "sync").stdout
    assert "started before" not in gitmem(bob, "status").stdout
    assert texts(bob) == {"on main", "feat-a fact", "bob"}


def test_sync_brings_a_late_parents_memory_as_of_the_fork_too(team):
    alice, bob, _ = team
    stack_on_alices_branch(alice, bob)
    gitmem(bob, "pull", "--branch", "feat-a")  # pulled for feat-a alone: feat-b is left to sync
    assert "started before feat-a's memory arrived: `gitmem sync`" in gitmem(bob, "status").stdout

    out = json.loads(gitmem(bob, "sync", "--json").stdout)
    assert [(m["branch"], m["kind"], m["as_of"]) for m in out["merged"]] == [
        ("feat-a", "merge", git(bob, "rev-parse", "origin/feat-a").strip())]
    assert texts(bob) == {"on main", "feat-a fact", "bob"}


def test_when_the_fork_point_is_linked_to_no_memory_commit_pull_status_and_sync_say_so(team):
    """Without a link commit for the fork point (alice committed without the hooks), which of feat-a's memories
    came before the fork cannot be told: nothing is merged silently, and each command names the one that would."""
    alice, bob, _ = team
    stack_on_alices_branch(alice, bob, link=False)

    said = "feat-b started before feat-a's memory arrived"
    assert said in gitmem(bob, "pull").stderr
    assert texts(bob) == {"on main", "bob"}
    assert said in gitmem(bob, "status").stdout and "`gitmem merge feat-a`" in gitmem(bob, "status").stdout
    sync = gitmem(bob, "sync")
    assert said in sync.stderr and "`gitmem merge feat-a`" in sync.stderr
    gitmem(bob, "merge", "feat-a")
    assert "started before" not in gitmem(bob, "status").stdout + gitmem(bob, "sync").stderr


def test_the_pull_that_brings_a_late_parents_memory_says_so_not_every_pull_after(team):
    """"feat-b started before feat-a's memory arrived" was said by every `gitmem pull`: it is news once, when
    the pull brings feat-a's memory (and again when one brings more of it); `gitmem status` keeps naming it."""
    alice, bob, _ = team
    stack_on_alices_branch(alice, bob, link=False)
    said = "feat-b started before feat-a's memory arrived"
    assert said in gitmem(bob, "pull").stderr

    again = gitmem(bob, "pull", "--json")
    assert said not in again.stderr and json.loads(again.stdout)["late"] == []
    assert said in gitmem(bob, "status").stdout

    gitmem(alice, "add", "fact", "more on feat-a")
    gitmem(alice, "push")
    assert said in gitmem(bob, "pull").stderr


def test_a_branch_made_in_a_clone_without_the_hooks_keeps_its_memory_off_main_too(team, tmp_path):
    """Carol never ran `gitmem hooks install`: no post-checkout recorded her branch's fork point, yet the
    branch's own reflog names the commit it was created at, and her write carries it, so alice's sync
    still tells her branch (no commit of its own yet) from a merged one."""
    alice, _, origin = team
    carol = clone(origin, tmp_path / "carol", "Carol")
    git(carol, "checkout", "-q", "-b", "spike")
    gitmem(carol, "add", "decision", "Move the queue to Kafka", "--because", "just trying")
    git(carol, "push", "-q", "-u", "origin", "spike")
    gitmem(carol, "push")

    git(alice, "pull", "-q")
    gitmem(alice, "sync")
    assert texts(alice) == set()


def test_a_teammates_branch_checked_out_without_the_hooks_still_merges_once_its_code_does(team, tmp_path):
    """Dave checks out carol's branch, past its fork, and writes on it: that checkout is not where the branch
    forked, so his write names no fork point there, and a fast-forward of main to the branch brings its memory."""
    alice, _, origin = team
    carol, dave = (clone(origin, tmp_path / name.lower(), name) for name in ("Carol", "Dave"))
    git(carol, "checkout", "-q", "-b", "feature")
    gitmem(carol, "add", "decision", "Retry webhooks with backoff", "--because", "providers flap")
    commit_code(carol, "webhooks.txt")
    git(carol, "push", "-q", "-u", "origin", "feature")
    gitmem(carol, "push")
    git(dave, "fetch", "-q")
    git(dave, "checkout", "-q", "feature")
    gitmem(dave, "pull")
    gitmem(dave, "add", "fact", "Webhook retries stop after a day")
    gitmem(dave, "push")
    git(carol, "checkout", "-q", "main")
    git(carol, "merge", "-q", "--ff-only", "feature")
    git(carol, "push", "-q", "origin", "main")

    git(alice, "pull", "-q", "--ff-only")
    gitmem(alice, "sync")
    assert texts(alice) == {"Retry webhooks with backoff", "Webhook retries stop after a day"}


def test_a_parents_memory_written_and_pushed_here_after_the_fork_is_not_said_to_have_arrived(team):
    """Alice's feature found no memory on main at its first write; she then wrote main's memory and pushed it
    (which moves the fetched copy too). It came from no one: feature is not told main's memory arrived late."""
    alice, bob, _ = team
    git(alice, "checkout", "-q", "-b", "feature")
    gitmem(alice, "add", "fact", "feature's own")
    git(alice, "checkout", "-q", "main")
    gitmem(alice, "add", "fact", "main's later fact")
    commit_code(alice, "main.txt")
    git(alice, "push", "-q")  # `remote setup`'s refspecs push the memory too
    gitmem(alice, "push")
    git(alice, "checkout", "-q", "feature")

    assert "started before" not in gitmem(alice, "status").stdout + gitmem(alice, "sync").stderr
    assert texts(alice) == {"feature's own"}
