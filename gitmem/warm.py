"""What this process already read of a repository's memory: tree entries, parsed blobs, whole
snapshots and per-tree summaries, over the shared on-disk derived index (:mod:`gitmem.index`).

Every :class:`~gitmem.store.Store` on one repository shares one :class:`Warm`, so a long-lived
server (MCP, web UI) reads each tree and blob once; it stays bounded in memory however many writes
it makes, and the disk index keeps the rest for the next process.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import pygit2

from . import model
from .errors import InvalidMemory
from .index import Entry, Index, Parsed, forget_all, index_for
from .model import Memory, Problem, parse_memory
from .repo import common_dir, damaged


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

    def tree_entries(self, repo: pygit2.Repository, tree_ids: Sequence[str]) -> Dict[str, List[Entry]]:
        """Entries of each tree, from this process, else the index, else git (then remembered)."""
        out = {t: self.trees[t] for t in tree_ids if t in self.trees}
        missing = [t for t in tree_ids if t not in out]
        if missing:
            out.update(self.index.trees(missing))
            for t in missing:
                if t not in out:
                    tree = repo[t].peel(pygit2.Tree)
                    out[t] = [(e.name, e.type_str, str(e.id)) for e in tree]  # type: ignore[misc]  # a tree entry has a name
                    self.index.put_tree(t, out[t])
        new = {t: e for t, e in out.items() if t not in self.trees}
        size = sum(len(e) for e in new.values())
        if self.tree_size + size > self.TREE_ENTRIES:
            self.trees.clear()
            self.tree_size = 0
            new = out
            size = sum(len(e) for e in out.values())
        self.trees.update(new)
        self.tree_size += size
        return out

    def entries(self, repo: pygit2.Repository, root: str) -> List[Tuple[str, str]]:
        """(path, blob id) of every ``<type>/<x>/<y>/<id>.yaml`` blob under the tree ``root``, in tree order."""
        return self.diff(repo, None, root)[0]

    def diff(self, repo: pygit2.Repository, old: Optional[str], new: str
             ) -> Tuple[List[Tuple[str, str]], List[Tuple[str, str]]]:
        """(added, removed) memory blobs, as (path, blob id), from the tree ``old`` (None: empty) to
        ``new``, reading only the subtrees that differ: what changed costs, not what is stored."""
        added: List[Tuple[str, str]] = []
        removed: List[Tuple[str, str]] = []
        level: List[Tuple[str, Optional[str], Optional[str]]] = [("", old, new)]
        for depth in range(4):
            trees = [t for _, a, b in level for t in (a, b) if t is not None]
            known = self.tree_entries(repo, list(dict.fromkeys(trees)))
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

    #: How many memories each list of a summary keeps: enough for the first page of ``gitmem list``,
    #: ``resume`` and the SessionStart hook's budget; a caller that needs more reads everything.
    NEWEST = 50
    #: The lists a summary keeps: name -> (which memories, newest first). Each entry is [id, path, blob].
    LISTS: Dict[str, Tuple[Callable[[Memory], bool], bool]] = {
        "newest": (lambda m: m.status == "active", True),
        "recent": (lambda m: m.type != "checkpoint", True),
        "conventions": (lambda m: m.type == "convention" and m.status == "active", False),
        "choices": (lambda m: m.type in model.CHOICE_TYPES and m.status == "active", True),
    }
    #: Past this many distinct paths of active choices, a summary keeps None ("look inside") instead.
    PATHS = 1000

    def summary(self, repo: pygit2.Repository, root: str, ref: str) -> Dict[str, Any]:
        """Counts by "type/status", the :attr:`LISTS` and the paths that active decisions and
        rejections name, under ``root``.

        Each tree's summary is the merge of its children's, kept in the index under the tree id
        (and its path), so after a write only the four trees the write changed are summed again:
        ``status``, the first page of ``list``, ``resume`` and the SessionStart hook cost what
        changed, not what is stored."""
        return self._summary(repo, "", root, ref, 0)

    def _summary(self, repo: pygit2.Repository, prefix: str, tree: str, ref: str, depth: int) -> Dict[str, Any]:
        key = f"{prefix}:{tree}"
        known = self.summaries.get(key)
        if known is None:
            known = self.index.summary(key)
        if known is not None:
            return self._keep_summary(key, known)
        entries = self.tree_entries(repo, [tree])[tree]
        counts: Dict[str, int] = {}
        lists: Dict[str, List[List[str]]] = {name: [] for name in self.LISTS}
        paths: Optional[Set[str]] = set()
        if depth < 3:
            for name, oid in layout(entries, depth):
                child = self._summary(repo, f"{prefix}{name}/", oid, ref, depth + 1)
                for k, n in child["counts"].items():
                    counts[k] = counts.get(k, 0) + n
                for list_name, kept in child["lists"].items():
                    lists[list_name] += [[i, f"{name}/{p}", b] for i, p, b in kept]
                paths = None if paths is None or child["paths"] is None else paths.union(child["paths"])
        else:
            blobs = [(prefix + name, oid) for name, oid in layout(entries, depth)]
            found = self.parse(repo, blobs, ref)
            for path, blob in blobs:
                parsed = found[blob]
                if isinstance(parsed, str):
                    counts["invalid"] = counts.get("invalid", 0) + 1
                    continue
                k = f"{parsed.type}/{parsed.status}"
                counts[k] = counts.get(k, 0) + 1
                for list_name, (wanted, _) in self.LISTS.items():
                    if wanted(parsed):
                        lists[list_name].append([parsed.id, path.rsplit("/", 1)[1], blob])
                if paths is not None and self.LISTS["choices"][0](parsed):
                    paths.update(parsed.paths)
        for list_name, (_, newest_first) in self.LISTS.items():
            lists[list_name] = sorted(lists[list_name], reverse=newest_first)[: self.NEWEST]
        kept_paths = sorted(paths) if paths is not None and len(paths) <= self.PATHS else None
        out = {"counts": counts, "lists": lists, "paths": kept_paths}
        self.index.put_summary(key, out)
        return self._keep_summary(key, out)

    def _keep_summary(self, key: str, summary: Dict[str, Any]) -> Dict[str, Any]:
        """Remember a tree's summary in this process (``resume``, SessionStart and a pruned walk ask
        for the same ones), bounded like the tree entries."""
        if len(self.summaries) > self.SUMMARIES:
            self.summaries.clear()
        self.summaries[key] = summary
        return summary

    def choices_touching(self, repo: pygit2.Repository, root: str, ref: str,
                         touches: Callable[[Sequence[str]], bool]) -> List[Tuple[str, str]]:
        """(path, blob) of the active decisions and rejections whose paths ``touches``, reading
        only the subtrees whose summary names such a path."""
        out: List[Tuple[str, str]] = []
        wanted = self.LISTS["choices"][0]
        level = [("", root)]
        for depth in range(4):
            nxt = []
            for prefix, t in level:
                paths = self._summary(repo, prefix, t, ref, depth)["paths"]
                if paths is not None and not touches(paths):
                    continue
                for name, oid in layout(self.tree_entries(repo, [t])[t], depth):
                    if depth == 3:
                        out.append((prefix + name, oid))
                    elif depth or name in model.CHOICE_TYPES:
                        nxt.append((f"{prefix}{name}/", oid))
            level = nxt
        parsed = self.parse(repo, out, ref)
        kept = []
        for path, blob in out:
            m = parsed[blob]
            if isinstance(m, Memory) and wanted(m) and touches(m.paths):
                kept.append((path, blob))
        return kept

    def parse(self, repo: pygit2.Repository, entries: Sequence[Tuple[str, str]], ref: str) -> Dict[str, Parsed]:
        """Each blob's memory (or why it is invalid): from this process, the index, else parsed from git."""
        out = {b: self.parsed[b] for _, b in entries if b in self.parsed}
        missing = [b for _, b in entries if b not in out]
        if missing:
            out.update(self.index.parsed(missing))
            paths = {b: p for p, b in entries}
            todo = [b for b in missing if b not in out]
            progress = Progress(len(todo))
            for n, blob_id in enumerate(todo):
                try:
                    data = repo[blob_id].data  # type: ignore[attr-defined]  # pygit2 stub: repo[oid] is Object
                except (KeyError, ValueError, pygit2.GitError) as e:
                    raise damaged(ref, blob_id, e) from None
                try:
                    found: Parsed = parse_memory(data, paths[blob_id])
                except InvalidMemory as e:
                    found = str(e)
                out[blob_id] = found
                self.index.put_parsed(blob_id, found)
                progress.step(n + 1)
            progress.done()
        self.parsed.update(out)
        self._prune()
        return out

    def remember(self, tree: str, memories: Dict[str, Memory], problems: List[Problem],
                 blobs: Set[str]) -> Tuple[Dict[str, Memory], List[Problem], Set[str]]:
        """Keep a loaded snapshot, and only the parsed blobs the kept snapshots use."""
        self.loaded[tree] = (memories, problems, blobs)
        while len(self.loaded) > self.SNAPSHOTS:
            self.loaded.popitem(last=False)
        self._prune()
        return self.loaded[tree]

    def _prune(self) -> None:
        """Forget the parsed blobs no kept snapshot uses once they outnumber those it does: a server
        that parses each write's memory (to rank it, to move a view) stays flat in memory."""
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

    def step(self, n: int) -> None:
        if self.tty and n % 1000 == 0:
            import sys

            sys.stderr.write(f"\rgitmem: indexing {self.what} {n:,}/{self.total:,}")
            sys.stderr.flush()

    def done(self) -> None:
        if self.tty:
            import sys

            what = self.what.replace("memory", "memories", 1)
            sys.stderr.write(f"\rgitmem: indexed {self.total:,} {what} into .git/gitmem/index.sqlite\n")


_WARM: Dict[str, Warm] = {}


def warm_for(repo: pygit2.Repository) -> Warm:
    """The process-wide read cache of ``repo`` (shared by every Store on it)."""
    root = common_dir(repo)
    if root not in _WARM:
        _WARM[root] = Warm(index_for(root))
    return _WARM[root]


def forget_warm() -> None:
    """Drop what this process remembers (benchmarks that time a cold start)."""
    _WARM.clear()
    forget_all()
