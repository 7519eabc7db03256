"""The emulator against the documented prompt-caching, token-counting, streaming and error cases.

Requests go through ``Emulator.handle`` (the one handler both the ASGI app and the SDK transport
use), with a virtual clock so TTLs are exercised in virtual time. Expected token numbers come from
the shared counter (``gitmem.tokens``), per block, so each test checks the cache arithmetic.

Each test that follows a documented rule quotes the sentence it follows, from
https://platform.claude.com/docs/en/build-with-claude/prompt-caching (PC),
https://platform.claude.com/docs/en/build-with-claude/token-counting (TC),
https://platform.claude.com/docs/en/build-with-claude/streaming (ST),
https://platform.claude.com/docs/en/api/errors (ERR),
https://platform.claude.com/docs/en/about-claude/model-deprecations (DEP) and
https://platform.claude.com/docs/en/about-claude/pricing (PR). Undocumented behaviour says so.
"""

from __future__ import annotations

import json

import pytest

from gitmem.emulator import Emulator, VirtualClock
from gitmem.emulator.reply import BANNER
from gitmem.tokens import count_request_tokens, count_tokens, prompt_blocks

HEADERS = {"x-api-key": "test-key", "anthropic-version": "2023-06-01"}
HAIKU = "claude-haiku-4-5"  # minimum cacheable prefix 4096 tokens
SONNET = "claude-sonnet-4-6"  # minimum 1024


def guide(n_sections: int = 120) -> str:
    parts = []
    for i in range(n_sections):
        parts.append(
            f"## Section {i}\n\nPayment service rule {i}: every webhook handler must be idempotent, "
            f"retries back off exponentially up to {i + 3} attempts, and ledger writes happen in one "
            "transaction with the outbox row so a crash never loses an event.\n"
        )
    return "# Repository guide\n\n" + "\n".join(parts)


GUIDE = guide()
MEMORY = (
    '<memory id="0mabcdefghjk1234" type="decision">Refunds go through the ledger service, '
    "never straight to the payment provider.</memory>\n"
    '<memory id="0mzyxwvutsrq9876" type="rejection">do not propose storing card numbers: '
    "rejected because PCI scope.</memory>"
)


def body(question="How do refunds reach the payment provider?", guide_ttl="5m", memory_ttl=None,
         model=HAIKU, guide_text=GUIDE, max_tokens=300, **extra):
    def marker(ttl):
        if ttl is None:
            return {}
        control = {"type": "ephemeral"}
        if ttl == "1h":
            control["ttl"] = "1h"
        return {"cache_control": control}

    return {
        "model": model,
        "max_tokens": max_tokens,
        "system": [
            {"type": "text", "text": guide_text, **marker(guide_ttl)},
            {"type": "text", "text": MEMORY, **marker(memory_ttl)},
        ],
        "messages": [{"role": "user", "content": question}],
        **extra,
    }


def count_body(req):
    """``req`` as ``count_tokens`` takes it: without ``max_tokens``, which the API refuses there."""
    return {k: v for k, v in req.items() if k != "max_tokens"}


def tokens_through(req, index):
    return sum(block.tokens for block in prompt_blocks(req)[: index + 1])


def send(emulator, req, path="/v1/messages", headers=HEADERS, method="POST"):
    return emulator.handle(method, path, headers, json.dumps(req).encode())


def usage(emulator, req):
    response = send(emulator, req)
    assert response.status == 200, response.body
    return response.json()["usage"]


@pytest.fixture
def clock():
    return VirtualClock()


@pytest.fixture
def emu(clock):
    return Emulator(clock=clock)


# PC: "the system checks if the prompt prefix, up to a specified cache breakpoint, is already cached
# from a recent query. If found, it uses the cached version"; the cache "has a minimum 5-minute lifetime".
def test_a_marked_prefix_is_written_then_read_within_the_ttl(emu, clock):
    req = body()
    guide_tokens = tokens_through(req, 0)
    first = usage(emu, req)
    assert first["cache_creation_input_tokens"] == guide_tokens
    assert first["cache_creation"] == {"ephemeral_5m_input_tokens": guide_tokens, "ephemeral_1h_input_tokens": 0}
    assert first["cache_read_input_tokens"] == 0
    clock.advance(299)
    second = usage(emu, req)
    assert second["cache_read_input_tokens"] == guide_tokens
    assert second["cache_creation_input_tokens"] == 0
    assert second["input_tokens"] == first["input_tokens"] == count_request_tokens(req) - guide_tokens


# PC: "By default, the cache has a 5-minute lifetime."
def test_a_5_minute_entry_expires_after_5_minutes_of_virtual_time(emu, clock):
    req = body()
    usage(emu, req)
    clock.advance(300)
    again = usage(emu, req)
    assert again["cache_read_input_tokens"] == 0
    assert again["cache_creation_input_tokens"] == tokens_through(req, 0)


# PC: "If you find that 5 minutes is too short, Anthropic also offers a 1-hour cache duration",
# written as {"type": "ephemeral", "ttl": "1h"}.
def test_a_1_hour_entry_survives_a_break_and_expires_after_an_hour(emu, clock):
    req = body(guide_ttl="1h")
    guide_tokens = tokens_through(req, 0)
    assert usage(emu, req)["cache_creation"]["ephemeral_1h_input_tokens"] == guide_tokens
    clock.advance(330)  # the 5.5-minute break
    assert usage(emu, req)["cache_read_input_tokens"] == guide_tokens
    clock.advance(3599)  # the hit above restarted the hour
    assert usage(emu, req)["cache_read_input_tokens"] == guide_tokens
    clock.advance(3600)
    expired = usage(emu, req)
    assert expired["cache_read_input_tokens"] == 0
    assert expired["cache_creation"]["ephemeral_1h_input_tokens"] == guide_tokens


# PC: "The cache is refreshed for no additional cost each time the cached content is used."
def test_each_hit_refreshes_the_ttl(emu, clock):
    req = body()
    usage(emu, req)
    for _ in range(4):  # 16 minutes in all, never 5 without a hit
        clock.advance(240)
        assert usage(emu, req)["cache_read_input_tokens"] == tokens_through(req, 0)


def test_a_keepalive_ping_keeps_the_prefix_through_a_break(emu, clock):
    req = body()
    usage(emu, req)
    clock.advance(240)
    usage(emu, body(question="ping", max_tokens=1))  # same cached prefix, different tail
    clock.advance(90)  # 5.5 minutes after the write, 1.5 after the ping
    assert usage(emu, req)["cache_read_input_tokens"] == tokens_through(req, 0)


# PC: "Shorter prompts cannot be cached, even if marked with cache_control. Any requests to cache
# fewer than this number of tokens will be processed without caching."
def test_a_prefix_below_the_model_minimum_succeeds_uncached(emu):
    short = body(guide_text=guide(24))
    prefix = tokens_through(short, 0)
    assert 1024 <= prefix < 4096
    for _ in range(2):
        got = usage(emu, short)
        assert got["cache_creation_input_tokens"] == 0
        assert got["cache_read_input_tokens"] == 0
        assert got["input_tokens"] == count_request_tokens(short)
    # The same prefix is long enough for Sonnet 4.5 (minimum 1024).
    assert usage(emu, {**short, "model": SONNET})["cache_creation_input_tokens"] == prefix


