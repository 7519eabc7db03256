"""Exports: a marked, generated section in a tool's rules file; the rest of the file is the user's."""

from __future__ import annotations

import json

import pytest

from conftest import gitmem
from gitmem.errors import GitmemError
from gitmem.export import BEGIN, END, FORMATS, export, refresh, enable_on_commit


@pytest.fixture
def remembered(store):
    store.add("decision", "Queue jobs in Postgres with SKIP LOCKED", reason="transactional enqueue",
              paths=["src/jobs/queue.py"])
    store.add("rejection", "Use Redis for the job queue", reason="ops won't run another stateful service")
    store.add("convention", "Money is integer cents")
    gone = store.add("fact", "Deploys happen on Fridays").memory
    store.retract(gone.id)
    store.add("checkpoint", "halfway through refunds")
    return store


def test_agents_md_is_created_with_the_memory_section(repo, remembered):
    result = export(remembered, "agents-md", write=True)
    text = (repo / "AGENTS.md").read_text()
    assert result.changed and text.startswith(BEGIN) and text.rstrip().endswith(END)
    assert "Queue jobs in Postgres with SKIP LOCKED (why: transactional enqueue) [src/jobs/queue.py]" in text
    assert "Use Redis for the job queue (rejected because: ops won't run another stateful service)" in text
    assert "Money is integer cents" in text
    assert "Fridays" not in text and "halfway" not in text  # retracted, and checkpoints are not rules


def test_hand_written_text_around_the_section_is_kept_and_a_second_run_changes_nothing(repo, remembered):
    before, after = "# Shop\n\nHand-written intro.\n\n", "\n## Build\n\nRun `make`.\n"
    (repo / "CLAUDE.md").write_text(before + BEGIN + "\nold generated text\n" + END + "\n" + after)
    assert export(remembered, "claude-md", write=True).changed
    first = (repo / "CLAUDE.md").read_bytes()
    assert first.startswith(before.encode()) and first.endswith(after.encode())
    assert b"old generated text" not in first and first.count(BEGIN.encode()) == 1
    again = export(remembered, "claude-md", write=True)
    assert not again.changed and (repo / "CLAUDE.md").read_bytes() == first


def test_a_file_without_markers_gets_the_section_appended(repo, remembered):
    (repo / "AGENTS.md").write_text("# Agents\n\nBe nice.")
    export(remembered, "agents-md", write=True)
    text = (repo / "AGENTS.md").read_text()
    assert text.startswith("# Agents\n\nBe nice.\n\n" + BEGIN)


def test_new_memory_replaces_the_section_in_place(repo, remembered):
    (repo / "AGENTS.md").write_text("intro\n")
    export(remembered, "agents-md", write=True)
    remembered.add("fact", "Stripe webhooks are verified with STRIPE_WEBHOOK_SECRET")
    export(remembered, "agents-md", write=True)
    text = (repo / "AGENTS.md").read_text()
    assert text.startswith("intro\n\n" + BEGIN) and text.count(BEGIN) == 1 and "STRIPE_WEBHOOK_SECRET" in text


def test_cursor_rules_get_front_matter_that_always_applies(repo, remembered):
    export(remembered, "cursor-rules", write=True)
    text = (repo / FORMATS["cursor-rules"]).read_text()
    assert text.startswith("---\ndescription: ") and "\nalwaysApply: true\n---\n" in text
    assert not export(remembered, "cursor-rules", write=True).changed


def test_stale_file_notes_say_so(repo, store):
    (repo / "app.py").write_text("print(1)\n")
    store.add("file", "app.py prints one", paths=["app.py"])
    (repo / "app.py").write_text("print(2)\n")
    assert "(stale: the file changed since; re-read it)" in export(store, "windsurf-rules").text


def test_an_unterminated_section_is_refused(repo, remembered):
    (repo / "AGENTS.md").write_text(BEGIN + "\nno end marker\n")
    with pytest.raises(GitmemError, match="without"):
        export(remembered, "agents-md", write=True)
    assert (repo / "AGENTS.md").read_text() == BEGIN + "\nno end marker\n"


def test_on_commit_refresh_rewrites_only_the_chosen_formats(repo, remembered):
    enable_on_commit(remembered, "claude-md")
    assert [e.format for e in refresh(remembered)] == ["claude-md"]
    assert (repo / "CLAUDE.md").exists() and not (repo / "AGENTS.md").exists()


def test_cli_prints_without_write_and_reports_json(repo, remembered):
    printed = gitmem(repo, "export", "--format", "agents-md").stdout
    assert BEGIN in printed and not (repo / "AGENTS.md").exists()
    first = json.loads(gitmem(repo, "export", "--format", "agents-md", "--write", "--json").stdout)
    second = json.loads(gitmem(repo, "export", "--format", "agents-md", "--write", "--json").stdout)
    assert (first["written"], second["written"]) == (True, False) and first["path"] == "AGENTS.md"


def test_the_post_commit_hook_refreshes_formats_chosen_with_on_commit(repo, remembered):
    from conftest import git
    from gitmem.hooks import run

    gitmem(repo, "export", "--format", "agents-md", "--write", "--on-commit")
    remembered.add("fact", "The API listens on port 8000")
    git(repo, "commit", "-q", "--allow-empty", "-m", "work")
    assert "refreshed AGENTS.md" in run("post-commit", [], cwd=str(repo))
    assert "port 8000" in (repo / "AGENTS.md").read_text()
