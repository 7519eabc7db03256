"""Tool setup: the config each tool reads, merged into what is there, idempotent."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from conftest import git, gitmem
from gitmem.errors import GitmemError
from gitmem.agent_setup import apply, plan


def test_claude_code_gets_a_project_mcp_json(repo, store):
    s = plan(store, "claude-code", command="gitmem")
    apply(s)
    data = json.loads((repo / ".mcp.json").read_text())
    assert data == {"mcpServers": {"gitmem": {"type": "stdio", "command": "gitmem", "args": ["mcp"]}}}
    assert s.commands == ["claude mcp add --scope project gitmem -- gitmem mcp"]
    assert not plan(store, "claude-code", command="gitmem").changed


def test_by_default_the_config_names_this_gitmem_by_absolute_path_not_a_bare_name(repo, store):
    entry = json.loads(plan(store, "claude-code").content)["mcpServers"]["gitmem"]
    program = entry["command"]
    assert os.path.isabs(program) and os.access(program, os.X_OK)
    assert entry["args"] == ["mcp"] or entry["args"][0] == "-c"  # the gitmem script, or this python running it
    if entry["args"] == ["mcp"]:
        assert open(program).readline().strip() == f"#!{sys.executable}" or \
            os.path.dirname(program) == os.path.dirname(sys.executable)


def test_the_notes_say_what_setup_wrote(repo, store):
    """The absolute-path warning only when the file names one, and the existing-workflow note only
    when there was one (both were printed whatever setup wrote)."""
    assert "absolute path" in plan(store, "claude-code").notes
    for tool in ("claude-code", "cursor"):
        assert "absolute path" not in plan(store, tool, command="gitmem").notes
    assert plan(store, "ci").notes == ""
    apply(plan(store, "ci"))
    assert plan(store, "ci").notes == "an existing workflow file is left as it is"


def test_setup_says_when_the_command_it_writes_is_not_on_the_path(repo, store, tmp_path, monkeypatch):
    """Claude Code runs a hook or server it cannot find as a failure it shows only in its debug log (status 127):
    the session goes on without memory, so setup says so while the user is there to fix it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gitmem").write_text("#!/bin/sh\n")
    (bin_dir / "gitmem").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert "not on this PATH" not in plan(store, "claude-code", command="gitmem").notes
    assert "not on this PATH" not in plan(store, "claude-code").notes  # the absolute path of this gitmem
    monkeypatch.setenv("PATH", "/nonexistent")
    notes = plan(store, "claude-code", command="gitmem").notes
    assert "'gitmem' is not on this PATH, so claude-code cannot start it here (neither the MCP server nor the hooks)" \
        in notes and notes.startswith("project file: commit it")
    assert "'uvx' is not on this PATH, so cursor cannot start it" in plan(store, "cursor", command="uvx gitmem").notes


