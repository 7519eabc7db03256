"""The MCP server, driven as a real subprocess (`gitmem mcp`) by the official SDK's stdio client."""

from __future__ import annotations

import json
import os
import sys
from contextlib import asynccontextmanager, contextmanager

import anyio
import pytest

from conftest import ROOT, conflicted, git

mcp = pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from mcp.types import Implementation  # noqa: E402


@asynccontextmanager
async def session(repo, name="claude-code", version="2.1.0"):
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "gitmem", "mcp"], cwd=str(repo),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write, client_info=Implementation(name=name, version=version)) as s:
                await s.initialize()
                yield s


async def call(s, tool, **arguments):
    result = await s.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return result, (result.structured_content if result.structured_content is not None
                    else json.loads(result.content[0].text))


def run(fn):
    return anyio.run(fn)


def test_lists_its_tools_with_short_schemas(repo):
    from gitmem.tokens import count_tokens

    async def main():
        async with session(repo) as s:
            return (await s.list_tools()).tools, (await s.list_resources()).resources, \
                (await s.list_resource_templates()).resource_templates

    tools, resources, templates = run(main)
    by_name = {t.name: t for t in tools}
    assert set(by_name) == {"remember", "recall", "get", "history", "reject", "check_proposal", "context",
                            "checkpoint", "resume"}
    assert by_name["reject"].input_schema["required"] == ["proposal", "reason"]
    assert by_name["remember"].input_schema["properties"]["type"]["enum"][0] == "decision"
    assert "paths" in by_name["check_proposal"].input_schema["properties"]
    total = sum(count_tokens(t.name + (t.description or "") + json.dumps(t.input_schema, separators=(",", ":")))
                for t in tools)
    print(f"\nMCP tool names, descriptions and schemas: {total} tokens (limit 1500)")
    assert total < 1500
    assert [r.uri for r in resources] == ["gitmem://memories"]
    assert [t.uri_template for t in templates] == ["gitmem://memory/{id}"]


def test_remember_recall_reject_check_proposal_and_audit_trail(repo):
    async def main():
        async with session(repo, "claude-code", "2.1.0") as s:
            _, added = await call(s, "remember", type="decision", text="Queue jobs in Postgres with SKIP LOCKED",
                                  reason="enqueue in the same transaction", paths=["src/jobs/queue.py"])
            _, recalled = await call(s, "recall", query="how are background jobs queued")
            _, rejected = await call(s, "reject", proposal="Use Redis with RQ for the job queue",
                                     reason="ops will not run another stateful service")
            _, found = await call(s, "check_proposal",
                                  proposal="Let's move the background workers onto a Redis queue")
            _, nothing = await call(s, "check_proposal", proposal="Add a dark mode toggle to settings")
            _, got = await call(s, "get", id=added["id"][:12])
            _, history = await call(s, "history", id=rejected["id"])
            listing = await s.read_resource("gitmem://memories")
            one = await s.read_resource(f"gitmem://memory/{added['id']}")
            return added, recalled, rejected, found, nothing, got, history, listing, one

    added, recalled, rejected, found, nothing, got, history, listing, one = run(main)
    assert recalled["memories"][0]["id"] == added["id"]
    assert found["repeat"] is True and [r["id"] for r in found["rejections"]] == [rejected["id"]]
    match = found["rejections"][0]
    assert match["tier"] == "repeat" and found["judge"]
    assert match["reason"] == "ops will not run another stateful service"
    assert match["author"] == "claude-code" and match["when"].endswith("Z")
    assert nothing["repeat"] is False and nothing["rejections"] == [] and nothing["related"] == []
    assert got["text"] == "Queue jobs in Postgres with SKIP LOCKED"
    assert got["author"]["kind"] == "agent" and got["source"] == "mcp:claude-code/2.1.0"
    assert history["changes"][0]["source"] == "mcp:claude-code/2.1.0"
    assert [m["id"] for m in json.loads(listing.contents[0].text)["memories"]] == [added["id"], rejected["id"]]
    assert "SKIP LOCKED" in one.contents[0].text
    # the audit trail, read with plain git, names the client
    log = git(repo, "log", "--format=%an|%(trailers:key=Memory-Source,valueonly)", "refs/memory/main")
    assert [line for line in log.splitlines() if line] == ["claude-code|mcp:claude-code/2.1.0"] * 2


