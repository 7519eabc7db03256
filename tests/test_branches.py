"""Memory follows code branches: end to end with the hooks installed and the real git."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pygit2
import pytest

from gitmem import Store
from gitmem.branches import diff, fork_point, list_branches, prune, render_diff
from gitmem.repo import parent_chain

from conftest import DAMAGES, damage_ref, git, gitmem, make_repo


def tip(repo, branch):
    return Store.open(str(repo), branch).own_tip()


def parents(repo, commit):
    return [str(p) for p in pygit2.Repository(str(repo))[commit].parent_ids]


#: A branch created again in the same second, from the same commit, as the deleted one of its name cannot be
#: told from it (gitmem.branches.created_now): these tests create it again a second later, as people do.
AGAIN = {"GIT_COMMITTER_DATE": "2031-01-01T00:00:00Z"}


def with_hooks(path):
    git(path, "config", "gitmem.hookMode", "foreground")  # post-commit waits, so tests can look right after
    gitmem(path, "hooks", "install")
    return path


def add(path, *args):
    return json.loads(gitmem(path, "add", *args, "--json").stdout)


def ids(path, branch):
    return set(Store.open(str(path), branch).memories())


def commit_file(path, name, text="x\n", message=None):
    (path / name).write_text(text)
    git(path, "add", name)
    git(path, "commit", "-q", "-m", message or f"add {name}")


def test_feature_memory_stays_off_main_until_the_code_merges(repo):
    with_hooks(repo)
    base = add(repo, "fact", "on main before the branch")["id"]
    git(repo, "checkout", "-q", "-b", "feature")
    assert fork_point(pygit2.Repository(str(repo)), "feature")[0] == "main"
    assert ids(repo, "feature") == {base}  # reads inherit main, no ref yet
    assert "refs/memory/feature" not in pygit2.Repository(str(repo)).references
    main_tip = tip(repo, "main")
    speculative = add(repo, "decision", "Queue jobs in Postgres", "--path", "jobs.py")["id"]
    commit_file(repo, "jobs.py")
    assert tip(repo, "main") == main_tip and speculative not in ids(repo, "main")

    git(repo, "checkout", "-q", "main")
    moved = add(repo, "fact", "main moved on")["id"]
    before = tip(repo, "main")
    git(repo, "merge", "-q", "--no-ff", "--no-edit", "feature")
    assert speculative in ids(repo, "main")
    merge, link = parents(repo, tip(repo, "main"))[0], tip(repo, "main")  # the memory merge, then its link
    assert parents(repo, merge) == [before, tip(repo, "feature")]
    head = git(repo, "rev-parse", "HEAD").strip()
    assert Store.open(str(repo)).get(moved).commits == (head,)  # main's own write since its last commit
    assert head in pygit2.Repository(str(repo))[link].message


def test_a_merge_made_before_the_branch_s_background_post_commit_ran_still_links_its_last_commit(repo):
    with_hooks(repo)
    git(repo, "checkout", "-q", "-b", "feature")
    speculative = add(repo, "decision", "Queue jobs in Postgres")["id"]
    (repo / "jobs.py").write_text("x\n")
    git(repo, "add", "jobs.py")
    git(repo, "commit", "-q", "-m", "jobs", env={"GITMEM_HOOKS": "0"})  # its hook has not run yet
    last = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "--no-edit", "feature")  # a script, an agent: at once
    assert last in Store.open(str(repo)).get(speculative).commits
    gitmem(repo, "hook", "post-commit", last, "refs/heads/feature")  # the late background hook: nothing left
    git(repo, "merge-base", "--is-ancestor", tip(repo, "feature"), tip(repo, "main"))
    assert next(b for b in list_branches(pygit2.Repository(str(repo))) if b.name == "feature").memory_merged


def test_a_merge_concluded_with_git_commit_after_a_conflict_merges_memory(repo):
    """git runs post-merge only for a merge it commits itself: one that stopped on a conflict and was
    concluded with `git commit` reaches gitmem through post-commit, and the memory merges there."""
    with_hooks(repo)
    git(repo, "checkout", "-q", "-b", "feature")
    decided = add(repo, "decision", "Queue jobs in Postgres")["id"]
    commit_file(repo, "f.txt", "feature\n")
    git(repo, "checkout", "-q", "main")
    add(repo, "fact", "main moved on")
    commit_file(repo, "f.txt", "main\n")
    stopped = subprocess.run(["git", "merge", "feature"], cwd=repo, capture_output=True, text=True)
    assert stopped.returncode != 0 and decided not in ids(repo, "main")  # the code conflict stops it
    resolved = add(repo, "decision", "Took the feature side", "--because", "newer")["id"]
    (repo / "f.txt").write_text("both\n")
    git(repo, "add", "f.txt")
    git(repo, "commit", "-q", "--no-edit")
    assert decided in ids(repo, "main")
    assert any(tip(repo, "feature") in parents(repo, c) for c in (tip(repo, "main"), *parents(repo, tip(repo, "main"))))
    head = git(repo, "rev-parse", "HEAD").strip()
    assert Store.open(str(repo)).get(resolved).commits == (head,)  # written while resolving: linked to it


def test_a_spike_forked_from_a_merged_branch_without_a_commit_keeps_its_memory_to_itself(repo):
    """The spike's tip is the commit of feature it forked at, so the merge contains it: only a commit past
    its recorded fork point makes a branch's memory part of a merge."""
    with_hooks(repo)
    git(repo, "checkout", "-q", "-b", "feature")
    kept = add(repo, "fact", "feature fact")["id"]
    commit_file(repo, "f1.txt")
    git(repo, "checkout", "-q", "-b", "spike")
    tried = add(repo, "rejection", "Redis is fine for queues", "--because", "just trying")["id"]
    git(repo, "checkout", "-q", "feature")
    commit_file(repo, "f2.txt")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "--no-edit", "feature")
    assert kept in ids(repo, "main") and tried not in ids(repo, "main")


def test_a_branch_created_again_under_a_deleted_ones_name_starts_from_its_parents_memory(repo):
    """`git branch -D` leaves the branch's memory behind: a new branch of that name must not take an abandoned
    spike's memory as its own (and merge it into main); it is set aside under another name, kept whole."""
    with_hooks(repo)
    git(repo, "checkout", "-q", "-b", "wip")
    spike = add(repo, "rejection", "Drop the retry queue", "--because", "spike only")["id"]
    commit_file(repo, "spike.txt")
    git(repo, "checkout", "-q", "main")
    git(repo, "branch", "-q", "-D", "wip")
    git(repo, "checkout", "-q", "-b", "wip", env=AGAIN)  # (in another second than the deleted one: see created_now)
    assert spike not in ids(repo, "wip")
    aside = [n for n in pygit2.Repository(str(repo)).references if n.startswith("refs/memory-aside/wip.earlier-")]
    assert len(aside) == 1 and spike in ids(repo, aside[0][len("refs/memory-aside/"):])  # kept, under another name
    commit_file(repo, "work.txt")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "--no-edit", "wip")
    assert spike not in ids(repo, "main")


def wip_set_aside(path):
    """wip, with a spike fact, deleted and created again with new work: the hooks set the earlier wip's memory
    aside here. Returns the name it is kept under (wip.earlier-TIP) and the spike fact's id."""
    with_hooks(path)
    git(path, "checkout", "-q", "-b", "wip")
    spike = add(path, "fact", "spike fact")["id"]
    commit_file(path, "spike.txt")
    git(path, "checkout", "-q", "main")
    git(path, "branch", "-q", "-D", "wip")
    git(path, "checkout", "-q", "-b", "wip", env=AGAIN)
    add(path, "fact", "new work")
    aside = next(n[len("refs/memory-aside/"):] for n in pygit2.Repository(str(path)).references
                 if n.startswith("refs/memory-aside/wip.earlier-"))
    return aside, spike


def test_memory_set_aside_and_merged_into_the_new_branch_is_named_merged_and_pruned_as_merged(tmp_path):
    """After `gitmem merge wip.earlier-X` into the new wip, as the set-aside notice offers, status still said the
    merge "brings it in" and `prune --yes` kept it as "not in main's memory": all of it is in wip's memory, the
    branch it was set aside from, as for a renamed branch's memory merged into the new name's."""
    _, repo, _ = clones(tmp_path)  # status names set-aside memory among the remotes' copies too
    aside, spike = wip_set_aside(repo)
    assert f"`gitmem merge {aside}` brings it in" in gitmem(repo, "status").stdout
    assert "kept refs/memory-aside/" in gitmem(repo, "prune", "--yes").stdout  # not merged yet: only --force

    gitmem(repo, "merge", aside)

    shown = gitmem(repo, "status").stdout
    assert f"`gitmem merge {aside}` brings it in" not in shown
    assert f"memory {aside}: your memory of the earlier 'wip', set aside here, is all in wip's memory: " \
        "`gitmem prune --yes` drops it" in shown, shown
    listing = gitmem(repo, "prune").stdout
    assert f"would delete refs/memory-aside/{aside}" in listing and "all of it is in wip's memory" in listing, listing
    pruned = json.loads(gitmem(repo, "prune", "--yes", "--json").stdout)
    assert pruned["kept"] == [] and [(b["name"], b["merged_into"]) for b in pruned["branches"]] == [(aside, "wip")]
    assert git(repo, "for-each-ref", "refs/memory-aside/") == "" and spike in ids(repo, "wip")


