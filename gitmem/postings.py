"""The word ranking served from the derived index, so a search reads what it ranks, not the store.

:func:`gitmem.search.rank` ranks memories it is given: a process that holds none must first load
them all (seconds at 100,000). Here the same ranking is answered by SQLite from rows kept in
``.git/gitmem/index.sqlite`` (:mod:`gitmem.index`):

- per blob, keyed by its id (content never changes under a key): the memory's search terms with
  their counts (``postings``), its length, type, status, time and paths;
- per memory ref, a **view**: which blobs its tip holds, how many are active, their total length,
  and each term's document frequency among them. A view is moved from the tree it reflects to the
  ref's current tree by the tree diff (:meth:`gitmem.warm.Warm.diff`), so after a write, a merge or
  a pull it costs what changed. A ref seen for the first time starts from a copy of another view
  (branches share most of their memory), else from nothing (the first search after a clone, with a
  progress line on a terminal).

SQLite first orders the candidates by the score their postings bound (a posting carries its memory's
length, type, status and time; a term, the most times one memory holds it); the postings of one or two
words in most memories (of more, where memories written together hold them) are read best first instead
(``postings_impact``), so such a query costs what reaches the cut, not how many memories hold its words (among
exact ties it reads them newest first, as many as it keeps, as the newer id wins a tie). Only the memories whose bound
reaches the cut are scored in full, by :func:`~gitmem.search.rank`'s own functions on their rows (their
words' counts, length, type, time; a file memory's staleness), in its order, so to the same floats. So the answer is
:func:`~gitmem.search.rank`'s, score for score (``tests/test_postings.py`` compares them after random
writes, merges and branch switches). Where the index cannot answer (no file, busy, a view
with two memories of one id, inactive memories asked for) :func:`rank` returns None and the caller
ranks the loaded memories.
"""

from __future__ import annotations

import heapq
import sqlite3
import time
from collections import Counter, deque
from datetime import datetime, timezone
from itertools import chain, repeat
from typing import (
    TYPE_CHECKING, AbstractSet, Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple, TypeVar,
)

from .index import Index, batches, code_key, insert_rows
from .errors import GitmemError
from .model import AUTHOR_KINDS, TYPES, Memory, filter_path, matches, memory_path
from .repo import memory_ref
from .search import (
    Hit, core_terms, depth, epoch, fuse, idf, is_stale, match_of, memory_terms, path_factor, path_only_score,
    path_overlap, recency, term_score, tokenize, type_boosts, weight,
)
from .warm import Progress, placed

if TYPE_CHECKING:
    from .context import Element, Ranking
    from .store import Store

#: Views kept; the least recently used beyond this are dropped (each costs a row per memory).
VIEWS = 8
#: Past this many changed memories a view's counts are summed again in one pass, not row by row.
BULK = 2_000
#: A word in at most this share of memories is rare: memories without any rare word of a query are
#: ranked only if the best of those with one could be beaten (MaxScore).
RARE = 0.05
#: Bounds SQLite keeps at first (a top-k sort) when ranking the memories with some of a query's words.
TOP = 256
#: Candidates read from SQLite at a time, best first, until no later one can make the cut.
FETCH = 32
#: A query with at most this many common words reads their postings best first (:func:`_ranked`'s
#: ``by_impact``) as far as it pays; with more, the sum of their best bounds stays above what memories holding
#: some of them score, and reading best first scored tens of thousands (five words at 100,000 memories: 25,124
#: scored, 374 ms, against 296 and 172 ms bounding each memory in SQL; one or two words: 3-10x faster than SQL).
BEST_FIRST = 2
#: With more, it pays only among memories written together (an import: same words, counts, length, type and
#: time, tied on score): each step then reads only memories alike (one count of a word, type, length and time),
#: and past this many steps it gives way to the SQL bounds. An import is read in a few; memories written one
#: by one would take a step each (three words at 20,000 memories of one import: 31 scored, ~1 ms, not 20,000).
ALIKE = 32
#: How much reading best first may cost, in postings bounded in SQL (a memory scored in full costs about
#: SCORED of them), as a share of the words' postings, before it gives way to the SQL bounds.
IMPACT, SCORED = 0.5, 8
K1, B = 1.2, 0.75
T = TypeVar("T")


def rank(store: "Store", query: str, limit: int = 10, *, paths: Sequence[str] = (), types_first: Sequence[str] = (),
         only_types: Optional[Sequence[str]] = None, now: Optional[datetime] = None,
         at: Optional[str] = None, only_ids: Optional[AbstractSet[str]] = None) -> Optional[List[Hit]]:
    """:func:`gitmem.search.rank` of the store's active memories (at commit ``at``, default the tip),
    by words (no dense similarity), from the index; None when the index cannot answer."""
    when = now or datetime.now(timezone.utc)
    return _read(store, at, [], lambda db, view: _hits(store, db, view, *_ranked(
        store, db, view, query, limit, paths, types_first, only_types, when, only_ids=only_ids)))


def ranked_ids(store: "Store", query: str, limit: int, *, at: Optional[str] = None,
               exclude: AbstractSet[str] = frozenset()) -> Optional[List[Tuple[str, str]]]:
    """The ids of :func:`rank`'s hits but those ``exclude`` names (the words still weighed over every
    memory), in order, with their blobs, reading no memory but the file memories among the candidates
    (whose staleness lowers a score): for a caller that reads only the few it keeps."""
    when = datetime.now(timezone.utc)
    return _read(store, at, [], lambda db, view: [(c.id, c.blob) for c in _ranked(
        store, db, view, query, limit, (), (), None, when, exclude)[0]])


class Dense(NamedTuple):
    """The dense half of a hybrid recall at one commit: every active memory's id, type and blob, in id
    order, the question's similarity to each (what :func:`gitmem.search.rank` takes as ``similarity``),
    and the positions of the neighbours it fuses, nearest first (:func:`gitmem.recall.dense`)."""

    ids: Sequence[str]
    types: Sequence[str]
    blobs: Sequence[str]
    values: Sequence[float]
    nearest: Sequence[int]


def hybrid(store: "Store", query: str, limit: int, dense: Dense, *, at: str, paths: Sequence[str] = (),
           types_first: Sequence[str] = (), only_types: Optional[Sequence[str]] = None,
           now: Optional[datetime] = None, only_ids: Optional[AbstractSet[str]] = None) -> Optional[List[Hit]]:
    """:func:`gitmem.search.rank` of the active memories at commit ``at`` fused with ``dense`` (computed
    for the same commit), from the index: the words' first :func:`gitmem.search.depth` and the dense
    neighbours, each memory read only if it makes the cut; None when the index cannot answer."""
    when = now or datetime.now(timezone.utc)
    return _read(store, at, [], lambda db, view: _fused(store, db, view, query, limit, dense, paths, types_first,
                                                         only_types, when, only_ids))


def word_weights(store: "Store", at: str, terms: Sequence[str]) -> Optional[Dict[str, float]]:
    """Each of ``terms`` that an active memory at commit ``at`` uses, with its weight among them (the idf
    :class:`gitmem.search.WordIndex` gives the loaded memories); None when the index cannot answer."""
    def read(db: sqlite3.Connection, view: int) -> Dict[str, float]:
        n = db.execute("SELECT n FROM views WHERE view=?", (view,)).fetchone()[0]
        return {t: idf(n, df) for t, (_, df) in _frequencies(db, view, terms).items()}

    return _read(store, at, {}, read)


def active(store: "Store", at: str) -> Optional[List[Tuple[str, str, str]]]:
    """(id, type, blob) of every active memory at commit ``at``, by id, from the index; None when it
    cannot answer."""
    return _read(store, at, [], lambda db, view: db.execute(
        "SELECT m.id, m.type, d.blob FROM members m JOIN docs d ON d.doc=m.doc WHERE m.view=? AND m.active=1 "
        "ORDER BY m.id", (view,)).fetchall())


#: A memory of a view: its type, whether it is active, and its doc number in the index.
Member = Tuple[str, bool, int]


def members(store: "Store", at: Optional[str] = None) -> Optional[Dict[str, Member]]:
    """id -> :data:`Member` of every valid memory at commit ``at`` (default the tip), from the index;
    None when it cannot answer."""
    def read(db: sqlite3.Connection, view: int) -> Dict[str, Member]:
        return {i: (kind, bool(active), doc) for i, kind, active, doc in db.execute(
            "SELECT id, type, active, doc FROM members WHERE view=? ORDER BY id", (view,))}

    return _read(store, at, {}, read)