def test_the_server_a_written_config_names_starts_and_lists_its_tools(repo):
    """Started as Claude Code starts it: the config's command and args, with a PATH that does not
    hold this venv, through the official MCP client."""
    import anyio

    mcp = pytest.importorskip("mcp")
    gitmem(repo, "setup", "claude-code", "--write")
    entry = json.loads((repo / ".mcp.json").read_text())["mcpServers"]["gitmem"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = "/usr/bin:/bin"  # not the venv's bin: the config must not rely on PATH

    async def tools():
        params = mcp.StdioServerParameters(command=entry["command"], args=entry["args"], cwd=str(repo), env=env)
        with open(os.devnull, "w") as errlog:
            async with mcp.stdio_client(params, errlog=errlog) as (read, write):
                async with mcp.ClientSession(read, write) as session:
                    await session.initialize()
                    return [t.name for t in (await session.list_tools()).tools]

    assert "remember" in anyio.run(tools)


def test_ci_workflow_fetches_runs_an_agent_and_pushes_memory(repo, store):
    s = plan(store, "ci")
    apply(s)
    workflow = yaml.safe_load((repo / ".github" / "workflows" / "gitmem-agent.yml").read_text())
    steps = [step.get("run", "") for step in workflow["jobs"]["agent"]["steps"]]
    assert any("gitmem pull origin" in r for r in steps)
    assert any("--mcp-config .mcp.json" in r for r in steps)
    assert steps[-1] == "gitmem push origin --branch main"
    from gitmem import __version__

    assert f'pip install "gitmem-memory=={__version__}"' in steps  # `gitmem` on PyPI is another project
    assert not any("pip install gitmem" in r for r in steps)
    assert s.changed and not plan(store, "ci").changed  # an existing workflow is left alone
    # GitHub pastes ${{ ... }} into the script before the shell reads it: a task with a quote or $(...) would
    # run as commands next to the API key. No expression appears in any script, only in env.
    assert not any("${{" in r for r in steps)
    agent = next(step for step in workflow["jobs"]["agent"]["steps"] if "claude -p" in step.get("run", ""))
    assert agent["env"]["TASK"] == "${{ inputs.task }}" and 'claude -p "$TASK"' in agent["run"]


def test_broken_json_is_refused_not_overwritten(repo, store):
    (repo / ".mcp.json").write_text("{not json")
    with pytest.raises(GitmemError, match="not valid JSON"):
        plan(store, "claude-code")
    assert (repo / ".mcp.json").read_text() == "{not json"


def test_cli_prints_by_default_and_writes_with_write(repo):
    printed = gitmem(repo, "setup", "cursor").stdout
    assert '"gitmem"' in printed and not (repo / ".cursor").exists()
    out = json.loads(gitmem(repo, "setup", "claude-code", "--write", "--json").stdout)
    assert out["written"] and (repo / ".mcp.json").exists()


def test_claude_code_hooks_merge_into_settings_keeping_everything_else(repo, store):
    from gitmem.agent_setup import CLAUDE_HOOKS, hooks_plan

    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = {"type": "command", "command": "npx prettier --write", "timeout": 30}
    settings.write_text(json.dumps({"model": "sonnet", "permissions": {"allow": ["Bash(ls:*)"]}, "hooks": {
        "PostToolUse": [{"matcher": "Edit", "hooks": [mine]}],
        "Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}}))
    apply(hooks_plan(store, command="/opt/gitmem/bin/gitmem"))
    data = json.loads(settings.read_text())
    assert data["model"] == "sonnet" and data["permissions"] == {"allow": ["Bash(ls:*)"]}
    assert data["hooks"]["Stop"] == [{"hooks": [{"type": "command", "command": "say done"}]}]
    assert data["hooks"]["PostToolUse"][0] == {"matcher": "Edit", "hooks": [mine]}
    for event, matcher, _ in CLAUDE_HOOKS:
        [group] = [g for g in data["hooks"][event] if "claude-code" in json.dumps(g)]
        assert group.get("matcher") == matcher
        assert group["hooks"][0]["command"] == f"/opt/gitmem/bin/gitmem hook claude-code {event}"
    assert not hooks_plan(store, command="/opt/gitmem/bin/gitmem").changed  # idempotent
    apply(hooks_plan(store, command="/usr/bin/gitmem"))  # a new executable replaces ours, once
    again = json.loads(settings.read_text())
    assert json.dumps(again).count("hook claude-code SessionStart") == 1
    assert "/usr/bin/gitmem hook claude-code SessionStart" in json.dumps(again)


def test_setup_claude_code_writes_both_files_and_undo_takes_out_only_gitmem(repo):
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}}))
    out = json.loads(gitmem(repo, "setup", "claude-code", "--write", "--json").stdout)
    assert out["written"] and out["hooks"]["written"] and out["hooks"]["path"] == str(settings.resolve())
    assert "hook claude-code UserPromptSubmit" in settings.read_text() and (repo / ".mcp.json").exists()
    again = json.loads(gitmem(repo, "setup", "claude-code", "--write", "--json").stdout)
    assert not again["written"] and not again["hooks"]["written"]
    undone = json.loads(gitmem(repo, "setup", "claude-code", "--undo", "--json").stdout)["undone"]
    assert [u["delete"] for u in undone] == [True, False]  # .mcp.json held only gitmem
    assert not (repo / ".mcp.json").exists()
    assert json.loads(settings.read_text()) == {
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}}
    assert gitmem(repo, "setup", "claude-code", "--undo").stdout == f"unchanged: {settings.resolve()}\n"