# PC, "Mixing different TTLs": A = tokens at the highest cache hit, B = at the highest 1h block
# after A, C = at the last block; "charged for cache read tokens for A", "1-hour cache write tokens
# for (B - A)" and "5-minute cache write tokens for (C - B)".
def test_mixed_ttls_split_the_write_and_the_read_as_documented(emu, clock):
    req = body(guide_ttl="1h", memory_ttl="5m")
    a = tokens_through(req, 0)  # guide, 1h
    b = tokens_through(req, 1)  # guide + memory, 5m
    total = count_request_tokens(req)
    first = usage(emu, req)
    assert first["cache_creation"] == {"ephemeral_1h_input_tokens": a, "ephemeral_5m_input_tokens": b - a}
    assert first["input_tokens"] == total - b
    clock.advance(330)  # the 5m entry is gone, the 1h one is not
    after_break = usage(emu, req)
    assert after_break["cache_read_input_tokens"] == a
    assert after_break["cache_creation"] == {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": b - a}
    clock.advance(60)
    warm = usage(emu, req)
    assert warm["cache_read_input_tokens"] == b
    assert warm["cache_creation_input_tokens"] == 0


# PC: "total_input_tokens = cache_read_input_tokens + cache_creation_input_tokens + input_tokens".
def test_usage_fields_sum_to_the_request_tokens(emu, clock):
    req = body(guide_ttl="1h", memory_ttl="5m")
    counted = send(emu, count_body(req), "/v1/messages/count_tokens").json()["input_tokens"]
    assert counted == count_request_tokens(req)
    for step in (0, 120, 400, 4000):
        clock.advance(step)
        u = usage(emu, req)
        assert u["cache_read_input_tokens"] + u["cache_creation_input_tokens"] + u["input_tokens"] == counted
        assert u["cache_creation_input_tokens"] == (
            u["cache_creation"]["ephemeral_5m_input_tokens"] + u["cache_creation"]["ephemeral_1h_input_tokens"]
        )


def conversation(n_messages, marked):
    """A growing chat (user, assistant, user, ...): a shorter one is a prefix of a longer one.

    Block 0 is the system prompt, block ``m + 1`` is message ``m``; the breakpoint goes on message
    ``marked``.
    """
    messages = []
    for m in range(n_messages):
        role, text = (("user", f"Question {m // 2} about refunds?") if m % 2 == 0
                      else ("assistant", f"Answer {m // 2}: the ledger."))
        messages.append({"role": role, "content": [{"type": "text", "text": text}]})
    messages[marked]["content"][0]["cache_control"] = {"type": "ephemeral"}
    return {"model": SONNET, "max_tokens": 100, "system": GUIDE, "messages": messages}


# Lookback, https://platform.claude.com/docs/en/build-with-claude/prompt-caching: the system
# "checks at most 20 positions per breakpoint, counting the breakpoint itself as the first".
def test_lookback_finds_an_entry_19_blocks_before_the_breakpoint(emu):
    first = conversation(7, marked=6)  # blocks: system + 7 messages, marker on the last (block 7)
    usage(emu, first)
    hit_tokens = tokens_through(first, 7)
    later = conversation(26, marked=25)  # marker on block 26: block 7 is its 20th position
    got = usage(emu, later)
    assert got["cache_read_input_tokens"] == hit_tokens
    assert got["cache_creation_input_tokens"] == tokens_through(later, 26) - hit_tokens


# The same page: an entry exactly 20 blocks back "is one position outside the window, so there is
# no cache hit".
def test_an_entry_exactly_20_blocks_back_is_a_miss(emu):
    usage(emu, conversation(7, marked=6))
    far = conversation(27, marked=26)  # block 27 - 20 = block 7
    got = usage(emu, far)
    assert got["cache_read_input_tokens"] == 0
    assert got["cache_creation_input_tokens"] == tokens_through(far, 27)


def sdk_client(emulator, key="k"):
    """The official SDK, talking to ``emulator`` in-process with API key ``key``."""
    import anthropic
    import httpx2

    return anthropic.Anthropic(api_key=key, base_url="http://emulator.invalid",
                               http_client=httpx2.Client(transport=emulator.transport()))


# PC, "Cache storage and sharing": "Caches are isolated between organizations", and since February 5, 2026
# between workspaces. The emulator has no workspaces: each API key stands in for one.
def test_two_keys_never_read_each_others_cache_and_one_key_reads_its_own(clock, tmp_path):
    state = tmp_path / "emulator-cache.json"
    emu = Emulator(clock=clock, state_path=str(state))
    req, guide_tokens = body(), tokens_through(body(), 0)
    alice, bob = sdk_client(emu, "sk-ant-alice-secret"), sdk_client(emu, "sk-ant-bob-secret")
    first = alice.messages.create(**req).usage
    assert (first.cache_creation_input_tokens, first.cache_read_input_tokens) == (guide_tokens, 0)
    other = bob.messages.create(**req).usage  # the same prefix under another key: written again, not read
    assert (other.cache_creation_input_tokens, other.cache_read_input_tokens) == (guide_tokens, 0)
    again = alice.messages.create(**req).usage
    assert (again.cache_creation_input_tokens, again.cache_read_input_tokens) == (0, guide_tokens)
    # the SDK sends its key as a bearer token; the same key as x-api-key (gitmem's direct calls) is one cache
    direct = emu.handle("POST", "/v1/messages", {"x-api-key": "sk-ant-bob-secret", "anthropic-version": "2023-06-01"},
                        json.dumps(req).encode()).json()["usage"]
    assert (direct["cache_creation_input_tokens"], direct["cache_read_input_tokens"]) == (0, guide_tokens)
    assert "secret" not in state.read_text()  # the cache file holds hashes, never a key


# PC (the lookback window, as the page reads since mid-2026, quoted in the commit): "a run of
# consecutive tool_use blocks counts as one position, and so does a run of consecutive tool_result
# blocks, so a turn with many parallel tool calls doesn't push the previous request's entry out of
# the window on its own."
def test_a_run_of_parallel_tool_calls_counts_as_one_lookback_position(emu):
    client = sdk_client(emu)
    tools = [{"name": "read", "description": "Read a file.", "input_schema": {"type": "object", "properties": {}}}]
    ask = {"role": "user", "content": [{"type": "text", "text": "Read the 25 files."}]}
    first = {"model": SONNET, "max_tokens": 100, "system": GUIDE, "tools": tools,
             "messages": [{**ask, "content": [{**ask["content"][0], "cache_control": {"type": "ephemeral"}}]}]}
    client.messages.create(**first)
    calls = [{"type": "tool_use", "id": f"toolu_{i:02d}", "name": "read", "input": {"n": i}} for i in range(25)]
    results = [{"type": "tool_result", "tool_use_id": f"toolu_{i:02d}", "content": f"file {i}"} for i in range(25)]
    results[-1]["cache_control"] = {"type": "ephemeral"}
    # 51 blocks after the first request's breakpoint, but 2 positions: the tool_use run and the tool_result run
    second = {**first, "messages": [ask, {"role": "assistant", "content": calls}, {"role": "user", "content": results}]}
    got = client.messages.create(**second).usage
    assert got.cache_read_input_tokens == tokens_through(first, 2)
    assert got.cache_creation_input_tokens == count_request_tokens(second) - tokens_through(first, 2)
    # without runs (tool_use and text alternating) the same 50 blocks are 50 positions: a miss
    chatty = [block for call in calls for block in (call, {"type": "text", "text": "and"})][:-1]
    emu.cache.clear()
    client.messages.create(**first)
    third = {**first, "messages": [ask, {"role": "assistant", "content": chatty}, {"role": "user", "content": results}]}
    assert client.messages.create(**third).usage.cache_read_input_tokens == 0


def tool_loop(parts, marker=None):
    """A tool loop whose last user turn is one tool_result with ``parts`` as its content list."""
    tools = [{"name": "read", "description": "Read a file.", "input_schema": {"type": "object", "properties": {}}}]
    result = {"type": "tool_result", "tool_use_id": "toolu_01", "content": parts, **({"cache_control": marker} if marker else {})}
    return {"model": SONNET, "max_tokens": 100, "tools": tools, "messages": [
        {"role": "user", "content": "Read the guide."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "read", "input": {}}]},
        {"role": "user", "content": [result]}]}


def test_a_marker_inside_a_tool_result_is_a_breakpoint_after_that_part(emu):
    """The SDK types give the text, image, document and search_result parts of a tool_result's ``content`` their own
    ``cache_control``, documented as "Create a cache control breakpoint at this content block"; PC: the prefix is
    "tools, system, and messages (in that order) up to and including the block designated with cache_control". So
    the entry ends after the marked part, and a later part of the same tool_result is not in it."""
    client = sdk_client(emu)
    tail = "Read 120 sections."
    req = tool_loop([{"type": "text", "text": GUIDE, "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": tail}])
    through_guide = count_request_tokens(req) - count_tokens(tail)
    first = client.messages.create(**req).usage
    assert (first.cache_creation_input_tokens, first.cache_read_input_tokens) == (through_guide, 0)
    assert first.input_tokens == count_tokens(tail)
    second = client.messages.create(**req).usage
    assert (second.cache_creation_input_tokens, second.cache_read_input_tokens) == (0, through_guide)
    req["messages"][2]["content"][0]["content"][1]["text"] = "Read them all."  # after the breakpoint: still a hit
    assert client.messages.create(**req).usage.cache_read_input_tokens == through_guide
    # the marker is not part of the prefix: moved onto the tool_result itself, lookback finds the part's entry
    moved = tool_loop([{"type": "text", "text": GUIDE}, {"type": "text", "text": tail}], marker={"type": "ephemeral"})
    assert client.messages.create(**moved).usage.cache_read_input_tokens == through_guide