def test_status_names_memory_set_aside_here_with_no_remote_configured(repo):
    """status named set-aside memory only among the remotes' copies: a clone with no remote never heard of the
    memory it set aside, nor, once that was merged into the new wip, that prune drops it."""
    aside, _ = wip_set_aside(repo)
    kept = (f"memory {aside}: your memory of the earlier 'wip', set aside here and kept in this clone, not pushed: "
            f"`gitmem merge {aside}` brings it in, `gitmem prune` drops it")
    merged = f"memory {aside}: your memory of the earlier 'wip', set aside here, is all in wip's memory: " \
        "`gitmem prune --yes` drops it"
    shown = gitmem(repo, "status").stdout
    assert kept in shown, shown
    status = json.loads(gitmem(repo, "status", "--json").stdout)
    assert status["remotes"] == [] and status["set_aside"] == [{"branch": aside, "aside": "wip", "aside_merged": False}]

    gitmem(repo, "merge", aside)
    git(repo, "pack-refs", "--all")  # read from packed-refs too

    shown = gitmem(repo, "status").stdout
    assert merged in shown and kept not in shown, shown
    assert json.loads(gitmem(repo, "status", "--json").stdout)["set_aside"] == [
        {"branch": aside, "aside": "wip", "aside_merged": True}]
    gitmem(repo, "prune", "--yes")
    assert aside not in gitmem(repo, "status").stdout
    assert json.loads(gitmem(repo, "status", "--json").stdout)["set_aside"] == []


def test_branch_lists_memory_set_aside_and_merged_into_the_new_branch_as_merged(repo):
    """`gitmem branch` listed set-aside memory merged into the new wip (`gitmem merge wip.earlier-X`, as the
    set-aside notice offers) as not merged, while status and prune count it merged (branches.merged_back)."""
    aside, _ = wip_set_aside(repo)

    def listed():
        line = next(x for x in gitmem(repo, "branch").stdout.splitlines() if aside in x)
        info = next(b for b in json.loads(gitmem(repo, "branch", "--json").stdout)["branches"] if b["name"] == aside)
        return line, info

    line, info = listed()
    assert "merged" not in line and (info["memory_merged"], info["merged_into"]) == (False, None), line

    gitmem(repo, "merge", aside)

    line, info = listed()
    assert "memory merged into wip" in line, line
    assert (info["memory_merged"], info["merged_into"]) == (True, "wip")
    assert [(b.name, b.memory_merged, b.merged_into) for b in list_branches(pygit2.Repository(str(repo)))
            if b.name == aside] == [(aside, True, "wip")]


def test_branch_labels_memory_set_aside_here_as_set_aside_not_as_code_deleted(repo):
    """`gitmem branch` said "code deleted" of wip.earlier-X, memory set aside here that never had code of its own:
    it names the branch it was set aside from, in the listing and in the JSON."""
    aside, _ = wip_set_aside(repo)
    line = next(x for x in gitmem(repo, "branch").stdout.splitlines() if aside in x)
    assert "set aside from wip" in line and "code deleted" not in line, line
    info = {b["name"]: b for b in json.loads(gitmem(repo, "branch", "--json").stdout)["branches"]}
    assert (info[aside]["set_aside_from"], info[aside]["code"]) == ("wip", "deleted")
    assert info["wip"]["set_aside_from"] is None


def test_a_branch_created_again_from_another_start_reads_that_starts_memory(repo):
    """x was made from spike and deleted without a write: its fork record is an earlier branch's, and the
    new x, made from main, reads main's memory, not spike's."""
    with_hooks(repo)
    add(repo, "note", "main memory")
    git(repo, "checkout", "-q", "-b", "spike")
    idea = add(repo, "note", "spike-only idea")["id"]
    git(repo, "checkout", "-q", "-b", "x")
    git(repo, "checkout", "-q", "main")
    git(repo, "branch", "-q", "-D", "x")
    git(repo, "checkout", "-q", "-b", "x", "main", env=AGAIN)  # (in another second than the deleted one: see created_now)
    assert fork_point(pygit2.Repository(str(repo)), "x")[0] == "main"
    add(repo, "note", "x work")
    assert idea not in ids(repo, "x")


def test_only_a_branchs_own_memory_tells_whether_it_is_an_earlier_branchs(repo):
    """Main's memory may be linked to commits no branch has (a spike merged by gitmem, its branch deleted):
    a branch inherits that memory, and it says nothing about whose the branch's memory is."""
    with_hooks(repo)
    git(repo, "checkout", "-q", "-b", "spike")
    add(repo, "decision", "Spike: Redis", "--because", "tried")
    commit_file(repo, "spike.txt")
    git(repo, "checkout", "-q", "main")
    gitmem(repo, "merge", "spike")
    git(repo, "branch", "-q", "-D", "spike")  # main's memory now names a commit no branch has
    git(repo, "checkout", "-q", "-b", "topic")
    mine = add(repo, "decision", "Topic: gRPC", "--because", "typed")["id"]
    commit_file(repo, "topic.txt")
    git(repo, "branch", "-q", "keep", "topic")  # topic's commit stays on a branch
    git(repo, "checkout", "-q", "main")
    git(repo, "branch", "-q", "-D", "topic")
    git(repo, "checkout", "-q", "-b", "topic", env=AGAIN)  # (in another second than the deleted one: see created_now)
    assert mine in ids(repo, "topic")
    assert not [n for n in pygit2.Repository(str(repo)).references if ".earlier-" in n]


def test_a_branch_checked_out_again_before_its_first_commit_keeps_its_record(repo):
    with_hooks(repo)
    git(repo, "checkout", "-q", "-b", "dev")
    decided = add(repo, "decision", "dev D", "--because", "d")["id"]
    git(repo, "checkout", "-q", "-b", "feat")
    git(repo, "checkout", "-q", "main")
    git(repo, "checkout", "-q", "feat")
    assert fork_point(pygit2.Repository(str(repo)), "feat")[0] == "dev" and decided in ids(repo, "feat")


def test_a_branch_a_new_worktree_creates_is_recorded_as_any_new_branch(repo, tmp_path):
    with_hooks(repo)
    add(repo, "fact", "main memory")
    git(repo, "worktree", "add", "-q", "-b", "side", str(tmp_path / "side"))
    assert fork_point(pygit2.Repository(str(repo)), "side")[0] == "main"


def test_memory_set_aside_stays_apart_when_the_remote_still_holds_it(tmp_path):
    """The remote keeps the deleted branch's memory under the name: a pull does not merge it back into the
    new branch, and a push says so rather than merging it (a person decides)."""
    _, a, _ = clones(tmp_path)
    with_hooks(a)
    git(a, "checkout", "-q", "-b", "feature")
    old = add(a, "decision", "Old spike", "--because", "x")["id"]
    commit_file(a, "spike.txt")
    gitmem(a, "push")
    git(a, "checkout", "-q", "main")
    git(a, "branch", "-q", "-D", "feature")
    git(a, "checkout", "-q", "-b", "feature", env=AGAIN)
    add(a, "decision", "New work", "--because", "y")
    pushed = gitmem(a, "push", check=False)
    assert pushed.returncode == 1 and "earlier 'feature'" in pushed.stderr
    gitmem(a, "pull")
    assert old not in ids(a, "feature")
    assert "memory feature: not taken again" in gitmem(a, "status").stdout  # the push said so, the pull need not
    commit_file(a, "new.txt")
    git(a, "push", "-q", "origin", "feature")  # the code of the new feature, there now
    gitmem(a, "sync")
    assert old not in ids(a, "feature")


def _feature_created_again(tmp_path):
    """Clone a pushes feature's memory, b pulls it, then a deletes feature and creates it again (setting the old
    memory aside). Returns (a, b, the old memory's id)."""
    _, a, b = clones(tmp_path)
    with_hooks(a)
    git(a, "checkout", "-q", "-b", "feature")
    old = add(a, "decision", "Old spike", "--because", "x")["id"]
    commit_file(a, "spike.txt")
    git(a, "push", "-q", "origin", "feature")
    gitmem(a, "push")
    gitmem(b, "pull")
    git(a, "checkout", "-q", "main")
    git(a, "branch", "-q", "-D", "feature")
    git(a, "push", "-q", "origin", ":feature")
    git(a, "checkout", "-q", "-b", "feature", env=AGAIN)
    return a, b, old


def _new_feature_pushed(a):
    new = add(a, "decision", "New work", "--because", "y")["id"]
    commit_file(a, "new.txt")
    git(a, "push", "-q", "origin", "feature")
    git(a, "push", "-q", "origin", ":refs/memory/feature")  # as a's push tells: the remote's copy is the old one
    gitmem(a, "push")
    return new