def test_setup_and_undo_give_a_person_s_files_back_as_they_wrote_them(repo):
    """Undo takes out what setup added and leaves the file byte for byte: its indent, its characters (not
    \\u escapes), its final newline or lack of one."""
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = {"permissions": {"allow": ["Bash(npm run lint)"]},
            "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send 'Fertig, Zoë ✓'"}]}]}}
    written = json.dumps(mine, indent=4, ensure_ascii=False)  # four spaces, no final newline
    settings.write_text(written, encoding="utf-8")
    servers = repo / ".mcp.json"
    tabbed = json.dumps({"mcpServers": {"docs": {"command": "docs-mcp"}}}, indent="\t") + "\n"
    servers.write_text(tabbed)
    gitmem(repo, "setup", "claude-code", "--write")
    added = settings.read_text(encoding="utf-8")
    assert "Zoë ✓" in added and '\n    "hooks": {' in added and not added.endswith("\n")
    assert '\n\t"mcpServers": {' in servers.read_text()
    gitmem(repo, "setup", "claude-code", "--undo")
    assert settings.read_text(encoding="utf-8") == written
    assert servers.read_text() == tabbed


def test_undo_after_a_write_into_an_empty_repository_leaves_no_file_or_folder(repo):
    gitmem(repo, "setup", "claude-code", "--write")
    gitmem(repo, "setup", "cursor", "--write")
    assert (repo / ".claude" / "settings.json").exists() and (repo / ".cursor" / "mcp.json").exists()
    gitmem(repo, "setup", "claude-code", "--undo")
    gitmem(repo, "setup", "cursor", "--undo")
    assert not (repo / ".claude").exists() and not (repo / ".cursor").exists() and not (repo / ".mcp.json").exists()
    assert git(repo, "status", "--porcelain") == ""


def test_undo_leaves_files_without_setup_s_entries_as_they_are(repo):
    """Undo takes out only what setup put in: a file with none of it is not rewritten or removed."""
    (repo / ".mcp.json").write_text("{}\n")
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = '{"model": "opus", "hooks": {}, "permissions": {"allow": ["Bash(ls)"]}}\n'
    settings.write_text(mine)
    undone = json.loads(gitmem(repo, "setup", "claude-code", "--undo", "--json").stdout)["undone"]
    assert not any(u["delete"] for u in undone)
    assert (repo / ".mcp.json").read_text() == "{}\n" and settings.read_text() == mine


def test_setup_writes_through_a_link_keeps_permissions_and_line_ends_and_refuses_deep_nesting(repo):
    shared = repo / "shared.json"
    shared.write_bytes(b'{\r\n  "env": {\r\n    "TOKEN_FILE": "~/.token"\r\n  }\r\n}\r\n')
    shared.chmod(0o600)
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.symlink_to(shared)
    gitmem(repo, "setup", "claude-code", "--write")
    assert settings.is_symlink() and "hook claude-code SessionStart" in shared.read_text()
    assert oct(shared.stat().st_mode & 0o777) == "0o600" and b"\r\n" in shared.read_bytes()
    assert b"\n" not in shared.read_bytes().replace(b"\r\n", b"")
    gitmem(repo, "setup", "claude-code", "--undo")
    assert shared.read_bytes() == b'{\r\n  "env": {\r\n    "TOKEN_FILE": "~/.token"\r\n  }\r\n}\r\n'
    settings.unlink()
    settings.write_text('{"a": ' * 5000 + "1" + "}" * 5000)
    refused = gitmem(repo, "setup", "claude-code", "--write", check=False)
    assert refused.returncode == 1 and "nested too deeply" in refused.stderr and "Traceback" not in refused.stderr
    settings.write_text('{\n"a": ' + '{"a": ' * 900 + "1" + "}" * 901)  # json reads it; the edit cannot follow
    refused = gitmem(repo, "setup", "claude-code", "--write", check=False)
    assert refused.returncode == 1 and "nested too deeply to edit" in refused.stderr and "Traceback" not in refused.stderr


def test_a_teammate_s_committed_entry_serves_as_it_is_not_refused(repo):
    """A team commits .mcp.json and .claude/settings.json written with `--command gitmem`; in another clone
    (no record of them), setup finds gitmem's entry and hooks there and leaves them as they are, instead of
    refusing the entry as a person's own or rewriting the hooks with this machine's path to gitmem."""
    gitmem(repo, "setup", "claude-code", "--write", "--command", "gitmem")
    team, settings = (repo / ".mcp.json").read_text(), (repo / ".claude" / "settings.json").read_text()
    (repo / ".git" / "gitmem" / "agent-setup.json").unlink()  # another clone: setup never wrote here
    again = json.loads(gitmem(repo, "setup", "claude-code", "--write", "--json").stdout)
    assert not again["written"] and not again["hooks"]["written"]
    assert (repo / ".mcp.json").read_text() == team and (repo / ".claude" / "settings.json").read_text() == settings
    gitmem(repo, "setup", "claude-code", "--write", "--command", "/opt/gitmem/bin/gitmem")  # named: it replaces
    assert "/opt/gitmem/bin/gitmem hook claude-code" in (repo / ".claude" / "settings.json").read_text()
    assert json.loads((repo / ".mcp.json").read_text())["mcpServers"]["gitmem"]["command"] == "/opt/gitmem/bin/gitmem"