def test_a_marker_inside_a_tool_result_counts_toward_the_limit_and_is_checked(emu):
    """PC: "You can define up to 4 cache breakpoints (using cache_control parameters) in your prompt": a marker on a
    tool_result's part is one of them, and a fifth is the API's 400; a malformed one is refused at its own path."""
    import anthropic

    client = sdk_client(emu)
    req = tool_loop([{"type": "text", "text": GUIDE, "cache_control": {"type": "ephemeral"}}])
    req["system"] = [{"type": "text", "text": f"Rule {i}.", "cache_control": {"type": "ephemeral"}} for i in range(4)]
    with pytest.raises(anthropic.BadRequestError, match="Found 5.") as raised:
        client.messages.create(**req)
    assert raised.value.body["error"]["message"] == "A maximum of 4 blocks with `cache_control` may be provided. Found 5."
    bad = tool_loop([{"type": "text", "text": GUIDE, "cache_control": {"type": "persistent"}}])
    with pytest.raises(anthropic.BadRequestError, match=r"messages\.2\.content\.0\.content\.0\.cache_control\.type"):
        client.messages.create(**bad)


# PC: "Cache hits require 100% identical prompt segments, including all text and images up to and
# including the block marked with cache control"; caches are model-specific.
def test_any_change_before_the_breakpoint_misses_and_a_change_after_it_does_not(emu):
    usage(emu, body())
    assert usage(emu, body(question="Something else entirely?"))["cache_read_input_tokens"] > 0
    assert usage(emu, body(guide_text=GUIDE + "\nOne more rule.\n"))["cache_read_input_tokens"] == 0
    assert usage(emu, {**body(), "model": "claude-opus-4-5"})["cache_read_input_tokens"] == 0


def test_who_said_a_block_is_part_of_its_prefix(emu):
    """PC: "Cache hits require 100% identical prompt segments" and cache keys hash "the prompts up to the cache
    control point": the same words said by the assistant instead of the user are another prompt, so a miss. The
    ``messages`` docs (SDK ``message_create_params``): "Consecutive user or assistant turns in your request will be
    combined into a single turn", so splitting one user turn into two is the same prompt, a hit."""
    client = sdk_client(emu)
    marked = {"type": "text", "text": "Beta", "cache_control": {"type": "ephemeral"}}
    alpha = {"type": "text", "text": "Alpha"}

    def ask(*messages):
        return client.messages.create(model=SONNET, max_tokens=50, system=GUIDE, messages=list(messages)).usage

    said_by_user = ask({"role": "user", "content": [alpha, marked]})
    assert said_by_user.cache_creation_input_tokens > 0
    said_by_assistant = ask({"role": "user", "content": [alpha]}, {"role": "assistant", "content": [marked]},
                            {"role": "user", "content": "Go on?"})
    assert said_by_assistant.cache_read_input_tokens == 0
    assert ask({"role": "user", "content": [alpha]}, {"role": "user", "content": [marked]}).cache_read_input_tokens > 0


def error_of(response):
    data = response.json()
    assert data["type"] == "error"
    assert response.status in (400, 401, 404, 405, 413, 529)
    assert dict(response.headers)["request-id"].startswith("req_")
    return data["error"]


# PC: "You can define up to 4 cache breakpoints"; the API's error is quoted verbatim.
def test_a_fifth_breakpoint_is_rejected_with_the_api_error(emu):
    req = conversation(5, marked=0)
    for i in (1, 2, 3, 4):
        req["messages"][i]["content"][0]["cache_control"] = {"type": "ephemeral"}
    response = send(emu, req)
    assert response.status == 400
    assert error_of(response) == {
        "type": "invalid_request_error",
        "message": "A maximum of 4 blocks with `cache_control` may be provided. Found 5.",
    }


# PC: "When mixing TTLs ... cache entries with longer TTL must appear before shorter TTLs (i.e., a
# 1-hour cache entry must appear before any 5-minute cache entries)."
def test_a_1_hour_breakpoint_after_a_5_minute_one_is_rejected(emu):
    response = send(emu, body(guide_ttl="5m", memory_ttl="1h"))
    assert response.status == 400
    error = error_of(response)
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith(
        "system.1.cache_control.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block."
    )


# PC: "With automatic caching, the system caches all content up to and including the last cacheable block."
def test_top_level_cache_control_marks_the_last_block(emu):
    req = body(guide_ttl=None, cache_control={"type": "ephemeral"})
    assert usage(emu, req)["cache_creation_input_tokens"] == count_request_tokens(req)


# PC, automatic caching, "Edge cases": "If the last block is not eligible as an automatic cache breakpoint target,
# the system silently walks backwards to find the nearest eligible block", and "Empty text blocks cannot be cached".
# An empty prefill is passed over, so the entry is at the question and a later prefill reads it.
def test_top_level_cache_control_passes_over_an_empty_prefill(clock):
    client = sdk_client(Emulator(clock=clock))

    def ask(prefill):
        req = body(guide_ttl=None, cache_control={"type": "ephemeral"})
        req["messages"].append({"role": "assistant", "content": prefill})
        return req, client.messages.create(**req).usage

    req, first = ask("")
    through_question = tokens_through(req, 2)
    assert first.cache_creation_input_tokens == through_question
    assert first.input_tokens == count_request_tokens(req) - through_question > 0
    _, later = ask("Refunds go")
    assert later.cache_read_input_tokens == through_question


# Automatic caching (prompt-caching page): when the last block already has an explicit
# cache_control, the top-level one must agree with its TTL; a different TTL is a 400.
def test_a_top_level_ttl_that_differs_from_the_last_blocks_explicit_ttl_is_rejected(emu):
    req = body(guide_ttl=None, cache_control={"type": "ephemeral", "ttl": "1h"})
    req["messages"][0]["content"] = [{"type": "text", "text": "Refunds?", "cache_control": {"type": "ephemeral"}}]
    response = send(emu, req)
    assert response.status == 400
    error = error_of(response)
    assert error["type"] == "invalid_request_error" and error["message"].startswith("cache_control.ttl")
    assert emu.state()["entries"] == []  # nothing was written
    req["cache_control"] = {"type": "ephemeral"}  # same TTL: one breakpoint, accepted
    assert usage(emu, req)["cache_creation_input_tokens"] == count_request_tokens(req)


# Pre-warming (prompt-caching docs, and the announcement: "By setting max_tokens: 0, the API
# processes the input and writes it to the cache without generating a response"; "max_tokens: 0 is
# incompatible with streaming, extended thinking, or structured outputs").
def test_max_tokens_0_prewarms_the_cache_with_an_empty_reply(emu):
    reply = send(emu, body(max_tokens=0)).json()
    assert reply["content"] == [] and reply["stop_reason"] == "max_tokens"
    assert reply["usage"]["output_tokens"] == 0
    assert reply["usage"]["cache_creation_input_tokens"] == tokens_through(body(), 0)
    assert usage(emu, body())["cache_read_input_tokens"] == tokens_through(body(), 0)


# PC, "Pre-warming the cache" > "Limitations": "A max_tokens: 0 request is rejected with an
# invalid_request_error if any of the following are set": stream: true, extended thinking
# (thinking.type: "enabled"), structured outputs (output_config.format), and "tool_choice of
# {"type": "tool", ...} or {"type": "any"}".
_LOOKUP = [{"name": "lookup", "input_schema": {"type": "object"}}]


