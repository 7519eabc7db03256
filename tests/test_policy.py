"""TTL policy arithmetic against hand-computed bills (Claude Haiku 4.5: $1 input, $1.25 5m write,
$2 1h write, $0.10 read, $5 output per MTok).

Workload: a 10,000-token prefix; two requests per session, 60 s apart, each with 100 tokens after the
prefix and 200 output tokens. Per request, in millionths of a dollar:
  uncached   10,100 x 1 + 200 x 5                       = 11,100
  5m write   10,000 x 1.25 + 100 + 1,000                = 13,600
  1h write   10,000 x 2 + 100 + 1,000                   = 21,100
  read       10,000 x 0.1 + 100 + 1,000                 =  2,100
  ping       10,000 x 0.1 + 100 + 1 x 5                 =  1,105
"""

from __future__ import annotations

import pytest

from gitmem.errors import GitmemError
from gitmem.policy import FIXED, KeepAlive, Request, Workload, break_table, choose, simulate

W = Workload(prefix_tokens=10_000, session1=(Request(100, 200),) * 2, session2=(Request(100, 200),) * 2,
             gap_seconds=60)
MICRO = 1e-6


def total(policy, minutes, **kw):
    return simulate(W, policy, minutes * 60, **kw).total / MICRO


def test_a_five_and_a_half_minute_break_by_hand():
    assert total("none", 5.5) == pytest.approx(4 * 11_100)
    assert total("5m", 5.5) == pytest.approx(13_600 + 2_100 + 13_600 + 2_100)  # re-written after the break
    assert total("1h", 5.5) == pytest.approx(21_100 + 3 * 2_100)
    assert total("keepalive", 5.5) == pytest.approx(13_600 + 2_100 + 1_100 + 2 * 2_100)  # one ping at 4 min (max_tokens 0)


def test_the_bill_is_split_into_session_one_the_break_and_session_two():
    est = simulate(W, "keepalive", 330)
    assert est.costs["session1"].total / MICRO == pytest.approx(15_700)
    assert est.costs["break"].total / MICRO == pytest.approx(1_100)
    assert est.costs["session2"].total / MICRO == pytest.approx(4_200)
    assert est.pings == 1 and est.writes == 1
    assert est.usage["break"].cache_read_input_tokens == 10_000 and est.usage["break"].output_tokens == 0


def test_short_breaks_keep_every_cache_and_pings_start_at_four_minutes():
    assert total("5m", 4) == pytest.approx(13_600 + 3 * 2_100)
    assert total("keepalive", 2) == total("5m", 2)
    assert simulate(W, "keepalive", 4 * 60).pings == 0  # 240 s is not yet past the ping time
    assert simulate(W, "keepalive", 4.5 * 60).pings == 1  # the ping is sent, though 5m alone would still hit


def test_the_one_hour_ttl_expires_between_59_and_61_minutes():
    assert total("1h", 59) == pytest.approx(21_100 + 3 * 2_100)
    assert total("1h", 61) == pytest.approx(2 * (21_100 + 2_100))


def test_keepalive_stops_at_its_idle_limit():
    # 61 min: pings at 4, 8, ..., 60 min (15), the last keeps the entry alive until the request.
    assert total("keepalive", 61) == pytest.approx(15_700 + 15 * 1_100 + 4_200)
    # 120 min: the same 15 pings, then the entry expires: session 2 writes again.
    assert total("keepalive", 120) == pytest.approx(15_700 + 15 * 1_100 + 15_700)
    short = KeepAlive(idle_limit=600)
    assert simulate(W, "keepalive", 3600, keepalive=short).pings == 2


def test_a_prefix_below_the_model_minimum_is_never_cached():
    small = Workload(prefix_tokens=2_000, session1=(Request(100, 200),), session2=(Request(100, 200),))
    assert simulate(small, "1h", 60).total == simulate(small, "none", 60).total
    assert simulate(small, "1h", 60).writes == 0
    assert simulate(small, "5m", 60, model="claude-sonnet-4-5").writes == 1  # Sonnet 4.5: 1024 minimum


