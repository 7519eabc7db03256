"""Checkpoints and resume, and the links between code commits and memories.

A long autonomous run writes ``checkpoint`` memories ("what is done / what is
next") tied to HEAD; the post-commit hook links each code commit to the
memories written since the previous one and advances the branch's latest
checkpoint to it. After a crash, :func:`resume` rebuilds where the run stood
from git alone: the checkpoint, the commits since it, the memories since it,
the decisions and rejections about the files the branch touched, and the next
step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import islice, takewhile
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple

import pygit2

from . import model
from .errors import GitmemError
from .model import Author, Memory
from .refs import TAKEN
from .repo import head_commit, parent_chain, ref_target
from .text import plural

if TYPE_CHECKING:
    from .audit import Change
    from .store import Store

_LINKABLE_OPS = ("add", "edit", "supersede", "resolve")
_MAX_WALK = 200


def checkpoint(store: Store, text: str, *, next: Optional[str] = None, author: Optional[Author] = None,
               source: str = "cli", tags: Sequence[str] = (), paths: Sequence[str] = (), marked: bool = False):
    """Write a checkpoint memory tied to HEAD. Without ``next``, the part of ``text`` after " / " is taken as
    the next step ("done X / next Y"); with ``marked``, only after " / next:": a caller with a field for the next
    step (MCP) leaves a text that only uses " / " ("split the read / write paths") without one."""
    if next is None:
        next = model.next_step(text, marked)
    return store.add("checkpoint", text, next=next, author=author, source=source, tags=tags, paths=paths)


def latest_checkpoint(store: Store, at: Optional[str] = None) -> Optional[Tuple[str, Memory]]:
    """(path, memory) of the newest active checkpoint; walks only the checkpoint folder."""
    snap = store.snapshot(at)
    if snap.tree is None or "checkpoint" not in snap.tree:
        return None
    found: List[Tuple[str, str]] = []
    for outer in snap.tree["checkpoint"].peel(pygit2.Tree):
        if outer.type_str != "tree":
            continue
        for inner in outer.peel(pygit2.Tree):
            if inner.type_str != "tree":
                continue
            for entry in inner.peel(pygit2.Tree):
                if (entry.name or "").endswith(".yaml"):
                    found.append((f"checkpoint/{outer.name}/{inner.name}/{entry.name}", str(entry.id)))
    for path, blob in sorted(found, key=lambda e: e[0].rsplit("/", 1)[1], reverse=True):
        try:
            m = store.parse_blob(blob, path)
        except model.InvalidMemory:
            continue
        if m.status == "active":
            return path, m
    return None


# --- links written by hooks -------------------------------------------------------


def _taken(store: Store) -> Set[str]:
    """The commits the ref's recent moves by a pull or a fast-forward merge added (each move's new tip and
    what lies below it but not below the old one), at most :data:`_MAX_WALK` of them."""
    from .repo import memory_ref

    out: Set[str] = set()
    try:
        entries = list(islice(store.repo.references[memory_ref(store.branch)].log(), _MAX_WALK))
    except (KeyError, pygit2.GitError, OSError):
        return out  # no reflog: every commit since the last link counts, as before there were pulls
    for entry in entries:  # newest first
        if not (entry.message or "").startswith(TAKEN) or len(out) >= _MAX_WALK:
            continue
        try:
            walker = store.repo.walk(entry.oid_new)
            if entry.oid_old != pygit2.Oid(hex="0" * 40):
                walker.hide(entry.oid_old)
            out.update(str(c.id) for c in islice(walker, _MAX_WALK))
        except (KeyError, ValueError, pygit2.GitError):
            continue
    return out


def _own_writes(store: Store) -> Iterator[Tuple[pygit2.Commit, Change]]:
    """This clone's memory commits on the branch's own ref, newest first along first parents (this clone's side
    of a pull's merge): not what it inherited from its parents, nor what a pull or a fast-forward merge took as
    it is (:func:`_taken`); at most :data:`_MAX_WALK`."""
    from .audit import change_from_commit
    from .repo import memory_ref

    tip = store.own_tip()
    if not tip:
        return
    walker = store.repo.walk(tip, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.TIME)
    walker.simplify_first_parent()
    for parent in parent_chain(store.repo, store.branch):  # inherited memory is not this branch's work
        inherited = ref_target(store.repo, memory_ref(parent))
        if inherited:
            walker.hide(inherited)
    taken = _taken(store)
    for commit in islice(walker, _MAX_WALK):
        if str(commit.id) not in taken:  # a teammate's (their link commits too): not the end of this clone's writes
            yield commit, change_from_commit(commit)


def unlinked_since_last_commit(store: Store, previous_code_commit_time: Optional[int],
                               code_commit: Optional[str] = None) -> List[str]:
    """Ids of memories written on this branch's own ref since the last link
    (or since the previous code commit, when nothing was linked yet). The commits a pull or a
    fast-forward merge brought as they are (the ref's reflog names each move) are another clone's or
    branch's work: linked there, or by nobody, never to this clone's next commit. This clone's own
    writes below them (pushed, then brought back under a teammate's) still are, and so are those
    before a merge this clone made (a pull's): the walk follows first parents, this clone's side.
    A write made on a detached HEAD counts only when ``code_commit`` is the commit made on top of where HEAD
    was (:func:`lands_on`): one made looking at old code is not about the branch's next commit."""
    from .audit import detached_in

    ids: List[str] = []
    for commit, change in _own_writes(store):
        if change.op in ("link", "rewrite"):
            break
        if previous_code_commit_time is not None and commit.commit_time < previous_code_commit_time:
            break
        at = detached_in(commit.message)
        if at and not (code_commit and lands_on(store.repo, at, code_commit)):
            continue
        if change.op in _LINKABLE_OPS:
            ids.extend(i for i in change.memory_ids[:1] if i not in ids)
    return ids


def lands_on(repo: pygit2.Repository, at: str, commit: str) -> bool:
    """Whether ``commit`` is the one made on top of ``at`` (where HEAD was detached when a memory was written): it
    is new there (``at`` does not hold it) and its first parent is ``at`` or in it (an amend of ``at`` too)."""
    from .branches import reachable

    try:
        parents = repo[commit].peel(pygit2.Commit).parent_ids
    except (KeyError, ValueError, pygit2.GitError):
        return False
    return bool(parents) and not reachable(repo, commit, at) and reachable(repo, str(parents[0]), at)


def link_landed(store: Store, rewritten: Sequence[str], *, source: str = "hook") -> List[Link]:
    """After a rebase (``rewritten``: the old commits it replaced), link each memory written on a detached HEAD since
    the last link (while the rebase stopped on a conflict, say: the post-commit hook skips those commits) to the
    first commit the rebase put on the branch on top of where HEAD was (:func:`lands_on`). A memory no such commit
    lands on stays unlinked: linking it to an unrelated commit would say something false. One link commit per
    code commit."""
    from .audit import detached_in

    writes = [(at, change.memory_ids[:1]) for commit, change in takewhile(lambda w: w[1].op != "link", _own_writes(store))
              if change.op in _LINKABLE_OPS and (at := detached_in(commit.message))]
    head = head_commit(store.repo)
    if not writes or not head:
        return []
    walker = store.repo.walk(head, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.REVERSE)
    for old in rewritten:  # what remains: the rebase's commits, and the upstream's new ones (lands_on tells them apart)
        try:
            walker.hide(old)
        except (KeyError, ValueError, pygit2.GitError):
            continue  # gone already
    landed = [str(c.id) for c in walker]
    wanted: Dict[str, List[str]] = {}
    for at, ids in writes:
        code = next((c for c in landed if lands_on(store.repo, at, c)), None)
        if code:
            wanted.setdefault(code, []).extend(ids)
    return [link_commit(store, code, source=source, memory_ids=ids) for code, ids in wanted.items()]


@dataclass(frozen=True)
class Link:
    commit: Optional[str]  # the memory commit written, None when there was nothing to link
    code_commit: str
    memory_ids: List[str] = field(default_factory=list)
    checkpoint: Optional[str] = None


def link_commit(store: Store, code_commit: str, *, author: Optional[Author] = None, source: str = "hook",
                memory_ids: Optional[Sequence[str]] = None) -> Link:
    """Add ``code_commit`` to the ``commits`` of the memories written since the
    previous commit, and move the latest checkpoint's ``commit`` to it, in ONE
    memory commit. Nothing is written on a branch without memory of its own.
    With ``memory_ids`` (:func:`link_landed`), those memories are linked and the checkpoint stays."""
    from .audit import CODE_COMMIT_TRAILER
    from .repo import default_author

    repo = store.repo
    code = repo[code_commit].peel(pygit2.Commit)
    previous = code.parents[0].commit_time if code.parents else None
    author = author or default_author(repo)

    def attempt() -> Link:
        expected = store.own_tip()
        if not expected:
            return Link(None, code_commit)
        snap = store.snapshot(expected)
        updates: Dict[str, bytes] = {}
        linked: List[str] = []
        wanted = unlinked_since_last_commit(store, previous, code_commit) if memory_ids is None else memory_ids
        for memory_id in wanted:
            try:
                path, m = snap.find(memory_id)
            except GitmemError:
                continue
            if code_commit not in m.commits:
                updates[path] = model.dump_yaml(m.evolve(commits=m.commits + (code_commit,)))
                linked.append(m.id)
        cp = latest_checkpoint(store, expected) if memory_ids is None else None
        advanced = None
        if cp is not None and cp[1].commit != code_commit and _on_line(repo, cp[1].commit, code_commit):
            path, m = cp
            current = model.load_yaml(updates[path]) if path in updates else m
            commits = current.commits if code_commit in current.commits else current.commits + (code_commit,)
            updates[path] = model.dump_yaml(current.evolve(commit=code_commit, commits=commits,
                                                           updated=model.utc_now()))
            advanced = m.id
        if not updates:
            return Link(None, code_commit)
        ids = linked + ([advanced] if advanced and advanced not in linked else [])
        message = (f"link {code_commit[:10]}: {plural(len(linked), 'memory')}"
                   + (", checkpoint advanced" if advanced else "") + "\n\n"
                   + "".join(f"Memory-Id: {i}\n" for i in ids)
                   + f"Memory-Op: link\nMemory-Source: {source}\nAuthor-Kind: {author.kind}\n"
                   + f"{CODE_COMMIT_TRAILER}: {code_commit}\n")
        commit = store.commit_tree(updates, message, author, base=expected)
        store.move_ref(expected, commit, f"gitmem link: {code_commit[:12]}")
        return Link(commit, code_commit, linked, advanced)

    return store.retrying(attempt)


def _on_line(repo: pygit2.Repository, old: Optional[str], new: str) -> bool:
    """The checkpoint follows the branch forward (or was tied to no commit yet)."""
    from .branches import reachable

    return not old or reachable(repo, old, new)


def rewrite_commits(store: Store, mapping: Mapping[str, str], *, author: Optional[Author] = None,
                    source: str = "hook") -> Optional[str]:
    """After a rebase or amend, replace rewritten commit ids in ``commit`` and
    ``commits`` of every memory, in one memory commit. Returns it, or None."""
    from .repo import default_author

    author = author or default_author(store.repo)
    if not mapping:
        return None

    def attempt() -> Optional[str]:
        expected = store.own_tip()
        if not expected:
            return None
        updates: Dict[str, bytes] = {}
        snap = store.snapshot(expected)
        memories = snap.memories()
        for path, _ in snap.entries():
            m = memories.get(path.rsplit("/", 1)[1][:-5])
            if m is None:
                continue
            commits = tuple(dict.fromkeys(mapping.get(c, c) for c in m.commits))
            commit = mapping.get(m.commit, m.commit) if m.commit else None
            if commits != m.commits or commit != m.commit:
                updates[path] = model.dump_yaml(m.evolve(commits=commits, commit=commit))
        if not updates:
            return None
        ids = sorted(p.rsplit("/", 1)[1][:-5] for p in updates)
        message = (f"rewrite: point {plural(len(ids), 'memory')} at rewritten commits\n\n"
                   + "".join(f"Memory-Id: {i}\n" for i in ids)
                   + f"Memory-Op: rewrite\nMemory-Source: {source}\nAuthor-Kind: {author.kind}\n")
        commit = store.commit_tree(updates, message, author, base=expected)
        store.move_ref(expected, commit, "gitmem rewrite")
        return commit

    return store.retrying(attempt)


# --- resume ----------------------------------------------------------------------


@dataclass(frozen=True)
class Resume:
    """Where a run on this branch stands, rebuilt from git alone."""

    branch: str
    head: Optional[str]
    checkpoint: Optional[Memory]
    commits_since: List[Tuple[str, str]]
    memories_since: List[Memory]
    changed_files: List[str]
    relevant: List[Memory]
    next: Optional[str]
    inherits: Optional[str] = None  # the parent branch whose memory was read: this branch has none of its own yet
    off_head: bool = False  # the checkpoint's commit is not in HEAD's history (see :func:`off_head_note`)

    def to_dict(self) -> Dict[str, Any]:
        out = {"branch": self.branch, "head": self.head, "inherits": self.inherits,
               "checkpoint": self.checkpoint.to_dict() if self.checkpoint else None, "off_head": self.off_head,
               "commits_since": [{"commit": c, "subject": s} for c, s in self.commits_since],
               "memories_since": [m.to_dict() for m in self.memories_since],
               "changed_files": list(self.changed_files),
               "relevant": [m.to_dict() for m in self.relevant], "next": self.next}
        return {**out, "note": inherited_note(self.inherits)} if self.inherits else out


def inherited_note(branch: str) -> str:
    """What resume says on a branch with no memory of its own, which reads ``branch``'s: an agent starting a fresh
    branch, told that branch's checkpoint and next step as its own, would carry on someone else's work."""
    return (f"from {branch}'s memory: this branch has none of its own yet, so the checkpoint and the next step "
            f"are {branch}'s work, not this branch's")


def off_head_note(commit: str) -> str:
    """What resume says when the checkpoint stands at a commit HEAD's history lacks: no hook runs for
    `git reset --hard` (nor for a rebase that drops the commit), so the checkpoint, its next step and the memories
    written since still tell of work that is no longer here, and "no commits since" would read as all done."""
    return (f"its commit {commit[:10]} is not in HEAD's history: a reset or a rebase left it behind, or it was "
            f"never fetched here, so the checkpoint, its next step and the memories since may be about work "
            f"that is not here")


def resume(store: Store, *, limit: int = 50) -> Resume:
    from .branches import reachable

    repo = store.repo
    # where the branch's code stands: HEAD when it is the branch checked out (or HEAD is detached), else the
    # branch's own tip (`gitmem --branch main resume` from another branch is about main)
    own = None if repo.head_is_unborn or repo.head_is_detached or repo.head.shorthand == store.branch \
        else ref_target(repo, f"refs/heads/{store.branch}")
    head = own or head_commit(store.repo)
    reads, tip = store.read_from()
    cp = latest_checkpoint(store, tip)
    point = cp[1] if cp else None
    commits: List[Tuple[str, str]] = []
    off_head = False
    if head:
        # commits the hooks linked to the checkpoint after it was written, then any
        # made without hooks after the commit it stands at (none when that commit is not here, a reset or
        # a teammate's unpushed one: else all of history would read as made since)
        walker = repo.walk(head, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.TIME)
        gone = bool(point and point.commit and point.commit not in repo)
        off_head = bool(point and point.commit and reads == store.branch
                        and (gone or not reachable(repo, point.commit, head)))
        if point and point.commit and not gone:
            walker.hide(point.commit)
        later = [] if gone else list(islice(walker, limit))  # not the whole history, to keep ``limit``
        linked = [repo[c].peel(pygit2.Commit) for c in (point.commits if point else ()) if c in repo and _on_line(repo, c, head)]
        from .redact import redact  # a subject goes to the model (the SessionStart hook, MCP): no secret in it

        for commit in later + linked[::-1]:
            entry = (str(commit.id), redact(commit.message.splitlines()[0])[0] if commit.message else "")
            if entry not in commits:
                commits.append(entry)
        commits = commits[:limit]
    recent = store.listed("recent", limit)  # newest first, from per-tree summaries
    if recent is None:
        recent = [m for _, m in sorted(store.memories().items(), reverse=True) if m.type != "checkpoint"][:limit]
    since = [m for m in recent if point is None or m.id > point.id][::-1]
    files = _changed_files(store, head, [c for c, _ in commits])
    relevant = store.choices_touching(_touching(files)) if files else []
    return Resume(store.branch, head, point, commits, since, files, relevant, point.next if point else None,
                  reads if reads and reads != store.branch else None, off_head)


def _touching(files: Sequence[str]) -> Callable[[Sequence[str]], bool]:
    """A test for memory paths that name a changed file, a folder holding one, or a file inside a
    changed folder (``model.matches(m, path=f)`` for some f), in time linear in a path's depth."""
    exact = {f.strip("/") for f in files}
    folders = {p.rsplit("/", i)[0] for p in exact for i in range(1, p.count("/") + 1)}

    def touches(paths: Sequence[str]) -> bool:
        for q in paths:
            parts = q.split("/")
            if q in exact or q in folders or any("/".join(parts[:i]) in exact for i in range(1, len(parts))):
                return True
        return False

    return touches


def _changed_files(store: Store, head: Optional[str], since: Sequence[str]) -> List[str]:
    """Files the branch changed: since it left the default branch (on the default
    branch: in the commits since the checkpoint), plus uncommitted changes."""
    from .branches import code_tips
    from .repo import default_branch

    repo = store.repo
    pairs: List[Tuple[Any, Any]] = []
    if head and store.branch != default_branch(repo):
        tips = code_tips(repo, default_branch(repo))
        found = repo.merge_base(head, tips[0]) if tips else None
        if found and str(found) != head:
            pairs.append((repo[found], repo[head]))
    else:
        for c in since:
            commit = repo[c].peel(pygit2.Commit)
            pairs.append((commit.parents[0] if commit.parents else None, commit))
    files: List[str] = []
    for old, new in pairs:
        changes = repo.diff(old, new) if old is not None else new.tree.diff_to_tree(swap=True)
        for delta in changes.deltas:
            files.extend([delta.old_file.path, delta.new_file.path])
    try:
        flags = pygit2.enums.FileStatus
        for path, status in repo.status().items():
            if status & flags.IGNORED or status == flags.CURRENT:
                continue
            files.append(path)
    except (pygit2.GitError, AttributeError):
        pass
    return sorted(set(files))


def render_resume(r: Resume, prompt: bool = False) -> str:
    """For a person (default) or as prompt text for an agent picking the run up. In a prompt, everything memory
    and commits say is quoted (:func:`gitmem.model.quoted`), as the context builder quotes it: text that closes
    the wrapper a hook puts around it stays data."""
    q: Callable[[str], str] = model.quoted if prompt else str
    cp = r.checkpoint
    lines: List[str] = []
    if prompt:
        lines.append(f"You are resuming work on branch '{q(r.branch)}' (HEAD {(r.head or 'none')[:10]}).")
        lines.append(f"Last checkpoint: {q(cp.text.strip())}" if cp else "There is no checkpoint yet.")
        if cp and cp.commit:
            lines.append(f"It stands at commit {cp.commit[:10]}.")
    else:
        lines.append(f"branch {r.branch}, HEAD {(r.head or '-')[:10]}")
        lines.append(f"checkpoint {cp.id} at {(cp.commit or '-')[:10]} ({cp.created}): {cp.text.strip()}"
                     if cp else "no checkpoint on this branch yet")
    if cp and cp.commit and r.off_head:
        lines.append(f"Note: {off_head_note(cp.commit)}." if prompt else f"  ({off_head_note(cp.commit)})")
    if r.inherits:
        note = inherited_note(q(r.inherits))
        lines.append(f"Note: {note}." if prompt else f"  ({note})")
    head = "Commits since the checkpoint" if cp else "Recent commits"
    lines += ["", f"{head} ({len(r.commits_since)}):" if r.commits_since else f"{head}: none"]
    lines += [f"  {c[:10]} {q(s)}" for c, s in r.commits_since]
    if r.memories_since:  # a write since may be withdrawn since: said, so no one takes it for one that holds
        lines += ["", "Memories written since:"] + [
            f"  {m.id} {m.type}: {q(m.summary)}" + ("" if m.status == "active" else " (" + (
                f"replaced by {m.superseded_by}" if m.superseded_by else m.status) + ": do not rely on it)")
            for m in r.memories_since]
    if r.relevant:
        lines += ["", "Decisions and rejections about the files this branch changed:"]
        for m in r.relevant:
            why = f" (because: {q(m.reason)})" if m.reason else ""
            lines.append(f"  {m.type} {m.id}: {q(m.summary)}{why} [{q(', '.join(m.paths))}]")
    step = f"Next step on {q(r.inherits)}, not this branch" if r.inherits else "Next step"
    lines += ["", f"{step}: {q(r.next)}" if r.next else f"{step}: not recorded" + (" (see the checkpoint text)" if cp else "")]
    return "\n".join(lines) + "\n"