@pytest.mark.parametrize("extra", [{"stream": True}, {"thinking": {"type": "enabled", "budget_tokens": 1024}},
                                   {"output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}}},
                                   {"tools": _LOOKUP, "tool_choice": {"type": "any"}},
                                   {"tools": _LOOKUP, "tool_choice": {"type": "tool", "name": "lookup"}}])
def test_max_tokens_0_is_refused_with_streaming_thinking_or_structured_outputs(emu, extra):
    response = send(emu, body(max_tokens=0, **extra))
    assert response.status == 400 and error_of(response)["message"].startswith("max_tokens: 0")
    assert send(emu, body(max_tokens=-1)).status == 400


# Extended thinking: "budget_tokens must be set to a value less than max_tokens", so a keep-alive that keeps
# the thinking configuration (a change of it misses the message cache) needs max_tokens over the budget.
@pytest.mark.parametrize("extra", [{"tools": _LOOKUP, "tool_choice": {"type": "any"}},
                                   {"max_tokens": 4000, "thinking": {"type": "enabled", "budget_tokens": 2000}}])
def test_a_keepalive_of_a_body_that_forces_a_tool_or_thinks_is_accepted_and_hits(emu, extra):
    from gitmem.backend import keepalive_body

    req = body(**extra)
    written = usage(emu, req)["cache_creation_input_tokens"]
    assert written > 0 and usage(emu, keepalive_body(req))["cache_read_input_tokens"] == written


# The list names extended thinking (thinking.type: "enabled") only, and the page pre-warms claude-opus-5, whose
# adaptive thinking is on by default; a tool_choice that does not force a tool is not on the list either.
@pytest.mark.parametrize("extra", [{"thinking": {"type": "adaptive"}}, {"tools": _LOOKUP, "tool_choice": {"type": "auto"}},
                                   {"tools": _LOOKUP, "tool_choice": {"type": "none"}}])
def test_max_tokens_0_prewarms_with_what_the_list_leaves_out(emu, extra):
    reply = send(emu, body(max_tokens=0, model="claude-opus-5", **extra))
    assert reply.status == 200, reply.body
    assert reply.json()["content"] == [] and reply.json()["usage"]["output_tokens"] == 0


# Extended thinking: "budget_tokens must be set to a value less than max_tokens", at least 1,024, and a
# tool_choice that forces tool use is refused with it; a tool_choice needs tools, and names one of them.
@pytest.mark.parametrize("extra", [
    {"max_tokens": 2000, "thinking": {"type": "enabled", "budget_tokens": 4000}},
    {"max_tokens": 4000, "thinking": {"type": "enabled", "budget_tokens": 512}},
    {"max_tokens": 4000, "thinking": {"type": "enabled", "budget_tokens": 2000}, "tool_choice": {"type": "any"},
     "tools": [{"name": "lookup", "input_schema": {"type": "object"}}]},
    {"tool_choice": {"type": "any"}},
    {"tool_choice": {"type": "tool", "name": "nope"}, "tools": [{"name": "lookup", "input_schema": {"type": "object"}}]},
    {"tools": [{"name": "t", "input_schema": {"type": "object"}}, {"name": "t", "input_schema": {"type": "object"}}]},
])
def test_what_the_docs_call_invalid_gets_a_400(emu, extra):
    response = send(emu, body(**extra))
    assert response.status == 400 and error_of(response)["type"] == "invalid_request_error"


@pytest.mark.parametrize("messages, said", [
    ([{"role": "user", "content": "hi"},
      {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}]},
      {"role": "user", "content": "and?"}], "without `tool_result` blocks"),
    ([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9", "content": "42"}]}],
     "unexpected `tool_use_id`"),
])
def test_tool_results_must_answer_the_tool_uses_just_before(emu, messages, said):
    response = send(emu, {"model": HAIKU, "max_tokens": 10, "messages": messages,
                          "tools": [{"name": "lookup", "input_schema": {"type": "object"}}]})
    assert response.status == 400 and said in error_of(response)["message"]


def test_json_nested_past_the_parser_gets_a_400_in_the_api_shape(emu):
    deep = b'{"model": "claude-haiku-4-5", "metadata": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    response = emu.handle("POST", "/v1/messages", HEADERS, deep)
    assert response.status == 400 and error_of(response)["type"] == "invalid_request_error"


# Undocumented: whether a hit by a 1h-marked request turns a 5m entry into a 1h one. The emulator
# takes the conservative side: the entry keeps the TTL it was written with.
def test_a_5_minute_entry_hit_by_a_1_hour_marker_stays_a_5_minute_entry(emu, clock):
    usage(emu, body(guide_ttl="5m"))
    clock.advance(60)
    hit = usage(emu, body(guide_ttl="1h"))
    assert hit["cache_read_input_tokens"] == tokens_through(body(), 0)
    assert [e["ttl"] for e in emu.state()["entries"]] == ["5m"]
    clock.advance(300)
    assert usage(emu, body(guide_ttl="1h"))["cache_creation"]["ephemeral_1h_input_tokens"] == tokens_through(body(), 0)


# "What invalidates the cache" (prompt-caching page): images, "adding/removing images anywhere in the
# prompt", invalidate the message cache (not tools or system), so an image after the breakpoint too.
def test_an_image_after_a_breakpoint_invalidates_the_message_cache(emu):
    def chat(image):
        content = [{"type": "text", "text": "Question about refunds?", "cache_control": {"type": "ephemeral"}}]
        req = {"model": SONNET, "max_tokens": 50,
               "system": [{"type": "text", "text": GUIDE, "cache_control": {"type": "ephemeral"}}],
               "messages": [{"role": "user", "content": content}]}
        if image:
            content.append({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}})
        return req
    usage(emu, chat(False))
    got = usage(emu, chat(True))
    assert got["cache_read_input_tokens"] == tokens_through(chat(True), 0)  # system survives
    assert got["cache_creation_input_tokens"] == tokens_through(chat(True), 1) - tokens_through(chat(True), 0)


# The table "What invalidates the cache": switching speed invalidates the system and message caches, a
# changed effort the message blocks; the structured-outputs page: a changed output_config.format invalidates
# the conversation's cache.
@pytest.mark.parametrize("change, survives", [({"speed": "fast"}, "tools"),
                                              ({"output_config": {"format": {"type": "json_schema", "schema": {
                                                  "type": "object"}}}}, "tools"),
                                              ({"output_config": {"effort": "low"}}, "system")])
def test_speed_format_and_effort_invalidate_what_the_docs_say(emu, change, survives):
    def chat(extra):
        return {"model": SONNET, "max_tokens": 50, **extra,
                "tools": [{"name": "lookup", "description": GUIDE, "input_schema": {"type": "object"},
                           "cache_control": {"type": "ephemeral"}}],
                "system": [{"type": "text", "text": GUIDE, "cache_control": {"type": "ephemeral"}}],
                "messages": [{"role": "user", "content": [
                    {"type": "text", "text": "Question about refunds?", "cache_control": {"type": "ephemeral"}}]}]}

    usage(emu, chat({}))
    got = usage(emu, chat(change))
    kept = tokens_through(chat(change), 0 if survives == "tools" else 1)
    assert got["cache_read_input_tokens"] == kept and got["cache_creation_input_tokens"] > 0


# PC, "What invalidates the cache": "Citations toggle | ✓ | ✘ | ✘ | Enabling/disabling citations modifies
# the system prompt": the tools cache survives, the system and message caches do not.
def test_toggling_citations_invalidates_the_system_and_message_caches(emu):
    def chat(cite):
        document = {"type": "document", "title": "Refund policy", "citations": {"enabled": cite},
                    "source": {"type": "text", "media_type": "text/plain", "data": "Refunds go through the ledger."}}
        return {"model": SONNET, "max_tokens": 50,
                "tools": [{"name": "lookup", "description": GUIDE, "input_schema": {"type": "object"},
                           "cache_control": {"type": "ephemeral"}}],
                "system": [{"type": "text", "text": GUIDE, "cache_control": {"type": "ephemeral"}}],
                "messages": [{"role": "user", "content": [
                    document, {"type": "text", "text": "How are refunds paid?", "cache_control": {"type": "ephemeral"}}]}]}

    client = sdk_client(emu)
    client.messages.create(**chat(False))
    on = client.messages.create(**chat(True)).usage
    assert on.cache_read_input_tokens == tokens_through(chat(True), 0)  # the tools entry only
    assert on.cache_creation_input_tokens == count_request_tokens(chat(True)) - tokens_through(chat(True), 0)
    off = client.messages.create(**chat(False)).usage  # back off: the first request's entries are live again
    assert off.cache_read_input_tokens == count_request_tokens(chat(False))


