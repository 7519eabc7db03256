"""Tool setup: the exact configuration each agent tool reads to start `gitmem mcp`.

- Claude Code: project scope is ``.mcp.json`` at the repository root
  (``{"mcpServers": {name: {"type": "stdio", "command", "args"}}}``), which is
  what ``claude mcp add --scope project gitmem -- gitmem mcp`` writes.
- Cursor: project scope is ``.cursor/mcp.json`` with the same ``mcpServers`` shape.
- Windsurf: Cascade reads only the user file ``~/.codeium/windsurf/mcp_config.json``
  (same shape); it starts servers outside the project, so the entry names the
  repository with ``--repo``.
- CI: a GitHub Actions job that fetches the memory refs, runs an agent with
  the MCP config, and pushes the memory back.

Writing merges the ``gitmem`` entry into an existing file and keeps every
other server and key, and the file's own layout (:mod:`gitmem.jsontext`: only the lines of gitmem's entries
change, and a byte order mark it starts with stays); running it twice changes nothing. A file with comments
(JSONC) is refused: they would be lost.

For Claude Code, setup also merges gitmem's hooks (``gitmem hook claude-code
EVENT``, see :mod:`gitmem.claude_code`) into ``.claude/settings.json``, keeping
every other key and hook; ``undo`` takes out only what setup put in (a file still as setup wrote it
comes back byte for byte as it was before).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Union

from .errors import GitmemError
from .files import inside, replace_file, writable
from .jsontext import BOM, edit as edit_json, has_comments, trailing_comma

if TYPE_CHECKING:
    from .store import Store

TOOLS = ("claude-code", "cursor", "windsurf", "ci")
#: gitmem's distribution name on the package index (import name and command stay ``gitmem``):
#: ``gitmem`` there is another project, so nothing gitmem writes may ``pip install gitmem``.
DISTRIBUTION = "gitmem-memory"
SERVER_NAME = "gitmem"
CI_PATH = ".github/workflows/gitmem-agent.yml"


SETTINGS_PATH = os.path.join(".claude", "settings.json")
#: Claude Code hook events gitmem answers, with the matcher (tool names) and timeout (seconds).
CLAUDE_HOOKS = (
    ("SessionStart", None, 10),
    ("UserPromptSubmit", None, 10),
    ("PostToolUse", "Read|Edit|Write|MultiEdit|Bash", 10),
    ("PreCompact", None, 20),
    ("SessionEnd", None, 20),
)
_HOOK_MARK = " hook claude-code "


@dataclass(frozen=True)
class Setup:
    tool: str
    path: Optional[str]          # the file the tool reads (None: nothing to write)
    content: str                 # the file's full new content (or the snippet to paste)
    commands: List[str]          # equivalent shell commands, when the tool has them
    changed: bool = False
    notes: str = ""
    delete: bool = False         # undo left nothing in the file: remove it
    entry: Optional[Dict[str, Any]] = None  # the mcpServers.gitmem entry written (None: taken out, or not a config)
    record: Optional[str] = None  # where setup keeps the entries it wrote (see :func:`_written`)
    undo: bool = False           # an undo: apply forgets what setup wrote to the file
    within: Optional[str] = None  # the repository a project file must lead into (None: a user's own file)

    def to_dict(self) -> Dict[str, Any]:
        return {"tool": self.tool, "path": self.path, "changed": self.changed, "commands": self.commands,
                "content": self.content, "notes": self.notes, **({"delete": True} if self.delete else {})}


Command = Union[str, Sequence[str]]


def installed_command() -> List[str]:
    """How another program starts this very gitmem: the absolute path of the ``gitmem`` script
    installed with this interpreter (its ``#!`` line names it), else this python running gitmem's CLI with the
    current folder off ``sys.path`` (``-m gitmem`` would put it first: a repository's ``queue.py`` would shadow the
    standard library's). A bare ``gitmem`` is only right when that install is on the PATH the tool inherits."""
    import sysconfig

    name = "gitmem.exe" if os.name == "nt" else "gitmem"
    folders = [os.path.dirname(sys.executable), sysconfig.get_path("scripts")]
    try:
        folders.append(sysconfig.get_path("scripts", f"{os.name}_user"))
    except KeyError:
        pass
    here = os.path.dirname(os.path.abspath(sys.executable))
    in_venv = sys.prefix != sys.base_prefix
    for folder in dict.fromkeys(f for f in folders if f):
        path = os.path.join(folder, name)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            continue
        named = _script_python(path)
        if os.name == "nt" or (named and (os.path.dirname(named) == here or (  # a Windows launcher has no #! line
                not in_venv and os.path.realpath(named) == os.path.realpath(sys.executable)))):
            return [os.path.abspath(path)]
    return [os.path.abspath(sys.executable), "-c", "import sys; del sys.path[0]; from gitmem.cli import main; "
            "main(prog_name='gitmem')"]


def _script_python(path: str) -> Optional[str]:
    """The interpreter a console script's ``#!`` line names (absolute, not resolved), or None."""
    try:
        with open(path, "rb") as f:
            first = f.readline(512).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    parts = first[2:].split()
    return os.path.abspath(parts[0]) if parts else None


def command_parts(command: Optional[Command]) -> List[str]:
    """``--command`` as argv: a string is split as a shell would (``uvx gitmem``); None is
    :func:`installed_command`."""
    if command is None:
        return installed_command()
    parts = shlex.split(command) if isinstance(command, str) else list(command)
    if not parts:
        raise GitmemError("--command is empty")
    return parts


def server_entry(tool: str, repo_root: Optional[str] = None, command: Optional[Command] = None) -> Dict[str, Any]:
    """The ``mcpServers`` entry for ``tool``; Claude Code spells out the stdio transport."""
    program, *before = command_parts(command)
    args = before + ["mcp"] + (["--repo", repo_root] if repo_root else [])
    entry: Dict[str, Any] = {"command": program, "args": args}
    if tool == "claude-code":
        entry = {"type": "stdio", **entry}
    return entry


def _json_object(existing: Optional[str], path: str, key: str,
                 by_hand: str = "add gitmem's entry by hand (`gitmem setup` without --write prints it)"
                 ) -> Dict[str, Any]:
    """``existing`` read as a JSON object whose ``key`` is an object; ``by_hand``: what to do instead, were it a
    file with comments."""
    text = (existing or "").removeprefix(BOM)  # an editor's mark, not JSON: the edit keeps it
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError as e:
        if has_comments(text):
            raise GitmemError(f"{path} has comments (JSONC), which setup would drop: {by_hand}, or take the "
                              "comments out") from None
        line = trailing_comma(text, e) if isinstance(e, json.JSONDecodeError) else None
        if line is not None:
            raise GitmemError(f"{path} has a trailing comma on line {line} (a comma before a closing bracket), which "
                              "JSON does not allow though JSONC and many editors do: take it out, then run setup "
                              "again") from None
        raise GitmemError(f"{path} is not valid JSON ({e}); fix it or move it aside first") from None
    except RecursionError:
        raise GitmemError(f"{path} is nested too deeply to read; fix it or move it aside first") from None
    if not isinstance(data, dict) or not isinstance(data.get(key, {}), dict):
        raise GitmemError(f"{path}: expected a JSON object whose {key!r} is an object")
    return data


#: The record's key for the files setup wrote: path -> {"before": its text before setup, "after": what setup wrote}.
FILES = "files"


def _record_path(store: Store) -> str:
    return os.path.join(store.common_dir, "gitmem", "agent-setup.json")


def _record(record: Optional[str]) -> Dict[str, Any]:
    """The entries setup wrote: config file path -> its ``mcpServers.gitmem`` entry, and under :data:`FILES` the
    files' texts (none or unreadable: {})."""
    try:
        with open(record or "", encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and isinstance(data.get(FILES, {}), dict) else {}


def _restorable(record: Optional[str], path: str, existing: str) -> Tuple[bool, Optional[str]]:
    """Whether ``path`` still holds exactly what setup last wrote, and then the text it had before setup's first
    write (None: there was no file). Undo gives that back byte for byte, in layouts json cannot write."""
    kept = _record(record).get(FILES, {}).get(os.path.abspath(path))
    if isinstance(kept, dict) and kept.get("after") == existing:
        return True, kept.get("before")
    return False, None


def _written(record: Optional[str], path: str) -> Any:
    """The ``mcpServers.gitmem`` entry setup last wrote to ``path`` (from its record), or None: an entry of that
    name that is not it is a person's own, which setup neither replaces nor takes out."""
    return _record(record).get(os.path.abspath(path))


def _written_by_setup(found: Any, entry: Dict[str, Any]) -> bool:
    """Whether ``found`` is an entry setup writes, for another ``--command`` (a teammate's, committed with the
    file): the same keys, and gitmem's ``mcp`` command (with this entry's ``--repo``, if any) at the end."""
    if not isinstance(found, dict) or set(found) != set(entry) or found.get("type") != entry.get("type"):
        return False
    program, args = found.get("command"), found.get("args")
    tail = entry["args"][entry["args"].index("mcp"):]
    return isinstance(program, str) and isinstance(args, list) and args[-len(tail):] == tail \
        and "gitmem" in " ".join([os.path.basename(program), *map(str, args[:-len(tail)])])


def _other_repository(found: Any, entry: Dict[str, Any]) -> Optional[str]:
    """The repository ``found`` serves when it is the entry setup writes into a user's own file (``mcp --repo
    ROOT``) for another repository than ``entry``'s: a second repository's setup, not a person's entry."""
    args = found.get("args") if isinstance(found, dict) else None
    if "--repo" not in entry["args"] or not isinstance(args, list) or not args or args[-1] == entry["args"][-1]:
        return None
    return str(args[-1]) if _written_by_setup(found, {**entry, "args": [*entry["args"][:-1], args[-1]]}) else None


def merged_config(existing: Optional[str], entry: Dict[str, Any], path: str, written: Any = None,
                  named: bool = False) -> str:
    """``existing`` JSON with ``mcpServers.gitmem`` set to ``entry``, other keys untouched; an entry of that
    name that setup did not write (``written``: what it last wrote there) is the user's, and is refused,
    unless setup writes ones like it: a teammate's (``--command gitmem``, committed). Setup's own or a
    teammate's serves as it is, as the hooks keep their command (:func:`merged_settings`), unless a command
    was ``named``: then it is replaced."""
    data = _json_object(existing, path, "mcpServers")
    servers = data.setdefault("mcpServers", {})
    mine = servers.get(SERVER_NAME)
    if mine is not None and mine != entry:
        other = _other_repository(mine, entry)
        if other is not None:
            raise GitmemError(f"{path}: mcpServers.{SERVER_NAME} serves the repository {other} already (a user "
                              "file holds one gitmem entry, for one repository): left as it is; "
                              f"`gitmem -C {shlex.quote(other)} setup windsurf --undo` takes it out")
        if mine != written and not _written_by_setup(mine, entry):
            raise GitmemError(f"{path}: mcpServers.{SERVER_NAME} is set already, not by setup "
                              f"(command {str(mine.get('command') if isinstance(mine, dict) else mine)[:60]!r}): "
                              "left as it is; take it out to let setup write its own")
        if not named:
            return existing or ""
    servers[SERVER_NAME] = entry
    return _edited(existing, data, path)


def _edited(existing: Optional[str], data: Dict[str, Any], path: str) -> str:
    """``data`` written into ``existing`` in the file's own layout (:func:`gitmem.jsontext.edit`)."""
    try:
        return edit_json(existing, data)
    except RecursionError:  # json reads a little deeper than the edit can follow
        raise GitmemError(f"{path} is nested too deeply to edit; fix it or move it aside first") from None


def hook_command(command: Optional[Command], event: str) -> str:
    """The shell command Claude Code runs for ``event``: the same gitmem the MCP config starts."""
    return " ".join(shlex.quote(p) for p in command_parts(command)) + f"{_HOOK_MARK}{event}"


def _is_gitmem_hook(hook: Any) -> bool:
    return isinstance(hook, dict) and _HOOK_MARK in str(hook.get("command", ""))


def _without_gitmem_hooks(groups: Any, path: str, event: str) -> List[Any]:
    """An event's matcher groups with gitmem's hook entries taken out (groups left empty go)."""
    if not isinstance(groups, list):
        raise GitmemError(f"{path}: hooks.{event} should be a list of matcher groups")
    out = []
    for group in groups:
        hooks = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(hooks, list) or not any(_is_gitmem_hook(h) for h in hooks):
            out.append(group)
            continue
        kept = [h for h in hooks if not _is_gitmem_hook(h)]
        if kept:
            out.append({**group, "hooks": kept})
    return out


def _hooks_command(hooks: Dict[str, Any]) -> Optional[str]:
    """The command gitmem's hooks in these settings run (what comes before `` hook claude-code ``), if any."""
    for groups in hooks.values():
        for group in groups if isinstance(groups, list) else ():
            for hook in (group.get("hooks") if isinstance(group, dict) else None) or ():
                if _is_gitmem_hook(hook) and isinstance(hook.get("command"), str):
                    return hook["command"][:hook["command"].index(_HOOK_MARK)]
    return None


def merged_settings(existing: Optional[str], command: Optional[Command], path: str) -> str:
    """``existing`` Claude Code settings with gitmem's hooks in (each event's own group, last),
    every other key, event, group and hook untouched; the same input gives the same output.

    Without a ``command``, hooks gitmem already has there keep the command they run: settings a team
    committed with ``--command gitmem`` are not rewritten with this machine's path to gitmem."""
    data = _json_object(existing, path, "hooks")
    hooks = data.setdefault("hooks", {})
    if command is None:
        command = _hooks_command(hooks)
    for event, matcher, timeout in CLAUDE_HOOKS:
        group: Dict[str, Any] = {"matcher": matcher} if matcher else {}
        group["hooks"] = [{"type": "command", "command": hook_command(command, event), "timeout": timeout}]
        hooks[event] = _without_gitmem_hooks(hooks.get(event, []), path, event) + [group]
    return _edited(existing, data, path)


def unmerged(existing: Optional[str], path: str, key: str, written: Any = None) -> Optional[str]:
    """``existing`` with what setup added taken out (``key`` is ``hooks`` or ``mcpServers``: its entry only if
    it is still the one setup wrote, ``written``); None when nothing else is left in the file."""
    data = _json_object(existing, path, key, f"take gitmem's {'hooks' if key == 'hooks' else 'entry'} out by hand")
    removed = False
    if key == "hooks":
        hooks = data.get("hooks", {})
        for event in list(hooks):
            if isinstance(hooks[event], list):
                kept = _without_gitmem_hooks(hooks[event], path, event)
                if kept != hooks[event]:
                    removed, hooks[event] = True, kept
                    if not kept:
                        del hooks[event]
    elif written is not None and data.get(key, {}).get(SERVER_NAME) == written:  # a person's own entry stays
        del data[key][SERVER_NAME]
        removed = True
    if not removed:
        return existing  # nothing of setup's in it: the file stays as it is, byte for byte
    if key in data and not data[key]:
        del data[key]
    return _edited(existing, data, path) if data else None


def ci_workflow(branch: str = "main") -> str:
    """A GitHub Actions job: fetch memory, run an agent that uses it, push what it learned.
    It installs gitmem by its own distribution name, pinned to the version that wrote it."""
    from . import __version__

    return f"""\
# Generated by `gitmem setup ci`. Runs an agent with the repository's memory and
# pushes the memory it writes back to refs/memory/*. Replace the agent step.
name: gitmem agent
on:
  workflow_dispatch:
    inputs:
      task:
        description: What the agent should do
        required: true
permissions:
  contents: write
jobs:
  agent:
    runs-on: ubuntu-latest
    env:
      GITMEM_SOURCE: ci
      GITMEM_AUTHOR_KIND: agent
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0
      - uses: actions/setup-python@v5
        with:
          python-version: "3.12"  # gitmem needs Python >= 3.10
      # gitmem's distribution is {DISTRIBUTION} (the `gitmem` package on PyPI is another project)
      - run: pip install "{DISTRIBUTION}=={__version__}"
      - name: Fetch memory
        run: |
          git config user.name "gitmem-ci"
          git config user.email "gitmem-ci@users.noreply.github.com"
          gitmem pull origin
          gitmem export --format agents-md --write
      - name: Run the agent
        env:
          ANTHROPIC_API_KEY: ${{{{ secrets.ANTHROPIC_API_KEY }}}}
          TASK: ${{{{ inputs.task }}}}  # through the environment: pasted into the script, a quote or $(...) would run
        run: |
          npm install -g @anthropic-ai/claude-code
          claude -p "$TASK" --mcp-config .mcp.json --allowedTools "mcp__gitmem"
      - name: Push memory
        run: gitmem push origin --branch {branch}
"""


def plan(store: Store, tool: str, *, home: Optional[str] = None, command: Optional[Command] = None) -> Setup:
    """What ``gitmem setup <tool>`` would write (nothing is written)."""
    if tool not in TOOLS:
        raise GitmemError(f"unknown tool {tool!r} (valid: {', '.join(TOOLS)})")
    root = _root(store)
    if tool == "ci":
        path = os.path.join(root, CI_PATH)
        existing = _read(path, root)
        content = existing if existing is not None else ci_workflow(store.branch)
        return Setup(tool, path, content, ["gitmem setup claude-code --write --command gitmem  # the agent step "
                                           "reads .mcp.json; CI has gitmem on PATH"],
                     existing is None, "" if existing is None else "an existing workflow file is left as it is",
                     within=root)
    path, entry, notes = _server_config(root, tool, home, command)
    within = _project(path, root)
    existing = _read(path, within)
    record = _record_path(store)
    content = merged_config(existing, entry, path, _written(record, path), named=command is not None)
    # the record holds the entry the file has now (it may be one kept as it was), so undo knows it as setup's
    entry = _json_object(content, path, "mcpServers")["mcpServers"][SERVER_NAME]
    program = str(entry.get("command", "")) if isinstance(entry, dict) else ""
    if tool != "windsurf" and not os.path.isabs(program):
        notes = "project file: commit it, so every clone's sessions start gitmem"
    if program and shutil.which(program) is None:  # the tool would fail to start it, and say so only in its logs
        notes += (f"; {program!r} is not on this PATH, so {tool} cannot start it here"
                  + (" (neither the MCP server nor the hooks)" if tool == "claude-code" else "")
                  + ": put gitmem on the PATH or pass --command with its full path")
    commands = []
    if tool == "claude-code":  # the entry the file holds, which may be one kept as it was
        argv = " ".join(shlex.quote(str(p)) for p in [entry["command"], *entry["args"]])
        commands = [f"claude mcp add --scope project {SERVER_NAME} -- {argv}"]
    return Setup(tool, path, content, commands, content != existing, notes, entry=entry, record=record,
                 within=within)


def _server_config(root: str, tool: str, home: Optional[str], command: Optional[Command]
                   ) -> Tuple[str, Dict[str, Any], str]:
    """The file ``tool`` reads its MCP servers from, the gitmem entry setup writes there, and a note."""
    if tool == "windsurf":
        base = home or os.path.expanduser("~")
        return (os.path.join(base, ".codeium", "windsurf", "mcp_config.json"), server_entry(tool, root, command),
                "user-level file: one gitmem entry points at one repository (--repo)")
    return (os.path.join(root, ".mcp.json" if tool == "claude-code" else os.path.join(".cursor", "mcp.json")),
            server_entry(tool, None, command),
            "project file; it names this machine's gitmem by absolute path: before committing it for a team,"
            " write it with --command gitmem if gitmem is on everyone's PATH")


def hooks_plan(store: Store, command: Optional[Command] = None) -> Setup:
    """What ``gitmem setup claude-code`` merges into ``.claude/settings.json`` (nothing is written)."""
    root = _root(store)
    path = os.path.join(root, SETTINGS_PATH)
    existing = _read(path, root)
    content = merged_settings(existing, command, path)
    return Setup("claude-code", path, content, [], content != existing,
                 "project settings: commit them so every session loads the team's memory", record=_record_path(store),
                 within=root)


def undo(store: Store, tool: str, *, home: Optional[str] = None) -> List[Setup]:
    """Take out what ``setup <tool> --write`` put in (the gitmem server entry, and Claude Code's
    hooks), keeping everything else; a file left with nothing in it is removed."""
    if tool == "ci":
        raise GitmemError("setup ci writes a workflow file of its own: delete .github/workflows/gitmem-agent.yml")
    if tool not in TOOLS:
        raise GitmemError(f"unknown tool {tool!r} (valid: {', '.join(TOOLS)})")
    config_path, entry, _ = _server_config(_root(store), tool, home, None)
    record = _record_path(store)
    targets = [(config_path, "mcpServers")]
    if tool == "claude-code":
        targets.append((os.path.join(_root(store), SETTINGS_PATH), "hooks"))
    out = []
    for path, key in targets:
        within = _project(path, _root(store))
        existing = _read(path, within)
        if existing is None:
            continue
        restorable, content = _restorable(record, path, existing)
        if not restorable:
            ours = (_written(record, path) or entry) if key == "mcpServers" else None  # (or what it writes today)
            content = unmerged(existing, path, key, ours)
        out.append(Setup(tool, path, content or "", [], content != existing, delete=content is None,
                         record=record, within=within, undo=True))
    return out


def _root(store: Store) -> str:
    root = store.repo.workdir
    if not root:
        raise GitmemError("setup needs a working tree (this repository is bare)")
    return os.path.abspath(root).rstrip(os.sep)


def apply(*setups: Setup) -> None:
    """Write the planned files (or remove those an undo left empty) as one change, all or nothing.

    The record of what setup wrote (which server entry, each file's text before and after; an undo forgets
    both) goes first: a record gitmem cannot keep would leave files ``--undo`` cannot restore, so it stops
    the write before any file changes. A file that then fails puts back the files before it and the record."""
    for setup in setups:
        if setup.path and setup.within:
            inside(setup.path, setup.within)  # as when planned
        if setup.path and (setup.changed or setup.delete):
            writable(setup.path, setup.within)  # before the record: a refused file leaves nothing half done
    written = [s for s in setups if s.path]
    befores = [_read(s.path or "", s.within) for s in written]
    record_path = next((s.record for s in written if s.record), None)
    old_record = None
    if record_path:
        record = _record(record_path)
        for setup, before in zip(written, befores):
            _remember(record, setup, before)
        try:
            with contextlib.suppress(FileNotFoundError), open(record_path, encoding="utf-8", newline="") as f:
                old_record = f.read()  # to put back, were a file to fail
            replace_file(record_path, json.dumps(record, indent=2, sort_keys=True) + "\n")
        except (OSError, ValueError) as e:
            raise GitmemError(f"cannot write setup's undo record {record_path} "
                              f"({getattr(e, 'strerror', None) or e}): nothing was written; make that path a "
                              "writable file (or move what is there aside) and run setup again") from None
    done: List[Tuple[str, Optional[str], Optional[str]]] = [(record_path, old_record, None)] if record_path else []
    try:
        for setup, before in zip(written, befores):
            if setup.delete or setup.changed:
                done.append((setup.path or "", before, setup.within))
                _write(setup.path or "", None if setup.delete else setup.content, setup.within)
    except BaseException:
        for path, before, within in reversed(done):
            with contextlib.suppress(OSError):  # as much as can be put back; the first error is the one to see
                _write(path, before, within)
        raise


def _remember(record: Dict[str, Any], setup: Setup, before: Optional[str]) -> None:
    """Put in ``record`` what ``setup`` writes over ``before`` (the file's text now); an undo forgets it."""
    key = os.path.abspath(setup.path or "")
    files = record.setdefault(FILES, {})
    if setup.undo:
        record.pop(key, None)
        files.pop(key, None)
    elif setup.changed:
        kept = files.get(key)  # setup wrote it before and no one changed it since: the text before that stays
        first = kept["before"] if isinstance(kept, dict) and kept.get("after") == before else before
        files[key] = {"before": first, "after": setup.content}
    if setup.entry is not None:
        record[key] = setup.entry


def _write(path: str, content: Optional[str], within: Optional[str]) -> None:
    """Make ``path`` hold ``content``; None removes it, and a folder that leaves empty."""
    if content is not None:
        replace_file(path, content, within=within)
    elif os.path.islink(path):  # the file a link names may be another's: emptied, not removed
        replace_file(path, _edited(_read(path), {}, path), within=within)
    elif os.path.lexists(path):
        os.remove(path)
        try:
            os.rmdir(os.path.dirname(path))  # a folder left empty (.claude/, .cursor/): as before the write
        except OSError:
            pass  # not empty (the repository's root, a folder with other files): it stays


def _project(path: str, root: str) -> Optional[str]:
    """The repository a file setup reads and writes must lead into, if it is one of the repository's."""
    return root if os.path.commonpath([os.path.abspath(path), os.path.abspath(root)]) == os.path.abspath(root) else None


def _read(path: str, within: Optional[str] = None) -> Optional[str]:
    """The file's text (None: there is none), read only if it leads into ``within`` when that is given."""
    if within is not None:
        inside(path, within)
    try:
        with open(path, encoding="utf-8", newline="") as f:  # its line ends as they are
            return f.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise GitmemError(f"cannot read {path}: {e}") from None
