"""JSON edited in place: a person's settings file changes only where gitmem's entries go in or come out.

``json.dumps`` lays out a whole document anew: one-line arrays and objects opened up, spacing evened out.
Agent tools' settings are kept by hand (``"allow": ["Bash(ls:*)", "Read"]`` on one line), so :func:`edit`
writes a new value into the old text instead: a member or element whose value did not change keeps its
text byte for byte, one that changed is edited the same way inside its own brackets, and only what is new
is written by ``json``, in the file's indent (two spaces, four, a tab), characters as they are (not ``\\u``
escapes) and line ends. Key order is the file's; new keys go last. A byte order mark the file starts with (editors
on Windows write one; ``json`` refuses it) stays where it is.
"""

from __future__ import annotations

import difflib
import json
from typing import Any, List, NamedTuple, Optional, Tuple, Union

__all__ = ["BOM", "edit", "has_comments", "trailing_comma"]

#: The UTF-8 byte order mark as text: a file read as UTF-8 that starts with it is JSON after it.
BOM = "\ufeff"
_WHITESPACE = " \t\r\n"
_DECODER = json.JSONDecoder()


class _Node(NamedTuple):
    start: int
    end: int
    value: Any
    #: an object's members (key, where the member starts, value) or an array's elements (None, where it
    #: starts, it); None for a scalar
    children: Optional[List[Tuple[Optional[str], int, "_Node"]]]


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WHITESPACE:
        i += 1
    return i


def _parse(text: str, i: int) -> _Node:
    """The value at ``i`` (whitespace before it skipped) with where each part of it is; ``text`` is valid JSON."""
    i = _skip(text, i)
    if text[i] not in "{[":
        scalar, end = _DECODER.raw_decode(text, i)
        return _Node(i, end, scalar, None)
    close = "}" if text[i] == "{" else "]"
    children: List[Tuple[Optional[str], int, _Node]] = []
    j = _skip(text, i + 1)
    while text[j] != close:
        if close == "}":
            key, after = _DECODER.raw_decode(text, j)
            node = _parse(text, _skip(text, after) + 1)  # past the colon
            children.append((key, j, node))
        else:
            node = _parse(text, j)
            children.append((None, j, node))
        j = _skip(text, node.end)
        if text[j] == ",":
            j = _skip(text, j + 1)
    if close == "}":
        value: Any = {key: node.value for key, _, node in children}  # a repeated key: the last one counts, as in json
    else:
        value = [node.value for _, _, node in children]
    return _Node(i, j + 1, value, children)


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON, strictly: ``1``, ``1.0`` and ``true`` differ, and so do ``0.0`` and ``-0.0`` (Python's ``==``
    says they do not)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return repr(a) == repr(b)  # as json.dumps writes them
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b)


class _Layout(NamedTuple):
    unit: Union[str, int]  # what json.dumps takes as indent
    newline: str


def _line_indent(text: str, at: int) -> str:
    """The whitespace that starts the line ``at`` is on."""
    start = text.rfind("\n", 0, at) + 1
    return text[start:_skip_blanks(text, start)]


def _skip_blanks(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t":
        i += 1
    return i


def _fresh(value: Any, indent: str, layout: _Layout, inline: bool) -> str:
    if inline:
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, indent=layout.unit, ensure_ascii=False).replace("\n", layout.newline + indent)


def _render(text: str, node: _Node, new: Any, layout: _Layout, inline: bool) -> str:
    """The text of ``node`` holding ``new``: its own text wherever the value stayed the same."""
    if _same(node.value, new):
        return text[node.start:node.end]
    is_object = isinstance(node.value, dict) and isinstance(new, dict)
    if not (is_object or isinstance(node.value, list) and isinstance(new, list)):
        return _fresh(new, _line_indent(text, node.start), layout, inline)
    children = node.children or []
    inline = inline or (bool(children) and "\n" not in text[node.start:node.end])
    starts, nodes = [start for _, start, _ in children], [child for _, _, child in children]
    if children:
        indent = _line_indent(text, starts[0])
        lead, trail = text[node.start + 1:starts[0]], text[nodes[-1].end:node.end - 1]
        sep = text[nodes[0].end:starts[1]] if len(children) > 1 else \
            ", " if inline else "," + layout.newline + indent
    elif inline:  # an empty one inside a one-line parent stays on that line
        indent, lead, trail, sep = "", "", "", ", "
    else:
        unit = " " * layout.unit if isinstance(layout.unit, int) else layout.unit
        outer = _line_indent(text, node.start)
        indent = outer + unit
        lead, trail, sep = layout.newline + indent, layout.newline + outer, "," + layout.newline + indent
    # (index in the old children or None, text) for each child of the new value, in order
    out: List[Tuple[Optional[int], str]] = []
    if is_object:
        last = {key: n for n, (key, _, _) in enumerate(children)}
        colon = text[_DECODER.raw_decode(text, starts[0])[1]:nodes[0].start] if children else ": "  # as written
        for n, (key, start, child) in enumerate(children):
            if key in new:
                body = text[start:child.end] if last[key] != n else \
                    text[start:child.start] + _render(text, child, new[key], layout, inline)
                out.append((n, body))
        out += [(None, json.dumps(key, ensure_ascii=False) + colon + _fresh(value, indent, layout, inline))
                for key, value in new.items() if key not in last]
    else:
        out = _aligned(text, nodes, new, layout, inline, indent)
    if not out:
        return text[node.start] + text[node.end - 1]
    body = out[0][1]
    for (before, _), (after, piece) in zip(out, out[1:]):
        body += (text[nodes[before].end:starts[after]] if before is not None and after is not None
                 and after == before + 1 else sep) + piece
    return text[node.start] + lead + body + trail + text[node.end - 1]


