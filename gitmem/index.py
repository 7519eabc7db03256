"""The derived index: what gitmem has already learned from git objects, kept in ``.git/gitmem/index.sqlite``.

Every row is keyed by what names its content: a blob's parsed memory (or why it did
not parse), its search terms and what ranking reads of it (``docs``, ``postings``, ``doc_paths``:
see :mod:`gitmem.postings`), a tree's memory-relevant entries and summary by object id, a commit's
tree by the commit id (so a read need not open libgit2 for a packed commit: :mod:`gitmem.gitdir`),
what a computation made of a tree (a context's cached part) by the tree id and a key naming the
computation and its code, a memory as a context renders it by the blob and the code, a vector by
the encoder and the hash of the text it was computed from (and that hash by the encoder and the
blob, so a hybrid recall finds a memory's vector without reading it), a
blob the secret scan found clean by the blob id and a hash of the rules it was scanned with. Two
kinds of rows per ref are hints, not facts: the last commit whose whole history `doctor` found sound,
where the next `doctor` starts (a commit id names its history, so the finding stays true); and the
ref's search view (``views``, ``members``, ``view_df``), which names the tree it reflects and is moved
to a new tree in one transaction, so it is never half-moved (its members are also found by their ids'
last two chars: a page's short ids). A key that names its
content cannot point at a wrong row, only at a missing one; that
is why a write, a merge or a pull costs what it changed: the new tip's walk
reads the few new trees and blobs from git and every unchanged subtree from
here. Deleting the file changes no answer, only the time.

Several processes share the file (SQLite in WAL mode, a busy timeout); a write
that cannot get the lock is skipped, since the row can be recomputed. The first
build (after a clone) is written to a file of its own process's and linked into
place when it is done, so nobody reads it half made. A corrupt
file is deleted and rebuilt, never trusted; where the repository cannot be
written (read-only, full disk) gitmem runs without the file. A file another
schema wrote is started again around the rows that cost most to make again
(vectors, their keys, blobs found clean: :data:`LASTING`).
"""

from __future__ import annotations

import atexit
import itertools
import json
import math
import os
import sqlite3
import threading
import time
from functools import lru_cache
from operator import itemgetter
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union

from .model import Memory, author_of

SCHEMA = 20  # 11: postings carry their memory's type, status, length, time; terms the most a memory holds;
#             12: docs carry their words' counts (tfs, in the order of tids); 13: words are composed (NFC);
#             14: active postings also ordered by impact (postings_impact); 15: a final -y after a consonant
#             is stemmed -i, so "retries" meets "retry" (terms of every blob change); 16: Latin letters lose
#             their accents, identifiers are split at camelCase humps too, a compound is stemmed and kept
#             as written as well; 17: a word holds the combining marks after its letters (Indic vowel signs,
#             Thai tones), Hebrew points and Arabic harakat are folded, an identifier's one-letter parts are dropped
#             and a part beside one is not expanded as an abbreviation ("OAuth"); 18: zero-width joiners and
#             soft hyphens are no longer word breaks; 19: blobs carried their memory's author kind and source;
#             20: a view's members carry them instead, so a list by either reads one table (100,000 memories:
#             0.3 s through docs and blobs, see IndexedMemories.origins)
#: (name, kind, oid) of one tree entry gitmem reads: kind is "tree" or "blob".
Entry = Tuple[str, str, str]
#: A parsed memory, or the one-line reason its blob is not a valid memory.
Parsed = Union[Memory, str]
T = TypeVar("T")
K = TypeVar("K")