def test_settings_with_a_broken_hooks_shape_are_refused_not_overwritten(repo, store):
    from gitmem.agent_setup import hooks_plan

    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"hooks": {"SessionStart": "echo hi"}}')
    with pytest.raises(GitmemError, match="hooks.SessionStart should be a list"):
        hooks_plan(store)
    result = gitmem(repo, "setup", "claude-code", "--write", check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert settings.read_text() == '{"hooks": {"SessionStart": "echo hi"}}'


def test_a_gitmem_server_entry_the_user_wrote_is_neither_replaced_nor_taken_out(repo):
    mine = {"mcpServers": {"gitmem": {"type": "stdio", "command": "uvx", "env": {"X": "1"},
                                      "args": ["--from", "gitmem-memory", "gitmem", "mcp", "--repo", "/custom"]}}}
    (repo / ".mcp.json").write_text(json.dumps(mine))
    refused = gitmem(repo, "setup", "claude-code", "--write", check=False)
    assert refused.returncode == 1 and "mcpServers.gitmem is set already, not by setup" in refused.stderr
    assert json.loads((repo / ".mcp.json").read_text()) == mine
    gitmem(repo, "setup", "claude-code", "--undo")
    assert json.loads((repo / ".mcp.json").read_text()) == mine
    (repo / ".mcp.json").unlink()
    gitmem(repo, "setup", "claude-code", "--write")  # setup's own entry: written, then taken out again
    assert "gitmem" in json.loads((repo / ".mcp.json").read_text())["mcpServers"]
    gitmem(repo, "setup", "claude-code", "--undo")
    assert not (repo / ".mcp.json").exists()


def test_without_command_a_second_write_keeps_the_command_both_files_run(repo):
    """Setup written with `--command gitmem` (to commit for the team), then run again without `--command`:
    the MCP entry and the hooks go on running the same gitmem, the one already there, not this machine's path
    in one file and `gitmem` in the other; undo then takes both out."""
    gitmem(repo, "setup", "claude-code", "--write", "--command", "gitmem")
    team, settings = (repo / ".mcp.json").read_text(), (repo / ".claude" / "settings.json").read_text()
    again = json.loads(gitmem(repo, "setup", "claude-code", "--write", "--json").stdout)
    assert not again["written"] and not again["hooks"]["written"]
    assert (repo / ".mcp.json").read_text() == team and (repo / ".claude" / "settings.json").read_text() == settings
    gitmem(repo, "setup", "claude-code", "--undo")
    assert not (repo / ".mcp.json").exists() and not (repo / ".claude").exists()


def test_undo_in_a_clone_of_a_team_s_setup_takes_out_the_entry_and_the_hooks_alike(repo):
    """In a clone where the team committed setup's files (no record here), `--write` adopts them, so `--undo`
    then takes out gitmem's server entry as it takes out gitmem's hooks: never one without the other."""
    gitmem(repo, "setup", "claude-code", "--write", "--command", "gitmem")
    (repo / ".git" / "gitmem" / "agent-setup.json").unlink()  # another clone: setup never wrote here
    gitmem(repo, "setup", "claude-code", "--write")
    gitmem(repo, "setup", "claude-code", "--undo")
    assert not (repo / ".mcp.json").exists() and not (repo / ".claude").exists()


def test_undo_gives_back_a_settings_file_in_a_layout_json_cannot_write_byte_for_byte(repo):
    """A person's settings with one-line arrays and objects (as people write permissions) come back from
    write then undo as they were; once someone changes the file after setup, undo takes out only gitmem's."""
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = ('{\n    "permissions": {"allow": ["Bash(ls:*)", "Read"], "deny": ["Bash(rm:*)"]},\n'
            '    "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}\n}\n')
    settings.write_text(mine)
    gitmem(repo, "setup", "claude-code", "--write")
    gitmem(repo, "setup", "claude-code", "--write", "--command", "gitmem")  # a second write: still undone to mine
    assert "hook claude-code SessionStart" in settings.read_text()
    gitmem(repo, "setup", "claude-code", "--undo")
    assert settings.read_text() == mine and not (repo / ".mcp.json").exists()
    gitmem(repo, "setup", "claude-code", "--write")
    edited = settings.read_text().replace('"Read"', '"Read",\n            "Edit"')
    settings.write_text(edited)
    gitmem(repo, "setup", "claude-code", "--undo")
    assert json.loads(settings.read_text()) == {**json.loads(mine), "permissions": {
        "allow": ["Bash(ls:*)", "Read", "Edit"], "deny": ["Bash(rm:*)"]}}


@pytest.mark.parametrize("block", ["record-is-a-folder", "gitmem-dir-is-a-file"])
def test_a_record_setup_cannot_write_leaves_every_file_as_it_was(repo, block):
    """Setup writes its undo record before any file: a record it cannot keep is one error line, and the work
    tree holds nothing `--undo` could not take out."""
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"model": "opus"}\n')
    if block == "record-is-a-folder":
        (repo / ".git" / "gitmem" / "agent-setup.json").mkdir(parents=True)
    else:
        (repo / ".git" / "gitmem").write_text("")
    out = gitmem(repo, "setup", "claude-code", "--write", check=False)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "agent-setup.json" in out.stderr and "nothing was written" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert not (repo / ".mcp.json").exists() and settings.read_text() == '{"model": "opus"}\n'


