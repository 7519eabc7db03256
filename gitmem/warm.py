"""What this process already read of a repository's memory: tree entries, parsed blobs, whole
snapshots and per-tree summaries, over the shared on-disk derived index (:mod:`gitmem.index`).

Every :class:`~gitmem.store.Store` on one repository shares one :class:`Warm`, so a long-lived
server (MCP, web UI) reads each tree and blob once; it stays bounded in memory however many writes
it makes, and the disk index keeps the rest for the next process.
"""

from __future__ import annotations

import gc
import itertools
import json
import os
import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import AbstractSet, Any, Callable, Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple

import pygit2

from . import model
from .errors import InvalidMemory
from .index import Entry, Index, Parsed, forget_all, from_rows, index_for, row_text
from .model import Memory, Problem, memory_path, misplaced, parse_content
from .repo import damaged, guard_loose_objects

#: Opens the repository (libgit2): called only when an object must be read from git, so a read the
#: index can answer never loads libgit2 (see :mod:`gitmem.gitdir`).
Git = Callable[[], "pygit2.Repository"]


def layout(entries: Sequence[Entry], depth: int) -> List[Tuple[str, str]]:
    """(name, id) of the entries of a tree ``depth`` levels down that gitmem reads: type folders,
    then two levels of buckets, then ``<id>.yaml`` blobs; anything else in memory's tree is ignored."""
    if depth < 3:
        return [(n, o) for n, k, o in entries if k == "tree" and (depth or n in model.TYPES)]
    return [(n, o) for n, k, o in entries if k == "blob" and n.endswith(".yaml")]


