"""The docs stay honest: the README's CLI table names real commands, every command is documented
and has a --help example, every test the docs name exists, and the Quickstart runs as written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import click

from conftest import ROOT, clone, conflicted, gitmem, make_origin, make_repo
from gitmem.cli import main

README = (ROOT / "README.md").read_text()
DOCS = {p.name: p.read_text() for p in sorted((ROOT / "docs").glob("*.md"))}


def commands(cmd: click.Command = main, path=()):
    """(path, command) for the group itself, every subgroup and every command."""
    yield path, cmd
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd)  # list_commands, not .commands: gitmem imports a command's module on demand
        for name in cmd.list_commands(ctx):
            yield from commands(cmd.get_command(ctx, name), path + (name,))


def test_every_command_in_the_readme_cli_table_exists():
    rows = re.findall(r"^\| `gitmem ([^`]*)`", README, re.M)
    assert len(rows) >= 10
    for row in rows:
        words = []
        for word in row.split():
            if not re.match(r"^[a-z][a-z-]*$", word):
                break
            words.append(word)
        cmd: click.Command = main
        for word in words:
            ctx = click.Context(cmd)
            assert isinstance(cmd, click.Group) and word in cmd.list_commands(ctx), f"README names `gitmem {row}`"
            cmd = cmd.get_command(ctx, word)
        assert not isinstance(cmd, click.Group), f"README's `gitmem {row}` stops at a group"


def test_every_command_appears_in_the_readme_or_the_docs():
    text = README + "".join(DOCS.values())
    missing = [" ".join(p) for p, cmd in commands() if p and not isinstance(cmd, click.Group)
               and not re.search(r"gitmem " + re.escape(" ".join(p)) + r"\b", text)]
    assert missing == []


def test_every_command_and_group_has_help_that_ends_with_an_example():
    missing = [" ".join(p) or "gitmem" for p, cmd in commands() if "Example: " not in (cmd.help or "")]
    assert missing == []
    for path, cmd in commands():
        example = (cmd.help or "").rsplit("Example: ", 1)[1].strip()
        assert example.startswith(("gitmem", "git ")), (path, example)


def test_no_help_text_runs_two_lines_into_one():
    """click rewraps a paragraph, so a line meant to stand alone (a second line of an example) lands inside the
    one before it behind a run of spaces (`... --policy auto &          ANTHROPIC_BASE_URL=...`); such a paragraph
    needs click's \\b marker."""
    runs = []
    for path, cmd in commands():
        ctx = click.Context(cmd, info_name=" ".join(("gitmem", *path)), terminal_width=200, max_content_width=200)
        description = cmd.get_help(ctx).split("\nOptions:", 1)[0]
        runs += [(" ".join(path), line.strip()) for line in description.splitlines()  # past a table's aligned first column
                 if re.search(r"\S {5,}\S", line.strip().split(" ", 1)[-1])]
    assert runs == []


def test_every_test_the_docs_name_exists():
    """docs/guarantees.md (and the README's copy of it, and any other page) name tests as
    `tests/x.py::test_y`, or `::test_y` after one: each must exist."""
    named = []
    for name, doc in [("README.md", README), *DOCS.items()]:
        current = None
        for m in re.finditer(r"`(tests/\w+\.py)?(?:::)?(test_\w+)?`", doc):
            current = m.group(1) or current
            if m.group(2):
                named.append((name, current, m.group(2)))
    assert len([n for n in named if n[0] == "guarantees.md"]) >= 20
    for doc, path, test in named:
        assert path and f"def {test}(" in (ROOT / path).read_text(), f"{doc} names {path}::{test}, which does not exist"


def quickstart() -> str:
    section = README.split("## Quickstart", 1)[1]
    return re.search(r"```sh\n(.*?)```", section, re.S).group(1)