def test_a_file_setup_cannot_write_puts_back_the_files_and_the_record_before_it(repo, monkeypatch):
    """The second file failing (here: a full disk) leaves the first file and the record as they were."""
    from gitmem import agent_setup

    gitmem(repo, "setup", "cursor", "--write")
    record = repo / ".git" / "gitmem" / "agent-setup.json"
    kept = record.read_text()
    real = agent_setup.replace_file

    def full(path, content, **kw):
        if path.endswith("settings.json"):
            raise OSError(28, "No space left on device", path)
        return real(path, content, **kw)

    monkeypatch.setattr(agent_setup, "replace_file", full)
    out = gitmem(repo, "setup", "claude-code", "--write", check=False)
    assert out.returncode == 1 and "No space left on device" in out.stderr
    assert not (repo / ".mcp.json").exists() and not (repo / ".claude").exists()
    assert record.read_text() == kept


def test_the_claude_mcp_add_line_names_the_command_the_file_keeps(repo):
    """A write without `--command` keeps a team's `gitmem` entry: the equivalent `claude mcp add` says so."""
    gitmem(repo, "setup", "claude-code", "--write", "--command", "uvx --from gitmem-memory gitmem")
    for args in (["--write"], []):
        out = gitmem(repo, "setup", "claude-code", *args).stdout
        assert "# or: claude mcp add --scope project gitmem -- uvx --from gitmem-memory gitmem mcp\n" in out


def test_a_read_only_settings_file_is_refused_before_anything_is_written(repo):
    """A settings file its owner made read-only is refused in one line; setup writes neither the other file
    nor its record, so nothing is half done."""
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"model": "opus"}\n')
    settings.chmod(0o444)
    refused = gitmem(repo, "setup", "claude-code", "--write", check=False)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert ".claude/settings.json is read-only" in refused.stderr
    assert settings.read_text() == '{"model": "opus"}\n' and oct(settings.stat().st_mode & 0o777) == "0o444"
    assert not (repo / ".mcp.json").exists() and not (repo / ".git" / "gitmem" / "agent-setup.json").exists()


