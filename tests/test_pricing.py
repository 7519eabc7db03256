"""Price table, usage parsing, and cost() against hand-computed values."""

from __future__ import annotations

import pytest

from conftest import gitmem, make_repo
from gitmem.errors import PriceTableError, UnknownModel
from gitmem.pricing import CHECKED, DEFAULT_TABLE, LIFECYCLES, PRICES_SOURCE, parse_price_table
from gitmem.usage import Usage, cost
from gitmem.tokens import FAMILIES


def test_the_shipped_table_names_its_source_and_date():
    assert DEFAULT_TABLE.source == PRICES_SOURCE == "https://platform.claude.com/docs/en/about-claude/pricing"
    assert DEFAULT_TABLE.checked == CHECKED


def test_haiku_4_5_prices_and_minimum_match_the_docs():
    row = DEFAULT_TABLE.get("claude-haiku-4-5")
    assert (row.input, row.cache_write_5m, row.cache_write_1h, row.cache_read, row.output) == (1, 1.25, 2, 0.1, 5)
    assert row.min_cacheable_tokens == 4096
    assert DEFAULT_TABLE.get("claude-sonnet-4-5").min_cacheable_tokens == 1024
    assert DEFAULT_TABLE.get("claude-3-5-haiku-20241022").min_cacheable_tokens == 2048


# The pricing page: "5-minute cache write tokens are 1.25 times the base input tokens price", 1-hour
# writes 2 times, cache reads 0.1 times; the rows it prints otherwise are kept as printed.
PRINTED_READS = {"claude-fable-5-1": 0.25, "claude-mythos-5-1": 0.25, "claude-opus-5-5": 0.2,
                 "claude-sonnet-5-5": 0.1, "claude-haiku-5-5": 0.01, "claude-3-haiku-20240307": 0.03}


def test_cache_prices_follow_the_documented_multipliers_except_the_rows_printed_otherwise():
    for row in DEFAULT_TABLE.models:
        if row.id != "claude-3-haiku-20240307":  # published rounded: $0.30
            assert row.cache_write_5m == pytest.approx(row.input * 1.25), row.id
        assert row.cache_write_1h == pytest.approx(row.input * 2), row.id
        assert row.cache_read == pytest.approx(PRINTED_READS.get(row.id, row.input * 0.1)), row.id


def test_every_row_has_a_lifecycle_a_tokenizer_and_says_where_its_minimum_came_from():
    ids = [row.id for row in DEFAULT_TABLE.models]
    assert len(ids) == len(set(ids))
    for row in DEFAULT_TABLE.models:
        assert row.lifecycle in LIFECYCLES and row.tokenizer in FAMILIES
        assert row.min_cacheable_source in ("docs", "assumed")
        assert row.min_cacheable_tokens in (512, 1024, 2048, 4096)
    current = {"claude-fable-5-1", "claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5"}
    assert current <= {row.id for row in DEFAULT_TABLE.models if row.lifecycle == "active"}
    # Issue 18: Sonnet 4 and Haiku 3.5 are retired, Haiku 3 is gone from the current lists.
    for model in ("claude-sonnet-4-0", "claude-3-5-haiku-latest", "claude-3-haiku-20240307", "claude-opus-4-1"):
        assert DEFAULT_TABLE.get(model).retired, model
    assert DEFAULT_TABLE.get("claude-sonnet-4-5").lifecycle == "deprecated"
    assert DEFAULT_TABLE.get("claude-opus-4-7").tokenizer == "v4.7"
    assert DEFAULT_TABLE.get("claude-opus-4-6").tokenizer == "v3"


# https://platform.claude.com/docs/en/build-with-claude/prompt-caching, "Cache limitations" (quoted in two public
# repositories' notes, verified 2026-10-07 and 2026-10-08): "512 tokens for Claude Fable 5.1, Claude Mythos 5.1,
# Claude Opus 5.5, Claude Opus 5, Claude Sonnet 5.5, Claude Fable 5, Claude Mythos 5, and Claude Haiku 5.5".
def test_the_documented_minimums_say_docs_and_no_shipped_row_is_assumed():
    for model in ("claude-fable-5-1", "claude-mythos-5-1", "claude-opus-5-5", "claude-opus-5", "claude-sonnet-5-5",
                  "claude-fable-5", "claude-mythos-5", "claude-haiku-5-5"):
        row = DEFAULT_TABLE.get(model)
        assert (row.min_cacheable_tokens, row.min_cacheable_source) == (512, "docs"), model
    assert {row.min_cacheable_source for row in DEFAULT_TABLE.models} == {"docs"}


def test_haiku_5_5_bills_every_token_of_a_prompt_over_100k_at_the_long_prompt_prices():
    short = Usage(input_tokens=100_000, output_tokens=1_000_000)
    assert cost(short, "claude-haiku-5-5").total == pytest.approx(0.01 + 0.5)
    long = Usage(input_tokens=100_001, output_tokens=1_000_000)
    assert cost(long, "claude-haiku-5-5").total == pytest.approx(100_001 * 0.5 / 1e6 + 2.5)


def test_cost_of_a_guide_write_then_a_read_on_haiku_4_5():
    # Write 12,100 tokens at $1.25/MTok, 40 input at $1, 200 output at $5.
    write = Usage(input_tokens=40, output_tokens=200, cache_creation_input_tokens=12_100,
                  ephemeral_5m_input_tokens=12_100)
    c = cost(write, "claude-haiku-4-5")
    assert c.cache_write_5m == pytest.approx(0.015125)
    assert c.input == pytest.approx(0.00004)
    assert c.output == pytest.approx(0.001)
    assert c.total == pytest.approx(0.016165)
    read = Usage(input_tokens=40, output_tokens=200, cache_read_input_tokens=12_100)
    assert cost(read, "claude-haiku-4-5").total == pytest.approx(0.00121 + 0.00004 + 0.001)