def test_recall_reads_a_path_as_a_stored_path_is_written(repo):
    typed = ("src/pay/refunds.py", "./src/pay/refunds.py", "src//pay", "./src", "../src/pay/refunds.py")

    async def main():
        async with session(repo) as s:
            await call(s, "remember", type="decision", text="Refunds are idempotent", reason="retries",
                       paths=["src/pay/refunds.py"])
            return [len((await call(s, "recall", query="", paths=[p]))[1]["memories"]) for p in typed]

    assert run(main) == [1, 1, 1, 1, 0]  # outside the repository: nothing


def test_recall_with_no_words_and_no_paths_is_refused_not_answered_with_none(repo):
    """`recall(query="", type="decision")` answered no memories over a store of decisions: nothing ranks without
    words or paths, and the model read the empty list as "no decisions". Refused as `gitmem search ""` is; with
    paths (or a current diff) it still ranks by them."""
    async def main():
        async with session(repo) as s:
            await call(s, "remember", type="decision", text="Refunds are idempotent", paths=["src/pay.py"])
            empty = await s.call_tool("recall", {"query": " ", "type": "decision"})
            _, by_path = await call(s, "recall", query="", paths=["src/pay.py"])
            (repo / "src").mkdir()
            (repo / "src" / "pay.py").write_text("x = 1\n")
            _, by_diff = await call(s, "recall", query="")
            return empty, by_path, by_diff

    empty, by_path, by_diff = run(main)
    assert empty.is_error and empty.content[0].text.endswith(
        "query is empty and there are no paths to rank by: give words to search for, or paths")
    assert [m["text"] for m in by_path["memories"]] == [m["text"] for m in by_diff["memories"]] == [
        "Refunds are idempotent"]


def test_a_malformed_call_is_an_mcp_error_and_writes_nothing(repo):
    async def main():
        async with session(repo) as s:
            missing = await s.call_tool("reject", {"proposal": "Use Redis"})
            bad_type = await s.call_tool("remember", {"type": "gossip", "text": "x"})
            bad_path = await s.call_tool("remember", {"type": "fact", "text": "x", "paths": ["../outside"]})
            git_path = await s.call_tool("remember", {"type": "fact", "text": "x", "paths": [".git/config"]})
            unknown = await s.call_tool("forget_everything", {})
            no_limit = await s.call_tool("recall", {"query": "redis", "limit": 0})
            blank = await s.call_tool("check_proposal", {"proposal": "  "})
            _, still = await call(s, "recall", query="redis")
            return missing, bad_type, bad_path, git_path, unknown, no_limit, blank, still

    missing, bad_type, bad_path, git_path, unknown, no_limit, blank, still = run(main)
    for result in (missing, bad_type, bad_path, git_path, unknown, no_limit, blank):
        assert result.is_error
    assert "limit must be at least 1" in no_limit.content[0].text
    assert "proposal is empty" in blank.content[0].text
    assert "reason" in missing.content[0].text
    assert "must stay inside the repository" in bad_path.content[0].text
    assert git_path.content[0].text.endswith("invalid paths: '.git/config' is inside .git: a memory's paths name "
                                             "files of the work tree")
    assert still == {"ref": "refs/memory/main", "memories": []}
    assert git(repo, "for-each-ref", "refs/memory/").strip() == ""


def test_follows_branch_switches_while_running(repo):
    async def main():
        async with session(repo, "cursor", "0.50") as s:
            await call(s, "remember", type="fact", text="Main uses port 8000")
            git(repo, "switch", "-q", "-c", "feature")
            _, on_feature = await call(s, "remember", type="fact", text="Feature flag lives in flags.py")
            return on_feature

    on_feature = run(main)
    assert on_feature["ref"] == "refs/memory/feature"
    assert "mcp:cursor/0.50" in git(repo, "log", "-1", "--format=%B", "refs/memory/feature")


def test_context_checkpoint_and_resume(repo):
    async def main():
        async with session(repo) as s:
            await call(s, "remember", type="convention", text="Money is integer cents")
            _, ctx = await call(s, "context", query="how do we store prices")
            _, cp = await call(s, "checkpoint", text="refund webhook parsed", next="write the ledger entry")
            _, where = await call(s, "resume")
            return ctx, cp, where

    ctx, cp, where = run(main)
    assert "Money is integer cents" in ctx["context"] and ctx["memory_commit"]
    assert where["checkpoint"]["id"] == cp["id"] and where["next"] == "write the ledger entry"