class Warm:
    """What this process already read of one repository: tree entries, parsed blobs
    and whole snapshots, over the shared on-disk :class:`~gitmem.index.Index`.

    Bounded to the last few snapshots, so a long-lived server (MCP, web UI) stays
    flat in memory however many writes it makes; the disk index keeps the rest.

    Threads share it: a cache is read with one lookup a key (which a thread's clearing cannot split from
    a check that the key is there), and changed under a lock held for the change alone, never while git
    or the index is read (two threads that miss one tree both read it: it is the same).
    """

    SNAPSHOTS = 4
    #: Tree entries kept, all trees' together, forgotten all at once past it. Each write adds four trees
    #: that no later read asks for, a diff reads only the trees that changed, and a bucket's entries grow
    #: with the store: bounded by entries (about 10 MB), not by trees, a server stays flat in memory as
    #: the store grows. A whole walk reads the rest from the index.
    TREE_ENTRIES = 50_000
    #: Per-tree summaries kept, forgotten all at once past it.
    SUMMARIES = 2_000
    #: Parsed blobs kept beyond twice those the kept snapshots use.
    PARSED = 1_000

    def __init__(self, index: Index):
        self.index = index
        self.trees: Dict[str, List[Entry]] = {}
        self.tree_size = 0  # entries in ``trees``
        self.parsed: Dict[str, Parsed] = {}
        self.summaries: Dict[str, Dict[str, Any]] = {}
        self.loaded: "OrderedDict[str, Tuple[Dict[str, Memory], List[Problem], Set[str]]]" = OrderedDict()
        self._lock = threading.Lock()

    def tree_entries(self, git: Git, tree_ids: Sequence[str]) -> Dict[str, List[Entry]]:
        """Entries of each tree, from this process, else the index, else git (then remembered)."""
        kept = self.trees
        out = {t: e for t in tree_ids if (e := kept.get(t)) is not None}
        missing = [t for t in tree_ids if t not in out]
        if missing:
            out.update(self.index.trees(missing))
            for t in missing:
                if t not in out:
                    out[t] = read_tree(git(), t)
                    self.index.put_tree(t, out[t])
            self._keep_trees(out)
        return out

    def _keep_trees(self, out: Dict[str, List[Entry]]) -> None:
        """Remember the trees ``out`` holds, within :attr:`TREE_ENTRIES`."""
        with self._lock:
            new = {t: e for t, e in out.items() if t not in self.trees}
            size = sum(len(e) for e in new.values())
            if self.tree_size + size > self.TREE_ENTRIES:
                self.trees.clear()
                self.tree_size = 0
                new = out
                size = sum(len(e) for e in out.values())
            self.trees.update(new)
            self.tree_size += size

    def entries(self, git: Git, root: str) -> List[Tuple[str, str]]:
        """(path, blob id) of every ``<type>/<x>/<y>/<id>.yaml`` blob under the tree ``root``, in tree order."""
        return self.diff(git, None, root)[0]

    def diff(self, git: Git, old: Optional[str], new: str
             ) -> Tuple[List[Tuple[str, str]], List[Tuple[str, str]]]:
        """(added, removed) memory blobs, as (path, blob id), from the tree ``old`` (None: empty) to
        ``new``, reading only the subtrees that differ: what changed costs, not what is stored."""
        added: List[Tuple[str, str]] = []
        removed: List[Tuple[str, str]] = []
        level: List[Tuple[str, Optional[str], Optional[str]]] = [("", old, new)]
        for depth in range(4):
            trees = [t for _, a, b in level for t in (a, b) if t is not None]
            known = self.tree_entries(git, list(dict.fromkeys(trees)))
            nxt: List[Tuple[str, Optional[str], Optional[str]]] = []
            for prefix, a, b in level:
                mine = dict(layout(known[a], depth)) if a is not None else {}
                theirs = dict(layout(known[b], depth)) if b is not None else {}
                for name in sorted(mine.keys() | theirs.keys()):  # tree order: one kind of entry per level
                    was, now = mine.get(name), theirs.get(name)
                    if was == now:
                        continue
                    if depth < 3:
                        nxt.append((f"{prefix}{name}/", was, now))
                        continue
                    if was is not None:
                        removed.append((prefix + name, was))
                    if now is not None:
                        added.append((prefix + name, now))
            level = nxt
        return added, removed

    def arrived(self, git: Git, old: str, new: str) -> List[Tuple[str, str]]:
        """(path, blob id) of every blob of the tree ``new``, at any path (conflict files, stray copies), that
        the tree ``old`` lacks at that path, reading only the subtrees that differ: libgit2's tree diff reads
        every tree of both (0.1 s a pull at 100,000 memories)."""
        out: List[Tuple[str, str]] = []
        level: List[Tuple[str, Optional[str], str]] = [("", old, new)]
        while level:
            known = self.tree_entries(git, list(dict.fromkeys(t for _, a, b in level for t in (a, b) if t is not None)))
            nxt: List[Tuple[str, Optional[str], str]] = []
            for prefix, a, b in level:
                mine = {name: (kind, oid) for name, kind, oid in known[a]} if a is not None else {}
                for name, kind, oid in known[b]:
                    was = mine.get(name)
                    if was == (kind, oid):
                        continue
                    if kind == "tree":
                        nxt.append((f"{prefix}{name}/", was[1] if was is not None and was[0] == "tree" else None, oid))
                    elif kind == "blob":
                        out.append((prefix + name, oid))
            level = nxt
        return out

    #: How many memories each list of a summary keeps: enough for the first page of ``gitmem list``,
    #: ``resume`` and the SessionStart hook's budget; a caller that needs more reads everything.
    NEWEST = 50
    #: The lists a summary keeps: name -> (which memories, newest first). Each entry is [id, path, blob].
    #: Each decides from a memory's ``type`` and ``status`` alone (a bucket's are read from its kept rows).
    LISTS: Dict[str, Tuple[Callable[[Any], bool], bool]] = {
        "newest": (lambda m: m.status == "active", True),
        "recent": (lambda m: m.type != "checkpoint", True),
        "conventions": (lambda m: m.type == "convention" and m.status == "active", False),
        "choices": (lambda m: m.type in model.CHOICE_TYPES and m.status == "active", True),
    }
    #: Past this many distinct paths of active choices, a summary keeps None ("look inside") instead.
    PATHS = 1000

    def summary(self, git: Git, root: str, ref: str) -> Dict[str, Any]:
        """Counts by "type/status", the :attr:`LISTS` and the paths that active decisions and
        rejections name, under ``root``.

        Each tree's summary is the merge of its children's, kept in the index under the tree id
        (and its path), so after a write only the four trees the write changed are summed again:
        ``status``, the first page of ``list``, ``resume`` and the SessionStart hook cost what
        changed, not what is stored."""
        with _collector_paused():
            absent, parsed, buckets = self._parse_backlog(git, root, ref)
            return self._summary(git, "", root, ref, 0, absent, parsed, buckets)

    def _parse_backlog(self, git: Git, root: str, ref: str
                       ) -> Tuple[Set[str], Dict[str, Parsed], Dict[str, Dict[str, Any]]]:
        """Parse, in one batch, every blob under the trees whose summary neither this process nor
        the index knows, walking level by level and asking the index once per level: on a first
        command after a clone that is the whole store, read with one progress line and, past
        :attr:`PARALLEL` blobs, a second process, instead of bucket by bucket.
        Answers the keys of the summaries to compute (the index does not hold them), the blobs
        parsed, which the summing reads again (kept here, not in :attr:`parsed`, which a batch this
        size would overflow; the index has them only once this command flushes), and the buckets'
        summaries where the batch made those too (:meth:`_share`)."""
        absent: Set[str] = set()
        level = [("", root)]
        helper = None
        try:
            for depth in range(4):
                keys = [f"{prefix}:{tree}" for prefix, tree in level]
                known = {k: s for k in keys if (s := self.summaries.get(k)) is not None}
                for k, v in self.index.summaries([k for k in keys if k not in known]).items():
                    known[k] = self._keep_summary(k, _expanded(v))
                absent.update(k for k in keys if k not in known)
                level = [(prefix, tree) for (prefix, tree), key in zip(level, keys) if key not in known]
                if depth == 3:
                    helper, blobs = self._early_helper(git, [tree for _, tree in level])
                    if helper is not None and not self.index.knows_blobs():
                        return absent, {}, self._share(git, level, ref, helper, blobs)
                trees = self.tree_entries(git, [tree for _, tree in level])
                level = [(f"{prefix}{name}/" if depth < 3 else prefix + name, oid)
                         for prefix, tree in level for name, oid in layout(trees[tree], depth)]
            return absent, self.parse(git, level, ref, helper), {}
        finally:
            if helper is not None:
                helper.stop()

    #: Buckets read to guess how many blobs the rest hold, before deciding on a helper.
    SAMPLE = 16

    def _early_helper(self, git: Git, buckets: Sequence[str]) -> Tuple[Optional["_Helper"], int]:
        """A helper started before the buckets (the trees of blobs) are read, when a sample of them says
        they hold :attr:`PARALLEL` blobs or more: it starts Python and imports while they are read. With
        about how many blobs they hold."""
        sample = self.tree_entries(git, buckets[:self.SAMPLE])  # read now, not again
        held = sum(len(layout(entries, 3)) for entries in sample.values())
        blobs = held * len(buckets) // len(sample) if sample else 0
        many = blobs >= self.PARALLEL
        return _Helper() if many and _Helper.usable() else None, blobs  # the load is read only for a large backlog

    #: Buckets this process reads between two looks at what the helper answered.
    STEAL_BUCKETS = 8
    #: Blobs' rows this process keeps before it writes them to the index, while a helper parses.
    SPILL = 8192

    def _share(self, git: Git, buckets: Sequence[Tuple[str, str]], ref: str, helper: "_Helper",
               blobs: int) -> Dict[str, Dict[str, Any]]:
        """Each of ``buckets``' summary, by key, on a first build: ``helper`` takes them from the front and this
        process from the back until they meet. Each side reads a bucket's tree, parses its blobs and sums them,
        so this process takes the helper's index rows and summaries as they come (the rows not decoded), and
        only the trees above the buckets are left to sum after (``blobs``: about how many they hold, for the
        progress line)."""
        helper.send_buckets(git(), buckets)
        out: Dict[str, Dict[str, Any]] = {}
        taken, end, done, spilt = 0, len(buckets), 0, 0  # the helper answered buckets[:taken], this process did buckets[end:]
        progress = Progress(blobs)
        try:
            while end > taken:
                for tree, entries, stored, rows in helper.buckets():
                    if taken < end:  # (past where they met, this process read it too)
                        prefix, expected = buckets[taken]
                        if tree != expected:  # not what it was asked: not listened to, this process reads the rest
                            helper.ignore()
                            break
                        self.index.put_tree(tree, entries)
                        for blob, row in rows:
                            self.index.put_row(blob, row)
                        self.index.put_summary(f"{prefix}:{tree}", stored)
                        out[f"{prefix}:{tree}"] = _expanded(stored)
                        done += len(rows)
                    taken += 1
                for prefix, tree in buckets[max(taken, end - self.STEAL_BUCKETS):end][::-1]:
                    entries = read_tree(git(), tree)  # from git: a new index holds none (a lookup each cost 30 us)
                    self.index.put_tree(tree, entries)
                    parts, found = read_bucket(git(), prefix, entries, ref)
                    for blob, parsed in found.items():
                        self.index.put_parsed(blob, parsed)
                    self.index.put_summary(f"{prefix}:{tree}", _bucket(*parts))
                    out[f"{prefix}:{tree}"] = _bucket_summary(*parts)
                    done += len(found)
                    end -= 1
                if done - spilt >= self.SPILL:
                    self.index.spill()
                    spilt = done
                progress.step(min(done, progress.total))
        finally:
            helper.stop()
        progress.total = done
        progress.done()
        return out

    def _summary(self, git: Git, prefix: str, tree: str, ref: str, depth: int,
                 absent: AbstractSet[str] = frozenset(), parsed: Mapping[str, Parsed] = {},
                 buckets: Mapping[str, Dict[str, Any]] = {}) -> Dict[str, Any]:
        """The summary of ``tree`` (``absent``: keys the index is known not to hold; ``parsed``: blobs
        already parsed; ``buckets``: buckets' summaries already made)."""
        key = f"{prefix}:{tree}"
        known = self.summaries.get(key)
        if known is not None:
            return known
        made = buckets.get(key)
        if made is not None:
            return self._keep_summary(key, made)
        stored = None if key in absent else self.index.summary(key)
        if stored is not None:
            return self._keep_summary(key, _expanded(stored))
        entries = self.tree_entries(git, [tree])[tree]
        if depth == 3:  # a bucket: every valid memory in it is of the type its path names
            blobs = layout(entries, depth)
            found = self.parse(git, [(prefix + name, oid) for name, oid in blobs if oid not in parsed], ref)
            kind, rows, invalid, kept = bucket_rows(prefix, blobs, [parsed[b] if b in parsed else found[b]
                                                                    for _, b in blobs])
            self.index.put_summary(key, _bucket(kind, rows, invalid, kept))
            return self._keep_summary(key, _bucket_summary(kind, rows, invalid, kept))
        children = [(name, self._summary(git, f"{prefix}{name}/", oid, ref, depth + 1, absent, parsed, buckets))
                    for name, oid in layout(entries, depth)]
        counts: Dict[str, int] = {}
        paths: Optional[Set[str]] = set()
        for _, child in children:
            for k, n in child["counts"].items():
                counts[k] = counts.get(k, 0) + n
            paths = None if paths is None or child["paths"] is None else paths.union(child["paths"])
        import heapq  # here: a command that sums nothing need not load it

        lists: Dict[str, List[List[str]]] = {}
        for list_name, (_, newest_first) in self.LISTS.items():
            # Each child's list is sorted already: merge them, and name only the entries kept.
            merged = heapq.merge(*(_under(name, child["lists"][list_name]) for name, child in children),
                                 reverse=newest_first)
            lists[list_name] = list(itertools.islice(merged, self.NEWEST))
        out = {"counts": counts, "lists": lists, "paths": _kept_paths(paths)}
        self.index.put_summary(key, out)
        return self._keep_summary(key, out)

    def _keep_summary(self, key: str, summary: Dict[str, Any]) -> Dict[str, Any]:
        """Remember a tree's summary in this process (``resume``, SessionStart and a pruned walk ask
        for the same ones), bounded like the tree entries."""
        with self._lock:
            if len(self.summaries) > self.SUMMARIES:
                self.summaries.clear()
            self.summaries[key] = summary
        return summary

    def choices_touching(self, git: Git, root: str, ref: str,
                         touches: Callable[[Sequence[str]], bool]) -> List[Tuple[str, str]]:
        """(path, blob) of the active decisions and rejections whose paths ``touches``, reading
        only the subtrees whose summary names such a path."""
        out: List[Tuple[str, str]] = []
        wanted = self.LISTS["choices"][0]
        level = [("", root)]
        for depth in range(4):
            nxt = []
            for prefix, t in level:
                paths = self._summary(git, prefix, t, ref, depth)["paths"]
                if paths is not None and not touches(paths):
                    continue
                for name, oid in layout(self.tree_entries(git, [t])[t], depth):
                    if depth == 3:
                        out.append((prefix + name, oid))
                    elif depth or name in model.CHOICE_TYPES:
                        nxt.append((f"{prefix}{name}/", oid))
            level = nxt
        parsed = self.parse(git, out, ref)
        kept = []
        for path, blob in out:
            m = placed(parsed[blob], path)
            if isinstance(m, Memory) and wanted(m) and touches(m.paths):
                kept.append((path, blob))
        return kept

    #: From this many blobs to parse at once, a second process helps (starting one costs ~0.1 s of its
    #: core, about what this process parses 3,000 blobs in).
    PARALLEL = 20_000
    #: Blobs this process parses between two looks at what the helper answered.
    STEAL = 256

    def parse(self, git: Git, entries: Sequence[Tuple[str, str]], ref: str,
              helper: Optional["_Helper"] = None) -> Dict[str, Parsed]:
        """Each blob's memory (or why its content is invalid): from this process, the index, else parsed
        from git (``helper``: a helper already started, used if there are enough to parse). Whether an
        entry's path fits its memory is :func:`placed`'s to say."""
        kept = self.parsed
        out = {b: p for _, b in entries if (p := kept.get(b)) is not None}
        missing = [b for _, b in entries if b not in out]
        if missing:
            # Many objects made and kept (a cold start's every memory): not walked by each collection meanwhile,
            # and frozen out of later ones (a first search at 100,000 spent 0.6 s of its 7.5 collecting).
            with _collector_paused():
                out.update(self.index.parsed(missing))
                paths = {b: p for p, b in entries}
                todo = [(paths[b], b) for b in dict.fromkeys(missing) if b not in out]
                progress = Progress(len(todo))

                def take(items: Sequence[Tuple[str, str]]) -> None:
                    for path, blob_id in items:
                        out[blob_id] = found = read_memory(git(), path, blob_id, ref)
                        self.index.put_parsed(blob_id, found)

                if len(todo) < self.PARALLEL or (helper is None and not _Helper.usable()):
                    for start in range(0, len(todo), self.STEAL):
                        take(todo[start:start + self.STEAL])
                        progress.step(min(start + self.STEAL, len(todo)))
                else:
                    # A helper parses from the front, this process from the back, until they meet: whichever
                    # is faster (or alive) does more, so a slow or dead helper only leaves more to this side.
                    helper = helper or _Helper()
                    helper.send(git(), todo)
                    answered: List[Tuple[str, Parsed]] = []
                    end = len(todo)
                    try:
                        while end > len(answered):
                            answered += helper.answered()
                            start = max(len(answered), end - self.STEAL)
                            take(todo[start:end])
                            end = min(end, start)
                            progress.step(len(answered) + len(todo) - end)
                    finally:
                        helper.stop()
                    for (_, blob_id), (row, found) in zip(todo[:end], answered):
                        out[blob_id] = found
                        self.index.put_row(blob_id, row)
                progress.done()
                with self._lock:
                    self.parsed.update(out)
                    self._prune()
        return out

    def remember(self, tree: str, memories: Dict[str, Memory], problems: List[Problem],
                 blobs: Set[str]) -> Tuple[Dict[str, Memory], List[Problem], Set[str]]:
        """Keep a loaded snapshot, and only the parsed blobs the kept snapshots use."""
        kept = (memories, problems, blobs)
        with self._lock:
            self.loaded[tree] = kept
            while len(self.loaded) > self.SNAPSHOTS:
                self.loaded.popitem(last=False)
            self._prune()
        return kept

    def _prune(self) -> None:
        """Forget the parsed blobs no kept snapshot uses once they outnumber those it does: a server
        that parses each write's memory (to rank it, to move a view) stays flat in memory. Under the lock."""
        if len(self.parsed) > 2 * sum(len(kept[2]) for kept in self.loaded.values()) + self.PARSED:
            used = set().union(*(kept[2] for kept in self.loaded.values()))
            self.parsed = {b: p for b, p in self.parsed.items() if b in used}


