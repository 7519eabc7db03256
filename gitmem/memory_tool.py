"""The client side of Anthropic's memory tool (``memory_20250818``), backed by the store.

Claude calls ``view``, ``create``, ``str_replace``, ``insert``, ``delete`` and
``rename`` on files under ``/memories``; the application executes them. Here
each file is one memory on the branch's memory ref, so what Claude writes
natively lands as typed, redacted, audited commits:

- the file's path is the memory's title, and the memory carries the tag
  ``memory-tool``;
- the first directory names the type: ``/memories/decisions/...`` is a
  decision, likewise conventions, facts, actions, notes, and rejections (whose
  text must hold a ``because:`` or ``reason:`` line); anything else is a note;
- edits are edits of the memory, ``delete`` retracts (history keeps it),
  ``rename`` changes the title (or, across types, retracts and re-adds);
- paths outside ``/memories`` (``..``, ``/memories2``, backslashes, NUL) are
  refused before the store is touched.

Results and error texts follow the SDK's reference file-system backend, so
Claude sees the same answers it was trained on.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from .errors import GitmemError
from .model import MAX_TITLE_CHARS, Author, Memory

if TYPE_CHECKING:
    from .store import Store

ROOT = "/memories"
TAG = "memory-tool"
_DIR_TYPES = {
    "decision": "decision", "decisions": "decision", "convention": "convention", "conventions": "convention",
    "fact": "fact", "facts": "fact", "action": "action", "actions": "action", "note": "note", "notes": "note",
    "rejection": "rejection", "rejections": "rejection", "rejected": "rejection",
}
_REASON = re.compile(r"^\s*(?:because|reason)\s*:\s*(.+)$", re.I | re.M)
_NUMBER_WIDTH = 6


def _kind_of(value: Any, hint: Any) -> Optional[str]:
    """None when ``value`` fits ``hint`` (str, int, List[int], Optional[...]); else what was expected."""
    import typing

    args = typing.get_args(hint)
    if typing.get_origin(hint) is typing.Union:
        if value is None and type(None) in args:
            return None
        real = [a for a in args if a is not type(None)]
        return _kind_of(value, real[0]) if len(real) == 1 else None
    if hint is str:
        return None if isinstance(value, str) else "text"
    if hint is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else "an integer"
    if typing.get_origin(hint) is list:
        ok = isinstance(value, list) and all(_kind_of(v, args[0]) is None for v in value)
        return None if ok else "a list of integers" if args and args[0] is int else "a list"
    return None


def _check_types(name: str, handler: Callable[..., str], args: Dict[str, Any]) -> None:
    """A clear error for a wrongly typed field (``"path": 5``), before the handler runs."""
    import typing

    hints = typing.get_type_hints(handler)
    for key, value in args.items():
        if key in hints:
            expected = _kind_of(value, hints[key])
            if expected is not None:
                raise MemoryToolError(f"invalid arguments for {name}: {key} must be {expected}, "
                                      f"got {type(value).__name__}")


class MemoryToolError(GitmemError):
    """A command the memory tool refuses; the message goes back to Claude as the tool result error."""


def check_path(path: Any) -> str:
    """The normalised ``/memories[/...]`` path, or :class:`MemoryToolError` for anything that could escape."""
    if not isinstance(path, str) or not path:
        raise MemoryToolError("Path must be a non-empty string starting with /memories")
    if "\x00" in path or "\\" in path or "\n" in path:
        raise MemoryToolError(f"Path {path!r} contains characters that are not allowed")
    if path != ROOT and not path.startswith(ROOT + "/"):
        raise MemoryToolError(f"Path must start with /memories, got: {path}")
    parts = [p for p in path[len(ROOT):].split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise MemoryToolError(f"Path {path} would escape /memories directory")
    out = "/".join([ROOT] + parts)
    if len(out) > MAX_TITLE_CHARS:
        raise MemoryToolError(f"Path {path[:60]}... is longer than {MAX_TITLE_CHARS} characters")
    return out


def type_for(path: str) -> str:
    parts = path[len(ROOT) + 1:].split("/")
    return _DIR_TYPES.get(parts[0].lower(), "note") if len(parts) > 1 else "note"


def _reason(type_: str, text: str, path: str) -> Optional[str]:
    if type_ != "rejection":
        return None
    m = _REASON.search(text)
    if not m:
        raise MemoryToolError(f"{path} is a rejection: add a line 'because: <why it was turned down>'")
    return m.group(1).strip()


def _size(n: int) -> str:
    for unit in ("B", "K", "M"):
        if n < 1024 or unit == "M":
            return f"{n}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n}M"


def _numbered(lines: List[str], start: int = 1) -> str:
    return "\n".join(f"{str(i + start).rjust(_NUMBER_WIDTH)}\t{line}" for i, line in enumerate(lines))


class MemoryTool:
    """Executes memory-tool commands against the memory of the repository at ``path``.

    The store is re-opened per command, so it follows branch switches.

    Example::

        tool = MemoryTool(".")
        tool.execute({"command": "create", "path": "/memories/facts/ports.md", "file_text": "API on 8000"})
    """

    def __init__(self, path: str = ".", branch: Optional[str] = None, *, source: str = "memory-tool",
                 author: Optional[Author] = None):
        self.path = path
        self.branch = branch
        self.source = source
        self._author = author

    def store(self):
        from .store import Store

        return Store.open(self.path, self.branch)

    def author(self, store: Store) -> Author:
        if self._author is not None:
            return self._author
        from .repo import default_author

        base = default_author(store.repo)
        return Author(base.name, base.email, "agent")

    # --- reading the /memories view of the store ---------------------------------

    def files(self, store: Store) -> Dict[str, Memory]:
        """Active memory-tool memories by file path."""
        return {m.title: m for m in store.list(tag=TAG) if m.title}

    def _file(self, store: Store, path: str) -> Memory:
        m = self.files(store).get(path)
        if m is None:
            raise MemoryToolError(f"The path {path} does not exist. Please provide a valid path.")
        return m

    def _is_dir(self, files: Dict[str, Memory], path: str) -> bool:
        return path == ROOT or any(p.startswith(path + "/") for p in files)

    # --- commands --------------------------------------------------------------

    def execute(self, command: Dict[str, Any]) -> str:
        """Run one tool_use input; returns the text for the tool_result."""
        if not isinstance(command, dict):
            raise MemoryToolError("expected a command object")
        name = command.get("command")
        handlers: Dict[str, Callable[..., str]] = {
            "view": self.view, "create": self.create, "str_replace": self.str_replace,
            "insert": self.insert, "delete": self.delete, "rename": self.rename}
        handler = handlers.get(name) if isinstance(name, str) else None
        if handler is None:
            raise MemoryToolError(f"Unknown command: {name}")
        args = {k: v for k, v in command.items() if k != "command"}
        _check_types(str(name), handler, args)
        try:
            return handler(**args)
        except TypeError as e:
            raise MemoryToolError(f"invalid arguments for {name}: {e}") from None

    def view(self, path: str, view_range: Optional[List[int]] = None) -> str:
        path = check_path(path)
        store = self.store()
        files = self.files(store)
        if path in files:
            lines = files[path].text.split("\n")
            start = 1
            if view_range is not None:
                if len(view_range) != 2 or not all(isinstance(n, int) for n in view_range) or \
                        view_range[0] < 1 or not (view_range[1] == -1 or view_range[0] <= view_range[1]):
                    raise MemoryToolError(f"Invalid `view_range` parameter: {view_range}. It should be [start, end] "
                                          f"with 1 <= start <= end, or end -1 for the last line.")
                first = view_range[0]
                last = len(lines) if view_range[1] == -1 else view_range[1]
                lines, start = lines[first - 1:last], first
            return f"Here's the content of {path} with line numbers:\n" + _numbered(lines, start)
        if not self._is_dir(files, path):
            raise MemoryToolError(f"The path {path} does not exist. Please provide a valid path.")
        entries: Dict[str, int] = {}
        for p, m in files.items():
            if not p.startswith(path + "/"):
                continue
            rest = p[len(path) + 1:].split("/")
            for depth in range(1, min(len(rest), 2) + 1):
                name = "/".join(rest[:depth]) + ("/" if depth < len(rest) else "")
                entries[name] = entries.get(name, 0) + (len(m.text.encode("utf-8")) if depth == len(rest) else 0)
        header = f"Here're the files and directories up to 2 levels deep in {path}, excluding hidden items:"
        lines = [f"{_size(sum(len(m.text.encode('utf-8')) for p, m in files.items() if p.startswith(path + '/')))}"
                 f"\t{path}"] + [f"{_size(size)}\t{path}/{name}" for name, size in sorted(entries.items())]
        return header + "\n" + "\n".join(lines)

    def create(self, path: str, file_text: str) -> str:
        path = check_path(path)
        if path == ROOT:
            raise MemoryToolError("Cannot create a file at /memories itself")
        store = self.store()
        files = self.files(store)
        if path in files:
            raise MemoryToolError(f"File {path} already exists")
        if self._is_dir(files, path):
            raise MemoryToolError(f"The path {path} is a directory")
        inside = next((p for p in files if path.startswith(p + "/")), None)
        if inside is not None:  # as a file system refuses it: one path is a file or a directory, not both
            raise MemoryToolError(f"Cannot create {path}: {inside} is a file, not a directory")
        type_ = type_for(path)

        def none_there(snap: Any) -> None:
            """Two creates of one path at once each found none above: the one whose commit lands second
            finds the first's there, and is refused as it would have been. Read from the index at the tip,
            which is the snapshot's or a later one (then this attempt's commit loses its race and runs again)."""
            if path in self.files(store):
                raise MemoryToolError(f"File {path} already exists")

        w = store.add(type_, file_text, title=path, reason=_reason(type_, file_text, path), tags=(TAG,),
                      author=self.author(store), source=self.source, guard=none_there)
        if w.memory.title != path:  # the path itself held a secret: name the file by the path it has now
            return f"File created successfully at: {w.memory.title} (a secret in the path was redacted)"
        return f"File created successfully at: {path}"

    def _rewrite(self, store: Store, m: Memory, change: Callable[[str], str]) -> Memory:
        """``m`` with its text changed by ``change``, applied to the text the write finds (a concurrent edit
        made in between is changed too, not lost)."""
        def changes_of(current: Memory) -> Dict[str, Any]:
            text = change(current.text)
            return {"text": text, "reason": _reason(current.type, text, current.title or "")}

        return store.edit(m.id, changes_of=changes_of, author=self.author(store), source=self.source).memory

    def str_replace(self, path: str, old_str: str, new_str: str) -> str:
        path = check_path(path)
        store = self.store()
        m = self._file(store, path)
        at: List[int] = []

        def replace(text: str) -> str:
            count = text.count(old_str) if old_str else 0
            if count == 0:
                raise MemoryToolError(
                    f"No replacement was performed, old_str `{old_str}` did not appear verbatim in {path}.")
            if count > 1:
                raise MemoryToolError(
                    f"No replacement was performed. Multiple occurrences of old_str `{old_str}` in {path}. "
                    "Please ensure it is unique")
            at[:] = [text[:text.find(old_str)].count("\n")]
            return text.replace(old_str, new_str)

        lines = self._rewrite(store, m, replace).text.split("\n")
        lo, hi = max(0, at[0] - 2), min(len(lines), at[0] + 3)
        return ("The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
                + _numbered(lines[lo:hi], lo + 1))

    def insert(self, path: str, insert_line: int, insert_text: str) -> str:
        path = check_path(path)
        store = self.store()
        m = self._file(store, path)

        def insert(text: str) -> str:
            lines = text.split("\n")
            if not isinstance(insert_line, int) or insert_line < 0 or insert_line > len(lines):
                raise MemoryToolError(f"Invalid `insert_line` parameter: {insert_line}. "
                                      f"It should be within the range [0, {len(lines)}].")
            lines.insert(insert_line, insert_text.rstrip("\n"))
            return "\n".join(lines)

        self._rewrite(store, m, insert)
        return f"The file {path} has been edited."

    def delete(self, path: str) -> str:
        path = check_path(path)
        if path == ROOT:
            raise MemoryToolError("Cannot delete the /memories directory itself")
        store = self.store()
        files = self.files(store)
        doomed = [m for p, m in sorted(files.items()) if p == path or p.startswith(path + "/")]
        if not doomed:
            raise MemoryToolError(f"The path {path} does not exist")
        for m in doomed:
            store.retract(m.id, reason=f"deleted {m.title} through the memory tool", author=self.author(store),
                          source=self.source)
        return f"Successfully deleted {path}"

    def rename(self, old_path: str, new_path: str) -> str:
        old_path, new_path = check_path(old_path), check_path(new_path)
        if ROOT in (old_path, new_path):
            raise MemoryToolError("Cannot rename the /memories directory itself")
        store = self.store()
        files = self.files(store)
        if new_path in files or self._is_dir(files, new_path):
            raise MemoryToolError(f"The destination {new_path} already exists")
        moves: List[Tuple[Memory, str]] = [
            (m, new_path + p[len(old_path):]) for p, m in sorted(files.items())
            if p == old_path or p.startswith(old_path + "/")]
        if not moves:
            raise MemoryToolError(f"The path {old_path} does not exist")
        who = self.author(store)
        # Every move is judged before the first is made (a rejection needs its reason): none or all apply.
        planned = [(m, target, type_for(target), _reason(type_for(target), m.text, target)) for m, target in moves]
        for m, target, type_, reason in planned:
            if type_ == m.type:
                store.edit(m.id, title=target, author=who, source=self.source)
            else:  # a memory's type is fixed: the renamed file is a new memory of the new type
                store.add(type_, m.text, title=target, reason=reason, tags=m.tags,
                          paths=m.paths, author=who, source=self.source)
                store.retract(m.id, reason=f"moved to {target} through the memory tool", author=who,
                              source=self.source)
        return f"Successfully renamed {old_path} to {new_path}"


def sdk_tool(tool: Optional[MemoryTool] = None):
    """The memory tool as the anthropic SDK's ``BetaAbstractMemoryTool``, for ``client.beta.messages.run_tools``."""
    from anthropic.lib.tools import BetaAbstractMemoryTool
    from anthropic.lib.tools._beta_functions import ToolError

    backend = tool or MemoryTool()

    def run(command: Any) -> str:
        try:
            return backend.execute(command.to_dict() if hasattr(command, "to_dict") else dict(command))
        except GitmemError as e:
            raise ToolError(str(e)) from None

    class GitmemMemoryTool(BetaAbstractMemoryTool):
        def view(self, command):
            return run(command)

        def create(self, command):
            return run(command)

        def str_replace(self, command):
            return run(command)

        def insert(self, command):
            return run(command)

        def delete(self, command):
            return run(command)

        def rename(self, command):
            return run(command)

    return GitmemMemoryTool()
