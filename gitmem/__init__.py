"""gitmem: git-native memory for AI coding agents.

The public API: open a :class:`Store` on a repository and add, get, list,
edit, supersede and retract typed memories; every write is one commit on
``refs/memory/<branch>``.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import (
    AmbiguousId, BackendError, BranchError, ConcurrentUpdate, GitmemError, InvalidMemory,
    NotARepository, NotFound, RefLocked, RemoteError, SecretFound, StorageError,
)
from .model import AUTHOR_KINDS, STATUSES, TYPES, Author, Memory
from .store import Change, Problem, Store, Write

__all__ = [
    "__version__", "Store", "Write", "Change", "Problem", "Memory", "Author",
    "TYPES", "STATUSES", "AUTHOR_KINDS",
    "GitmemError", "NotARepository", "InvalidMemory", "NotFound", "AmbiguousId", "ConcurrentUpdate",
    "RefLocked", "StorageError", "BranchError", "SecretFound", "RemoteError", "BackendError",
]
