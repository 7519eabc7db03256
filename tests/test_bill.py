"""The bill from a recorded run: hand-computed costs per policy and phase, ratios, table, plots.

The run below is the workload of test_policy.py (10,000-token prefix, 2 requests per session, 100
tokens after the prefix, 200 output tokens, Claude Haiku 4.5), written as the usage a backend returns.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from conftest import gitmem
from gitmem.bill import (NOTHING_TO_RANK, latest_request, latest_run, load_run, make_bill, read_requests,
                         record_request, record_run, render_plot, render_router_text, render_svg, render_text,
                         requests_path, router_bill)
from gitmem.errors import GitmemError, PriceTableError
from gitmem.price_table import load_price_table
from gitmem.pricing import DEFAULT_TABLE

MICRO = 1e-6


def usage(inp, out, read=0, w5=0, w1=0):
    return {"input_tokens": inp, "output_tokens": out, "cache_read_input_tokens": read,
            "cache_creation_input_tokens": w5 + w1,
            "cache_creation": {"ephemeral_5m_input_tokens": w5, "ephemeral_1h_input_tokens": w1}}


UNCACHED = usage(10_100, 200)
WRITE5, WRITE1 = usage(100, 200, w5=10_000), usage(100, 200, w1=10_000)
READ, PING = usage(100, 200, read=10_000), usage(100, 1, read=10_000)
SHAPES = {
    "none": [("session1", UNCACHED)] * 2 + [("session2", UNCACHED)] * 2,
    "5m": [("session1", WRITE5), ("session1", READ), ("session2", WRITE5), ("session2", READ)],
    "1h": [("session1", WRITE1), ("session1", READ), ("session2", READ), ("session2", READ)],
    "keepalive": [("session1", WRITE5), ("session1", READ), ("break", PING), ("session2", READ), ("session2", READ)],
}


def make_run(policies=SHAPES, runs=2):
    requests = []
    for policy, shape in policies.items():
        for run in range(1, runs + 1):
            for at, (phase, u) in enumerate(shape):
                requests.append({"policy": policy, "run": run, "phase": phase, "label": f"r{at}", "at": at * 60.0,
                                 "usage": u, "cites": [], "backend": "emulator"})
    return {"version": 1, "kind": "cache-ttl", "backend": "emulator", "model": "claude-haiku-4-5",
            "prices": {"source": "https://platform.claude.com/docs/en/about-claude/pricing", "checked": "2026-12-02"},
            "break_seconds": 330, "guide_tokens": 9_000, "runs": runs, "keepalive": {"ping_after": 240, "idle_limit": 3600},
            "workload": {"prefix_tokens": 10_000, "gap_seconds": 60, "session1": [[100, 200]] * 2,
                         "session2": [[100, 200]] * 2, "ping": [100, 1]},
            "requests": requests}


def test_each_policy_is_billed_per_phase_with_its_ratio_to_uncached():
    bill = make_bill(make_run())
    expected = {"none": (22_200, 0, 22_200), "5m": (15_700, 0, 15_700), "1h": (23_200, 0, 4_200),
                "keepalive": (15_700, 1_105, 4_200)}
    for policy, (s1, brk, s2) in expected.items():
        p = bill.policy(policy)
        assert p.runs == 2
        assert p.phases["session1"] / MICRO == pytest.approx(s1)
        assert p.phases["break"] / MICRO == pytest.approx(brk)
        assert p.phases["session2"] / MICRO == pytest.approx(s2)
        assert p.ratio == pytest.approx((s1 + brk + s2) / 44_400)


def test_a_bill_prices_each_recorded_request_on_its_own_size():
    # Haiku 5.5 charges 5x for a request over 100,000 prompt tokens. Six runs of two 10,100-token uncached
    # requests per session are short prompts: 2 x (10,100 x $0.10 + 200 x $0.50) = 2,220 per run and session,
    # not the 11,100 the sum of the 12 requests (121,200 tokens) priced as one long prompt gave.
    run = make_run(runs=6)
    run["model"] = "claude-haiku-5-5"
    bill = make_bill(run)
    assert bill.policy("none").phases["session1"] / MICRO == pytest.approx(2_220)
    assert bill.policy("none").ratio == pytest.approx(1.0)


def test_the_bill_says_which_cache_survived_the_break():
    bill = make_bill(make_run())
    assert bill.policy("5m").after_break == {"re-written": 2}
    assert bill.policy("1h").after_break == {"read": 2}
    assert bill.policy("keepalive").after_break == {"read": 2}
    assert bill.policy("none").after_break == {"uncached": 2}


def test_the_measured_bill_matches_the_computed_row_for_the_same_break():
    bill = make_bill(make_run())
    row = next(r for r in bill.table if r.break_minutes == 5.5)
    for p in bill.policies:
        assert row.totals[p.policy] == pytest.approx(p.total)


def test_the_usage_per_run_in_the_json_is_per_run_and_prices_to_the_cost_per_run():
    # The usage was the sum over the runs while the cost beside it was the mean: with 2 runs the JSON's usage
    # priced to twice its cost_per_run.
    from gitmem.usage import Usage, cost

    for p in make_bill(make_run(runs=2)).to_dict()["policies"]:
        for phase, per_run in p["usage_per_run"].items():
            assert cost(Usage(**{k: round(v * 2) for k, v in per_run.items()}), "claude-haiku-4-5").total / 2 \
                == pytest.approx(p["cost_per_run"][phase])
        assert p["usage_per_run"]["session1"]["output_tokens"] == 400  # 2 requests of 200 output tokens per run


def test_without_an_uncached_policy_the_ratio_prices_the_same_requests_uncached():
    bill = make_bill(make_run({"5m": SHAPES["5m"], "keepalive": SHAPES["keepalive"]}))
    assert bill.policy("5m").ratio == pytest.approx(31_400 / 44_400)
    assert bill.policy("keepalive").ratio == pytest.approx(21_005 / 44_400)  # the ping is not in the baseline


def test_text_plot_and_svg_name_backend_prices_and_mark_the_cheapest():
    bill = make_bill(make_run())
    text = render_text(bill)
    assert "emulator" in text and "platform.claude.com/docs/en/about-claude/pricing" in text
    assert "re-written 2/2" in text
    row = [line for line in text.splitlines() if line.strip().startswith("5.5 min")][0]
    assert row.count("*") == 1 and "0.47*" in row
    plot = render_plot(bill)
    assert "break (min)" in plot and all(mark in plot for mark in "u5hk")
    svg = ET.fromstring(render_svg(bill))
    assert len(svg.findall("{http://www.w3.org/2000/svg}polyline")) == 4
    assert len(svg.findall("{http://www.w3.org/2000/svg}circle")) == len(bill.table)


def test_the_bill_says_why_the_cheapest_policy_is_cheapest_at_the_measured_break():
    # 5.5 minutes, in millionths of a dollar (test_policy.py's workload): keep-alive 15,700 + a ping of 10,000 x 0.1
    # + 100 + 1 x 5 = 1,105 + 4,200 = 21,005; 1h 23,200 + 4,200 = 27,400; 5m 2 x 15,700 = 31,400; uncached 44,400.
    bill = make_bill(make_run())
    assert bill.why == (
        "At a 5.5 min break, cheapest first: 5m + keep-alive $0.0210 (1 prefix write at 1.25x base input, "
        "1 ping $0.0011 to keep it) < 1-hour TTL $0.0274 (1 prefix write at 2x base input) < 5-minute TTL $0.0314 "
        "(2 prefix writes at 1.25x base input) < uncached $0.0444 (the whole prefix at the base input price on "
        "every request)")
    assert bill.why in render_text(bill) and bill.to_dict()["why"] == bill.why
    short = make_run()
    short["break_seconds"] = 120  # no ping before 4 minutes: a tie, 13,600 + 3 x 2,100 = 19,900 each
    assert "5-minute TTL $0.0199 (1 prefix write at 1.25x base input) = 5m + keep-alive $0.0199" in make_bill(short).why


def test_a_run_whose_workload_has_no_requests_says_there_is_nothing_to_rank(repo, tmp_path):
    # Every policy costs $0 for no requests: the table marked uncached "cheapest" at $0.0000 in every row.
    run = make_run()
    run["workload"].update(session1=[], session2=[])
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    shown = gitmem(repo, "bill", "--run", path, "--plot", "--svg", tmp_path / "bill.svg").stdout
    assert shown.count(NOTHING_TO_RANK) == 2  # instead of the table and its reason, and of the plot
    assert "*" not in shown and "cheapest" not in shown and "Computed for other break lengths" not in shown
    assert "5m + keep-alive" in shown  # the measured requests are still billed
    assert ET.parse(tmp_path / "bill.svg").getroot().find("{http://www.w3.org/2000/svg}text").text == NOTHING_TO_RANK
    assert json.loads(gitmem(repo, "bill", "--run", path, "--json").stdout)["break_table"] == []


def test_figures_too_wide_for_their_column_stay_apart():
    # A million times the test run: $22,200.0000 per session uncached, wider than its column; the figures
    # were printed against each other ("$22200.0000$22200.0000") and could not be read.
    def scaled(u):
        return {k: ({n: v * 10**6 for n, v in u[k].items()} if isinstance(u[k], dict) else u[k] * 10**6) for k in u}

    run = make_run({p: [(phase, scaled(u)) for phase, u in shape] for p, shape in SHAPES.items()})
    run["workload"].update(prefix_tokens=10**10, session1=[[10**8, 2 * 10**8]] * 2, session2=[[10**8, 2 * 10**8]] * 2)
    text = render_text(make_bill(run))
    assert "$22200.0000" in text
    assert not re.search(r"[0-9*]\$", text)


def test_runs_are_recorded_in_the_repository_and_the_latest_is_found(store):
    assert latest_run(store) is None
    first = record_run(store, make_run())
    second = record_run(store, make_run(runs=1))
    assert first != second and latest_run(store) == second
    assert ".git/gitmem/runs/" in second and load_run(second)["runs"] == 1
    path = record_request(store, {"backend": "emulator", "memory_commit": "abc"})
    record_request(store, {"backend": "emulator", "memory_commit": "def"})
    with open(path) as f:
        assert [json.loads(line)["memory_commit"] for line in f] == ["abc", "def"]


def test_a_file_that_is_not_a_run_is_refused(tmp_path):
    with pytest.raises(GitmemError, match="not a gitmem run"):
        make_bill({"version": 9})
    good = make_run()
    first = good["requests"][0]
    for broken in ([1, 2], None, {**good, "requests": []}, {k: v for k, v in good.items() if k != "model"},
                   {**good, "requests": ["a string"]}, {**good, "break_seconds": "soon"},
                   {**good, "requests": [{**first, "usage": {"input_tokens": "abc"}}]},
                   {**good, "keepalive": {"bogus": 1}}):  # valid JSON of the wrong shape: one error, no traceback
        with pytest.raises(GitmemError, match="not a gitmem run record"):
            make_bill(broken)
    bad = tmp_path / "x.json"
    bad.write_text("{")
    with pytest.raises(GitmemError, match="not valid JSON"):
        load_run(str(bad))


# Valid JSON of the wrong shape on a line of requests.jsonl (a hand edit, another tool writing there).
NOT_REQUESTS = ['[1, 2]', '"text"', '{"usage": null, "cost": {"total": "x"}}', '{"command": "router", "usage": "x"}',
                '{"command": "router", "usage": {"input_tokens": "abc"}}', '{"command": "router", "at": "soon"}',
                '{"command": "router", "policy": [1]}', '{"command": ["router"]}',
                '{"command": "router", "model": 5, "at": "soon"}',  # a model read as null does not excuse the rest
                '{"command": "ask", "client_request_id": [1]}', '{"command": "router", "client": 5}']


@pytest.mark.parametrize("line", NOT_REQUESTS)
def test_a_recorded_line_that_is_not_a_request_is_an_error_naming_the_file_and_line(repo, store, line):
    record_request(store, {"command": "router", "kind": "request", "at": 1.0, "usage": None, "cost": None})
    with open(requests_path(store), "a") as f:
        f.write(line + "\n")
    for read in (read_requests, latest_request):
        with pytest.raises(GitmemError, match=r"requests\.jsonl line 2 is not a request gitmem recorded"):
            read(store)
    for args in (("bill", "--router"), ("bill", "--requests", "--json")):
        result = gitmem(repo, *args, check=False)
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert result.stderr.startswith("Error: ") and "line 2" in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.parametrize("model", [5, [1], {"id": "x"}, True])
def test_a_line_an_older_router_wrote_with_a_model_that_is_not_text_is_read_with_model_null(repo, store, model):
    """Older routers recorded the client's model as sent; the router now records null, so read it as null."""
    record_request(store, {"command": "router", "kind": "request", "at": 1.0, "usage": None, "cost": None})
    usage = {"input_tokens": 10, "output_tokens": 2}
    with open(requests_path(store), "a") as f:
        f.write(json.dumps({"command": "router", "kind": "request", "at": 2.0, "session": "s", "line": "s",
                            "status": 400, "model": model, "usage": usage, "cost": None}) + "\n")
    old = read_requests(store)[1]
    assert old["model"] is None and old["usage"] == usage and latest_request(store) == old
    for args in (("bill", "--router"), ("bill", "--requests", "--json")):
        assert gitmem(repo, *args).returncode == 0


