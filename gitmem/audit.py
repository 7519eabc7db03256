"""The audit trail across every memory branch: each write once, newest first, paged.

One lazy walk from every memory branch tip at once, so a page costs about
``offset + limit`` commits however long the history is (and a ``since`` bound
stops the walk early); a commit reachable from several branches (history
shared before a fork, or merged) is listed once, naming every branch that
holds it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

import pygit2

from . import model
from .model import Author, Memory
from .repo import blob_at, ref_target

if TYPE_CHECKING:
    from .store import Store

_TRAILER_RE = re.compile(r"^([A-Za-z-]+): (.*)$")


@dataclass(frozen=True)
class Change:
    """One commit of the audit trail, read back from its trailers."""

    commit: str
    time: int
    author: Author
    source: str
    op: str
    memory_ids: Tuple[str, ...]
    type: Optional[str]
    summary: str
    parents: Tuple[str, ...] = ()
    reason: Optional[str] = None  # why, as the write quoted it under its subject (a retraction's --because)

    def to_dict(self) -> Dict[str, Any]:
        return {
            "commit": self.commit, "time": self.time, "author": self.author.to_dict(),
            "source": self.source, "op": self.op, "memory_ids": list(self.memory_ids),
            "type": self.type, "summary": self.summary, "parents": list(self.parents), "reason": self.reason,
        }


#: The trailer of a write on a branch whose clone recorded where the branch's code forked: a teammate's
#: clone, without that record, reads it (:func:`gitmem.branches.code_fork`).
FORK_TRAILER = "Fork-Point"
#: The trailer of a write on a branch created again under a name whose earlier memory this clone set aside or
#: dropped: it names the first commits of that memory, so a teammate who still holds it sets it aside too
#: rather than merge it into the new branch's (:func:`gitmem.branches.earlier_root`).
ASIDE_TRAILER = "Set-Aside"
_OID = r"[0-9a-f]{40}|[0-9a-f]{64}"
_FORK_RE, _ASIDE_RE = (re.compile(rf"^{name}: ({_OID})$", re.MULTILINE) for name in (FORK_TRAILER, ASIDE_TRAILER))
#: The trailer of a link commit (:func:`gitmem.checkpoint.link_commit`): the code commit its memories were linked
#: to, so the link marks what the memory held when that commit was made (:func:`gitmem.branches.as_of_fork`).
CODE_COMMIT_TRAILER = "Code-Commit"
_CODE_COMMIT_RE = re.compile(rf"^{CODE_COMMIT_TRAILER}: ({_OID})$", re.MULTILINE)
#: The trailer of a write made while HEAD was detached (a stopped rebase, say): the commit HEAD was at. The post-commit
#: hook skips commits on a detached HEAD, so the write is linked when the commit made on top of that one lands on
#: the branch (:func:`gitmem.checkpoint.link_landed`).
DETACHED_TRAILER = "Detached-At"
_DETACHED_RE = re.compile(rf"^{DETACHED_TRAILER}: ({_OID})$", re.MULTILINE)
#: The trailer of an add made with a one-time key (a web form's): :func:`keyed` finds it, so the key adds once.
KEY_TRAILER = "Request-Key"
KEY_RE = re.compile(r"^[A-Za-z0-9_-]{16,64}$")


def commit_message(op: str, m: Memory, author: Author, source: str, redacted: int, note: Optional[str],
                   fork: Optional[str] = None, aside: Sequence[str] = (), key: Optional[str] = None,
                   detached: Optional[str] = None) -> str:
    """The subject, optional body and trailers of a memory write; :func:`change_from_commit` reads them back.
    ``fork``: the commit the branch's code forked at, as this clone recorded it (a commit id, else left out);
    ``aside``: the first commits of an earlier branch's memory of this name, set aside here; ``key``: the
    write's one-time key (:func:`keyed`); ``detached``: the commit HEAD was detached at (:data:`DETACHED_TRAILER`)."""
    from .redact import redact_bare  # a source is redacted as the memory's own is, so the two read the same
    from .trust import printable

    trailers = [
        f"Memory-Id: {m.id}", f"Memory-Type: {m.type}", f"Memory-Op: {op}",
        f"Memory-Source: {redact_bare(source)[0]}", f"Author-Kind: {author.kind}",
    ]
    if m.supersedes and op == "supersede":
        trailers.append(f"Supersedes: {m.supersedes}")
    if redacted:
        trailers.append(f"Redacted: {redacted}")
    if fork and re.fullmatch(_OID, fork):
        trailers.append(f"{FORK_TRAILER}: {fork}")
    trailers += [f"{ASIDE_TRAILER}: {c}" for c in aside if re.fullmatch(_OID, c)]
    if key:
        trailers.append(f"{KEY_TRAILER}: {key}")
    if detached and re.fullmatch(_OID, detached):
        trailers.append(f"{DETACHED_TRAILER}: {detached}")
    # git prints a message raw: text from anyone is escaped, so it cannot drive or reorder the terminal of
    # whoever reads `git log`, and the note is quoted line by line, so no line of it reads as a trailer.
    quoted = [f"> {printable(line, None)}".rstrip() for line in note.strip().splitlines()] if note else []
    body = "\n\n" + "\n".join(quoted) if quoted else ""
    return f"{op} {m.type}: {printable(m.summary, None)}{body}\n\n" + "\n".join(trailers) + "\n"


