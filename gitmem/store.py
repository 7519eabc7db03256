"""The store: memories as YAML blobs on ``refs/memory/<branch>``, one commit per write.

This is the git edge. A write builds new blobs and trees, a commit whose parent
is the tip the write read, then moves the ref by compare-and-swap. If the ref
moved meanwhile, the write is re-applied on the new tip and retried, so
concurrent writers never lose a write and the ref always points at a complete
commit. The working tree, the index and code refs are never touched.
"""

from __future__ import annotations

import os
import random
import re
import time
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import pygit2

from . import model
from .errors import (
    AmbiguousId, BranchError, ConcurrentUpdate, GitmemError, InvalidMemory, NotARepository,
    NotFound, RefLocked, StorageError,
)
from .model import Author, Memory

REF_PREFIX = "refs/memory/"
COMMITTER = ("gitmem", "gitmem@localhost")
_TRAILER_RE = re.compile(r"^([A-Za-z-]+): (.*)$")
_MAX_ATTEMPTS = 400
#: A ref update holds its lock for milliseconds: writers wait this long for a lock,
#: and a lock this old that no process holds open was left by a dead process.
STALE_LOCK_SECONDS = 5.0


@dataclass(frozen=True)
class Write:
    """What a successful write produced."""

    memory: Memory
    commit: str
    redacted: int = 0


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

    def to_dict(self) -> Dict[str, Any]:
        return {
            "commit": self.commit, "time": self.time, "author": self.author.to_dict(),
            "source": self.source, "op": self.op, "memory_ids": list(self.memory_ids),
            "type": self.type, "summary": self.summary, "parents": list(self.parents),
        }


@dataclass(frozen=True)
class Problem:
    """Something `doctor` found; ``level`` is "error" or "warning"."""

    level: str
    where: str
    message: str

    def to_dict(self) -> Dict[str, str]:
        return {"level": self.level, "where": self.where, "message": self.message}


def memory_ref(branch: str) -> str:
    return REF_PREFIX + branch


def check_branch_name(name: str) -> str:
    """Refuse names git would refuse, so a branch can never address outside refs/memory/."""
    if not name or len(name) > 255 or "\x00" in name or not pygit2.reference_is_valid_name(memory_ref(name)):
        raise BranchError(f"invalid branch name {name[:80]!r}")
    if name == "HEAD" or name.startswith("-"):
        raise BranchError(f"invalid branch name {name!r}")
    return name


def open_repository(path: str = ".") -> pygit2.Repository:
    try:
        found = pygit2.discover_repository(os.path.abspath(path))
    except (pygit2.GitError, OSError, ValueError):
        found = None
    if not found:
        raise NotARepository(os.path.abspath(path))
    try:
        return pygit2.Repository(found)
    except pygit2.GitError as e:
        raise NotARepository(f"{path} ({e})") from None


def common_dir(repo: pygit2.Repository) -> str:
    """The directory shared by all linked worktrees (where refs and logs live)."""
    path = repo.path
    pointer = os.path.join(path, "commondir")
    if os.path.exists(pointer):
        with open(pointer, encoding="utf-8") as f:
            return os.path.normpath(os.path.join(path, f.read().strip()))
    return os.path.normpath(path)


def config_get(repo: pygit2.Repository, key: str) -> Optional[str]:
    try:
        return repo.config[key]
    except (KeyError, pygit2.GitError):
        return None


def default_branch(repo: pygit2.Repository) -> str:
    """`gitmem.defaultBranch`, else the remote's HEAD, else main/master, else `init.defaultBranch`."""
    configured = config_get(repo, "gitmem.defaultBranch")
    if configured:
        return configured
    try:
        target = repo.references["refs/remotes/origin/HEAD"].target
        if isinstance(target, str) and target.startswith("refs/remotes/origin/"):
            return target[len("refs/remotes/origin/"):]
    except (KeyError, pygit2.GitError):
        pass
    for name in ("main", "master"):
        if f"refs/heads/{name}" in repo.references or memory_ref(name) in repo.references:
            return name
    return config_get(repo, "init.defaultBranch") or "main"


def current_branch(repo: pygit2.Repository) -> Tuple[str, Optional[str]]:
    """The code branch HEAD names (born or not), and a notice when HEAD is detached."""
    try:
        head = repo.references["HEAD"]
    except (KeyError, pygit2.GitError):
        return default_branch(repo), "no HEAD"
    target = head.target
    if isinstance(target, str) and target.startswith("refs/heads/"):
        return target[len("refs/heads/"):], None
    branch = default_branch(repo)
    return branch, f"HEAD is detached: using the memory of {branch!r} (pass --branch to choose another)"


def _default_author(repo: pygit2.Repository) -> Author:
    env = os.environ
    name = env.get("GITMEM_AUTHOR_NAME") or config_get(repo, "user.name") or env.get("USER") or "unknown"
    email = env.get("GITMEM_AUTHOR_EMAIL") or config_get(repo, "user.email") or ""
    kind = env.get("GITMEM_AUTHOR_KIND") or "human"
    return Author(name=name, email=email, kind=kind)


