"""The `gitmem` command line: a thin layer over the library.

Each area's commands live in a module of their own (``cli/memory.py``,
``cli/llm.py``, ...) and register on :data:`main` when it is imported, which happens only
when one of its commands runs (:data:`COMMANDS`). Library errors become a
one-line ``Error: ...`` and exit code 1 here, in one place; usage errors exit 2.
Heavy libraries are imported inside the commands that need them, so hooks
and ``gitmem add`` start fast.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types


class _OnFirstUse(types.ModuleType):
    """Stands in ``sys.modules`` for a module until one of its names is read, then imports it and
    takes on its names (as Mercurial's demandimport does). ``import pygit2`` elsewhere finds this
    stand-in without loading anything, since the import system reads only ``__spec__``, which it has."""

    def __getattr__(self, name: str) -> object:
        with _LOADING:
            if sys.modules.get(self.__name__) is self:
                del sys.modules[self.__name__]
                try:
                    module = importlib.import_module(self.__name__)
                except BaseException:  # Ctrl-C mid-import: the next read (an ``except pygit2.GitError``) retries
                    sys.modules[self.__name__] = self
                    raise
                self.__dict__.update(module.__dict__)
        return getattr(sys.modules[self.__name__], name)


_LOADING = threading.Lock()


def _on_first_use(name: str) -> None:
    """Import ``name`` when one of its names is first read, not now.

    pygit2 costs about 65 ms to import (libgit2, OpenSSL, its enums): a warm read that the index and
    :mod:`gitmem.gitdir` answer never touches it, so it need not pay for it. Only the command line
    does this; a program importing the library imports pygit2 as usual."""
    spec = importlib.util.find_spec(name) if name not in sys.modules else None
    if spec is not None:
        stand_in = _OnFirstUse(name)
        stand_in.__spec__ = spec
        sys.modules[name] = stand_in


_on_first_use("pygit2")

from .base import main  # noqa: E402  (after pygit2 is made lazy)

__all__ = ["main"]

#: The module under gitmem/cli/ that defines each command (``@main.command()`` there). A module is
#: imported when one of its commands runs, or when ``--help`` lists them all.
COMMANDS = {
    "memory": ("add", "doctor", "edit", "embed", "fact", "init", "list", "log", "retract", "search", "show", "status",
               "supersede"),
    "llm": ("emulator", "messages", "models"),
    "context": ("ask", "bill", "context", "demo", "guide"),
    "branches": ("branch", "checkpoint", "conflicts", "diff", "hook", "hooks", "merge", "prune", "resolve",
                 "resume", "sync"),
    "remote": ("fetch", "pull", "push", "remote"),
    "tools": ("check", "export", "mcp", "memory-tool", "server", "setup"),
    "ui": ("ui",),
    "router": ("router",),
}
main.lazy.update({name: module for module, names in COMMANDS.items() for name in names})