def test_every_malformed_stdio_request_gets_a_reply_and_the_server_keeps_serving(repo):
    """Raw JSON-RPC over the server's stdin: a lone surrogate or bytes that are no UTF-8 in a tool argument, a
    line that is not JSON and a message of the wrong shape each get an error reply; nothing is stored."""
    import select
    import subprocess

    proc = subprocess.Popen([sys.executable, "-m", "gitmem", "mcp"], cwd=str(repo), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)})

    def send(line: str) -> None:
        proc.stdin.write(line.encode() + b"\n")
        proc.stdin.flush()

    def receive() -> dict:
        ready, _, _ = select.select([proc.stdout], [], [], 20)
        assert ready, "no reply within 20 s: the client would hang"
        return json.loads(proc.stdout.readline())

    try:
        send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}))
        assert receive()["id"] == 1
        send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        send('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"remember",'
             '"arguments":{"type":"fact","text":"half a pair \\ud800 here"}}}')
        assert receive() == {"jsonrpc": "2.0", "id": 2, "error": {
            "code": -32602, "message": "Invalid params: text that is not valid UTF-8 (a lone surrogate)"}}
        send('{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"recall","arguments":{"query":"\\udc80"}}}')
        assert receive()["error"]["code"] == -32602
        # bytes that are no UTF-8 (a Latin-1 "café") were read as U+FFFD and stored so, with no word
        proc.stdin.write(b'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"remember",'
                         b'"arguments":{"type":"fact","text":"caf\xe9 au lait"}}}\n')
        proc.stdin.flush()
        assert receive()["error"] == {
            "code": -32602, "message": "Invalid params: text that is not valid UTF-8 (a lone surrogate)"}
        send("{this is not json")
        assert receive() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error: not JSON"}}
        send('{"jsonrpc":"2.0","id":4,"method":5}')
        assert receive()["error"]["code"] == -32600
        for bad_id in ("[1]", '{"a": 1}', "1.5", "true"):  # ids the SDK would crash on, or leave unanswered
            send('{"jsonrpc":"2.0","id":%s,"method":"tools/list"}' % bad_id)
            assert receive() == {"jsonrpc": "2.0", "id": None, "error": {
                "code": -32600, "message": "Invalid Request: an id must be a string or an integer"}}, bad_id
        send('{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":[1]}}')
        send(json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}))
        reply = receive()
        assert reply["id"] == 5 and reply["result"]["tools"]
    finally:
        proc.stdin.close()
        proc.wait(timeout=20)
    assert git(repo, "for-each-ref", "refs/memory/") == ""


def test_requests_piped_in_before_the_input_ends_are_all_answered_before_the_server_exits(repo):
    """A scripted client writes its requests and closes stdin: the SDK would cancel what is still running
    at end of input, and a write a tool had made would go unreported. Every request gets its answer."""
    import subprocess

    lines = [json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "piped", "version": "1"}}}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})]
    lines += [json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
        "name": "remember", "arguments": {"type": "fact", "text": f"piped fact {i}"}}}) for i in range(2, 12)]
    done = subprocess.run([sys.executable, "-m", "gitmem", "mcp"], cwd=str(repo), input="\n".join(lines) + "\n",
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    replies = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert sorted(r["id"] for r in replies) == list(range(1, 12)) and done.returncode == 0
    stored = {r["result"]["structuredContent"]["id"] for r in replies if r["id"] > 1}
    from gitmem import Store

    assert len(stored) == 10 and stored == {m.id for m in Store.open(str(repo)).list()}


@pytest.mark.parametrize("http", [False, True])
def test_an_invalid_branch_is_refused_at_start_not_on_every_call(repo, http):
    """`gitmem --branch bad..name mcp` fails as `gitmem --branch bad..name list` does, before a client waits on a
    handshake: it started, answered the handshake and then failed every tool call with the same error."""
    from conftest import gitmem_process

    done = gitmem_process(repo, "--branch", "bad..name", "mcp", *(["--http", "--port", "0"] if http else []),
                          check=False, input="", timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip().splitlines() == ["Error: invalid branch name 'bad..name'"]


def test_a_port_without_http_is_refused_not_ignored(repo):
    """`gitmem mcp --port 9000` served stdio and left the port unused: a person who forgot --http waited on a port
    nothing listened on."""
    from conftest import gitmem_process

    done = gitmem_process(repo, "mcp", "--port", "9000", check=False, input="", timeout=60)
    assert done.returncode == 2 and done.stdout == "" and "--port is for --http" in done.stderr


def test_a_client_that_goes_away_mid_call_ends_the_server_quietly_and_the_write_is_kept(repo):
    """A client killed mid-call closes both pipes: the server still finishes the write (as for a client that
    only closed its input, above), then finds no one to answer. That is the session's end, not a crash: no
    traceback on stderr, exit 0."""
    import subprocess

    proc = subprocess.Popen([sys.executable, "-m", "gitmem", "mcp"], cwd=str(repo), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
    lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "gone", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "remember", "arguments": {"type": "fact", "text": "written for a client that left"}}}]
    proc.stdin.write((json.dumps(lines[0]) + "\n").encode())
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 1
    proc.stdin.write("".join(json.dumps(line) + "\n" for line in lines[1:]).encode())
    proc.stdin.close()
    proc.stdout.close()  # gone before the answer: the call takes longer than this
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0 and "Traceback" not in err, err[-2000:]
    from gitmem import Store

    assert [m.text for m in Store.open(str(repo)).list()] == ["written for a client that left"]