def test_naming_the_default_tool_choice_keeps_the_message_cache(emu):
    """{"type": "auto"} is what no tool_choice means when tools are given: no choice changed, no cache lost."""
    def chat(choice):
        req = {"model": SONNET, "max_tokens": 50,
               "tools": [{"name": "lookup", "description": "Look up an order", "input_schema": {"type": "object"}}],
               "system": [{"type": "text", "text": GUIDE}],
               "messages": [{"role": "user", "content": [
                   {"type": "text", "text": "Question about refunds?", "cache_control": {"type": "ephemeral"}}]}]}
        return {**req, "tool_choice": choice} if choice else req

    written = usage(emu, chat(None))["cache_creation_input_tokens"]
    assert usage(emu, chat({"type": "auto"}))["cache_read_input_tokens"] == written > 0
    assert usage(emu, chat({"type": "any"}))["cache_read_input_tokens"] < written  # a change of choice


# PC, "What invalidates the cache", Effort setting: "Setting effort explicitly to the model's default is
# equivalent to omitting it and does not invalidate." The effort page
# (https://platform.claude.com/docs/en/build-with-claude/effort): "Most Claude models default to high
# effort ...; Claude Opus 5.5 and Claude Haiku 5.5 default to medium."
@pytest.mark.parametrize("model, default, other", [(SONNET, "high", "medium"), ("claude-opus-5-5", "medium", "high"),
                                                   ("claude-haiku-5-5", "medium", "high")])
def test_naming_the_models_default_effort_keeps_the_message_cache(emu, model, default, other):
    def chat(effort):
        req = {"model": model, "max_tokens": 50, "system": [{"type": "text", "text": GUIDE}],
               "messages": [{"role": "user", "content": [
                   {"type": "text", "text": GUIDE + "\nQuestion about refunds?", "cache_control": {"type": "ephemeral"}}]}]}
        return {**req, "output_config": {"effort": effort}} if effort else req

    client = sdk_client(emu)
    written = client.messages.create(**chat(None)).usage.cache_creation_input_tokens
    assert written > 0
    assert client.messages.create(**chat(default)).usage.cache_read_input_tokens == written
    assert client.messages.create(**chat(other)).usage.cache_read_input_tokens == 0


@pytest.mark.parametrize(
    "change, status, error_type, message",
    [
        ({"model": "claude-nonexistent"}, 404, "not_found_error", "model: claude-nonexistent"),
        ({"max_tokens": None}, 400, "invalid_request_error", "max_tokens: Field required"),
        ({"max_tokens": 10**6}, 400, "invalid_request_error", "max_tokens: 1000000 > 64000"),
        ({"messages": []}, 400, "invalid_request_error", "messages: at least one message is required"),
        ({"messages": [{"role": "robot", "content": "hi"}]}, 400, "invalid_request_error", "messages.0.role"),
        ({"system": [{"type": "text", "text": ""}]}, 400, "invalid_request_error", "system.0.text"),
        ({"system": [{"type": "text", "text": "x", "cache_control": {"type": "persistent"}}]}, 400,
         "invalid_request_error", "system.0.cache_control.type"),
        ({"bogus": 1}, 400, "invalid_request_error", "bogus: Extra inputs are not permitted"),
    ],
)
# ERR: "Errors are always returned as JSON, with a top-level error object that always includes a
# type and message value"; 400 invalid_request_error, 404 not_found_error.
def test_invalid_requests_get_the_api_error_shape(emu, change, status, error_type, message):
    req = {**body(), **change}
    req = {k: v for k, v in req.items() if v is not None}
    response = send(emu, req)
    assert response.status == status
    error = error_of(response)
    assert error["type"] == error_type
    assert error["message"].startswith(message)


# ERR: 401 authentication_error, 413 request_too_large "Request exceeds the maximum allowed number of bytes".
def test_transport_level_errors(emu):
    denied = emu.handle("POST", "/v1/messages", {"anthropic-version": "2023-06-01"}, b"{}")
    assert error_of(denied)["type"] == "authentication_error"
    assert error_of(emu.handle("POST", "/v1/messages", HEADERS, b"{not json"))["type"] == "invalid_request_error"
    lone = b'{"model": "claude-haiku-4-5", "max_tokens": 5, "messages": [{"role": "user", "content": "\\ud800"}]}'
    for path in ("/v1/messages", "/v1/messages/count_tokens"):  # valid JSON, no valid UTF-8: the client's error
        answer = emu.handle("POST", path, HEADERS, lone)
        assert answer.status == 400 and error_of(answer)["type"] == "invalid_request_error", path
    assert emu.handle("GET", "/v1/messages", HEADERS).status == 405
    assert emu.handle("GET", "/v1/files", HEADERS).status == 404
    too_big = emu.handle("POST", "/v1/messages", HEADERS, b" " * (32 * 1024 * 1024 + 1))
    assert too_big.status == 413 and error_of(too_big)["type"] == "request_too_large"


def test_a_top_level_field_the_api_does_not_take_is_refused_through_the_sdk(emu):
    """The API's 400 for an unknown field (a typo, another API's field), as the official SDK raises it; beta-only
    fields pass without the beta header, and count_tokens refuses max_tokens as the API does."""
    import anthropic

    client = sdk_client(emu)
    refused = {"type": "invalid_request_error", "message": "bogus: Extra inputs are not permitted"}
    with pytest.raises(anthropic.BadRequestError, match="bogus: Extra inputs are not permitted") as raised:
        client.messages.create(**body(), extra_body={"bogus": 1})
    assert raised.value.body["error"] == refused
    with pytest.raises(anthropic.BadRequestError) as raised:
        client.messages.count_tokens(**count_body(body()), extra_body={"bogus": 1})
    assert raised.value.body["error"] == refused
    with pytest.raises(anthropic.BadRequestError, match="max_tokens: Extra inputs are not permitted"):
        client.messages.count_tokens(**count_body(body()), extra_body={"max_tokens": 300})
    assert client.messages.create(**body(), extra_body={"context_management": {"edits": []}}).content



def test_a_message_of_only_whitespace_text_is_refused_as_the_api_refuses_it(emu):
    """The API's 400s for blank text, in its words (as Claude Code users got them, with request ids, in
    anthropics/claude-code#23440 and #59812): an empty block anywhere, and a message whose text is all whitespace;
    whitespace beside real text passes. The emulator answered a whitespace-only turn 200 and billed it."""
    import anthropic

    client = sdk_client(emu)
    for content, message in (
        ("  ", "messages: text content blocks must contain non-whitespace text"),
        ([{"type": "text", "text": "\n"}, {"type": "text", "text": " "}],
         "messages: text content blocks must contain non-whitespace text"),
        ([{"type": "text", "text": ""}, {"type": "text", "text": "Refunds?"}], "messages: text content blocks must be non-empty"),
    ):
        req = body()
        req["messages"][-1]["content"] = content
        with pytest.raises(anthropic.BadRequestError) as raised:
            client.messages.create(**req)
        assert raised.value.body["error"] == {"type": "invalid_request_error", "message": message}, content
    req = body()
    req["messages"][-1]["content"] = [{"type": "text", "text": " "}, {"type": "text", "text": "Refunds?"}]
    assert client.messages.create(**req).content


def test_every_body_field_of_the_installed_sdk_is_taken():
    """The emulator's field lists cover the SDK's request types: an SDK upgrade that adds a field fails here, not
    in a client the emulator refuses."""
    from anthropic.types import message_count_tokens_params as count, message_create_params as create
    from anthropic.types.beta import message_count_tokens_params as beta_count, message_create_params as beta_create

    from gitmem.emulator.validate import COUNT_FIELDS, MESSAGE_FIELDS

    def fields(*types):  # less the three the SDK sends as headers
        return set().union(*(t.__required_keys__ | t.__optional_keys__ for t in types)) - {
            "betas", "user_profile_id", "workspace_id"}

    assert fields(create.MessageCreateParamsStreaming, beta_create.MessageCreateParamsStreaming) <= MESSAGE_FIELDS
    assert fields(count.MessageCountTokensParams, beta_count.MessageCountTokensParams) <= COUNT_FIELDS


