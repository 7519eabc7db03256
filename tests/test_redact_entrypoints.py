"""A fresh secret through every way into the store is never stored raw.

Every test makes a new secret, sends it in through one entry point (a CLI flag, an environment
variable, git's identity, an MCP tool argument or the MCP client's own name, the web form, the
memory tool, a checkpoint, a Claude Code hook, the post-commit link) and then reads every object in
the repository's object database (`git cat-file --batch-all-objects`, so dangling objects count too):
the secret's bytes are in no blob, no commit message, no trailer and no author or committer.
"""

from __future__ import annotations

import json
import os
import secrets as random_secrets
import string
import subprocess
import sys
from contextlib import asynccontextmanager

import pytest

from conftest import ROOT, git, gitmem
from gitmem.model import Author
from gitmem.store import Store

ALNUM = string.ascii_letters + string.digits


def fresh_secret() -> str:
    """A GitHub-token-shaped secret no test has seen before (built, so no whole token is in the source)."""
    return "gh" + "p_" + "".join(random_secrets.choice(ALNUM) for _ in range(36))


def all_objects(repo) -> bytes:
    """Every object in the repository, reachable or not, as `git cat-file --batch` prints them."""
    return subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch"], cwd=str(repo),
                          capture_output=True, check=True).stdout


def files_holding(repo, secret: str) -> list:
    """Every file under .git whose bytes hold ``secret``: refs, reflogs, config, the derived index, gitmem's
    scratch files and logs (objects are compressed: :func:`all_objects` reads those)."""
    return sorted(str(p.relative_to(repo)) for p in (repo / ".git").rglob("*")
                  if p.is_file() and secret.encode() in p.read_bytes())


def assert_never_stored(repo, secret: str, put_there=()) -> None:
    """``put_there``: the files the test itself wrote the secret into (git's config holding the identity)."""
    assert git(repo, "for-each-ref", "refs/memory/"), "nothing was written: the test proves nothing"
    assert secret.encode() not in all_objects(repo)
    assert files_holding(repo, secret) == list(put_there)
    log = git(repo, "log", "--format=%an%n%ae%n%cn%n%ce%n%B", "--glob=refs/memory/*")
    assert secret not in log
    assert "REDACTED" in git(repo, "log", "-p", "--format=%an <%ae>%n%B", "--glob=refs/memory/*")


# --- the CLI: every flag, the environment, git's identity ------------------------------------------------

CLI_ROUTES = {
    "text": lambda s: ["add", "fact", f"deploy with {s}"],
    "--title": lambda s: ["add", "fact", "plain text", "--title", f"token {s}"],
    "--because": lambda s: ["add", "rejection", "use the shared bot", "--because", f"it leaks {s}"],
    "--tag": lambda s: ["add", "fact", "plain text", "--tag", f"t:{s}"],
    "--path": lambda s: ["add", "fact", "plain text", "--path", f"conf/{s}.env"],
    "--next": lambda s: ["add", "checkpoint", "halfway", "--next", f"rotate {s}"],
    "--author name": lambda s: ["add", "fact", "plain text", "--author", f"Ada {s} <ada@example.com>"],
    "--author email": lambda s: ["add", "fact", "plain text", "--author", f"Ada <{s}@example.com>"],
    "--source": lambda s: ["add", "fact", "plain text", "--source", f"ci:{s}"],
    "checkpoint": lambda s: ["checkpoint", f"parser done / next: use {s}"],
}


@pytest.mark.parametrize("route", CLI_ROUTES)
def test_a_secret_in_any_cli_flag_is_never_stored_raw(repo, route):
    secret = fresh_secret()
    result = gitmem(repo, *CLI_ROUTES[route](secret))
    assert "redacted" in result.stderr
    assert secret not in result.stdout
    assert_never_stored(repo, secret)
    if route == "--source":  # the commit's trailer reads as the memory does
        stored = json.loads(gitmem(repo, "list", "--json").stdout)["memories"][0]["source"]
        message = git(repo, "log", "-1", "--format=%B", "refs/memory/main")
        assert stored == "ci:REDACTED:github-pat" and f"Memory-Source: {stored}\n" in message