def test_setup_changes_a_hand_laid_out_file_only_where_gitmem_s_entries_go_in_and_come_out(repo):
    """One-line arrays and objects, four-space indent, the person's key order, characters as written and no final
    newline: setup adds its lines and touches none of the person's, and an undo after the person edited the file
    (so the text from before setup no longer applies) takes out gitmem's lines and keeps the edit."""
    import difflib

    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = ('{\n    "permissions": {"allow": ["Bash(ls:*)", "Read"], "deny": ["Bash(rm:*)"]},\n'
            '    "model": "opus",\n    "env": {"GREETING": "Grüß dich ✓"},\n'
            '    "hooks": {\n        "Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]\n    }\n}')
    settings.write_text(mine, encoding="utf-8")
    servers = repo / ".mcp.json"
    tabbed = '{\n\t"mcpServers": {\n\t\t"docs": {"command": "docs-mcp", "args": ["--port", "1"]}\n\t}\n}\n'
    servers.write_text(tabbed)
    gitmem(repo, "setup", "claude-code", "--write", "--command", "gitmem")
    def lines(text):  # a line that gets a member after it gains a comma, as JSON needs
        return [line.removesuffix(",") for line in text.splitlines()]

    for path, before in ((settings, mine), (servers, tabbed)):
        changes = [d for d in difflib.ndiff(lines(before), lines(path.read_text(encoding="utf-8"))) if d[0] in "-?"]
        assert changes == [], (path.name, changes)
    added = settings.read_text(encoding="utf-8")
    assert '\n        "SessionStart": [\n            {\n' in added and not added.endswith("\n")
    assert list(json.loads(added)) == ["permissions", "model", "env", "hooks"]
    assert '\n\t\t"gitmem": {\n\t\t\t"type": "stdio",' in servers.read_text()
    edited = added.replace('"model": "opus"', '"model": "sonnet"')
    settings.write_text(edited, encoding="utf-8")
    servers.write_text(servers.read_text().replace('"--port", "1"', '"--port", "2"'))
    gitmem(repo, "setup", "claude-code", "--undo")
    assert settings.read_text(encoding="utf-8") == mine.replace('"model": "opus"', '"model": "sonnet"')
    assert servers.read_text() == tabbed.replace('"--port", "1"', '"--port", "2"')


def test_files_an_editor_wrote_with_a_byte_order_mark_are_merged_and_keep_it(repo):
    """Editors on Windows start a UTF-8 file with a byte order mark, which json refuses: setup refused such a
    .mcp.json as invalid. It reads past the mark, keeps the other servers and hooks, writes the mark back as
    the file had it, and undo gives the bytes back."""
    servers = repo / ".mcp.json"
    mine = b'\xef\xbb\xbf{\r\n  "mcpServers": {\r\n    "docs": {"command": "docs-mcp"}\r\n  }\r\n}\r\n'
    servers.write_bytes(mine)
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    hooks = b'\xef\xbb\xbf{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}}'
    settings.write_bytes(hooks)
    gitmem(repo, "setup", "claude-code", "--write")
    for path in (servers, settings):
        written = path.read_bytes()
        assert written.startswith(b"\xef\xbb\xbf{") and written.count(b"\xef\xbb\xbf") == 1
    assert set(json.loads(servers.read_bytes().decode("utf-8-sig"))["mcpServers"]) == {"docs", "gitmem"}
    assert b"\n" not in servers.read_bytes().replace(b"\r\n", b"")
    assert set(json.loads(settings.read_bytes().decode("utf-8-sig"))["hooks"]) >= {"Stop", "SessionStart"}
    assert json.loads(gitmem(repo, "setup", "claude-code", "--write", "--json").stdout)["written"] is False
    gitmem(repo, "setup", "claude-code", "--undo")
    assert servers.read_bytes() == mine and settings.read_bytes() == hooks
    gitmem(repo, "setup", "claude-code", "--write")  # then the person edits it: undo takes out gitmem's lines only
    servers.write_bytes(servers.read_bytes().replace(b'"docs-mcp"', b'"docs-mcp2"'))
    gitmem(repo, "setup", "claude-code", "--undo")
    assert servers.read_bytes() == mine.replace(b'"docs-mcp"', b'"docs-mcp2"')


@pytest.mark.parametrize("tool,path", [("cursor", ".cursor/mcp.json"), ("claude-code", ".claude/settings.json")])
def test_a_settings_file_with_comments_is_refused_in_one_line_not_stripped(repo, tool, path):
    target = repo / path
    target.parent.mkdir()
    jsonc = '{\n  // the docs server, see https://example.com/docs\n  "mcpServers": {}, /* and hooks */ "hooks": {}\n}\n'
    target.write_text(jsonc)
    refused = gitmem(repo, "setup", tool, "--write", check=False)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "has comments (JSONC)" in refused.stderr
    assert target.read_text() == jsonc
    target.write_text('{"url": "https://example.com/a//b",}')  # `//` in a string, and a trailing comma: no comment
    refused = gitmem(repo, "setup", tool, "--write", check=False).stderr
    assert "has a trailing comma on line 1" in refused and "comments" not in refused


