"""The shared token counter: deterministic, additive over blocks, close to Claude's ratio on prose."""

from __future__ import annotations

from hypothesis import given, strategies as st

from gitmem.tokens import MESSAGE_OVERHEAD_TOKENS, count_request_tokens, count_tokens, prompt_blocks, truncate_to_tokens

PROSE = (
    "Agents load memory before their first reasoning step, on every request. Done well, that costs "
    "almost nothing because it is read from the prompt cache; done carelessly, every break longer "
    "than the cache TTL pays to write the whole prefix again."
)


def test_english_prose_counts_about_one_token_per_3_5_to_4_5_characters():
    ratio = len(PROSE) / count_tokens(PROSE)
    assert 3.3 <= ratio <= 4.5


def test_counts_are_deterministic_and_empty_text_is_free():
    assert count_tokens(PROSE) == count_tokens(str(PROSE))
    assert count_tokens("") == 0


def test_cjk_and_digits_cost_more_per_character_than_words():
    assert count_tokens("日本語のテキスト") == 8
    assert count_tokens("1234567") == 3  # digit groups of up to three
    assert count_tokens(" refund") == 2 and count_tokens(" pay") == 1


@given(st.text(max_size=300), st.integers(min_value=0, max_value=120))
def test_truncation_never_exceeds_the_budget_and_is_a_prefix(text, budget):
    cut = truncate_to_tokens(text, budget)
    assert text.startswith(cut)
    assert count_tokens(cut) <= budget
    if count_tokens(text) <= budget:
        assert cut == text


def test_request_tokens_are_the_sum_of_prefix_blocks_in_api_order():
    body = {
        "model": "claude-haiku-4-5",
        "tools": [{"name": "lookup", "description": "Find a memory", "input_schema": {"type": "object"}}],
        "system": [{"type": "text", "text": "Guide."},
                   {"type": "text", "text": "Memory.", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": PROSE}],
    }
    blocks = prompt_blocks(body)
    assert [b.path for b in blocks] == ["tools.0", "system.0", "system.1", "messages.0.content"]
    assert blocks[2].cache_control == {"type": "ephemeral"}
    assert blocks[3].tokens == count_tokens(PROSE) + MESSAGE_OVERHEAD_TOKENS
    assert count_request_tokens(body) == sum(b.tokens for b in blocks)
