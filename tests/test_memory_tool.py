"""Anthropic's memory tool (memory_20250818) backed by the store: every command, and traversal refused."""

from __future__ import annotations

import pytest

from conftest import git
from gitmem.memory_tool import MemoryTool, MemoryToolError, check_path


@pytest.fixture
def tool(repo):
    return MemoryTool(str(repo), source="memory-tool:claude")


def memories(store_path, **filters):
    from gitmem import Store

    return Store.open(store_path).list(**filters)


def test_create_lands_as_a_typed_audited_commit(repo, tool):
    out = tool.execute({"command": "create", "path": "/memories/decisions/queue.md",
                        "file_text": "Queue jobs in Postgres with SKIP LOCKED"})
    assert out == "File created successfully at: /memories/decisions/queue.md"
    [m] = memories(str(repo), tag="memory-tool")
    assert (m.type, m.title, m.author.kind, m.source) == (
        "decision", "/memories/decisions/queue.md", "agent", "memory-tool:claude")
    trailers = git(repo, "log", "-1", "--format=%B", "refs/memory/main")
    assert "Memory-Op: add" in trailers and "Memory-Source: memory-tool:claude" in trailers


def test_files_outside_a_type_directory_are_notes_and_rejections_need_a_reason(repo, tool):
    tool.execute({"command": "create", "path": "/memories/progress.md", "file_text": "halfway"})
    with pytest.raises(MemoryToolError, match="because"):
        tool.execute({"command": "create", "path": "/memories/rejections/redis.md", "file_text": "Use Redis"})
    tool.execute({"command": "create", "path": "/memories/rejections/redis.md",
                  "file_text": "Use Redis for the queue\nbecause: ops won't run it"})
    kinds = {m.title: (m.type, m.reason) for m in memories(str(repo))}
    assert kinds == {"/memories/progress.md": ("note", None),
                     "/memories/rejections/redis.md": ("rejection", "ops won't run it")}


def test_create_refuses_an_existing_file(tool):
    tool.execute({"command": "create", "path": "/memories/a.md", "file_text": "one"})
    with pytest.raises(MemoryToolError, match="already exists"):
        tool.execute({"command": "create", "path": "/memories/a.md", "file_text": "two"})


def test_view_lists_directories_and_numbers_file_lines(tool):
    tool.execute({"command": "create", "path": "/memories/facts/ports.md", "file_text": "api 8000\nweb 5173"})
    tool.execute({"command": "create", "path": "/memories/todo.md", "file_text": "x"})
    listing = tool.execute({"command": "view", "path": "/memories"})
    assert listing.splitlines()[0].startswith("Here're the files and directories up to 2 levels deep in /memories")
    assert [line.split("\t")[1] for line in listing.splitlines()[1:]] == [
        "/memories", "/memories/facts/", "/memories/facts/ports.md", "/memories/todo.md"]
    text = tool.execute({"command": "view", "path": "/memories/facts/ports.md"})
    assert text.splitlines()[1:] == ["     1\tapi 8000", "     2\tweb 5173"]
    ranged = tool.execute({"command": "view", "path": "/memories/facts/ports.md", "view_range": [2, -1]})
    assert ranged.splitlines()[1:] == ["     2\tweb 5173"]
    with pytest.raises(MemoryToolError, match="does not exist"):
        tool.execute({"command": "view", "path": "/memories/nope.md"})


def test_str_replace_edits_the_memory_in_place(repo, tool):
    tool.execute({"command": "create", "path": "/memories/facts/ports.md", "file_text": "api 8000\nweb 5173"})
    out = tool.execute({"command": "str_replace", "path": "/memories/facts/ports.md",
                        "old_str": "8000", "new_str": "8080"})
    assert "     1\tapi 8080" in out
    [m] = memories(str(repo))
    assert m.text == "api 8080\nweb 5173" and m.updated
    assert "Memory-Op: edit" in git(repo, "log", "-1", "--format=%B", "refs/memory/main")
    with pytest.raises(MemoryToolError, match="did not appear verbatim"):
        tool.execute({"command": "str_replace", "path": "/memories/facts/ports.md", "old_str": "9",
                      "new_str": "1"})
    tool.execute({"command": "str_replace", "path": "/memories/facts/ports.md", "old_str": "api", "new_str": "x x"})
    with pytest.raises(MemoryToolError, match="Multiple occurrences"):
        tool.execute({"command": "str_replace", "path": "/memories/facts/ports.md", "old_str": "x",
                      "new_str": "y"})


def test_insert_adds_a_line_at_the_given_position(repo, tool):
    tool.execute({"command": "create", "path": "/memories/list.md", "file_text": "a\nc"})
    assert tool.execute({"command": "insert", "path": "/memories/list.md", "insert_line": 1,
                         "insert_text": "b\n"}) == "The file /memories/list.md has been edited."
    assert memories(str(repo))[0].text == "a\nb\nc"
    with pytest.raises(MemoryToolError, match="Invalid `insert_line`"):
        tool.execute({"command": "insert", "path": "/memories/list.md", "insert_line": 9, "insert_text": "z"})