def test_a_teammate_holding_memory_set_aside_elsewhere_sets_it_aside_too(tmp_path):
    """b still holds the old feature's memory: his pull must not merge it into the new feature's (and his push
    send it back to a), nor lose it: it is set aside on his clone too, under the name the message gives."""
    a, b, old = _feature_created_again(tmp_path)
    new = _new_feature_pushed(a)
    pulled = json.loads(gitmem(b, "pull", "--json").stdout)
    assert ids(b, "feature") == {new}
    assert old in ids(b, pulled["set_aside"]["feature"])
    gitmem(b, "push", "--all")
    gitmem(a, "pull")
    assert old not in ids(a, "feature")


def test_status_before_a_pull_names_a_remote_copy_that_is_a_new_branchs_memory(tmp_path):
    """b fetched the new feature's memory: status said "N ahead, M behind" as if a pull would merge the two, while
    the pull sets b's memory of the earlier feature aside and takes the new one: it says so, as the pull would."""
    a, b, old = _feature_created_again(tmp_path)
    _new_feature_pushed(a)
    gitmem(b, "fetch")

    shown = gitmem(b, "status").stdout

    assert "feature vs origin" not in shown, shown
    assert "memory feature: origin's is a new branch's of that name, which set aside the earlier one's: `gitmem pull` " \
        "sets your memory of the earlier 'feature' aside, not merged, and takes it" in shown, shown
    remote = next(r for r in json.loads(gitmem(b, "status", "--json").stdout)["remotes"] if r["branch"] == "feature")
    assert remote["new_branch"] is True
    pulled = json.loads(gitmem(b, "pull", "--json").stdout)
    assert old in ids(b, pulled["set_aside"]["feature"])
    assert not any(r["new_branch"] for r in json.loads(gitmem(b, "status", "--json").stdout)["remotes"])


def test_a_teammates_push_of_memory_set_aside_elsewhere_is_refused_and_sets_it_aside(tmp_path):
    a, b, old = _feature_created_again(tmp_path)
    new = _new_feature_pushed(a)
    gitmem(b, "--branch", "feature", "add", "fact", "More on the spike")
    pushed = gitmem(b, "push", "--branch", "feature", check=False)
    aside = [n[len("refs/memory-aside/"):] for n in pygit2.Repository(str(b)).references
             if n.startswith("refs/memory-aside/feature.earlier-")]
    assert pushed.returncode == 1 and len(aside) == 1 and f"now '{aside[0]}'" in pushed.stderr
    assert old in ids(b, aside[0]) and "refs/memory/feature" not in pygit2.Repository(str(b)).references
    gitmem(a, "pull")
    assert ids(a, "feature") == {new}


def test_a_teammates_sync_does_not_bring_memory_set_aside_elsewhere_to_main(tmp_path):
    """The new feature merged into main on the server: b's sync merges its memory, not the old one b holds."""
    a, b, old = _feature_created_again(tmp_path)
    new = _new_feature_pushed(a)
    git(a, "checkout", "-q", "main")
    git(a, "merge", "-q", "--no-ff", "--no-edit", "feature")
    git(a, "push", "-q", "origin", "main")
    git(b, "pull", "-q")
    synced = json.loads(gitmem(b, "sync", "--json").stdout)
    assert new in ids(b, "main") and old not in ids(b, "main")
    assert old in ids(b, synced["set_aside"]["feature"])


def test_memory_set_aside_here_that_a_teammate_added_to_is_not_taken_by_the_new_branch(tmp_path):
    """b writes more to the old feature's memory and pushes it: the remote now has more of it than a set aside,
    but a's new feature, before and after its first write, does not take it."""
    a, b, old = _feature_created_again(tmp_path)
    gitmem(b, "--branch", "feature", "add", "fact", "More on the spike")
    gitmem(b, "push", "--branch", "feature")
    assert "feature: not taken again" in gitmem(a, "pull").stderr
    assert old not in ids(a, "feature")
    new = add(a, "decision", "New work", "--because", "y")["id"]
    gitmem(a, "pull")
    assert ids(a, "feature") == {new}


def test_the_new_branchs_memory_a_teammate_merged_the_earlier_one_into_is_taken_where_it_was_set_aside(tmp_path):
    """b set his copy of the old feature's memory aside, then merged it into the new feature's on purpose (as his
    pull told him he could) and pushed. That copy is the new branch's memory, with a's own writes in it: a's pull
    took it for the earlier branch's ("not taken again") and her push told her to delete the team's memory."""
    a, b, old = _feature_created_again(tmp_path)
    new = _new_feature_pushed(a)
    aside = json.loads(gitmem(b, "pull", "--json").stdout)["set_aside"]["feature"]
    gitmem(b, "--branch", "feature", "merge", aside)
    more = json.loads(gitmem(b, "--branch", "feature", "add", "fact", "More on the new work", "--json").stdout)["id"]
    gitmem(b, "push", "--branch", "feature")
    mine = add(a, "fact", "Not pushed yet")["id"]

    pulled = gitmem(a, "pull")

    assert "not taken" not in pulled.stderr
    assert {new, old, more, mine} <= ids(a, "feature")
    gitmem(a, "push")
    gitmem(b, "pull")
    assert mine in ids(b, "feature")


def test_the_pull_that_fetches_memory_it_does_not_take_says_so_not_every_pull_after(tmp_path):
    """"feature: not taken again, it was dropped or set aside here" was said by every `gitmem pull` while the
    remote kept the earlier feature's memory: it is news once, in the pull that fetches that memory (or more of
    it); `gitmem status` names it after, in the place of an "N behind" a pull would never take."""
    a, b, old = _feature_created_again(tmp_path)
    gitmem(b, "--branch", "feature", "add", "fact", "More on the spike")
    gitmem(b, "push", "--branch", "feature")
    said = "feature: not taken again, it was dropped or set aside here " \
        "(`gitmem merge refs/memory-remotes/origin/feature` brings it)"

    first = gitmem(a, "pull")
    again = gitmem(a, "pull")

    assert said in first.stderr
    assert "not taken" not in again.stderr and "no memory yet" not in again.stderr
    assert json.loads(gitmem(a, "pull", "--json").stdout)["skipped"] == []
    assert f"memory {said}" in gitmem(a, "status").stdout
    [copy] = [r for r in json.loads(gitmem(a, "status", "--json").stdout)["remotes"] if r["branch"] == "feature"]
    assert copy["skipped"] and old not in ids(a, "feature")
    gitmem(b, "--branch", "feature", "add", "fact", "Still more on the spike")
    gitmem(b, "push", "--branch", "feature")
    assert json.loads(gitmem(a, "pull", "--json").stdout)["skipped"] == ["feature"]  # more arrived, not taken


def test_a_branch_created_again_under_a_merged_ones_name_reads_its_new_parents_memory(repo):
    """The old feat's memory is all in main's (merged there): a new feat made from rel reads rel's memory, not
    that old tip."""
    with_hooks(repo)
    add(repo, "fact", "main fact")
    git(repo, "checkout", "-q", "-b", "feat")
    add(repo, "decision", "Feat decision", "--because", "x")
    commit_file(repo, "feat.txt")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "feat")
    git(repo, "branch", "-q", "-d", "feat")
    git(repo, "checkout", "-q", "-b", "rel")
    later = add(repo, "fact", "rel fact")["id"]
    commit_file(repo, "rel.txt")
    git(repo, "checkout", "-q", "-b", "feat", "rel", env=AGAIN)
    assert later in ids(repo, "feat") and fork_point(pygit2.Repository(str(repo)), "feat")[0] == "rel"


def test_a_teammates_branch_checked_out_keeps_its_memory(tmp_path):
    """Memory pulled for a branch checked out from its remote-tracking copy is that branch's: checking the
    branch out takes it, nothing is set aside, even when the commit it is linked to was rewritten before
    the push (here without the hooks, so the link still names the old commit)."""
    _, a, b = clones(tmp_path)
    with_hooks(a)
    git(a, "checkout", "-q", "-b", "fix")
    shared = add(a, "decision", "Retry twice")["id"]
    commit_file(a, "fix.txt")  # links the decision to this commit
    git(a, "-c", "core.hooksPath=/dev/null", "commit", "-q", "--amend", "-m", "fix, reworded")
    git(a, "push", "-q", "origin", "fix")
    gitmem(a, "push")
    with_hooks(b)
    git(b, "fetch", "-q", "origin")
    gitmem(b, "pull")
    git(b, "checkout", "-q", "fix")
    assert shared in ids(b, "fix")
    assert not [n for n in pygit2.Repository(str(b)).references if ".earlier-" in n]


def test_a_teammates_branch_with_no_commit_of_its_own_is_not_called_merged(tmp_path):
    """Its tip is a commit main has, but its memory names where it forked: sync leaves it out, and so must
    `gitmem branch`, whose hint would otherwise bring its speculation to main."""
    _, a, b = clones(tmp_path)
    with_hooks(a)
    git(a, "checkout", "-q", "-b", "spike")
    add(a, "decision", "Move the queue to Kafka", "--because", "just trying")
    git(a, "push", "-q", "origin", "spike")
    gitmem(a, "push")
    git(b, "fetch", "-q", "origin")
    gitmem(b, "pull")

    assert not {i.name: i for i in list_branches(pygit2.Repository(str(b)))}["spike"].merged
    assert "code merged" not in gitmem(b, "branch").stdout