def test_1h_writes_are_priced_at_twice_base_input():
    c = cost(Usage(cache_creation_input_tokens=1_000_000, ephemeral_1h_input_tokens=1_000_000), "claude-opus-4-5")
    assert c.cache_write_1h == pytest.approx(10.0) and c.cache_write_5m == 0


def test_usage_from_api_dict_and_sdk_object():
    data = {"input_tokens": 5, "output_tokens": 7, "cache_creation_input_tokens": 30, "cache_read_input_tokens": 11,
            "cache_creation": {"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 20}}
    usage = Usage.from_api(data)
    assert usage.total_input_tokens == 46 and usage.ephemeral_1h_input_tokens == 20
    assert usage.to_api() == data
    from anthropic.types import Usage as SdkUsage

    assert Usage.from_api(SdkUsage.model_validate(data)) == usage


def test_usage_without_a_breakdown_counts_writes_as_5_minute_writes():
    usage = Usage.from_api({"input_tokens": 1, "output_tokens": 1, "cache_creation_input_tokens": 100})
    assert usage.ephemeral_5m_input_tokens == 100
    assert (usage + usage).cache_creation_input_tokens == 200


def test_unknown_models_are_an_error():
    with pytest.raises(UnknownModel, match="claude-nope"):
        cost(Usage(), "claude-nope")


def test_an_unknown_model_is_one_short_line_naming_close_ids_and_the_command_that_lists_them_all(tmp_path):
    # It listed all 21 ids in one 600-character line.
    shown = gitmem(make_repo(tmp_path / "repo"), "context", "--model", "claude-haiku-4.5", check=False)
    assert shown.returncode == 1 and shown.stderr.count("\n") == 1 and "Traceback" not in shown.stderr
    assert "did you mean claude-haiku-4-5," in shown.stderr and "`gitmem models --all` lists every model" in shown.stderr
    assert "claude-opus-4-1" not in shown.stderr and len(shown.stderr) < 250
    far = str(pytest.raises(UnknownModel, DEFAULT_TABLE.get, "gpt-4o").value)
    assert "did you mean" not in far and "gitmem models --all" in far
    assert "gitmem models --all" in gitmem(tmp_path, "models", "--help").stdout  # the command it names exists


def test_an_override_file_changes_prices_and_adds_models():
    table = parse_price_table(
        "source: https://example.com/negotiated\n"
        "models:\n"
        "  claude-haiku-4-5: {input: 0.5, released: 2025-10-16}\n"
        "  proxy-model: {input: 2, cache_write_5m: 2.5, cache_write_1h: 4, cache_read: 0.2, output: 8,"
        " min_cacheable_tokens: 1024}\n", "prices.yaml")
    assert table.source == "https://example.com/negotiated"
    assert table.get("claude-haiku-4-5-20251001").input == 0.5
    assert table.get("claude-haiku-4-5-20251001").output == 5  # untouched fields stay
    assert table.get("claude-haiku-4-5-20251001").released == "2025-10-16"  # YAML's date, as the table keeps it
    assert cost(Usage(output_tokens=1_000_000), "proxy-model", table).total == pytest.approx(8)


@pytest.mark.parametrize("text, problem", [
    ("models: {claude-haiku-4-5: {input: -1}}", "non-negative"),
    # an infinite price made every total of the bill $nan and its chart a traceback
    ("models: {claude-haiku-4-5: {input: .inf}}", "input: expected a finite non-negative number, got inf"),
    ("models: {claude-haiku-4-5: {min_cacheable_tokens: .inf}}", "min_cacheable_tokens: expected a finite"),
    ("models: {new-model: {input: 1}}", "needs"),
    ("models: {claude-haiku-4-5: {price: 1}}", "unknown field"),
    ("models: {claude-haiku-4-5: {tokenizer: v9}}", "tokenizer"),
    ("models: {claude-haiku-4-5: {lifecycle: gone}}", "lifecycle"),
    ("models: {claude-haiku-4-5: {released: Feb 5 2026}}", "released: expected a date"),  # else GET /v1/models would fail on it
    ("!!python/object:os.system {}", "not valid YAML"),
    ("checked: 2026-13-01", "not valid YAML: month must be in 1..12"),  # a date YAML cannot make
    ("[1, 2]", "mapping"),
])
def test_bad_override_files_are_reported(text, problem):
    with pytest.raises(PriceTableError, match=problem):
        parse_price_table(text, "prices.yaml")


def test_gitmem_models_shows_the_lineup_with_statuses_and_sources(tmp_path):
    import json

    from conftest import gitmem
    from gitmem.pricing import LIFECYCLE_SOURCE

    shown = gitmem(tmp_path, "models").stdout
    assert "claude-opus-5-5" in shown and "claude-haiku-5-5" in shown and "active (legacy)" in shown
    assert "claude-3-haiku-20240307" not in shown and "retired models hidden" in shown
    assert PRICES_SOURCE in shown and LIFECYCLE_SOURCE in shown and f"checked {CHECKED}" in shown
    everything = gitmem(tmp_path, "models", "--all").stdout
    assert "claude-3-haiku-20240307" in everything and "retired" in everything
    data = json.loads(gitmem(tmp_path, "models", "--json").stdout)
    assert data["lifecycle_source"] == LIFECYCLE_SOURCE
    assert {m["lifecycle"] for m in data["models"]} == {"active", "deprecated", "retired"}