class IndexedMemories:
    """The memories of one commit, read from the derived index as they are asked for: ids and types
    of the active ones, whole memories only by id. A :class:`gitmem.context.MemoryView`.

    The rows are the view of the store's ref brought to commit ``at`` (checked on every read);
    ``changed`` stands in for them where another commit differs (an anchor read through its tip's
    view: id -> the memory there, None where it has none), ``tree`` names the memories these are
    (what :meth:`remember` keeps is kept under it). Nothing is held between calls, so a view of
    100,000 memories costs what each call reads."""

    def __init__(self, store: "Store", at: str, tree: Optional[str] = None,
                 changed: Optional[Dict[str, Optional[Memory]]] = None):
        self.store, self.at, self.tree, self.changed = store, at, tree, changed or {}
        self._blobs: Dict[str, str] = {}  # id -> blob at ``at``, of those a ranking listed

    def _sql(self, work: Callable[[sqlite3.Connection, int], T]) -> T:
        out = _read(self.store, self.at, None, work)
        if out is None:
            raise GitmemError("the derived index could not be read (busy, or rebuilt under this command); "
                              "run the command again")
        return out

    def answers(self) -> bool:
        """Whether the index can answer for this commit (its view brought there, as every read does)."""
        return _read(self.store, self.at, None, lambda db, view: True) is not None

    def count(self) -> int:
        """How many valid memories the commit holds."""
        def read(db: sqlite3.Connection, view: int) -> Tuple[int, Set[str]]:
            listed: Set[str] = set()
            for chunk, marks in batches(list(self.changed)):
                listed.update(i for (i,) in db.execute(f"SELECT id FROM members WHERE view=? AND id IN ({marks})",
                                                       [view, *chunk]))
            return db.execute("SELECT COUNT(*) FROM members WHERE view=?", (view,)).fetchone()[0], listed

        n, listed = self._sql(read)  # one read: the view cannot move between the count and the lookups
        return n + sum((m is not None) - (i in listed) for i, m in self.changed.items())

    def ids(self, type: Optional[str] = None, active: Optional[bool] = None,
            newest: Optional[int] = None) -> List[str]:
        """Ids of the memories of ``type`` (None: any) that are (or are not) ``active`` (None: either), by id;
        ``newest``: only the newest that many (a list of the newest 40 decisions of 100,000 memories reads 40 ids,
        not 25,000)."""
        assert newest is None or not self.changed, "read through a commit's own view"
        where, args = _members_where(type, active)
        if newest is not None:
            return self._sql(lambda db, view: [i for (i,) in db.execute(
                f"SELECT id FROM members WHERE view=?{where} ORDER BY id DESC LIMIT ?", [view, *args, newest])])[::-1]
        listed = self._sql(lambda db, view: [i for (i,) in db.execute(
            f"SELECT id FROM members WHERE view=?{where} ORDER BY id", [view, *args])])
        if not self.changed:
            return listed
        kept = [i for i in listed if i not in self.changed]
        extra = [i for i, m in self.changed.items() if m is not None and (type is None or m.type == type)
                 and (active is None or (m.status == "active") == active)]
        return sorted(kept + extra)

    def newest_active(self, before: Optional[str], limit: int) -> List[str]:
        def read(below: Optional[str]) -> List[str]:
            older, args = (" AND id<?", [below]) if below is not None else ("", [])
            return self._sql(lambda db, view: [i for (i,) in db.execute(
                f"SELECT id FROM members WHERE view=? AND active=1{older} ORDER BY id DESC LIMIT ?",
                [view, *args, limit])])

        while True:
            page = read(before)
            floor = page[-1] if len(page) == limit else None  # the page says nothing of the view below it
            # From ``floor`` up, the commit's: the view's but those that differ, and those active here.
            ids = {i for i in page if i not in self.changed} | {
                i for i, m in self.changed.items() if m is not None and m.status == "active"
                and (before is None or i < before) and (floor is None or i >= floor)}
            if ids or floor is None:
                return sorted(ids, reverse=True)[:limit]
            before = floor

    def having(self, terms: Sequence[str], type: Optional[str] = None, active: Optional[bool] = None,
               at_most: Optional[int] = None) -> Optional[List[str]]:
        """:meth:`ids`, of only the memories whose search terms include the rarest of ``terms``: a superset of
        those with a tag made of them (a tag's words are among its memory's terms; the caller checks the tag),
        found by the postings, not by reading each memory. None when more than ``at_most`` active memories
        have even the rarest (reading the newest memories finds a few of them sooner)."""
        assert not self.changed, "read through a commit's own view"
        where, args = _members_where(type, active, "m.")

        def read(db: sqlite3.Connection, view: int) -> Tuple[bool, List[str]]:  # (too common, the ids)
            wanted = list(dict.fromkeys(terms))
            # by how many active memories have each (inactive ones are not counted, but have postings)
            known = db.execute(f"SELECT t.tid, COALESCE(v.df, 0) FROM terms t LEFT JOIN view_df v ON v.view=? AND "
                               f"v.tid=t.tid WHERE t.term IN ({','.join('?' * len(wanted))}) ORDER BY 2",
                               [view, *wanted]).fetchall()
            if len(known) < len(wanted):
                return False, []  # a word no memory has
            tid, df = known[0]
            if at_most is not None and df > at_most:
                return True, []
            return False, [i for (i,) in db.execute(f"SELECT m.id FROM postings p JOIN members m ON m.view=? AND "
                                                    f"m.doc=p.doc WHERE p.tid=?{where} ORDER BY m.id", (view, tid, *args))]

        common, ids = self._sql(read)
        return None if common else ids

    def remember(self, key: str, compute: Callable[[], Dict[str, Any]]) -> Dict[str, Any]:
        from .context import ELEMENT_CODE  # the caller's module: loaded

        key = f"{key} {code_key(*ELEMENT_CODE)}"  # choosing, rendering, counting
        kept = self.store.warm.index.memo(self.tree, key) if self.tree else None
        if kept is None:
            kept = compute()
            if self.tree:
                self.store.warm.index.put_memo(self.tree, key, kept)
        return kept

    def ranked(self, text: str, limit: int, exclude: AbstractSet[str] = frozenset()) -> Ranking:
        """At least the best ``limit`` active memories for ``text`` but ``exclude`` (ids), from the index where it can."""
        from .context import Loaded, Ranking  # a context's module: search alone need not import it

        listed = None if self.changed else ranked_ids(self.store, text, limit, at=self.at, exclude=exclude)
        if listed is None:
            memories = self.get([i for i, _ in self.active()])
            return Loaded(memories, self.store.current_blobs(memories.values())).ranked(text, limit, exclude)
        self._blobs.update(listed)  # what the tail renders next: its elements are then read by blob alone
        return Ranking(text, tuple(i for i, _ in listed), len(listed) < limit)

    def active(self) -> List[Tuple[str, str]]:
        """(id, type) of every active memory, by id."""
        listed = self._sql(lambda db, view: db.execute(
            "SELECT id, type FROM members WHERE view=? AND active=1 ORDER BY id", (view,)).fetchall())
        if not self.changed:
            return listed
        kept = [row for row in listed if row[0] not in self.changed]
        return sorted(kept + [(i, m.type) for i, m in self.changed.items() if m is not None and m.status == "active"])

    def active_ids(self) -> List[str]:
        return self.ids(active=True)

    def get(self, ids: Sequence[str]) -> Dict[str, Memory]:
        """Those of ``ids`` there are, parsed (from this process, the index, else git)."""
        out = {i: m for i in ids if i in self.changed and (m := self.changed[i]) is not None}
        wanted = [i for i in ids if i not in self.changed]

        def read(db: sqlite3.Connection, view: int) -> List[Tuple[str, str, str]]:
            rows: List[Tuple[str, str, str]] = []
            for chunk, marks in batches(wanted):
                rows += db.execute(f"SELECT m.id, m.type, d.blob FROM members m JOIN docs d ON d.doc=m.doc "
                                   f"WHERE m.view=? AND m.id IN ({marks})", [view, *chunk]).fetchall()
            return rows

        rows = self._sql(read) if wanted else []
        parsed = self.store.warm.parse(self.store.repository, [(memory_path(kind, i), b) for i, kind, b in rows],
                                       self.store.read_ref())
        for i, _, b in rows:
            found = parsed.get(b)
            if not isinstance(found, Memory) or found.id != i:  # the index was rebuilt under this command
                raise GitmemError("the derived index changed while this command read it; run the command again")
            out[i] = found
        return out

    def rendered(self, ids: Sequence[str]) -> Dict[str, "Element"]:
        """:meth:`get`'s memories as contexts render them, kept in the index by blob: reading, rendering and
        counting the few hundred memories of a context's tail cost more than the rest of its assembly."""
        from .context import ELEMENT_CODE, Element, element

        code = code_key(*ELEMENT_CODE)
        out = {i: element(m) for i in ids if i in self.changed and (m := self.changed[i]) is not None}
        wanted = [i for i in ids if i not in self.changed]

        known = {self._blobs[i]: i for i in wanted if i in self._blobs}
        unknown = [i for i in wanted if i not in self._blobs]

        def read(db: sqlite3.Connection, view: int) -> List[Tuple[str, str, Optional[str], Optional[int]]]:
            rows: List[Tuple[str, str, Optional[str], Optional[int]]] = []
            for chunk, marks in batches(list(known)):  # a page per element, not three: a cold read's cost
                found = {b: (text, tokens) for b, text, tokens in db.execute(
                    f"SELECT blob, text, tokens FROM elements WHERE code=? AND blob IN ({marks})", [code, *chunk])}
                rows += [(known[b], b, *found.get(b, (None, None))) for b in chunk]
            for chunk, marks in batches(unknown):
                rows += db.execute(f"SELECT m.id, d.blob, e.text, e.tokens FROM members m JOIN docs d ON d.doc=m.doc "
                                   f"LEFT JOIN elements e ON e.code=? AND e.blob=d.blob WHERE m.view=? AND m.id IN "
                                   f"({marks})", [code, view, *chunk]).fetchall()
            return rows

        rows = self._sql(read) if wanted else []
        out.update((i, Element(i, text, tokens)) for i, _, text, tokens in rows if text is not None and tokens is not None)
        missing = {i: blob for i, blob, text, _ in rows if text is None}
        made = {i: element(m) for i, m in self.get(list(missing)).items()}
        self.store.warm.index.put_elements(code, [(missing[i], e.text, e.tokens) for i, e in made.items()])
        return {**out, **made}

    def touching(self, paths: Sequence[str]) -> Set[str]:
        """Ids of the active memories with a path that is, holds or is held by one of ``paths``."""
        near, args = _near(paths, siblings=False)
        found = {m.id for m in self.changed.values() if m is not None and m.status == "active"
                 and any(matches(m, path=p, status=None) for p in paths)}
        if not near:
            return found
        listed = self._sql(lambda db, view: {i for (i,) in db.execute(
            f"SELECT m.id FROM doc_paths dp CROSS JOIN members m ON m.view=? AND m.doc=dp.doc "
            f"WHERE m.active=1 AND ({near})", [view, *args])})  # CROSS JOIN: the paths first, see _path_overlaps
        return found | {i for i in listed if i not in self.changed}

    def origins(self, type: Optional[str] = None, active: Optional[bool] = None) -> Dict[Tuple[str, str], List[str]]:
        """The ids of the memories :meth:`ids` gives by their (author kind, source), as the view's members keep
        them, so a list by author kind or source reads only the memories it shows. From the members alone: through
        each one's doc and blob row, 100,000 memories took 0.3 s; read here, 0.03 s."""
        assert not self.changed, "read through a commit's own view"
        where, args = _members_where(type, active)
        rows = self._sql(lambda db, view: db.execute(
            f"SELECT kind, source, group_concat(id, ' ') FROM members WHERE view=?{where} GROUP BY 1, 2",
            [view, *args]).fetchall())
        return {(AUTHOR_KINDS[kind], source): ids.split(" ") for kind, source, ids in rows}