class Progress:
    """A progress line on a terminal while a cold index is built (``what``: "memory", "memory for
    search"); silent elsewhere and for small backlogs."""

    def __init__(self, total: int, what: str = "memory"):
        import sys

        self.total = total
        self.what = what
        self.tty = total >= 2000 and sys.stderr.isatty()
        self.shown = 0

    def step(self, n: int) -> None:
        """``n`` done: shown each time it passes another thousand."""
        if self.tty and n // 1000 > self.shown // 1000:
            import sys

            self.shown = n
            sys.stderr.write(f"\rgitmem: indexing {self.what} {n:,}/{self.total:,}")
            sys.stderr.flush()

    def done(self) -> None:
        if self.tty:
            import sys

            what = self.what.replace("memory", "memories", 1)
            sys.stderr.write(f"\rgitmem: indexed {self.total:,} {what} into .git/gitmem/index.sqlite\n")


def read_tree(repo: pygit2.Repository, tree_id: str) -> List[Entry]:
    """A tree's entries (name, type, id), read from git."""
    return [(e.name, e.type_str, str(e.id)) for e in repo[tree_id].peel(pygit2.Tree)]  # type: ignore[misc]  # named


def read_memory(repo: pygit2.Repository, path: str, blob_id: str, ref: str) -> Parsed:
    """The memory stored in one blob at ``path``, or why it is not a valid one; a missing or
    unreadable object raises the error that names ``ref`` as damaged."""
    try:
        kind, data = repo.odb.read(blob_id)  # the raw object: no Blob built around it
    except (KeyError, ValueError, pygit2.GitError) as e:
        raise damaged(ref, blob_id, e, repo) from None
    if kind != pygit2.GIT_OBJECT_BLOB:
        raise damaged(ref, blob_id, ValueError("not a blob"))
    try:
        return parse_content(data, path)
    except InvalidMemory as e:
        return str(e)