class Snapshot:
    """The memory tree at one commit, with lookups that avoid loading everything."""

    def __init__(self, store: "Store", commit: Optional[str]):
        self.store = store
        self.commit = commit
        try:
            self.tree: Optional[pygit2.Tree] = store.repo[commit].peel(pygit2.Tree) if commit else None
        except (KeyError, ValueError, pygit2.GitError) as e:
            raise _damaged(store.ref, commit, e) from None

    def _entry(self, path: str) -> Optional[pygit2.Object]:
        if self.tree is None:
            return None
        try:
            return self.tree[path]
        except KeyError:
            return None

    def find(self, memory_id: str) -> Tuple[str, Memory]:
        """Resolve a full id or a unique prefix (at least 4 chars) to its path and memory."""
        ref = self.store.ref
        if not model.ID_PREFIX_RE.match(memory_id or ""):
            raise NotFound(memory_id, ref)
        if len(memory_id) == model.ID_LENGTH:
            for type_ in model.TYPES:
                path = model.memory_path(type_, memory_id)
                entry = self._entry(path)
                if entry is not None:
                    return path, self.store._parse(entry.id, path)
            raise NotFound(memory_id, ref)
        hits = [i for i in self.ids() if i.startswith(memory_id)]
        if len(hits) > 1:
            raise AmbiguousId(memory_id, hits)
        if not hits:
            raise NotFound(memory_id, ref)
        return self.find(hits[0])

    def entries(self) -> Iterator[Tuple[str, str]]:
        """(path, blob id) of every memory blob, in tree order."""
        if self.tree is None:
            return
        try:
            for type_tree in self.tree:
                if type_tree.name not in model.TYPES or type_tree.type_str != "tree":
                    continue
                for outer in _subtrees(type_tree):
                    for inner in _subtrees(outer):
                        prefix = f"{type_tree.name}/{outer.name}/{inner.name}/"
                        for blob in inner.peel(pygit2.Tree):
                            if blob.name.endswith(".yaml") and blob.type_str == "blob":
                                yield prefix + blob.name, str(blob.id)
        except (KeyError, ValueError, pygit2.GitError) as e:
            raise _damaged(self.store.ref, self.commit, e) from None

    def ids(self) -> List[str]:
        return sorted(p.rsplit("/", 1)[1][:-5] for p, _ in self.entries())

    def memories(self) -> Dict[str, Memory]:
        return self.store._load_all(self)


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

    def __init__(self, repo: pygit2.Repository, branch: str, notice: Optional[str] = None):
        self.repo = repo
        self.branch = check_branch_name(branch)
        self.ref = memory_ref(self.branch)
        self.notice = notice
        self.problems: List[Problem] = []
        self._cache = _blob_cache_for(repo)

    @classmethod
    def open(cls, path: str = ".", branch: Optional[str] = None) -> "Store":
        repo = open_repository(path)
        notice = None
        if branch is None:
            branch, notice = current_branch(repo)
        return cls(repo, branch, notice)

    # --- reading -----------------------------------------------------------

    def _ref_target(self, ref: Optional[str] = None) -> Optional[str]:
        try:
            return str(self.repo.references[ref or self.ref].resolve().target)
        except (KeyError, pygit2.GitError):
            return None

    def own_tip(self) -> Optional[str]:
        """The tip of this branch's own memory ref, or None when it has none yet."""
        return self._ref_target()

    def read_from(self) -> Tuple[Optional[str], Optional[str]]:
        """(branch whose memory is read, its tip): this branch's, else the nearest parent's."""
        own = self.own_tip()
        if own:
            return self.branch, own
        from .branches import parent_chain  # late import: branches builds on the store

        for parent in parent_chain(self.repo, self.branch):
            tip = self._ref_target(memory_ref(parent))
            if tip:
                return parent, tip
        return None, None

    def tip(self) -> Optional[str]:
        """The memory commit reads see (own or inherited)."""
        return self.read_from()[1]

    def snapshot(self, commit: Optional[str] = None) -> Snapshot:
        return Snapshot(self, commit if commit is not None else self.tip())

    def get(self, memory_id: str, at: Optional[str] = None) -> Memory:
        return self.snapshot(at).find(memory_id)[1]

    def memories(self, at: Optional[str] = None) -> Dict[str, Memory]:
        """Every valid memory at the tip (or commit ``at``), by id. Invalid blobs are
        skipped and reported in :attr:`problems`."""
        return self.snapshot(at).memories()

    def list(self, *, type: Optional[str] = None, tag: Optional[str] = None, path: Optional[str] = None,
             author_kind: Optional[str] = None, source: Optional[str] = None,
             status: Optional[str] = "active", at: Optional[str] = None) -> List[Memory]:
        """Memories matching every given filter, oldest first; ``status=None`` means any."""
        model.check_choice("type", type, model.TYPES)
        model.check_choice("status", status, model.STATUSES)
        model.check_choice("author kind", author_kind, model.AUTHOR_KINDS)
        found = self.memories(at)
        return [m for _, m in sorted(found.items()) if model.matches(
            m, type=type, tag=tag, path=path, author_kind=author_kind, source=source, status=status)]

    def _parse(self, blob_id: Any, path: str) -> Memory:
        key = str(blob_id)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        try:
            memory = model.load_yaml(self.repo[blob_id].data)
        except (KeyError, ValueError, pygit2.GitError) as e:
            raise _damaged(self.ref, key, e) from None
        except InvalidMemory as e:
            raise InvalidMemory(f"{path}: {e.field}", e.problem, e.choices) from None
        if model.memory_path(memory) != path:
            raise InvalidMemory(path, f"stored under the wrong path (expected {model.memory_path(memory)})")
        self._cache.put(key, memory)
        return memory

    def _load_all(self, snap: Snapshot) -> Dict[str, Memory]:
        out: Dict[str, Memory] = {}
        self.problems = []
        tree = str(snap.tree.id) if snap.tree is not None else None
        listed = self._cache.tree(tree)
        if listed is not None:  # a tree known to be clean: skip walking its ~4,000 subtrees
            for memory in listed:
                out[memory.id] = memory
            return out
        blobs: List[str] = []
        for path, blob_id in snap.entries():
            blobs.append(blob_id)
            try:
                memory = self._parse(blob_id, path)
            except InvalidMemory as e:
                self.problems.append(Problem("error", path, str(e)))
                continue
            if memory.id in out:
                self.problems.append(Problem("error", path, f"duplicate id {memory.id}"))
            out[memory.id] = memory
        if tree is not None and not self.problems:
            self._cache.put_tree(tree, blobs)
        self._cache.flush()
        return out

    # --- writing -----------------------------------------------------------

    def add(self, type: str, text: str, *, title: Optional[str] = None, reason: Optional[str] = None,
            tags: Sequence[str] = (), paths: Sequence[str] = (), author: Optional[Author] = None,
            source: str = "api", supersedes: Optional[str] = None, blob: Optional[str] = None,
            commit: Optional[str] = None, next: Optional[str] = None,
            commits: Sequence[str] = ()) -> Write:
        """Validate, redact and store one new memory in one commit.

        ``file`` memories get the blob id of the path's current content and
        checkpoints the HEAD commit, unless given.
        """
        author = author or _default_author(self.repo)
        fields_, redacted = _redacted(text=text, title=title, reason=reason, next=next)
        paths = tuple(model.check_path(p) for p in paths)
        if type == "file" and blob is None and paths:
            blob = self._current_blob(paths[0])
        if type == "checkpoint" and commit is None:
            commit = self._head_commit()
        memory = Memory(
            id=model.new_id(), type=type, author=author, source=source, created=model.utc_now(),
            tags=tuple(dict.fromkeys(tags)), paths=tuple(dict.fromkeys(paths)), supersedes=supersedes,
            blob=blob, commit=commit, commits=tuple(commits), **fields_,
        )
        model.validate(memory)
        commit_id = self._commit(lambda snap: ({model.memory_path(memory): model.dump_yaml(memory)}, None),
                                 op="add", memories=[memory], author=author, source=source, redacted=redacted)
        return Write(memory, commit_id, redacted)

    def edit(self, memory_id: str, *, author: Optional[Author] = None, source: str = "api",
             **changes: Any) -> Write:
        """Change fields of a memory (text, title, reason, tags, paths, next, commits)."""
        allowed = {"text", "title", "reason", "tags", "paths", "next", "commits", "blob"}
        bad = set(changes) - allowed
        if bad:
            raise InvalidMemory(", ".join(sorted(bad)), "cannot be edited", sorted(allowed))
        author = author or _default_author(self.repo)
        text_changes = {k: v for k, v in changes.items() if k in ("text", "title", "reason", "next")}
        redacted_fields, redacted = _redacted(**text_changes)
        changes = {**changes, **redacted_fields}
        for key in ("tags", "paths", "commits"):
            if key in changes and changes[key] is not None:
                values = changes[key]
                if key == "paths":
                    values = [model.check_path(p) for p in values]
                changes[key] = tuple(dict.fromkeys(values))
        result: Dict[str, Memory] = {}

        def apply(snap: Snapshot):
            path, old = snap.find(memory_id)
            new = old.evolve(**changes, updated=model.utc_now())
            model.validate(new)
            if new.evolve(updated=old.updated) == old:
                raise GitmemError(f"nothing to change in {old.id}")
            result["m"] = new
            return {path: model.dump_yaml(new)}, new

        commit_id = self._commit(apply, op="edit", author=author, source=source, redacted=redacted)
        return Write(result["m"], commit_id, redacted)

    def retract(self, memory_id: str, *, reason: Optional[str] = None, author: Optional[Author] = None,
                source: str = "api") -> Write:
        """Mark a memory retracted: kept in history and in the tree, out of lists and context."""
        author = author or _default_author(self.repo)
        note, redacted = _redacted(reason=reason)
        result: Dict[str, Memory] = {}

        def apply(snap: Snapshot):
            path, old = snap.find(memory_id)
            if old.status != "active":
                raise GitmemError(f"{old.id} is already {old.status}")
            new = old.evolve(status="retracted", updated=model.utc_now())
            result["m"] = new
            return {path: model.dump_yaml(new)}, new

        commit_id = self._commit(apply, op="retract",
                                 author=author, source=source, redacted=redacted, note=note.get("reason"))
        return Write(result["m"], commit_id, redacted)

    def supersede(self, memory_id: str, text: str, *, author: Optional[Author] = None, source: str = "api",
                  **fields_: Any) -> Write:
        """Replace a memory with a new one in a single commit: the old one is marked
        superseded (and points at its successor); the new one says what it supersedes."""
        author = author or _default_author(self.repo)
        new_fields, redacted = _redacted(text=text, title=fields_.pop("title", None),
                                         reason=fields_.pop("reason", None), next=fields_.pop("next", None))
        result: Dict[str, Memory] = {}

        def apply(snap: Snapshot):
            path, old = snap.find(memory_id)
            if old.status != "active":
                raise GitmemError(f"{old.id} is already {old.status}")
            keep = {k: getattr(old, k) for k in ("title", "reason", "tags", "paths")}
            keep.update({k: v for k, v in new_fields.items() if v is not None or k == "text"})
            keep.update({k: tuple(v) for k, v in fields_.items() if k in ("tags", "paths")})
            new = Memory(id=model.new_id(), type=old.type, author=author, source=source,
                         created=model.utc_now(), supersedes=old.id, **keep)
            model.validate(new)
            replaced = old.evolve(status="superseded", superseded_by=new.id, updated=model.utc_now())
            result["m"] = new
            return {path: model.dump_yaml(replaced), model.memory_path(new): model.dump_yaml(new)}, new

        commit_id = self._commit(apply, op="supersede", author=author, source=source, redacted=redacted)
        return Write(result["m"], commit_id, redacted)

    def commit_tree(self, updates: Mapping[str, Optional[bytes]], message: str, author: Author, *,
                    base: Optional[str], extra_parents: Sequence[str] = ()) -> str:
        """Write blobs and trees for ``updates`` (path -> bytes, or None to delete)
        over ``base``'s tree and return a new commit (the ref is not moved).

        Used by every write, and by merges (``extra_parents``)."""
        try:
            base_tree = self.repo[base].peel(pygit2.Tree) if base else None
            tree = _write_tree(self.repo, base_tree, updates)
            sig = _signature(author)
            committer = pygit2.Signature(*COMMITTER)
            parents = ([base] if base else []) + list(extra_parents)
            return str(self.repo.create_commit(None, sig, committer, message, tree, parents))
        except (pygit2.GitError, OSError) as e:
            raise StorageError(f"could not write memory objects: {e}") from None

    def move_ref(self, expected: Optional[str], new: str, reflog: str) -> None:
        """Compare-and-swap ``self.ref`` from ``expected`` (None: must not exist) to ``new``."""
        _ensure_reflog(self.repo, self.ref)
        if expected is None:
            return self._create_ref(new, reflog)
        try:
            ref = self.repo.lookup_reference(self.ref)
            if str(ref.target) != expected:
                raise ConcurrentUpdate(self.ref, expected, str(ref.target))
            ref.set_target(new, reflog)
        except (pygit2.AlreadyExistsError, KeyError):
            raise ConcurrentUpdate(self.ref, expected, self._ref_target()) from None
        except (pygit2.GitError, OSError) as e:  # libgit2 reports lock failures as OSError
            text = str(e)
            if "does not match" in text or "exists" in text:
                raise ConcurrentUpdate(self.ref, expected, self._ref_target()) from None
            if "lock" in text:
                raise _Locked(self.ref, text) from None
            raise StorageError(f"could not move {self.ref}: {text}") from None

    def _create_ref(self, new: str, reflog: str) -> None:
        """Create ``self.ref`` at ``new`` only if it does not exist, checked under the ref's lock.

        libgit2 checks a non-forced create's "must not exist" *before* taking the
        lock (refdb_fs_backend__write), so two first writes on a branch could both
        succeed and the first would be lost (seen under load in the 8x50 test).
        `git update-ref REF NEW ""` checks under the lock; this runs once per branch."""
        import subprocess

        try:
            result = subprocess.run(["git", f"--git-dir={self.repo.path}", "update-ref", "-m", reflog,
                                     self.ref, new, ""], capture_output=True, text=True, stdin=subprocess.DEVNULL)
        except OSError as e:
            raise StorageError(f"could not run git to create {self.ref}: {e}") from None
        if result.returncode == 0:
            return
        text = (result.stderr.strip().splitlines() or ["git update-ref failed"])[0].replace("fatal: ", "")
        if "already exists" in text:
            raise ConcurrentUpdate(self.ref, None, self._ref_target())
        if ".lock" in text:
            raise _Locked(self.ref, text)
        raise StorageError(f"could not create {self.ref}: {text}")

    def retrying(self, attempt: Callable[[], Any]) -> Any:
        """Run ``attempt`` until it does not lose a compare-and-swap race (jittered backoff)."""
        lock_since: Optional[float] = None
        for n in range(_MAX_ATTEMPTS):
            try:
                return attempt()
            except ConcurrentUpdate:
                lock_since = None
            except _Locked as e:
                lock_since = lock_since or time.monotonic()
                if time.monotonic() - lock_since > STALE_LOCK_SECONDS:
                    lock = self.lock()
                    raise RefLocked(self.ref, e.lock_path, lock.describe() if lock else None) from None
            time.sleep(random.uniform(0.001, 0.004) * min(n + 1, 10))
        raise ConcurrentUpdate(self.ref, None, self._ref_target())

    def _commit(self, build: Callable[[Snapshot], Tuple[Dict[str, bytes], Optional[Memory]]], *,
                op: str, author: Author, source: str, redacted: int = 0,
                memories: Sequence[Memory] = (), note: Optional[str] = None) -> str:
        def attempt() -> str:
            expected = self.own_tip()
            base = expected or self.read_from()[1]  # a branch's first write forks from its parent
            updates, memory = build(Snapshot(self, base))
            subject = memory or memories[0]
            message = _message(op, subject, author, source, redacted, note)
            commit = self.commit_tree(updates, message, author, base=base)
            self.move_ref(expected, commit, f"gitmem {op}: {subject.id}")
            return commit

        return self.retrying(attempt)

    # --- history -----------------------------------------------------------

    def log(self, limit: Optional[int] = None, at: Optional[str] = None) -> List[Change]:
        """The audit trail, newest first: one :class:`Change` per memory commit."""
        tip = at or self.tip()
        if not tip:
            return []
        out: List[Change] = []
        walker = self.repo.walk(tip, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.TIME)
        for commit in walker:
            out.append(change_from_commit(commit))
            if limit is not None and len(out) >= limit:
                break
        return out

    def history(self, memory_id: str) -> List[Change]:
        """Every commit that changed this memory's blob, newest first (merges and
        hand edits included, not only commits whose trailers name it)."""
        path, memory = self.snapshot().find(memory_id)
        out: List[Change] = []
        tip = self.tip()
        for commit in self.repo.walk(tip, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.TIME):
            mine = _blob_at(commit.tree, path)
            if mine is None:
                continue
            if not commit.parents or all(_blob_at(p.tree, path) != mine for p in commit.parents):
                out.append(change_from_commit(commit))
        return out

    # --- helpers -----------------------------------------------------------

    def _head_commit(self) -> Optional[str]:
        try:
            return None if self.repo.head_is_unborn else str(self.repo.head.target)
        except pygit2.GitError:
            return None

    def _current_blob(self, path: str) -> Optional[str]:
        """The blob id of ``path`` as the agent read it: the working file, else HEAD's."""
        workdir = self.repo.workdir
        if workdir:
            full = os.path.join(workdir, path)
            if os.path.isfile(full):
                return str(pygit2.hashfile(full))
        head = self._head_commit()
        if head:
            return _blob_at(self.repo[head].peel(pygit2.Tree), path)
        return None

    def doctor(self) -> List[Problem]:
        """Validate the ref, the commit chain and every blob; report, never raise.

        A damaged history (a missing or corrupt object) comes with the last
        intact tip from the reflog, which :meth:`recover` moves the ref back to."""
        problems: List[Problem] = []
        lock = self.lock()
        if lock is not None:
            problems.append(Problem("warning", lock.path, lock.describe()))
        tip = self.own_tip()
        if tip is None:
            branch, inherited = self.read_from()
            where = f"reads inherit {memory_ref(branch)}" if inherited else "no memory yet"
            problems.append(Problem("warning", self.ref, f"no memory ref on this branch ({where})"))
            tip = inherited
        if tip is None:
            return problems
        damage = self.damage(tip)
        if damage:
            good = self.last_good_tip() if tip == self.own_tip() else None
            offer = (f"; last intact tip in the reflog is {good[:10]}: run `gitmem doctor --recover` to move "
                     "the ref back to it (intact later memories are kept)" if good else
                     "; no intact earlier tip in the reflog")
            problems.append(Problem("error", self.ref, f"history is damaged: {damage}{offer}"))
            return problems
        self.memories(tip)
        problems.extend(self.problems)
        return problems

    # --- repair ------------------------------------------------------------

    def lock(self) -> Optional["LockFile"]:
        """The ref's lock file, if one exists, with its age and the processes holding it open."""
        path = os.path.join(common_dir(self.repo), *self.ref.split("/")) + ".lock"
        try:
            age = time.time() - os.path.getmtime(path)
        except OSError:
            return None
        return LockFile(path, age, _holders(path))

    def clear_stale_lock(self) -> "LockFile":
        """Remove the ref's lock file, only when no live process holds it and it is old.

        libgit2 and git lock files carry no pid, so ownership is judged by two
        signs: no process has the file open (Linux /proc; a writer keeps it open
        until it renames it into place) and it is older than
        :data:`STALE_LOCK_SECONDS` (a ref update holds its lock for milliseconds).
        """
        lock = self.lock()
        if lock is None:
            raise GitmemError(f"{self.ref} is not locked")
        if not lock.stale:
            raise RefLocked(self.ref, lock.path, lock.describe())
        try:
            os.unlink(lock.path)
        except FileNotFoundError:
            pass  # its owner finished meanwhile
        except OSError as e:
            raise StorageError(f"could not remove {lock.path}: {e.strerror}") from None
        return lock

    def damage(self, tip: Optional[str] = None) -> Optional[str]:
        """The first missing or corrupt object reachable from ``tip`` (default: own tip), or None.

        Reads every commit, tree and blob once (shared subtrees are skipped), so
        a corrupt blob in an old commit is found too, not only the tip's."""
        tip = tip or self.own_tip()
        if tip is None:
            return None
        seen: set = set()
        try:
            stack: List[Any] = [pygit2.Oid(hex=tip)]
            while stack:
                oid = stack.pop()
                if oid in seen:
                    continue
                seen.add(oid)
                obj = self.repo[oid]
                if obj.type == pygit2.enums.ObjectType.COMMIT:
                    stack.extend(obj.parent_ids)
                    stack.append(obj.tree_id)
                elif obj.type == pygit2.enums.ObjectType.TREE:
                    stack.extend(entry.id for entry in obj)
                elif obj.type == pygit2.enums.ObjectType.BLOB:
                    obj.data  # noqa: B018 - reading the content checks it
        except KeyError:
            return f"object {oid} is missing"
        except (pygit2.GitError, ValueError, OSError) as e:
            return f"object {oid} is unreadable ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
        return None

    def last_good_tip(self) -> Optional[str]:
        """The newest tip in the ref's reflog whose whole history is intact."""
        current = self.own_tip()
        try:
            entries = [str(e.oid_new) for e in self.repo.references[self.ref].log()]
        except (KeyError, pygit2.GitError, OSError):
            return None
        for oid in dict.fromkeys(entries):
            if oid != current and not set(oid) <= {"0"} and self.damage(oid) is None:
                return oid
        return None

    def recover(self, author: Optional[Author] = None, source: str = "doctor") -> "Recovery":
        """Move a damaged ref back to its last intact tip, re-adding every memory of the
        damaged tip that can still be read (one commit). Names what could not be saved."""
        tip = self.own_tip()
        damage = self.damage(tip)
        if tip is None or damage is None:
            raise GitmemError(f"nothing to recover: the history of {self.ref} is intact")
        good = self.last_good_tip()
        if good is None:
            raise StorageError(f"{self.ref} is damaged ({damage}) and its reflog has no intact earlier tip")
        readable, lost = _salvage(self.repo, tip)
        good_tree = self.repo[good].peel(pygit2.Tree)
        updates: Dict[str, Optional[bytes]] = {}
        for path, data in readable.items():
            if _blob_at(good_tree, path) == str(pygit2.hash(data)):
                continue
            try:
                self._parse_bytes(data, path)
            except InvalidMemory:
                lost.append(path)
                continue
            updates[path] = data
        new = good
        if updates:
            who = author or _default_author(self.repo)
            message = (f"recover: {len(updates)} memories kept from damaged tip {tip[:10]}\n\n{damage}\n\n"
                       f"Memory-Op: recover\nMemory-Source: {source}\nAuthor-Kind: {who.kind}\n")
            new = self.commit_tree(updates, message, who, base=good)
        self.move_ref(tip, new, f"gitmem doctor --recover: back to {good[:10]}")
        return Recovery(damaged=tip, good=good, tip=new, kept=tuple(sorted(updates)), lost=tuple(sorted(lost)))

    def _parse_bytes(self, data: bytes, path: str) -> Memory:
        memory = model.load_yaml(data)
        if model.memory_path(memory) != path:
            raise InvalidMemory(path, "stored under the wrong path")
        return memory


