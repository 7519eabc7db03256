"""The store: memories as YAML blobs on ``refs/memory/<branch>``, one commit per write.

A write builds new blobs and trees, a commit whose parent is the tip the write
read, then moves the ref by compare-and-swap (gitmem.refs). If the ref moved
meanwhile, the write is re-applied on the new tip and retried, so concurrent
writers never lose a write and the ref always points at a complete commit.
The working tree, the index and code refs are never touched.
"""

from __future__ import annotations

import itertools
import os
import threading
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple,
                    TypeVar, Union)

import pygit2

from . import gitdir, model
from .errors import (AmbiguousId, BranchError, Changed, GitmemError, IdTooShort, InvalidMemory, NotFound, echoed,
                     PendingConflict, Repeated, StorageError, Superseded)
from .gitdir import GitDir
from .index import Entry, code_key
from .model import Author, Memory, Problem
from .repo import (
    blob_at, check_branch_name, common_dir, config_get, created_from, current_branch, damaged, default_author,
    default_branch,
    entries_by_name, head_commit,
    memory_ref, open_repository, parent_chain, ref_target, reopen, undecodable,
)
from .warm import Warm, counted, invalid_at, placed, warm_for

if TYPE_CHECKING:
    from .audit import Change

COMMITTER = ("gitmem", "gitmem@localhost")
#: Memories a listing reads from the index at a time.
_CHUNK = 256
#: A page under a filter the index cannot count (a tag; an author kind or a source of retracted or superseded
#: memories) reads this many memories at most to count it, those the index narrows it to (by type, whether
#: active, a tag's words, a path, an author kind, a source): about 15 ms.
COUNTED = 500
T = TypeVar("T")
_OPENING = threading.Lock()  # one thread at a time opens a store's repository (the first, or its own handle)


class Write(NamedTuple):
    """What a successful write produced."""

    memory: Memory
    commit: str
    redacted: int = 0


class Page(NamedTuple):
    """One page of a newest-first listing (:meth:`Store.page`), with the cursors of the pages around it."""

    memories: List[Memory]  # newest first
    total: Optional[int]  # how many match in all; None where only reading every memory could count them
    older: Optional[str]  # ``before`` of the next older page (its oldest id); None: nothing older matches
    newer: Optional[str]  # ``after`` of the next newer page (its newest id); None: this is the newest page


class Built(NamedTuple):
    """What one attempt of a write builds on the snapshot it was given: the tree changes (path ->
    bytes, or None to delete), the memory the commit is about, and how many secrets were redacted."""

    updates: Mapping[str, Optional[bytes]]
    memory: Memory
    redacted: int = 0


def _refuse_edit_over_conflict(snap: "Snapshot", old: Memory, new: Memory) -> None:
    """An edit that changes a field a merge left in conflict is refused: `gitmem resolve` writes the side it
    takes over that field, so the edit would be undone by the next resolve, and the conflict, which shows only
    the two merged versions, would never show it. Fields that did not clash stay editable."""
    from .records import conflict_path

    entry = snap.lookup(conflict_path(old.id))
    if entry is None or entry[1] != "blob":
        return
    from .trust import read_conflict

    c = read_conflict(snap.store.repo, entry[2])
    if c is None:
        return  # no conflict gitmem can read (doctor names it): nothing a resolve would write over the edit
    before, after = old.to_dict(), new.to_dict()
    clashing = [f for f in c.fields if before.get(f) != after.get(f)]
    if clashing:
        raise PendingConflict(old.id, f"{old.id} is in conflict on {', '.join(clashing)} (a merge kept two versions): "
                                      f"settle it first with `gitmem resolve {old.id} --ours|--theirs|--edit`, "
                                      "then edit it")


class Snapshot:
    """The memory tree at one commit, with lookups that avoid loading everything. Trees are read
    through the warm cache and the index (:meth:`Warm.tree_entries`): libgit2 opens only on a miss."""

    def __init__(self, store: "Store", commit: Optional[str]):
        self.store = store
        self.commit = commit
        self.tree_id: Optional[str] = store.tree_of(commit) if commit else None
        self._tree: Optional[pygit2.Tree] = None

    @property
    def tree(self) -> Optional[pygit2.Tree]:
        """The root tree as a libgit2 object, for callers that walk or diff it."""
        if self._tree is None and self.tree_id is not None:
            try:
                self._tree = self.store.repo[self.tree_id].peel(pygit2.Tree)
            except (KeyError, ValueError, pygit2.GitError) as e:
                raise self.store._damaged(self.commit, e) from None
        return self._tree

    def lookup(self, path: str) -> Optional[Entry]:
        """The entry (name, kind, id) at ``path`` ("a/b/c"), or None."""
        found: Optional[Entry] = ("", "tree", self.tree_id) if self.tree_id else None
        for name in path.split("/"):
            if found is None or found[1] != "tree":
                return None
            found = next((e for e in self._entries([found[2]])[found[2]] if e[0] == name), None)
        return found

    def listings(self, paths: Sequence[str]) -> Dict[str, List[Entry]]:
        """The entries of each folder of ``paths`` ("a/b") there is, read a level at a time."""
        wanted = set(paths)
        on_the_way = {p[:n] for p in wanted for n, c in enumerate(p) if c == "/"} | wanted
        out: Dict[str, List[Entry]] = {}
        level = {"": self.tree_id} if self.tree_id else {}
        while level:
            known = self._entries(list(dict.fromkeys(level.values())))
            deeper: Dict[str, str] = {}
            for prefix, tree in level.items():
                if prefix in wanted:
                    out[prefix] = known[tree]
                for name, kind, oid in known[tree]:
                    path = f"{prefix}/{name}" if prefix else name
                    if kind == "tree" and path in on_the_way:
                        deeper[path] = oid
            level = deeper
        return out

    def _entries(self, trees: List[str]) -> Dict[str, List[Entry]]:
        try:
            return self.store.warm.tree_entries(self.store.repository, trees)
        except (KeyError, ValueError, pygit2.GitError) as e:
            raise self.store._damaged(self.commit, e) from None

    def has(self, path: str) -> bool:
        return self.lookup(path) is not None

    def find(self, memory_id: str) -> Tuple[str, Memory]:
        """Resolve a full id or an abbreviation (see :func:`gitmem.model.matching_ids`: the short
        tail `list` prints, or a unique prefix; case-insensitive) to its path and memory."""
        ref = self.store.ref
        given = memory_id if isinstance(memory_id, str) else ""
        wanted = model.normalize_id(given)
        if wanted and not model.ID_PART_RE.match(wanted):
            raise NotFound(memory_id, ref)
        if len(wanted) < model.SHORT_ID_MIN:  # "" too: the documented rule, not "no memory ''"
            raise IdTooShort(given, model.SHORT_ID_MIN, ref)
        if len(wanted) == model.ID_LENGTH:
            for type_ in model.TYPES:
                path = model.memory_path(type_, wanted)
                entry = self.lookup(path)
                if entry is not None and entry[1] == "blob":
                    return path, self.store.parse_blob(entry[2], path)
            raise NotFound(memory_id, ref)
        hits = self.ending_with([wanted])[wanted] or model.matching_ids(wanted, self.ids())
        if len(hits) > 1:
            raise AmbiguousId(given, hits)
        if not hits:
            raise NotFound(memory_id, ref)
        return self.find(hits[0])

    def ending_with(self, tails: Sequence[str]) -> Dict[str, List[str]]:
        """Each tail's ids (those ending with it): the fan-out is by the last two chars, so this reads
        one folder per type and tail instead of listing every memory."""
        folders = {t: [f"{type_}/{t[-2]}/{t[-1]}" for type_ in model.TYPES] for t in tails}
        found = self.listings([f for fs in folders.values() for f in fs])
        return {t: sorted(name[:-5] for f in fs for name, kind, _ in found.get(f, ())
                          if kind == "blob" and name.endswith(".yaml") and name[:-5].endswith(t))
                for t, fs in folders.items()}

    def entries(self) -> Iterator[Tuple[str, str]]:
        """(path, blob id) of every memory blob, in tree order."""
        if self.tree_id is None:
            return
        try:
            yield from self.store.warm.entries(self.store.repository, self.tree_id)
        except (KeyError, ValueError, pygit2.GitError) as e:
            raise self.store._damaged(self.commit, e) from None

    def ids(self) -> List[str]:
        return sorted(p.rsplit("/", 1)[1][:-5] for p, _ in self.entries())

    def memories(self) -> Dict[str, Memory]:
        return self.store._load_all(self)