def test_every_tool_and_resource_runs_on_the_library_thread(repo, monkeypatch):
    """The SDK runs each synchronous tool on whichever worker thread is free; gitmem's work runs on one
    (see gitmem.serving.on_library_thread): one malloc arena, and one caller of the shared index at a time.
    Driven by the SDK's own client, connected to the server in this process so the threads can be seen."""
    import threading

    from mcp import Client

    from gitmem import mcp_server

    threads = []
    for name in ("remember", "recall", "memory_list"):
        original = getattr(mcp_server.Gitmem, name)

        def spy(self, *args, _original=original, **kwargs):
            threads.append(threading.current_thread().name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(mcp_server.Gitmem, name, spy)
    server = mcp_server.build_server(str(repo))

    async def main():
        async with Client(server) as client:
            for i in range(3):
                assert not (await client.call_tool("remember", {"type": "fact", "text": f"Fact {i}"})).is_error
                assert not (await client.call_tool("recall", {"query": "fact"})).is_error
            await client.read_resource("gitmem://memories")

    run(main)
    assert len(threads) == 7 and len(set(threads)) == 1 and threads[0].startswith("gitmem-library")


def test_a_clients_name_and_version_become_a_source_that_says_no_more_than_they_do():
    """"../../x" is no author name; a secret in the version is redacted, and its placeholder is kept whole or
    left out when the version is cut to length, never cut to "REDACTED:ge"."""
    from types import SimpleNamespace

    from gitmem.mcp_server import source_for

    assert source_for(SimpleNamespace(name="../../x", version="1.2")) == ("mcp:x/1.2", 0)
    source, redacted = source_for(SimpleNamespace(name="cc", version="DB_PASSWORD=Sup3rFAKEVTJlvf!"))
    assert source == "mcp:cc/DB_PASSWORD" and redacted == 1
    assert source_for(SimpleNamespace(name="claude-code", version="2.0.1")) == ("mcp:claude-code/2.0.1", 0)


def test_wrongly_typed_or_missing_arguments_are_one_line_naming_each_field(repo):
    """The SDK validates arguments before gitmem's code runs; its report is pydantic's, several lines and a
    link. The agent gets one line that names each field and what is wrong with it, and nothing is stored."""
    async def main():
        async with session(repo) as s:
            wrong = await s.call_tool("remember", {"type": "fact", "text": 123, "tags": "notalist"})
            missing = await s.call_tool("reject", {"proposal": "use redis"})
            return wrong, missing

    wrong, missing = run(main)
    for result in (wrong, missing):
        text = result.content[0].text
        assert result.is_error and "\n" not in text and "pydantic" not in text, text
    assert wrong.content[0].text.startswith("invalid arguments for remember: text: Input should be a valid string")
    assert "tags: Input should be a valid list" in wrong.content[0].text
    assert "reason: Field required" in missing.content[0].text
    assert git(repo, "for-each-ref", "refs/memory/") == ""


def test_an_argument_a_tool_does_not_take_is_refused_not_dropped(repo):
    """An agent that names the reason `because` (the CLI's option) or a path `path` was answered with an id, and
    the memory was stored without them: the SDK drops a name the tool does not take. It is one line naming it
    and what the tool takes, and nothing is stored; the same call with the right names is stored whole."""
    async def main():
        async with session(repo) as s:
            dropped = await s.call_tool("remember", {"type": "decision", "text": "Queue jobs in Postgres",
                                                     "because": "no new services", "path": ["src/jobs.py"]})
            typo = await s.call_tool("recall", {"query": "jobs", "n": 3})
            none = await s.call_tool("resume", {"branch": "feature"})
            typed = [await s.call_tool("recall", {"query": "jobs", "limit": v}) for v in ("5", True, 2.5)]
            _, kept = await call(s, "remember", type="decision", text="Queue jobs in Postgres",
                                 reason="no new services", paths=["src/jobs.py"])
            return dropped, typo, none, kept, typed

    dropped, typo, none, kept, typed = run(main)
    for result in (dropped, typo, none, *typed):  # a limit of the wrong JSON type too: not read as a number
        assert result.is_error and "\n" not in result.content[0].text, result.content[0].text
    assert dropped.content[0].text == (
        "invalid arguments for remember: because: not an argument of remember; path: not an argument of remember "
        "(it takes type, text, title, tags, paths, reason)")
    assert typo.content[0].text.startswith("invalid arguments for recall: n: not an argument of recall")
    assert none.content[0].text == "invalid arguments for resume: branch: not an argument of resume (it takes none)"
    assert git(repo, "rev-list", "refs/memory/main").split() == [kept["commit"]]
    assert "reason: no new services" in git(repo, "show", f"refs/memory/main:decision/{kept['id'][-2]}/"
                                                      f"{kept['id'][-1]}/{kept['id']}.yaml")


def test_a_write_takes_the_email_the_cli_would_and_is_refused_with_none_anywhere(repo, monkeypatch):
    git(repo, "config", "--unset", "user.email")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "ci@example.com")  # a CI job's identity, as the CLI reads it

    async def write():
        async with session(repo) as s:
            return await s.call_tool("remember", {"type": "fact", "text": "Refunds are idempotent"})

    result = run(write)
    assert not result.is_error, result.content[0].text
    assert git(repo, "log", "-1", "--format=%an <%ae>", "refs/memory/main").strip() == "claude-code <ci@example.com>"

    monkeypatch.delenv("GIT_AUTHOR_EMAIL")
    refused = run(write)
    assert refused.is_error and "git config user.email you@example.com" in refused.content[0].text
    assert "--author" not in refused.content[0].text  # the CLI's option: no tool argument sets it
    assert len(git(repo, "rev-list", "refs/memory/main").split()) == 1  # nothing signed unknown@localhost