def test_a_line_cut_short_by_a_crash_is_skipped_and_a_failed_request_is_read(store):
    failed = {"command": "router", "kind": "request", "at": 1.0, "status": 502, "usage": None, "cost": None}
    record_request(store, failed)
    with open(requests_path(store), "a") as f:
        f.write('{"command": "router", "us\n')
    assert read_requests(store) == [failed] and latest_request(store) == failed


def test_a_request_ask_sent_through_the_router_is_billed_once_whichever_recorders_count():
    """ask and the router it sent through each record the request, linked by ask's id: one request, billed
    from the router's line when the router's traffic is billed (naming ask, with the memory ask sent), else
    from ask's. A line recorded before the id existed is read and billed as it was."""
    haiku = "claude-haiku-4-5"
    routed = {"command": "router", "kind": "request", "at": 1.0, "session": "default", "line": "l", "model": haiku,
              "usage": WRITE5, "upstream": "anthropic-api", "client": "ask", "client_request_id": "c1"}
    asked = {"command": "ask", "model": haiku, "usage": WRITE5, "backend": "anthropic-api", "client_request_id": "c1",
             "memory_commit": "0123456789abcdef"}
    older = {"command": "ask", "model": haiku, "usage": READ, "backend": "emulator"}
    both = router_bill([routed, asked, older], commands=("router", "ask", "messages"))
    assert (both["requests"], both["usage"]["cache_read_input_tokens"]) == (2, 10_000)
    assert both["usage"]["cache_creation_input_tokens"] == 10_000
    assert [(s["session"], s["requests"], s["upstreams"], s["clients"]) for s in both["sessions"]] == [
        ("default", 1, ["anthropic-api"], {"ask": 1}), ("ask", 1, ["emulator"], {})]
    assert "upstream anthropic-api  memory 0123456789  sent by gitmem ask (1)" in render_router_text(both)
    alone = router_bill([routed, asked, older])
    assert (alone["requests"], alone["sessions"][0]["memory_commits"]) == (1, ["0123456789abcdef"])
    assert router_bill([routed, asked, older], commands=("ask",))["requests"] == 2