def test_a_body_over_the_limit_sent_in_chunks_is_413_over_http(emu):
    """A server gets the body in pieces (uvicorn: 64 KiB): over 32 MiB is too large, not invalid JSON."""
    import asyncio

    raw = json.dumps(body(question="word " * 7_000_000)).encode()
    pieces = [raw[i:i + 65536] for i in range(0, len(raw), 65536)]
    sent = []

    async def receive():
        chunk = pieces.pop(0)
        return {"type": "http.request", "body": chunk, "more_body": bool(pieces)}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v1/messages", "query_string": b"",
             "headers": [(k.encode(), v.encode()) for k, v in HEADERS.items()]}
    asyncio.run(emu.asgi()(scope, receive, send))
    assert sent[0]["status"] == 413
    assert json.loads(sent[1]["body"])["error"]["type"] == "request_too_large"
    assert pieces  # reading stopped at the limit: the rest was never taken in


def test_the_reply_cites_matching_memory_and_says_it_is_the_emulator(emu):
    reply = send(emu, body()).json()
    text = reply["content"][0]["text"]
    assert text.splitlines()[0] == BANNER
    assert "[0mabcdefghjk1234]" in text
    assert "[0mzyxwvutsrq9876]" not in text  # card numbers are not what was asked
    assert reply["id"].startswith("msg_") and reply["type"] == "message" and reply["role"] == "assistant"
    assert reply["stop_reason"] == "end_turn" and reply["stop_sequence"] is None
    assert reply["model"] == "claude-haiku-4-5-20251001"


def test_the_reply_falls_back_to_guide_sections(emu):
    text = send(emu, body(question="What about the outbox row and a crash?")).json()["content"][0]["text"]
    assert "from the guide" in text and "outbox" in text


def test_replies_are_deterministic(clock):
    first, second = Emulator(clock=VirtualClock()), Emulator(clock=VirtualClock())
    assert send(first, body()).json() == send(second, body()).json()


def events_of(raw: bytes):
    events = []
    for frame in raw.decode().strip().split("\n\n"):
        name, data = frame.split("\n")
        events.append((name[len("event: "):], json.loads(data[len("data: "):])))
    return events


# Streaming (https://platform.claude.com/docs/en/build-with-claude/streaming): message_start, then
# per block content_block_start / content_block_delta... / content_block_stop, then message_delta
# and message_stop; the events arrive one by one, not as one body.
def test_a_stream_is_written_event_by_event_in_the_documented_order(emu):
    response = send(emu, body(stream=True))
    assert response.status == 200 and response.chunks is not None
    chunks = list(response.iter_chunks())
    assert len(chunks) > 6 and all(c.endswith(b"\n\n") and c.count(b"event: ") == 1 for c in chunks)
    names = [name for name, _ in events_of(b"".join(chunks))]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == names.count("content_block_stop") == 1
    deltas = [d["delta"]["text"] for n, d in events_of(b"".join(chunks)) if n == "content_block_delta"]
    assert len(deltas) > 3
    assert "".join(deltas) == send(emu, body()).json()["content"][0]["text"]


# Streaming docs, "Error events": "during periods of high usage, you may receive an
# overloaded_error, which would normally correspond to an HTTP 529 in a non-streaming context".
def test_an_injected_mid_stream_failure_ends_the_stream_with_an_error_event(emu):
    emu.handle("POST", "/_emulator/fail", {}, b'{"status": 529, "count": 1, "mid_stream": true}')
    response = send(emu, body(stream=True))
    assert response.status == 200
    events = events_of(response.read())
    assert events[0][0] == "message_start" and "message_stop" not in [n for n, _ in events]
    assert events[-1] == ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"},
                                    "request_id": dict(response.headers)["request-id"]})
    assert send(emu, body(stream=True)).status == 200


def test_the_sdk_reads_a_stream_from_the_in_process_transport(clock):
    import anthropic
    import httpx2

    emu = Emulator(clock=clock)
    client = anthropic.Anthropic(api_key="k", base_url="http://emulator.invalid",
                                 http_client=httpx2.Client(transport=emu.transport()))
    with client.messages.stream(**body()) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == final.content[0].text and text.startswith(BANNER)
    assert final.usage.cache_creation_input_tokens == tokens_through(body(), 0)
    emu.handle("POST", "/_emulator/fail", {}, b'{"status": 529, "count": 1, "mid_stream": true}')
    with pytest.raises(anthropic.APIStatusError, match="Overloaded"):
        with client.messages.stream(**body()) as stream:
            "".join(stream.text_stream)


# ST: a message_delta's usage has the fields of the SDK's MessageDeltaUsage (the cumulative counts); the nested
# cache_creation split and service_tier are the message's, sent once in message_start.
def test_a_streamed_message_delta_has_the_usage_fields_of_message_delta_usage_and_no_others(clock):
    import anthropic
    import httpx2
    from anthropic.types import MessageDeltaUsage

    from gitmem.emulator.app import DELTA_USAGE_FIELDS

    assert set(DELTA_USAGE_FIELDS) == set(MessageDeltaUsage.model_fields)  # an SDK upgrade that adds one fails here
    emu = Emulator(clock=clock)
    client = anthropic.Anthropic(api_key="k", base_url="http://emulator.invalid",
                                 http_client=httpx2.Client(transport=emu.transport()))
    with client.messages.stream(**body()) as stream:
        (delta,) = [event for event in stream if event.type == "message_delta"]
        final = stream.get_final_message()
    assert delta.usage.model_extra == {}  # nothing a client strict about MessageDeltaUsage would refuse
    assert delta.usage.model_fields_set <= set(MessageDeltaUsage.model_fields)
    assert (delta.usage.input_tokens, delta.usage.cache_creation_input_tokens, delta.usage.cache_read_input_tokens,
            delta.usage.output_tokens) == (final.usage.input_tokens, final.usage.cache_creation_input_tokens,
                                           final.usage.cache_read_input_tokens, final.usage.output_tokens)
    # the TTL split still reaches the final message, from message_start
    assert final.usage.cache_creation.ephemeral_5m_input_tokens == tokens_through(body(), 0)
    assert final.usage.service_tier == "standard"


def test_max_tokens_truncates_the_reply(emu):
    reply = send(emu, body(max_tokens=1)).json()
    assert reply["stop_reason"] == "max_tokens"
    assert reply["usage"]["output_tokens"] == 1


def test_stop_sequences_end_the_reply(emu):
    reply = send(emu, body(stop_sequences=["From the team"])).json()
    assert reply["stop_reason"] == "stop_sequence" and reply["stop_sequence"] == "From the team"
    assert "From the team" not in reply["content"][0]["text"]


def test_models_endpoint_lists_and_resolves_aliases(emu):
    listed = emu.handle("GET", "/v1/models", HEADERS, query="limit=2").json()
    assert len(listed["data"]) == 2 and listed["has_more"] is True
    assert listed["first_id"] == listed["data"][0]["id"] and listed["last_id"] == listed["data"][1]["id"]
    rest = emu.handle("GET", "/v1/models", HEADERS, query=f"limit=100&after_id={listed['last_id']}").json()
    assert rest["has_more"] is False and listed["last_id"] not in [m["id"] for m in rest["data"]]
    one = emu.handle("GET", "/v1/models/claude-haiku-4-5", HEADERS).json()
    assert one["id"] == "claude-haiku-4-5-20251001" and one["type"] == "model"
    assert emu.handle("GET", "/v1/models/claude-nope", HEADERS).status == 404


# ModelInfo.created_at (SDK): "RFC 3339 datetime string representing the time at which the model was released.
# May be set to an epoch value if the release date is unknown." List Models: "More recently released models are
# listed first." Release dates from each model's page ("Released February 5, 2026").
def test_models_say_when_they_were_released_and_the_newest_comes_first(clock):
    import anthropic
    import httpx2

    emu = Emulator(clock=clock)
    client = anthropic.Anthropic(api_key="k", base_url="http://emulator.invalid",
                                 http_client=httpx2.Client(transport=emu.transport()))
    listed = list(client.models.list(limit=100))
    released = {m.id: m.created_at.date().isoformat() for m in listed}
    assert released["claude-opus-4-6"] == "2026-02-05" and released["claude-haiku-5-5"] == "2026-10-07"
    assert released["claude-haiku-4-5-20251001"] == "2025-10-15"  # the page's date, not the snapshot id's
    assert listed[0].id == "claude-haiku-5-5"  # the newest release with a known date, not an older snapshot
    dates = [m.created_at for m in listed]
    assert dates == sorted(dates, reverse=True)
    unknown = {model for model, day in released.items() if day == "1970-01-01"}
    assert unknown == {row.id for row in emu.table.models if not row.retired and not row.released
                       and not row.id[-8:].isdigit()}  # only where no page gives a date
    assert client.models.retrieve("claude-opus-4-5").created_at.date().isoformat() == "2025-11-24"


