"""Doctor and recovery: check a memory ref's whole history, and move a damaged ref
back to its last intact tip without losing the memories that can still be read.

Reports, never raises: every finding is a :class:`Problem` for the caller to print.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import pygit2

from .errors import GitmemError, InvalidMemory, StorageError
from . import model
from .model import Author, Memory
from .refs import lock_file
from .repo import (REMOTE_PREFIX, below_parents, blob_at, current_branch, default_author, doctor_command,
                   entries_by_name, objects_read_once, partial_clone, ref_target, unfetched)
from .model import CONFLICTS_DIR, Problem, parse_memory
from .store import Store
from .text import plural


_HEX = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


@dataclass(frozen=True)
class Recovery:
    """What :func:`recover` did: the ref it moved, the damaged tip, the intact tip it went back to,
    the new tip, the memory paths re-added from the damaged tip and those lost."""

    ref: str
    damaged: str
    good: str
    tip: str
    kept: Tuple[str, ...]
    lost: Tuple[str, ...]

    def to_dict(self) -> Dict[str, Any]:
        return {"ref": self.ref, "damaged": self.damaged, "good": self.good, "tip": self.tip,
                "kept": list(self.kept), "lost": list(self.lost)}


def checked(store: Store) -> Store:
    """The store whose memory ref doctor checks and repairs: ``store``'s, or, on a branch without memory of its
    own, the parent's it reads (every read there names that ref's damage: see :meth:`Store.read_ref`)."""
    reads = store.read_from()[0]
    return store if reads in (None, store.branch) else Store(store.repo, reads)


def doctor(store: Store, full: bool = False) -> List[Problem]:
    """Validate the ref, the commit chain and every blob of ``store``'s branch (of the parent's whose memory
    it reads, when it has none of its own).

    A damaged history (a missing or corrupt object) comes with the last
    intact tip from the reflog, which :func:`recover` moves the ref back to.

    Starts from the last commit a doctor found sound on this ref (kept in the derived index)
    and checks only what came after it; ``full`` reads the whole history again (a disk can
    rot what was once sound)."""
    problems: List[Problem] = []
    lock = lock_file(store.repo, store.ref)
    if lock is not None:
        problems.append(Problem("warning", lock.path, lock.describe()))
    parent = checked(store)
    if parent is not store:
        return problems + [Problem("warning", store.ref, f"no memory ref on this branch: it reads {parent.branch}'s "
                                   f"memory, {parent.ref}, checked below")] + doctor(parent, full)
    tip = store.own_tip()
    if tip is None:
        return problems + [Problem("warning", store.ref, "no memory ref on this branch (no memory yet)")]
    index = store.warm.index
    sound = None if full else index.verified(store.ref)
    if sound is not None and not (_HEX.fullmatch(sound) and sound in store.repo):
        sound = None  # a hint naming nothing here (pruned, or a damaged index row): check everything
    known = [sound] if sound else []
    found = damage(store.repo, tip, known)
    fetch = _unfetched(store, found)
    if fetch:  # nothing is damaged, and a recovery would drop the memory it holds
        problems.append(Problem("error", store.ref, f"{fetch}, then run doctor again"))
        return problems
    if found:
        good = last_good_tip(store)
        command = doctor_command(store.ref, checked_out=current_branch(store.repo)[0])
        offer = (f"; last intact tip {good[1]} is {good[0][:10]}: run `{command} --recover` to move "
                 "the ref back to it (intact later memories are kept)" if good else
                 "; no intact earlier tip in the reflog or a fetched copy")
        problems.append(Problem("error", store.ref, f"history is damaged: {found}{offer}"))
        return problems
    dropped = store.dropped()
    if dropped:
        problems.append(Problem("warning", store.ref, dropped))
    from .merge import conflicts_and_problems, shallow_cut, shallow_notice

    cut = shallow_cut(store.repo, [tip], None, memory_shaped=True)
    if cut:  # sound as far as it goes, but a diff or merge refuses it
        problems.append(Problem("warning", store.ref, shallow_notice(cut)))
    if tip == sound:
        return problems
    from .trust import history_problem, tip_tree_problem

    shape = history_problem(store.repo, tip, known)
    if shape and tip_tree_problem(store.repo, tip):
        problems.append(Problem("error", store.ref, f"not gitmem's layout: {shape} (the trust gate refuses "
                                "this from a remote; see docs/remotes.md)"))
    elif shape:  # removed since (doctor --drop-invalid); history keeps what was committed
        problems.append(Problem("warning", store.ref, f"history holds what is not gitmem's layout, no longer "
                                f"at the tip: {shape}"))
    pending, refused = conflicts_and_problems(store, tip)
    found_here = _memory_problems(store, tip, sound, {c.id for c in pending})
    found_here.extend(Problem("error", path, f"conflict file refused: {why}") for path, why in refused)
    problems.extend(found_here)
    if not shape and not found_here:
        index.put_verified(store.ref, tip)
    return problems


def _memory_problems(store: Store, tip: str, sound: Optional[str], in_conflict: Set[str]) -> List[Problem]:
    """Blobs at ``tip`` that are not valid memories, ids stored twice (under two types), and replacements that
    say they supersede a memory whose successor is another (:func:`_rival_problems`).

    After a sound commit, only what changed since is looked at: the per-tree summaries count
    invalid blobs (read in full only when there are some), a duplicate needs a new blob, and a
    rival is among the memories a changed one supersedes or is superseded by, or those a settled conflict
    named (the resolve may have kept the values the memory held: only the conflict file changed)."""
    from .records import rivals

    if sound is None:
        loaded = store.memories(tip)
        return list(store.problems) + _view_problems(store, tip, loaded) + _rival_problems(rivals(loaded), in_conflict)
    snap = store.snapshot(tip)
    if snap.tree is None:
        return []
    if store.summary(tip)["counts"].get("invalid"):
        loaded = store.memories(tip)
        return list(store.problems) + _rival_problems(rivals(loaded), in_conflict)
    problems = []
    involved: Set[str] = set()  # ids of the memories a rival could be among
    before = store.repo[sound].peel(pygit2.Tree)
    for delta in before.diff_to_tree(snap.tree).deltas:
        path = delta.new_file.path
        if path.startswith(f"{CONFLICTS_DIR}/") and delta.status != pygit2.enums.DeltaStatus.ADDED:
            involved.update(_named_by_conflict(store, delta.old_file.id))
        if delta.status == pygit2.enums.DeltaStatus.DELETED or not path.endswith(".yaml"):
            continue
        memory_id = path.rsplit("/", 1)[1][:-5]
        homes = [model.memory_path(t, memory_id) for t in model.TYPES]
        if sum(1 for home in homes if snap.has(home)) > 1:
            problems.append(Problem("error", path, f"duplicate id {memory_id}"))
        if path.split("/", 1)[0] in model.TYPES:  # every blob parses: the summary counts none invalid
            m = store.parse_blob(delta.new_file.id, path)
            if m.supersedes or m.superseded_by:
                involved.update(i for i in (m.id, m.supersedes, m.superseded_by) if i)
    from .merge import rivals_among

    return problems + _rival_problems(rivals_among(store, sorted(involved), tip), in_conflict)


def _named_by_conflict(store: Store, blob: Any) -> Tuple[str, ...]:
    """The memory a conflict file (as it was before it changed) is about, and the successors its two sides
    named: the memories a resolve may have left a rival among."""
    from .trust import read_conflict

    c = read_conflict(store.repo, blob)
    return () if c is None else c.claimed()


def _rival_problems(pairs: Sequence[Tuple[Memory, Memory]], in_conflict: Set[str]) -> List[Problem]:
    """A warning for each replacement still active beside the successor its memory names (two supersedes of one
    memory, merged, then resolved): not damage, but two answers to one question that a person settles. While the
    memory's conflict is pending, that conflict names both and `gitmem resolve` comes first."""
    from .records import rival_note

    return [Problem("warning", model.memory_path(r), rival_note(r, old)) for r, old in pairs if old.id not in in_conflict]