@dataclass(frozen=True)
class LockFile:
    """A ref lock file on disk: its age and the pids that have it open (Linux only)."""

    path: str
    age: float
    holders: Tuple[int, ...]

    @property
    def stale(self) -> bool:
        return not self.holders and self.age >= STALE_LOCK_SECONDS

    def describe(self) -> str:
        if self.holders:
            return f"lock file held open by pid {', '.join(map(str, self.holders))} ({self.age:.0f}s old)"
        if not self.stale:
            return f"lock file is {self.age:.0f}s old: a write may be in progress (stale after {STALE_LOCK_SECONDS:.0f}s)"
        return f"stale lock file ({self.age:.0f}s old, no process holds it): `gitmem doctor --fix` removes it"

    def to_dict(self) -> Dict[str, Any]:
        return {"path": self.path, "age": round(self.age, 1), "holders": list(self.holders), "stale": self.stale}


@dataclass(frozen=True)
class Recovery:
    """What :meth:`Store.recover` did: the damaged tip, the intact tip it went back to,
    the new tip, the memory paths re-added from the damaged tip and those lost."""

    damaged: str
    good: str
    tip: str
    kept: Tuple[str, ...]
    lost: Tuple[str, ...]

    def to_dict(self) -> Dict[str, Any]:
        return {"damaged": self.damaged, "good": self.good, "tip": self.tip,
                "kept": list(self.kept), "lost": list(self.lost)}