def _members_where(type: Optional[str], active: Optional[bool], table: str = "") -> Tuple[str, List[Any]]:
    """The conditions on a view's members of a ``type`` and (not) ``active`` (None: any), and their values."""
    asked = [(c, v) for c, v in (("type", type), ("active", active)) if v is not None]
    return "".join(f" AND {table}{c}=?" for c, _ in asked), [v if c == "type" else int(bool(v)) for c, v in asked]


def drop_view(store: "Store") -> None:
    """Forget the view of the ref the store reads (the next ranking builds it again)."""
    branch, _ = store.read_from()
    if branch is None:
        return

    def drop(db: sqlite3.Connection) -> None:
        for (view,) in db.execute("SELECT view FROM views WHERE ref=?", (memory_ref(branch),)).fetchall():
            _drop(db, view)

    store.warm.index.run(drop, write=True)


def _read(store: "Store", at: Optional[str], empty: Any, work: Callable[[sqlite3.Connection, int], Any]) -> Any:
    """``work(connection, view)`` on the view of the store's ref brought to commit ``at`` (default
    the tip), in one read that finds it still there; ``empty`` when there is no memory, None when the
    index cannot answer."""
    branch, tip = store.read_from()
    tip = at or tip
    if branch is None or tip is None:
        return empty
    root = store.snapshot(tip).tree_id
    if root is None:
        return empty
    ref = memory_ref(branch)
    with store.warm.index.held():  # threads of this process reading other commits wait their turn
        for _ in range(3):  # another process may move the view between our update and our read
            view = _update(store, ref, root)
            if view is None:
                return None

            def read(db: sqlite3.Connection, view: int = view) -> Any:
                if db.execute("SELECT tree FROM views WHERE view=?", (view,)).fetchone() != (root,):
                    return _MOVED
                return work(db, view)

            answer = store.warm.index.run(read, write=False)
            if answer is not _MOVED:
                return answer
    return None


_MOVED: Any = object()  # the view moved under the read: update it again


# --- keeping a view in step with its ref ---------------------------------------------


def _update(store: "Store", ref: str, root: str) -> Optional[int]:
    """The id of ``ref``'s view, brought to tree ``root``; None if it cannot be."""
    index = store.warm.index
    read = index.run(lambda db: (db.execute("SELECT view, tree, usable FROM views WHERE ref=?", (ref,)).fetchone(),
                                 db.execute("SELECT view, tree FROM views WHERE usable=1 AND ref<>? AND tree IS NOT NULL "
                                            "ORDER BY used DESC LIMIT 1", (ref,)).fetchone()), write=False)
    if read is None:
        return None
    row, other = read
    if row is not None and row[1] == root:
        return row[0] if row[2] else None
    # Start from this ref's view, else a copy of the last used one (branches share most memory), else nothing.
    copy = other if (row is None or not row[2]) else None
    start = row[1] if row is not None and row[2] else (other[1] if other else None)
    try:
        added, removed = store.warm.diff(store.repository, start, root)
        parsed = store.warm.parse(store.repository, added, ref)
    except KeyError as e:  # a tree the repository lacks (a partial clone's, say): damage or unfetched, said in one line
        raise store._damaged(store.tip(), e) from None
    finally:
        index.flush()
    # A view's members are the entries that are memories at their paths: a stray copy of a blob under
    # another path, added or removed, leaves the memory at its own path as it is.
    fresh = [(blob, m) for path, blob in added if isinstance(m := placed(parsed[blob], path), Memory)]
    known = _doc_numbers_of(index, [b for b, _ in fresh])
    new_docs = [(blob, m) for blob, m in fresh if blob not in known]
    progress = Progress(len(new_docs), "memory for search")
    try:
        return index.run(lambda db: _apply(db, ref, row, copy, start, root, fresh, new_docs, removed, progress),
                         write=True)
    finally:
        progress.done()


def _doc_numbers_of(index: Index, blobs: Sequence[str]) -> Dict[str, int]:
    return index.run(lambda db: _doc_numbers(db, blobs), write=False) or {}


def _doc_numbers(db: sqlite3.Connection, blobs: Sequence[str]) -> Dict[str, int]:
    out: Dict[str, int] = {}
    if db.execute("SELECT 1 FROM docs LIMIT 1").fetchone() is None:
        return out  # a new index: a first search looked for 100,000 blobs in 0.15 s to find none
    for chunk, marks in batches(blobs):
        out.update(db.execute(f"SELECT blob, doc FROM docs WHERE blob IN ({marks})", chunk))
    return out


def _members_among(db: sqlite3.Connection, entries: Sequence[Tuple[str, str]]) -> Dict[str, int]:
    """blob -> doc of those ``entries`` (path, blob) that are memories at their paths (their docs' type and
    id name the path), as a view counts its members: a stray copy's removal leaves the memory alone."""
    rows: Dict[str, Tuple[int, str]] = {}
    for chunk, marks in batches([b for _, b in entries]):
        rows.update((b, (doc, memory_path(kind, i))) for b, doc, kind, i in db.execute(
            f"SELECT blob, doc, type, id FROM docs WHERE blob IN ({marks})", chunk))
    return {b: rows[b][0] for p, b in entries if b in rows and rows[b][1] == p}