def _view_problems(store: Store, tip: str, loaded: Dict[str, Memory]) -> List[Problem]:
    """The derived index's view of the ref against the memories just read in full: a view that
    disagrees (a bug, or a file edited by hand) is dropped, to be built again by the next search."""
    from .postings import drop_view, members

    listed = members(store, tip)
    if listed is None or {i: (kind, active) for i, (kind, active, _) in listed.items()} == \
            {i: (m.type, m.status == "active") for i, m in loaded.items()}:
        return []
    drop_view(store)
    return [Problem("warning", ".git/gitmem/index.sqlite", f"the search view of {store.ref} disagreed with its "
                    "tree (a derived cache): dropped, the next search builds it again")]


def damage(repo: pygit2.Repository, tip: Optional[str], known: Sequence[str] = ()) -> Optional[str]:
    """The first missing or corrupt object reachable from ``tip``, or None.

    Reads every commit, tree and blob once (shared subtrees are skipped), so
    a corrupt blob in an old commit is found too, not only the tip's. The history of the
    commits ``known`` to be sound is skipped, and so is each subtree a parent already has."""
    if tip is None:
        return None
    seen: set = set()
    oid: Any = tip
    try:
        kind = repo[tip].type_str
        if kind != "commit":  # a walk peels a tag, but a write cannot build on one: recover moves the ref back
            return f"tip {tip[:10]} is a {kind}, not a commit"
        with objects_read_once():  # each object is read once
            walker = repo.walk(pygit2.Oid(hex=tip), pygit2.enums.SortMode.TOPOLOGICAL)
            for k in known:
                walker.hide(pygit2.Oid(hex=k))
            stack: List[Any] = []
            for commit in walker:
                oid = commit.id
                parents = []
                for parent_id in commit.parent_ids:
                    oid = parent_id
                    parents.append(repo[parent_id].peel(pygit2.Tree))
                stack.append((commit.tree_id, parents))
                while stack:
                    oid, twins = stack.pop()
                    if oid in seen or any(t.id == oid for t in twins):
                        continue
                    seen.add(oid)
                    obj = repo[oid]
                    if isinstance(obj, pygit2.Tree):
                        held = entries_by_name(twins)
                        for entry in obj:  # a submodule entry names a commit of another repository
                            if entry.filemode == pygit2.GIT_FILEMODE_COMMIT:
                                continue
                            below = below_parents(held, entry)
                            if below is not None:  # else a parent holds this very object: read with it
                                stack.append((entry.id, below))
                    elif isinstance(obj, pygit2.Blob):
                        obj.data  # noqa: B018 - reading the content checks it
    except KeyError:
        return f"object {oid} is missing"
    except (pygit2.GitError, ValueError, OSError) as e:
        return f"object {oid} is unreadable ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
    return None


