"""The audit trail across every memory branch: each write once, newest first, paged.

One lazy time-ordered walk per memory branch, merged, so a page costs about
``offset + limit`` commits per branch however long the history is (and a
``since`` bound stops the walk early); a commit reachable from several
branches (history shared before a fork, or merged) is listed once, naming
every branch that holds it.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import pygit2

from .store import REF_PREFIX, Change, change_from_commit


@dataclass(frozen=True)
class Entry:
    """One memory commit and the memory branches whose history holds it."""

    change: Change
    branches: Tuple[str, ...]

    def to_dict(self) -> Dict[str, Any]:
        return {**self.change.to_dict(), "branches": list(self.branches)}


@dataclass(frozen=True)
class Page:
    entries: List[Entry]
    offset: int
    limit: int
    more: bool  # another page follows


def memory_branches(repo: pygit2.Repository) -> List[Tuple[str, str]]:
    """(branch, tip) of every local memory ref, sorted by name."""
    out = []
    for name in sorted(repo.references):
        if name.startswith(REF_PREFIX):
            try:
                out.append((name[len(REF_PREFIX):], str(repo.references[name].resolve().target)))
            except (KeyError, pygit2.GitError):
                continue
    return out


def _walk(repo: pygit2.Repository, branch: str, tip: str) -> Iterator[Tuple[int, str, str, pygit2.Commit]]:
    # Newest commit time first; the key (-time, oid) is monotonic per walk, so heapq.merge can interleave.
    for commit in repo.walk(tip, pygit2.enums.SortMode.TIME):
        yield -commit.commit_time, str(commit.id), branch, commit


def trail(repo: pygit2.Repository, *, offset: int = 0, limit: int = 50, branches: Optional[Sequence[str]] = None,
          author_kind: Optional[str] = None, source: Optional[str] = None, since: Optional[int] = None,
          until: Optional[int] = None) -> Page:
    """Writes on all memory branches (or ``branches``), newest first, filtered, one page.

    ``author_kind`` is "agent" or "human"; ``source`` matches a source or its
    ``<source>:...`` family (``mcp`` matches ``mcp:cursor``); ``since`` and
    ``until`` are Unix times, inclusive, compared with the commit time.
    """
    tips = [(b, t) for b, t in memory_branches(repo) if branches is None or b in branches]
    merged = heapq.merge(*(_walk(repo, b, t) for b, t in tips))
    entries: List[Entry] = []
    skipped = 0
    current: Optional[Tuple[str, pygit2.Commit, List[str]]] = None
    seen: set = set()  # clock skew can make a walk out of order, so equal oids are not always adjacent

    def accept(oid: str, commit: pygit2.Commit, names: List[str]) -> bool:
        """Filter one finished group; returns True when the page is full (plus one to know of more)."""
        nonlocal skipped
        if until is not None and commit.commit_time > until:
            return False
        change = change_from_commit(commit)
        if author_kind is not None and change.author.kind != author_kind:
            return False
        if source is not None and change.source != source and not change.source.startswith(source + ":"):
            return False
        if skipped < offset:
            skipped += 1
            return False
        entries.append(Entry(change, tuple(sorted(set(names)))))
        return len(entries) > limit

    for key, oid, branch, commit in merged:
        if since is not None and -key < since:
            break
        if current is not None and current[0] == oid:
            current[2].append(branch)
            continue
        if oid in seen:
            continue
        seen.add(oid)
        if current is not None and accept(*current):
            current = None
            break
        current = (oid, commit, [branch])
    if current is not None and len(entries) <= limit:
        accept(*current)
    more = len(entries) > limit
    return Page(entries[:limit], offset, limit, more)


# --- one memory ----------------------------------------------------------------


@dataclass(frozen=True)
class Version:
    """A commit that changed one memory, with the memory's YAML before and after it."""

    change: Change
    before: str  # "" when the commit created it
    after: str

    def diff(self) -> str:
        import difflib

        lines = difflib.unified_diff(self.before.splitlines(True), self.after.splitlines(True),
                                     "before", "after", n=2)
        return "".join(lines)


def versions(store: Any, memory_id: str) -> List[Version]:
    """The memory's history (every commit that changed its blob), newest first, with YAML before/after."""
    path, _ = store.snapshot().find(memory_id)
    repo = store.repo

    def text_at(commit: Optional[pygit2.Commit]) -> str:
        if commit is None:
            return ""
        try:
            return repo[commit.tree[path].id].data.decode("utf-8", "replace")
        except KeyError:
            return ""

    out = []
    for change in store.history(memory_id):
        commit = repo[change.commit]
        parent = commit.parents[0] if commit.parents else None
        out.append(Version(change, text_at(parent), text_at(commit)))
    return out


@dataclass(frozen=True)
class CodeCommit:
    """A code commit a memory links to, as found in this repository (``found`` False if absent)."""

    id: str
    found: bool
    summary: str = ""
    author: str = ""
    time: int = 0


def code_commits(repo: pygit2.Repository, ids: Sequence[str]) -> List[CodeCommit]:
    out = []
    for oid in dict.fromkeys(ids):
        try:
            commit = repo[oid].peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError):
            out.append(CodeCommit(oid, False))
            continue
        out.append(CodeCommit(oid, True, commit.message.splitlines()[0] if commit.message else "",
                              commit.author.name, commit.author.time))
    return out
