"""Files gitmem writes beside the code: never where a link committed to the repository points."""

from __future__ import annotations

import os
import stat

import pytest

from conftest import git, gitmem
from gitmem.errors import GitmemError
from gitmem.files import replace_file


@pytest.fixture
def victim(tmp_path):
    """A file of the user's, outside the repository."""
    path = tmp_path / "victim.txt"
    path.write_text("the user's own\n")
    path.chmod(0o600)
    return path


def _untouched(victim) -> bool:
    return victim.read_text() == "the user's own\n" and stat.S_IMODE(victim.stat().st_mode) == 0o600


def test_a_link_planted_at_the_temporary_name_is_never_written_through(repo, victim):
    """A clone can hold `<file>.gitmem-tmp` as a link to any file of the user's: the hooks' install, an
    export and setup write their files whole all the same, and the user's file stays as it was."""
    git(repo, "config", "core.hooksPath", ".husky")
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text(".husky/\n")  # ignored: the hooks are gitmem's to write there
    (repo / ".husky").mkdir()
    (repo / ".cursor").mkdir()
    for name in (".husky/pre-push", "AGENTS.md", ".cursor/mcp.json", ".mcp.json", ".claude/settings.json"):
        (repo / name).parent.mkdir(exist_ok=True)
        (repo / f"{name}.gitmem-tmp").symlink_to(victim)
    gitmem(repo, "hooks", "install")
    gitmem(repo, "export", "--format", "agents-md", "--write")
    gitmem(repo, "setup", "cursor", "--write")
    gitmem(repo, "setup", "claude-code", "--write")
    assert _untouched(victim)
    assert os.access(repo / ".husky" / "pre-push", os.X_OK) and not (repo / ".husky" / "pre-push").is_symlink()
    assert "gitmem" in (repo / "AGENTS.md").read_text() and "gitmem" in (repo / ".cursor" / "mcp.json").read_text()
    assert not [p for p in repo.rglob("*.gitmem-tmp") if not p.is_symlink()]  # no temporary file left


@pytest.mark.parametrize("planted", ["file", "folder"])
def test_a_file_or_folder_linked_out_of_the_repository_is_neither_read_nor_written(repo, tmp_path, victim, planted):
    """A committed `.mcp.json` linked to a file of the user's, or `.cursor/` linked to a folder outside: the
    export and setup refuse it in one line (a dry run too: its content would be printed), and write nothing."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "mcp.json").write_text('{"mcpServers": {}}\n')
    if planted == "file":
        (repo / ".mcp.json").symlink_to(outside / "mcp.json")
        (repo / "AGENTS.md").symlink_to(victim)
        refused = [("setup", "claude-code"), ("setup", "claude-code", "--write"), ("setup", "claude-code", "--undo"),
                   ("export", "--format", "agents-md", "--write")]
    else:
        (repo / ".cursor").symlink_to(outside)
        refused = [("setup", "cursor"), ("setup", "cursor", "--write"), ("setup", "cursor", "--undo"),
                   ("export", "--format", "cursor-rules", "--write")]
    for args in refused:
        result = gitmem(repo, *args, check=False)
        assert result.returncode == 1 and "outside the repository" in result.stderr, args
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert (outside / "mcp.json").read_text() == '{"mcpServers": {}}\n' and _untouched(victim)
    assert sorted(p.name for p in outside.iterdir()) == ["mcp.json"]


def test_a_replaced_file_keeps_its_permissions_and_a_failed_write_leaves_the_old_one(tmp_path, monkeypatch):
    path = tmp_path / "notes.md"
    path.write_text("old\n")
    path.chmod(0o640)
    assert replace_file(str(path), "new\r\n") == str(path)
    assert path.read_bytes() == b"new\r\n" and stat.S_IMODE(path.stat().st_mode) == 0o640

    def fail(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        replace_file(str(path), "lost\n")
    assert path.read_bytes() == b"new\r\n" and os.listdir(tmp_path) == ["notes.md"]


def test_within_refuses_a_path_that_leads_out_through_a_parent_link(tmp_path):
    (tmp_path / "repo").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "repo" / "docs").symlink_to(tmp_path / "out")
    with pytest.raises(GitmemError, match="outside the repository"):
        replace_file(str(tmp_path / "repo" / "docs" / "x.md"), "x", within=str(tmp_path / "repo"))
    assert list((tmp_path / "out").iterdir()) == []


def test_a_project_file_linked_into_git_s_own_folder_is_neither_read_nor_written(repo):
    """A clone can commit AGENTS.md as a link to `.git/config`: inside the repository's folder, but git's, not
    the work tree's. Read as the guide, it sent the config (credentials and all) to the model; written by the
    export, git could no longer read its config. Both are refused in one line, and git's files stay as they were."""
    (repo / "AGENTS.md").symlink_to(".git/config")
    (repo / ".mcp.json").symlink_to(".git/hooks/pre-commit")
    git(repo, "config", "remote.origin.url", "https://ci:s3cret-in-config@example.com/shop.git")
    config = (repo / ".git" / "config").read_bytes()
    gitmem(repo, "add", "decision", "Build with $(make) always", "--because", "one entry point")
    for args in (("export", "--format", "agents-md", "--write"), ("context",), ("setup", "claude-code", "--write")):
        result = gitmem(repo, *args, check=False)
        assert result.returncode == 1 and "inside git's own folder" in result.stderr, args
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, args
        assert "s3cret-in-config" not in result.stdout and "repositoryformatversion" not in result.stdout, args
    assert (repo / ".git" / "config").read_bytes() == config
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    assert git(repo, "status", "--porcelain") is not None  # git still reads its config
