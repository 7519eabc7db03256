"""gitmem: git-native memory for AI coding agents.

The public API: open a :class:`Store` on a repository and add, get, list,
edit, supersede and retract typed memories; every write is one commit on
``refs/memory/<branch>``.

Names are imported on first use (module ``__getattr__``), so ``gitmem
--version`` and hooks do not pay for pygit2 and PyYAML before they need them.
"""

from __future__ import annotations

TYPE_CHECKING = False  # as typing's, which type checkers read as True, without importing typing (2-3 ms of the
#                        `gitmem` script's start when the command server answers: nothing else there needs it)

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

if TYPE_CHECKING:  # what a type checker reads for _EXPORTS: their own types, not __getattr__'s Any
    from .audit import Change as Change
    from .errors import AmbiguousId as AmbiguousId, BackendError as BackendError, BranchError as BranchError
    from .errors import ConcurrentUpdate as ConcurrentUpdate, GitmemError as GitmemError, IdTooShort as IdTooShort
    from .errors import InvalidMemory as InvalidMemory, NotARepository as NotARepository, NotFound as NotFound
    from .errors import RefLocked as RefLocked, RemoteError as RemoteError, SecretFound as SecretFound
    from .errors import StorageError as StorageError
    from .model import AUTHOR_KINDS as AUTHOR_KINDS, STATUSES as STATUSES, TYPES as TYPES, Author as Author
    from .model import Memory as Memory
    from .store import Problem as Problem, Store as Store, Write as Write


def unshadow() -> None:
    """``python -m gitmem`` (and ``gitmem.web``) puts the working directory first on ``sys.path``: in a repository
    holding a ``queue.py`` or ``json.py``, every standard module imported after this package (by pygit2, click...)
    would be the repository's file. The package is imported already; only the path entry goes."""
    import os
    import sys

    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]


if not TYPE_CHECKING:  # hidden from type checkers, which would take any misspelt name for an Any
    def __getattr__(name: str) -> object:
        module = _EXPORTS.get(name)
        if module is None:
            raise AttributeError(f"module 'gitmem' has no attribute {name!r}")
        from importlib import import_module

        value = getattr(import_module(f".{module}", __name__), name)
        globals()[name] = value  # later lookups skip __getattr__
        return value


def __dir__() -> list:
    return sorted(set(globals()) | set(_EXPORTS))
