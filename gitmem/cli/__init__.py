"""The `gitmem` command line: a thin layer over the library.

Each area's commands live in a module of their own (``cli/memory.py``,
``cli/llm.py``, ...) and register on :data:`main` when it is imported, which happens only
when one of its commands runs (:data:`COMMANDS`). Library errors become a
one-line ``Error: ...`` and exit code 1 here, in one place; usage errors exit 2.
Heavy libraries are imported inside the commands that need them, so hooks
and ``gitmem add`` start fast.
"""

from __future__ import annotations

from .base import main

__all__ = ["main"]

#: The module under gitmem/cli/ that defines each command (``@main.command()`` there). A module is
#: imported when one of its commands runs, or when ``--help`` lists them all.
COMMANDS = {
    "memory": ("add", "doctor", "edit", "fact", "init", "list", "log", "retract", "search", "show", "status",
               "supersede"),
    "llm": ("emulator", "messages", "models"),
    "context": ("ask", "bill", "context", "demo", "guide"),
    "branches": ("branch", "checkpoint", "conflicts", "diff", "hook", "hooks", "merge", "prune", "resolve",
                 "resume", "sync"),
    "remote": ("fetch", "pull", "push", "remote"),
    "tools": ("check", "export", "mcp", "memory-tool", "setup"),
    "ui": ("ui",),
    "router": ("router",),
}
main.lazy.update({name: module for module, names in COMMANDS.items() for name in names})
