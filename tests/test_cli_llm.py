"""`gitmem models`, `gitmem messages` and `gitmem emulator serve`, as a user runs them."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time

import pytest
from click.testing import CliRunner

from conftest import GITMEM, GUIDE, ROOT, git, gitmem
from gitmem.cli import main
from gitmem.router_app import default_line
from gitmem.store import Store

BODY = {
    "model": "claude-haiku-4-5",
    "max_tokens": 200,
    "system": [
        {"type": "text", "text": GUIDE},
        {"type": "text", "text": '<memory id="0mabcdefghjk1234" type="decision">Refunds go through the ledger.</memory>'},
    ],
    "messages": [{"role": "user", "content": "How do refunds work?"}],
}


@pytest.fixture
def run(repo):
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(main, ["-C", str(repo), *args], catch_exceptions=False)

    return invoke


@pytest.fixture
def body_file(tmp_path):
    path = tmp_path / "body.json"
    path.write_text(json.dumps(BODY))
    return str(path)


def test_models_prints_the_price_table_with_its_source_and_date(run):
    text = run("models").output
    assert "claude-haiku-4-5-20251001" in text
    assert "https://platform.claude.com/docs/en/about-claude/pricing (checked 20" in text
    data = json.loads(run("models", "--json").output)
    haiku = next(m for m in data["models"] if m["id"] == "claude-haiku-4-5-20251001")
    assert (haiku["input"], haiku["cache_write_5m"], haiku["cache_write_1h"], haiku["cache_read"], haiku["output"]) == (
        1, 1.25, 2, 0.1, 5)
    assert haiku["min_cacheable_tokens"] == 4096


def test_models_honours_a_price_file_named_in_git_config(run, repo):
    (repo / "prices.yaml").write_text("source: https://example.com/ours\nmodels:\n  claude-haiku-4-5: {input: 0.8}\n")
    git(repo, "config", "gitmem.prices", "prices.yaml")
    data = json.loads(run("models", "--json").output)
    assert data["source"] == "https://example.com/ours"
    assert next(m for m in data["models"] if m["id"] == "claude-haiku-4-5-20251001")["input"] == 0.8


def test_models_explains_a_star_only_when_a_row_shows_one(run, repo):
    # every shipped minimum is documented: the note on assumed ones explained a mark no row had
    assert "*" not in run("models").output
    (repo / "prices.yaml").write_text("models:\n  claude-haiku-4-5: {min_cacheable_source: assumed}\n")
    git(repo, "config", "gitmem.prices", "prices.yaml")
    text = run("models").output
    assert "4096*" in text and "* = not on the stored docs page" in text


def _requests(run, *args):
    result = run("messages", *args, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["backend"] == "emulator"
    return data["requests"]


def test_messages_shows_the_5_minute_ttl_rewriting_after_a_break(run, body_file):
    first, after = _requests(run, "--body", body_file, "--boundary", "1", "--ttl", "5m", "--repeat-at", "330")
    guide = first["usage"]["cache_creation"]["ephemeral_5m_input_tokens"]
    assert guide > 4096 and first["usage"]["cache_read_input_tokens"] == 0
    assert after["usage"]["cache_creation"]["ephemeral_5m_input_tokens"] == guide
    assert after["cost"]["cache_write_5m"] == pytest.approx(guide * 1.25 / 1e6)
    assert "[0mabcdefghjk1234]" in after["text"]


def test_messages_with_1h_ttl_or_a_keepalive_reads_after_the_break(run, body_file):
    _, after = _requests(run, "--body", body_file, "--boundary", "1", "--ttl", "1h", "--repeat-at", "330")
    assert after["usage"]["cache_read_input_tokens"] > 4096
    first, ping, after = _requests(run, "--body", body_file, "--boundary", "1", "--ttl", "5m",
                                   "--ping-at", "240", "--repeat-at", "330")
    assert ping["label"] == "ping" and ping["usage"]["output_tokens"] == 0  # max_tokens 0
    assert after["usage"]["cache_read_input_tokens"] == first["usage"]["cache_creation_input_tokens"]


def test_messages_refuses_a_schedule_time_that_is_not_a_finite_number(run, body_file):
    for bad in ("nan", "inf", "-1"):
        result = run("messages", "--body", body_file, "--repeat-at", bad)
        assert result.exit_code == 1 and "finite number of seconds" in result.output, bad


def test_messages_without_cache_control_pays_full_input(run, body_file):
    (only,) = _requests(run, "--body", body_file, "--ttl", "none")
    assert only["usage"]["cache_creation_input_tokens"] == only["usage"]["cache_read_input_tokens"] == 0
    assert only["cost"]["input"] == pytest.approx(only["usage"]["input_tokens"] / 1e6)


def test_messages_prints_every_usage_field_and_the_backend(run, body_file):
    text = run("messages", "--body", body_file, "--boundary", "1").output
    for name in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
                 "cache_creation.ephemeral_5m_input_tokens", "cache_creation.ephemeral_1h_input_tokens", "cost: $"):
        assert name in text
    assert "backend: emulator" in text


def test_messages_shows_a_reply_quoting_terminal_escapes_inert(run, tmp_path):
    """`gitmem context --json` into `gitmem messages --body`: the body holds the team's memory, and a reply that
    quotes an OSC 52 in it would set the terminal's clipboard."""
    body = {**BODY, "system": [{"type": "text", "text": "The API port is 8000 \x1b]52;c;eA==\x07\u202e always."}],
            "messages": [{"role": "user", "content": "What is the API port?"}]}
    path = tmp_path / "body.json"
    path.write_text(json.dumps(body))
    text = run("messages", "--body", str(path)).output
    assert "8000 \\x1b]52;c;eA==\\x07\\u202e always" in text
    assert not any(c in text for c in "\x1b\x07\u202e")