def test_delete_retracts_files_and_directories_but_history_keeps_them(repo, tool):
    tool.execute({"command": "create", "path": "/memories/facts/a.md", "file_text": "a"})
    tool.execute({"command": "create", "path": "/memories/facts/b.md", "file_text": "b"})
    tool.execute({"command": "create", "path": "/memories/keep.md", "file_text": "k"})
    assert tool.execute({"command": "delete", "path": "/memories/facts"}) == "Successfully deleted /memories/facts"
    assert [m.title for m in memories(str(repo))] == ["/memories/keep.md"]
    assert len(memories(str(repo), status="retracted")) == 2
    with pytest.raises(MemoryToolError, match="does not exist"):
        tool.execute({"command": "delete", "path": "/memories/facts/a.md"})
    with pytest.raises(MemoryToolError, match="directory itself"):
        tool.execute({"command": "delete", "path": "/memories"})


def test_rename_moves_a_file_and_changes_its_type_across_directories(repo, tool):
    tool.execute({"command": "create", "path": "/memories/draft.md", "file_text": "Money is integer cents"})
    tool.execute({"command": "rename", "old_path": "/memories/draft.md", "new_path": "/memories/old.md"})
    [m] = memories(str(repo))
    assert (m.title, m.type) == ("/memories/old.md", "note")
    out = tool.execute({"command": "rename", "old_path": "/memories/old.md",
                        "new_path": "/memories/conventions/money.md"})
    assert out == "Successfully renamed /memories/old.md to /memories/conventions/money.md"
    [m] = memories(str(repo))
    assert (m.title, m.type, m.text) == ("/memories/conventions/money.md", "convention", "Money is integer cents")
    tool.execute({"command": "create", "path": "/memories/x.md", "file_text": "x"})
    with pytest.raises(MemoryToolError, match="already exists"):
        tool.execute({"command": "rename", "old_path": "/memories/x.md", "new_path": "/memories/conventions/money.md"})


@pytest.mark.parametrize("path", [
    "/memories/../etc/passwd", "/memories/a/../../b", "../memories/x", "/etc/passwd", "/memories2/x",
    "/memoriesx", "memories/x", "/memories/a\\..\\b", "/memories/\x00", "/memories/./x/..", "",
])
def test_paths_outside_memories_are_refused_and_nothing_is_written(repo, tool, path):
    for command in ({"command": "create", "path": path, "file_text": "x"},
                    {"command": "view", "path": path},
                    {"command": "delete", "path": path},
                    {"command": "rename", "old_path": "/memories/a.md", "new_path": path}):
        with pytest.raises(MemoryToolError):
            tool.execute(command)
    assert git(repo, "for-each-ref", "refs/memory/").strip() == ""


def test_paths_are_normalised():
    assert check_path("/memories//a//b.md") == "/memories/a/b.md"
    assert check_path("/memories/") == "/memories"


def test_secrets_are_redacted_before_they_are_stored(repo, tool):
    tool.execute({"command": "create", "path": "/memories/facts/key.md",
                  "file_text": "the key is ghp_R4nd0mT0k3nV4lu3sF0rT3st1ngOnlyXyZ12"})  # a filler (ghp_aaa...) is a placeholder
    assert "ghp_" not in memories(str(repo))[0].text


def test_the_sdk_tool_runs_commands_through_the_store(repo, tool):
    pytest.importorskip("anthropic")
    from gitmem.memory_tool import sdk_tool

    sdk = sdk_tool(tool)
    assert sdk.to_dict() == {"type": "memory_20250818", "name": "memory"}
    assert sdk.call({"command": "create", "path": "/memories/n.md", "file_text": "hi"}).startswith("File created")
    assert memories(str(repo))[0].title == "/memories/n.md"


def test_cli_runs_one_command_and_refuses_traversal(repo):
    from conftest import gitmem

    created = gitmem(repo, "memory-tool", '{"command": "create", "path": "/memories/a.md", "file_text": "hi"}')
    assert created.stdout.strip() == "File created successfully at: /memories/a.md"
    viewed = gitmem(repo, "memory-tool", input='{"command": "view", "path": "/memories/a.md"}')
    assert viewed.stdout.splitlines()[1] == "     1\thi"
    refused = gitmem(repo, "memory-tool", '{"command": "view", "path": "/memories/../x"}', check=False)
    assert refused.returncode == 1 and "would escape /memories" in refused.stderr


@pytest.mark.parametrize("command,field", [
    ({"command": "create", "path": 5, "file_text": "x"}, "path must be text"),
    ({"command": "create", "path": "/memories/a.md", "file_text": 7}, "file_text must be text"),
    ({"command": "create", "path": "/memories/a.md", "file_text": ["x"]}, "file_text must be text"),
    ({"command": "view", "path": "/memories", "view_range": ["a", "b"]}, "view_range must be a list of integers"),
    ({"command": "view", "path": "/memories", "view_range": 3}, "view_range must be a list of integers"),
    ({"command": "insert", "path": "/memories/a.md", "insert_line": "2", "insert_text": "y"},
     "insert_line must be an integer"),
    ({"command": "insert", "path": "/memories/a.md", "insert_line": True, "insert_text": "y"},
     "insert_line must be an integer"),
    ({"command": "str_replace", "path": "/memories/a.md", "old_str": None, "new_str": "b"}, "old_str must be text"),
    ({"command": "rename", "old_path": "/memories/a.md", "new_path": {"x": 1}}, "new_path must be text"),
])
def test_a_wrongly_typed_field_is_a_clear_error_naming_it_not_a_traceback(repo, tool, command, field):
    with pytest.raises(MemoryToolError, match=f"invalid arguments for {command['command']}: {field}"):
        tool.execute(command)
    assert git(repo, "for-each-ref", "refs/memory/") == ""