def _apply(db: sqlite3.Connection, ref: str, row: Optional[Tuple[Any, ...]], copy: Optional[Tuple[Any, ...]],
           start: Optional[str], root: str, fresh: Sequence[Tuple[str, Memory]],
           new_docs: Sequence[Tuple[str, Memory]], removed: Sequence[Tuple[str, str]],
           progress: Progress) -> Optional[int]:
    """Under the write lock: add the docs the index lacks, then move ``ref``'s view from ``start``
    to ``root``; None (nothing written) if another process moved either view first."""
    if db.execute("SELECT view, tree, usable FROM views WHERE ref=?", (ref,)).fetchone() != row:
        return None
    if copy is not None and db.execute("SELECT view, tree FROM views WHERE view=?", (copy[0],)).fetchone() != copy:
        return None
    _add_docs(db, new_docs, progress)
    docs = _doc_numbers(db, [b for b, _ in fresh])
    gone = _members_among(db, removed)
    if row is None:
        view: int = db.execute("INSERT INTO views(ref, tree, n, total, usable, used) VALUES (?, NULL, 0, 0, 1, 0)",
                               (ref,)).lastrowid or 0
    else:
        view = row[0]
        if not row[2]:  # a view that could not answer is built again
            _drop(db, view, keep_row=True)
            db.execute("UPDATE views SET n=0, total=0, usable=1 WHERE view=?", (view,))
    if copy is not None:
        db.execute("INSERT INTO members SELECT ?, doc, id, type, active, kind, source FROM members WHERE view=?",
                   (view, copy[0]))
        db.execute("INSERT INTO view_df SELECT ?, tid, df FROM view_df WHERE view=?", (view, copy[0]))
        db.execute("UPDATE views SET (n, total) = (SELECT n, total FROM views WHERE view=?) WHERE view=?",
                   (copy[0], view))
    bulk = len(fresh) + len(removed) > BULK
    for doc in gone.values():
        if db.execute("DELETE FROM members WHERE view=? AND doc=?", (view, doc)).rowcount and not bulk:
            _count(db, view, doc, -1)
    try:
        db.executemany("INSERT INTO members VALUES (?, ?, ?, ?, ?, ?, ?)",
                       [(view, docs[b], m.id, m.type, int(m.status == "active"), AUTHOR_KINDS.index(m.author.kind),
                         m.source) for b, m in fresh])
    except sqlite3.IntegrityError:  # two memories with one id: only a full load reports that rightly
        db.execute("UPDATE views SET tree=?, usable=0, used=? WHERE view=?", (root, time.time(), view))
        return None
    if bulk:  # summed again from each active member's word list (docs.tids), not by a join over every posting
        n = total = 0
        df: Counter = Counter()
        for length, tids in db.execute("SELECT d.length, d.tids FROM members m JOIN docs d ON d.doc=m.doc "
                                       "WHERE m.view=? AND d.active=1", (view,)):
            n, total = n + 1, total + length
            df.update(tids.split(","))
        df.pop("", None)
        db.execute("DELETE FROM view_df WHERE view=?", (view,))
        db.executemany("INSERT INTO view_df VALUES (?, ?, ?)", [(view, int(t), k) for t, k in df.items()])
        db.execute("UPDATE views SET n=?, total=? WHERE view=?", (n, total, view))
    else:
        for blob, _ in fresh:
            _count(db, view, docs[blob], +1)
    db.execute("UPDATE views SET tree=?, used=? WHERE view=?", (root, time.time(), view))
    for (old,) in db.execute("SELECT view FROM views ORDER BY used DESC LIMIT -1 OFFSET ?", (VIEWS,)).fetchall():
        _drop(db, old)
    return view


def _drop(db: sqlite3.Connection, view: int, keep_row: bool = False) -> None:
    """Delete a view's members and counts, and (unless ``keep_row``) the view itself."""
    for table in ("members", "view_df") if keep_row else ("members", "view_df", "views"):
        db.execute(f"DELETE FROM {table} WHERE view=?", (view,))


def _count(db: sqlite3.Connection, view: int, doc: int, sign: int) -> None:
    """Count one doc into (``sign`` +1) or out of (-1) a view's active totals and word frequencies."""
    active, length, tids = db.execute("SELECT active, length, tids FROM docs WHERE doc=?", (doc,)).fetchone()
    if not active:
        return
    db.execute("UPDATE views SET n=n+?, total=total+? WHERE view=?", (sign, sign * length, view))
    db.executemany("INSERT INTO view_df VALUES (?, ?, ?) ON CONFLICT(view, tid) DO UPDATE SET df=df+excluded.df",
                   [(view, int(t), sign) for t in tids.split(",") if t])
    if sign < 0:
        db.execute("DELETE FROM view_df WHERE view=? AND df<=0", (view,))


def _add_docs(db: sqlite3.Connection, new_docs: Sequence[Tuple[str, Memory]], progress: Progress) -> None:
    """Rows for blobs the index has not seen: their words and counts, paths, and what ranking reads.
    One statement per table per chunk (doc numbers given here, as SQLite would give them), so a
    first search after a clone does not pay a round trip per memory; the words are counted a chunk at a
    time (held for every memory at once, a first search at 100,000 peaked over 300 MB).

    A posting crosses from Python as three numbers (word, doc, count), hundreds of rows a statement, into a
    table of this connection's; at the end SQLite adds each one's doc's type, status, length and time and writes
    them all in key order: at 100,000 memories, 1.7 s of the build's 4.4. Sorted in Python, as 7-tuples a
    statement each, chunk by chunk into the middle of the earlier chunks' words, they took 2.7 s."""
    chunk_size = 5_000
    have = _doc_numbers(db, [blob for blob, _ in new_docs])  # another process's, since they were looked for
    todo = [(blob, m) for blob, m in dict(new_docs).items() if blob not in have]
    first = db.execute("SELECT COALESCE(MAX(doc), 0) + 1 FROM docs").fetchone()[0]
    db.execute("CREATE TEMP TABLE IF NOT EXISTS gm_postings(tid INTEGER NOT NULL, doc INTEGER NOT NULL, "
               "tf INTEGER NOT NULL)")
    for start in range(0, len(todo), chunk_size):
        chunk = [(blob, m, Counter(memory_terms(m))) for blob, m in todo[start:start + chunk_size]]
        most: Dict[str, int] = {}  # each word's most times in one of these memories
        for _, _, counts in chunk:
            for t, n in counts.items():
                if most.get(t, 0) < n:
                    most[t] = n
        words = sorted(most)
        db.executemany("INSERT INTO terms(term, most_tf) VALUES (?, ?) ON CONFLICT(term) DO UPDATE SET "
                       "most_tf=MAX(most_tf, excluded.most_tf)", [(t, most[t]) for t in words])
        tid: Dict[str, int] = {}
        for batch, marks in batches(words):
            tid.update(db.execute(f"SELECT term, tid FROM terms WHERE term IN ({marks})", batch))
        docs: List[Tuple[Any, ...]] = []
        postings: List[int] = []  # (tid, doc, tf) of each posting, end to end
        paths: List[Tuple[str, str, int]] = []
        for doc, (blob, m, counts) in enumerate(chunk, first + start):
            tids, tfs = list(map(tid.__getitem__, counts)), list(counts.values())
            active, length, when = int(m.status == "active"), sum(tfs), epoch(m.updated or m.created)
            docs.append((doc, blob, m.id, m.type, active, length, when, ",".join(map(str, tids)),
                         ",".join(map(str, tfs))))
            postings += chain.from_iterable(zip(tids, repeat(doc), tfs))
            paths += [(p, p.rsplit("/", 1)[0], doc) for p in dict.fromkeys(m.paths)]
        db.executemany("INSERT INTO docs(doc, blob, id, type, active, length, epoch, tids, tfs) "
                       "VALUES (?,?,?,?,?,?,?,?,?)", docs)
        insert_rows(db, "temp.gm_postings", 3, postings)
        db.executemany("INSERT OR IGNORE INTO doc_paths VALUES (?, ?, ?)", paths)
        progress.step(len(have) + min(start + chunk_size, len(todo)))
    db.execute(f"INSERT INTO postings SELECT p.tid, p.doc, p.tf, {_TYPE_NO}, d.active, d.length, d.epoch "
               "FROM temp.gm_postings p JOIN docs d ON d.doc=p.doc ORDER BY p.tid, p.doc", TYPES)
    db.execute("DELETE FROM temp.gm_postings")