def test_a_fast_forward_code_merge_fast_forwards_memory(repo):
    with_hooks(repo)
    git(repo, "checkout", "-q", "-b", "feature")
    add(repo, "fact", "feature fact")
    commit_file(repo, "f.txt")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "feature")
    assert tip(repo, "main") == tip(repo, "feature")


def clones(tmp_path):
    """A bare remote, clone `a` (hooks, fetches memory) and clone `b`."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    a = make_repo(tmp_path / "a")
    git(a, "remote", "add", "origin", str(remote))
    git(a, "push", "-q", "-u", "origin", "main")
    b = tmp_path / "b"
    git(tmp_path, "clone", "-q", str(remote), str(b))
    for clone in (a, b):
        git(clone, "config", "user.name", "Test Human")
        git(clone, "config", "user.email", "human@example.com")
        git(clone, "config", "--add", "remote.origin.fetch", "+refs/memory/*:refs/memory-remotes/origin/*")
    return remote, a, b


def push_feature(b):
    git(b, "checkout", "-q", "-b", "feature")
    fid = add(b, "decision", "Retry webhooks with backoff", "--path", "hooks.py")["id"]
    commit_file(b, "hooks.py")
    git(b, "push", "-q", "origin", "feature", "refs/memory/feature:refs/memory/feature")
    return fid


def test_git_pull_from_another_clone_merges_its_memory(tmp_path):
    _, a, b = clones(tmp_path)
    with_hooks(a)
    fid = push_feature(b)
    add(a, "fact", "written on a")
    ours = tip(a, "main")
    git(a, "fetch", "-q", "origin")
    git(a, "pull", "-q", "--no-rebase", "--no-edit", "origin", "feature")
    assert fid in ids(a, "main")
    assert parents(a, tip(a, "main")) == [ours, tip(b, "feature")]


def test_git_rebase_onto_main_brings_mains_memory_as_git_merge_main_does(repo):
    """`git rebase main` puts main's newer code under the feature, as `git merge main` merges it in: the memory
    written for that code comes along too (post-rewrite merged only what sync merges, which leaves out the
    branches a branch was forked from, so a rebased feature never learnt main's new rejection). A parent's
    writes past its code that the rebase does not bring stay out."""
    with_hooks(repo)
    add(repo, "fact", "on main before the branches")
    git(repo, "checkout", "-q", "-b", "parent")
    commit_file(repo, "parent.txt")
    git(repo, "checkout", "-q", "-b", "feature")
    mine = add(repo, "note", "the feature's note")["id"]
    commit_file(repo, "feature.txt")
    git(repo, "checkout", "-q", "parent")
    speculative = add(repo, "decision", "parent's later idea", "--because", "no code yet")["id"]
    git(repo, "checkout", "-q", "main")
    later = add(repo, "rejection", "Use Redis for the queue", "--because", "ops will not run it")["id"]
    commit_file(repo, "main.txt")
    git(repo, "checkout", "-q", "feature")
    git(repo, "rebase", "-q", "main")
    assert {mine, later} <= ids(repo, "feature")
    assert speculative not in ids(repo, "feature")


def test_a_spike_reset_to_code_main_merges_later_does_not_bring_its_memory_to_main(repo):
    """A spike abandoned with `git reset --hard` to where main is going (origin/main, here `next`) looks merged
    once main gets there: `git merge next` (a `git pull`) and `gitmem sync` brought the spike's speculative
    memory, written for code no branch has any more, to main. It is named instead, with the merge that brings it."""
    with_hooks(repo)
    git(repo, "branch", "next")
    git(repo, "checkout", "-q", "next")
    commit_file(repo, "next.txt")
    git(repo, "checkout", "-q", "main")
    git(repo, "checkout", "-q", "-b", "spike")
    speculative = add(repo, "decision", "Shard the queue", "--because", "a spike")["id"]
    commit_file(repo, "spike.txt")
    git(repo, "reset", "-q", "--hard", "next")
    git(repo, "checkout", "-q", "main")
    merged = subprocess.run(["git", "merge", "-q", "next"], cwd=repo, capture_output=True, text=True)
    assert merged.returncode == 0 and speculative not in ids(repo, "main")
    assert "spike: not merged: its memory is linked to code main does not have" in merged.stderr, merged.stderr
    assert "`gitmem merge spike`" in merged.stderr
    synced = gitmem(repo, "sync", "--no-fetch", "--json")
    assert speculative not in ids(repo, "main") and json.loads(synced.stdout)["held"] == ["spike"]
    gitmem(repo, "merge", "spike")
    assert speculative in ids(repo, "main")


def test_gitmem_merge_after_a_squash_merge(repo):
    with_hooks(repo)
    git(repo, "checkout", "-q", "-b", "feature")
    fid = add(repo, "fact", "feature fact")["id"]
    commit_file(repo, "f.txt")
    git(repo, "checkout", "-q", "main")
    add(repo, "fact", "main fact")
    squashed = subprocess.run(["git", "merge", "-q", "--squash", "feature"], cwd=repo, capture_output=True, text=True)
    assert "squash merge: git does not say which branch it was; run `gitmem merge BRANCH`" in squashed.stderr
    git(repo, "commit", "-q", "-m", "squashed feature")
    assert fid not in ids(repo, "main")  # git does not say what a squash merged
    before = tip(repo, "main")
    out = json.loads(gitmem(repo, "merge", "feature", "--json").stdout)
    assert out["merged"][0]["kind"] == "merge" and fid in out["merged"][0]["added"]
    assert parents(repo, tip(repo, "main")) == [before, tip(repo, "feature")]
    again = json.loads(gitmem(repo, "merge", "feature", "--json").stdout)
    assert again["merged"][0]["kind"] == "up-to-date" and tip(repo, "main") != before


@pytest.mark.parametrize("code", ["a file", "no file"])
def test_gitmem_merge_of_a_code_branch_without_memory_merges_the_memory_it_reads_not_its_code(tmp_path, code):
    repo = make_repo(tmp_path / "repo", commit=code == "a file")
    git(repo, "commit", "-q", "--allow-empty", "-m", "start")
    add(repo, "fact", "main fact")
    git(repo, "checkout", "-q", "-b", "feature")
    git(repo, "commit", "-q", "--allow-empty", "-m", "feature work")  # code only: feature reads main's memory
    git(repo, "checkout", "-q", "main")
    before = tip(repo, "main")
    done = gitmem(repo, "merge", "feature", "--json", check=False)
    assert done.returncode == 0, done.stderr
    assert [m["kind"] for m in json.loads(done.stdout)["merged"]] == ["up-to-date"]
    assert tip(repo, "main") == before  # no code commit among the memory's parents


def test_gitmem_sync_after_a_merge_made_elsewhere(tmp_path):
    remote, a, b = clones(tmp_path)
    fid = push_feature(b)
    server = tmp_path / "server"  # stands in for a pull request merged on the server
    git(tmp_path, "clone", "-q", str(remote), str(server))
    git(server, "merge", "-q", "--no-ff", "--no-edit", "origin/feature")
    git(server, "push", "-q", "origin", "main")
    add(a, "fact", "written on a")
    ours = tip(a, "main")
    git(a, "pull", "-q", "--no-rebase", "--no-edit")  # no hooks in a: nothing merges memory
    assert fid not in ids(a, "main")
    out = json.loads(gitmem(a, "sync", "--json").stdout)
    assert [m["branch"] for m in out["merged"]] == ["feature"]
    assert fid in ids(a, "main")
    assert parents(a, tip(a, "main")) == [ours, tip(b, "feature")]
    assert json.loads(gitmem(a, "sync", "--json").stdout)["merged"][0]["kind"] == "up-to-date"


def test_sync_names_the_memory_a_squash_merge_on_the_server_left_behind(tmp_path):
    """A squash merge leaves no code history joining the branch to main, so sync cannot merge its memory
    by itself; once the branch is deleted on the server, sync names it and the command that brings it."""
    remote, a, b = clones(tmp_path)
    fid = push_feature(b)
    server = tmp_path / "server"
    git(tmp_path, "clone", "-q", str(remote), str(server))
    git(server, "merge", "-q", "--squash", "origin/feature")
    git(server, "commit", "-q", "-m", "feature (squashed)")
    git(server, "push", "-q", "origin", "main", ":feature")
    git(a, "pull", "-q", "--no-rebase", "--no-edit")
    git(a, "fetch", "-q", "--prune", "origin")
    synced = gitmem(a, "sync")
    assert "feature: its code branch is gone and its memory is not in main's" in synced.stderr
    assert "`gitmem merge feature` brings it" in synced.stderr
    assert json.loads(gitmem(a, "sync", "--json").stdout)["unmerged"] == ["feature"]
    gitmem(a, "merge", "feature")
    assert fid in ids(a, "main") and json.loads(gitmem(a, "sync", "--json").stdout)["unmerged"] == []


def test_a_conflict_from_a_git_merge_is_listed_shown_in_status_and_resolved(repo):
    with_hooks(repo)
    mid = add(repo, "convention", "Use tabs")["id"]
    git(repo, "checkout", "-q", "-b", "feature")
    gitmem(repo, "edit", mid, "--text", "Use 4 spaces")
    commit_file(repo, "f.txt")
    git(repo, "checkout", "-q", "main")
    gitmem(repo, "edit", mid, "--text", "Use 2 spaces")
    git(repo, "merge", "-q", "--no-ff", "--no-edit", "feature")
    listed = json.loads(gitmem(repo, "conflicts", "--json").stdout)["conflicts"]
    assert [(c["id"], c["fields"], c["ours"]["text"], c["theirs"]["text"]) for c in listed] == [
        (mid, ["text"], "Use 2 spaces", "Use 4 spaces")]
    assert json.loads(gitmem(repo, "status", "--json").stdout)["conflicts"] == [mid]
    assert "\n  1 unresolved memory conflict: see `gitmem conflicts`\n" in gitmem(repo, "status").stdout
    gitmem(repo, "resolve", mid, "--ours")
    assert json.loads(gitmem(repo, "conflicts", "--json").stdout)["conflicts"] == []
    assert Store.open(str(repo)).get(mid).text == "Use 2 spaces"


def test_a_branch_created_without_hooks_reads_its_parent_and_forks_on_first_write(repo):
    git(repo, "branch", "feature")
    main = Store.open(str(repo), "main")
    w = main.add("fact", "main fact")
    feature = Store.open(str(repo), "feature")
    assert feature.read_from() == ("main", w.commit) and feature.own_tip() is None
    feature.add("fact", "feature fact")
    assert main.own_tip() == w.commit
    assert parent_chain(feature.repo, "feature") == ["main"]


def test_branch_list_diff_and_prune(repo):
    main = Store.open(str(repo), "main")
    main.add("fact", "main fact")
    git(repo, "branch", "feature")
    git(repo, "branch", "spike")
    feature = Store.open(str(repo), "feature")
    added = feature.add("rejection", "Use Redis", reason="one more service to run").memory
    Store.open(str(repo), "spike").add("note", "try something")
    git(repo, "checkout", "-q", "feature")
    commit_file(repo, "feature.txt")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "--no-edit", "feature")  # no hooks: the code merges, the memory does not
    listed = {b.name: b for b in list_branches(main.repo)}
    assert listed["feature"].parent == "main" and listed["feature"].memories == 2
    assert listed["feature"].code == "exists"

    d = diff(main, "main", "feature")
    assert [m.id for m in d.added] == [added.id] and not d.changed
    assert "Use Redis (because: one more service to run)" in render_diff(d)
    assert render_diff(d, markdown=True).startswith("### Memory changes `main..feature`")
    out = json.loads(gitmem(repo, "diff", "main..feature", "--json").stdout)
    assert [m["id"] for m in out["added"]] == [added.id]

    spike = Store.open(str(repo), "spike")  # a blob that is no valid memory still counts (the summary counts it)
    tip = spike.own_tip()
    spike.move_ref(tip, spike.commit_tree({"note/x/y/0000000000000xy.yaml": b"id: [broken\n"}, "a broken blob",
                                          added.author, base=tip), "test")
    spike_info = {b.name: b for b in list_branches(main.repo)}["spike"]
    assert (spike_info.memories, spike_info.active) == (3, 2)  # main fact, its note, the blob; status counts 2
    listing = gitmem(repo, "branch").stdout
    assert "    2 active of 3" in listing
    assert "code merged, memory not yet: gitmem merge feature" in listing  # git's "merged" is the code's alone

    git(repo, "checkout", "-q", "-b", "fresh")  # checked out, nothing written: still the current row, and where it reads
    assert re.search(r"^\* fresh +- +no memory of its own yet: reading 'main' at [0-9a-f]{10}$",
                     gitmem(repo, "branch").stdout, re.M)
    git(repo, "checkout", "-q", "main")

    git(repo, "branch", "-D", "spike")
    assert [b.name for b in prune(main.repo)] == ["spike"]  # lists first, deletes nothing
    assert "refs/memory/spike" in main.repo.references
    listing = gitmem(repo, "prune")  # spike's memory is not all in main's: --yes alone keeps it, and says so
    assert "would keep refs/memory/spike" in listing.stdout
    assert "run `gitmem prune --yes --force` to delete them" in listing.stderr
    assert "would delete refs/memory/spike" in gitmem(repo, "prune", "--force").stdout
    gitmem(repo, "prune", "--yes", "--force")  # spike's note and blob are nowhere else
    assert "refs/memory/spike" not in pygit2.Repository(str(repo)).references
    assert "refs/memory/feature" in pygit2.Repository(str(repo)).references


def test_a_renamed_branch_is_named_in_status_kept_from_prune_and_its_memory_moved_with_it(repo):
    """git branch -m renames the code and runs no hook: the memory stays under the old name until
    `gitmem branch -m` moves it, and meanwhile nothing calls it deleted or prunes it."""
    with_hooks(repo)  # post-checkout records where each branch was forked from
    gitmem(repo, "add", "decision", "base", "--because", "why")
    git(repo, "checkout", "-q", "-b", "old")
    note = json.loads(gitmem(repo, "add", "note", "old-branch note", "--json").stdout)["id"]
    git(repo, "checkout", "-q", "-b", "child")  # forked from old
    gitmem(repo, "add", "note", "child note")
    git(repo, "checkout", "-q", "old")
    git(repo, "branch", "-m", "old", "renamed")
    assert "renamed from 'old', whose memory stayed behind: `gitmem branch -m old renamed`" in \
        gitmem(repo, "status").stdout
    assert "code renamed to renamed: gitmem branch -m old renamed" in gitmem(repo, "branch").stdout
    assert "refs/memory/old" not in gitmem(repo, "prune").stdout

    moved = json.loads(gitmem(repo, "branch", "-m", "old", "renamed", "--json").stdout)
    assert moved["ref"] == "refs/memory/renamed"
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/memory").split()
    assert "refs/memory/old" not in refs and "refs/memory/renamed" in refs
    assert note in [m["id"] for m in json.loads(gitmem(repo, "list", "--json").stdout)["memories"]]
    assert fork_point(pygit2.Repository(str(repo)), "renamed")[0] == "main"
    assert fork_point(pygit2.Repository(str(repo)), "child")[0] == "renamed"
    again = gitmem(repo, "branch", "-m", "child", "renamed", check=False)
    assert again.returncode == 1 and "already has memory of its own" in again.stderr
    assert gitmem(repo, "branch", "-m", "nope", "x", check=False).returncode == 1


def test_moving_the_memory_of_a_code_branch_that_was_not_renamed_is_refused(repo):
    """`gitmem branch -m feature other` with no `git branch -m` before it moved the memory to a name with no code:
    the checked-out feature then read main's memory, its own listed as 'code deleted' under other."""
    with_hooks(repo)
    git(repo, "checkout", "-q", "-b", "feature")
    gitmem(repo, "add", "note", "feature note")
    before = git(repo, "for-each-ref", "refs/memory")
    refused = gitmem(repo, "branch", "-m", "feature", "other", check=False)
    assert refused.returncode == 1 and refused.stderr.startswith("Error: code branch 'feature' is still here"), \
        refused.stderr
    assert "`git branch -m feature other`" in refused.stderr and len(refused.stderr.splitlines()) == 1
    assert git(repo, "for-each-ref", "refs/memory") == before
    assert "feature note" in gitmem(repo, "list").stdout
    git(repo, "branch", "-m", "feature", "other")  # the code first, then its memory follows
    gitmem(repo, "branch", "-m", "feature", "other")
    assert "feature note" in gitmem(repo, "list").stdout


def test_a_rename_to_its_own_name_changes_nothing_as_git_branch_m_does(repo):
    """It said "already has memory of its own: bring 'main''s in with `gitmem --branch main merge main`"."""
    gitmem(repo, "add", "decision", "base", "--because", "why")
    before = git(repo, "for-each-ref", "refs/memory")
    same = gitmem(repo, "branch", "-m", "main", "main")
    assert same.stdout == f"the memory of 'main' is already on refs/memory/main (at {tip(repo, 'main')[:10]}): " \
                          "nothing to move\n" and same.stderr == ""
    assert git(repo, "for-each-ref", "refs/memory") == before
    assert "no memory of its own" in gitmem(repo, "branch", "-m", "nope", "nope", check=False).stderr


def test_a_branch_renamed_twice_is_still_named_in_status_and_kept_from_prune(repo):
    """`git branch -m a b` then `git branch -m b c` (a typo fixed): the memory stayed under a. Only the newest
    rename was read, and b has no memory, so c read main's memory with no word of a's, and a was called
    deleted and offered to prune."""
    with_hooks(repo)
    git(repo, "checkout", "-q", "-b", "a")
    gitmem(repo, "add", "note", "a's note")
    commit_file(repo, "a.txt")
    git(repo, "branch", "-m", "a", "b")
    git(repo, "branch", "-m", "b", "c")

    assert "renamed from 'a', whose memory stayed behind: `gitmem branch -m a c`" in gitmem(repo, "status").stdout
    assert "code renamed to c: gitmem branch -m a c" in gitmem(repo, "branch").stdout
    assert "refs/memory/a" not in gitmem(repo, "prune").stdout
    gitmem(repo, "branch", "-m", "a", "c")
    assert "a's note" in gitmem(repo, "list").stdout


def test_a_renamed_branch_that_wrote_before_its_memory_was_moved_still_names_what_stayed_behind(repo):
    """`git branch -m old renamed`, then a write on renamed before `gitmem branch -m` (an agent at work):
    renamed's first write forks main's memory, and old's memory is still the only copy of what the branch
    knew. It must stay named (status, branch) and kept from prune, with the merge that brings it, until
    it is in renamed's memory; then prune drops it as merged."""
    with_hooks(repo)
    gitmem(repo, "add", "decision", "base", "--because", "why")
    git(repo, "checkout", "-q", "-b", "old")
    gitmem(repo, "add", "note", "old-branch note")
    commit_file(repo, "old.txt")
    git(repo, "branch", "-m", "old", "renamed")
    gitmem(repo, "add", "note", "written after the rename")

    command = "`gitmem --branch renamed merge old`"
    assert f"renamed from 'old', whose memory stayed behind: {command}" in gitmem(repo, "status").stdout
    assert "code renamed to renamed: gitmem --branch renamed merge old" in gitmem(repo, "branch").stdout
    assert "refs/memory/old" not in gitmem(repo, "prune").stdout

    gitmem(repo, "--branch", "renamed", "merge", "old")
    assert {"old-branch note", "written after the rename"} <= {m.text for m in Store.open(str(repo)).list()}
    assert "renamed from" not in gitmem(repo, "status").stdout
    assert "code renamed" not in gitmem(repo, "branch").stdout
    # Now all of old's memory is in renamed's: prune offered `gitmem merge old` (into main, which the branch
    # never reached) and kept it from `prune --yes`, as if it existed nowhere else.
    listing = gitmem(repo, "prune").stdout
    assert "would delete refs/memory/old" in listing and "all of it is in renamed's memory" in listing, listing
    assert "gitmem merge old" not in listing
    assert "deleted refs/memory/old" in gitmem(repo, "prune", "--yes").stdout
    assert "refs/memory/old" not in git(repo, "for-each-ref", "--format=%(refname)", "refs/memory")
    assert {"old-branch note", "written after the rename"} <= {m.text for m in Store.open(str(repo)).list()}


def test_a_branch_created_under_the_name_a_renamed_one_left_does_not_take_its_memory(repo):
    """`git branch -m fx fy` leaves fy's memory under fx (git runs no hook for a rename), and its commits are
    still on fy, so a new fx made from main took that memory as its own: fy's speculative decision was read on
    fx and went to main with fx's merge, while fy read main's. The memory follows the code it was written for."""
    with_hooks(repo)
    git(repo, "checkout", "-q", "-b", "fx")
    speculative = add(repo, "decision", "Shard the queue", "--because", "a spike")["id"]
    commit_file(repo, "fx.txt")
    git(repo, "branch", "-m", "fx", "fy")
    git(repo, "checkout", "-q", "main")
    made = subprocess.run(["git", "checkout", "-b", "fx"], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, **AGAIN})
    assert "moved with it to 'fy'" in made.stderr, made.stderr
    assert speculative not in ids(repo, "fx") and speculative in ids(repo, "fy")
    add(repo, "note", "the new fx's own note")
    commit_file(repo, "new.txt")
    git(repo, "checkout", "-q", "fy")
    assert "renamed from" not in gitmem(repo, "status").stdout  # nothing left behind, nothing to move
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "--no-edit", "fx")
    assert speculative not in ids(repo, "main")


