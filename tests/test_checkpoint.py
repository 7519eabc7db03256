"""Checkpoints and resume: a run that is killed picks up from its last commit."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

from gitmem import Store
from gitmem.checkpoint import checkpoint, render_resume, resume

from conftest import ROOT, git, gitmem

RUN = textwrap.dedent("""
    import os, signal, subprocess, sys
    sys.path.insert(0, {root!r})
    from gitmem import Store
    from gitmem.checkpoint import checkpoint

    for step in range(1, 10):
        with open(f"step{{step}}.py", "w") as f:
            f.write(f"# step {{step}}\\n")
        subprocess.run(["git", "add", "."], check=True)
        subprocess.run(["git", "commit", "-q", "-m", f"step {{step}}"], check=True)
        if step == 3:
            os.kill(os.getpid(), signal.SIGKILL)  # crash after committing, before the checkpoint
        checkpoint(Store.open("."), f"step {{step}} done / next: step {{step + 1}}")
""")


def test_a_killed_run_resumes_from_its_last_commit_and_next_step(repo):
    git(repo, "config", "gitmem.hookMode", "foreground")
    gitmem(repo, "hooks", "install")
    Store.open(str(repo)).add("decision", "Steps are plain files", reason="simple to review",
                              paths=["step3.py"])
    run = subprocess.run([sys.executable, "-c", RUN.format(root=str(ROOT))], cwd=repo)
    assert run.returncode == -signal.SIGKILL
    last = git(repo, "rev-parse", "HEAD").strip()

    out = json.loads(gitmem(repo, "resume", "--json").stdout)
    assert out["checkpoint"]["text"] == "step 2 done / next: step 3"
    assert out["checkpoint"]["commit"] == last  # the post-commit hook advanced it
    assert out["next"] == "step 3"
    assert [c["subject"] for c in out["commits_since"]] == ["step 3"]
    assert [m["text"] for m in out["relevant"]] == ["Steps are plain files"]

    prompt = gitmem(repo, "resume", "--prompt").stdout
    assert last[:10] in prompt and "Next step: step 3" in prompt


def test_resume_without_hooks_lists_the_commits_after_the_checkpoint(repo):
    store = Store.open(str(repo))
    checkpoint(store, "parser written", next="wire the parser into the CLI")
    (repo / "cli.py").write_text("x\n")
    git(repo, "add", "cli.py")
    git(repo, "commit", "-q", "-m", "wire parser")
    note = store.add("fact", "the CLI reads stdin").memory
    r = resume(Store.open(str(repo)))
    assert [s for _, s in r.commits_since] == ["wire parser"]
    assert [m.id for m in r.memories_since] == [note.id]
    assert r.next == "wire the parser into the CLI"
    assert "Next step: wire the parser into the CLI" in render_resume(r)
    assert "You are resuming work on branch 'main' (HEAD" in render_resume(r, prompt=True)  # not &#x27;main&#x27;


def test_resume_on_a_branch_with_no_checkpoint_says_so(repo):
    r = resume(Store.open(str(repo)))
    assert r.checkpoint is None and r.next is None
    assert "no checkpoint on this branch yet" in render_resume(r)
    for text in (render_resume(r), render_resume(r, prompt=True)):  # no checkpoint text to point at
        assert "Next step: not recorded\n" in text and "see the checkpoint text" not in text


def _commit(repo, name):
    (repo / f"{name}.txt").write_text(name)
    git(repo, "add", f"{name}.txt")
    git(repo, "commit", "-q", "-m", name)


def test_resume_of_another_branch_reads_that_branchs_commits_not_heads(repo):
    checkpoint(Store.open(str(repo)), "on main", next="main's next step")
    _commit(repo, "main-work")
    git(repo, "checkout", "-q", "-b", "feat")
    _commit(repo, "feat-work")
    r = resume(Store.open(str(repo), "main"))  # `gitmem --branch main resume`, from feat
    assert r.head == git(repo, "rev-parse", "main").strip()
    assert [s for _, s in r.commits_since] == ["main-work"]


def test_resume_lists_no_commits_when_the_checkpoints_commit_is_not_here(repo):
    """After a reset and gc (or a teammate's checkpoint on an unpushed commit), walking from HEAD with nothing
    to stop at would list all of history as made since the checkpoint."""
    _commit(repo, "c1")
    _commit(repo, "c2")
    checkpoint(Store.open(str(repo)), "at c2", next="c3")
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    git(repo, "reflog", "expire", "--expire=now", "--all")
    git(repo, "gc", "-q", "--prune=now")
    assert resume(Store.open(str(repo))).commits_since == []


def test_resume_after_a_reset_says_the_checkpoint_s_commit_is_no_longer_in_head(repo):
    """`git reset --hard HEAD~2` past the commit the hooks advanced the checkpoint to: resume said the run stood
    at that commit with no commits since, so an agent took the work of the two dropped commits for done."""
    git(repo, "config", "gitmem.hookMode", "foreground")
    gitmem(repo, "hooks", "install")
    _commit(repo, "c1")
    checkpoint(Store.open(str(repo)), "parser started", next="finish the parser")
    _commit(repo, "c2")
    _commit(repo, "c3")
    dropped = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "reset", "-q", "--hard", "HEAD~2")
    out = json.loads(gitmem(repo, "resume", "--json").stdout)
    assert out["checkpoint"]["commit"] == dropped and out["off_head"] is True
    for text in (gitmem(repo, "resume").stdout, gitmem(repo, "resume", "--prompt").stdout):
        assert f"{dropped[:10]} is not in HEAD's history" in text, text
    _commit(repo, "c2-again")  # the branch goes on from HEAD: still not where the checkpoint stands
    assert json.loads(gitmem(repo, "resume", "--json").stdout)["off_head"] is True
    checkpoint(Store.open(str(repo)), "parser redone", next="wire it")
    out = json.loads(gitmem(repo, "resume", "--json").stdout)
    assert out["off_head"] is False and "not in HEAD's history" not in gitmem(repo, "resume").stdout


def test_a_superseded_checkpoint_is_replaced_by_one_at_head_with_its_own_next_step(repo):
    """`gitmem supersede` of a checkpoint writes a checkpoint, as `gitmem checkpoint` does: tied to HEAD (else resume
    took every commit in history for one made since) and with the next step its text gives."""
    old = checkpoint(Store.open(str(repo)), "parser written / next: wire it into the CLI").memory
    (repo / "cli.py").write_text("x\n")
    git(repo, "add", "cli.py")
    git(repo, "commit", "-q", "-m", "wire parser")
    gitmem(repo, "supersede", old.id, "parser wired / next: document the CLI")
    out = json.loads(gitmem(repo, "resume", "--json").stdout)
    assert out["checkpoint"]["supersedes"] == old.id
    assert out["checkpoint"]["commit"] == git(repo, "rev-parse", "HEAD").strip()
    assert out["commits_since"] == [] and out["next"] == "document the CLI"


def test_a_secret_in_a_commit_subject_never_reaches_the_agent_through_resume(repo):
    """Resume's commits go to the model (the SessionStart hook, the MCP tool): redacted, as the guide is."""
    token = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A"
    checkpoint(Store.open(str(repo)), "CI set up / next: run it")
    (repo / "ci.yml").write_text("x\n")
    git(repo, "add", "ci.yml")
    git(repo, "commit", "-q", "-m", f"use {token} in CI")
    out = json.loads(gitmem(repo, "resume", "--json").stdout)
    assert [c["subject"] for c in out["commits_since"]] == ["use [REDACTED:github-pat] in CI"]
    assert token not in gitmem(repo, "resume", "--prompt").stdout


def test_resume_says_which_memories_written_since_the_checkpoint_no_longer_hold(repo):
    """An agent resuming must not take a retracted or replaced memory for a live one."""
    store = Store.open(str(repo))
    checkpoint(store, "parser written / next: wire it in")
    wrong = store.add("fact", "The parser reads stdin").memory
    store.retract(wrong.id, reason="it reads a file")
    old = store.add("fact", "The CLI prints JSON").memory
    new = store.supersede(old.id, "The CLI prints YAML").memory
    prompt = gitmem(repo, "resume", "--prompt").stdout
    assert f"{wrong.id} fact: The parser reads stdin (retracted: do not rely on it)" in prompt
    assert f"{old.id} fact: The CLI prints JSON (replaced by {new.id}: do not rely on it)" in prompt
    assert f"{new.id} fact: The CLI prints YAML\n" in prompt


def test_resume_on_a_branch_without_memory_of_its_own_says_the_checkpoint_is_its_parents(repo):
    """A new (or orphan) branch reads main's memory: resume showed main's checkpoint and next step as if they were
    this branch's work, and an agent starting there was told to carry on someone else's run."""
    checkpoint(Store.open(str(repo)), "ledger half done", next="finish the ledger")
    for new_branch in (["-b", "feat"], ["--orphan", "fresh"]):
        git(repo, "checkout", "-q", *new_branch)
        out = json.loads(gitmem(repo, "resume", "--json").stdout)
        assert out["inherits"] == "main" and out["next"] == "finish the ledger"
        assert out["note"].startswith("from main's memory: this branch has none of its own yet")
        text = gitmem(repo, "resume").stdout
        assert "(from main's memory: this branch has none of its own yet" in text
        assert "Next step on main, not this branch: finish the ledger" in text
        prompt = gitmem(repo, "resume", "--prompt").stdout
        assert "Note: from main's memory: this branch has none of its own yet" in prompt
        assert "\nNext step: " not in prompt
        git(repo, "checkout", "-q", "main")
    assert "inherits" in (on_main := json.loads(gitmem(repo, "resume", "--json").stdout)) and on_main["inherits"] is None
    assert "note" not in on_main and "Next step: finish the ledger" in gitmem(repo, "resume").stdout