def test_the_cli_reports_a_wrongly_typed_field_in_one_line(repo):
    from conftest import gitmem

    result = gitmem(repo, "memory-tool", '{"command": "create", "path": "/memories/a.md", "file_text": 7}',
                    check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == "Error: invalid arguments for create: file_text must be text, got int"


def _at_once(repo, commands):
    """Run each command in a `gitmem memory-tool` process of its own, all started together: (exit code, output)."""
    import json
    import os
    import subprocess
    import sys

    from conftest import ROOT

    procs = [subprocess.Popen([sys.executable, "-m", "gitmem", "memory-tool", json.dumps(c)], cwd=str(repo),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}) for c in commands]
    return [(p.wait(timeout=120), p.stdout.read()) for p in procs]


def test_edits_of_one_file_at_once_lose_nothing(repo, tool):
    """Each insert is applied to the text its write finds: a lost race runs it again on the newer text."""
    tool.execute({"command": "create", "path": "/memories/facts/counter.md", "file_text": "line0"})
    results = _at_once(repo, [{"command": "insert", "path": "/memories/facts/counter.md", "insert_line": 1,
                               "insert_text": f"ins {i}"} for i in range(6)])
    assert [code for code, _ in results] == [0] * 6, results
    text = tool.execute({"command": "view", "path": "/memories/facts/counter.md"})
    assert sorted(line.split("\t", 1)[1] for line in text.splitlines()[1:]) == ["ins 0", "ins 1", "ins 2", "ins 3",
                                                                                "ins 4", "ins 5", "line0"]


def test_creates_of_one_path_at_once_leave_one_file_and_tell_the_others(repo, tool):
    results = _at_once(repo, [{"command": "create", "path": "/memories/facts/race.md", "file_text": f"writer {i}"}
                              for i in range(5)])
    assert [code for code, _ in results].count(0) == 1, results
    assert all("already exists" in out for code, out in results if code != 0)
    assert len([m for m in memories(str(repo)) if m.title == "/memories/facts/race.md"]) == 1


def test_a_rename_that_cannot_move_every_file_moves_none(repo, tool):
    tool.execute({"command": "create", "path": "/memories/y/a1.md", "file_text": "use redis\nbecause: ops"})
    tool.execute({"command": "create", "path": "/memories/y/b2.md", "file_text": "no reason"})
    before = git(repo, "rev-parse", "refs/memory/main").strip()
    with pytest.raises(MemoryToolError, match="is a rejection"):
        tool.execute({"command": "rename", "old_path": "/memories/y", "new_path": "/memories/rejections"})
    assert git(repo, "rev-parse", "refs/memory/main").strip() == before


def test_the_cli_reads_a_command_from_stdin_and_refuses_bytes_that_are_not_utf8(repo):
    from conftest import gitmem

    piped = gitmem(repo, "memory-tool", "-", input='{"command": "create", "path": "/memories/n/a.md", "file_text": "x"}')
    assert piped.returncode == 0 and "File created successfully" in piped.stdout
    import os
    import subprocess
    import sys

    from conftest import ROOT

    bad = subprocess.run([sys.executable, "-m", "gitmem", "memory-tool"], cwd=str(repo), capture_output=True,
                         input=b'{"command": "view", "path": "/memories/n/caf\xe9"}',
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert bad.returncode == 1 and b"not UTF-8" in bad.stderr and b"Traceback" not in bad.stderr


def test_paths_view_ranges_and_secrets_as_a_file_system_would_treat_them(repo, tool):
    """A path is a file or a directory, not both; a view range is [start, end]; a secret in a path is
    redacted, and the reply names the path the file has now."""
    tool.execute({"command": "create", "path": "/memories/notes/a.md", "file_text": "one\ntwo\nthree"})
    with pytest.raises(MemoryToolError, match="a.md is a file, not a directory"):
        tool.execute({"command": "create", "path": "/memories/notes/a.md/b.md", "file_text": "x"})
    for bad in ([3, 2], [0, 2], [1, 2, 3]):
        with pytest.raises(MemoryToolError, match="Invalid `view_range`"):
            tool.execute({"command": "view", "path": "/memories/notes/a.md", "view_range": bad})
    from gitmem.redact import RULES

    token = next(r for r in RULES if r.id == "github-pat").true_samples[0]
    reply = tool.execute({"command": "create", "path": f"/memories/notes/{token}.md", "file_text": "x"})
    assert token not in reply and "/memories/notes/[REDACTED:github-pat].md" in reply and "redacted" in reply
