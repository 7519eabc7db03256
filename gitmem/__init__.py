"""gitmem: git-native memory for AI coding agents.

The public API: open a :class:`Store` on a repository and add, get, list,
edit, supersede and retract typed memories; every write is one commit on
``refs/memory/<branch>``.

Names are imported on first use (module ``__getattr__``), so ``gitmem
--version`` and hooks do not pay for pygit2 and PyYAML before they need them.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Store": "store", "Write": "store", "Change": "audit", "Problem": "store",
    "Memory": "model", "Author": "model", "TYPES": "model", "STATUSES": "model", "AUTHOR_KINDS": "model",
    "GitmemError": "errors", "NotARepository": "errors", "InvalidMemory": "errors", "NotFound": "errors",
    "AmbiguousId": "errors", "IdTooShort": "errors", "ConcurrentUpdate": "errors", "RefLocked": "errors",
    "StorageError": "errors",
    "BranchError": "errors", "SecretFound": "errors", "RemoteError": "errors", "BackendError": "errors",
}

__all__ = ["__version__", *_EXPORTS]


def unshadow() -> None:
    """``python -m gitmem`` (and ``gitmem.web``) puts the working directory first on ``sys.path``: in a repository
    holding a ``queue.py`` or ``json.py``, every standard module imported after this package (by pygit2, click...)
    would be the repository's file. The package is imported already; only the path entry goes."""
    import os
    import sys

    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'gitmem' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(_EXPORTS))