def test_admin_clock_moves_only_a_virtual_clock(emu, clock):
    state = emu.handle("POST", "/_emulator/clock", {}, b'{"advance": 90}').json()
    assert state["clock"] == "virtual" and state["now"] == 90
    real = Emulator()
    assert real.handle("POST", "/_emulator/clock", {}, b'{"advance": 90}').status == 400
    for bad in (b'{"advance": NaN}', b'{"advance": 1e400}', b'{"advance": -1}', b'{"advance": "5"}'):
        assert emu.handle("POST", "/_emulator/clock", {}, bad).status == 400, bad  # NaN stopped the clock for good
    assert emu.handle("GET", "/_emulator/state", {}).json()["now"] == 90
    assert emu.handle("POST", "/_emulator/clock", {}, b'{"advance": 1e308}').status == 200
    assert emu.handle("POST", "/_emulator/clock", {}, b'{"advance": 1e308}').status == 400  # would reach Infinity
    assert emu.handle("POST", "/_emulator/fail", {}, b'{"status": 529, "count": 100000000}').status == 400  # 800 MB


def test_admin_state_shows_which_entries_survive(emu, clock):
    usage(emu, body(guide_ttl="1h", memory_ttl="5m"))
    assert sorted(e["ttl"] for e in emu.state()["entries"]) == ["1h", "5m"]
    clock.advance(330)
    assert [e["ttl"] for e in emu.state()["entries"]] == ["1h"]


# ERR: "529 - overloaded_error: The API is temporarily overloaded."
def test_injected_failures_return_overloaded(emu):
    emu.handle("POST", "/_emulator/fail", {}, b'{"status": 529, "count": 1}')
    response = send(emu, body())
    assert response.status == 529 and error_of(response)["type"] == "overloaded_error"
    assert send(emu, body()).status == 200


def test_over_http_each_event_is_its_own_write(clock):
    """The ASGI app under uvicorn: with a delay between events, the first arrives before the last."""
    import socket
    import threading
    import time

    import httpx2
    import uvicorn

    emu = Emulator(clock=clock, stream_delay=0.05)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(emu.asgi(), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.01)
        arrivals = []
        with httpx2.Client() as client:
            with client.stream("POST", f"http://127.0.0.1:{port}/v1/messages", headers=HEADERS,
                               content=json.dumps(body(stream=True))) as response:
                assert response.headers["content-type"].startswith("text/event-stream")
                for chunk in response.iter_raw():
                    arrivals.append((time.monotonic(), chunk))
        raw = b"".join(c for _, c in arrivals)
        events = events_of(raw)
        assert events[-1][0] == "message_stop"
        assert len(arrivals) >= len(events) // 2  # not one body
        assert arrivals[-1][0] - arrivals[0][0] >= 0.05 * (len(events) - 2)
    finally:
        server.should_exit = True
        thread.join(timeout=5)


def test_a_state_file_shares_the_cache_between_emulators_on_wall_time(tmp_path):
    """Two emulators (two processes, as two `gitmem ask`) naming one state file share one cache."""
    from gitmem.emulator import WallClock

    state = str(tmp_path / "gitmem" / "emulator-cache.json")
    first = Emulator(state_path=state)
    assert isinstance(first.clock, WallClock)  # a monotonic clock would not survive the process
    assert usage(first, body())["cache_creation_input_tokens"] == tokens_through(body(), 0)
    second = Emulator(state_path=state)
    assert usage(second, body())["cache_read_input_tokens"] == tokens_through(body(), 0)
    saved = json.loads(open(state).read())
    assert saved["clock"] == "wall" and [e["ttl"] for e in saved["entries"]] == ["5m"]
    ids = {send(Emulator(state_path=state), body()).json()["id"] for _ in range(3)}
    assert len(ids) == 3  # the id counter is saved too


def test_saved_entries_expire_by_the_saved_clock(tmp_path):
    state = str(tmp_path / "emulator-cache.json")
    usage(Emulator(clock=VirtualClock(), state_path=state), body())
    later = Emulator(clock=VirtualClock(), state_path=state)  # resumes at the saved virtual time
    later.clock.advance(299)
    assert usage(later, body())["cache_read_input_tokens"] == tokens_through(body(), 0)
    last = Emulator(clock=VirtualClock(), state_path=state)
    last.clock.advance(300)
    assert usage(last, body())["cache_read_input_tokens"] == 0
    # Entries saved on a virtual clock mean nothing to a wall clock: they are dropped, not misread.
    assert usage(Emulator(state_path=state), body())["cache_read_input_tokens"] == 0


def test_a_corrupt_state_file_is_an_empty_cache(tmp_path):
    state = tmp_path / "emulator-cache.json"
    state.write_text("{not json")
    assert usage(Emulator(state_path=str(state)), body())["cache_creation_input_tokens"] > 0
    assert json.loads(state.read_text())["entries"]


def test_the_direct_backend_answers_like_the_sdk_and_skips_its_import(tmp_path):
    """`gitmem ask` sends without the SDK (its import costs more than the request) and gets the same reply."""
    import subprocess
    import sys

    from gitmem.backend import open_backend

    via_sdk = open_backend("emulator", clock=VirtualClock()).send(body())
    direct = open_backend("emulator", clock=VirtualClock(), sdk=False).send(body())
    assert (direct.text, direct.usage, direct.backend, direct.model) == (via_sdk.text, via_sdk.usage, "emulator", via_sdk.model)
    script = ("import sys, json; from gitmem.backend import open_backend; "
              f"r = open_backend('emulator', sdk=False).send(json.loads({json.dumps(json.dumps(body()))})); "
              "print('anthropic' in sys.modules, r.usage.cache_creation_input_tokens > 0)")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=tmp_path,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(__import__("pathlib").Path(__file__).parents[1])})
    assert out.stdout.split() == ["False", "True"]


# DEP: "Retired: The model is no longer available for use. Requests to retired models will fail."
# The API answers a retired model as an unknown one: 404 not_found_error "model: <id>".
@pytest.mark.parametrize("model", ["claude-sonnet-4-20250514", "claude-sonnet-4-0", "claude-3-5-haiku-20241022",
                                   "claude-3-haiku-20240307", "claude-opus-4-1"])
def test_a_retired_model_answers_the_apis_not_found_error(emu, model):
    req = {**body(), "model": model}
    for path, sent in (("/v1/messages", req), ("/v1/messages/count_tokens", count_body(req))):
        response = send(emu, sent, path)
        assert response.status == 404
        assert error_of(response) == {"type": "not_found_error", "message": f"model: {model}"}
    assert emu.handle("GET", f"/v1/models/{model}", HEADERS).status == 404
    listed = [m["id"] for m in emu.handle("GET", "/v1/models", HEADERS, query="limit=100").json()["data"]]
    assert model not in listed and "claude-opus-5-5" in listed and "claude-haiku-5-5" in listed


# PR (the current page's rows): the models on today's pricing page are served, not 404.
@pytest.mark.parametrize("model", ["claude-fable-5-1", "claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5",
                                   "claude-opus-4-8", "claude-sonnet-5"])
def test_the_current_lineup_is_served(emu, model):
    reply = send(emu, {**body(), "model": model})
    assert reply.status == 200 and reply.json()["model"] == model