#: A doc's type as a posting numbers it (its place in :data:`gitmem.model.TYPES`, bound as the arguments).
_TYPE_NO = f"CASE d.type {' '.join(f'WHEN ? THEN {i}' for i in range(len(TYPES)))} END"


# --- answering a query from a view -------------------------------------------------

#: One candidate: doc number, blob, memory id, type, length, time (seconds since the epoch) and the BM25
#: sum of its words (None: it shares only a path).
_Row = Tuple[int, str, str, str, int, Optional[float], Optional[float]]
#: The query's words the view has: (term id, weight), in the query's order.
_Terms = List[Tuple[int, float]]


class _Scored(NamedTuple):
    """A memory scored from its row in the index: read whole only if it makes the cut."""

    doc: int
    blob: str
    id: str
    type: str
    score: float
    stale: bool


def _ranked(store: "Store", db: sqlite3.Connection, view: int, query: str, limit: int,
            paths: Sequence[str], types_first: Sequence[str], only_types: Optional[Sequence[str]],
            now: datetime, exclude: AbstractSet[str] = frozenset(),
            only_ids: Optional[AbstractSet[str]] = None) -> Tuple[List[_Scored], _Terms, int]:
    """The best ``limit`` of ``only_types`` and ``only_ids`` (None: any) but those ``exclude`` names, best first,
    the query's words, and how many active memories the view has (every one weighs the words)."""
    n, total = db.execute("SELECT n, total FROM views WHERE view=?", (view,)).fetchone()
    terms = list(dict.fromkeys(tokenize(query)))
    wanted = [q for q in map(filter_path, paths) if q]
    if not n or not (terms or wanted) or limit <= 0:
        return [], [], n
    limit = min(limit, n)  # no more hits than memories, and SQLite's LIMIT takes no int past 64 bits (`-n 1e20`)
    avg = total / n
    known = _frequencies(db, view, terms)  # term -> (tid, df), in the query's order
    weights = {t: idf(n, df) for t, (_, df) in known.items()}
    keep = list(only_types) if only_types is not None else []
    kept = f" AND d.type IN ({','.join('?' * len(keep))})" if only_types is not None else ""
    allowed = ""  # only the docs of ``only_ids``, kept in a temporary table for this read
    if only_ids is not None:
        db.execute("CREATE TEMP TABLE IF NOT EXISTS gm_allowed(doc INTEGER PRIMARY KEY)")
        db.execute("DELETE FROM temp.gm_allowed")
        for ids, marks in batches(sorted(only_ids)):
            db.execute(f"INSERT INTO temp.gm_allowed SELECT doc FROM members WHERE view=? AND id IN ({marks})",
                       [view, *ids])
        allowed = " AND {}.doc IN (SELECT doc FROM temp.gm_allowed)"
        kept += allowed.format("d")
    boosts = type_boosts(types_first)
    overlap = _path_overlaps(db, view, wanted, kept, keep) if wanted else {}
    if overlap:
        db.execute("CREATE TEMP TABLE IF NOT EXISTS gm_overlap(doc INTEGER PRIMARY KEY, overlap REAL NOT NULL)")
        db.execute("DELETE FROM temp.gm_overlap")
        db.executemany("INSERT INTO temp.gm_overlap VALUES (?, ?)", overlap.items())
    tids = [tid for tid, _ in known.values()]
    wanted_tids = {str(tid): tid for tid in tids}
    in_order = [(tid, weights[t]) for t, (tid, _) in known.items()]  # each word's id and weight
    path = "COALESCE((SELECT 1 + 0.6 * g.overlap FROM temp.gm_overlap g WHERE g.doc=d.doc), 1.0) * " \
        if overlap else ""

    def score_in_full(docs: Sequence[int]) -> None:
        """Score ``docs`` with :func:`gitmem.search.rank`'s own functions on their rows in the index (their
        words' counts, length, type and time), adding the words' shares in the query's order as rank does."""
        for chunk, marks in batches(docs):
            rows = db.execute(f"SELECT d.doc, d.blob, d.id, d.type, d.length, d.epoch, d.tids, d.tfs FROM docs d "
                              f"JOIN members m ON m.view=? AND m.doc=d.doc WHERE d.doc IN ({marks}) AND d.active=1"
                              f"{kept}", [view, *chunk, *keep]).fetchall()
            consider([(*r[:6], _base(_counts(r[6], r[7], wanted_tids), r[4])) for r in rows])

    def _base(mine: Mapping[int, int], length: int) -> Optional[float]:
        """The BM25 sum of a memory's counts ``mine`` of the query's words: None if it has none."""
        base: Optional[float] = None
        for tid, w in in_order:
            if tid in mine:
                base = (base or 0.0) + term_score(w, mine[tid], length, avg, K1, B)
        return base

    best: List[Tuple[float, str, int]] = []  # the best ``limit`` so far, worst first
    found: Dict[int, _Scored] = {}
    current: Dict[str, Optional[str]] = {}  # the blob each file memory's file has now, by path
    floor = 1.0  # what a memory that only shares a path scores from: half the weakest word match
    factors: Dict[Tuple[str, Optional[float], bool], float] = {}

    def factor_of(kind: str, when: Optional[float], stale: bool) -> float:
        """:func:`gitmem.search.weight` of a memory of type ``kind`` written at ``when``: kept, as many memories share
        a type and a time (written together)."""
        if (kind, when, stale) not in factors:
            factors[kind, when, stale] = weight(kind, when, boosts, now, stale)
        return factors[kind, when, stale]

    def consider(rows: Sequence[_Row]) -> None:
        rows = [r for r in rows if r[0] not in found and r[2] not in exclude]
        # The row has all a score needs but a file memory's staleness (its file may have changed since).
        files = [(memory_path(r[3], r[2]), r[1]) for r in rows if r[3] == "file"]
        memories = store.warm.parse(store.repository, files, store.read_ref()) if files else {}
        current.update(store.current_blobs(m for m in memories.values() if isinstance(m, Memory)
                                           and m.paths and m.paths[0] not in current))  # each file read once
        for doc, blob, mid, kind, _, when, base in rows:
            stale = False
            if kind == "file":
                m = memories[blob]
                if not isinstance(m, Memory):
                    continue
                stale = is_stale(m, current)
            # rank's operations in rank's order: the words' sum, times the path's factor, times the memory's.
            score = (path_only_score(overlap[doc], floor) if base is None  # it shares a path, no word
                     else base * path_factor(overlap[doc]) if doc in overlap else base) * factor_of(kind, when, stale)
            found[doc] = _Scored(doc, blob, mid, kind, score, stale)
            key = (score, mid, doc)  # ties: the newer id first, as rank does (str order is code point order)
            if len(best) < limit:
                heapq.heappush(best, key)
            elif key > best[0]:
                heapq.heapreplace(best, key)

    # A word's share grows with its count and shrinks with the memory's length, so in a memory of a given
    # length none exceeds its share at the most times any memory holds it (``terms.most_tf``). The
    # postings of some of the query's words so bound a memory's score: the shares of those words it has,
    # plus the most each other word could add at its length, times the other factors. The bound is
    # compared with a margin for rounding, so its constants are written into the SQL as they are.
    weight_of = dict(in_order)
    most_tf = dict(db.execute(f"SELECT tid, most_tf FROM terms WHERE tid IN ({','.join('?' * len(tids))})", tids))

    def norm(tf: str, length: str) -> str:
        """BM25's denominator for ``tf`` times a word in a memory of ``length`` words (SQL for both)."""
        return f"({tf} + {K1!r} * (1 - {B!r} + {B!r} * {length} / {avg!r}))"

    boost_no = " ".join(f"WHEN {TYPES.index(t)} THEN {w!r}" for t, w in boosts.items() if t in TYPES)
    kinds = (f" AND p.type_no IN ({','.join(str(TYPES.index(t)) for t in keep if t in TYPES)})"
             if only_types is not None else "") + allowed.format("p")
    looked: Set[int] = set()

    def stream(within: Sequence[int], also: Sequence[int]) -> None:
        """Consider the memories that have one of the words ``within``, best first, until no later one can
        make the cut: SQLite orders them by the score their postings of those words bound, plus the most
        each word of ``also`` outside ``within`` could add (one a memory may hold, unseen here), and only a
        memory whose bound reaches the cut is scored in full."""
        words = ",".join(f"({tid}, {weight_of[tid] * (K1 + 1)!r})" for tid in within)
        others = "".join(f" + {weight_of[t] * most_tf[t] * (K1 + 1)!r} / {norm(str(most_tf[t]), 'd.length')}"
                         for t in also if t not in within)
        # One word: a memory has one posting of it, nothing to group (the temporary b-tree cost a third).
        own = (f"q.w * p.tf / {norm('p.tf', 'p.length')} AS own FROM q JOIN postings p ON p.tid=q.tid WHERE "
               f"p.active=1{kinds}") if len(within) == 1 else \
            (f"SUM(q.w * p.tf / {norm('p.tf', 'p.length')}) AS own FROM q JOIN postings p ON p.tid=q.tid WHERE "
             f"p.active=1{kinds} GROUP BY p.doc")
        ranked = (f"WITH q(tid, w) AS (VALUES {words}), s AS (SELECT p.doc AS doc, p.type_no AS type_no, "
                  f"p.epoch AS epoch, p.length AS length, {own}) SELECT d.doc AS doc, (d.own{others}) * {path}("
                  f"{f'(CASE d.type_no {boost_no} ELSE 1.0 END)' if boost_no else '1.0'} * {_RECENCY_SQL}) AS most "
                  f"FROM s d")
        # First SQLite keeps only the best ``TOP`` bounds (a top-k sort, not a sort of every memory with the
        # word). Only if every one of them reached the cut (ties) does it sort, in a second pass, every bound
        # that still reaches it: the cut only rises, so no other can make it.
        passes = [(f"{ranked} ORDER BY most DESC LIMIT ?", lambda: [now.timestamp(), max(4 * limit, TOP)]),
                  (f"SELECT doc, most FROM ({ranked}) WHERE most * (1 + 1e-9) >= ? ORDER BY most DESC",
                   lambda: [now.timestamp(), best[0][0] if len(best) == limit else float("-inf")])]
        for n, (sql, args) in enumerate(passes):
            wanted = args()
            cursor = db.execute(sql, wanted)
            more = FETCH  # past the cut's first reading, how many bounds to read at a time: more while all reach it
            read, stopped = 0, False
            while rows := cursor.fetchmany(max(limit - len(best), more)):  # no more than could still make the cut
                read += len(rows)
                # A bound below the cut (with room for rounding) and every later one are out.
                head = rows if len(best) < limit else [r for r in rows if r[1] * (1 + 1e-9) >= best[0][0]]
                fresh = [doc for doc, _ in head if doc not in looked]
                looked.update(fresh)
                score_in_full(fresh)
                if len(head) < len(rows):
                    stopped = True
                    break
                if len(best) == limit:
                    more = min(2 * more, 256)
            cursor.close()
            if stopped or n == 0 and read < wanted[1]:  # a bound below the cut, or no memory left unread
                return

    if overlap:
        with_words = _term_counts(db, list(overlap), tids)
        path_only = [doc for doc in overlap if doc not in with_words]
        if path_only and known:
            # The weakest BM25 sum of a memory with a word: each word's share looked up by key and added in the
            # query's order, as term_score and rank's sum do, so the same bits (no SUM(), whose summation
            # differs between SQLite versions). In the order of the marks: weight, five constants, word.
            share = "COALESCE((SELECT ? * p.tf * (? + 1) / (p.tf + ? * (1 - ? + ? * d.length / ?)) FROM postings p " \
                "WHERE p.tid=? AND p.doc=d.doc), 0.0)"
            shares = [x for tid, w in in_order for x in (w, K1, K1, B, B, avg, tid)]
            weakest = db.execute(
                f"SELECT MIN({' + '.join([share] * len(known))}) FROM docs d JOIN members m ON m.view=? AND "
                f"m.doc=d.doc WHERE d.doc IN (SELECT doc FROM postings WHERE tid IN ({','.join('?' * len(tids))})) "
                f"AND d.active=1{kept}", [*shares, view, *tids, *keep]).fetchone()[0]
            floor = weakest if weakest is not None else 1.0
        for chunk, marks in batches(path_only):
            consider(db.execute(f"SELECT doc, blob, id, type, length, epoch, NULL FROM docs WHERE doc IN "
                                f"({marks})", chunk).fetchall())
    type_nos = [TYPES.index(t) for t in keep if t in TYPES] if only_types is not None else range(len(TYPES))

    def by_impact(within: Sequence[int]) -> bool:
        """Consider the memories that have one of the common words ``within`` by reading each word's postings
        best first (``postings_impact``: per type and count, shortest memory first, then newest; along such a
        run a word's share of a score only falls), a step of the run that bounds most at a time, each new
        memory scored in full, until the sum of the words' best bounds falls below the cut (the threshold
        algorithm): so it costs about what reaches the cut, not the words' frequencies. False when it cost
        :data:`IMPACT` of their postings without stopping (words seldom found together, whose bounds add up
        long after any memory's score), or, for more than :data:`BEST_FIRST` words, :data:`ALIKE` steps: the
        caller bounds every memory in SQL instead."""
        runs: List[_Run] = []
        for tid in within:
            for type_no in type_nos:
                tf = 0
                while (row := db.execute(_Run.FIRST, (tid, type_no, tf)).fetchone()) is not None:
                    tf = row[0]
                    runs.append(_Run(db, tid, type_no, tf, row[1:]))
        budget = max(TOP, int(IMPACT * sum(df for tid, df in known.values() if tid in within)))
        alike, steps = len(within) > BEST_FIRST, 0  # many words: only memories written together (ALIKE)
        lift = 1.0
        if overlap:  # memories about the paths in play: scored first if few, else each bound by the most a path adds
            if SCORED * len(overlap) <= budget:
                score_in_full(ahead := [doc for doc in overlap if doc not in looked])
                looked.update(ahead)
                budget -= SCORED * len(ahead)
            else:
                lift = path_factor(max(overlap.values()))

        shares: Dict[Tuple[Tuple[int, int, int], int, Optional[float]], float] = {}

        def share(run: _Run, length: int, when: Optional[float]) -> float:
            """What a posting of ``run`` in a memory of ``length`` words written at ``when`` adds to its score,
            at most (its type's boost and recency times the word's BM25 share; a path's factor). Kept: a run
            holds many memories of one length and time (those written together)."""
            key = (run.key, length, when)
            if key not in shares:
                tid, type_no, tf = run.key
                shares[key] = boosts.get(TYPES[type_no], 1.0) * lift * recency(when, now) * \
                    term_score(weight_of[tid], tf, length, avg, K1, B)
            return shares[key]

        def bound(run: _Run) -> float:
            """The most a posting at or past ``run``'s head adds: the head's share, or one of a memory a word
            longer written now (a run is in order of length, then of time within a length)."""
            assert run.head is not None
            return max(share(run, *run.head), share(run, run.head[0] + 1, now.timestamp()))

        def most(run: _Run) -> float:
            """The most a memory at ``run``'s head (its length and time) not seen yet can score, to the bit: rank's
            operations on the most times it may hold each other word ``within`` (none, or the count of a run of its
            type whose head is not past it: an unseen memory is at or past the head of each run of its words; one
            with a rarer word of the query was out before these were read), as a file memory that is not stale. A
            word's share grows with its count (by far more than a rounding) and a larger addend never gives a
            smaller float, so no other counts it may hold add up to more: one sum, not one per combination of
            counts (thousands for five words)."""
            assert run.head is not None
            tid, type_no, tf = run.key
            held = {t: max([0, *(r.key[2] for r in runs if r.key[:2] == (t, type_no) and r.at_or_before(run.head))])
                    for t in within if t != tid}
            length, when = run.head
            base = _base({**held, tid: tf}, length)
            assert base is not None
            return base * factor_of(TYPES[type_no], when, False)

        def newest(tied: Sequence[_Run], most_here: float) -> int:
            """Score in full the unseen memories at the heads of ``tied`` (runs at whose heads none scores above
            ``most_here``) newest first, while the cut is not full or one could still beat it (a tie goes to the
            newer id, and each one scored lifts the cut); then none left there can. The runs are read together, by
            id: one at a time, each would read those newer than a cut that the next then lifts. What it cost past
            filling the cut: any ranking scores as many memories as it keeps, and a limit of thousands (the context
            builder's second round) spent the budget on them, then bounded and scored every memory in SQL."""
            heads = " OR ".join(["(p.tid=? AND p.type_no=? AND p.tf=? AND p.length=? AND p.epoch IS ?)"] * len(tied))
            words = sorted({r.key[0] for r in tied})
            cursor = db.execute(
                f"SELECT m.doc, m.id FROM members m CROSS JOIN postings p ON p.tid IN ({','.join('?' * len(words))}) "
                f"AND p.doc=m.doc WHERE m.view=? AND m.active=1 AND m.id>? AND ({heads}) ORDER BY m.id DESC",
                [*words, view, best[0][1] if len(best) == limit else "",
                 *(x for r in tied for x in (*r.key, *(r.head or ())))])
            while len(best) < limit and (rows := cursor.fetchmany(limit - len(best))):  # each fills a place, or is out
                fresh = list(dict.fromkeys(doc for doc, i in rows if doc not in looked and i not in exclude))
                looked.update(fresh)  # (a memory is on a row per word it holds)
                score_in_full(fresh)
            cost = 0  # a row read each, and SCORED for each memory scored
            while (row := cursor.fetchone()) is not None and (most_here, row[1]) > best[0][:2]:
                cost += 1
                if row[0] not in looked and row[1] not in exclude:
                    looked.add(row[0])
                    score_in_full([row[0]])
                    cost += SCORED
            cursor.close()
            return cost

        def tied_with(run: _Run, most_here: float) -> List[_Run]:
            """The runs whose heads' unseen memories score at most ``most_here``, as ``run``'s do, to the bit."""
            return [r for r in runs if most(r) == most_here]

        def alike_at_least(tied: Sequence[_Run], tid: int, k: int) -> bool:
            """Whether the heads of those of ``tied`` of word ``tid`` hold ``k`` memories or more (written together)."""
            held = 0
            for r in (r for r in tied if r.key[0] == tid):  # of one word: a memory is at one head of them
                held += db.execute(f"SELECT COUNT(*) FROM ({_Run.ROWS} AND length=? AND epoch IS ? LIMIT ?)",
                                   (*r.key, *(r.head or ()), k - held)).fetchone()[0]
                if held >= k:
                    return True
            return False

        for run in runs:
            run.bound = bound(run)
        while runs:
            top: Dict[int, float] = {}
            for run in runs:
                top[run.key[0]] = max(top.get(run.key[0], 0.0), run.bound)
            full = len(best) == limit
            if full and sum(top.values()) * (1 + 1e-9) < best[0][0]:
                return True
            if budget <= 0:
                return False
            run = max(runs, key=lambda r: r.bound)
            moved = [run]
            most_here = most(run) if lift == 1.0 else None
            if full and most_here is not None and most_here < best[0][0]:
                run.skip()  # no memory at its head can make the cut: passed unread
            elif most_here is not None and (most_here == best[0][0] if full else alike_at_least(
                    tied_with(run, most_here), run.key[0], limit - len(best))):
                # Ties (memories written together, alike): of the memories at the heads tied with this one's only
                # those newer than the cut's can beat it, and only as many as it keeps; the rest are passed unread.
                # Else among ties no bound would ever fall below the cut, and every memory would be scored. A cut
                # not yet full is filled with the newest of them (if they are as many), which a tie keeps, not with
                # any of them, which the newest would then replace (three times the limit scored).
                moved = tied_with(run, most_here)
                budget -= newest(moved, most_here)
                for r in moved:
                    r.skip()
            elif alike and (steps := steps + 1) > ALIKE:
                return False
            else:
                rows = run.take(run.step if full else limit - len(best), alike)  # no more than could make the cut yet
                if full:
                    run.step = min(2 * run.step, 256)
                # A memory scores at most its share here plus the other words' best bounds (its postings of
                # them are not read yet, or it was scored): below the cut, it never makes it, as the cut only rises.
                cut = best[0][0] if full else float("-inf")
                others = sum(top.values()) - top[run.key[0]]
                new = []
                for length, when, doc in rows:
                    if doc not in looked:
                        looked.add(doc)
                        if (share(run, length, when) + others) * (1 + 1e-9) >= cut:
                            new.append(doc)
                score_in_full(new)
                budget -= len(rows) + SCORED * len(new)
            for run in moved:
                if run.head is None:
                    runs.remove(run)
                else:
                    run.bound = bound(run)
        return True

    if known:
        # MaxScore: a memory with none of the query's rarer words scores at most what its common words
        # can add; when the best found among those with a rare word all score above that, that is all.
        rare = [tid for tid, df in known.values() if df <= n * RARE]
        common = [tid for tid in tids if tid not in rare]
        ceiling = sum(weights[t] * (K1 + 1) for t, (_, df) in known.items() if df > n * RARE) * \
            max([1.0, *boosts.values()]) * 1.15 * (path_factor(1.0) if overlap else 1.0)
        if not common:
            stream(tids, tids)
        elif not rare:
            if not by_impact(common):
                stream(tids, tids)
        else:
            stream(rare, tids)
            if len(best) < limit or best[0][0] <= ceiling * (1 + 1e-9):
                # A memory with a rare word that was not scored cannot make the cut: its bound did not reach
                # the cut then, and the cut only rises. So the rest need bounds only for the common words.
                if not by_impact(common):
                    stream(common, common)
    return [found[doc] for _, _, doc in sorted(best, reverse=True)], in_order, n


