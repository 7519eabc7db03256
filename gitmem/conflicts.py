"""The pending conflicts of a memory tree by id, and how a command shows one on a memory.

A merge that found a clash leaves the memory holding one side for now and ``conflicts/<id>.yaml`` holding
both until ``gitmem resolve``: every reader that shows memories asks :func:`pending` so it can say so. The
tree is asked first whether it has a ``conflicts/`` entry at all, so reading a tree with none (nearly every
tree) never loads the merge machinery (:mod:`gitmem.merge`, which :mod:`gitmem.store` must not import).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional

from .model import CONFLICTS_DIR

if TYPE_CHECKING:
    from .records import Conflict
    from .store import Store


def pending(store: Store, tip: Optional[str] = None) -> Dict[str, Conflict]:
    """The unresolved conflicts at ``tip`` (default: the tip reads see) by memory id; empty, and cheap,
    when the tree has no ``conflicts/`` entry."""
    at = tip if tip is not None else store.tip()
    if not at or not store.snapshot(at).has(CONFLICTS_DIR):
        return {}
    from .merge import list_conflicts

    return {c.id: c for c in list_conflicts(store, at)}


def conflict_json(c: Conflict) -> Dict[str, Any]:
    """The ``conflict`` field of a memory in JSON (MCP ``get``/``recall``, ``gitmem show/list/search --json``):
    the clashing fields, both versions of each, and what settles it."""
    return {"fields": list(c.fields), "ours": {f: c.ours.to_dict()[f] for f in c.fields},
            "theirs": {f: c.theirs.to_dict()[f] for f in c.fields},
            "note": f"in conflict: a person has not chosen between these versions yet, so do not rely on either; "
                    f"settled by `gitmem resolve {c.id} --ours|--theirs|--edit`"}


def with_conflict(out: Dict[str, Any], memory_id: str, conflicts: Dict[str, Conflict]) -> Dict[str, Any]:
    """``out`` (a memory's JSON) with its ``conflict`` field when the memory is in conflict."""
    c = conflicts.get(memory_id)
    if c is not None:
        out["conflict"] = conflict_json(c)
    return out


def check_json(verdict: Any, conflicts: Dict[str, Conflict]) -> Dict[str, Any]:
    """A proposal check's JSON (``gitmem check --json``, MCP ``check_proposal``), each rejection in conflict marked
    as search marks a memory: its text is one side's until a person chooses, so the agent should know."""
    out = verdict.to_dict()
    for entry in out["rejections"] + out["related"]:
        with_conflict(entry, entry["id"], conflicts)
    return out


def marker(memory_id: str) -> str:
    """What a line of text output adds after a memory in conflict."""
    return f"(in conflict: gitmem resolve {memory_id})"


def marked(memory_id: str, conflicts: Optional[Dict[str, Conflict]]) -> str:
    """:func:`marker` after two spaces, for a line about a memory in ``conflicts``; else nothing."""
    return f"  {marker(memory_id)}" if conflicts and memory_id in conflicts else ""