ENV_ROUTES = {
    "GITMEM_AUTHOR_NAME": lambda s: {"GITMEM_AUTHOR_NAME": f"bot {s}"},
    "GITMEM_AUTHOR_EMAIL": lambda s: {"GITMEM_AUTHOR_EMAIL": f"{s}@example.com"},
    "GITMEM_SOURCE": lambda s: {"GITMEM_SOURCE": f"ci:{s}"},
}


@pytest.mark.parametrize("variable", ENV_ROUTES)
def test_a_secret_in_the_environment_is_never_stored_raw(repo, variable):
    secret = fresh_secret()
    gitmem(repo, "add", "fact", "plain text", env=ENV_ROUTES[variable](secret))
    assert_never_stored(repo, secret)


def test_a_secret_in_gits_identity_is_never_stored_raw(repo):
    secret = fresh_secret()
    git(repo, "config", "user.name", f"Ada {secret}")
    git(repo, "config", "user.email", f"{fresh_secret()}@example.com")
    gitmem(repo, "add", "fact", "plain text", env={"GIT_AUTHOR_NAME": "", "GIT_AUTHOR_EMAIL": ""})  # git's config, then
    assert_never_stored(repo, secret, put_there=[".git/config"])


def test_edit_supersede_and_retract_never_store_a_secret_raw(repo):
    memory_id = json.loads(gitmem(repo, "add", "fact", "plain text", "--json").stdout)["id"]
    secrets = [fresh_secret() for _ in range(5)]
    gitmem(repo, "edit", memory_id, "--text", f"now {secrets[0]}", "--tag", f"x:{secrets[1]}",
           "--path", f"{secrets[2]}/a.py")
    new_id = json.loads(gitmem(repo, "supersede", memory_id, f"newer {secrets[3]}", "--json").stdout)["id"]
    retracted = json.loads(gitmem(repo, "retract", new_id, "--because", f"it printed {secrets[4]}", "--json").stdout)
    assert retracted["redacted"] == 1  # the command says how many, and the commit's trailer agrees
    assert "Redacted: 1\n" in git(repo, "log", "-1", "--format=%B", "--glob=refs/memory/*")
    for secret in secrets:
        assert_never_stored(repo, secret)


def test_a_secret_on_a_command_line_an_agent_notes_is_stored_redacted(repo):
    """The store applies the whole rule table: a `--token VALUE` flag and `curl -u user:password` in a memory's
    text lose the secret and keep the command."""
    token, password = "Zq8" + fresh_secret()[4:], "Pw0" + fresh_secret()[8:]
    result = gitmem(repo, "add", "fact", f"CI logs in: gh auth login --token {token}; health: curl -u probe:{password} "
                    "https://ci.internal/health")
    assert "redacted 2 secrets" in result.stderr
    stored = json.loads(gitmem(repo, "list", "--json").stdout)["memories"][0]["text"]
    assert stored == ("CI logs in: gh auth login --token [REDACTED:secret-flag]; health: curl -u "
                      "probe:[REDACTED:curl-auth-user] https://ci.internal/health")
    assert_never_stored(repo, token)
    assert_never_stored(repo, password)


# --- the library's other writers ----------------------------------------------------------------------


def test_the_post_commit_link_and_checkpoint_advance_never_sign_with_a_secret(repo):
    from gitmem.checkpoint import link_commit

    store = Store.open(str(repo))
    store.add("checkpoint", "started", next="the parser")
    (repo / "a.py").write_text("x = 1\n")
    git(repo, "add", "a.py")
    git(repo, "commit", "-q", "-m", "a")
    secret, in_source = fresh_secret(), fresh_secret()
    link = link_commit(store, git(repo, "rev-parse", "HEAD").strip(),
                       author=Author(f"hook {secret}", f"{fresh_secret()}@example.com", "agent"),
                       source=f"hook:{in_source}")  # a message trailer only Store.commit_tree redacts
    assert link.commit is not None
    assert_never_stored(repo, secret)
    assert_never_stored(repo, in_source)