class _Run:
    """One word's active postings of one type and count, read in ``postings_impact``'s order (shortest memory
    first, then newest), a step at a time; ``head`` is the (length, time) of the next one, None past the last."""

    FIRST = ("SELECT tf, length, epoch FROM postings WHERE tid=? AND active=1 AND type_no=? AND tf>? "
             "ORDER BY tf, length, epoch DESC LIMIT 1")  # the next count a word has in memories of a type
    ROWS = "SELECT length, epoch, doc FROM postings INDEXED BY postings_impact WHERE tid=? AND active=1 AND " \
        "type_no=? AND tf=?"
    NEXT = f"{ROWS} ORDER BY length, epoch DESC"
    #: Past one length and time, in the run's order: written before at that length, then at no known time (last),
    #: then longer; each a range of the index (one condition with OR read every posting at that length and time).
    PAST = f"{ROWS} AND length=? AND epoch<? UNION ALL {ROWS} AND length=? AND epoch IS NULL UNION ALL {ROWS} " \
        "AND length>? ORDER BY length, epoch DESC"
    LONGER = f"{ROWS} AND length>? ORDER BY length, epoch DESC"

    def __init__(self, db: sqlite3.Connection, tid: int, type_no: int, tf: int, head: Tuple[int, Optional[float]]):
        self.db, self.key = db, (tid, type_no, tf)
        self.head: Optional[Tuple[int, Optional[float]]] = head
        self.bound, self.step = 0.0, FETCH
        self.rows: "deque[Tuple[int, Optional[float], int]]" = deque()
        self.cursor: Optional[sqlite3.Cursor] = None

    def take(self, k: int, alike: bool = False) -> List[Tuple[int, Optional[float], int]]:
        """The (length, time, doc) of the next ``k`` postings (fewer at the end, and with ``alike`` past the
        head's length and time), moving ``head`` past them."""
        if self.cursor is None:
            self.cursor = self.db.execute(self.NEXT, self.key)
        at = self.head
        rows: List[Tuple[int, Optional[float], int]] = []
        while len(rows) < k and (self.rows or self._more(k)) and not (alike and self.rows[0][:2] != at):
            rows.append(self.rows.popleft())
        self.head = self.rows[0][:2] if self.rows or self._more(k) else None
        return rows

    def skip(self) -> None:
        """Move ``head`` past every posting at its length and time, unread."""
        assert self.head is not None
        length, when = self.head
        self.rows.clear()
        self.cursor = self.db.execute(self.LONGER, (*self.key, length)) if when is None else \
            self.db.execute(self.PAST, (*self.key, length, when, *self.key, length, *self.key, length))
        self.head = self.rows[0][:2] if self._more(FETCH) else None

    def at_or_before(self, place: Tuple[int, Optional[float]]) -> bool:
        """Whether ``head`` is not past ``place`` (a length and time) in the run's order."""
        def order(at: Tuple[int, Optional[float]]) -> Tuple[int, bool, float]:
            return at[0], at[1] is None, -(at[1] or 0.0)

        return self.head is not None and order(self.head) <= order(place)

    def _more(self, k: int) -> bool:
        assert self.cursor is not None
        self.rows.extend(self.cursor.fetchmany(max(k, 64)))
        return bool(self.rows)