def invalid_at(verdict: str, path: str) -> InvalidMemory:
    """The error an invalid blob's verdict (``invalid <path>: <field>: <problem>``, as :func:`read_memory` says
    it) makes for the entry at ``path``: the path named once, where wrapping the verdict named it twice."""
    return InvalidMemory(path, verdict[len(f"invalid {path}: "):] if verdict.startswith(f"invalid {path}: ") else verdict)


def placed(parsed: Parsed, path: str) -> Parsed:
    """A blob's verdict (:meth:`Warm.parse`: its content's, kept by blob id) for the entry at ``path``: a
    memory stored under another path is invalid there. Every reader of tree entries asks this, never the
    cache alone: one blob can be a memory at its own path and a stray copy at another's."""
    return str(misplaced(parsed, path)) if isinstance(parsed, Memory) and memory_path(parsed) != path else parsed


def bucket_rows(prefix: str, blobs: Sequence[Tuple[str, str]], verdicts: Sequence[Parsed]
                ) -> Tuple[str, List[Tuple[str, str, str]], int, Optional[List[str]]]:
    """What a bucket's summary is made of (see :func:`_bucket`): its type, the (id, blob, status) of its valid
    memories in id order, how many blobs are not one, and the paths its active choices name. ``blobs``: its
    entries (name, blob id) under ``prefix``; ``verdicts``: what each blob holds. Every valid memory in a
    bucket is of the type its path names."""
    rows: List[Tuple[str, str, str]] = []
    invalid = 0
    choice = Warm.LISTS["choices"][0]
    chosen: Set[str] = set()
    for (name, blob), verdict in zip(blobs, verdicts):
        memory = placed(verdict, prefix + name)
        if isinstance(memory, str):
            invalid += 1
            continue
        rows.append((memory.id, blob, memory.status))
        if choice(memory):
            chosen.update(memory.paths)
    rows.sort()
    return prefix.split("/", 1)[0], rows, invalid, _kept_paths(chosen)