def keyed(repo: pygit2.Repository, key: str, tip: Optional[str], since: Optional[str]) -> Optional[str]:
    """The memory an earlier write with one-time ``key`` made, looking at the commits of ``tip`` that ``since``
    (the tip the key was handed out at; None or unknown: the whole history) does not hold, or None."""
    if not tip:
        return None
    line = f"\n{KEY_TRAILER}: {key}\n"
    walker = repo.walk(tip, pygit2.enums.SortMode.TOPOLOGICAL)
    if since and re.fullmatch(_OID, since):
        try:
            walker.hide(since)
        except (KeyError, ValueError, pygit2.GitError):
            pass  # not a commit here: every commit may hold the key
    for commit in walker:
        if line in commit.message:
            ids = change_from_commit(commit).memory_ids
            return ids[0] if ids else None
    return None


def fork_in(message: str) -> Optional[str]:
    """The commit a write's ``Fork-Point:`` trailer names, if it has one."""
    found = _FORK_RE.search(message)
    return found.group(1) if found else None


def code_commit_in(message: str) -> Optional[str]:
    """The code commit a link commit's ``Code-Commit:`` trailer names, if it has one."""
    found = _CODE_COMMIT_RE.search(message)
    return found.group(1) if found else None


def detached_in(message: str) -> Optional[str]:
    """The commit a write's ``Detached-At:`` trailer names, if it has one."""
    found = _DETACHED_RE.search(message)
    return found.group(1) if found else None


def aside_in(message: str) -> List[str]:
    """The commits a write's ``Set-Aside:`` trailers name."""
    return _ASIDE_RE.findall(message)


def change_from_commit(commit: pygit2.Commit) -> Change:
    """Read a memory commit's trailers back into a :class:`Change`."""
    message = commit.message
    trailers: Dict[str, List[str]] = {}
    for line in message.strip().splitlines()[1:]:
        m = _TRAILER_RE.match(line.strip())
        if m:
            trailers.setdefault(m.group(1).lower(), []).append(m.group(2).strip())
    first = lambda key, default=None: trailers.get(key, [default])[0]  # noqa: E731
    kind = first("author-kind", "human")
    return Change(
        commit=str(commit.id), time=commit.author.time,
        author=Author(commit.author.name, commit.author.email, kind if kind in model.AUTHOR_KINDS else "human"),
        source=first("memory-source", "git"), op=first("memory-op", "commit"),
        memory_ids=tuple(trailers.get("memory-id", [])), type=first("memory-type"),
        summary=message.splitlines()[0] if message else "",
        parents=tuple(str(p) for p in commit.parent_ids), reason=_quoted(message),
    )


def _quoted(message: str) -> Optional[str]:
    """The note :func:`commit_message` quotes between the subject and the trailers (escaped and redacted as it was
    written), unquoted; None when there is none."""
    parts = message.split("\n\n")
    lines = parts[1].splitlines() if len(parts) > 2 else []
    if not lines or not all(line.startswith(">") for line in lines):
        return None
    return "\n".join(line[2:] if line.startswith("> ") else line[1:] for line in lines)


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
    """(branch, tip) of every local memory ref, memory set aside here too, sorted by name."""
    from .refs import memory_names

    return [(name, tip) for name, ref in memory_names(repo) if (tip := ref_target(repo, ref))]


def trail(repo: pygit2.Repository, *, offset: int = 0, limit: int = 50, branches: Optional[Sequence[str]] = None,
          author_kind: Optional[str] = None, source: Optional[str] = None, since: Optional[int] = None,
          until: Optional[int] = None) -> Page:
    """Writes on all memory branches (or ``branches``), newest first, filtered, one page.

    ``author_kind`` is "agent" or "human"; ``source`` matches a source or its
    ``<source>:...`` family (``mcp`` matches ``mcp:cursor``); ``since`` and
    ``until`` are Unix times, inclusive, compared with the commit time.
    """
    tips = [(b, t) for b, t in memory_branches(repo) if branches is None or b in branches]
    if not tips:
        return Page([], offset, limit, False)
    at_tip: Dict[str, List[str]] = {}
    for b, t in tips:
        at_tip.setdefault(t, []).append(b)
    # One walk over all tips; topological order visits children before parents, so each
    # commit's branches (the tips that reach it) are complete when it is visited.
    walker = repo.walk(tips[0][1], pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.TIME)
    for _, t in tips[1:]:
        walker.push(t)
    reached: Dict[str, set] = {}
    entries: List[Entry] = []
    skipped = 0
    for commit in walker:
        oid = str(commit.id)
        names = reached.pop(oid, set()) | set(at_tip.get(oid, ()))
        for parent in commit.parent_ids:
            reached.setdefault(str(parent), set()).update(names)
        if since is not None and commit.commit_time < since:
            break
        if until is not None and commit.commit_time > until:
            continue
        change = change_from_commit(commit)
        if author_kind is not None and change.author.kind != author_kind:
            continue
        if not model.source_matches(change.source, source):
            continue
        if skipped < offset:
            skipped += 1
            continue
        entries.append(Entry(change, tuple(sorted(names))))
        if len(entries) > limit:  # one more than a page: there is a next page
            break
    return Page(entries[:limit], offset, limit, len(entries) > limit)


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


def retraction(store: Store, memory_id: str) -> Optional[Change]:
    """The commit that retracted the memory (who, when, the reason given), read from its history newest first,
    stopping there; None when no retract commit changed it (its status came by a hand edit, say)."""
    return next((c for c in store.changes(memory_id) if c.op == "retract"), None)


def versions(store: Store, memory_id: str) -> List[Version]:
    """The memory's history (every commit that changed its blob), newest first, with YAML before/after."""
    path, _ = store.snapshot().find(memory_id)
    repo = store.repo

    def text_at(commit: Optional[pygit2.Commit]) -> str:
        if commit is None:
            return ""
        blob = blob_at(repo, str(commit.id), path)
        return "" if blob is None else repo[blob].peel(pygit2.Blob).data.decode("utf-8", "replace")

    out = []
    for change in store.history(memory_id):
        commit = repo[change.commit].peel(pygit2.Commit)
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