def _hits(store: "Store", db: sqlite3.Connection, view: int, ranked: List[_Scored], words: _Terms,
          n: int, similarity: Optional[Mapping[str, float]] = None) -> List[Hit]:
    """:func:`_ranked`'s answer as :func:`gitmem.search.rank`'s hits: the memories read, and each
    one's match (the share of the query's word weight it holds, against its own core words)."""
    memories = store.warm.parse(store.repository, [(memory_path(c.type, c.id), c.blob) for c in ranked], store.read_ref())
    kept = [(c, m) for c in ranked if isinstance(m := memories[c.blob], Memory)]
    terms_of = {c.doc: core_terms(m) for c, m in kept}
    core = _frequencies(db, view, sorted({t for terms in terms_of.values() for t in terms}))
    counts = _term_counts(db, [c.doc for c, _ in kept], [tid for tid, _ in words])
    query_mass = sum(w for _, w in words)
    hits = []
    for c, m in kept:
        mine = counts.get(c.doc, {})
        mass = sum(w for tid, w in words if tid in mine)  # the word weight it shares with the query
        core_mass = sum(idf(n, core[t][1] if t in core else 0) for t in terms_of[c.doc])
        hits.append(Hit(m, c.score, match_of(mass, query_mass, core_mass) if mass else 0.0, c.stale,
                        similarity[c.id] if similarity is not None else None))
    return hits