def test_haiku_5_5_long_prompt_prices_apply_per_request_not_to_a_session_summed():
    # Haiku 5.5: $0.10 input, $0.125 5m write, $0.01 read, $0.50 output up to 100,000 prompt tokens per request.
    # 4 requests of 30,100 prompt tokens each are short prompts, though the session's sum (120,400) is not:
    #   uncached  30,100 x 0.10 + 200 x 0.50                    = 3,110 a request, 8 x 3,110 = 24,880
    #   5m write  30,000 x 0.125 + 100 x 0.10 + 100             = 3,860
    #   read      30,000 x 0.01 + 10 + 100                      =   410; re-written after 5.5 min: 2 x (3,860 + 3 x 410)
    # (Priced on the sums, every figure was 5 times this.)
    w = Workload(prefix_tokens=30_000, session1=(Request(100, 200),) * 4, session2=(Request(100, 200),) * 4)
    assert simulate(w, "none", 330, model="claude-haiku-5-5").total / MICRO == pytest.approx(24_880)
    assert simulate(w, "5m", 330, model="claude-haiku-5-5").total / MICRO == pytest.approx(2 * (3_860 + 3 * 410))
    # One request over 100,000 tokens is still a long prompt: 100,100 x 0.50 + 200 x 2.50 = 50,550.
    one = Workload(prefix_tokens=100_000, session1=(Request(100, 200),), session2=())
    assert simulate(one, "none", 0, model="claude-haiku-5-5").total / MICRO == pytest.approx(50_550)


def test_auto_picks_the_cheapest_for_the_expected_break():
    assert choose(W, 2 * 60) in ("5m", "keepalive")
    assert choose(W, 5.5 * 60) == "keepalive"
    assert choose(W, 120 * 60) == "5m"
    guess = simulate(W, "auto", 120 * 60, expected_break=5.5 * 60)
    assert guess.chosen == "keepalive" and guess.total == simulate(W, "keepalive", 120 * 60).total


def test_auto_is_never_more_expensive_than_the_best_fixed_policy_in_the_table():
    for rows in (break_table(W), break_table(W, model="claude-opus-4-5"),
                 break_table(Workload(5_000, (Request(2_000, 800),) * 5, (Request(2_000, 800),) * 5))):
        for row in rows:
            assert row.totals["auto"] <= min(row.totals[p] for p in FIXED) + 1e-12
            assert row.totals[row.cheapest] == min(row.totals[p] for p in FIXED)


def test_the_table_marks_the_cheapest_policy_per_break():
    rows = {row.break_minutes: row for row in break_table(W)}
    assert sorted(rows) == [0, 2, 4, 5.5, 10, 30, 59, 61, 120]
    assert rows[5.5].cheapest == "keepalive"
    assert rows[120].cheapest == "5m"
    assert rows[5.5].ratio("5m") == pytest.approx(31_400 / 44_400)


def test_unknown_policies_and_negative_breaks_are_refused():
    with pytest.raises(GitmemError, match="unknown policy"):
        simulate(W, "forever", 60)
    with pytest.raises(GitmemError, match="negative"):
        simulate(W, "5m", -1)


def test_workloads_round_trip_through_json():
    assert Workload.from_dict(W.to_dict()).to_dict() == W.to_dict()


@pytest.mark.parametrize("brk", [float("nan"), float("inf")])
def test_a_break_that_is_not_a_finite_number_of_seconds_is_refused(brk):
    # NaN passed the check for negative breaks and priced a table for a break of "nan min".
    with pytest.raises(GitmemError, match="break"):
        simulate(W, "5m", brk)


@pytest.mark.parametrize("ping_after, idle_limit", [(0, 3600), (-5, 3600), (float("nan"), 3600), (240, float("inf")),
                                                    (240, -1), (1e-6, 3600)])
def test_a_keep_alive_that_would_ping_without_end_is_refused(ping_after, idle_limit):
    # ping_after 0 or less never moved the next ping past the request: simulate looped for ever (a hand-edited run
    # hung `gitmem bill`); a tiny one sent billions of pings.
    with pytest.raises(GitmemError, match="keep-alive"):
        KeepAlive(ping_after=ping_after, idle_limit=idle_limit)


@pytest.mark.parametrize("change", [{"gap_seconds": -30}, {"gap_seconds": float("nan")}, {"gap_seconds": float("inf")},
                                    {"prefix_tokens": -5}, {"session1": [[-100, 200]]}, {"session2": [[100, -1]]}])
def test_a_workload_no_session_could_have_is_refused(change):
    # A negative gap sent session 1's requests back in time, negative tokens priced to negative dollars.
    with pytest.raises(GitmemError, match="workload"):
        Workload.from_dict({**W.to_dict(), **change})


def test_a_prefix_below_the_model_minimum_is_not_pinged():
    # Nothing is cached to keep alive, and the router pings only an entry a reply showed: the table priced a ping
    # of 2,000 + 100 uncached tokens (2,100 millionths) into a break of 5.5 minutes, keep-alive at 1.34x uncached.
    small = Workload(prefix_tokens=2_000, session1=(Request(100, 200),), session2=(Request(100, 200),))
    est = simulate(small, "keepalive", 330)
    assert est.pings == 0 and est.costs["break"].total == 0
    assert est.total == simulate(small, "none", 330).total == pytest.approx(2 * 3_100 * MICRO)