def test_the_readme_quickstart_runs_as_written_in_a_new_repository(tmp_path):
    repo = make_repo(tmp_path / "your-repo")
    script = quickstart().replace("cd your-repo", f"cd {repo}")
    assert "gitmem init" in script
    shim = tmp_path / "bin" / "gitmem"  # `gitmem` on PATH, as the README's install puts it there
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m gitmem "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=str(tmp_path), capture_output=True,
                            text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    listed = [line for line in result.stdout.splitlines() if "Queue jobs in Postgres" in line]
    assert listed and "Use Redis for the job queue" in result.stdout
    assert Path(repo, ".git", "refs", "memory", "main").exists() or "refs/memory/main" in \
        subprocess.run(["git", "for-each-ref"], cwd=str(repo), capture_output=True, text=True).stdout


def test_the_readme_python_api_runs_as_written(tmp_path, monkeypatch):
    """Every line of the README's Python API block runs, in order, on a new repository (it once
    called a Store.doctor that had moved to gitmem.doctor, and retracted a memory it had superseded)."""
    section = README.split("## Python API", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(make_repo(tmp_path / "repo"))
    exec(compile(code, "README.md (Python API)", "exec"), {})


def test_a_user_running_mypy_on_the_readme_python_api_gets_gitmems_types(tmp_path):
    """py.typed promises types: ``from gitmem import Store`` must not be an Any (it was, through the package's
    lazy ``__getattr__``), so mypy catches a misuse, every top-level name has its own type, and a misspelt
    name is an error. gitmem is checked as a dependency is: its own errors are not the user's."""
    import gitmem

    section = README.split("## Python API", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    names = [n for n in gitmem.__all__ if n != "__version__"]
    script = tmp_path / "user.py"
    script.write_text("import gitmem\n" + code + 'wrong: int = store.get("x")\nfrom gitmem import Stor\n'
                      + "".join(f"reveal_type(gitmem.{n})\n" for n in names))
    result = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", "--no-error-summary",
                             "--cache-dir", str(tmp_path / "cache"), "--config-file", os.devnull, str(script)],
                            cwd=str(tmp_path), capture_output=True, text=True, timeout=300,
                            env={**os.environ, "MYPYPATH": str(ROOT)})
    lines = result.stdout.splitlines()
    errors = [line for line in lines if ": error: " in line]
    assert len(errors) == 2, result.stdout
    assert 'expression has type "Memory", variable has type "int"' in errors[0]
    assert '"Stor"' in errors[1]
    revealed = [line for line in lines if "Revealed type is" in line]
    assert len(revealed) == len(names) and not [line for line in revealed if '"Any"' in line], result.stdout


def test_every_command_with_json_output_names_its_shape_in_its_help():
    """--json's own help points at the JSON line of the command's help, so each command has one
    (status, resolve, guide show and others once had none, while --json said the README had it)."""
    missing = [" ".join(p) for p, cmd in commands()
               if any(param.name == "as_json" for param in cmd.params) and "JSON: " not in (cmd.help or "")]
    assert missing == []


def test_every_limit_option_is_also_n_as_the_readme_says():
    """The README: "`-n N` / `--limit N` means "at most N" on every command that lists" (resume had
    only --limit)."""
    only_long = [" ".join(p) for p, cmd in commands() for param in cmd.params
                 if isinstance(param, click.Option) and "--limit" in param.opts and "-n" not in param.opts]
    assert only_long == []
    assert "`-n N` / `--limit N`" in README


def test_the_readmes_branch_section_says_a_branch_created_again_sets_the_earlier_memory_aside():
    """Re-creating a branch name sets the earlier memory aside, kept in this clone and never sent by a plain
    `git push`: the README's section on branch memory said nothing of it, so a reader never knew where it went."""
    section = re.sub(r"\s+", " ", README.split("## Memory follows your branches", 1)[1].split("\n## ", 1)[0])
    for said in ("created again under a deleted one's name", "`wip.earlier-<tip>`", "kept in this clone",
                 "never pushed by a plain `git push`", "`refs/memory-aside/`", "`gitmem merge wip.earlier-<tip>`",
                 "`gitmem prune --yes` drops it once merged; see [docs/branches.md](docs/branches.md)"):
        assert said in section, said