def read_bucket(repo: pygit2.Repository, prefix: str, entries: List[Entry], ref: str
                ) -> Tuple[Tuple[str, List[Tuple[str, str, str]], int, Optional[List[str]]], Dict[str, Parsed]]:
    """What a bucket's summary is made of (:func:`bucket_rows`), and what each of its blobs holds, read from git."""
    blobs = layout(entries, 3)
    found = {blob: read_memory(repo, prefix + name, blob, ref) for name, blob in blobs}
    return bucket_rows(prefix, blobs, [found[b] for _, b in blobs]), found


def _kept_paths(paths: Optional[Set[str]]) -> Optional[List[str]]:
    """What a summary keeps of the paths its active choices name: them sorted, or None past :attr:`Warm.PATHS`."""
    return sorted(paths) if paths is not None and len(paths) <= Warm.PATHS else None


class _Helper:
    """A second process parsing blobs (see :func:`_serve`), started before it is given them: Python and
    its imports (about 0.1 s) run while the caller still walks the trees. :meth:`send` hands it blobs
    ((path, blob id)) to parse in order, :meth:`send_buckets` whole buckets to read, parse and sum. It
    reads git itself and writes nothing but its answers, a line each, to a temporary file read as it
    grows: a helper that dies or is stopped only leaves the caller more to do."""

    def __init__(self) -> None:
        import subprocess
        import sys
        import tempfile

        self.out = tempfile.TemporaryFile()
        self.read = 0  # bytes of the file taken so far: whole lines only
        self.lines: List[str] = []  # lines of a bucket not answered whole yet
        self.broken = False
        fd, self.job = tempfile.mkstemp(prefix="gitmem-", suffix=".json")
        os.close(fd)
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # where gitmem is imported from
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)}
        self.proc = subprocess.Popen([sys.executable, "-c", "from gitmem.warm import _serve; _serve()", self.job],
                                     stdin=subprocess.PIPE, stdout=self.out, stderr=subprocess.DEVNULL, env=env)

    def send(self, repo: pygit2.Repository, items: List[Tuple[str, str]]) -> None:
        self._send({"repo": repo.path, "paths": [p for p, _ in items], "blobs": [b for _, b in items]})

    def send_buckets(self, repo: pygit2.Repository, buckets: Sequence[Tuple[str, str]]) -> None:
        """Buckets as (prefix, tree id): answered by :meth:`buckets`."""
        self._send({"repo": repo.path, "buckets": buckets})

    def _send(self, job: Dict[str, Any]) -> None:
        """The job: written whole to a file, then one line on the helper's stdin says it is there."""
        with open(self.job, "w", encoding="utf-8") as f:  # one C call (json.dump streams in Python), flat lists
            f.write(json.dumps(job))
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(b"go\n")
            self.proc.stdin.close()
        except OSError:  # it died starting: the caller parses everything
            self.broken = True

    @staticmethod
    def usable() -> bool:
        """Only with a core to spare: on a busy machine (load average 4-5 on 2 cores, measured) a
        helper took CPU from this process and the cold start ran about 15% longer, not shorter."""
        import sys

        cores = os.cpu_count() or 1
        return bool(sys.executable) and cores > 1 and _load() <= cores - 1

    def _whole_lines(self) -> List[str]:
        """The lines the helper wrote whole since the last call."""
        if self.broken:
            return []
        # pread leaves the file offset, which the helper's writes share, where the helper put it.
        data = os.pread(self.out.fileno(), 1 << 26, self.read)
        whole = data[:data.rfind(b"\n") + 1]
        self.read += len(whole)
        return whole.decode("ascii", "replace").split("\n")[:-1]

    def ignore(self) -> None:
        """Stop it, and answer nothing more from it."""
        self.stop()
        self.broken = True
        self.lines = []

    def answered(self) -> List[Tuple[str, Parsed]]:
        """(row, parsed) of the blobs answered since the last call, in order. Only whole lines
        that read as rows count: from the first that does not, the helper is not listened to."""
        rows = self._whole_lines()
        out: List[Tuple[str, Parsed]] = []
        for row, found in zip(rows, from_rows(rows)):
            if found is None:
                self.ignore()
                break
            out.append((row, found))
        return out

    def buckets(self) -> List[Tuple[str, List[Entry], Dict[str, Any], List[Tuple[str, str]]]]:
        """(tree id, entries, summary as the index keeps it, (blob id, index row) of each blob) of the buckets
        answered whole since the last call, in order. The rows are taken as the helper wrote them, unread:
        :func:`row_text` of the same code, and a row that does not read is parsed again where it is asked
        for. From a bucket whose lines are not of that shape, the helper is not listened to."""
        lines = self.lines = self.lines + self._whole_lines()
        out: List[Tuple[str, List[Entry], Dict[str, Any], List[Tuple[str, str]]]] = []
        at = 0
        try:
            while at < len(lines):
                head = json.loads(lines[at])
                if not isinstance(head["rows"], int) or head["rows"] < 0:  # (fewer than none: back to this line)
                    raise ValueError("not a count of rows")
                end = at + 1 + head["rows"]
                if end > len(lines):
                    break
                rows = [(blob, row) for blob, sep, row in (line.partition(" ") for line in lines[at + 1:end]) if sep]
                if len(rows) < end - at - 1:
                    raise ValueError("not a row")
                out.append((head["tree"], [tuple(e) for e in head["entries"]], head["bucket"], rows))
                at = end
        except (ValueError, KeyError, TypeError):
            self.ignore()
            return out
        del lines[:at]
        return out

    def stop(self) -> None:
        """Stop it, if it runs, and remove what it used (again: no-op)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for f in (self.proc.stdin, self.out):
            if f is not None and not f.closed:
                try:
                    f.close()
                except OSError:  # the pipe to a process killed before it read
                    pass
        try:
            os.unlink(self.job)
        except OSError:
            pass


def _serve() -> None:
    """The helper process (:class:`_Helper`): once stdin says the job is written, read it from the file
    its command line names and write one row per blob, or a bucket's summary and rows, a batch at a time
    (the caller reads the file as it grows)."""
    import sys

    gc.disable()  # see _collector_paused: nothing this process makes holds a cycle
    if sys.stdin.readline() != "go\n":  # stopped before it was given a job
        return
    with open(sys.argv[1], encoding="utf-8") as f:
        job = json.load(f)
    repo = pygit2.Repository(job["repo"])
    guard_loose_objects(repo)
    write = sys.stdout.write
    for n, (prefix, tree) in enumerate(job.get("buckets", ()), 1):
        entries = read_tree(repo, tree)
        parts, found = read_bucket(repo, prefix, entries, "")
        write(json.dumps({"tree": tree, "entries": entries, "bucket": _bucket(*parts), "rows": len(found)}) + "\n")
        write("".join(f"{blob} {row_text(parsed)}\n" for blob, parsed in found.items()))
        if n % Warm.STEAL_BUCKETS == 0:
            sys.stdout.flush()
    for n, (path, blob_id) in enumerate(zip(job.get("paths", ()), job.get("blobs", ())), 1):
        write(row_text(read_memory(repo, path, blob_id, "")) + "\n")
        if n % Warm.STEAL == 0:
            sys.stdout.flush()
    sys.stdout.flush()


def _load() -> float:
    """How many threads want a core, this process among them: runnable at this instant where Linux
    says (the load average trails by a minute, so right after a busy minute it would refuse a helper
    to an idle machine), else the load average; 0 where neither is known."""
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return float(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        try:
            return os.getloadavg()[0]
        except OSError:
            return 0.0


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused while memories are parsed and summed in bulk: a cold
    start makes millions of objects that hold no cycles (memories, index rows, lists), which plain
    reference counting frees, and each full collection would walk every one still alive again.

    When the batch leaves many objects alive (a cold start's caches), they are frozen out of every later
    collection: else the first one after the collector resumes walks them all (0.22 s after a cold start
    at 100,000). Only then: a server's small batches freeze nothing, so its cycles are still collected."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            if gc.get_count()[0] > _FREEZE_FROM:
                gc.freeze()
            gc.enable()


#: Objects left alive by a batch (Python's count of allocations less deallocations) from which it is frozen.
_FREEZE_FROM = 200_000


class _Kind(NamedTuple):
    """What :attr:`Warm.LISTS` decide on: a memory's type and status."""

    type: str
    status: str