def _aligned(text: str, nodes: List[_Node], new: List[Any], layout: _Layout, inline: bool,
             indent: str) -> List[Tuple[Optional[int], str]]:
    """An array's new elements, each with the old element it keeps or edits: equal elements matched in order
    (difflib), and between two matches the old ones paired with the new ones in turn, then dropped or added."""
    canonical = [json.dumps(n.value, sort_keys=True) for n in nodes], [json.dumps(v, sort_keys=True) for v in new]
    out: List[Tuple[Optional[int], str]] = []
    i = j = 0
    for a, b, size in difflib.SequenceMatcher(None, *canonical, autojunk=False).get_matching_blocks():
        for k in range(j, b):  # new elements before this match: edit an old one in the gap, else write anew
            old = i + k - j
            if old < a:
                out.append((old, _render(text, nodes[old], new[k], layout, inline)))
            else:
                out.append((None, _fresh(new[k], indent, layout, inline)))
        out += [(a + k, text[nodes[a + k].start:nodes[a + k].end]) for k in range(size)]
        i, j = a + size, b + size
    return out


def has_comments(text: str) -> bool:
    """Whether ``text`` holds ``//`` or ``/* */`` comments outside strings (JSON with comments, as some
    editors' settings are): gitmem would have to drop them, so it refuses the file instead."""
    i, in_string = 0, False
    while i < len(text) - 1:
        c = text[i]
        if in_string:
            if c == "\\":
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c == "/" and text[i + 1] in "/*":
            return True
        i += 1
    return False


def trailing_comma(text: str, error: json.JSONDecodeError) -> Optional[int]:
    """The line (from 1) of the comma before the ``}`` or ``]`` where reading ``text`` failed with ``error``, or
    None when that is not where it failed: a trailing comma, which JavaScript, JSONC and many editors allow and
    JSON does not (``json`` says only "Expecting property name", or "Expecting value", at the bracket)."""
    if text[error.pos:error.pos + 1] not in ("}", "]"):
        return None
    before = text[:error.pos].rstrip(_WHITESPACE)
    return before.count("\n") + 1 if before.endswith(",") else None


def edit(existing: Optional[str], data: Any) -> str:
    """``data`` as JSON text, written into ``existing`` (the file it came from) with as little change as there
    is: the same as ``existing`` when ``data`` is what it holds. A new or empty file gets two-space indent and a
    final newline; a one-line file, which json cannot add a nested entry to readably, is laid out anew in
    its indent (its final newline or lack of one kept). ``existing`` must be valid JSON after its :data:`BOM`, if
    it has one, which the result keeps."""
    if existing and existing.startswith(BOM):
        return BOM + edit(existing[len(BOM):], data)
    if not existing or not existing.strip():
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    newline = "\r\n" if "\r\n" in existing else "\n"
    unit: Union[str, int] = 2
    for line in existing.splitlines()[1:]:
        lead = line[:len(line) - len(line.lstrip(" \t"))]
        if lead:
            unit = lead if "\t" in lead else len(lead)
            break
    anew = json.dumps(data, indent=unit, ensure_ascii=False).replace("\n", newline) + \
        ("\n" if existing.endswith("\n") else "")
    root = _parse(existing, 0)
    if "\n" not in existing[root.start:root.end] and not _same(root.value, data):
        return anew
    out = existing[:root.start] + _render(existing, root, data, _Layout(unit, newline), False) + existing[root.end:]
    return out if _same(json.loads(out), data) else anew  # never a settings file saying other than meant
