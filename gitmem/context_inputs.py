"""What a context is built from, read from the repository: the guide file, the cache anchor, the memories.

:mod:`gitmem.context` assembles a request body from plain data; this module is its git edge. It
reads the inputs (:func:`gather`), builds from a store (:func:`build`), and keeps the two pieces of
local state the context depends on, both in the repository's git config:

- the guide, ``gitmem.guide`` (:func:`set_guide`), else AGENTS.md or CLAUDE.md when present;
- the cache anchor, ``gitmem.branch.<branch>.contextAnchor`` (local state, like the branch-parent
  record): the memory commit the cached ``memory`` block renders. Without a recorded anchor the
  anchor is the tip. The anchor moves only when :func:`note_sent` is called after a request was
  sent: it records the anchor on first use and advances it to the tip once the tail outgrows
  :data:`TAIL_ADVANCE_TOKENS` (one re-write of the memory block, the guide still read from cache), or
  when a caller advances it explicitly (:func:`set_anchor`, ``gitmem context --advance``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from .conflicts import pending
from .context import (
    DEFAULT_BUDGET, DEFAULT_MAX_TOKENS, DEFAULT_MODEL, Context, ContextInputs, assemble,
)
from .errors import GitmemError, InvalidMemory, StorageError
from .model import Memory, check_path
from .postings import IndexedMemories
from .pricing import DEFAULT_TABLE, PriceTable
from .warm import placed

if TYPE_CHECKING:
    from .records import Conflict
    from .store import Store

__all__ = [
    "build", "gather", "note_sent", "set_anchor", "anchor_of", "guide_path", "guide_stamp", "read_guide", "set_guide",
    "TAIL_ADVANCE_TOKENS", "GUIDE_KEY",
]

#: A tail larger than this moves the anchor to the tip on the next :func:`note_sent`.
TAIL_ADVANCE_TOKENS = 2_048
GUIDE_KEY = "gitmem.guide"
GUIDE_FALLBACKS = ("AGENTS.md", "CLAUDE.md")


def gather(store: Store, *, guide: Optional[str] = None, anchor: Optional[str] = None,
           budget: Optional[int] = None, with_guide: bool = True, guide_optional: bool = False) -> ContextInputs:
    """The inputs of a context from ``store``: the memory tip, the anchor, the guide.

    ``guide`` is a guide path (default: :func:`guide_path`; ``with_guide`` False: no guide is read, for a
    caller that sends none, so a guide it cannot read is no error of its; ``guide_optional``: a guide that
    cannot be read is left out with a warning saying why, for an agent, whose memory must not wait on a
    deleted AGENTS.md it cannot fix); ``anchor`` overrides the recorded
    cache anchor; the conflicts pending at the tip come along (the tail shows them). An anchor not in the
    repository falls back to the tip, with a warning. With a
    ``budget``, a store of more than :data:`FROM_INDEX` memories is read lazily from the derived
    index (:class:`~gitmem.postings.IndexedMemories`): the body is the same, only the reading is cheaper.
    """
    warnings: List[str] = []
    tip = store.tip()
    anchor = anchor or anchor_of(store) or tip
    guide_file, guide_text, guide_problem = None, "", None
    if with_guide:
        try:
            guide_file, guide_text = read_guide(store, guide)
        except GitmemError as e:
            if not guide_optional:
                raise
            guide_problem = str(e)
            warnings.append(f"{e}: the context was built without it")
    conflicts: Tuple[Conflict, ...] = tuple(pending(store, tip).values()) if tip else ()
    lazy = _indexed(store, tip, anchor or tip, warnings) if tip and budget is not None else None
    if lazy is not None:
        at_tip, at_anchor, changed, anchor = lazy
        return ContextInputs(tip=tip, anchor=anchor, guide_text=guide_text, guide_path=guide_file,
                             warnings=tuple(warnings), at_tip=at_tip, at_anchor=at_anchor, changed=changed,
                             conflicts=conflicts, guide_problem=guide_problem)
    now = store.memories(tip) if tip else {}
    then = None  # the anchor is the tip
    if anchor != tip:
        then = _memories_at(store, anchor, warnings)
        if then is None:
            anchor = tip
    for problem in store.problems:
        warnings.append(f"skipped {problem.where}: {problem.message}")
    return ContextInputs(memories=now, tip=tip, anchor=anchor, anchored=then, guide_text=guide_text,
                         guide_path=guide_file, warnings=tuple(warnings), blobs=_CurrentBlobs(store, now.values()),
                         conflicts=conflicts, guide_problem=guide_problem)


class _CurrentBlobs(Mapping[str, Optional[str]]):
    """:meth:`Store.current_blobs` of ``memories``, read when first looked at: only a tail ranked for a
    question needs them, and reading them hashes each file a file memory describes (a context within its
    budget, such as a session's first, reads none)."""

    def __init__(self, store: "Store", memories: Iterable[Memory]):
        self._read: Optional[Callable[[], Dict[str, Optional[str]]]] = lambda: store.current_blobs(memories)
        self._blobs: Dict[str, Optional[str]] = {}

    def _all(self) -> Dict[str, Optional[str]]:
        if self._read is not None:
            self._blobs, self._read = self._read(), None
        return self._blobs

    def __getitem__(self, path: str) -> Optional[str]:
        return self._all()[path]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


#: Past this many memories a context is read from the derived index (:mod:`gitmem.postings`): the
#: memories by id and type, whole only as far as the budget goes, and the tail's ranking. Measured as
#: whole processes (bench stores): the two ways cost the same at 200 memories (110 ms); at 1,000 the
#: index took 140 ms and a full load 200 ms.
FROM_INDEX = 200


def _indexed(store: Store, tip: str, anchor: str, warnings: List[str]
             ) -> Optional[Tuple[IndexedMemories, Optional[IndexedMemories], Tuple[Memory, ...], str]]:
    """(the tip's view, the anchor's (None: the tip), what changed between them, the anchor) read
    from the index; None when the store is small, damaged, or the index cannot answer."""
    tip_tree = store.tree_of(tip)
    at_tip = IndexedMemories(store, tip, tip_tree)
    counts = store.summary(tip)["counts"]  # by type and status: the valid memories, and how many are not
    if counts.get("invalid") or sum(counts.values()) <= FROM_INDEX:  # a full load reports each invalid one
        return None
    if not at_tip.answers():
        return None
    if anchor == tip:
        return at_tip, None, (), anchor
    try:
        anchor_tree = store.tree_of(anchor)
    except StorageError:
        warnings.append(f"cache anchor {anchor[:10]} is not in this repository: using the tip")
        return at_tip, None, (), tip
    if store.summary(anchor)["counts"].get("invalid"):
        return None
    added, removed = store.warm.diff(store.repository, anchor_tree, tip_tree)
    parsed = store.warm.parse(store.repository, added + removed, store.read_ref())
    now = {m.id: m for p, b in added if isinstance(m := placed(parsed[b], p), Memory)}
    was = {m.id: m for p, b in removed if isinstance(m := placed(parsed[b], p), Memory)}
    then: Dict[str, Optional[Memory]] = {i: None for i in now}
    then.update(was)
    changed = tuple(m for i, m in sorted(now.items()) if was.get(i) != m)
    return at_tip, IndexedMemories(store, tip, anchor_tree, then), changed, anchor


def build(store: Store, *, guide: Optional[str] = None, query: Optional[str] = None, paths: Sequence[str] = (),
          ttl: str = "5m", model: str = DEFAULT_MODEL, budget: Optional[int] = DEFAULT_BUDGET,
          anchor: Optional[str] = None, max_tokens: int = DEFAULT_MAX_TOKENS,
          table: PriceTable = DEFAULT_TABLE, guide_optional: bool = False) -> Context:
    """Build the request body for ``query`` from the store's memory tip and the guide
    (:func:`gather`, then :func:`gitmem.context.assemble`)."""
    inputs = gather(store, guide=guide, anchor=anchor, budget=budget, guide_optional=guide_optional)
    return assemble(inputs, query=query, paths=paths, ttl=ttl, model=model,
                    budget=budget, max_tokens=max_tokens, table=table)


def _memories_at(store: Store, commit: Optional[str], warnings: List[str]) -> Optional[Dict[str, Memory]]:
    if not commit:
        return {}
    try:
        return store.memories(commit)
    except (KeyError, ValueError, GitmemError):
        warnings.append(f"cache anchor {commit[:10]} is not in this repository: using the tip")
        return None


# --- the guide -----------------------------------------------------------------


def guide_path(store: Store) -> Optional[str]:
    """The configured guide (``git config gitmem.guide``), else AGENTS.md or CLAUDE.md if present; none in a
    bare repository, which has no files: the folder holding it (:attr:`Store.workdir`) is no part of it."""
    if _bare(store):
        return None
    configured = store.config(GUIDE_KEY)
    if configured:
        return configured
    for name in GUIDE_FALLBACKS:
        if os.path.isfile(os.path.join(store.workdir, name)):
            return name
    return None


def guide_stamp(store: Store) -> Optional[Tuple[str, int, int, int, int]]:
    """What changes when the guide file does, without reading it: (path, inode, size, modified and changed
    times in ns); all zero for a guide that is not there, None without one. A cache of contexts built
    from one memory tip keys on it, so an edited, deleted or unreadable guide is seen at the next request."""
    path = guide_path(store)
    if not path:
        return None
    try:
        st = os.stat(os.path.join(store.workdir, path))  # an absolute path stays as it is
    except (OSError, ValueError):
        return path, 0, 0, 0, 0
    return path, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _bare(store: Store) -> bool:
    return store.git is None and store.repo.is_bare  # gitdir finds only repositories with a work tree


def read_guide(store: Store, path: Optional[str] = None) -> Tuple[Optional[str], str]:
    """(path, text) of the guide; ``(None, "")`` when there is none.

    A guide that is also an export target (``gitmem export --write`` into AGENTS.md) is read without
    gitmem's generated section: the memory reaches the context once, as memory inside its
    ``<memory>`` element, never a second time raw inside the guide.

    A guide that leads out of the work tree (a clone's AGENTS.md linked to ``~/.aws/credentials``) is
    refused, as an export target is: its text would be sent to the model with every request."""
    path = path or guide_path(store)
    if not path:
        return None, ""
    from .export import strip_section  # here: a repository without a guide need not load it
    from .files import inside

    full = inside(path if os.path.isabs(path) else os.path.join(store.workdir, path), store.workdir)
    try:
        with open(full, encoding="utf-8-sig") as f:  # an editor's byte order mark is no text of the guide
            return path, strip_section(f.read())
    except FileNotFoundError:
        raise GitmemError(f"the guide {path} is missing") from None
    except (OSError, UnicodeDecodeError) as e:
        raise GitmemError(f"cannot read the guide {path}: {getattr(e, 'strerror', None) or e}") from None


def set_guide(store: Store, path: str) -> str:
    """Record ``path`` (repository-relative or absolute, must exist) as the guide in the repo's git config.

    A relative path is never read from the process's directory: that may be another checkout holding a
    same-named file. The CLI turns what was typed into a repository path first (``REPO_PATH``)."""
    if not path.strip():
        raise GitmemError("guide set needs a file: name one, e.g. gitmem guide set AGENTS.md")
    if _bare(store):
        raise GitmemError("a bare repository has no files to read a guide from: set it in a clone")
    root = os.path.abspath(store.workdir)
    rel = os.path.relpath(path, root) if os.path.isabs(path) else path
    if os.path.isdir(os.path.join(root, rel)):
        raise GitmemError(f"{path!r} is a folder: name the guide file in it, e.g. gitmem guide set AGENTS.md")
    try:
        rel = check_path(rel.replace(os.sep, "/"))
    except InvalidMemory as e:  # it is no memory's path: say whose it is
        raise InvalidMemory("guide", e.problem) from None
    if not os.path.isfile(os.path.join(root, rel)):
        raise GitmemError(f"no such guide file in the repository: {rel}")
    from .repo import config_set

    config_set(store.repo, GUIDE_KEY, rel)
    return rel


# --- the cache anchor ----------------------------------------------------------


def _anchor_key(store: Store) -> str:
    return f"gitmem.branch.{store.branch}.contextAnchor"


def anchor_of(store: Store) -> Optional[str]:
    return store.config(_anchor_key(store)) or None


def set_anchor(store: Store, commit: Optional[str] = None) -> Optional[str]:
    """Record ``commit`` (default: the tip) as where the cached memory part ends."""
    commit = commit or store.tip()
    if commit:
        from .repo import config_set

        config_set(store.repo, _anchor_key(store), commit)
    return commit


def note_sent(store: Store, ctx: Context) -> Optional[str]:
    """Call after sending ``ctx``: record the anchor on first use, advance it past a large tail.

    Returns the anchor now recorded. Building never moves the anchor; only this (and
    :func:`set_anchor`) does, so builds stay deterministic.
    """
    recorded = anchor_of(store)
    if recorded is None or ctx.tail_tokens > TAIL_ADVANCE_TOKENS:
        return set_anchor(store, ctx.memory_commit)
    return recorded