def test_a_memory_built_by_hand_is_redacted_when_it_becomes_a_blob():
    from gitmem.model import Memory, dump_yaml, new_id, utc_now

    secret = fresh_secret()
    m = Memory(id=new_id(), type="fact", text=f"raw {secret}", author=Author(f"a {secret}", f"{secret}@x"),
               source=f"tool:{secret}", created=utc_now(), tags=(f"t:{secret}",), paths=(f"{secret}.txt",),
               title=f"t {secret}", next=f"n {secret}")
    blob = dump_yaml(m)
    assert secret.encode() not in blob
    assert b"REDACTED:github-pat" in blob


# --- MCP: tool arguments and the client's own name and version ---------------------------------------------


@asynccontextmanager
async def mcp_session(repo, name: str, version: str):
    from mcp import ClientSession, StdioServerParameters, stdio_client
    from mcp.types import Implementation

    params = StdioServerParameters(command=sys.executable, args=["-m", "gitmem", "mcp"], cwd=str(repo),
                                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write, client_info=Implementation(name=name, version=version)) as s:
                await s.initialize()
                yield s


def test_a_secret_in_mcp_arguments_or_client_info_is_never_stored_raw(repo):
    pytest.importorskip("mcp")
    import anyio

    client_name, client_version = fresh_secret(), fresh_secret()
    arguments = [fresh_secret() for _ in range(6)]

    async def main():
        async with mcp_session(repo, name=client_name, version=client_version) as s:
            a = arguments
            results = [
                await s.call_tool("remember", {"type": "fact", "text": f"uses {a[0]}", "title": f"key {a[1]}",
                                               "tags": [f"t:{a[2]}"], "paths": [f"{a[3]}/x.py"]}),
                await s.call_tool("reject", {"proposal": "share the token", "reason": f"it is {a[4]}"}),
                await s.call_tool("checkpoint", {"text": f"halfway / next: rotate {a[5]}"}),
            ]
            return results

    results = anyio.run(main)
    assert [r.is_error for r in results] == [False, False, False], [r.content[0].text for r in results]
    for secret in [client_name, client_version] + arguments:
        assert_never_stored(repo, secret)
    sources = {m.source for m in Store.open(str(repo)).list()}
    assert sources == {"mcp:REDACTED:github-pat/REDACTED:github-pat"}
    # each write counts what it redacted, the client's name and version included (2 + 4 fields, 2 + 1, and
    # 2 + 2 for the checkpoint, whose text keeps the step its next field repeats)
    assert [r.structured_content["redacted"] for r in results] == [6, 3, 4]


# --- the web form, the memory tool, Claude Code's hooks ------------------------------------------------------


def test_a_secret_typed_into_the_web_form_is_never_stored_raw(repo):
    import re

    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from gitmem.web import create_app

    web = TestClient(create_app(str(repo)), base_url="http://127.0.0.1:8737", follow_redirects=False)
    form = web.get("/memory").text
    token = re.search(r'name="csrf" value="([^"]+)"', form).group(1)
    secrets = [fresh_secret() for _ in range(5)]
    r = web.post("/add", data={"csrf": token, "branch": "main", "type": "rejection", "text": f"use {secrets[0]}",
                               "title": f"t {secrets[1]}", "reason": f"leaks {secrets[2]}",
                               "tags": f"a:{secrets[3]}", "paths": f"src/{secrets[4]}.py"})
    assert r.status_code == 303, r.text[:500]
    for secret in secrets:
        assert_never_stored(repo, secret)