def test_a_branch_created_under_the_name_a_renamed_one_left_sets_it_aside_when_the_renamed_one_wrote(repo):
    """The renamed branch wrote before the new one was made: the memory left behind cannot simply move there,
    so it is set aside (kept whole) and the merge that brings it to the renamed branch is named."""
    with_hooks(repo)
    git(repo, "checkout", "-q", "-b", "fx")
    speculative = add(repo, "decision", "Shard the queue", "--because", "a spike")["id"]
    commit_file(repo, "fx.txt")
    git(repo, "branch", "-m", "fx", "fy")
    add(repo, "note", "written on fy after the rename")
    git(repo, "checkout", "-q", "main")
    made = subprocess.run(["git", "checkout", "-b", "fx"], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, **AGAIN})
    aside = [n[len("refs/memory-aside/"):] for n in pygit2.Repository(str(repo)).references
             if n.startswith("refs/memory-aside/fx.earlier-")]
    assert len(aside) == 1 and speculative in ids(repo, aside[0]) and speculative not in ids(repo, "fx")
    assert f"`gitmem --branch fy merge {aside[0]}`" in made.stderr, made.stderr
    gitmem(repo, "--branch", "fy", "merge", aside[0])
    assert speculative in ids(repo, "fy")


def test_diff_reads_the_trees_that_differ_and_answers_as_a_full_listing_does(repo):
    """diff walks the tree diff from the merge base (what changed costs, not what is stored): its answer is
    the one comparing every memory of both sides, for added, edited, retracted, moved and deleted memories."""
    from gitmem import model
    from gitmem.merge import blobs_by_id, load_ids

    main = Store.open(str(repo), "main")
    written = [main.add("fact" if i % 2 else "decision", f"memory {i}", tags=[f"t{i % 3}"]).memory for i in range(40)]
    git(repo, "branch", "feature")
    feature = Store.open(str(repo), "feature")
    feature.add("rejection", "Use Redis", reason="one more service to run")
    feature.edit(written[3].id, text="memory 3, edited")
    feature.retract(written[4].id, reason="no longer true")
    moved, dropped = written[5], written[6]
    data = main.repo[main.snapshot().lookup(model.memory_path(moved))[2]].data
    tip = feature.own_tip()
    feature.move_ref(tip, feature.commit_tree({model.memory_path(moved): None, model.memory_path(dropped): None,
                                               model.memory_path("note", moved.id): data},
                                              "by hand: one moved, one deleted", moved.author, base=tip), "test")
    main.add("note", "main moved on")

    def by_full_listing(left, right):
        a, b = main.repo.lookup_reference(f"refs/memory/{left}").target, \
            main.repo.lookup_reference(f"refs/memory/{right}").target
        base = str(main.repo.merge_base(a, b))
        e_base, e_to = blobs_by_id(main, base), blobs_by_id(main, str(b))
        touched = sorted(i for i in set(e_base) | set(e_to) if e_base.get(i) != e_to.get(i))
        before, after = load_ids(main, e_base, touched), load_ids(main, e_to, touched)
        return ([i for i in touched if i in after and i not in before], [i for i in touched if i in after and i in before],
                [i for i in touched if i in before and i not in after])

    for left, right in (("main", "feature"), ("feature", "main")):
        d = diff(main, left, right)
        assert ([m.id for m in d.added], [n.id for _, n, _ in d.changed], [m.id for m in d.removed]) == \
            by_full_listing(left, right)
    d = diff(main, "main", "feature")
    assert len(d.added) == 1 and len(d.changed) == 2  # a fact at a note's path is no valid memory: removed
    assert sorted(m.id for m in d.removed) == sorted([moved.id, dropped.id])
    assert {n.id: f for _, n, f in d.changed}[written[4].id] == ("status",)


