"""A guard in front of libgit2's loose-object reads: a truncated loose object is refused, not read.

libgit2 1.9 (the one pygit2 1.21 bundles) loops forever inflating a loose object whose zlib stream
ends early (libgit2#7342, fixed after 1.9): a disk that lost a file's tail, or an interrupted copy,
hung every command that read it, ``gitmem doctor`` included. :func:`guard` puts a backend ahead of
libgit2's own that reads each loose object it is asked for in Python (libgit2 still checks its
hash) and refuses one whose stream is cut short with a ``GitError``, which callers already turn
into "object ... is unreadable; run `gitmem doctor`". Reading it in Python costs about as much as
libgit2 reading it (some 20 µs a small object); a packed object passes on to libgit2, after a call into Python
(about 5 µs), so a repository with no loose object gets no guard."""

from __future__ import annotations

import os
import zlib
from typing import Optional, Tuple

import pygit2

_TYPES = {b"commit": pygit2.enums.ObjectType.COMMIT.value, b"tree": pygit2.enums.ObjectType.TREE.value,
          b"blob": pygit2.enums.ObjectType.BLOB.value, b"tag": pygit2.enums.ObjectType.TAG.value}
#: Ahead of every backend libgit2 adds itself (the loose one is at 1, packs at 2).
_PRIORITY = 1000


class _Guard(pygit2.OdbBackend):
    """Reads whole loose objects; every other callback answers "not found", so the next backend
    (libgit2's loose or pack one) answers it."""

    def __init__(self, objects: str):
        super().__init__()
        self.objects = objects
        self.plain = pygit2.Odb(objects)  # writes: libgit2 streams a new object to the first backend

    def _read(self, path: str) -> Optional[Tuple[int, bytes]]:
        """The type and content of the loose object at ``path``; None where libgit2 should answer (no
        such file, a corrupt stream or an old format, which it reports or reads itself)."""
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            return None
        try:
            raw = zlib.decompress(data)
        except zlib.error:
            inflate = zlib.decompressobj()
            try:
                inflate.decompress(data)
            except zlib.error:
                return None  # corrupt, not cut short: libgit2 says so itself
            raise pygit2.GitError(f"its loose file is truncated ({len(data)} bytes left of it)") from None
        head, _, body = raw.partition(b"\0")
        kind, _, size = head.partition(b" ")
        if kind not in _TYPES or size != str(len(body)).encode():
            return None
        return _TYPES[kind], body

    def read_cb(self, oid: pygit2.Oid) -> Tuple[int, bytes]:
        hex = str(oid)
        found = self._read(os.path.join(self.objects, hex[:2], hex[2:]))
        if found is None:
            raise KeyError(hex)
        return found  # libgit2 checks it hashes to ``oid``

    def read_prefix_cb(self, prefix: str) -> tuple:
        folder = os.path.join(self.objects, prefix[:2])
        try:
            names = [n for n in os.listdir(folder) if n.startswith(prefix[2:])] if len(prefix) >= 2 else []
        except OSError:
            names = []
        for name in names:
            self._read(os.path.join(folder, name))  # only to refuse a truncated one: libgit2 reads them
        raise KeyError(prefix)

    def read_header_cb(self, oid: pygit2.Oid) -> tuple:
        raise KeyError(str(oid))  # libgit2 reads only the head of the stream for this: no loop

    def exists_cb(self, oid: pygit2.Oid) -> bool:
        return False

    def exists_prefix_cb(self, prefix: pygit2.Oid) -> pygit2.Oid:
        raise KeyError(str(prefix))

    def write_cb(self, oid: pygit2.Oid, data: bytes, type: int) -> None:
        self.plain.write(type, data)  # as libgit2's loose backend would: this one is first in line

    def refresh_cb(self) -> None:
        pass


def guard(repo: pygit2.Repository, objects: str) -> None:
    """Put the guard in front of ``repo``'s object database, whose loose objects are under ``objects``, if it
    holds any: asked first for every object, the guard costs a packed read about 5 µs (a cold start at
    100,000 packed memories ran 15% longer), and a repository fresh from a clone or a gc has none to guard.
    An object this process writes later is whole."""
    if _any_loose(objects):
        repo.odb.add_backend(_Guard(objects), _PRIORITY)


def _any_loose(objects: str) -> bool:
    """Whether a fan-out folder (``objects/ab/``) holds a file: one listing of ``objects`` where git has
    packed everything (``prune-packed`` removes the emptied folders), a few more where it left some."""
    try:
        folders = [e.path for e in os.scandir(objects) if len(e.name) == 2 and e.is_dir()]
    except OSError:
        return True  # cannot tell: guard
    for folder in folders:
        try:
            with os.scandir(folder) as entries:
                if any(True for _ in entries):
                    return True
        except OSError:
            return True
    return False