@pytest.mark.parametrize("mine,line", [
    ('{\n  "mcpServers": {\n    "docs": {"command": "docs-mcp"},\n  }\n}\n', 3),
    ('{\n  "mcpServers": {},\n  "allow": [\n    "Read",\n    "Bash(ls:*)",\n\n  ]\n}\n', 5),
], ids=["object", "array"])
def test_a_trailing_comma_is_named_with_its_line_and_what_to_do(repo, mine, line):
    """A trailing comma (which JSONC and editors allow) was refused as "not valid JSON (Expecting property name
    enclosed in double quotes: line 4 column 3 ...)": the line of the bracket, and no word of the comma."""
    target = repo / ".cursor" / "mcp.json"
    target.parent.mkdir()
    target.write_text(mine)
    refused = gitmem(repo, "setup", "cursor", "--write", check=False)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "Expecting" not in refused.stderr
    assert f".cursor/mcp.json has a trailing comma on line {line}" in refused.stderr and "take it out" in refused.stderr
    assert target.read_text() == mine
    target.write_text('{\n  "mcpServers": {\n    "docs": {"command": "docs-mcp"}\n  \n}\n')  # a brace missing
    assert "is not valid JSON (Expecting" in gitmem(repo, "setup", "cursor", "--write", check=False).stderr


def test_undo_of_a_file_given_comments_since_says_to_take_gitmem_out_by_hand_not_to_add_it(repo):
    """Undo's refusal told the user to add gitmem's entry by hand, with the command that prints it."""
    gitmem(repo, "setup", "claude-code", "--write", "--command", "gitmem")
    for path in (".mcp.json", ".claude/settings.json"):
        target = repo / path
        target.write_text(target.read_text().replace("{", "{\n  // ours", 1))
    refused = gitmem(repo, "setup", "claude-code", "--undo", check=False)
    assert refused.returncode == 1 and "has comments (JSONC)" in refused.stderr
    assert "take gitmem's entry out by hand" in refused.stderr and "add gitmem" not in refused.stderr
    (repo / ".mcp.json").write_text('{"mcpServers": {}}\n')
    refused = gitmem(repo, "setup", "claude-code", "--undo", check=False)
    assert "take gitmem's hooks out by hand" in refused.stderr and "add gitmem" not in refused.stderr


def test_without_a_gitmem_script_the_command_runs_gitmem_even_from_a_folder_that_shadows_the_standard_library(
        tmp_path, monkeypatch):
    from gitmem.agent_setup import installed_command

    monkeypatch.setattr(os.path, "isfile", lambda path: False)  # no gitmem script anywhere
    command = installed_command()
    monkeypatch.undo()
    for name in ("typing", "queue", "json"):  # a repository's own modules, first on sys.path with `python -m`
        (tmp_path / f"{name}.py").write_text(f"raise SystemExit('shadowed: {name}')\n")
    ran = subprocess.run([*command, "--version"], cwd=tmp_path, capture_output=True, text=True)
    assert command[0] == os.path.abspath(sys.executable) and ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("gitmem, version ")


def test_windsurf_s_one_user_file_serves_one_repository_and_says_which_when_a_second_asks(tmp_path):
    """Windsurf reads one user file: a second repository's setup was refused as if a person had written the
    entry ("not by setup"), naming neither the repository it serves nor how to take it out."""
    from conftest import make_repo
    from gitmem.agent_setup import undo
    from gitmem.store import Store

    home = tmp_path / "home"
    config = home / ".codeium" / "windsurf" / "mcp_config.json"
    config.parent.mkdir(parents=True)
    config.write_text('{\n  "mcpServers": {\n    "brave": {"command": "npx", "args": ["brave"]}\n  }\n}\n')
    mine = config.read_text()
    first, second = (Store.open(str(make_repo(tmp_path / name))) for name in ("first", "second"))
    apply(plan(first, "windsurf", home=str(home), command="gitmem"))
    served = json.loads(config.read_text())["mcpServers"]
    assert served["gitmem"] == {"command": "gitmem", "args": ["mcp", "--repo", str(tmp_path / "first")]}
    assert "brave" in served
    with pytest.raises(GitmemError, match=re.escape(f"serves the repository {tmp_path / 'first'} already") +
                       ".*setup windsurf --undo"):
        plan(second, "windsurf", home=str(home), command="gitmem")
    apply(*undo(first, "windsurf", home=str(home)))
    assert config.read_text() == mine
    apply(plan(second, "windsurf", home=str(home), command="gitmem"))
    assert str(tmp_path / "second") in config.read_text()