def _unfetched(store: Store, found: Optional[str]) -> Optional[str]:
    """When :func:`damage`'s ``found`` is an object a partial clone has not fetched yet, not damage: that, and the
    git command that fetches it."""
    missing = " is missing"
    if found is None or not found.endswith(missing) or not partial_clone(store.repo):
        return None
    return unfetched(store.ref, found[:-len(missing)])


def last_good_tip(store: Store) -> Optional[Tuple[str, str]]:
    """The newest tip in the ref's reflog whose whole history is intact, else a fetched copy of the branch's
    memory below the current tip whose history is (`git gc` expires reflog entries, and the memory this clone
    pushed and fetched back is an earlier tip of its own), with where it was found."""
    repo, current = store.repo, store.own_tip()
    try:
        entries = [str(e.oid_new) for e in repo.references[store.ref].log()]
    except (KeyError, pygit2.GitError, OSError):
        entries = []
    for oid in dict.fromkeys(entries):
        if oid != current and not set(oid) <= {"0"} and damage(repo, oid) is None:
            return oid, "in the reflog"
    for remote in repo.remotes.names():
        ref = f"{REMOTE_PREFIX}{remote}/{store.branch}"
        copy = ref_target(repo, ref)
        try:
            below = bool(copy and current and copy != current and repo.descendant_of(current, copy))
        except (KeyError, pygit2.GitError, ValueError):
            continue  # a history too damaged to tell: not taken for an earlier tip
        if below and copy and damage(repo, copy) is None:
            return copy, f"in {ref}"
    return None


