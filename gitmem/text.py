"""Text for people: a count with its noun, and stored text with its control characters made inert.

Every interface shows both the same way through these two, so "1 memory" and a stored ESC read the same
in ``gitmem prune``, a hook's note, a commit subject and the web UI. JSON output keeps its numbers and the
exact text, with every control character escaped the JSON way (:func:`inert_json`)."""

from __future__ import annotations

import re
from typing import Any, Optional

__all__ = ["inert", "inert_json", "plural"]

# DEL, C1 controls (CSI 0x9b, OSC 0x9d) and the bidi overrides that reorder what a line appears to say.
_C1_AND_BIDI = "\x7f-\x9f\u202a-\u202e\u2066-\u2069"
# For people, C0 controls but tab and newline too (ESC starts every terminal escape sequence; CR overwrites a
# line, unless a newline follows it: a CRLF file's line end).
_UNSAFE = re.compile(f"\r(?!\n)|[\x00-\x08\x0b\x0c\x0e-\x1f{_C1_AND_BIDI}]")
# In JSON, which escapes C0 itself, the bidi marks and the line and paragraph separators too (JavaScript before
# ES2019 and some viewers break lines there): a JSON escape loses nothing, so the marks Arabic text uses may go.
_JSON_UNSAFE = re.compile(f"[{_C1_AND_BIDI}\u061c\u200e\u200f\u2028\u2029]")
_SAFE_ASCII = b"\t\n" + bytes(range(0x20, 0x7f))


def plural(n: int, noun: str) -> str:
    """``n`` and ``noun``, the noun in the plural unless ``n`` is 1: "1 memory", "2 memories",
    "3 branches", "0 conflicts". English rules for the nouns gitmem counts; the last word is the one that changes."""
    if n == 1:
        return f"{n} {noun}"
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "o", "u"):
        return f"{n} {noun[:-1]}ies"
    return f"{n} {noun}es" if noun.endswith(("s", "sh", "ch", "x")) else f"{n} {noun}s"


def inert(text: str) -> str:
    """``text`` with every control character shown as an inert escape (``\\x1b``, ``\\u202e``), for human output.

    Memory text, titles and commit authors come from anyone who can push: printed raw, an escape sequence
    could recolour, hide or rewrite what a terminal shows, or set its title; on a web page a control is
    invisible (or a U+FFFD) and a bidi override reorders what a line appears to say. Shown as its escape,
    it reads the same in both."""
    if text.isascii() and not text.encode("ascii").translate(None, _SAFE_ASCII):
        return text  # the common case, told in C: a context's 130 KB took the pattern 0.4 ms
    return _UNSAFE.sub(lambda m: f"\\x{ord(m.group(0)):02x}" if ord(m.group(0)) < 0x100
                       else f"\\u{ord(m.group(0)):04x}", text)


def inert_json(value: Any, indent: Optional[int] = None) -> str:
    """``value`` as JSON (``json.dumps``) that a terminal shows and never acts on, for output a person may see.

    Non-ASCII text stays UTF-8 for people to read, but DEL, C1 controls, bidi controls and U+2028/U+2029 are
    written as ``\\uXXXX`` like the C0 controls JSON already escapes: ``json.loads`` gives back the exact
    strings, and ``gitmem list --json`` in a terminal cannot be driven by a memory's CSI (U+009B)."""
    import json  # here: `gitmem --version` and human output never need it

    text = json.dumps(value, indent=indent, ensure_ascii=False)
    if text.isascii() and "\x7f" not in text:
        return text  # the common case: isascii is a flag CPython keeps, the `in` a memchr
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)