_TABLES = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS blobs(blob TEXT PRIMARY KEY, row TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS trees(tree TEXT PRIMARY KEY, entries TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS summaries(tree TEXT PRIMARY KEY, summary TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS commits(commit_id TEXT PRIMARY KEY, tree TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS verified(ref TEXT PRIMARY KEY, commit_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS clean(rules TEXT NOT NULL, blob TEXT NOT NULL, PRIMARY KEY(rules, blob));
CREATE TABLE IF NOT EXISTS vectors(encoder TEXT NOT NULL, text_sha1 TEXT NOT NULL, vec BLOB NOT NULL,
                                   PRIMARY KEY(encoder, text_sha1));
CREATE TABLE IF NOT EXISTS vector_keys(encoder TEXT NOT NULL, blob TEXT NOT NULL, text_sha1 TEXT NOT NULL,
                                       latin INTEGER NOT NULL, PRIMARY KEY(encoder, blob)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS docs(doc INTEGER PRIMARY KEY, blob TEXT NOT NULL UNIQUE, id TEXT NOT NULL,
                                type TEXT NOT NULL, active INTEGER NOT NULL, length INTEGER NOT NULL,
                                epoch REAL, tids TEXT NOT NULL, tfs TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS terms(tid INTEGER PRIMARY KEY, term TEXT NOT NULL UNIQUE, most_tf INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS postings(tid INTEGER NOT NULL, doc INTEGER NOT NULL, tf INTEGER NOT NULL,
                                    type_no INTEGER NOT NULL, active INTEGER NOT NULL, length INTEGER NOT NULL,
                                    epoch REAL, PRIMARY KEY(tid, doc)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS postings_impact ON postings(tid, type_no, tf, length, epoch DESC) WHERE active=1;
CREATE TABLE IF NOT EXISTS doc_paths(path TEXT NOT NULL, dir TEXT NOT NULL, doc INTEGER NOT NULL,
                                     PRIMARY KEY(path, doc)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS doc_paths_dir ON doc_paths(dir);
CREATE TABLE IF NOT EXISTS views(view INTEGER PRIMARY KEY, ref TEXT NOT NULL UNIQUE, tree TEXT,
                                 n INTEGER NOT NULL, total INTEGER NOT NULL, usable INTEGER NOT NULL,
                                 used REAL NOT NULL);
CREATE TABLE IF NOT EXISTS members(view INTEGER NOT NULL, doc INTEGER NOT NULL, id TEXT NOT NULL,
                                   type TEXT NOT NULL, active INTEGER NOT NULL, kind INTEGER NOT NULL,
                                   source TEXT NOT NULL, PRIMARY KEY(view, id)) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS members_doc ON members(view, doc);
CREATE INDEX IF NOT EXISTS members_tail ON members(view, substr(id, -3));
CREATE TABLE IF NOT EXISTS view_df(view INTEGER NOT NULL, tid INTEGER NOT NULL, df INTEGER NOT NULL,
                                   PRIMARY KEY(view, tid)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS elements(code TEXT NOT NULL, blob TEXT NOT NULL, text TEXT NOT NULL,
                                    tokens INTEGER NOT NULL, PRIMARY KEY(code, blob)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS memos(tree TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, used REAL NOT NULL,
                                 PRIMARY KEY(tree, key));
"""
#: How long a reader or writer waits for another process's lock before it gives up (the row can wait).
WAIT_MS = 2000
_BATCH = 500  # SQLite's default limit on bound parameters is 999 (older builds)


def batches(keys: Sequence[K]) -> Iterator[Tuple[Sequence[K], str]]:
    """``keys`` in chunks SQLite can bind at once, each with its ``?,?,...`` for ``IN (...)``."""
    for start in range(0, len(keys), _BATCH):
        chunk = keys[start:start + _BATCH]
        yield chunk, ",".join("?" * len(chunk))


def insert_rows(db: sqlite3.Connection, table: str, width: int, values: Sequence[Any]) -> None:
    """Insert into ``table`` the rows of ``width`` columns laid end to end in ``values``, as many rows a statement
    as SQLite binds at once: a statement a row, binding 1.2 million postings of three numbers took 0.87 s, this 0.4."""
    per = 2 * _BATCH // width  # rows a statement
    row = f"({','.join('?' * width)})"
    full = len(values) - len(values) % (per * width)
    db.executemany(f"INSERT INTO {table} VALUES {','.join([row] * per)}",
                   (values[start:start + per * width] for start in range(0, full, per * width)))
    if full < len(values):
        db.execute(f"INSERT INTO {table} VALUES {','.join([row] * ((len(values) - full) // width))}", values[full:])


class Index:
    """One repository's derived index. Every method degrades to "not known" on trouble."""

    def __init__(self, path: Optional[str]):
        self.path = path
        self._db: Optional[sqlite3.Connection] = None
        self._broken = path is None
        self._building: Optional[str] = None  # a first build's own file, until :meth:`_publish`
        self._spoilt = False  # a write of the build failed: without a journal it cannot be rolled back
        self._started = 0.0  # when the build began
        self._pending_blobs: List[Tuple[str, str]] = []
        self._pending_trees: Dict[str, List[Entry]] = {}
        self._pending_summaries: Dict[str, Any] = {}
        self._lock = threading.RLock()  # the connection, for one thread at a time (a transaction is the connection's)

    # --- connection --------------------------------------------------------------

    def _conn(self) -> Optional[sqlite3.Connection]:
        if self._db is not None or self._broken:
            return self._db
        assert self.path is not None
        for attempt in range(2):
            try:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                if os.name == "posix":  # (os.kill(pid, 0), which tells a dead builder, ends a process on Windows)
                    _sweep(self.path)
                    if not os.path.exists(self.path):
                        self._building, self._started = f"{self.path}.new-{os.getpid()}.{next(_BUILDS)}", time.time()
                        atexit.register(self.close)  # published by a command that only wrote, too
                db = sqlite3.connect(self._building or self.path, timeout=WAIT_MS / 1000, isolation_level=None,
                                     check_same_thread=False)
                if self._building:  # no other process reads it: nothing to journal
                    db.execute("PRAGMA journal_mode=OFF")
                    db.execute("PRAGMA synchronous=OFF")
                else:
                    db.execute("PRAGMA journal_mode=WAL")
                    db.execute("PRAGMA synchronous=NORMAL")
                # The schema first: another schema's tables may not take this one's indexes.
                db.execute("CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                row = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
                if row is None or row[0] != str(SCHEMA):
                    _start_again(db)
                else:
                    db.executescript(_TABLES)  # tables added since the file was made (none is ever changed in place)
                    if db.execute("SELECT 1 FROM meta WHERE key='layout:vectors'").fetchone() is None:
                        db.executemany("INSERT OR IGNORE INTO meta VALUES (?, ?)", _LAYOUTS)  # written before layouts
                try:
                    db.execute("SELECT pow(0.5, 1.0)")
                except sqlite3.OperationalError:  # an SQLite without its math functions: the same C pow
                    db.create_function("pow", 2, math.pow, deterministic=True)
                self._db = db
                return db
            except sqlite3.OperationalError:
                break  # locked or unreadable just now: not damaged, so never deleted for it
            except sqlite3.DatabaseError:
                # Not a database, or damaged: it is derived, so start again.
                if attempt == 0 and self._remove():
                    continue
                break
            except (OSError, sqlite3.Error):
                break
        self._broken = True
        return None

    def _remove(self) -> bool:
        assert self.path is not None
        target, self._building = self._building or self.path, None
        self.close()
        try:
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(target + suffix):
                    os.unlink(target + suffix)
            return True
        except OSError:
            return False

    def _publish(self) -> None:
        """Make a first build the index. Built in a file of its own without a journal (through the WAL, a
        cold start at 100,000 memories wrote its 33 MB twice: 0.1 s of its 2.9), it takes its place in one
        link, never over another process's index that came first (that one is kept, this one dropped), never
        after a write of it failed half done (without a journal nothing rolls it back). A light command's build
        (what a write scanned clean, say) is linked too, so a heavy one after it writes through the WAL."""
        built, db, spoilt = self._building, self._db, self._spoilt
        assert built is not None and self.path is not None
        self._building, self._db, self._spoilt = None, None, False
        try:
            if db is not None:
                if not spoilt:
                    db.execute("PRAGMA journal_mode=WAL")  # what every later connection expects
                db.close()
            if not spoilt:
                self._link(built)
        except (OSError, sqlite3.Error):
            pass  # the rows can be made again
        finally:
            try:
                os.unlink(built)
            except OSError:
                pass

    def _link(self, built: str) -> None:
        assert self.path is not None
        fd = os.open(built, os.O_RDONLY)
        try:
            os.fsync(fd)  # on disk before it is reachable: synchronous=OFF wrote without waiting
        finally:
            os.close(fd)
        if os.path.exists(self.path):
            return  # another process's came first: it is kept
        for suffix in ("-wal", "-shm"):  # a deleted index's, which would be read as this one's; not one made
            stale = self.path + suffix  # since this build began (another's, linked and opened meanwhile)
            if os.path.exists(stale) and os.path.getmtime(stale) < self._started:
                os.unlink(stale)
        try:
            os.link(built, self.path)
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links: renamed, over nothing (looked at just above: a
            os.replace(built, self.path)  # build linked by another in between would be replaced, rows lost)

    def _query(self, sql: str, args: Sequence[Any] = ()) -> List[Tuple[Any, ...]]:
        with self._lock:
            db = self._conn()
            if db is None:
                return []
            try:
                return db.execute(sql, args).fetchall()
            except sqlite3.OperationalError:
                return []  # busy or locked: another process's, not damage
            except sqlite3.DatabaseError:
                self._remove()
                self._broken = True  # rebuilt by the next process, not mid-command
                return []
            except sqlite3.Error:
                return []

    def _write(self, sql: str, rows: List[Tuple[Any, ...]], wait_ms: int = WAIT_MS) -> None:
        """One transaction; given up (the rows can be recomputed) if the lock is not free in ``wait_ms``."""
        with self._lock:
            db = self._conn()
            if db is None or not rows:
                return
            try:
                if wait_ms != WAIT_MS:
                    db.execute(f"PRAGMA busy_timeout={int(wait_ms)}")
                db.execute("BEGIN IMMEDIATE")
                db.executemany(sql, rows)
                db.execute("COMMIT")
            except sqlite3.Error:
                self._spoilt = self._spoilt or bool(self._building)
                try:
                    db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            finally:
                if wait_ms != WAIT_MS:
                    try:
                        db.execute(f"PRAGMA busy_timeout={WAIT_MS}")
                    except sqlite3.Error:
                        pass

    def held(self) -> "threading.RLock":
        """This thread's turn at the index, over several transactions: a view brought to a tree and then read is
        not moved by another thread of this process in between (another process may: readers try again)."""
        return self._lock

    def run(self, work: Callable[[sqlite3.Connection], T], write: bool) -> Optional[T]:
        """``work(connection)`` in one transaction (``write``: taking the write lock first, so what
        it reads stays true until it commits); None if the index is unavailable, busy or damaged."""
        with self._lock:
            db = self._conn()
            if db is None:
                return None
            try:
                db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    out = work(db)
                except BaseException:
                    self._spoilt = self._spoilt or bool(self._building)
                    db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
                return out
            except sqlite3.OperationalError:
                return None
            except sqlite3.DatabaseError:
                self._remove()
                self._broken = True
                return None
            except sqlite3.Error:
                return None

    # --- trees -------------------------------------------------------------------

    def trees(self, tree_ids: Sequence[str]) -> Dict[str, List[Entry]]:
        """The entries of those trees the index knows, or this command learned (a cold walk reads more
        trees than a process keeps, then asks for them again to sum them)."""
        out = {t: self._pending_trees[t] for t in tree_ids if t in self._pending_trees}
        for chunk, marks in batches([t for t in tree_ids if t not in out]):
            for tree, entries in self._query(f"SELECT tree, entries FROM trees WHERE tree IN ({marks})", chunk):
                out[tree] = [tuple(e) for e in json.loads(entries)]
        return out

    def put_tree(self, tree_id: str, entries: List[Entry]) -> None:
        self._pending_trees[tree_id] = entries

    # --- blobs -------------------------------------------------------------------

    def parsed(self, blob_ids: Sequence[str]) -> Dict[str, Parsed]:
        """What is known of these blobs: a memory, or the reason one is invalid."""
        out: Dict[str, Parsed] = {}
        if len(blob_ids) >= 1000 and not self.knows_blobs():
            return out  # a new index, asked for a whole store's blobs: 100,000 lookups took 90 ms to find none
        rows = self._by_key("blobs", "blob, row", "blob", blob_ids)
        for start in range(0, len(rows), _BATCH):  # a batch at a time: one JSON text of them all doubled them
            batch = rows[start:start + _BATCH]
            for (blob, _), parsed in zip(batch, from_rows([row for _, row in batch])):
                if parsed is not None:
                    out[blob] = parsed
        return out

    def knows_blobs(self) -> bool:
        """Whether the index holds any blob's row (a new one, none: a first build parses every blob)."""
        return bool(self._query("SELECT 1 FROM blobs LIMIT 1"))

    def put_parsed(self, blob_id: str, parsed: Parsed) -> None:
        self._pending_blobs.append((blob_id, row_text(parsed)))

    def put_row(self, blob_id: str, row: str) -> None:
        """Keep a blob's row as :func:`row_text` wrote it (in another process)."""
        self._pending_blobs.append((blob_id, row))

    def flush(self) -> None:
        """Store what this command learned, and make a first build the index."""
        with self._lock:
            self.spill()
            if self._building:
                self._publish()

    def spill(self) -> None:
        """Store what this command learned so far, in one transaction per table (blobs in key order, so a
        cold start appends to the table's B-tree instead of splitting pages all over it). A first build
        spills as it goes, while a helper process still parses: what the flush at its end is left to write
        is what this process waits for alone."""
        with self._lock:
            blobs, trees, summaries = self._pending_blobs, self._pending_trees, self._pending_summaries
            self._pending_blobs, self._pending_trees, self._pending_summaries = [], {}, {}
            # Sorted by the key alone (83 -> 34 ms for 100,000 rows: no tuple comparisons).
            self._write("INSERT OR IGNORE INTO blobs VALUES (?, ?)", sorted(blobs, key=itemgetter(0)))
            self._write("INSERT OR IGNORE INTO trees VALUES (?, ?)", [(t, _ENCODE(e)) for t, e in trees.items()])
            self._write("INSERT OR IGNORE INTO summaries VALUES (?, ?)", [(k, _ENCODE(v)) for k, v in summaries.items()])

    # --- the tree of a commit ----------------------------------------------------------

    def tree_of(self, commit: str) -> Optional[str]:
        rows = self._query("SELECT tree FROM commits WHERE commit_id=?", (commit,))
        return rows[0][0] if rows else None

    def put_tree_of(self, commit: str, tree: str) -> None:
        self._write("INSERT OR IGNORE INTO commits VALUES (?, ?)", [(commit, tree)], wait_ms=20)

    # --- ids by their tail, from a search view -------------------------------------------

    def ids_ending_with(self, ref: str, tree: str, tails: Sequence[str]) -> Optional[Dict[str, List[str]]]:
        """The ids ending with each tail (all of one length, three chars or more) among the memories of
        ``ref``'s search view (see :mod:`gitmem.postings`), if that view is usable and reflects ``tree``;
        else None. The members' index on their last three chars finds them (about 3 ids a tail at 100,000
        memories, where their last two chars matched 100)."""
        size = len(tails[0]) if tails else 3
        threes = sorted({t[-3:] for t in tails})

        def read(db: sqlite3.Connection) -> Optional[List[Tuple[str]]]:
            view = db.execute("SELECT view FROM views WHERE ref=? AND tree=? AND usable=1", (ref, tree)).fetchone()
            return None if view is None else db.execute(
                f"SELECT id FROM members WHERE view=? AND substr(id, -3) IN ({','.join('?' * len(threes))}) "
                f"AND substr(id, -{size}) IN ({','.join('?' * len(tails))})", [view[0], *threes, *tails]).fetchall()

        found = self.run(read, write=False)
        if found is None:
            return None
        out: Dict[str, List[str]] = {t: [] for t in tails}
        for (i,) in sorted(found):
            out[i[-size:]].append(i)
        return out

    # --- where doctor last found a ref's history sound --------------------------------

    def verified(self, ref: str) -> Optional[str]:
        rows = self._query("SELECT commit_id FROM verified WHERE ref=?", (ref,))
        return rows[0][0] if rows else None

    def put_verified(self, ref: str, commit: str) -> None:
        self._write("INSERT OR REPLACE INTO verified VALUES (?, ?)", [(ref, commit)])

    # --- blobs the secret scan found clean --------------------------------------------

    def clean(self, rules: str, blob_ids: Sequence[str]) -> List[str]:
        """Those of ``blob_ids`` a scan with the rules hashed as ``rules`` found clean."""
        out: List[str] = []
        for chunk, marks in batches(blob_ids):
            out += [b for (b,) in self._query(f"SELECT blob FROM clean WHERE rules=? AND blob IN ({marks})",
                                              [rules, *chunk])]
        return out

    def put_clean(self, rules: str, blob_ids: Sequence[str], wait_ms: int = WAIT_MS) -> None:
        self._write("INSERT OR IGNORE INTO clean VALUES (?, ?)", [(rules, b) for b in blob_ids], wait_ms)

    # --- summaries of trees --------------------------------------------------------

    def summary(self, key: str) -> Optional[Any]:
        if key in self._pending_summaries:
            return self._pending_summaries[key]
        rows = self._query("SELECT summary FROM summaries WHERE tree=?", (key,))
        return json.loads(rows[0][0]) if rows else None

    def summaries(self, keys: Sequence[str]) -> Dict[str, Any]:
        """Those of these trees' summaries the index knows (see :meth:`summary`)."""
        out = {k: self._pending_summaries[k] for k in keys if k in self._pending_summaries}
        rest = [k for k in keys if k not in out]
        for chunk, marks in batches(rest):
            out.update((k, json.loads(v)) for k, v in self._query(
                f"SELECT tree, summary FROM summaries WHERE tree IN ({marks})", chunk))
        return out

    def put_summary(self, key: str, summary: Any) -> None:
        self._pending_summaries[key] = summary

    # --- what a computation made of a tree -------------------------------------------

    #: Memos kept of each kind (a key's first word: "standing", "rest", "ids"); the least recently written
    #: beyond this are deleted (a context's cached part is ~200 KB, and a page's short ids never push it out).
    MEMOS = 16

    def memo(self, tree: str, key: str) -> Optional[Any]:
        """What was kept under ``key`` for tree ``tree`` (the key names the computation and its code)."""
        rows = self._query("SELECT value FROM memos WHERE tree=? AND key=?", (tree, key))
        return json.loads(rows[0][0]) if rows else None

    def put_memo(self, tree: str, key: str, value: Any) -> None:
        def keep(db: sqlite3.Connection) -> None:
            db.execute("INSERT OR REPLACE INTO memos VALUES (?, ?, ?, ?)",
                       (tree, key, _ENCODE(value), time.time()))
            kind = key.split(" ", 1)[0]  # keys of a kind lie between "kind " and "kind!"
            db.execute("DELETE FROM memos WHERE rowid IN (SELECT rowid FROM memos WHERE key >= ? AND key < ? "
                       "ORDER BY used DESC LIMIT -1 OFFSET ?)", (kind + " ", kind + "!", self.MEMOS))

        self.run(keep, write=True)

    def put_elements(self, code: str, rows: Sequence[Tuple[str, str, int]]) -> None:
        """Keep (blob, element, tokens) as a context renders the blob's memory, by the code ``code`` names
        (:mod:`gitmem.context`'s): the rows another code rendered go. A context only reads: where another
        process holds the lock, they are left for a later one to write."""
        if not rows:
            return
        if any(self._query(f"SELECT 1 FROM elements WHERE code {op} ? LIMIT 1", (code,)) for op in ("<", ">")):
            self._write("DELETE FROM elements WHERE code <> ?", [(code,)], wait_ms=20)
        self._write("INSERT OR IGNORE INTO elements VALUES (?, ?, ?, ?)", [(code, *row) for row in rows], wait_ms=20)

    # --- vectors -----------------------------------------------------------------

    #: Past this many keys, and a quarter of the rows (an encoder's), they are read in one pass over the rows:
    #: 100,000 vectors looked up by key took 2.6 s, the encoder's 100,000 rows in key order 0.4 s; 100,000 blobs'
    #: parsed rows (a first search after a status) 0.33 s and 0.1 s.
    SCAN_FROM = 2_000

    def _by_key(self, table: str, columns: str, key: str, keys: Sequence[str],
                encoder: Optional[str] = None) -> List[Tuple[Any, ...]]:
        """Rows (``columns``, the first being ``key``) of ``table`` (under ``encoder``, if it has them) whose ``key``
        is one of ``keys``."""
        where, args = ("encoder=?", [encoder]) if encoder is not None else ("1", [])
        if len(keys) >= self.SCAN_FROM:
            total = self._query(f"SELECT count(*) FROM {table} WHERE {where}", args)
            if total and 4 * len(keys) >= total[0][0]:
                wanted = set(keys)
                return [row for row in self._query(f"SELECT {columns} FROM {table} WHERE {where}", args)
                        if row[0] in wanted]
        out: List[Tuple[Any, ...]] = []
        for chunk, marks in batches(keys):
            out += self._query(f"SELECT {columns} FROM {table} WHERE {where} AND {key} IN ({marks})", [*args, *chunk])
        return out

    def version(self) -> Optional[int]:
        """A number that changes when another process commits to the index (SQLite's ``data_version``; this
        process's own writes leave it), or None when it cannot be read."""
        rows = self._query("PRAGMA data_version")
        return rows[0][0] if rows else None

    def vectors(self, encoder: str, text_hashes: Sequence[str]) -> Dict[str, bytes]:
        """The stored vectors of these texts (by their hash) under ``encoder``."""
        return dict(self._by_key("vectors", "text_sha1, vec", "text_sha1", text_hashes, encoder))

    def put_vectors(self, encoder: str, items: Mapping[str, bytes]) -> None:
        self._write("INSERT OR IGNORE INTO vectors VALUES (?, ?, ?)",
                    [(encoder, text_hash, vec) for text_hash, vec in items.items()])

    def vector_keys(self, encoder: str, blob_ids: Sequence[str]) -> Dict[str, Tuple[str, bool]]:
        """blob -> (the hash its vector under ``encoder`` is kept by, whether its text is mostly Latin
        script), for the blobs whose key is known: a hybrid recall finds a memory's vector unread."""
        return {b: (k, bool(latin)) for b, k, latin in self._by_key("vector_keys", "blob, text_sha1, latin", "blob",
                                                                    blob_ids, encoder)}

    def put_vector_keys(self, encoder: str, items: Mapping[str, Tuple[str, bool]]) -> None:
        self._write("INSERT OR IGNORE INTO vector_keys VALUES (?, ?, ?, ?)",
                    [(encoder, blob, key, int(latin)) for blob, (key, latin) in items.items()])

    def close(self) -> None:
        with self._lock:
            if self._building:
                self._publish()
            if self._db is not None:
                try:
                    self._db.close()
                except sqlite3.Error:
                    pass
                self._db = None


#: Tables whose rows outlive a new schema, each with the version of its own layout: what they hold is
#: named by content alone and costs the most to compute again (a vector is about 20 ms of an encoder per
#: memory; a blob the secret scan found clean). A table is dropped with the rest once its layout changes.
LASTING = {"vectors": 1, "vector_keys": 1, "clean": 1}
_LAYOUTS = [(f"layout:{t}", str(v)) for t, v in LASTING.items()]


@lru_cache(maxsize=None)  # the code this process runs: it never changes under it
def code_key(*modules: str) -> str:
    """What names the code of a computation kept as a memo (:meth:`Index.memo`): the version and a CRC-32
    of each module's source, so new code never reads an old memo (zlib, which reading git already loads,
    not hashlib's OpenSSL: 3 ms of a start). Read once: the code a process runs is the code it loaded."""
    import importlib
    import zlib

    from . import __version__

    parts = [__version__]
    for name in modules:
        source = importlib.import_module(name).__file__
        if source:  # none where modules come without source files: the version names the code
            with open(source, "rb") as f:
                parts.append(f"{zlib.crc32(f.read()):08x}")
    return "-".join(parts)


def _sweep(path: str) -> None:
    """Remove the first builds beside ``path`` whose processes died (killed while building, or between the link
    and the removal of their own name): they are never read, and one can hold tens of MB."""
    folder, prefix = os.path.dirname(path), os.path.basename(path) + ".new-"
    for name in os.listdir(folder):
        if name.startswith(prefix) and process_gone(name[len(prefix):].split(".")[0]):
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass


_BUILDS = itertools.count()  # two builds of one process never share a file


def process_gone(pid: str) -> bool:
    """Whether the process ``pid`` names has ended: what a process left behind under its id (a first build, a
    fetch's quarantine refs) is then removed. Not for text that names no process, nor another user's; never
    on Windows, where ``os.kill(pid, 0)`` would end the process (what they left stays)."""
    if os.name != "posix":
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except (ValueError, OverflowError, OSError):
        return False
    return False


def _start_again(db: sqlite3.Connection) -> None:
    """Bring a new file, or one another schema wrote, to :data:`SCHEMA`: every table is dropped but those
    in :data:`LASTING` at the layout this code writes, then made again. Under the write lock, and checked
    again there, so two processes upgrading one file at once do it once."""
    db.execute("BEGIN IMMEDIATE")
    try:
        if db.execute("SELECT value FROM meta WHERE key='schema'").fetchone() != (str(SCHEMA),):
            layouts = dict(db.execute("SELECT key, value FROM meta WHERE key LIKE 'layout:%'").fetchall())
            for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE "
                                      "'sqlite_%'").fetchall():
                if name != "meta" and layouts.get(f"layout:{name}") != str(LASTING.get(name)):
                    db.execute(f'DROP TABLE "{name}"')
            db.execute("DELETE FROM meta")
            for statement in _TABLES.split(";"):  # one by one: executescript would commit first
                if statement.strip():
                    db.execute(statement)
            db.executemany("INSERT INTO meta VALUES (?, ?)", [("schema", str(SCHEMA)), *_LAYOUTS])
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


_FIELDS = Memory._fields
_AUTHOR_AT = _FIELDS.index("author")
_TUPLES_AT = tuple(_FIELDS.index(name) for name in ("tags", "paths", "commits"))


_ENCODE = json.JSONEncoder(separators=(",", ":")).encode  # built once: json.dumps with options builds one per call


def row_text(parsed: Parsed) -> str:
    """The index row of a parsed blob: JSON, ASCII only (so one row is one line)."""
    if isinstance(parsed, str):
        return _ENCODE({"invalid": parsed})
    return _ENCODE(parsed)  # a named tuple: its fields in order, the author's and the lists' as JSON arrays


def from_rows(rows: Sequence[str]) -> List[Optional[Parsed]]:
    """What each of ``rows`` (:func:`row_text`) holds; None for a row that does not read as one."""
    try:
        decoded = json.loads("[" + ",".join(rows) + "]")  # one C call, not one per row
    except ValueError:
        return [None] * len(rows)
    if len(decoded) != len(rows):  # a row that was not one JSON value
        return [None] * len(rows)
    out: List[Optional[Parsed]] = []
    for row in decoded:
        try:
            out.append(_from_row(row))
        except (ValueError, TypeError, KeyError):
            out.append(None)
    return out


def _from_row(row: Any) -> Parsed:
    """Rebuild what the index stored after validating it (no second validation)."""
    if isinstance(row, dict):
        return str(row["invalid"])
    if len(row) != len(_FIELDS):
        raise ValueError("index row of another shape")
    values = list(row)
    values[_AUTHOR_AT] = author_of(*values[_AUTHOR_AT])
    for i in _TUPLES_AT:
        values[i] = tuple(values[i])
    return Memory(*values)


_OPEN: Dict[str, Index] = {}


def index_for(common_dir: str) -> Index:
    """The process-wide index of the repository whose git directory is ``common_dir``."""
    found = _OPEN.get(common_dir)
    return found if found is not None else _OPEN.setdefault(common_dir, Index(os.path.join(common_dir, "gitmem",
                                                                                        "index.sqlite")))


@atexit.register  # the exit collects no garbage (see gitmem.cli.base): a connection left open keeps its log
def forget_all() -> None:
    """Close every open index (at exit; tests and benchmarks that delete or replace the file)."""
    for index in _OPEN.values():
        index.close()
    _OPEN.clear()