def doc_invocations():
    """(doc, the words after `gitmem`) for every inline `gitmem ...` span and every `gitmem` command line
    in a shell or console block of the README and the docs (in a console block, only `$ ` lines: the
    rest is output)."""
    for name, doc in [("README.md", README), *DOCS.items()]:
        prose = re.sub(r"^```.*?^```", "", doc, flags=re.S | re.M)
        spans = [span.strip() for line in prose.splitlines() for _, span in re.findall(r"(`+)(.+?)\1", line)]
        yield from ((name, span[len("gitmem "):]) for span in spans if span.startswith("gitmem "))
        for lang, block in re.findall(r"^```(\S*)\n(.*?)^```", doc, re.S | re.M):
            for line in block.splitlines() if lang in ("sh", "console", "bash", "") else ():
                if lang == "console" and not line.startswith("$ "):
                    continue
                line = line.removeprefix("$ ").split("#", 1)[0]
                yield from ((name, m.group(1).strip()) for m in
                            re.finditer(r"(?:^|&& |; )(?:[A-Z_]+=\S+ )*gitmem ([^&;|]*)", line.strip()))


def resolve(row: str) -> tuple[click.Command, list[str]]:
    """The command a doc's `gitmem ...` names, and the words after it."""
    cmd: click.Command = main
    words = row.split()
    while words[:1] in (["-C"], ["--branch"]):  # global options and their values
        words = words[2:]
    while words and isinstance(cmd, click.Group) and words[0] in cmd.list_commands(click.Context(cmd)):
        cmd = cmd.get_command(click.Context(cmd), words.pop(0))
    return cmd, words


def test_every_command_the_docs_run_exists():
    """A `gitmem WORD` in a span or a shell block names a real command, down to the subcommand."""
    invocations = list(doc_invocations())
    assert len(invocations) >= 100
    for name, row in invocations:
        cmd, words = resolve(row)
        assert not (isinstance(cmd, click.Group) and words and re.fullmatch(r"[a-z][a-z-]*", words[0])), \
            f"{name}: `gitmem {row}` names no command"


def test_every_option_the_docs_give_a_command_is_a_visible_option_of_that_command():
    """Command tables, inline `gitmem ...` spans and the command lines of shell blocks in the README and
    the docs name real options, long or short (`gitmem doctor [--offline]` once named an option doctor
    had hidden, and no longer did what the row said)."""
    for name, row in doc_invocations():
        cmd, words = resolve(row)
        visible = {opt for p in cmd.params if isinstance(p, click.Option) and not p.hidden
                   for opt in (*p.opts, *p.secondary_opts)} | {"--help", "-h"}
        for option in set(re.findall(r"(?<![\w.-])--?[a-zA-Z][a-z-]*", " ".join(words))):
            assert option in visible, f"{name}: `gitmem {row}` names {option}"


def test_the_readme_names_every_promise_of_the_guarantees_table():
    """The README's Guarantees section lists docs/guarantees.md's promises by name (it lacked the two
    added last: the derived index, and files beside the code)."""
    promises = re.findall(r"^\| \*\*(.+?)\*\* \|", DOCS["guarantees.md"], re.M)
    assert len(promises) >= 20
    section = README.split("## Guarantees", 1)[1].split("What is *not* promised", 1)[0].lower()
    assert [p for p in promises if p.lower() not in section] == []