def _holders(path: str) -> Tuple[int, ...]:
    """Pids with ``path`` open, from /proc (empty where /proc is not available)."""
    pids = []
    target = os.path.realpath(path)
    try:
        procs = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return ()
    for pid in procs:
        fd_dir = f"/proc/{pid}/fd"
        try:
            for fd in os.listdir(fd_dir):
                if os.readlink(f"{fd_dir}/{fd}") == target:
                    pids.append(int(pid))
                    break
        except OSError:
            continue
    return tuple(pids)


def _salvage(repo: pygit2.Repository, tip: str) -> Tuple[Dict[str, bytes], List[str]]:
    """Every readable blob of ``tip``'s tree by path, and the paths that cannot be read."""
    readable: Dict[str, bytes] = {}
    lost: List[str] = []
    try:
        stack: List[Tuple[str, Any]] = [("", repo[tip].peel(pygit2.Tree).id)]
    except (KeyError, pygit2.GitError, ValueError):
        return readable, ["/"]
    while stack:
        prefix, oid = stack.pop()
        try:
            tree = repo[oid].peel(pygit2.Tree)
            entries = [(e.name, e.id, e.type_str) for e in tree]
        except (KeyError, pygit2.GitError, ValueError):
            lost.append(prefix or "/")
            continue
        for name, child, kind in entries:
            if kind == "tree":
                stack.append((prefix + name + "/", child))
                continue
            try:
                readable[prefix + name] = repo[child].data
            except (KeyError, pygit2.GitError, ValueError):
                lost.append(prefix + name)
    return readable, lost


