"""`gitmem demo cache-ttl` on the emulator: what the issue says the demo must show."""

from __future__ import annotations

import json

import pytest

from conftest import git, gitmem
from gitmem.demo import DECISIONS, GUIDE_TOKENS, run_demo, sample_guide
from gitmem.policy import FIXED, Workload, simulate
from gitmem.usage import Usage, cost
from gitmem.tokens import count_tokens


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    kept = tmp_path_factory.mktemp("demo") / "payments"
    return run_demo(runs=6, keep=str(kept)), kept


def first_after_break(result, policy):
    for run in range(1, 7):
        s2 = [r for r in result.run["requests"] if r["policy"] == policy and r["run"] == run and r["phase"] == "session2"]
        yield Usage.from_api(min(s2, key=lambda r: r["at"])["usage"])


def test_the_guide_is_12100_tokens_by_the_emulators_counter():
    assert count_tokens(sample_guide()) == GUIDE_TOKENS == 12_100
    assert sample_guide() == sample_guide()


def test_the_decisions_are_committed_one_per_write_from_the_demo(demo):
    result, repo = demo
    subjects = git(repo, "log", "--format=%s%n%b", "refs/memory/main")
    assert subjects.count("Memory-Source: demo") == len(DECISIONS) == len(result.run["memory_ids"])
    assert git(repo, "config", "gitmem.guide").strip() == "AGENTS.md"


def test_the_five_minute_ttl_rewrites_the_guide_after_the_break_in_every_run(demo):
    result, _ = demo
    guide = result.run["guide_tokens"]
    writes = [u for u in first_after_break(result, "5m")
              if u.ephemeral_5m_input_tokens >= guide and u.cache_read_input_tokens == 0]
    assert len(writes) == 6
    assert result.checks["guide_after_break"]["5m"] == {"re-written": 6}


@pytest.mark.parametrize("policy", ["1h", "keepalive"])
def test_one_hour_and_keepalive_read_the_guide_after_the_break_in_every_run(demo, policy):
    result, _ = demo
    reads = [u for u in first_after_break(result, policy)
             if u.cache_read_input_tokens >= result.run["guide_tokens"] and u.cache_creation_input_tokens == 0]
    assert len(reads) == 6
    assert result.checks["guide_after_break"][policy] == {"read": 6}


def test_cost_order_keepalive_then_one_hour_then_five_minutes_then_uncached(demo):
    result, _ = demo
    totals = {}
    for policy in FIXED:
        usage = Usage()
        for r in result.run["requests"]:
            if r["policy"] == policy:
                usage = usage + Usage.from_api(r["usage"])
        totals[policy] = cost(usage, "claude-haiku-4-5").total
    assert totals["keepalive"] < totals["1h"] < totals["5m"] < totals["none"]
    assert result.checks["cost_order_cheapest_first"] == ["keepalive", "1h", "5m", "none"]


def test_every_session_two_answer_cites_a_decision_written_before_the_break(demo):
    result, _ = demo
    before = set(result.run["memory_ids"])
    answers = [r for r in result.run["requests"] if r["phase"] == "session2"]
    assert len(answers) == 4 * 4 * 6
    for r in answers:
        assert r["cites"] and set(r["cites"]) <= before, r["answer"]
        assert all(f"[{i}]" in r["answer"] for i in r["cites"])


def test_every_request_names_the_emulator_and_a_keepalive_ping_generates_nothing(demo):
    result, _ = demo
    assert {r["backend"] for r in result.run["requests"]} == {"emulator"}
    pings = [r for r in result.run["requests"] if r["phase"] == "break"]
    assert len(pings) == 6 and {r["policy"] for r in pings} == {"keepalive"}
    assert all(r["usage"]["output_tokens"] == 0 and r["at"] == 90 + 240 for r in pings)


def test_the_computed_table_agrees_with_the_measured_run(demo):
    result, _ = demo
    workload = Workload.from_dict(result.run["workload"])
    for policy in FIXED:
        usage = Usage()
        for r in result.run["requests"]:
            if r["policy"] == policy and r["run"] == 1:
                usage = usage + Usage.from_api(r["usage"])
        measured = cost(usage, "claude-haiku-4-5").total
        assert simulate(workload, policy, 330).total == pytest.approx(measured)