def test_messages_reports_api_errors_in_one_line(run, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**BODY, "model": "claude-nope"}))
    result = run("messages", "--body", str(bad))
    assert result.exit_code == 1
    assert result.output.startswith("Error: 404 not_found_error: model: claude-nope")
    bad.write_text("{")
    assert "is not valid JSON" in run("messages", "--body", str(bad)).output
    bad.write_bytes(b'{"model": "caf\xe9"}')  # Latin-1, not UTF-8: one line, not a traceback
    latin = run("messages", "--body", str(bad))
    assert latin.exit_code == 1 and latin.output.startswith(f"Error: {bad} is not UTF-8")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def served(tmp_path):
    """`gitmem emulator serve --virtual-clock` as a real process on a free port."""
    import httpx2

    port = _free_port()
    proc = subprocess.Popen([*GITMEM, "emulator", "serve", "--port", str(port), "--virtual-clock"],
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            httpx2.get(f"{url}/_emulator/state")
            break
        except httpx2.TransportError:
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail(f"emulator did not start: {proc.stderr.read()}")
    yield url
    proc.send_signal(signal.SIGINT)
    proc.wait(10)


def test_serve_shares_one_cache_between_processes_via_anthropic_base_url(served, repo, body_file):
    import httpx2

    env = {"ANTHROPIC_BASE_URL": served}
    first = json.loads(gitmem(repo, "messages", "--body", body_file, "--boundary", "1", "--json", env=env).stdout)
    assert first["backend"] == "emulator"
    second = json.loads(gitmem(repo, "messages", "--body", body_file, "--boundary", "1", "--json", env=env).stdout)
    written = first["requests"][0]["usage"]["cache_creation_input_tokens"]
    assert written > 4096 and second["requests"][0]["usage"]["cache_read_input_tokens"] == written
    assert httpx2.post(f"{served}/_emulator/clock", json={"advance": 330}).json()["now"] == 330
    third = json.loads(gitmem(repo, "messages", "--body", body_file, "--boundary", "1", "--json", env=env).stdout)
    assert third["requests"][0]["usage"]["cache_creation_input_tokens"] == written


def test_messages_records_each_request_with_the_memory_commit_it_saw(run, repo, body_file):
    tip = json.loads(run("fact", "add", "Refunds go through the ledger", "--json").output)["commit"]
    data = json.loads(run("messages", "--body", body_file, "--boundary", "1", "--json").output)
    assert data["memory_commit"] == tip
    log = (repo / ".git" / "gitmem" / "requests.jsonl").read_text().splitlines()
    entry = json.loads(log[-1])
    assert entry["command"] == "messages" and entry["memory_commit"] == tip
    assert entry["usage"] == data["requests"][0]["usage"]


def test_bill_requests_bills_what_ask_and_messages_recorded_from_their_usage(run, repo, body_file):
    run("fact", "add", "Refunds go through the ledger")
    assert run("bill").exit_code == 1  # no demo run: the error points at --requests
    assert "--requests" in run("bill").output
    asked = [json.loads(run("ask", "How do refunds work?", "--json").output) for _ in range(2)]
    json.loads(run("messages", "--body", body_file, "--boundary", "1", "--json").output)
    traffic = json.loads(run("bill", "--requests", "--json").output)
    log = [json.loads(line) for line in (repo / ".git" / "gitmem" / "requests.jsonl").read_text().splitlines()]
    assert traffic["requests"] == len(log) >= 3 and traffic["failed"] == 0
    assert {s["session"] for s in traffic["sessions"]} == {"ask", "messages"}
    assert traffic["total_cost"] == pytest.approx(sum(e["cost"]["total"] for e in log))
    ask = next(s for s in traffic["sessions"] if s["session"] == "ask")
    assert ask["usage"]["output_tokens"] == sum(a["usage"]["output_tokens"] for a in asked)
    from gitmem.redact import RULES

    token = next(r for r in RULES if r.id == "github-pat").true_samples[0]
    run("ask", f"why does the deploy key {token} fail?")  # a secret pasted into a question is not kept
    kept = (repo / ".git" / "gitmem" / "requests.jsonl").read_text()
    assert token not in kept and "deploy key [REDACTED:github-pat] fail" in kept
    with open(repo / ".git" / "gitmem" / "requests.jsonl", "ab") as f:
        f.write(b'{"question": "caf\xc3')  # a line cut inside a character by a crash
    assert json.loads(run("bill", "--requests", "--json").output)["requests"] == traffic["requests"] + 1
    bad_svg = run("bill", "--svg", str(repo / "no-such-folder" / "x.svg"))
    assert bad_svg.exit_code == 2 and "--svg" in bad_svg.output and "Traceback" not in bad_svg.output


def record_breaks(repo, line, n=7):
    """What the router records: a line's requests 50 minutes apart, ``n`` times."""
    with (repo / ".git" / "gitmem" / "requests.jsonl").open("a") as f:
        for i in range(n):
            f.write(json.dumps({"command": "router", "kind": "request", "clock": "wall", "line": line,
                                "at": 1_000_000.0 + i * 3000}) + "\n")


def test_context_ttl_auto_chooses_from_the_breaks_recorded_on_the_routers_line_for_it(run, repo):
    (repo / "GUIDE.md").write_text(GUIDE)
    run("guide", "set", "GUIDE.md")
    run("fact", "add", "Refunds go through the ledger")
    cold = run("context", "--ttl", "auto", "--json")
    assert json.loads(cold.stdout)["ttl"] == "5m" and "cold start" in cold.stderr
    record_breaks(repo, "another-agent")  # another line's breaks are not this request's
    assert "cold start (0 breaks recorded)" in run("context", "--ttl", "auto", "--json").stderr
    record_breaks(repo, default_line(Store.open(str(repo)), "claude-haiku-4-5"))  # a request naming no line joins it
    warm = run("context", "--ttl", "auto", "--json")
    assert json.loads(warm.stdout)["ttl"] == "1h" and "recorded breaks" in warm.stderr


def test_context_ttl_auto_skips_a_request_line_torn_inside_a_character(run, repo):
    run("fact", "add", "Refunds go through the ledger")
    log = repo / ".git" / "gitmem" / "requests.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes(b'{"command": "router", "kind": "request", "question": "caf\xc3')
    result = run("context", "--ttl", "auto", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["ttl"] in ("5m", "1h", "none")


def test_ask_and_messages_help_name_both_variables_that_choose_the_api():
    """--backend auto goes to ANTHROPIC_BASE_URL when it is set, key or not (open_backend); ask's
    --help named only ANTHROPIC_API_KEY."""
    for command in ("ask", "messages"):
        text = " ".join(CliRunner().invoke(main, [command, "--help"]).output.split())
        assert "ANTHROPIC_API_KEY or ANTHROPIC_BASE_URL is set" in text, command


def test_ask_ttl_auto_chooses_as_context_does_and_says_which(run, repo):
    (repo / "GUIDE.md").write_text(GUIDE)
    run("guide", "set", "GUIDE.md")
    run("fact", "add", "Refunds go through the ledger")
    cold = run("ask", "--ttl", "auto", "--json", "How do refunds work?")
    assert cold.exit_code == 0 and json.loads(cold.stdout)["ttl"] == "5m" and "--ttl auto chose 5m" in cold.stderr
    log = repo / ".git" / "gitmem" / "requests.jsonl"
    record_breaks(repo, default_line(Store.open(str(repo)), "claude-haiku-4-5"))  # as in the context test
    warm = run("ask", "--ttl", "auto", "--json", "How do refunds work?")
    assert json.loads(warm.stdout)["ttl"] == "1h" and "recorded breaks" in warm.stderr
    assert json.loads(log.read_text().splitlines()[-1])["ttl"] == "1h"  # what the request log keeps of it