# --- module helpers ----------------------------------------------------------


def _damaged(ref: str, oid: Optional[str], e: Exception) -> StorageError:
    detail = "missing" if isinstance(e, KeyError) else f"unreadable ({str(e).splitlines()[0] if str(e) else e!r})"
    return StorageError(f"{ref} is damaged: object {oid} is {detail}; run `gitmem doctor`")


class _Locked(GitmemError):
    def __init__(self, ref: str, text: str):
        m = re.search(r"'([^']+\.lock)'", text)
        self.lock_path = m.group(1) if m else ref + ".lock"
        super().__init__(text)


def _redacted(**values: Optional[str]) -> Tuple[Dict[str, Optional[str]], int]:
    from .redact import redact

    out: Dict[str, Optional[str]] = {}
    count = 0
    for key, value in values.items():
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidMemory(key, "not valid UTF-8") from None
            value, findings = redact(value)
            count += len(findings)
        out[key] = value
    return out, count


def _signature(author: Author) -> pygit2.Signature:
    return pygit2.Signature(author.name, author.email or "unknown@localhost")  # git needs an email


def _message(op: str, m: Memory, author: Author, source: str, redacted: int, note: Optional[str]) -> str:
    trailers = [
        f"Memory-Id: {m.id}", f"Memory-Type: {m.type}", f"Memory-Op: {op}",
        f"Memory-Source: {source}", f"Author-Kind: {author.kind}",
    ]
    if m.supersedes and op == "supersede":
        trailers.append(f"Supersedes: {m.supersedes}")
    if redacted:
        trailers.append(f"Redacted: {redacted}")
    body = f"\n\n{note.strip()}" if note else ""
    return f"{op} {m.type}: {m.summary}{body}\n\n" + "\n".join(trailers) + "\n"


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
        parents=tuple(str(p) for p in commit.parent_ids),
    )