def test_a_secret_given_to_the_memory_tool_is_never_stored_raw(repo):
    from gitmem.memory_tool import MemoryTool

    tool = MemoryTool(str(repo), source="memory-tool:claude")
    in_path, in_text = fresh_secret(), fresh_secret()
    tool.execute({"command": "create", "path": f"/memories/decisions/{in_path}.md",
                  "file_text": f"The deploy key is {in_text}"})
    assert_never_stored(repo, in_path)
    assert_never_stored(repo, in_text)


def test_a_secret_in_what_claude_code_hooks_capture_is_never_stored_raw(repo):
    in_dir, in_session = fresh_secret(), fresh_secret()
    folder = repo / in_dir
    folder.mkdir()
    (folder / "notes.md").write_text("hello\n")
    data = {"session_id": in_session, "transcript_path": "", "cwd": str(repo), "hook_event_name": "PostToolUse",
            "tool_name": "Read", "tool_input": {"file_path": str(folder / "notes.md")}}
    env = {"AI_AGENT": "claude-code_2-1-332_harness", "GITMEM_HOOK_MODE": "foreground"}
    result = gitmem(repo, "hook", "claude-code", "PostToolUse", input=json.dumps(data), env=env)
    assert result.returncode == 0
    assert Store.open(str(repo)).list(type="file"), result.stderr
    assert_never_stored(repo, in_dir)
    assert_never_stored(repo, in_session)



def claude_code_hook(repo, event: str, env=(), **fields) -> None:
    data = {"session_id": "s1", "transcript_path": "", "cwd": str(repo), "hook_event_name": event, **fields}
    gitmem(repo, "hook", "claude-code", event, input=json.dumps(data),
           env={"AI_AGENT": "claude-code_2-1-332_harness", **dict(env)})


def test_a_secret_in_a_prompt_stays_out_of_the_sessions_scratch_file(repo):
    secret = fresh_secret()
    claude_code_hook(repo, "UserPromptSubmit", prompt=f"deploy with {secret} " + "x" * 3000)  # cut after redacting
    claude_code_hook(repo, "PreCompact")  # a checkpoint quoting the last prompt
    state = json.loads((repo / ".git" / "gitmem" / "claude-code" / "s1.json").read_text())
    assert state["prompts"][0].startswith("deploy with [REDACTED:github-pat] xxx")
    assert_never_stored(repo, secret)


def test_a_secret_in_a_captured_path_stays_out_of_the_hook_log(repo):
    import time

    secret = fresh_secret()
    folder = repo / secret
    folder.mkdir()
    (folder / "notes.md").write_text("hello\n")
    claude_code_hook(repo, "PostToolUse", tool_name="Read", tool_input={"file_path": str(folder / "notes.md")})
    log = repo / ".git" / "gitmem" / "hooks.log"  # capture runs detached: its line goes to the log
    deadline = time.monotonic() + 30
    while "file memory" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "file memory" in log.read_text() and "REDACTED" in log.read_text()
    assert_never_stored(repo, secret)


def test_a_secret_pasted_as_a_branch_name_is_not_echoed_by_the_error_that_refuses_it(repo):
    """`--branch feat/<token>` repeated the token on stderr, into terminals and CI logs."""
    secret = fresh_secret()
    for name, message in ((f"feat/{secret}", "no branch 'feat/[REDACTED:github-pat]' here"),
                          (f"refs/memory/{secret}", "no branch 'refs/memory/[REDACTED:github-pat]' here"),
                          (f"{secret}..x", "invalid branch name '[REDACTED:github-pat]..x'"),
                          (f"-{secret}", "invalid branch name '-[REDACTED:github-pat]'"),
                          ("x" * 20 + secret + "y" * 300, "invalid branch name '" + "x" * 20 + "[REDACTED:github-pat'...")):
        result = gitmem(repo, "--branch", name, "add", "note", "x", check=False)
        assert result.returncode == 1 and message in result.stderr and secret[4:24] not in result.stderr, name
    assert git(repo, "for-each-ref", "refs/memory/") == ""  # refused: nothing written