def test_diff_names_an_unknown_side_instead_of_showing_nothing(repo):
    Store.open(str(repo), "main").add("fact", "main fact")
    failed = gitmem(repo, "diff", "main..no-such-branch", check=False)
    assert failed.returncode == 1 and "neither a branch with memory nor a commit" in failed.stderr
    on_default = gitmem(repo, "diff", check=False)
    assert on_default.returncode == 2 and "give a range" in on_default.stderr
    for code in ("refs/heads/main..main", "main..HEAD"):  # code revisions are not memory: never "0 added"
        refused = gitmem(repo, "diff", code, check=False)
        assert refused.returncode == 1 and "is not a memory commit" in refused.stderr, code
    tip = git(repo, "rev-parse", "refs/memory/main").strip()
    assert "0 added" in gitmem(repo, "diff", f"{tip}..main").stdout  # a memory commit by id is one
    git(repo, "branch", "empty")  # a branch whose parent has no memory: the parent's side is empty memory
    git(repo, "update-ref", "-d", "refs/memory/main")
    Store.open(str(repo), "empty").add("fact", "on empty")
    assert "1 added" in gitmem(repo, "diff", "main..empty").stdout


def test_prune_says_whether_a_deleted_branchs_memory_is_already_merged_and_drops_its_fork_record(repo):
    with_hooks(repo)
    add(repo, "fact", "main fact")
    for name in ("merged-one", "lost-one"):
        git(repo, "checkout", "-q", "-b", name)
        add(repo, "fact", f"from {name}")
        commit_file(repo, f"{name}.txt")
        git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-edit", "merged-one")  # the post-merge hook merges its memory
    git(repo, "branch", "-q", "-D", "merged-one", "lost-one")
    listing = gitmem(repo, "prune").stdout
    assert "refs/memory/merged-one" in listing and "all of it is in main's memory" in listing
    assert "refs/memory/lost-one" in listing and "`gitmem merge lost-one` keeps it" in listing
    pruned = gitmem(repo, "prune", "--yes").stdout  # memory that is nowhere else is not deleted without --force
    assert "deleted refs/memory/merged-one" in pruned and "kept refs/memory/lost-one" in pruned
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/memory")
    assert "refs/memory/merged-one" not in refs and "refs/memory/lost-one" in refs
    assert json.loads(gitmem(repo, "prune", "--yes", "--json").stdout)["kept"] == ["lost-one"]
    forced = gitmem(repo, "prune", "--yes", "--force").stdout  # says how to undo it, not how to keep it
    assert "was not in main's memory: `git update-ref refs/memory/lost-one " in forced
    assert "gitmem merge lost-one" not in forced
    assert "refs/memory/lost-one" not in git(repo, "for-each-ref", "--format=%(refname)", "refs/memory")
    assert git(repo, "config", "--get-regexp", r"gitmem\.branch\..*\.(parent|forkpoint)", check=False) == ""