def _bucket(kind: str, rows: List[Tuple[str, str, str]], invalid: int, paths: Optional[List[str]]) -> Dict[str, Any]:
    """A bucket's summary as the index keeps it: the (id, blob, status) ``rows`` of its memories (in id
    order, all of type ``kind``), from which :func:`_bucket_summary` makes its counts and lists. The
    buckets' summaries are most of what a cold start writes: these are about a third of the size of the
    lists (which name most memories two or three times over)."""
    return {"bucket": kind, "ids": " ".join(r[0] for r in rows), "blobs": " ".join(r[1] for r in rows),
            "inactive": [[n, r[2]] for n, r in enumerate(rows) if r[2] != "active"], "invalid": invalid,
            "paths": paths}


def counted(counts: Mapping[str, int], types: Optional[Sequence[str]] = None, status: Optional[str] = "active") -> int:
    """How many memories of ``types`` (None: any) with ``status`` (None: any) a summary's counts hold (keys
    ``type/status``, as :func:`_bucket_summary` makes them; ``invalid`` blobs are none of them)."""
    return sum(n for key, n in counts.items() if "/" in key and (types is None or key.split("/")[0] in types)
               and (status is None or key.split("/")[1] == status))


def _bucket_summary(kind: str, rows: Sequence[Tuple[str, str, str]], invalid: int,
                    paths: Optional[List[str]]) -> Dict[str, Any]:
    """The summary of a bucket whose valid memories are ``rows`` (see :func:`_bucket`)."""
    counts: Dict[str, int] = {}
    for _, _, status in rows:
        counts[f"{kind}/{status}"] = counts.get(f"{kind}/{status}", 0) + 1
    if invalid:
        counts["invalid"] = invalid
    lists: Dict[str, List[List[str]]] = {}
    every = [[i, f"{i}.yaml", b] for i, b, _ in rows]  # one entry a memory, in every list that takes it (read only)
    for name, (wanted, newest_first) in Warm.LISTS.items():
        takes = {status: wanted(_Kind(kind, status)) for status in {r[2] for r in rows}}
        entries = [e for e, (_, _, status) in zip(every, rows) if takes[status]]
        lists[name] = (entries[::-1] if newest_first else entries)[:Warm.NEWEST]
    return {"counts": counts, "lists": lists, "paths": paths}