def _fused(store: "Store", db: sqlite3.Connection, view: int, query: str, limit: int, dense: Dense,
           paths: Sequence[str], types_first: Sequence[str], only_types: Optional[Sequence[str]],
           now: datetime, only_ids: Optional[AbstractSet[str]]) -> List[Hit]:
    """:func:`hybrid` in one read of the view: :func:`gitmem.search.rank`'s fusion, step for step, over
    the first words' candidates and the dense neighbours (a memory in neither adds nothing there)."""
    words, terms, n = _ranked(store, db, view, query, depth(limit), paths, types_first, only_types, now,
                              only_ids=only_ids)
    by_id = {c.id: c for c in words}
    rows = dict(_doc_rows(db, [dense.blobs[i] for i in dense.nearest]))  # blob -> (doc, epoch)
    near = [i for i in dense.nearest if dense.ids[i] not in by_id]
    files = [(memory_path(dense.types[i], dense.ids[i]), dense.blobs[i]) for i in near if dense.types[i] == "file"]
    memories = store.warm.parse(store.repository, files, store.read_ref()) if files else {}
    current = store.current_blobs(m for m in memories.values() if isinstance(m, Memory))
    for i in near:  # a neighbour past the words' first candidates: its staleness
        blob = dense.blobs[i]
        m = memories.get(blob)
        by_id[dense.ids[i]] = _Scored(rows[blob][0], blob, dense.ids[i], dense.types[i], 0.0,
                                      isinstance(m, Memory) and is_stale(m, current))
    boosts = type_boosts(types_first)
    fused = fuse([c.id for c in words], [dense.ids[i] for i in dense.nearest],
                 lambda i: weight(by_id[i].type, rows[by_id[i].blob][1], boosts, now, by_id[i].stale))
    best = sorted(sorted(fused, reverse=True), key=fused.__getitem__, reverse=True)[:max(limit, 0)]
    from bisect import bisect_left  # here: a search by words alone need not load it

    similarity = {i: dense.values[bisect_left(dense.ids, i)] for i in best}
    return _hits(store, db, view, [by_id[i]._replace(score=fused[i]) for i in best], terms, n, similarity)


def _doc_rows(db: sqlite3.Connection, blobs: Sequence[str]) -> List[Tuple[str, Tuple[int, Optional[float]]]]:
    out: List[Tuple[str, Tuple[int, Optional[float]]]] = []
    for chunk, marks in batches(blobs):
        out += [(b, (doc, when)) for b, doc, when in db.execute(
            f"SELECT blob, doc, epoch FROM docs WHERE blob IN ({marks})", chunk)]
    return out


def _frequencies(db: sqlite3.Connection, view: int, terms: Sequence[str]) -> Dict[str, Tuple[int, int]]:
    """term -> (term id, how many active memories of the view use it), for the terms any does, in order."""
    out: Dict[str, Tuple[int, int]] = {}
    for chunk, marks in batches(terms):
        out.update((t, (tid, df)) for t, tid, df in db.execute(
            "SELECT t.term, t.tid, v.df FROM terms t CROSS JOIN view_df v ON v.view=? AND v.tid=t.tid "
            f"WHERE t.term IN ({marks})", [view, *chunk]))
    return {t: out[t] for t in terms if t in out}


def _term_counts(db: sqlite3.Connection, docs: Sequence[int], tids: Sequence[int]) -> Dict[int, Dict[int, int]]:
    """doc -> term id -> count, for these docs and these terms (docs with none of them left out)."""
    wanted = {str(tid): tid for tid in tids}
    out: Dict[int, Dict[int, int]] = {}
    for chunk, marks in batches(docs if tids else []):
        for doc, words, tfs in db.execute(f"SELECT doc, tids, tfs FROM docs WHERE doc IN ({marks})", chunk):
            if mine := _counts(words, tfs, wanted):
                out[doc] = mine
    return out


def _counts(words: str, tfs: str, wanted: Mapping[str, int]) -> Dict[int, int]:
    """Term id -> count of the ``wanted`` ones (by their ids as text) in a doc's word list and counts: one
    read of its row, where the postings would take a lookup per word."""
    if len(wanted) > 8:  # a long question: one pass over the memory's words
        return {wanted[t]: int(n) for t, n in zip(words.split(","), tfs.split(",")) if t in wanted}
    listed, counts, out = words.split(","), None, {}
    for t, tid in wanted.items():  # a few: each found in the list by C, not a Python loop over it
        if t in listed:
            counts = counts or tfs.split(",")
            out[tid] = int(counts[listed.index(t)])
    return out


def _near(wanted: Sequence[str], siblings: bool) -> Tuple[str, List[Any]]:
    """An SQL condition on ``doc_paths dp`` for the paths that are, hold or are held by one of
    ``wanted`` (and, with ``siblings``, share its directory), with its arguments. Each path, range and
    directory once: SQLite answers each OR term from an index and merges the rows, so the same folder named
    for each of 24 files in play read its thousands of memories 24 times (200 ms of a prompt hook)."""
    exact: Dict[str, None] = {}
    under: Dict[str, None] = {}
    dirs: Dict[str, None] = {}
    for q in map(filter_path, wanted):
        if not q:
            continue
        exact.update(dict.fromkeys([q, *(q.rsplit("/", i)[0] for i in range(1, q.count("/") + 1))]))
        under[q] = None
        if siblings:
            dirs[q.rsplit("/", 1)[0]] = None
    if not exact:
        return "", []
    near = [f"dp.path IN ({','.join('?' * len(exact))})", *["(dp.path > ? AND dp.path < ?)"] * len(under)]
    if dirs:
        near.append(f"dp.dir IN ({','.join('?' * len(dirs))})")
    return " OR ".join(near), [*exact, *(bound for q in under for bound in (q + "/", q + "0")), *dirs]


def _path_overlaps(db: sqlite3.Connection, view: int, wanted: Sequence[str], kept: str,
                   keep: Sequence[str]) -> Dict[int, float]:
    """doc -> how closely its paths touch ``wanted`` (:func:`gitmem.search.path_overlap`), for the
    view's active memories that touch them at all: the same path, one inside the other, or a sibling."""
    near, args = _near(wanted, siblings=True)
    # CROSS JOIN keeps this order: the paths by their indexes, then each one's membership and doc. Left to
    # itself SQLite read the view's members first and scanned the siblings' index for each: 22 s for one
    # path at 10,000 memories in one folder, where this takes milliseconds.
    rows = db.execute(
        "SELECT dp.doc, dp.path FROM doc_paths dp CROSS JOIN members m ON m.view=? AND m.doc=dp.doc "
        f"CROSS JOIN docs d ON d.doc=dp.doc WHERE d.active=1{kept} AND ({near})", [view, *keep, *args]).fetchall()
    touching: Dict[int, List[str]] = {}
    for doc, path in rows:
        touching.setdefault(doc, []).append(path)
    overlaps: Dict[Tuple[str, ...], float] = {}  # memories share paths: a file's summary, its decisions
    for mine in touching.values():
        if (key := tuple(mine)) not in overlaps:
            overlaps[key] = path_overlap(mine, wanted)
    return {doc: o for doc, mine in touching.items() if (o := overlaps[tuple(mine)])}


#: :func:`gitmem.search.recency` in SQL, for a memory's bound (the time is bound, not printed).
_RECENCY_SQL = ("(CASE WHEN d.epoch IS NULL THEN 1.0 ELSE 1.0 + 0.15 * pow(0.5, MAX((? - d.epoch) / 86400.0, 0.0) "
                "/ 180.0) END)")