def braced(text: str, start: int) -> str:
    """The text inside the brackets that open at text[start], nested ones included."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"{": 1, "[": 1, "}": -1, "]": -1}.get(text[i], 0)
        if depth == 0:
            return text[start + 1:i]
    return text[start + 1:]


def shape_keys(body: str) -> dict[str, bool]:
    """The quoted keys at the top level of a documented object, each with whether it is required (no `?`)."""
    flat, depth = "", 0
    for ch in body:
        depth += {"{": 1, "[": 1}.get(ch, 0)
        flat += ch if depth == 0 else ""
        depth -= {"}": 1, "]": 1}.get(ch, 0)
    return {m.group(1): not m.group(2) for m in re.finditer(r'"(\w+)"(\?)?', flat)}


def check_shape(printed, body: str, paragraph: str, where: str) -> None:
    """Every key printed is documented and every required documented key is printed, at this level and in each
    object a key's documentation spells out (`"merged": [{"branch", ...}]`); an open shape (`{...}`, `{type: N}`)
    is not checked inside."""
    documented = shape_keys(body)
    missing = [k for k, required in documented.items() if required and k not in printed]
    assert missing == [], f"{where}: documented, not printed: {missing}"
    for key, value in printed.items():
        mentioned = re.search(r'"' + key + r'"\??(?::\s*)?', paragraph)
        assert key in documented or mentioned, f"{where}: prints {key!r}, which its help does not name"
        inner = re.search(r'"' + key + r'"\??: \[?\{', body)
        elements = [value] if isinstance(value, dict) else [v for v in value if isinstance(v, dict)][:1] \
            if isinstance(value, list) else []
        if inner and elements:
            sub = braced(body, inner.end() - 1)
            if "..." not in sub and shape_keys(sub):
                for element in elements:
                    check_shape(element, sub, paragraph, f"{where}.{key}")


#: Commands run in order on one repository and its origin, each with the words of its help that precede the
#: shape its --json prints (the help's first `JSON: ` unless another is named).
JSON_RUNS = [
    (("init",), "JSON: "),
    (("add", "decision", "Queue jobs in Postgres", "--because", "no new services"), "JSON: "),
    (("add", "rejection", "Use Redis for the job queue", "--because", "ops will not run it", "--path", "src/q.py"),
     "JSON: "),
    (("list",), "JSON: "),
    (("search", "redis queue"), "JSON: "),
    (("log",), "JSON: "),
    (("status",), "JSON: "),
    (("doctor",), "JSON: "),
    (("check", "move the job queue to Redis"), "JSON: "),
    (("checkpoint", "parser done / next: wire it"), "JSON: "),
    (("resume",), "JSON: "),
    (("context", "-q", "queue"), "JSON: "),
    (("ask", "how are jobs queued?"), "JSON: "),
    (("bill", "--requests"), "With --router"),
    (("models",), "JSON: "),
    (("export", "--format", "agents-md"), "JSON: "),
    (("guide", "show"), "JSON: "),
    (("hooks", "install"), "JSON: "),
    (("setup", "claude-code", "--write"), "JSON: "),
    (("setup", "claude-code", "--undo"), "with --undo: "),
    (("push",), "JSON: "),
    (("fetch",), "JSON: "),
    (("pull",), "JSON: "),
    (("sync",), "JSON: "),
    (("remote", "setup"), "JSON: "),
    (("branch",), "JSON: "),
    (("merge", "feature"), "JSON: "),
    (("conflicts",), "JSON: "),
    (("diff", "main..feature"), "JSON: "),
    (("prune",), "JSON: "),
    (("resolve", "{id}", "--ours"), "JSON: "),
    (("edit", "{id}", "--text", "Use Postgres 17"), "JSON: "),
    (("supersede", "{id}", "Use Postgres 18"), "JSON: "),
    (("messages", "--body", "body.json"), "JSON: "),
]


def test_the_json_each_command_prints_has_the_keys_its_help_documents(tmp_path):
    """A `JSON: {...}` line in a command's help names the keys its --json prints, no more and no fewer (ask printed
    "question", pull "late", and bill --requests a "title" no shape named)."""
    repo = clone(make_origin(tmp_path), tmp_path / "repo", "Ann")
    _, pending = conflicted(repo)
    (repo / "body.json").write_text('{"model": "claude-haiku-4-5", "max_tokens": 16, '
                                    '"messages": [{"role": "user", "content": "hi"}]}')
    for args, marker in JSON_RUNS:
        args = tuple(a.format(id=pending) for a in args)
        cmd, _ = resolve(" ".join(a for a in args if a[:1] != "-" or a in ("-q",)))
        help_text = " ".join((cmd.help or "").split())
        paragraph = help_text[help_text.index(marker):]
        body = braced(paragraph, paragraph.index("{"))
        result = gitmem(repo, *args, "--json", check=False)
        assert result.stdout.startswith("{"), (args, result.stderr)
        check_shape(json.loads(result.stdout), body, paragraph, " ".join(args))


def layer_rows() -> dict[str, list[str]]:
    """docs/architecture.md's layers table: each layer and the modules its second column names."""
    section = DOCS["architecture.md"].split("## The layers", 1)[1]
    rows = re.findall(r"^\| ([a-z ]+) \| (.*?) \| ", section, re.M)
    return {layer: [m.rstrip("/") for m in re.findall(r"`([a-z_]+/?)`", modules)] for layer, modules in rows
            if layer != "layer"}