def _expanded(summary: Dict[str, Any]) -> Dict[str, Any]:
    """A summary as :meth:`Warm._summary` makes it, from what the index keeps (see :func:`_bucket`)."""
    if "bucket" not in summary:
        return summary
    ids, blobs = summary["ids"].split(), summary["blobs"].split()
    statuses = ["active"] * len(ids)
    for n, status in summary["inactive"]:
        statuses[n] = status
    return _bucket_summary(summary["bucket"], list(zip(ids, blobs, statuses)), summary["invalid"], summary["paths"])


def _under(name: str, entries: List[List[str]]) -> Iterator[List[str]]:
    """A child tree's list entries, as its parent names them (``name/`` before the path)."""
    for memory_id, path, blob in entries:
        yield [memory_id, f"{name}/{path}", blob]


_WARM: Dict[str, Warm] = {}


def warm_for(root: str) -> Warm:
    """The process-wide read cache of the repository whose common directory is ``root`` (shared by
    every Store on it)."""
    root = os.path.realpath(root)
    found = _WARM.get(root)
    return found if found is not None else _WARM.setdefault(root, Warm(index_for(root)))  # one, whoever asks first


def forget_warm() -> None:
    """Drop what this process remembers (benchmarks that time a cold start)."""
    _WARM.clear()
    forget_all()