def test_demo_json_is_one_document_and_the_bill_shows_the_recorded_run(repo, tmp_path):
    out = gitmem(repo, "demo", "--runs", "1", "--json")
    data = json.loads(out.stdout)
    assert data["backend"] == "emulator" and data["clock"] == "virtual"
    assert data["checks"]["guide_after_break"]["5m"] == {"re-written": 1}
    assert data["recorded"].startswith(str(repo / ".git" / "gitmem" / "runs"))
    svg = tmp_path / "bill.svg"
    shown = gitmem(repo, "bill", "--svg", str(svg)).stdout
    assert "Bill (emulator, claude-haiku-4-5-20251001" in shown and "break (min)" in shown
    assert svg.read_text().startswith("<svg")
    billed = json.loads(gitmem(repo, "bill", "--json").stdout)
    assert billed["run"] == data["recorded"]
    assert [p["policy"] for p in billed["policies"]] == list(FIXED)
    assert len(billed["break_table"]) == 9


def test_demo_text_names_the_backend_and_alias_runs_the_same(repo):
    text = gitmem(repo, "demo", "cache-ttl", "--runs", "1").stdout
    assert text.startswith("gitmem demo cache-ttl - backend: emulator (virtual clock)")
    assert "$ gitmem fact add" in text and "guide re-written 1/1" in text and "Recorded:" in text


def test_the_real_api_needs_real_time(repo):
    out = gitmem(repo, "demo", "--backend", "anthropic", check=False)
    assert out.returncode == 1 and "--real-time" in out.stderr


def test_two_runs_print_the_same_figures_and_send_byte_identical_prompts(repo):
    """Issue 18: the memory ids were time-based, so the prefix varied (12,775 to 12,788 tokens) and
    so did the dollars. The sample repository now has fixed ids and a fixed clock."""
    import re

    def figures(out: str) -> list:
        return [line for line in out.splitlines() if "$" in line or re.search(r"\bin +\d+ +write", line)]

    first = gitmem(repo, "demo", "--runs", "1").stdout
    second = gitmem(repo, "demo", "--runs", "1").stdout
    assert figures(first) and figures(first) == figures(second)
    a, b = run_demo(runs=1), run_demo(runs=1)
    assert a.run["memory_ids"] == b.run["memory_ids"]
    assert [r["usage"] for r in a.run["requests"]] == [r["usage"] for r in b.run["requests"]]
    assert a.run["workload"] == b.run["workload"]


def test_the_demo_the_bill_and_models_say_token_counts_are_estimates_and_by_how_much(repo):
    from gitmem.tokens import ESTIMATE_NOTE

    assert "within 1% in total and 5% per kind" in ESTIMATE_NOTE
    assert ESTIMATE_NOTE in gitmem(repo, "demo", "--runs", "1").stdout
    assert ESTIMATE_NOTE in gitmem(repo, "bill", "--no-plot").stdout
    assert ESTIMATE_NOTE in gitmem(repo, "models").stdout


def test_keep_refuses_a_folder_that_is_not_empty_and_leaves_it_untouched(tmp_path):
    """`gitmem demo --keep .` in one's own repository wrote the sample guide over AGENTS.md, committed it on
    the checked-out branch and added the sample memories to the branch's memory."""
    from conftest import make_repo

    repo = make_repo(tmp_path / "mine")
    (repo / "AGENTS.md").write_text("our own guide, not committed yet\n")
    head = git(repo, "rev-parse", "HEAD")
    refused = gitmem(repo, "demo", "--keep", ".", "--runs", "1", check=False)
    assert refused.returncode == 1 and "not empty" in refused.stderr and "Traceback" not in refused.stderr
    assert (repo / "AGENTS.md").read_text() == "our own guide, not committed yet\n"
    assert git(repo, "rev-parse", "HEAD") == head and git(repo, "for-each-ref", "refs/memory/").strip() == ""
    a_file = gitmem(repo, "demo", "--keep", "AGENTS.md", "--runs", "1", check=False)
    assert a_file.returncode == 1 and "not a folder" in a_file.stderr and "Traceback" not in a_file.stderr
    (tmp_path / "empty").mkdir()
    assert gitmem(tmp_path / "empty", "demo", "--keep", ".", "--runs", "1").returncode == 0