def test_the_architecture_table_names_every_module_of_gitmem_and_no_other():
    """Each module and package of gitmem/ sits in one layer of docs/architecture.md's table, and each name there is
    one (errors and router were in none)."""
    package = ROOT / "gitmem"
    actual = {p.stem for p in package.glob("*.py") if p.stem not in ("__init__", "__main__")} | \
        {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    named = [m for modules in layer_rows().values() for m in modules]
    assert sorted(m for m in set(named) if named.count(m) > 1) == []
    assert sorted(actual - set(named)) == [] and sorted(set(named) - actual) == []


def test_the_architecture_tables_pure_core_is_the_one_the_import_test_guards():
    from test_architecture import PURE_CORE

    assert sorted(layer_rows()["pure core"]) == sorted(PURE_CORE)


def test_every_file_of_this_checkout_the_docs_name_exists():
    """A `gitmem/...`, `tests/...` or `bench/...` path in the README or a docs page is a file here (what
    `.git/gitmem/` holds is another place)."""
    named = [(name, m.group(1)) for name, doc in [("README.md", README), *DOCS.items()]
             for m in re.finditer(r"(?<![\w./-])((?:gitmem|tests|bench)/[\w./-]*\w)", doc)]
    assert len(named) >= 30
    assert [(doc, path) for doc, path in named if not (ROOT / path).exists()] == []


def test_every_gitmem_name_the_docs_give_resolves():
    """`gitmem.recall.AGENT_BUDGET`, `gitmem.memory_tool.sdk_tool()`: a dotted name whose first part is one of
    gitmem's modules is an attribute there, and a snake_case one names a module (git config keys such as
    `gitmem.prePush` are neither)."""
    import importlib

    package = ROOT / "gitmem"
    modules = {p.stem for p in package.glob("*.py")} | {p.name for p in package.iterdir() if p.is_dir()}
    wrong, checked = [], 0
    for name, doc in [("README.md", README), *DOCS.items()]:
        for dotted in re.findall(r"`(gitmem(?:\.\w+)+)", doc):
            parts = dotted.split(".")
            if parts[1] not in modules:
                if "_" in parts[1]:
                    wrong.append((name, dotted))
                continue
            checked += 1
            cut = len(parts)
            while cut > 1:
                try:
                    obj = importlib.import_module(".".join(parts[:cut]))
                    break
                except ImportError:
                    cut -= 1
            for attr in parts[cut:]:
                if not hasattr(obj, attr):
                    wrong.append((name, dotted))
                    break
                obj = getattr(obj, attr)
    assert checked >= 20
    assert wrong == []