def recover(store: Store, author: Optional[Author] = None, source: str = "doctor") -> Recovery:
    """Move a damaged ref back to its last intact tip, re-adding every memory of the
    damaged tip that can still be read (one commit). Names what could not be saved. The ref is the one
    :func:`doctor` checks (:func:`checked`): a branch without memory of its own recovers the parent's it reads."""
    store = checked(store)
    tip = store.own_tip()
    if tip is None:
        raise GitmemError(f"nothing to recover: {store.ref} holds no memory yet")
    found = damage(store.repo, tip)
    if found is None:
        dropped = store.dropped()
        raise GitmemError(f"nothing to recover: the history of {store.ref} is intact"
                          + (f", but {dropped}" if dropped else ""))
    fetch = _unfetched(store, found)
    if fetch:
        raise GitmemError(f"nothing to recover in {store.ref}: {fetch}")
    found_good = last_good_tip(store)
    if found_good is None:
        raise StorageError(f"{store.ref} is damaged ({found}) and no intact earlier tip is in its reflog or a "
                           "fetched copy")
    good = found_good[0]
    readable, lost = _salvage(store.repo, tip)
    updates: Dict[str, Optional[bytes]] = {}
    for path, data in readable.items():
        if blob_at(store.repo, good, path) == str(pygit2.hash(data)):
            continue
        try:
            parse_memory(data, path)
        except InvalidMemory:
            lost.append(path)
            continue
        updates[path] = data
    new = good
    if updates:
        who = author or default_author(store.repo)
        message = (f"recover: {plural(len(updates), 'memory')} kept from damaged tip {tip[:10]}\n\n{found}\n\n"
                   f"Memory-Op: recover\nMemory-Source: {source}\nAuthor-Kind: {who.kind}\n")
        new = store.commit_tree(updates, message, who, base=good)
    store.move_ref(tip, new, f"gitmem doctor --recover: back to {good[:10]}")
    return Recovery(ref=store.ref, damaged=tip, good=good, tip=new, kept=tuple(sorted(updates)), lost=tuple(sorted(lost)))


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
            entries = [(e.name or "", e.id, e.type_str) for e in tree]
        except (KeyError, pygit2.GitError, ValueError):
            lost.append(prefix or "/")
            continue
        for name, child, kind in entries:
            if kind == "commit":
                lost.append(prefix + name)  # a submodule entry: not memory, nothing to read
                continue
            if kind == "tree":
                stack.append((prefix + name + "/", child))
                continue
            try:
                readable[prefix + name] = repo[child].peel(pygit2.Blob).data
            except (KeyError, pygit2.GitError, ValueError):
                lost.append(prefix + name)
    return readable, lost


def drop_invalid(store: Store, author: Optional[Author] = None, source: str = "doctor") -> List[str]:
    """Remove, in one commit, every blob on the memory ref :func:`doctor` checks (:func:`checked`: a branch
    without memory of its own, the parent's it reads) that is not a valid memory (a hand edit or a bad merge
    planted it) and anything outside gitmem's folders, and return their paths. Valid memories are never
    touched, and what is removed stays in history (``git show <commit>^:<path>``)."""
    author = author or default_author(store.repo)
    store = checked(store)

    def attempt() -> List[str]:
        tip = store.own_tip()
        if tip is None:
            return []
        store.memories(tip)
        bad = sorted(p.where for p in store.problems if blob_at(store.repo, tip, p.where) is not None)
        # What is no memory type's folder nor conflicts/ (a README added by hand) is read by nothing.
        bad += sorted(e.name or "" for e in store.repo[tip].peel(pygit2.Tree)
                      if e.name not in model.TYPES and e.name != CONFLICTS_DIR)
        if not bad:
            return []
        message = (f"drop {plural(len(bad), 'blob')} that are not valid memories\n\n" + "\n".join(bad) +
                   f"\n\nMemory-Op: drop-invalid\nMemory-Source: {source}\nAuthor-Kind: {author.kind}\n")
        commit = store.commit_tree({path: None for path in bad}, message, author, base=tip)
        store.move_ref(tip, commit, f"gitmem doctor: drop {plural(len(bad), 'invalid blob')}")
        return bad

    return store.retrying(attempt)

