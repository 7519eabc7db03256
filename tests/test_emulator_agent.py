"""The emulator as a scripted agent: tool_use when tools are offered, through the real anthropic SDK.

A real client's tool loop (here the SDK's, in tests/test_claude_code_client.py Claude Code's) runs
offline: the emulator calls check_proposal, recall, remember or Read as the prompt asks, then
answers from the tool results, citing memory ids. Emulator only, no model.
"""

from __future__ import annotations

import json

import pytest

from gitmem.emulator.reply import BANNER, plan
from gitmem.backend import open_backend

MODEL = "claude-sonnet-4-5"


def schema(*required):
    return {"type": "object", "properties": {k: {"type": "string"} for k in required}, "required": list(required)}


TOOLS = [
    {"name": "mcp__gitmem__check_proposal", "description": "Earlier rejections", "input_schema": schema("proposal")},
    {"name": "mcp__gitmem__recall", "description": "Search memory", "input_schema": schema("query")},
    {"name": "mcp__gitmem__remember", "description": "Store a memory", "input_schema": schema("type", "text")},
    {"name": "Read", "description": "Read a file", "input_schema": schema("file_path")},
]


@pytest.fixture
def client():
    return open_backend("emulator").client


def ask(client, messages, tools=TOOLS, max_tokens=1024):
    return client.messages.create(model=MODEL, max_tokens=max_tokens, tools=tools, messages=messages)


def result_for(block, payload):
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block.id,
                                         "content": [{"type": "text", "text": json.dumps(payload)}]}]}


def test_a_should_we_question_calls_check_proposal_then_answers_with_the_rejection(client):
    prompt = [{"role": "user", "content": "Should we move the job queue to Redis?"}]
    first = ask(client, prompt)
    assert first.stop_reason == "tool_use"
    [call] = first.content
    assert (call.type, call.name, call.input) == ("tool_use", "mcp__gitmem__check_proposal",
                                                  {"proposal": "move the job queue to Redis"})
    rejection = {"id": "01m8xw0w5wssb6pr", "proposal": "move the job queue to Redis",
                 "reason": "we run no Redis in production", "author": "Ana", "when": "2026-11-02T10:00:00Z"}
    history = prompt + [{"role": "assistant", "content": [call.model_dump()]},
                        result_for(call, {"rejections": [rejection]})]
    final = ask(client, history)
    assert final.stop_reason == "end_turn"
    text = final.content[0].text
    assert text.startswith(BANNER)
    assert "Already rejected [01m8xw0w5wssb6pr]" in text and "because we run no Redis in production" in text


def test_remember_that_calls_remember_with_a_typed_memory(client):
    reply = ask(client, [{"role": "user", "content": "Remember that we always deploy on Tuesdays."}])
    [call] = reply.content
    assert call.name == "mcp__gitmem__remember"
    assert call.input == {"type": "convention", "text": "We always deploy on Tuesdays"}


def test_a_question_about_the_code_calls_recall_and_cites_what_it_found(client):
    prompt = [{"role": "user", "content": "How are money amounts stored?"}]
    [call] = ask(client, prompt).content
    assert (call.name, call.input) == ("mcp__gitmem__recall", {"query": "How are money amounts stored?"})
    found = {"memories": [{"id": "01m8xvxa60b4g44b", "type": "convention", "text": "Amounts are integer cents"}]}
    final = ask(client, prompt + [{"role": "assistant", "content": [call.model_dump()]}, result_for(call, found)])
    assert "[01m8xvxa60b4g44b] (convention) Amounts are integer cents" in final.content[0].text


def test_tool_calls_are_deterministic_and_follow_the_plan_in_order(client):
    prompt = [{"role": "user", "content": "Remember that we decided on Postgres. Should we add a Redis cache?"}]
    a, b = ask(client, prompt).content[0], ask(client, prompt).content[0]
    assert a.id == b.id and a.name == "mcp__gitmem__remember"
    second = ask(client, prompt + [{"role": "assistant", "content": [a.model_dump()]},
                                   result_for(a, {"id": "01m8xw0z0g9b2xvc", "ref": "refs/memory/main"})])
    assert second.content[0].name == "mcp__gitmem__check_proposal"
    assert [s.tool for s in plan("Remember that we decided on Postgres. Should we add a Redis cache?")] == [
        "remember", "check_proposal"]


def test_a_deferred_tool_is_loaded_with_tool_search_first(client):
    tools = [{"name": "ToolSearch", "description": "Load tools", "input_schema": schema("query")}]
    reminder = ("<system-reminder>\nThe following deferred tools are now available via ToolSearch. Use it:\n"
                "mcp__gitmem__check_proposal\nmcp__gitmem__recall\n</system-reminder>")
    prompt = [{"role": "user", "content": [{"type": "text", "text": reminder},
                                           {"type": "text", "text": "Should we drop the audit log?"}]}]
    [call] = ask(client, prompt, tools=tools).content
    assert (call.name, call.input) == ("ToolSearch", {"query": "select:mcp__gitmem__check_proposal"})
    loaded = prompt + [{"role": "assistant", "content": [call.model_dump()]},
                       {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "ok"}]}]
    [then] = ask(client, loaded, tools=tools + TOOLS[:1]).content
    assert then.name == "mcp__gitmem__check_proposal"


def test_read_uses_the_working_directory_the_client_names(client):
    reminder = "<system-reminder>\n# Environment\n - Primary working directory: /work/shop\n</system-reminder>"
    prompt = [{"role": "user", "content": [{"type": "text", "text": reminder},
                                           {"type": "text", "text": "Please read src/app.py"}]}]
    [call] = ask(client, prompt).content
    assert (call.name, call.input) == ("Read", {"file_path": "/work/shop/src/app.py"})


def test_streaming_sends_the_tool_input_as_json_deltas(client):
    with client.messages.stream(model=MODEL, max_tokens=1024, tools=TOOLS,
                                messages=[{"role": "user", "content": "Should we rewrite it in Rust?"}]) as stream:
        events = [event.type for event in stream]
        message = stream.get_final_message()
    assert "input_json" in events
    assert message.stop_reason == "tool_use"
    assert message.content[0].input == {"proposal": "rewrite it in Rust"}
    assert message.usage.output_tokens > 0


def test_without_tools_or_a_plan_the_reply_is_text_as_before(client):
    plain = client.messages.create(model=MODEL, max_tokens=1024,
                                   messages=[{"role": "user", "content": "Should we move to Redis?"}])
    assert plain.content[0].type == "text" and plain.stop_reason == "end_turn"
    nothing = ask(client, [{"role": "user", "content": "Thanks, that is all."}])
    assert nothing.content[0].type == "text"
    tiny = ask(client, [{"role": "user", "content": "Should we move to Redis?"}], max_tokens=1)
    assert tiny.content[0].type == "text"  # a tool call that does not fit max_tokens is not sent