def _subtrees(tree: pygit2.Object) -> Iterator[pygit2.Object]:
    return (entry for entry in tree.peel(pygit2.Tree) if entry.type_str == "tree")


def _blob_at(tree: pygit2.Tree, path: str) -> Optional[str]:
    try:
        return str(tree[path].id)
    except KeyError:
        return None


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
    for name, data in here.items():
        if data is None:
            if builder.get(name) is not None:
                builder.remove(name)
        else:
            builder.insert(name, repo.create_blob(data), pygit2.GIT_FILEMODE_BLOB)
    for name, sub in below.items():
        existing = base[name] if base is not None and name in base else None
        subtree = existing.peel(pygit2.Tree) if existing is not None and existing.type_str == "tree" else None
        oid = _write_tree(repo, subtree, sub)
        if len(repo[oid].peel(pygit2.Tree)) == 0:
            if builder.get(name) is not None:
                builder.remove(name)
        else:
            builder.insert(name, oid, pygit2.GIT_FILEMODE_TREE)
    return builder.write()


def _ensure_reflog(repo: pygit2.Repository, ref: str) -> None:
    """git writes reflogs for refs/memory/* only if the log file already exists."""
    path = os.path.join(common_dir(repo), "logs", *ref.split("/"))
    if not os.path.exists(path):
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "a").close()
        except OSError:
            pass  # the reflog is a recovery aid; the commit chain is the audit trail