def test_a_branch_under_a_name_that_still_has_memory_gets_a_line_that_says_what_to_do(repo):
    """git cannot hold refs/memory/feat and refs/memory/feat/sub at once: the memory of a deleted branch
    `feat` blocks the first write on `feat/sub`, and the error names the ref and the way out."""
    git(repo, "checkout", "-q", "-b", "feat")
    add(repo, "fact", "on feat")
    git(repo, "checkout", "-q", "main")
    git(repo, "branch", "-q", "-D", "feat")
    git(repo, "checkout", "-q", "-b", "feat/sub")
    failed = gitmem(repo, "add", "fact", "on feat/sub", check=False)
    assert failed.returncode == 1 and "refs/memory/feat exists" in failed.stderr and "gitmem prune" in failed.stderr
    assert "Traceback" not in failed.stderr and git(repo, "for-each-ref", "refs/memory/feat/").strip() == ""


def test_an_octopus_merge_brings_the_memory_of_every_branch_even_the_one_git_fast_forwards_to(repo):
    """git merge A B C first fast-forwards to A when it can, so the merge commit's first parent is A's tip:
    the memory of A must merge all the same (a name with quotes and a semicolon is just a name)."""
    with_hooks(repo)
    add(repo, "fact", "main fact")
    merged = {}
    for name in ("it's;\"first\"", "b2", "b3"):
        git(repo, "checkout", "-q", "main")
        git(repo, "checkout", "-q", "-b", name)
        merged[name] = add(repo, "fact", f"fact of {name}")["id"]
        commit_file(repo, f"{name[-2:]}.txt")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-edit", *merged)
    assert len(parents(repo, git(repo, "rev-parse", "HEAD").strip())) == 3
    assert set(merged.values()) <= ids(repo, "main")


def test_a_new_branch_reads_the_memory_of_its_start_point_not_of_the_branch_it_was_made_on(repo):
    """`git checkout -b hotfix main` made on an experiment: the experiment's memory must neither be read on
    hotfix nor reach main when hotfix merges. `git checkout -b x` (start HEAD) still forks the branch you are on."""
    with_hooks(repo)
    add(repo, "fact", "main fact")
    git(repo, "checkout", "-q", "-b", "experiment")
    secret = add(repo, "rejection", "experimental idea: drop the database", "--because", "secret plan")["id"]
    for how in (["checkout", "-b", "hotfix", "main"], ["switch", "-c", "sw", "main"]):
        git(repo, "checkout", "-q", "experiment")  # no code commit yet: the experiment's tip is main's
        created = subprocess.run(["git", *how], cwd=repo, capture_output=True, text=True, check=True)
        assert "reads the memory of 'main'" in created.stderr and secret not in ids(repo, how[2])
    git(repo, "checkout", "-q", "experiment")
    commit_file(repo, "experiment.txt")
    git(repo, "branch", "fromx", "main")
    git(repo, "checkout", "-q", "fromx")
    git(repo, "checkout", "-q", "experiment")
    git(repo, "checkout", "-q", "-b", "child")
    config = pygit2.Repository(str(repo)).config
    assert [config[f"gitmem.branch.{b}.parent"] for b in ("hotfix", "sw", "fromx", "child")] == [
        "main", "main", "main", "experiment"]
    assert secret in ids(repo, "child")

    git(repo, "checkout", "-q", "hotfix")
    fix = add(repo, "fact", "the hotfix fact")["id"]
    commit_file(repo, "fix.txt")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "--no-edit", "hotfix")
    assert fix in ids(repo, "main") and secret not in ids(repo, "main")


def test_a_branch_started_at_a_tag_a_commit_or_a_remote_branch_reads_the_memory_that_applies_there(tmp_path):
    """A start that names no local branch is resolved to one: a remote branch to its name; a tag or a commit
    to the branch whose tip it is (the default branch first), else the default branch if it has the commit,
    else a branch that has it (here experiment, or at-tip, which reads experiment's memory)."""
    _, a, b = clones(tmp_path)
    with_hooks(a)
    add(a, "fact", "main fact")
    commit_file(a, "second.txt")
    git(a, "tag", "v1")
    old = git(a, "rev-parse", "main~1").strip()
    git(b, "checkout", "-q", "-b", "shared")
    commit_file(b, "shared.txt")
    git(b, "push", "-q", "origin", "shared")
    git(a, "fetch", "-q", "origin")
    git(a, "checkout", "-q", "-b", "experiment")
    theirs = add(a, "fact", "experiment fact")["id"]
    commit_file(a, "e1.txt")
    commit_file(a, "e2.txt")
    starts = {"at-tag": ("v1", "experiment"), "at-old": (old, "experiment"), "at-remote": ("origin/shared", "main"),
              "at-tip": (git(a, "rev-parse", "experiment").strip(), "main"), "inside": ("experiment~1", "main")}
    for new, (start, on) in starts.items():
        git(a, "checkout", "-q", on)
        git(a, "checkout", "-q", "-b", new, start)
    assert {new: fork_point(pygit2.Repository(str(a)), new)[0] for new in ("at-tag", "at-old", "at-remote")} == {
        "at-tag": "main", "at-old": "main", "at-remote": "shared"}
    assert {new for new in starts if theirs in ids(a, new)} == {"at-tip", "inside"}


def three_clashing_branches(repo):
    """main with a conflict pending on a decision (merged from "fifteen"), and three code branches, not merged
    yet: "seventeen" clashes on that decision again, "another" and "zfact" add a fact each."""
    shared = add(repo, "decision", "Use Postgres")["id"]
    for name, text in (("fifteen", "Use Postgres 15"), ("seventeen", "Use Postgres 17")):
        git(repo, "checkout", "-q", "-b", name, "main")
        gitmem(repo, "edit", shared, "--text", text)
        commit_file(repo, f"{name}.txt")
    for name in ("another", "zfact"):
        git(repo, "checkout", "-q", "-b", name, "main")
        add(repo, "fact", f"{name} fact")
        commit_file(repo, f"{name}.txt")
    git(repo, "checkout", "-q", "main")
    gitmem(repo, "edit", shared, "--text", "Use Postgres 16")
    gitmem(repo, "merge", "fifteen")
    assert [c["id"] for c in json.loads(gitmem(repo, "conflicts", "--json").stdout)["conflicts"]] == [shared]
    return shared


def test_sync_merges_the_others_and_reports_a_branch_refused_over_a_pending_conflict(repo):
    shared = three_clashing_branches(repo)
    git(repo, "merge", "-q", "--no-edit", "another", "seventeen", "zfact")  # no hooks: sync brings the memory
    pending = tip(repo, "main")
    r = gitmem(repo, "sync", check=False)
    assert r.returncode == 1
    assert f"seventeen: not merged: memory {shared} has an unresolved conflict" in r.stderr
    assert f"gitmem resolve {shared}" in r.stderr
    texts = {m.text for m in Store.open(str(repo)).list()}
    assert {"another fact", "zfact fact"} <= texts and "Use Postgres 17" not in texts  # the others came in
    assert tip(repo, "main") != pending
    out = json.loads(gitmem(repo, "sync", "--json", check=False).stdout)
    assert [(b["branch"], b["id"]) for b in out["blocked"]] == [("seventeen", shared)]
    gitmem(repo, "resolve", shared, "--ours")
    gitmem(repo, "sync")  # settled: seventeen's clash is a conflict of its own now
    assert [c["theirs"]["text"] for c in json.loads(gitmem(repo, "conflicts", "--json").stdout)["conflicts"]] \
        == ["Use Postgres 17"]


def test_gitmem_merge_of_a_branch_refused_over_a_pending_conflict_exits_1_with_what_to_do(repo):
    shared = three_clashing_branches(repo)
    r = gitmem(repo, "merge", "seventeen", check=False)
    assert r.returncode == 1 and f"gitmem resolve {shared}" in r.stderr