def _check_limit(limit: Optional[int]) -> None:
    """``limit`` is "at most N" (None: no limit), as ``-n`` is on the command line, which refuses below 1:
    0 gave every memory and a negative number all but some, read as a slice."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise GitmemError(f"limit must be a whole number of at least 1 (got {limit!r})")


def matcher(*, type: Optional[str], tag: Optional[str], path: Optional[str], author_kind: Optional[str],
             source: Optional[str], status: Optional[str], before: Optional[str] = None,
             after: Optional[str] = None) -> Callable[[Memory], bool]:
    """The list filters as one test of a memory (``before``/``after``: only ids that sort before/after it);
    unknown choices raise."""
    model.check_choice("type", type, model.TYPES)
    model.check_choice("status", status, model.STATUSES)
    model.check_choice("author kind", author_kind, model.AUTHOR_KINDS)
    return lambda m: (model.matches(m, type=type, tag=tag, path=path, author_kind=author_kind, source=source,
                                    status=status) and (before is None or m.id < before)
                      and (after is None or m.id > after))


def _tag_terms(tag: Optional[str]) -> List[str]:
    """The search terms of a tag, which every memory with it has among its own (none for a tag of stop words)."""
    if tag is None:
        return []
    from .search import tokenize  # only for a tag: a plain list need not build the tokenizer's patterns

    return tokenize(tag)


class Store:
    """Memory of one code branch. Open with :meth:`Store.open`.

    Reads come from ``refs/memory/<branch>``, or, when the branch has no memory
    yet, from the branch it was forked from (reads never create refs). The
    first write on such a branch forks the ref from that parent's tip.

    Example::

        store = Store.open(".")
        w = store.add("decision", "Use pygit2 for git access", reason="no subprocess per write")
        store.get(w.memory.id).text
    """

    #: Up to this many ids, :meth:`short_ids` reads their folders; past it, every id (one sort).
    SHORT_ID_PAGE = 50

    def __init__(self, repo: Union[pygit2.Repository, GitDir], branch: str, notice: Optional[str] = None):
        """``repo``: an open repository (this thread's: another thread opens one of its own), or a
        :class:`~gitmem.gitdir.GitDir` that libgit2 opens only when a read needs it (see :meth:`repository`)."""
        self._local = threading.local()  # each thread's repository handle and problems
        if isinstance(repo, GitDir):
            self.git: Optional[GitDir] = repo
            self._repo: Optional[pygit2.Repository] = None  # the first handle opened, by any thread
        else:
            self.git, self._repo = None, repo
            self._local.repo = repo
        self.branch = check_branch_name(branch)
        self.ref = memory_ref(self.branch)
        self.notice = notice
        self.warm = warm_for(repo.common if isinstance(repo, GitDir) else common_dir(repo))

    @classmethod
    def open(cls, path: str = ".", branch: Optional[str] = None) -> "Store":
        """The store of ``branch`` (default: the one HEAD names) in the repository at ``path``.
        libgit2 is not loaded yet where a warm read may not need it (see :mod:`gitmem.gitdir`)."""
        try:
            git = gitdir.discover(path)
            return cls(git, branch if branch is not None else gitdir.head_branch(git))
        except gitdir.Unsure:
            pass
        repo = open_repository(path)
        notice = None
        if branch is None:
            branch, notice = current_branch(repo)
            shown = undecodable(branch)
            if shown is not None:  # git allows it, but no memory ref can be named for it: refuse, not guess
                raise BranchError(f"the checked-out branch {shown} is not valid UTF-8, so it has no memory: "
                                  "pass --branch NAME, or rename it (git branch -m)")
        return cls(repo, branch, notice)

    def repository(self) -> pygit2.Repository:
        """The repository, opened with libgit2 on the first call that needs git itself; each thread
        uses a handle of its own (see :func:`gitmem.repo.reopen`), opened on its first such call."""
        try:
            return self._local.repo
        except AttributeError:
            pass
        with _OPENING:
            if self._repo is None:
                assert self.git is not None
                repo = self._repo = open_repository(self.git.workdir)
            else:
                repo = reopen(self._repo)
        self._local.repo = repo
        return repo

    @property
    def problems(self) -> List[Problem]:
        """The blobs that are not valid memories, as the last read of every memory on this thread found them."""
        return getattr(self._local, "problems", [])

    @problems.setter
    def problems(self, found: List[Problem]) -> None:
        self._local.problems = found

    @property
    def repo(self) -> pygit2.Repository:
        return self.repository()

    def current_blob(self, path: str) -> Optional[str]:
        """The blob id of ``path`` as an agent read it: the working file's (hashed without libgit2); None when
        the working tree has no such file (deleted, not yet committed: its summary is stale), unless there is
        no working tree or a sparse checkout leaves files out of it: then HEAD's.

        A path whose folders lead out of the work tree has none: ``path`` comes from memory anyone who can push
        wrote, and a clone's committed link ``d -> /dev`` would have ``d/zero`` read until memory ran out (git
        stores no file beyond a link, so no blob of it could match)."""
        from .files import inside

        workdir = self.git.workdir if self._repo is None and self.git is not None else self.repo.workdir
        if workdir:
            try:
                inside(os.path.dirname(os.path.join(workdir, path)), workdir)
            except GitmemError:
                return None
        blob = gitdir.blob_id(os.path.join(workdir, path)) if workdir else None
        if blob is None and workdir and not os.path.lexists(os.path.join(workdir, path)) and \
                (self.config("core.sparseCheckout") or "").lower() not in ("true", "yes", "on", "1"):
            return None
        if blob is None and (head := head_commit(self.repo)):
            blob = blob_at(self.repo, head, path)
        return blob

    def current_blobs(self, memories: Iterable[Memory]) -> Dict[str, Optional[str]]:
        """:meth:`current_blob` of every path a file memory of ``memories`` is tied to (what
        :func:`gitmem.search.rank` takes as ``blobs``: a stale summary ranks lower)."""
        out: Dict[str, Optional[str]] = {}
        for m in memories:
            if m.type == "file" and m.blob and m.paths and m.paths[0] not in out:
                out[m.paths[0]] = self.current_blob(m.paths[0])
        return out

    @property
    def workdir(self) -> str:
        """The worktree's root (for a bare repository, the folder that holds it)."""
        if self._repo is None and self.git is not None:
            return self.git.workdir
        return self.repo.workdir or os.path.dirname(self.repo.path.rstrip("/"))

    @property
    def common_dir(self) -> str:
        """The git directory linked worktrees share, where gitmem keeps its own files (a session's hook state,
        the bill's runs): found without libgit2 where gitdir found the repository."""
        return os.path.normpath(self.git.common) if self.git is not None else common_dir(self.repo)

    def config(self, key: str) -> Optional[str]:
        """``git config key`` of the repository, read without libgit2 where gitdir can."""
        if self._repo is None and self.git is not None:
            try:
                return gitdir.config(self.git, key)
            except gitdir.Unsure:
                pass
        return config_get(self.repo, key)

    # --- reading -----------------------------------------------------------

    def own_tip(self) -> Optional[str]:
        """The tip of this branch's own memory ref, or None when it has none yet."""
        if self._repo is None and self.git is not None:
            try:
                return gitdir.ref(self.git, self.ref)
            except gitdir.Unsure:
                pass
        return ref_target(self.repo, self.ref)

    def dropped(self) -> Optional[str]:
        """What a person reads when memory gitmem wrote on this branch's ref was taken away by a move it did not
        make (:func:`gitmem.refs.dropped_writes`), or None. Unless the reflog says the tip gitmem last wrote is
        not the ref's tip (:func:`gitmem.gitdir.may_be_dropped`), neither libgit2 nor :mod:`gitmem.refs` loads
        (a warm status's 2.5 ms)."""
        suspect = gitdir.may_be_dropped(self._files(), self.ref)
        if suspect is None:
            return None
        from .refs import dropped_writes

        found = dropped_writes(self.repo, self.ref, *suspect)
        return found.notice(current_branch(self.repo)[0]) if found else None

    def _files(self) -> GitDir:
        """Where this repository's files are, for :mod:`gitmem.gitdir`'s reads: as found, or as libgit2 opened it
        (a repository :func:`gitmem.gitdir.discover` left to libgit2)."""
        return self.git or GitDir(self.repo.path, self.common_dir, self.repo.workdir or self.repo.path)

    def tree_of(self, commit: str) -> str:
        """The root tree of memory commit ``commit``. Without libgit2 open, from the loose object or
        the index where they know it; else from git, then kept in the index for the next process."""
        if self._repo is None and self.git is not None:
            try:
                return gitdir.tree_of(self.git, commit)
            except gitdir.Unsure:
                known = self.warm.index.tree_of(commit)
                if known:
                    return known
            tree = self._peel(commit)
            if len(commit) == 40:  # a full id names one commit forever; a prefix may come to name two
                self.warm.index.put_tree_of(commit, tree)
            return tree
        return self._peel(commit)

    def _peel(self, commit: str) -> str:
        try:
            return str(self.repo[commit].peel(pygit2.Commit).tree_id)  # a ref at a tree or blob is damage, not memory
        except (KeyError, ValueError, pygit2.GitError) as e:
            raise self._damaged(commit, e) from None

    def read_from(self) -> Tuple[Optional[str], Optional[str]]:
        """(branch whose memory is read, its tip): this branch's, else the nearest parent's."""
        own = self.own_tip()
        if own:
            return self.branch, own
        for parent in parent_chain(self.repo, self.branch):
            tip = ref_target(self.repo, memory_ref(parent))
            if tip:
                return parent, tip
        return None, None

    def tip(self) -> Optional[str]:
        """The memory commit reads see (own or inherited)."""
        return self.read_from()[1]

    def read_ref(self) -> str:
        """The memory ref reads come from: this branch's, or the parent's that a branch without memory of its own
        reads (see :meth:`read_from`). Damage met in a read is named as that ref's, whose doctor repairs it: this
        branch has no ref to repair."""
        return memory_ref(self.read_from()[0] or self.branch)

    def _damaged(self, commit: Optional[str], e: Exception) -> GitmemError:
        """:func:`gitmem.repo.damaged` for memory read at ``commit``, naming :meth:`read_ref`; but a commit a
        caller named (``at``) that the repository lacks or holds as no commit is that caller's slip, said as
        such: the ref is sound, and its doctor would say so."""
        if commit and commit != self.tip():
            try:
                self.repo[commit].peel(pygit2.Commit)
            except (KeyError, ValueError):  # not there, or no commit (a GitError: there, unreadable: damage)
                return GitmemError(f"no commit {echoed(commit)} in this repository")
            except pygit2.GitError:
                pass
        return damaged(self.read_ref(), commit, e, self.repo)

    def snapshot(self, commit: Optional[str] = None) -> Snapshot:
        return Snapshot(self, commit if commit is not None else self.tip())

    def get(self, memory_id: str, at: Optional[str] = None) -> Memory:
        return self.snapshot(at).find(memory_id)[1]

    def short_ids(self, at: Optional[str] = None, of: Optional[Sequence[str]] = None) -> Dict[str, str]:
        """id -> its short form among every memory at the tip (see :func:`gitmem.model.short_ids`);
        any command taking an ID accepts it. With ``of``, only those ids' forms, from the ids sharing their last
        SHORT_ID_MIN - 1 chars (no other id can lengthen a form): read from the index, else, for a page of them
        (``SHORT_ID_PAGE``), from the tree's folders."""
        if of is not None:
            of = [i for i in of if model.ID_RE.match(i)]  # an id read from a commit's trailer may be anything
            if not of:
                return {}
        snap = self.snapshot(at)
        if of is None:
            return model.short_ids(snap.ids())
        if snap.tree_id is None:
            return {}  # no memory yet: none of them is there
        tails = sorted({i[-(model.SHORT_ID_MIN - 1):] for i in of})
        branch = self.read_from()[0]
        near = None
        if at is None and branch and not self.summary()["counts"].get("invalid"):
            # From the ref's search view when a search has brought it to this tree (an invalid blob's
            # name counts too, and a view holds only valid memories): a few ids a tail, for any number of ids.
            near = self.warm.index.ids_ending_with(memory_ref(branch), snap.tree_id, tails)
        if near is None and len(of) > self.SHORT_ID_PAGE:
            found = model.short_ids(snap.ids())
            return {i: found[i] for i in of if i in found}
        if near is None:
            # else from the tree's folders, kept per tree: the same page listed again reads none (at 100,000
            # memories a page's ~150 folders took 4.5 ms)
            key = f"ids ending with {','.join(tails)} {code_key('gitmem.store')}"
            near = self.warm.index.memo(snap.tree_id, key)
            if near is None:
                near = snap.ending_with(tails)
                self.warm.index.put_memo(snap.tree_id, key, near)
        out: Dict[str, str] = {}
        wanted = set(of)
        for neighbours in near.values():
            forms = model.short_ids(neighbours)
            out.update((i, forms[i]) for i in neighbours if i in wanted)
        return out

    def memories(self, at: Optional[str] = None) -> Dict[str, Memory]:
        """Every valid memory at the tip (or commit ``at``), by id. Invalid blobs are
        skipped and reported in :attr:`problems`."""
        return self.snapshot(at).memories()

    def list(self, *, type: Optional[str] = None, tag: Optional[str] = None, path: Optional[str] = None,
             author_kind: Optional[str] = None, source: Optional[str] = None,
             status: Optional[str] = "active", at: Optional[str] = None, limit: Optional[int] = None,
             before: Optional[str] = None) -> List[Memory]:
        """Memories matching every given filter, oldest first; ``status=None`` means any; ``limit``:
        only the newest that many; ``before``: only those whose id sorts before it (ids sort by time:
        the older ones, the next page of a newest-first listing)."""
        return list(self.listing(type=type, tag=tag, path=path, author_kind=author_kind, source=source,
                                 status=status, at=at, limit=limit, before=before))

    def listing(self, *, type: Optional[str] = None, tag: Optional[str] = None, path: Optional[str] = None,
                author_kind: Optional[str] = None, source: Optional[str] = None,
                status: Optional[str] = "active", at: Optional[str] = None, limit: Optional[int] = None,
                before: Optional[str] = None) -> Iterator[Memory]:
        """:meth:`list`'s memories as they are read. The newest few active memories come from the tree's
        summary (:meth:`newest`); otherwise the derived index narrows by type, status and path first, so only
        memories that can match are read (a full load where it cannot answer, which names blobs that are not
        valid memories in :attr:`problems`), and without ``limit`` a chunk at a time: a listing of 100,000
        starts at once and holds one chunk, not all."""
        _check_limit(limit)
        if limit and not (type or tag or path or author_kind or source or before or at) and status == "active":
            summary = self.summary()
            newest = None if summary["counts"].get("invalid") else self.newest(limit, summary)
            if newest is not None:
                self.problems = []
                yield from newest
                return
        wanted = matcher(type=type, tag=tag, path=path, author_kind=author_kind, source=source, status=status,
                          before=before)
        listed = self._listed(at, type, status, path, tag, limit, author_kind, source, None if before else limit)
        yield from self._read(listed, wanted, at, limit, before)

    def matching_ids(self, *, type: Optional[str] = None, tag: Optional[str] = None, path: Optional[str] = None,
                     author_kind: Optional[str] = None, source: Optional[str] = None,
                     at: Optional[str] = None) -> Optional[List[str]]:
        """The ids of the active memories at ``at`` (default the tip) that match every given filter, by id, as the
        derived index narrows a :meth:`list` (only a ``tag``'s candidates are read, to check it): what a search
        under filters may answer with; None where the index cannot answer."""
        wanted = matcher(type=type, tag=tag, path=path, author_kind=author_kind, source=source, status="active")
        listed = self._listed(at, type, "active", path, tag, None, author_kind, source)
        if listed is None or tag is None:
            return None if listed is None else listed[1]
        return [m.id for m in self._read(listed, wanted, at, None)]

    def page(self, limit: int, *, before: Optional[str] = None, after: Optional[str] = None,
             type: Optional[str] = None, tag: Optional[str] = None, path: Optional[str] = None,
             author_kind: Optional[str] = None, source: Optional[str] = None,
             status: Optional[str] = "active") -> Page:
        """``limit`` memories :meth:`list` gives, newest first: the newest, those just older than id ``before``
        or just newer than id ``after`` (keyset paging: a write between two pages shifts none of them), read no
        further than the page. Counted by the tree's summary (type, status), the index's ids (a path, an author
        kind, a source) or a full load that happened anyway (blobs that are not valid memories, named in
        :attr:`problems`); not where more than ``limit`` match a tag (or a retracted or superseded status beside
        an author kind or a source), unless the index narrows them to at most :data:`COUNTED` memories (read to
        count them): only reading every memory could count them, 1.7 s at 100,000, for a number a page does not
        need. Past the newest match ``after`` gives the newest page, past the oldest ``before`` the oldest
        (``after=""``: every id sorts after it)."""
        _check_limit(limit)
        filters = dict(type=type, tag=tag, path=path, author_kind=author_kind, source=source, status=status)
        wanted = matcher(**filters, before=before, after=after)
        self.problems = []
        counts = self.summary()["counts"]
        total = counted(counts, None if type is None else (type,), status) \
            if not (tag or path or author_kind or source or counts.get("invalid")) else None
        if total is not None and before is None and after is None:
            shown = self.list(type=type, status=status, limit=limit)[::-1]  # the summary's newest, where it keeps them
            return Page(shown, total, shown[-1].id if total > len(shown) else None, None)
        listed = self._listed(None, type, status, path, tag, limit + 1, author_kind, source)
        # one more than the page says whether there are more
        found = list(self._read(listed, wanted, None, limit + 1, before, after))
        if listed is None:  # read in full already: counting costs little more
            total = sum(map(matcher(**filters), self.memories().values()))
        elif total is None and not tag and status in (None, "active"):  # those ids are exactly the matches
            total = len(listed[1])
        elif total is None and len(listed[1]) <= COUNTED:  # few enough to read: every page says how many match
            total = sum(1 for _ in self._read(listed, matcher(**filters), None, None))
        if before is not None and not found:
            return self.page(limit, after="", **filters)
        if after is not None:
            if len(found) <= limit:
                return self.page(limit, **filters)
            shown = found[:limit][::-1]
            return Page(shown, total, shown[-1].id if after else None, shown[0].id)
        shown = found[-limit:][::-1]
        if total is None and before is None and len(found) <= limit:
            total = len(found)
        return Page(shown, total, shown[-1].id if len(found) > limit else None,
                    shown[0].id if before is not None and shown else None)

    def _read(self, listed: Optional[Tuple[Any, List[str]]], wanted: Callable[[Memory], bool],
              at: Optional[str], limit: Optional[int], before: Optional[str] = None,
              after: Optional[str] = None) -> Iterator[Memory]:
        """The memories ``wanted`` of :meth:`_listed`'s answer ``listed``, oldest first (see :meth:`listing`):
        with ``limit``, the newest that many, or, after id ``after``, the oldest that many."""
        if listed is None:
            found = [m for _, m in sorted(self.memories(at).items()) if wanted(m)]
            yield from (found if not limit else found[:limit] if after is not None else found[-limit:])
            return
        view, ids = listed
        if before is not None or after is not None:
            from bisect import bisect_left, bisect_right  # here: a listing without a cursor need not load it

            ids = ids[0 if after is None else bisect_right(ids, after):
                      len(ids) if before is None else bisect_left(ids, before)]
        self.problems = []
        if not limit:
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start:start + _CHUNK]
                got = view.get(chunk)
                yield from (got[i] for i in chunk if wanted(got[i]))
            return
        out: List[Memory] = []
        step = max(limit, _CHUNK)
        if after is not None:  # oldest first, as far as ``limit`` needs
            for start in range(0, len(ids), step):
                chunk = ids[start:start + step]
                got = view.get(chunk)
                out += [got[i] for i in chunk if wanted(got[i])]
                if len(out) >= limit:
                    break
            yield from out[:limit]
            return
        for end in range(len(ids), 0, -step):  # newest first, as far as ``limit`` needs
            chunk = ids[max(0, end - step):end]
            got = view.get(chunk)
            out[:0] = [got[i] for i in chunk if wanted(got[i])]
            if len(out) >= limit:
                break
        yield from out[-limit:]

    def _listed(self, at: Optional[str], type: Optional[str], status: Optional[str],
                path: Optional[str], tag: Optional[str] = None, limit: Optional[int] = None,
                author_kind: Optional[str] = None, source: Optional[str] = None,
                newest: Optional[int] = None) -> Optional[Tuple[Any, List[str]]]:
        """(the index's view of the memories at ``at``, the ids there of the given type, status (active or
        not), path, author kind and source, by id, and only those whose words hold a ``tag``'s); None where the
        index cannot answer or a full load must report invalid blobs. ``newest``: only the newest that many
        where the index alone picks them (by type, and status active or any), as a limited listing lists."""
        from .postings import IndexedMemories

        tip = at or self.tip()
        if tip is None or self.summary(tip)["counts"].get("invalid") or (path is not None and status != "active"):
            return None
        view = IndexedMemories(self, tip)
        try:
            active = None if status is None else status == "active"
            terms = _tag_terms(tag)
            # a tag's memories from the postings of its words, unless it is so common that the newest ``limit``
            # of them are found sooner by reading the newest memories
            having = view.having(terms, type, active, at_most=limit and 64 * limit) if terms else None
            exact = not (terms or path is not None or author_kind or source) and status in (None, "active")
            ids = having if having is not None else view.ids(type, active, newest if exact else None)
            if path is not None:
                near = view.touching([path])
                ids = [i for i in ids if i in near]
            if author_kind is not None or source is not None:
                origins = view.origins(type, active)  # ids by (author kind, source): few keys, many ids
                kept = set(itertools.chain.from_iterable(listed for (kind, wrote), listed in origins.items()
                                                         if model.origin_matches(kind, wrote, author_kind, source)))
                ids = [i for i in ids if i in kept]
            return (view, ids) if ids or view.count() else None
        except GitmemError:  # the index cannot answer
            return None

    def summary(self, at: Optional[str] = None) -> Dict[str, Any]:
        """Counts of memories by "type/status" ("invalid" for blobs that are not valid memories),
        short lists of memories (:attr:`Warm.LISTS`) and the paths active choices name, at the tip
        (or commit ``at``), from summaries kept per tree (see :meth:`Warm.summary`)."""
        tip = at or self.tip()
        snap = self.snapshot(tip)
        if snap.tree_id is None:
            return {"counts": {}, "lists": {name: [] for name in Warm.LISTS}, "paths": []}
        try:
            return self.warm.summary(self.repository, snap.tree_id, self.read_ref())
        except (KeyError, ValueError, pygit2.GitError) as e:
            raise self._damaged(tip, e) from None
        finally:
            self.warm.index.flush()

    def listed(self, name: str, limit: int, summary: Optional[Dict[str, Any]] = None) -> Optional[List[Memory]]:
        """The first ``limit`` memories of the summary's list ``name`` (see :attr:`Warm.LISTS`), in
        its order, without reading the rest; None when more are asked for than a summary keeps.
        ``summary``: :meth:`summary`'s answer, if the caller already has it."""
        if limit > Warm.NEWEST:
            return None
        rows = (summary or self.summary())["lists"][name][:limit]
        parsed = self.warm.parse(self.repository, [(p, b) for _, p, b in rows], self.read_ref())
        return [m for m in (placed(parsed[b], p) for _, p, b in rows) if isinstance(m, Memory)]

    def newest(self, limit: int, summary: Optional[Dict[str, Any]] = None) -> Optional[List[Memory]]:
        """The ``limit`` newest active memories, oldest first (see :meth:`listed`)."""
        found = self.listed("newest", limit, summary)
        return None if found is None else found[::-1]

    def choices_touching(self, touches: Callable[[Sequence[str]], bool]) -> List[Memory]:
        """The active decisions and rejections with a path that ``touches``, by id, reading only the
        parts of the tree whose summaries name such a path."""
        snap = self.snapshot()
        if snap.tree_id is None:
            return []
        try:
            ref = self.read_ref()
            found = self.warm.choices_touching(self.repository, snap.tree_id, ref, touches)
            parsed = self.warm.parse(self.repository, found, ref)
        except (KeyError, ValueError, pygit2.GitError) as e:
            raise self._damaged(snap.commit, e) from None
        finally:
            self.warm.index.flush()
        return sorted((m for m in (placed(parsed[b], p) for p, b in found) if isinstance(m, Memory)), key=lambda m: m.id)

    def parse_blob(self, blob_id: Any, path: str) -> Memory:
        """The memory stored in blob ``blob_id`` at ``path`` (remembered by blob id)."""
        parsed = placed(self.warm.parse(self.repository, [(path, str(blob_id))], self.read_ref())[str(blob_id)], path)
        if isinstance(parsed, str):
            raise invalid_at(parsed, path)
        return parsed

    def _load_all(self, snap: Snapshot) -> Dict[str, Memory]:
        out: Dict[str, Memory] = {}
        self.problems = []
        if snap.tree_id is None:
            return out
        key = snap.tree_id
        loaded = self.warm.loaded.get(key)
        if loaded is None:
            entries = list(snap.entries())
            try:
                parsed = self.warm.parse(self.repository, entries, self.read_ref())
            finally:
                self.warm.index.flush()
            memories: Dict[str, Memory] = {}
            problems: List[Problem] = []
            for path, blob_id in entries:
                found = placed(parsed[blob_id], path)
                if isinstance(found, str):
                    problems.append(Problem("error", path, invalid_at(found, path).problem))
                elif found.id in memories:
                    problems.append(Problem("error", path, f"duplicate id {found.id}"))
                else:
                    memories[found.id] = found
            memories = dict(sorted(memories.items()))  # by id, so callers' sorts find one run
            loaded = self.warm.remember(key, memories, problems, {b for _, b in entries})
        self.problems = list(loaded[1])
        return dict(loaded[0])

    # --- writing -----------------------------------------------------------

    def add(self, type: str, text: str, *, title: Optional[str] = None, reason: Optional[str] = None,
            tags: Sequence[str] = (), paths: Sequence[str] = (), author: Optional[Author] = None,
            source: str = "api", supersedes: Optional[str] = None, blob: Optional[str] = None,
            commit: Optional[str] = None, next: Optional[str] = None,
            commits: Sequence[str] = (), guard: Optional[Callable[[Snapshot], None]] = None,
            key: Optional[str] = None, since: Optional[str] = None) -> Write:
        """Validate, redact and store one new memory in one commit.

        ``file`` memories get the blob id of the path's current content and
        checkpoints the HEAD commit, unless given. ``guard`` is called with the snapshot the write builds on
        and raises to refuse it: a condition that must hold where the commit lands (no file of that name
        yet), checked again on every attempt, not once before a race.
        ``key``: a one-time key (a web form's), recorded in the commit: an add whose key a commit after
        ``since`` (the tip the key was handed out at) already carries raises :class:`Repeated` instead, so a
        form sent twice, by one process or two, adds one memory.
        """
        from .audit import KEY_RE, keyed  # writes only, as in commit

        model.check_types({"type": type, "text": text, "title": title, "reason": reason, "tags": tags, "paths": paths,
                           "source": source, "supersedes": supersedes, "blob": blob, "commit": commit, "next": next,
                           "commits": commits})  # tags="abc" is not the tags a, b and c
        author = author or default_author(self.repo)
        paths = tuple(model.check_new_path(p) for p in paths)
        if type == "file" and blob is None and paths:
            blob = self.current_blob(paths[0])
        if type == "checkpoint" and commit is None:
            commit = head_commit(self.repo)
        memory = Memory(
            id=model.new_id(), type=type, author=author, source=source, created=model.utc_now(),
            tags=tuple(dict.fromkeys(tags)), paths=tuple(dict.fromkeys(paths)), supersedes=supersedes,
            blob=blob, commit=commit, commits=tuple(commits), text=text, title=title, reason=reason, next=next,
        )
        memory, redacted = model.redacted_valid(memory)
        if key is not None and not KEY_RE.match(key):
            raise GitmemError(f"{key[:80]!r} is not a one-time key (16-64 letters, digits, - and _)")

        def build(snap: Snapshot) -> Built:
            if guard is not None:
                guard(snap)
            earlier = keyed(self.repo, key, snap.commit, since) if key else None
            if earlier:
                raise Repeated(earlier, same=_content(snap.find(earlier)[1]) == _content(memory))
            return Built({model.memory_path(memory): model.dump_yaml(memory)}, memory, redacted)

        return self.commit(build, op="add", author=author, source=source, key=key)

    def edit(self, memory_id: str, *, author: Optional[Author] = None, source: str = "api",
             changes_of: Optional[Callable[[Memory], Dict[str, Any]]] = None, opened: Optional[Memory] = None,
             **changes: Any) -> Write:
        """Change fields of a memory (text, title, reason, tags, paths, next, commits). ``changes_of`` gives
        changes computed from the memory as the write finds it: a read-modify-write (insert a line) that a lost
        race runs again on the newer version, so no concurrent edit is lost. ``opened``: the version the writer
        decided on (an editor showed it); a field it changes that changed since raises :class:`Changed`, so a
        value nobody read is never written over. Fields it leaves alone may have changed."""
        allowed = {"text", "title", "reason", "tags", "paths", "next", "commits", "blob"}
        author = author or default_author(self.repo)

        def checked(changes: Dict[str, Any]) -> Dict[str, Any]:
            bad = set(changes) - allowed
            if bad:
                raise InvalidMemory(", ".join(sorted(bad)), "cannot be edited", sorted(allowed))
            model.check_types(changes)
            for key in ("tags", "paths", "commits"):
                if key in changes and changes[key] is not None:
                    values = changes[key]
                    if key == "paths":
                        values = [model.check_new_path(p) for p in values]
                    changes[key] = tuple(dict.fromkeys(values))
            return changes

        fixed = checked(changes)

        def apply(snap: Snapshot) -> Built:
            path, old = snap.find(memory_id)
            wanted = checked(dict(changes_of(old))) if changes_of is not None else fixed
            if opened is not None and (moved := [k for k in wanted if getattr(old, k) != getattr(opened, k)]):
                raise Changed(f"{old.id}: {', '.join(moved)} changed since you opened it: read this version "
                              f"(`gitmem show {old.id}`), then edit it again")
            if old.status != "active" and set(wanted) - {"commits", "blob"}:  # hooks still link and refresh them
                later = f"edit {old.superseded_by} instead" if old.superseded_by else "write a new memory instead"
                raise GitmemError(f"{old.id} is {old.status}: what it said is kept as it was; {later}")
            if wanted.get("next") is not None and old.type != "checkpoint":  # as `gitmem add` refuses one
                raise InvalidMemory("next", f"a {old.type} has none: only a checkpoint has a next step")
            new, redacted = model.redacted_valid(old.evolve(**wanted, updated=model.utc_now()))
            if new.evolve(updated=old.updated) == old:
                raise GitmemError(f"nothing to change in {old.id}")
            _refuse_edit_over_conflict(snap, old, new)
            return Built({path: model.dump_yaml(new)}, new, redacted)

        return self.commit(apply, op="edit", author=author, source=source)

    def retract(self, memory_id: str, *, reason: Optional[str] = None, author: Optional[Author] = None,
                source: str = "api", seen: Optional[str] = None) -> Write:
        """Mark a memory retracted: kept in history and in the tree, out of lists and context. ``seen``: the
        :func:`~gitmem.model.version` the writer decided on; a memory changed since raises :class:`Changed`."""
        from .redact import redact_fields  # the secret rules load with the first write, not with every read

        author = author or default_author(self.repo)
        note, redacted = redact_fields(reason=reason)
        if said := note.get("reason"):  # kept in the commit message: held to a memory's reason's limits
            model.check_text("reason", said)

        def apply(snap: Snapshot) -> Built:
            path, old = snap.find(memory_id)
            if old.status != "active":
                raise GitmemError(f"{old.id} is already {old.status}")
            if seen is not None and model.version(old) != seen:
                raise Changed(f"{old.id} changed since you opened it: read this version, then retract it again")
            new = old.evolve(status="retracted", updated=model.utc_now())
            return Built({path: model.dump_yaml(new)}, new, redacted)

        return self.commit(apply, op="retract", author=author, source=source, note=note.get("reason"))

    def supersede(self, memory_id: str, text: str, *, author: Optional[Author] = None, source: str = "api",
                  seen: Optional[str] = None, **fields_: Any) -> Write:
        """Replace a memory with a new one in a single commit: the old one is marked
        superseded (and points at its successor); the new one says what it supersedes. The successor is
        anchored as :meth:`add` anchors one: a file memory's to its file's current blob, a checkpoint's to HEAD,
        with the next step its text gives. A ``title`` or ``reason`` of None keeps the old one's, ``""`` clears
        it. ``seen``: as :meth:`retract`'s (a form prefilled from the memory); a memory superseded since
        raises :class:`Superseded`, saying whether its successor is what this would write."""
        author = author or default_author(self.repo)
        new_fields = {"text": text, "title": fields_.pop("title", None), "reason": fields_.pop("reason", None),
                      "next": fields_.pop("next", None)}
        if fields_.get("paths") is not None:  # new paths, held to what add holds them to; kept ones stay as they are
            fields_["paths"] = [model.check_new_path(p) for p in fields_["paths"]]

        def successor_of(old: Memory) -> Tuple[Memory, int]:
            keep = {k: getattr(old, k) for k in ("title", "reason", "tags", "paths")}
            keep.update({k: v if k == "text" else v or None for k, v in new_fields.items() if v is not None or k == "text"})
            keep.update({k: tuple(dict.fromkeys(v)) for k, v in fields_.items()  # None keeps them; no repeats, as add
                         if k in ("tags", "paths") and v is not None})
            if old.type == "file" and keep["paths"]:
                keep["blob"] = self.current_blob(model.check_path(keep["paths"][0]))
            if old.type == "checkpoint":
                keep["commit"] = head_commit(self.repo)
                keep.setdefault("next", model.next_step(text))
            return model.redacted_valid(Memory(id=model.new_id(), type=old.type, author=author, source=source,
                                               created=model.utc_now(), supersedes=old.id, **keep))

        def apply(snap: Snapshot) -> Built:
            path, old = snap.find(memory_id)
            if seen is not None and old.status == "superseded" and old.superseded_by:  # a form sent after another
                wrote = snap.find(old.superseded_by)[1]
                would = successor_of(old)[0]
                raise Superseded(old.id, wrote.id, same=(_content(wrote), wrote.author, wrote.source)
                                 == (_content(would), would.author, would.source))
            if old.status != "active":
                raise GitmemError(f"{old.id} is already {old.status}")
            if seen is not None and model.version(old) != seen:
                raise Changed(f"{old.id} changed since you opened it: read this version, then supersede it again")
            new, redacted = successor_of(old)
            replaced = old.evolve(status="superseded", superseded_by=new.id, updated=model.utc_now())
            return Built({path: model.dump_yaml(replaced), model.memory_path(new): model.dump_yaml(new)}, new, redacted)

        return self.commit(apply, op="supersede", author=author, source=source)

    def commit_tree(self, updates: Mapping[str, Optional[bytes]], message: str, author: Author, *,
                    base: Optional[str], extra_parents: Sequence[str] = ()) -> str:
        """Write blobs and trees for ``updates`` (path -> bytes, or None to delete)
        over ``base``'s tree and return a new commit (the ref is not moved).

        Used by every write, and by merges (``extra_parents``). The last gate before git: the
        message and the author's name and email are redacted here, whoever built them."""
        from .redact import blob_is_clean, redact, rules_key

        try:
            # The tree looked up by id: a partial clone's missing tree is then a KeyError, said as not fetched yet
            # (`gitmem fetch`), where peeling the commit was libgit2's "can not be successfully peeled".
            base_tree = self.repo[self.repo[base].peel(pygit2.Commit).tree_id].peel(pygit2.Tree) if base else None
            tree = _write_tree(self.repo, base_tree, updates)
            # A push scans what it sends for secrets; what was scanned here need not be read again.
            # A write never waits on the derived index: if another process holds it, the push scans.
            self.warm.index.put_clean(rules_key(), [str(pygit2.hash(data)) for data in updates.values()
                                                    if data is not None and blob_is_clean(data)], wait_ms=20)
            sig = _signature(author)
            message = redact(message)[0]
            committer = pygit2.Signature(*COMMITTER)
            parents = ([base] if base else []) + list(extra_parents)
            return str(self.repo.create_commit(None, sig, committer, message, tree, parents))
        except KeyError as e:  # an object the base's history lacks: damage, or a partial clone's
            raise self._damaged(base, e) from None
        except (pygit2.GitError, OSError) as e:
            raise StorageError(f"could not write memory objects: {e}") from None

    def move_ref(self, expected: Optional[str], new: str, reflog: str) -> None:
        """Compare-and-swap this branch's memory ref (see :func:`gitmem.refs.move_ref`). Memory gitmem wrote that a
        move it did not make dropped (:meth:`dropped`) is kept aside first: this write would make it gitmem's own
        newest move again, and the dropped memory would be named nowhere but in git's reflog."""
        from . import refs  # writes only, like audit

        if expected is not None and (suspect := gitdir.may_be_dropped(self._files(), self.ref)):
            refs.keep_dropped(self.repo, self.ref, *suspect)
        refs.move_ref(self.repo, self.ref, expected, new, reflog)

    def retrying(self, attempt: Callable[[], T]) -> T:
        """Re-run ``attempt`` until it wins the race for this branch's ref (see :func:`gitmem.refs.retrying`)."""
        from . import refs

        return refs.retrying(self.repo, self.ref, attempt)

    def commit(self, build: Callable[[Snapshot], Built], *, op: str, author: Author, source: str,
               note: Optional[str] = None, key: Optional[str] = None) -> Write:
        """One write: ``build`` turns the snapshot it is given into the tree changes and the memory the
        commit is about; the commit lands by compare-and-swap, re-built on a lost race. Returns
        what the attempt that landed built."""
        from .audit import commit_message  # reads never need it: loaded with the first write

        def attempt() -> Write:
            expected = self.own_tip()
            reads, base = (self.branch, expected) if expected else self.read_from()  # a first write forks its parent's
            built = build(Snapshot(self, base))
            message = commit_message(op, built.memory, author, source, built.redacted, note,
                                     fork=self._fork_point(),
                                     aside=(self.config(f"gitmem.branch.{self.branch}.setAside") or "").split(),
                                     key=key, detached=self._detached_head())
            commit = self.commit_tree(built.updates, message, author, base=base)
            self.move_ref(expected, commit, f"gitmem {op}: {built.memory.id}")
            if reads != self.branch:
                self._note_start(reads)
            return Write(built.memory, commit, built.redacted)

        return self.retrying(attempt)

    def _fork_point(self) -> Optional[str]:
        """The commit this branch's code forked at, for a write's ``Fork-Point:`` trailer: as the post-checkout hook
        recorded it (:func:`gitmem.branches.record_fork`), else as the branch's reflog names it, so a write from a
        clone without the hooks still tells other clones' sync a branch with no commit of its own from a merged one."""
        recorded = self.config(f"gitmem.branch.{self.branch}.forkPoint")
        if recorded or self.branch == default_branch(self.repo):
            return recorded
        created = created_from(self.repo, self.branch)
        if created is None or any(created[0] in (f"{r}/{self.branch}", f"refs/remotes/{r}/{self.branch}")
                                  for r in self.repo.remotes.names()):
            return None  # a teammate's branch checked out here: where it forked is theirs to say
        return created[1]

    def _detached_head(self) -> Optional[str]:
        """The commit HEAD is detached at (a stopped rebase), else None: a write then names it, so it can be linked
        to the commit made on top of it once that lands on the branch (the post-commit hook skips it)."""
        try:
            return str(self.repo.head.target) if self.repo.head_is_detached else None
        except (pygit2.GitError, KeyError):
            return None

    def _note_start(self, reads: Optional[str]) -> None:
        """After a first write that forked ``reads``'s memory: when the branch's parent had no memory here then,
        record it (``gitmem.branch.<b>.startedWithout``), so a pull or sync that brings it later can bring what
        it held at the fork (:func:`gitmem.branches.late_parent`) rather than leave it out for good."""
        chain = parent_chain(self.repo, self.branch)
        if chain and chain[0] != reads:
            try:
                self.repo.config[f"gitmem.branch.{self.branch}.startedWithout"] = chain[0]
            except (pygit2.GitError, OSError):
                pass  # a notice lost, no memory

    # --- history -----------------------------------------------------------

    def log(self, limit: Optional[int] = None, at: Optional[str] = None) -> List[Change]:
        """The audit trail, newest first: one :class:`Change` per memory commit."""
        from .audit import change_from_commit

        _check_limit(limit)
        tip = at or self.tip()
        if not tip:
            return []
        out: List[Change] = []
        for commit in self._walk(tip):
            out.append(change_from_commit(commit))
            if limit is not None and len(out) >= limit:
                break
        return out

    def _walk(self, tip: Optional[str]) -> Iterator[pygit2.Commit]:
        """The memory commits from ``tip``, newest first; a tip or parent that is missing or no commit
        is the ref's damage, named with the doctor that repairs it, not libgit2's error."""
        try:
            yield from self.repo.walk(tip, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.TIME)
        except (KeyError, ValueError, pygit2.GitError) as e:
            raise self._damaged(tip, e) from None

    def history(self, memory_id: str) -> List[Change]:
        """Every commit that changed this memory's blob, newest first (merges and
        hand edits included, not only commits whose trailers name it)."""
        return list(self.changes(memory_id))

    def changes(self, memory_id: str) -> Iterator[Change]:
        """:meth:`history` as the walk finds it, so a reader that wants the newest of a kind stops there."""
        from .audit import change_from_commit

        path, memory = self.snapshot().find(memory_id)
        tip = self.tip()
        # A parent's blob, asked for by its children, is kept until the walk reaches the parent (topological:
        # after every child), so each commit's blob is looked up once, not once more for each child.
        asked: Dict[str, Optional[str]] = {}
        for commit in self._walk(tip):
            here = str(commit.id)
            mine = asked.pop(here) if here in asked else blob_at(self.repo, here, path)
            if mine is None:
                continue
            parents = [str(p) for p in commit.parent_ids]
            for parent in parents:
                if parent not in asked:
                    asked[parent] = blob_at(self.repo, parent, path)
            if not parents or all(asked[parent] != mine for parent in parents):
                yield change_from_commit(commit)