class _BlobCache:
    """Parsed memories by blob id, and the blob ids of clean trees by tree id, kept
    across calls in this process and on disk.

    Keyed by content (blob and tree ids), so it can never be stale; it is a derived
    index, rebuilt on demand, never the source of truth. Rows are lists in field
    order (compact, quick to decode); only trees whose every blob parsed are listed.
    """

    VERSION = 2
    TREES = 8  # recent snapshots listed: a write makes a new tree, the old ones age out

    def __init__(self, path: Optional[str]):
        self.path = path
        self.items: Dict[str, Memory] = {}
        self.trees: Dict[str, List[str]] = {}
        self.dirty = 0
        self.loaded = False

    def _load(self) -> None:
        self.loaded = True
        if not self.path or not os.path.exists(self.path):
            return
        import gc
        import json

        collecting = gc.isenabled()
        gc.disable()  # ~100,000 new objects, no cycles: collections would only re-scan them (2x slower)
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
            if data.get("version") != self.VERSION:
                return
            for key, row in data["blobs"].items():
                self.items[key] = _memory_from_row(row)
            self.trees = {k: list(v) for k, v in data["trees"].items()}
        except (OSError, ValueError, KeyError, TypeError):
            self.items, self.trees = {}, {}
        finally:
            if collecting:
                gc.enable()

    def get(self, key: str) -> Optional[Memory]:
        if not self.loaded:
            self._load()
        return self.items.get(key)

    def put(self, key: str, memory: Memory) -> None:
        self.items[key] = memory
        self.dirty += 1

    def tree(self, key: Optional[str]) -> Optional[List[Memory]]:
        """The memories of a listed clean tree, or None (then walk the tree)."""
        if key is None:
            return None
        if not self.loaded:
            self._load()
        blobs = self.trees.get(key)
        if blobs is None:
            return None
        found = [self.items.get(b) for b in blobs]
        return None if any(m is None for m in found) else found  # type: ignore[return-value]

    def put_tree(self, key: str, blobs: List[str]) -> None:
        if key in self.trees:
            return
        self.trees[key] = blobs
        for old in list(self.trees)[:-self.TREES]:
            del self.trees[old]
        self.dirty += 1

    def flush(self) -> None:
        """Persist after a full load found new blobs or trees (cheap to skip: it is only a cache)."""
        if not self.dirty or not self.path:
            return
        import json

        tmp = f"{self.path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump({"version": self.VERSION, "blobs": {k: _memory_row(m) for k, m in self.items.items()},
                           "trees": self.trees}, f, separators=(",", ":"))
            os.replace(tmp, self.path)
            self.dirty = 0
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass


_FIELDS = tuple(f.name for f in dataclass_fields(Memory))
_AUTHOR_AT = _FIELDS.index("author")
_TUPLES_AT = tuple(_FIELDS.index(name) for name in ("tags", "paths", "commits"))


def _memory_row(m: Memory) -> List[Any]:
    row: List[Any] = [getattr(m, name) for name in _FIELDS]
    row[_AUTHOR_AT] = [m.author.name, m.author.email, m.author.kind]
    return row


def _memory_from_row(row: List[Any]) -> Memory:
    """Rebuild a memory the cache stored after validating it (skips re-validation)."""
    if len(row) != len(_FIELDS):
        raise ValueError("cache row of another shape")
    values = list(row)
    values[_AUTHOR_AT] = Author(*values[_AUTHOR_AT])
    for i in _TUPLES_AT:
        values[i] = tuple(values[i])
    return Memory(*values)


_CACHES: Dict[str, _BlobCache] = {}


def _blob_cache_for(repo: pygit2.Repository) -> _BlobCache:
    root = common_dir(repo)
    if root not in _CACHES:
        _CACHES[root] = _BlobCache(os.path.join(root, "gitmem", "cache", "blobs.json"))
    return _CACHES[root]