def test_the_post_merge_hook_merges_the_others_and_says_what_to_do_when_one_is_refused(repo):
    shared = three_clashing_branches(repo)
    with_hooks(repo)
    r = subprocess.run(["git", "merge", "-q", "--no-edit", "another", "seventeen", "zfact"], cwd=repo,
                       capture_output=True, text=True)
    assert r.returncode == 0  # git's merge never fails for gitmem
    assert f"seventeen: not merged: memory {shared} has an unresolved conflict" in r.stderr
    assert "gitmem merge seventeen" in r.stderr and "skipped" not in r.stderr
    assert {"another fact", "zfact fact"} <= {m.text for m in Store.open(str(repo)).list()}


@pytest.mark.parametrize("damage", DAMAGES)
def test_the_post_merge_hook_names_a_merged_branchs_damaged_memory_and_merges_the_others(repo, damage):
    """A branch whose memory ref points at an object that is missing or no commit: git's merge goes on, the
    other branch merged with it brings its memory, and one line names that branch's damaged ref (not the
    one merged into) and the doctor that repairs it; after which `gitmem merge` brings its memory."""
    with_hooks(repo)
    add(repo, "fact", "main fact")
    written = {}
    for name in ("feature", "other"):
        git(repo, "checkout", "-q", "-b", name, "main")
        written[name] = add(repo, "fact", f"fact of {name}")["id"]
        commit_file(repo, f"{name}.txt")
    git(repo, "checkout", "-q", "main")
    intact = tip(repo, "feature")
    damage_ref(repo, "refs/memory/feature", damage)

    r = subprocess.run(["git", "merge", "-q", "--no-edit", "feature", "other"], cwd=repo, capture_output=True,
                       text=True)

    assert r.returncode == 0 and (repo / "feature.txt").exists() and (repo / "other.txt").exists()
    said = [line for line in r.stderr.splitlines() if "feature" in line]
    assert len(said) == 1 and "refs/memory/feature is damaged" in said[0], r.stderr
    assert "`gitmem --branch feature doctor`" in said[0] and "refs/memory/main" not in r.stderr
    assert "Traceback" not in r.stderr and "skipped" not in r.stderr
    assert written["other"] in ids(repo, "main") and written["feature"] not in ids(repo, "main")
    gitmem(repo, "--branch", "feature", "doctor", "--recover")
    assert tip(repo, "feature") == intact
    gitmem(repo, "merge", "feature")
    assert written["feature"] in ids(repo, "main")


def test_pull_over_a_pending_conflict_leaves_that_branch_and_says_what_to_do(tmp_path):
    from conftest import clone, make_origin

    origin = make_origin(tmp_path)
    alice, bob = clone(origin, tmp_path / "alice", "Alice"), clone(origin, tmp_path / "bob", "Bob")
    shared = add(alice, "decision", "Use Postgres")["id"]
    gitmem(alice, "push")
    gitmem(bob, "pull")
    git(bob, "checkout", "-q", "-b", "fifteen")
    gitmem(bob, "edit", shared, "--text", "Use Postgres 15")
    git(bob, "checkout", "-q", "main")
    gitmem(bob, "edit", shared, "--text", "Use Postgres 16")
    gitmem(bob, "merge", "fifteen")
    gitmem(alice, "edit", shared, "--text", "Use Postgres 17")
    gitmem(alice, "push")
    pending = tip(bob, "main")
    r = gitmem(bob, "pull", check=False)
    assert r.returncode == 1 and f"main: not merged: memory {shared}" in r.stderr
    assert f"gitmem resolve {shared}" in r.stderr and tip(bob, "main") == pending


def test_a_late_parents_merge_refused_over_a_pending_conflict_is_reported_as_blocked(repo, monkeypatch):
    # The catch-up merge of a parent's memory as of the fork (take_late_parent) is one more merge of sync's: a
    # refusal there waits like any other branch's, it does not end the command after the others merged.
    import gitmem.branches as branches
    import gitmem.merge as merge
    from gitmem.errors import PendingConflict

    store = Store.open(str(repo))
    store.add("fact", "here")
    late = branches.LateParent(store.branch, "feat-a", "f" * 40, store.own_tip())
    monkeypatch.setattr(branches, "late_parent", lambda repo, branch: late)

    def refused(*args, **kwargs):
        raise PendingConflict("0123456789abcdef", "memory 0123456789abcdef has an unresolved conflict")
    monkeypatch.setattr(merge, "merge_into", refused)
    taken, left, blocked = branches.take_late_parent(store)
    assert (taken, left) == ([], [])
    assert blocked == [{"branch": "feat-a", "ref": "", "id": "0123456789abcdef",
                        "why": "memory 0123456789abcdef has an unresolved conflict"}]
    assert branches.blocked_notice(blocked[0]).startswith("feat-a: not merged: memory 0123456789abcdef")
    # `gitmem merge feat-a` would bring all of feat-a's memory, what it wrote after the fork too: sync takes no more
    assert branches.blocked_notice(blocked[0]).endswith("unresolved conflict (`gitmem sync`)")


def test_a_blocked_line_reads_as_what_to_do_then_the_command_that_merges_for_every_reason(repo):
    """A blocked line appended " (`gitmem merge B`)" (pull: " (`gitmem pull`)") to every reason, which reads
    well after a pending conflict's "then merge again", not after a damaged ref's doctor command nor a clash's
    "(`gitmem prune`)": those now go on with ", then" and the command."""
    from gitmem.branches import blocked_notice
    from gitmem.errors import RefClash

    add(repo, "fact", "main fact")
    git(repo, "checkout", "-q", "-b", "feature")
    add(repo, "fact", "feature fact")
    git(repo, "checkout", "-q", "main")
    damage_ref(repo, "refs/memory/feature", "a missing object")
    said = gitmem(repo, "merge", "feature", check=False).stderr.strip()
    assert said.startswith("gitmem: feature: not merged: refs/memory/feature is damaged: ")
    assert said.endswith("; run `gitmem --branch feature doctor`, then `gitmem merge feature`"), said

    clash = {"branch": "feature/billing", "ref": "refs/memory-remotes/origin/feature/billing", "id": "",
             "why": str(RefClash("refs/memory/feature/billing", "refs/memory/feature"))}
    assert blocked_notice(clash, "gitmem pull").endswith("code is gone (`gitmem prune`), then `gitmem pull`")
    pending = {"branch": "seventeen", "ref": "refs/memory/seventeen", "id": "4vhr",
               "why": "memory 4vhr has an unresolved conflict ('a' against 'b') and this merge clashes on it again: "
               "settle it first with `gitmem resolve 4vhr --ours|--theirs|--edit`, then merge again"}
    assert blocked_notice(pending).endswith(", then merge again (`gitmem merge seventeen`)")
    assert blocked_notice(pending, "gitmem pull").endswith(", then merge again (`gitmem pull`)")


def test_the_branch_listing_lines_up_its_columns_after_wide_character_names(repo):
    """Padded by len(), a CJK name took twice the columns it was given and pushed the tips right."""
    import unicodedata

    def columns(text):
        return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)

    for name in ("main", "機能/検索", "feature/ascii", "ｆｕｌｌ"):
        if name != "main":
            git(repo, "branch", name)
        gitmem(repo, "--branch", name, "add", "note", f"on {name}")
    lines = gitmem(repo, "branch").stdout.splitlines()
    tips = {line: columns(line[:line.index(tip(repo, line[2:].split()[0])[:10])]) for line in lines}
    assert len(lines) == 4 and len(set(tips.values())) == 1, tips


def test_prune_counts_a_deleted_branchs_memories_in_words_that_fit_the_number(repo):
    for name, texts in (("one", ["only note"]), ("two", ["first note", "second note"])):
        git(repo, "checkout", "-q", "-b", name)
        for text in texts:
            add(repo, "note", text)
        git(repo, "checkout", "-q", "main")
        git(repo, "branch", "-q", "-D", name)
    listing = gitmem(repo, "prune").stdout
    assert re.search(r"^would keep refs/memory/one at [0-9a-f]+ \(1 memory; ", listing, re.M), listing
    assert re.search(r"^would keep refs/memory/two at [0-9a-f]+ \(2 memories; ", listing, re.M), listing


def test_a_branch_started_before_its_parent_had_memory_is_not_told_to_take_what_the_parent_wrote_later(repo):
    """featA's first write found no memory on main; main's memory was written here afterwards. Nothing arrived
    late from anywhere: it is main's later memory, which featA is not told to merge as its parent's."""
    with_hooks(repo)
    git(repo, "checkout", "-q", "-b", "featA")
    mine = add(repo, "fact", "featA's own")["id"]
    git(repo, "checkout", "-q", "main")
    later = add(repo, "decision", "main's later idea", "--because", "after featA forked")["id"]
    git(repo, "checkout", "-q", "featA")

    status = json.loads(gitmem(repo, "status", "--json").stdout)
    assert status["late_parent"] is None
    said = gitmem(repo, "status").stdout + gitmem(repo, "sync").stderr
    assert "started before" not in said and "gitmem merge main" not in said
    assert ids(repo, "featA") == {mine} and later not in ids(repo, "featA")
