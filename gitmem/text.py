"""Text for people: a count with its noun.

Every interface shows counts the same way through it, so "1 memory" reads the same in ``gitmem prune``,
a hook's note, a commit subject and the web UI. JSON output needs none of it: its numbers are numbers."""

from __future__ import annotations

__all__ = ["plural"]


def plural(n: int, noun: str) -> str:
    """``n`` and ``noun``, the noun in the plural unless ``n`` is 1: "1 memory", "2 memories",
    "3 branches", "0 conflicts". English rules for the nouns gitmem counts; the last word is the one that changes."""
    if n == 1:
        return f"{n} {noun}"
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "o", "u"):
        return f"{n} {noun[:-1]}ies"
    return f"{n} {noun}es" if noun.endswith(("s", "sh", "ch", "x")) else f"{n} {noun}s"