def test_the_price_table_is_read_from_the_override_file_named(tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text("models:\n  claude-haiku-4-5: {input: 0.5}\n")
    table = load_price_table(str(path))
    assert table.get("claude-haiku-4-5").input == 0.5
    assert table.source.endswith(f"(overridden by {path})")
    assert load_price_table(None) is DEFAULT_TABLE


def test_an_unreadable_price_table_is_an_error_naming_the_file(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(PriceTableError, match=re.escape(f"cannot read price table {missing}")):
        load_price_table(str(missing))


@pytest.mark.parametrize("change", [{"keepalive": {"ping_after": 0, "idle_limit": 3600}},
                                    {"break_seconds": float("nan")},
                                    {"workload": {**make_run()["workload"], "gap_seconds": -30}}])
def test_a_run_edited_to_numbers_no_run_could_have_is_one_line_and_exit_1(repo, tmp_path, change):
    # ping_after 0 hung `gitmem bill`; a NaN break and a negative gap were priced into a table.
    path = tmp_path / "run.json"
    path.write_text(json.dumps({**make_run(), **change}))
    result = gitmem(repo, "bill", "--run", path, check=False, timeout=60)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and result.stdout == ""


def test_a_request_of_no_phase_the_bill_knows_is_refused_not_left_out_of_the_table():
    # A request in phase "lunch" was in no column, yet in the uncached baseline: uncached cost 0.94x uncached.
    run = make_run()
    run["requests"][0]["phase"] = "lunch"
    with pytest.raises(GitmemError, match="not a gitmem run record.*lunch"):
        make_bill(run)


def test_a_negative_token_count_is_refused_not_priced_to_negative_dollars():
    run = make_run()
    run["requests"][0]["usage"] = usage(-1_000_000, 200)
    with pytest.raises(GitmemError, match="not a gitmem run record.*negative"):
        make_bill(run)


def test_the_reason_prices_every_ping_not_only_the_breaks():
    # Requests 290 s apart: a ping in each session's idle time too, 3 in all at 1,100 millionths each. The reason
    # said "3 pings $0.0011", the break's one ping, as if the three cost that.
    run = make_run()
    run["workload"]["gap_seconds"] = 290
    assert "3 pings $0.0033 to keep it" in make_bill(run).why


def test_a_cost_too_small_for_four_decimals_is_shown_not_rounded_to_nothing():
    # Haiku 5.5 reads at $0.01 per MTok: a ping reading 4,000 tokens costs $0.00004, which the bill showed as
    # "$0.0000", a break that cost nothing. Every figure keeps two significant digits.
    run = make_run({"keepalive": [("session1", WRITE5), ("break", usage(0, 0, read=4_000)), ("session2", READ)]})
    run["model"] = "claude-haiku-5-5"
    row = next(line for line in render_text(make_bill(run)).splitlines() if line.startswith("5m + keep-alive"))
    assert row.split()[4] == "$0.000040"  # the break column
    assert "$0.0000 " not in row


def test_the_help_teaches_how_to_read_the_bill(repo):
    # It listed the JSON keys, but not what a row's figures are, what the lower table is, or that figures round.
    shown = " ".join(gitmem(repo, "bill", "--help").stdout.split())
    for phrase in ("backend (emulator or the real API)", "USD per run", "vs uncached", "guide after the break",
                   "computed, not measured", "* marks the cheapest", "unrounded"):
        assert phrase in shown


def test_the_bill_names_the_price_table_it_was_priced_with_not_the_one_the_run_recorded(tmp_path):
    # An override file priced the bill, while its first line named the shipped pricing page the run recorded.
    override = tmp_path / "prices.yaml"
    override.write_text("source: https://example.com/negotiated\nchecked: 2026-12-01\n"
                        "models: {claude-haiku-4-5: {input: 0.5}}\n")
    bill = make_bill(make_run(), load_price_table(str(override)))
    assert bill.policy("none").phases["session1"] / MICRO == pytest.approx(2 * (10_100 * 0.5 + 200 * 5))
    assert render_text(bill).splitlines()[0].endswith("prices: https://example.com/negotiated, checked 2026-12-01)")
    assert bill.to_dict()["prices"] == {"source": "https://example.com/negotiated", "checked": "2026-12-01"}