# --- module helpers ----------------------------------------------------------


def _content(m: Memory) -> Tuple[Any, ...]:
    """What an add stores that a second send of its form must match to be the same add."""
    return m.type, m.text, m.title, m.reason, m.tags, m.paths


def _signature(author: Author) -> pygit2.Signature:
    """The git author of a memory commit: its name and email redacted like any stored field. An author
    without an email is refused, as `git commit --author` and the CLI's --author refuse one: the commit is
    never signed with a made-up address, nor with the configured user's address under another's name."""
    from .redact import redact

    model.check_email(author.email, "author.email")
    return pygit2.Signature(redact(author.name)[0], redact(author.email)[0])


def _subtrees(tree: pygit2.Object) -> Iterator[pygit2.Object]:
    return (entry for entry in tree.peel(pygit2.Tree) if entry.type_str == "tree")


def _write_tree(repo: pygit2.Repository, base: Optional[pygit2.Tree],
                updates: Mapping[str, Optional[bytes]]) -> pygit2.Oid:
    """Rewrite only the trees on the paths that change; everything else is shared."""
    here: Dict[str, Optional[bytes]] = {}
    below: Dict[str, Dict[str, Optional[bytes]]] = {}
    for path, data in updates.items():
        head, _, rest = path.partition("/")
        if rest:
            below.setdefault(head, {})[rest] = data
        else:
            here[head] = data
    builder = repo.TreeBuilder(base) if base is not None else repo.TreeBuilder()
    held = entries_by_name([base])[0] if base is not None else {}  # not base[name]: see entries_by_name
    for name, data in here.items():
        if data is None:
            if name in held:
                builder.remove(name)
        else:
            builder.insert(name, repo.create_blob(data), pygit2.GIT_FILEMODE_BLOB)
    for name, sub in below.items():
        existing = held.get(name)
        subtree = existing.peel(pygit2.Tree) if existing is not None and existing.type_str == "tree" else None
        oid = _write_tree(repo, subtree, sub)
        if len(repo[oid].peel(pygit2.Tree)) == 0:
            if name in held:
                builder.remove(name)
        else:
            builder.insert(name, oid, pygit2.GIT_FILEMODE_TREE)
    return builder.write()