@contextmanager
def http_server(repo):
    """`gitmem mcp --http --port 0`, answering: the URL it prints once it listens (as `gitmem ui` prints its
    own), while it runs."""
    import re
    import subprocess

    from conftest import GITMEM

    server = subprocess.Popen([*GITMEM, "mcp", "--http", "--port", "0"], cwd=str(repo),
                              env={**os.environ, "PYTHONPATH": str(ROOT)},
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        said = re.fullmatch(r"gitmem mcp: serving (.+) on (http://127\.0\.0\.1:\d+/mcp) \(Ctrl-C stops\)\n", line)
        assert said and said.group(1) == str(repo.resolve()), line
        yield said.group(2)
    finally:
        server.terminate()
        server.wait(timeout=30)


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def test_the_http_transport_serves_only_a_loopback_host_and_origin_as_the_web_ui_does(repo):
    """`gitmem mcp --http` answers a page that rebinds its DNS name to 127.0.0.1 as the web UI and the router
    do: the SDK's own check took any Host or Origin that starts with `localhost:`, `localhost:1@evil` too."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    from conftest import FOREIGN_HOSTS, LOOPBACK_HOSTS

    with http_server(repo) as url:
        def status(**headers):
            return httpx2.post(url, json=INITIALIZE, headers={**ACCEPT, **headers}).status_code

        for host in LOOPBACK_HOSTS:
            assert status(Host=host) == 200, host
        for host in FOREIGN_HOSTS + ["localhost:1@evil.example", "localhost:*"]:
            assert status(Host=host) == 403, host
        for origin in ("http://127.0.0.1:1.evil.example", "http://localhost:1@evil.example", "http://[::1",
                       "http://evil.example", "null"):
            assert status(Origin=origin) == 403, origin

        async def main():
            async with streamable_http_client(url) as (read, write, *_):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    _, added = await call(s, "remember", type="fact", text="Refunds are idempotent")
                    return added

        assert run(main)["ref"] == "refs/memory/main"


def test_every_malformed_http_request_gets_a_one_line_error_as_over_stdio(repo):
    """Over HTTP the SDK took an id that is a list, 1.5 or true as a notification (202, and the client waited for
    an answer for ever) and answered a message of the wrong shape with pydantic's many lines and links. Each
    gets the JSON-RPC error stdio gives it, as a 400 (a body over the API's size limit a 413); nothing is stored;
    the session keeps serving."""
    import httpx2

    with http_server(repo) as url:
        opened = httpx2.post(url, json=INITIALIZE, headers=ACCEPT)
        headers = {**ACCEPT, "Content-Type": "application/json", "Mcp-Session-Id": opened.headers["mcp-session-id"],
                   "Mcp-Protocol-Version": "2025-06-18"}

        def error(body: bytes) -> dict:
            answer = httpx2.post(url, content=body, headers=headers)
            assert answer.status_code == 400, (body, answer.status_code, answer.text)
            return answer.json()["error"]

        assert httpx2.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                           headers=headers).status_code == 202
        for bad_id in (b"[1]", b'{"a": 1}', b"1.5", b"true"):
            assert error(b'{"jsonrpc":"2.0","id":%s,"method":"tools/list"}' % bad_id) == {
                "code": -32600, "message": "Invalid Request: an id must be a string or an integer"}, bad_id
        assert error(b'{"jsonrpc":"2.0","id":4,"method":5}') == {
            "code": -32600, "message": "Invalid Request: not a JSON-RPC 2.0 message the server understands"}
        surrogate = {"code": -32602, "message": "Invalid params: text that is not valid UTF-8 (a lone surrogate)"}
        remember = b'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"remember","arguments":' \
                   b'{"type":"fact","text":"%s"}}}'
        assert error(remember % b"half a pair \\ud800 here") == surrogate
        assert error(remember % b"caf\xe9 au lait") == surrogate
        assert error(b"{this is not json") == {"code": -32700, "message": "Parse error: not JSON"}
        too_large = httpx2.post(url, content=b" " * (32 * 1024 * 1024 + 1), headers=headers)
        assert too_large.status_code == 413 and too_large.json()["error"]["code"] == -32600
        listed = httpx2.post(url, json={"jsonrpc": "2.0", "id": 7, "method": "tools/list"}, headers=headers)
        assert listed.status_code == 200 and '"remember"' in listed.text
    assert git(repo, "for-each-ref", "refs/memory/") == ""


def test_recall_and_get_say_a_memory_is_in_conflict_with_both_versions_until_it_is_resolved(repo):
    from gitmem.mcp_server import Gitmem
    from gitmem.merge import merge_into, resolve
    from gitmem.store import Store

    main, shared = conflicted(repo)
    merge_into(main, Store.open(str(repo), "feature").own_tip())
    tools = Gitmem(str(repo))
    [hit] = tools.recall("Postgres")["memories"]
    for shown in (hit, tools.get(shared)):
        assert shown["conflict"]["fields"] == ["text"]
        assert {shown["conflict"]["ours"]["text"], shown["conflict"]["theirs"]["text"]} == \
            {"Use Postgres 15", "Use Postgres 16"}
        assert "not chosen" in shown["conflict"]["note"]
    resolve(main, shared, take="theirs")
    assert "conflict" not in tools.recall("Postgres")["memories"][0] and "conflict" not in tools.get(shared)


def test_the_memories_resource_lists_the_newest_and_counts_them_all(repo):
    from conftest import seeded
    from gitmem.mcp_server import RESOURCE_LIMIT

    ids = sorted(m.id for m in seeded(repo, RESOURCE_LIMIT + 50).list())

    async def main():
        async with session(repo) as s:
            return json.loads((await s.read_resource("gitmem://memories")).contents[0].text)

    listing = run(main)
    assert [m["id"] for m in listing["memories"]] == ids[-RESOURCE_LIMIT:]
    assert listing["count"] == RESOURCE_LIMIT + 50 and "recall" in listing["note"]


def test_a_resource_read_after_the_memory_ref_moved_to_a_damaged_tip_says_why_in_one_line(repo):
    """Another process moved the branch's memory ref to an object that is no commit while the server ran: the
    memories resource answered 'Error reading resource gitmem://memories' (and logged a traceback), where the
    tools and the one-memory resource say what is wrong and what to run. It says so too, and the server
    serves on once the ref is put back."""
    from mcp.shared.exceptions import MCPError

    async def main():
        async with session(repo) as s:
            _, added = await call(s, "remember", type="fact", text="Refunds are idempotent")
            tip = git(repo, "rev-parse", "refs/memory/main").strip()
            blob = git(repo, "hash-object", "-w", "--stdin", input="not a commit\n").strip()
            git(repo, "update-ref", "refs/memory/main", blob)
            errors = []
            for uri in ("gitmem://memories", f"gitmem://memory/{added['id']}"):
                with pytest.raises(MCPError) as refused:
                    await s.read_resource(uri)
                errors.append(str(refused.value))
            git(repo, "update-ref", "refs/memory/main", tip)
            listing = json.loads((await s.read_resource("gitmem://memories")).contents[0].text)
            return errors, listing, added

    errors, listing, added = run(main)
    for error in errors:
        assert error.startswith("refs/memory/main is damaged") and "`gitmem --branch main doctor`" in error, error
        assert "\n" not in error
    assert [m["id"] for m in listing["memories"]] == [added["id"]]


def test_a_checkpoint_s_next_step_comes_from_next_or_a_marked_one_in_its_text(repo):
    # The tool has a field for the next step: a " / " in an agent's text ("split the read / write paths") made
    # the rest of the text the next step, which the next session was told to do
    async def main():
        async with session(repo) as s:
            await call(s, "checkpoint", text="split the read / write paths of the cache\nthen benchmarked it")
            _, first = await call(s, "resume")
            await call(s, "checkpoint", text="cache split done / next: wire it into the CLI")
            _, second = await call(s, "resume")
            await call(s, "checkpoint", text="wired in / docs", next="update the README")
            _, third = await call(s, "resume")
            return first, second, third

    first, second, third = run(main)
    assert first["checkpoint"]["text"] == "split the read / write paths of the cache\nthen benchmarked it"
    assert first["next"] is None
    assert second["next"] == "wire it into the CLI"
    assert third["next"] == "update the README"


def test_a_write_on_a_detached_head_says_whose_memory_it_went_to(repo):
    # The CLI prints this notice; a client reading only the ref had no word that its memory went to main's
    git(repo, "checkout", "-q", "--detach")

    async def main():
        async with session(repo) as s:
            _, remembered = await call(s, "remember", type="fact", text="The build runs on Python 3.12")
            _, saved = await call(s, "checkpoint", text="bisecting the flaky test")
            return remembered, saved

    for reply in run(main):
        assert reply["ref"] == "refs/memory/main" and "HEAD is detached" in reply["notice"]
    git(repo, "checkout", "-q", "main")

    async def attached():
        async with session(repo) as s:
            return (await call(s, "remember", type="fact", text="CI caches the wheel directory"))[1]

    assert "notice" not in run(attached)


def test_search_by_type_on_the_cli_ranks_as_mcp_recall_of_that_type_does(repo):
    """`gitmem search --type decision` weighed words among the decisions alone, MCP recall among every memory:
    "postgres", common in facts, made the Postgres decision first on the CLI and last over MCP. A filter narrows
    which memories are hits, never how a word weighs: both give the same hits in the same order, also when a
    listing filter (--kind) makes the CLI rank the memories loaded."""
    from conftest import gitmem

    gitmem(repo, "add", "decision", "Queue background jobs in Postgres", "--because", "one database")
    gitmem(repo, "add", "decision", "Cache sessions in Redis with a short TTL, Redis is fine for caches",
           "--because", "speed")
    gitmem(repo, "add", "decision", "Use Redis streams for the job queue events", "--because", "fan-out")
    for i in range(6):
        gitmem(repo, "add", "fact", f"Postgres replica {i} lags under load during jobs")
    query = "redis postgres jobs"

    def cli(*narrowing):
        hits = json.loads(gitmem(repo, "search", "--type", "decision", *narrowing, query, "--json").stdout)["hits"]
        return [(h["memory"]["id"], round(h["score"], 3)) for h in hits]

    async def main():
        async with session(repo) as s:
            return (await call(s, "recall", query=query, type="decision"))[1]["memories"]

    over_mcp = [(m["id"], m["score"]) for m in run(main)]
    assert len(over_mcp) == 3 and cli() == over_mcp and cli("--kind", "human") == over_mcp


def test_context_is_built_without_a_guide_it_cannot_read_and_says_so(repo):
    """The guide git config names was deleted (or is no UTF-8): the context tool failed, so the agent got no
    memory at all for a file it cannot fix. It builds the context from the memory and says the guide is missing."""
    (repo / "AGENTS.md").write_text("# Guide\nRun the tests with tox.\n")
    git(repo, "config", "gitmem.guide", "AGENTS.md")

    async def main():
        async with session(repo) as s:
            await call(s, "remember", type="convention", text="Money is integer cents")
            _, whole = await call(s, "context")
            (repo / "AGENTS.md").unlink()
            _, deleted = await call(s, "context", query="how do we store prices")
            (repo / "AGENTS.md").write_bytes(b"# Guide\n\xff\xfe caf\xe9\n")
            _, garbled = await call(s, "context")
            return whole, deleted, garbled

    whole, deleted, garbled = run(main)
    assert "Run the tests with tox" in whole["context"] and not any("guide AGENTS.md" in w for w in whole["warnings"])
    for ctx in (deleted, garbled):
        assert "Money is integer cents" in ctx["context"] and "tox" not in ctx["context"]
    assert deleted["warnings"][0] == "the guide AGENTS.md is missing: the context was built without it"
    assert garbled["warnings"][0].startswith("cannot read the guide AGENTS.md: ")


def test_resume_on_a_fresh_branch_says_the_checkpoint_is_the_parent_branchs(repo):
    """A new branch has no memory of its own and reads main's: resume gave main's checkpoint and next step with no
    word that they were main's, so the agent on the fresh branch was told to carry on main's work as its own."""
    async def main():
        async with session(repo) as s:
            await call(s, "checkpoint", text="ledger half done", next="finish the ledger")
            _, on_main = await call(s, "resume")
            git(repo, "switch", "-q", "-c", "feature")
            _, on_feature = await call(s, "resume")
            return on_main, on_feature

    on_main, on_feature = run(main)
    assert on_main["inherits"] is None and "note" not in on_main
    assert on_feature["branch"] == "feature" and on_feature["inherits"] == "main"
    assert on_feature["next"] == "finish the ledger"
    assert on_feature["note"].startswith("from main's memory: this branch has none of its own yet")


def test_a_read_on_a_detached_head_says_whose_memory_it_read(repo):
    # writes said "HEAD is detached ..."; recall, context and resume read main's memory without a word
    git(repo, "checkout", "-q", "--detach")

    async def reads():
        async with session(repo) as s:
            return [(await call(s, tool, **arguments))[1] for tool, arguments in
                    (("recall", {"query": "build"}), ("context", {}), ("resume", {}))]

    for reply in run(reads):
        assert "HEAD is detached" in reply["notice"]
    git(repo, "checkout", "-q", "main")
    for reply in run(reads):
        assert "notice" not in reply


def test_context_refuses_an_empty_query_as_the_cli_does(repo):
    # `gitmem context --query ""` refuses it; the tool built a context for no question, hiding the slip
    from conftest import gitmem

    async def main():
        async with session(repo) as s:
            return [await s.call_tool("context", {"query": query}) for query in ("", " \n\t")]

    for result in run(main):
        assert result.is_error and result.content[0].text.endswith(
            "query is empty: give the question, or leave query out")
    cli = gitmem(repo, "context", "--query", "", check=False)
    assert cli.returncode == 2 and "Error: --query is empty: give the question, or leave --query out" in cli.stderr


def test_check_proposal_echoes_a_short_prefix_of_a_long_proposal_as_gitmem_check_does(repo):
    # a 500 KB plan came back whole in the reply, into the agent's context again
    from conftest import gitmem

    gitmem(repo, "add", "rejection", "Move the job queue to Redis", "--because", "one more service to run")
    plan = "Move the job queue to Redis. " + "Then tidy the docs. " * 25_000

    async def main():
        async with session(repo) as s:
            return (await call(s, "check_proposal", proposal=plan))[1], \
                (await call(s, "check_proposal", proposal="Move the job queue to Redis"))[1]

    long, short = run(main)
    assert long["proposal"] == plan[:200] + "…" and long["proposal_chars"] == len(plan) > 500_000
    assert long["repeat"] and long["rejections"][0]["proposal"] == "Move the job queue to Redis"
    assert short["proposal"] == "Move the job queue to Redis" and "proposal_chars" not in short
    cli = json.loads(gitmem(repo, "check", "-", "--json", input=plan, check=False).stdout)
    assert {k: cli[k] for k in ("proposal", "proposal_chars")} == {k: long[k] for k in ("proposal", "proposal_chars")}


def test_the_server_builds_the_search_index_before_the_first_call_comes(repo):
    """A new clone's first recall waited for every memory's search postings (about 11 s at 100,000): the
    server builds them on its library thread as it starts, before any call asks."""
    import sqlite3
    import time

    from gitmem import Store

    store = Store.open(str(repo))
    for n in range(5):
        store.add("fact", f"fact number {n} about retries")
    index = repo / ".git" / "gitmem" / "index.sqlite"
    for name in os.listdir(index.parent):  # as a clone finds it: no derived index yet
        os.remove(index.parent / name)

    def views() -> list:
        if not index.exists():
            return []
        with sqlite3.connect(f"file:{index}?mode=ro", uri=True) as db:
            try:
                return [ref for (ref,) in db.execute("SELECT ref FROM views WHERE tree IS NOT NULL")]
            except sqlite3.OperationalError:  # being built: its tables are not there yet
                return []

    async def scenario():
        async with session(repo):
            deadline = time.monotonic() + 60
            while not views() and time.monotonic() < deadline:
                await anyio.sleep(0.1)
            assert views() == ["refs/memory/main"]  # no tool was called

    run(scenario)