# TC's own examples: "You are a scientist" / "Hello, Claude" is {"input_tokens": 14}; the get_weather
# tool example is {"input_tokens": 403}, because with tools the API adds a tool-use system prompt (PR:
# 346 tokens for tool_choice auto on the Claude 4 models); the extended-thinking example is
# {"input_tokens": 88}, because "thinking blocks from previous assistant turns are ignored and do not
# count toward your input tokens". The first two bodies are as the stored page prints them (which
# today names claude-opus-5, with the figures the page has printed since the Claude 4 models; the
# emulator reproduces them on a v3-tokenizer model). The thinking example's body is reconstructed:
# the stored copy cuts it off, so its assistant text may differ from the page's by a few words.
DOC_EXAMPLES = [
    ({"system": "You are a scientist", "messages": [{"role": "user", "content": "Hello, Claude"}]}, 14),
    ({"tools": [{"name": "get_weather", "description": "Get the current weather in a given location",
                 "input_schema": {"type": "object", "properties": {"location": {
                     "type": "string", "description": "The city and state, e.g. San Francisco, CA"}},
                     "required": ["location"]}}],
      "messages": [{"role": "user", "content": "What's the weather like in San Francisco?"}]}, 403),
    ({"thinking": {"type": "enabled", "budget_tokens": 16000}, "messages": [
        {"role": "user", "content": "Are there an infinite number of prime numbers such that n mod 4 == 3?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "This is a nice number theory question. Let's think about it step by "
                                             "step...", "signature": "EuYBCkQYAiJAgCs1le6/Pol5Z4/JMomVOouGrWdhYNsH3ukz"
                                                                     "UECbB6iWrSQtsQuRHJID6lWV..."},
            {"type": "text", "text": "Yes, there are infinitely many prime numbers p such that p mod 4 = 3. The proof "
                                     "is similar to Euclid's proof..."}]},
        {"role": "user", "content": "Can you write a formal proof?"}]}, 88),
]


@pytest.mark.parametrize("example, published", DOC_EXAMPLES)
def test_count_tokens_gives_the_token_counting_pages_own_examples(emu, example, published):
    response = send(emu, {"model": SONNET, **example}, "/v1/messages/count_tokens")
    assert response.status == 200 and response.json() == {"input_tokens": published}


def test_earlier_turn_thinking_is_free_but_a_tool_loops_thinking_counts(emu):
    example = DOC_EXAMPLES[2][0]
    without = json.loads(json.dumps(example))
    without["messages"][1]["content"][0]["thinking"] = "x"
    count = lambda req: send(emu, {"model": SONNET, **req}, "/v1/messages/count_tokens").json()["input_tokens"]  # noqa: E731
    assert count(example) == count(without)
    loop = json.loads(json.dumps(example))
    loop["messages"][1]["content"].append({"type": "tool_use", "id": "t1", "name": "calc", "input": {}})
    loop["messages"][2]["content"] = [{"type": "tool_result", "tool_use_id": "t1", "content": "42"}]
    shorter = json.loads(json.dumps(loop))
    shorter["messages"][1]["content"][0]["thinking"] = "x"
    assert count(loop) > count(shorter)  # the current tool-use cycle's thinking is part of the prompt


# PC: "Shorter prompts cannot be cached, even if marked with cache_control." The emulator's counts are
# estimates that may overcount by ESTIMATE_ERROR["over"] percent, so it caches only from the minimum
# plus that margin: a prefix it estimates just above 4,096 may be below the API's minimum.
def test_near_the_minimum_the_emulator_does_not_cache_what_the_api_might_not(emu):
    from gitmem.emulator.app import cacheable_minimum
    from gitmem.pricing import DEFAULT_TABLE
    from gitmem.tokens import ESTIMATE_ERROR

    haiku = DEFAULT_TABLE.get(HAIKU)
    floor = cacheable_minimum(haiku)
    assert floor == -(-4096 * (100 + ESTIMATE_ERROR["over"]) // 100) > 4096
    sizes = {}
    for n in range(30, 120):
        prefix = tokens_through(body(guide_text=guide(n)), 0)
        sizes.setdefault("just above", n) if 4096 <= prefix < floor else None
        if prefix >= floor + 50:
            sizes["well above"] = n
            break
    near, far = body(guide_text=guide(sizes["just above"])), body(guide_text=guide(sizes["well above"]))
    assert usage(emu, near)["cache_creation_input_tokens"] == 0
    assert usage(emu, far)["cache_creation_input_tokens"] == tokens_through(far, 0)


# PC, "Cache limitations" (quoted in two public repositories' notes, verified 2026-10-07 and 2026-10-08): "512
# tokens for Claude Fable 5.1, Claude Mythos 5.1, Claude Opus 5.5, Claude Opus 5, Claude Sonnet 5.5, Claude Fable 5,
# Claude Mythos 5, and Claude Haiku 5.5". A system prompt of some 800 tokens caches on all three 5.5 models.
@pytest.mark.parametrize("model", ["claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5"])
def test_the_5_5_models_cache_a_prefix_from_512_tokens(clock, model):
    from gitmem.pricing import DEFAULT_TABLE

    req = body(model=model, guide_text=guide(11))
    prefix = prompt_blocks(req, DEFAULT_TABLE.get(model).tokenizer)[0].tokens
    assert 600 < prefix < 1024
    client = sdk_client(Emulator(clock=clock))
    assert client.messages.create(**req).usage.cache_creation_input_tokens == prefix
    assert client.messages.create(**req).usage.cache_read_input_tokens == prefix


# https://platform.claude.com/docs/en/build-with-claude/prompt-caching, "What invalidates the cache": "Non-tool
# results passed to extended thinking requests": "On Opus 4.5+ and Sonnet 4.6+, thinking blocks are preserved by
# default, so the cache remains valid (✓). On earlier Opus/Sonnet models and all Haiku models, all
# previously-cached thinking blocks are stripped from context, and any messages that follow those thinking blocks
# are removed from the cache (✘)."
@pytest.mark.parametrize("model, kept", [(HAIKU, False), ("claude-sonnet-4-5", False), (SONNET, True),
                                         ("claude-opus-4-6", True)])
def test_a_user_turn_after_a_thinking_tool_loop_keeps_its_cache_only_where_thinking_is_preserved(emu, model, kept):
    def chat(answered):
        messages = [{"role": "user", "content": "How are refunds paid?"},
                    {"role": "assistant", "content": [
                        {"type": "thinking", "thinking": "The guide has a rule on refunds. " * 20, "signature": "sig"},
                        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "refunds"}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                  "content": "Through the ledger.",
                                                  "cache_control": {"type": "ephemeral"}}]}]
        if answered:
            messages += [{"role": "assistant", "content": "Through the ledger service."},
                         {"role": "user", "content": [{"type": "text", "text": "And chargebacks?",
                                                       "cache_control": {"type": "ephemeral"}}]}]
        return {"model": model, "max_tokens": 4000, "thinking": {"type": "enabled", "budget_tokens": 2000},
                "tools": [{"name": "lookup", "description": GUIDE, "input_schema": {"type": "object"}}],
                "messages": messages}

    client = sdk_client(emu)
    assert client.messages.create(**chat(False)).usage.cache_creation_input_tokens > 0
    later = client.messages.create(**chat(True)).usage
    assert (later.cache_read_input_tokens > 0) is kept
    if not kept:  # nothing before the stripped thinking block was marked: the whole prompt is written again
        assert later.cache_creation_input_tokens == count_request_tokens(chat(True))


# https://platform.claude.com/docs/en/build-with-claude/prompt-caching, "Cache limitations": "For concurrent
# requests, note that a cache entry only becomes available after the first response begins. If you need cache hits
# for parallel requests, wait for the first response before sending subsequent requests." A request that arrived
# before another's response began misses that response's entry, even when the emulator serves it afterwards.
def test_a_request_sent_before_the_first_response_began_misses_its_entry(clock):
    import threading

    from gitmem.emulator import PromptCache

    class HeldCache(PromptCache):
        """Holds the first request it serves until told to go on: the two requests are in flight together."""

        def __init__(self):
            super().__init__()
            self.held, self.go = threading.Event(), threading.Event()

        def apply(self, *args, **kwargs):
            if not self.held.is_set():
                self.held.set()
                assert self.go.wait(10)
            return super().apply(*args, **kwargs)

    emu = Emulator(clock=clock, cache=HeldCache())
    client = sdk_client(emu)
    req = body()
    early = {}
    sent = threading.Thread(target=lambda: early.setdefault("usage", client.messages.create(**req).usage))
    sent.start()
    assert emu.cache.held.wait(10)  # the first request is in flight, its prompt not yet processed
    first = client.messages.create(**req).usage  # the second one starts its response first
    emu.cache.go.set()
    sent.join(10)
    assert first.cache_creation_input_tokens == tokens_through(req, 0)
    assert early["usage"].cache_read_input_tokens == 0  # sent before that response began: no hit
    assert early["usage"].cache_creation_input_tokens == tokens_through(req, 0)
    assert client.messages.create(**req).usage.cache_read_input_tokens == tokens_through(req, 0)  # sent after: a hit
