"""Merging memory refs: the git edge that turns the record merge (:mod:`gitmem.records`) into
fast-forwards and real merge commits on ``refs/memory/<branch>``, stores its conflicts at
``conflicts/<id>.yaml`` in the memory tree (so they travel with pushes), lists them and
resolves them in one commit.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import pygit2

from . import model
from .errors import Changed, GitmemError, InvalidMemory, NotFound, PendingConflict, ShallowHistory, Untrusted
from .model import Author, Memory
from .records import (CONFLICT_FIELDS, CONFLICTS_DIR, Conflict, conflict_path, dump_conflict, from_future,
                      merge_records, rivals)
from .trust import history_problem, load_conflict_data, read_conflict, secret_blobs
from .text import plural

if TYPE_CHECKING:
    from .store import Snapshot, Store, Write

#: A teammate's clock may run a little ahead; a timestamp further ahead than this is not believed.
CLOCK_SKEW_SECONDS = 600


@dataclass(frozen=True)
class MergeResult:
    """``kind`` is "up-to-date", "fast-forward" or "merge"; ``commit`` the new tip; ``kept`` the
    memories the incoming history deleted or made no valid memory, which the merge kept (gitmem never
    deletes memory); ``redacted`` how many secrets the incoming memory held, redacted here (its history still has them)."""

    kind: str
    commit: str
    added: List[str] = field(default_factory=list)
    changed: List[str] = field(default_factory=list)
    conflicts: List[Conflict] = field(default_factory=list)
    kept: List[str] = field(default_factory=list)
    redacted: int = 0

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "commit": self.commit, "added": list(self.added),
                "changed": list(self.changed), "conflicts": [c.to_dict() for c in self.conflicts],
                "kept": list(self.kept), "redacted": self.redacted}


def blobs_by_id(store: Store, commit: Optional[str]) -> Dict[str, Tuple[str, str]]:
    """id -> (path, blob id) for every memory blob at ``commit``."""
    return _by_id(store.snapshot(commit).entries()) if commit else {}


def _by_id(entries: Iterable[Tuple[str, str]]) -> Dict[str, Tuple[str, str]]:
    """(path, blob id) of memory blobs, by the id their file names (``<type>/<x>/<y>/<id>.yaml``)."""
    return {p.rsplit("/", 1)[1][:-5]: (p, b) for p, b in entries}


def changed_blobs(store: Store, old: Optional[str], new: Optional[str]
                  ) -> Tuple[Dict[str, Tuple[str, str]], Dict[str, Tuple[str, str]]]:
    """:func:`blobs_by_id` of ``old`` and of ``new``, each kept to the memories whose blob or path differs
    between them, by the tree diff (:meth:`gitmem.warm.Warm.diff`): subtrees both share are not read, so
    this costs what changed, not what is stored."""
    from .repo import damaged

    if not new:
        return blobs_by_id(store, old), {}
    old_tree = store.tree_of(old) if old else None
    try:
        added, removed = store.warm.diff(store.repository, old_tree, store.tree_of(new))
    except (KeyError, ValueError, pygit2.GitError) as e:
        raise damaged(store.ref, new, e) from None
    return _by_id(removed), _by_id(added)


def _fast_forward_changes(store: Store, ours: str, theirs: str
                          ) -> Tuple[List[str], List[str], Dict[str, Tuple[str, str]]]:
    """(added, changed) memory ids from ours to theirs, and the removed ones' (path, blob) in ours, by
    :func:`changed_blobs`: shared subtrees are not read, so a fast-forward by one memory costs a few trees
    (libgit2's tree diff read every tree of both: 0.2 s a pull at 100,000 memories)."""
    removed, added = changed_blobs(store, ours, theirs)
    changed = added.keys() & removed.keys()  # a changed blob, or a memory that moved (its type changed)
    return sorted(added.keys() - changed), sorted(changed), {i: e for i, e in removed.items() if i not in changed}


def believed_until(now: Optional[float] = None) -> str:
    """The latest timestamp a merge believes: now plus :data:`CLOCK_SKEW_SECONDS`."""
    import time
    from datetime import datetime, timezone

    moment = (time.time() if now is None else now) + CLOCK_SKEW_SECONDS
    return datetime.fromtimestamp(moment, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _untaken_changes(store: Store, ours: str, theirs: str, changed: Sequence[str], not_after: str) -> List[str]:
    """Ids among ``changed`` whose incoming version a fast-forward must not take as it is: stamped after
    ``not_after``, or no valid memory where ours is one (that takes the memory out of use as a deletion does)."""
    snap, mine = store.snapshot(theirs), store.snapshot(ours)
    out = []
    for memory_id in changed:
        try:
            if from_future(snap.find(memory_id)[1], not_after):
                out.append(memory_id)
        except InvalidMemory:
            try:
                mine.find(memory_id)
                out.append(memory_id)
            except GitmemError:
                continue
        except GitmemError:
            continue
    return out


def conflict_blobs(store: Store, commit: Optional[str]) -> Dict[str, str]:
    """conflicts/<id>.yaml path -> blob id at ``commit``."""
    if not commit:
        return {}
    found = store.snapshot(commit).listings([CONFLICTS_DIR]).get(CONFLICTS_DIR, [])
    return {f"{CONFLICTS_DIR}/{name}": oid for name, kind, oid in found if name.endswith(".yaml") and kind == "blob"}


def load_ids(store: Store, entries: Dict[str, Tuple[str, str]], ids: Sequence[str]) -> Dict[str, Memory]:
    """The valid memories among ``ids``, read from ``entries`` (:func:`blobs_by_id`)."""
    out: Dict[str, Memory] = {}
    for i in ids:
        if i in entries:
            path, blob = entries[i]
            try:
                out[i] = store.parse_blob(blob, path)
            except InvalidMemory:
                continue  # an invalid blob on one side: the other side's version stands
    return out


def merge_into(store: Store, theirs: str, *, author: Optional[Author] = None, source: str = "merge",
               message: Optional[str] = None, gated: bool = False) -> MergeResult:
    """Merge the memory commit ``theirs`` into ``store.ref``.

    Fast-forwards when ``store.ref`` (or the memory it inherits) is an ancestor
    of ``theirs``; otherwise writes a merge commit with parents [our tip, theirs].
    Merging something already merged returns "up-to-date" and writes nothing.
    Runs under ``store.retrying`` so a concurrent write is re-merged, not lost.

    The trust gate's layout check runs on the commits ``theirs`` brings that no
    local memory ref holds (none, for a local branch; a fetched copy that plain
    ``git fetch`` wrote, for instance), unless the caller ran it (``gated``):
    a history that is not gitmem's layout raises :class:`Untrusted`.
    """
    from .repo import ASIDE_PREFIX, REF_PREFIX, damaged, default_author

    repo = store.repo
    try:
        theirs = str(repo.revparse_single(theirs).peel(pygit2.Commit).id)
    except (KeyError, ValueError, pygit2.GitError):
        raise NotFound(theirs, store.ref) from None
    if not gated:
        local = [str(r.target) for r in repo.references.iterator() if r.name.startswith((REF_PREFIX, ASIDE_PREFIX))
                 and isinstance(r.target, pygit2.Oid)]
        why = history_problem(repo, theirs, local)
        if why:
            raise Untrusted(f"refused to merge {theirs[:10]} into {store.ref}: {why}")
    author = author or default_author(repo)
    not_after = believed_until()

    def attempt() -> MergeResult:
        expected = store.own_tip()
        ours = expected or store.read_from()[1]
        if ours == theirs:
            return MergeResult("up-to-date", ours)
        if ours is None:
            tip, redacted = redacted_onto(store, theirs, None, author, source)
            store.move_ref(None, tip, f"gitmem merge: fast-forward to {theirs[:12]}")
            return MergeResult("fast-forward", tip, added=sorted(blobs_by_id(store, theirs)), redacted=redacted)
        try:
            base_oid = repo.merge_base(ours, theirs)
        except pygit2.GitError as e:  # named for the ref merged into, as a read names it; merge_branches asks whose
            raise damaged(store.ref, ours, e) from None
        base = str(base_oid) if base_oid else None
        if base == theirs:
            return MergeResult("up-to-date", ours)
        if base == ours:
            added, changed, gone = _fast_forward_changes(store, ours, theirs)
            # a blob that is no valid memory may go (doctor --drop-invalid): only memory is kept
            removed = [i for i, entry in gone.items() if _is_memory(store, entry)]
            if not removed and not _untaken_changes(store, ours, theirs, changed, not_after):
                tip, redacted = redacted_onto(store, theirs, ours, author, source)
                store.move_ref(expected, tip, f"gitmem merge: fast-forward to {theirs[:12]}")
                return MergeResult("fast-forward", tip, added, changed, redacted=redacted)
            # A descendant that deletes memory is never taken as it is: gitmem itself never
            # deletes (retract keeps), so the deletion is someone's hand edit. Nor one that
            # changes a known memory with a timestamp from the future, or into no valid memory.
            # Merge it instead: the record merge keeps every memory either side has, and ours
            # over a future stamp or an unreadable version.
        elif cut := shallow_cut(repo, [ours, theirs], base):
            raise ShallowHistory(store.ref, theirs, cut)
        if base is not None:
            base = _virtual_base(store, ours, theirs, base, author, source, not_after)
        r = _merge_commit(store, base, ours, theirs, author, source, message, not_after)
        store.move_ref(expected, r.commit, f"gitmem merge: {theirs[:12]}")
        return r

    return store.retrying(attempt)


def shallow_cut(repo: pygit2.Repository, tips: Sequence[str], base: Optional[str],
                memory_shaped: bool = False) -> Optional[str]:
    """A commit in the history of ``tips`` since ``base`` that a shallow fetch left without its parents, or None.
    Past such a commit the merge base libgit2 finds (or not) may be wrong: a commit both sides share, hidden
    there, is not seen. Grafts below ``base`` cannot hide a better one, so a merge measured against it stands.

    ``memory_shaped``: look only at cut commits whose tree has memory's shape (:func:`_memory_shaped`), and walk
    nothing when there are none: a status in a `git clone --depth 1` of the code (CI's checkout) would walk the
    whole memory history to find that the code's cut commits are not in it."""
    from .repo import common_dir

    if not repo.is_shallow:
        return None
    try:
        with open(os.path.join(common_dir(repo), "shallow"), encoding="ascii") as f:
            cut = set(f.read().split())
    except OSError:
        return None
    if memory_shaped:
        cut = {c for c in cut if _memory_shaped(repo, c)}
        if not cut:
            return None
    walker = repo.walk(tips[0])
    for tip in tips[1:]:
        walker.push(tip)
    if base:
        walker.hide(base)
    return next((str(c.id) for c in walker if str(c.id) in cut), None)


def shallow_notice(cut: str) -> str:
    """What status and doctor say of memory history a shallow fetch cut at ``cut`` (:func:`shallow_cut`)."""
    return (f"memory history cut at {cut[:10]} by a shallow fetch (`git fetch --depth`): `gitmem fetch` brings the "
            "rest from a remote that holds it (diff and merge need it)")


def _memory_shaped(repo: pygit2.Repository, commit: str) -> bool:
    """Whether ``commit``'s tree could be memory's: every top-level entry a folder named for a memory type or for
    stored conflicts (an empty tree too). A code commit's tree has files or other folders at its top."""
    from .model import CONFLICTS_DIR, TYPES

    try:
        tree = repo[commit].peel(pygit2.Tree)
    except (KeyError, ValueError, pygit2.GitError):
        return True  # unreadable: it may be memory's, so it is looked at
    return all(e.name in TYPES or e.name == CONFLICTS_DIR for e in tree)


def _merge_bases(repo: pygit2.Repository, ours: str, theirs: str, first: str) -> List[str]:
    """Every best common ancestor of ``ours`` and ``theirs``, ``first`` (libgit2's one) first. Any other is
    reachable from both tips and not from ``first``, so only the commits since ``first`` are walked."""
    def since(tip: str) -> set:
        walker = repo.walk(tip)
        walker.hide(first)
        return {str(c.id) for c in walker}

    common = since(ours) & since(theirs)
    below = {str(p) for c in common for p in repo[c].parent_ids}  # type: ignore[attr-defined]
    return [first, *sorted(common - below)]


def _virtual_base(store: Store, ours: str, theirs: str, first: str, author: Author, source: str,
                  not_after: str) -> str:
    """The merge base, or after criss-cross merges (several best common ancestors) the bases merged
    together into a commit no ref holds, as git's recursive strategy does: measured against one base alone,
    a change made after the criss-cross that sets a memory back to that base's value looks like no change
    and is lost."""
    bases = _merge_bases(store.repo, ours, theirs, first)
    virtual = bases[0]
    for other in bases[1:]:
        below = store.repo.merge_base(virtual, other)
        base = _virtual_base(store, virtual, other, str(below), author, source, not_after) if below else None
        virtual = _merge_commit(store, base, virtual, other, author, source, "virtual merge base", not_after).commit
    return virtual


def _merge_commit(store: Store, base: Optional[str], ours: str, theirs: str, author: Author, source: str,
                  message: Optional[str], not_after: str) -> MergeResult:
    """The record merge of ``ours`` and ``theirs`` against ``base``, written as a commit with both as parents
    (no ref moved), and what it added, changed, kept and redacted."""
    repo = store.repo
    e_base, e_ours, e_theirs = blobs_by_id(store, base), blobs_by_id(store, ours), blobs_by_id(store, theirs)
    c_base, c_ours, c_theirs = (conflict_blobs(store, c) for c in (base, ours, theirs))
    # A conflict pending at the base that both sides resolved: each side's value is a choice, even one that
    # left the memory's blob as the base had it (a resolve within the second it was merged, taking the stand-in).
    both = (read_conflict(repo, blob) for path, blob in c_base.items() if path not in c_ours and path not in c_theirs)
    unsettled = {c.id: c.fields for c in both if c is not None}
    touched = sorted(i for i in set(e_ours) | set(e_theirs) if i in unsettled
                     or not (e_ours.get(i) == e_theirs.get(i) or e_theirs.get(i) == e_base.get(i)))
    # Every id one side deleted or added is touched, so what loads here says which are valid memories.
    m_base, m_ours, m_theirs = (load_ids(store, e, touched) for e in (e_base, e_ours, e_theirs))
    gone = [i for i in e_ours if i not in e_theirs and i in e_base]  # their side deleted it
    spoiled = [i for i in touched if i in e_theirs and i not in m_theirs]  # or made it no valid memory
    kept = sorted(i for i in gone + spoiled if i in m_ours)
    dropped = [e_ours[i][0] for i in gone if i not in m_ours]  # no memory here: its deletion stands
    result = merge_records(m_base, m_ours, m_theirs, not_after=not_after, unsettled=unsettled)
    updates: Dict[str, Optional[bytes]] = dict.fromkeys(dropped)
    for i, (path, blob) in e_theirs.items():  # one that is no valid memory comes as a fast-forward brings it
        if i not in e_ours and i not in e_base and i not in m_theirs:  # (doctor names it)
            updates[path] = _text_redacted(repo[blob].data)  # type: ignore[attr-defined]
    added, changed = [], []
    for i, m in result.merged.items():
        data = model.dump_yaml(m)
        path = model.memory_path(m)
        old = e_ours.get(i)
        if old is not None and old[0] != path:
            updates[old[0]] = None
        if old is None:
            added.append(i)
        elif str(pygit2.hash(data)) == old[1] and old[0] == path:
            continue
        else:
            changed.append(i)
        updates[path] = data
    def merged(memory_id: str) -> Optional[Memory]:
        return result.merged.get(memory_id) or load_ids(store, e_ours, [memory_id]).get(memory_id)

    updates.update(_merge_conflict_files(store, base, ours, theirs, result.conflicts, merged))
    text = _merge_message(message, store.branch, theirs, added, changed, result.conflicts, author, source, kept)
    commit = store.commit_tree(updates, text, author, base=ours, extra_parents=[theirs])
    # Every memory taken was written again, so redacted; the count says what arrived with secrets.
    arrived = [blob for i, (_, blob) in e_theirs.items() if blob not in (e_ours.get(i, ("", ""))[1],
                                                                      e_base.get(i, ("", ""))[1])]
    arrived += [blob for path, blob in c_theirs.items()  # and its conflict files
                if blob not in (c_ours.get(path), c_base.get(path))]
    redacted = sum(len(rules) for rules in secret_blobs(repo, arrived).values())
    return MergeResult("merge", commit, added, changed, list(result.conflicts), kept, redacted)


def arrival_notice(redacted: int) -> str:
    """What to tell whoever took memory that held secrets: redacted here, not in the history it came with."""
    return (f"redacted {plural(redacted, 'secret')} that arrived with this memory; the history it came with (and the "
            "remote) still holds them: rotate them") if redacted else ""


def _is_memory(store: Store, entry: Tuple[str, str]) -> bool:
    """Whether the blob at (path, blob id) is a valid memory (what a merge never lets the other side delete)."""
    try:
        store.parse_blob(entry[1], entry[0])
        return True
    except InvalidMemory:
        return False


def _text_redacted(data: bytes) -> bytes:
    """A blob that is no valid memory (a newer gitmem's, a hand edit), with any secret in its text redacted."""
    from .redact import redact

    text, found = redact(data.decode("utf-8", "replace"))
    return text.encode("utf-8") if found else data


def _written_again(store: Store, blob: str, path: str) -> bytes:
    """A blob from elsewhere that holds a secret, written again as gitmem writes it, so redacted: a memory
    (:func:`gitmem.model.dump_yaml`), a conflict file (:func:`gitmem.records.dump_conflict`), else its text."""
    data = store.repo[blob].peel(pygit2.Blob).data
    try:
        if path.startswith(f"{CONFLICTS_DIR}/"):
            return dump_conflict(Conflict.from_dict(load_conflict_data(data)))
        return model.dump_yaml(store.parse_blob(blob, path))
    except (InvalidMemory, Untrusted):
        return _text_redacted(data)


def redacted_onto(store: Store, theirs: str, ours: Optional[str], author: Optional[Author],
                  source: str) -> Tuple[str, int]:
    """``theirs``, or a commit on it that redacts the secrets in the blobs it brings that ``ours`` lacks, and
    how many secrets that commit redacted.

    Taking a descendant as it is (a fast-forward, a first pull) would make its blobs local memory
    unread: a secret someone pushed with plain git would then be listed, searched and sent to a model.
    Here each such blob is scanned (a clean one once: see :func:`gitmem.trust.secret_blobs`): a valid
    memory is written again as every write is (:func:`gitmem.model.dump_yaml` redacts), anything else has
    its text redacted. The blobs as they arrived stay in the history below."""
    from .repo import default_author

    repo = store.repo
    if ours is None:  # a first pull: every blob, its conflict files' too
        arrived = [*store.snapshot(theirs).entries(), *conflict_blobs(store, theirs).items()]
    else:  # what the tree diff brings: a fast-forward by one memory reads a few trees
        arrived = store.warm.arrived(store.repository, store.tree_of(ours), store.tree_of(theirs))
    paths: Dict[str, List[str]] = {}  # blob -> every path it arrived at (a stray copy shares a memory's blob)
    for path, blob in arrived:
        paths.setdefault(blob, []).append(path)
    found = secret_blobs(repo, list(paths))
    if not found:
        return theirs, 0
    updates = {path: _written_again(store, blob, path) for blob in found for path in paths[blob]}
    author = author or default_author(repo)
    count = sum(len(rules) for rules in found.values())
    text = (f"redact {plural(count, 'secret')} that arrived in {theirs[:12]}\n\n"
            f"{plural(len(found), 'memory blob')} held them; they are redacted here, as every write is.\n\n"
            f"Memory-Op: redact\nMemory-Source: {source}\nAuthor-Kind: {author.kind}\nRedacted: {count}\n")
    return store.commit_tree(updates, text, author, base=theirs), count


def _merge_conflict_files(store: Store, base, ours, theirs, new: Sequence[Conflict],
                          merged: Callable[[str], Optional[Memory]]) -> Dict[str, Optional[bytes]]:
    """Three-way merge of conflicts/ by the conflict each file holds (:meth:`~gitmem.records.Conflict.sides`,
    so one found either way round is no change): a resolution (deletion) on one side wins over no change
    on the other; a conflict this merge found wins over both. ``merged``: the memory of an id as the merge
    leaves it, which a conflict kept must still show (:func:`_refuse_stale`)."""
    b, o, t = (conflict_blobs(store, c) for c in (base, ours, theirs))
    renewed = {conflict_path(c.id) for c in new}
    updates: Dict[str, Optional[bytes]] = {}
    for path in set(o) | set(t):
        ov, tv, bv = (_conflict_held(store, side.get(path)) for side in (o, t, b))
        if ov == tv or tv == bv:
            chosen = o.get(path)
        elif ov == bv or ov is None:
            chosen = t.get(path)
        elif tv is None:
            chosen = o.get(path)
        else:
            chosen = max(o[path], t[path])
        if chosen is not None and path not in renewed:
            _refuse_stale(store, chosen, merged, mine=chosen == o.get(path))  # ours holds it, or the one merged in
        if chosen == o.get(path):
            continue
        updates[path] = None if chosen is None else _written_again(store, chosen, path) \
            if secret_blobs(store.repo, [chosen]) else store.repo[chosen].peel(pygit2.Blob).data
    for c in new:
        path = conflict_path(c.id)
        for pending in {side[path] for side in (o, t) if path in side}:
            _refuse_over_pending(store, c, pending, mine=o.get(path) == pending)
        updates[path] = dump_conflict(c)
    return updates


def _conflict_held(store: Store, blob: Optional[str]) -> Any:
    """What the conflict file ``blob`` holds, to compare: its conflict's sides, or the blob itself where
    gitmem cannot read a conflict (doctor names it), or None for no file."""
    held = read_conflict(store.repo, blob) if blob else None
    return held.sides() if held else blob


def _refuse_stale(store: Store, blob: str, merged: Callable[[str], Optional[Memory]], mine: bool) -> None:
    """A merge that keeps the unresolved conflict in ``blob`` (``mine``: ours holds it, else the memory merged
    in) while the other side changed a field it clashed on is refused: the conflict's stand-in was the merge
    base's value, so the record merge took the change as the only one, and the conflict would go on offering
    two versions neither of which the memory holds (`resolve --ours` would undo the change unseen)."""
    held = read_conflict(store.repo, blob)
    m = merged(held.id) if held else None
    changed = held.changed_in(m) if held and m else ()
    if not held or not changed:
        return
    f, i = changed[0], held.id
    a, b, now = (str(getattr(v, f))[:30] for v in (held.ours, held.theirs, m))
    raise PendingConflict(i, _pending_refusal(i, mine, f"{f}: {a!r} against {b!r}",
                                              f"this merge changes its {f} again ({now!r})"))


def _pending_refusal(memory_id: str, mine: bool, versions: str, why: str) -> str:
    """Why a merge waits for the unresolved conflict on ``memory_id``, and where to settle it: here (``mine``),
    else on the branch merged in, since `gitmem resolve` here finds no such conflict."""
    i = memory_id
    where = (f"settle it first with `gitmem resolve {i} --ours|--theirs|--edit`" if mine else
             f"settle it where it is pending first (`gitmem --branch BRANCH resolve {i} --ours|--theirs|--edit`)")
    return (f"memory {i} has an unresolved conflict{'' if mine else ' in the memory merged in'} ({versions}) "
            f"and {why}: {where}, then merge again")


def _refuse_over_pending(store: Store, c: Conflict, pending: str, mine: bool) -> None:
    """A merge whose new conflict ``c`` would take the place of the unresolved one a side holds (blob ``pending``;
    ``mine``: ours holds it, else the memory merged in) is refused, unless ``c`` shows both of its versions: a
    conflict file holds two, so a third version's clash would drop one from everything a person is shown
    (nothing merged is silently dropped)."""
    held = read_conflict(store.repo, pending)
    if held is None:
        return  # no conflict gitmem can read (doctor names it): nothing of it is shown to lose
    if not held.sides() <= c.sides():
        raise PendingConflict(c.id, _pending_refusal(c.id, mine, f"{held.ours.text[:30]!r} against "
                                                     f"{held.theirs.text[:30]!r}", "this merge clashes on it again"))


def _merge_message(message, branch, theirs, added, changed, conflicts, author, source, kept=()) -> str:
    subject = message or f"merge {theirs[:12]} into {branch}"
    summary = f"{len(added)} added, {len(changed)} changed, {plural(len(conflicts), 'conflict')}"
    if kept:
        summary += f"; kept {plural(len(kept), 'memory')} the merged history deleted"
    trailers = [f"Memory-Id: {i}" for i in (list(added) + list(changed))[:200]]
    trailers += ["Memory-Op: merge", f"Memory-Source: {source}", f"Author-Kind: {author.kind}",
                 f"Merged-From: {theirs}"]
    trailers += [f"Conflict: {c.id}" for c in conflicts]
    return f"{subject}\n\n{summary}\n\n" + "\n".join(trailers) + "\n"


# --- conflicts ---------------------------------------------------------------


def list_conflicts(store: Store, at: Optional[str] = None) -> List[Conflict]:
    """Unresolved conflicts stored in the memory tree, oldest id first."""
    return [c for c in conflicts_and_problems(store, at)[0]]


def conflicts_and_problems(store: Store, at: Optional[str] = None) -> Tuple[List[Conflict], List[Tuple[str, str]]]:
    """The valid conflicts, and (path, why) for each conflict file refused: too large, YAML
    aliases or deep nesting (read with :func:`gitmem.trust.load_yaml`), or not a real conflict."""
    out, refused = [], []
    for path, blob in sorted(conflict_blobs(store, at or store.tip()).items()):
        try:
            out.append(Conflict.from_dict(load_conflict_data(store.repo[blob].peel(pygit2.Blob).data)))
        except GitmemError as e:
            refused.append((path, str(e)))
        except (KeyError, ValueError, pygit2.GitError) as e:
            refused.append((path, f"unreadable ({e})"))
    return out, refused


def resolve(store: Store, memory_id: str, *, take: Optional[str] = None, values: Optional[Dict[str, Any]] = None,
            author: Optional[Author] = None, source: str = "cli", seen: Optional[str] = None) -> Write:
    """Settle a conflict in one commit: ``take`` "ours" or "theirs" for the clashing
    fields, or give ``values`` (field -> value, e.g. edited text), one for each clashing field. Other
    fields keep their merged values. ``seen``: the :meth:`~gitmem.records.Conflict.version` the choice was made on; a
    conflict that is another one now raises :class:`~gitmem.errors.Changed`. Returns the store's :class:`Write`."""
    from .redact import redact_fields
    from .repo import default_author

    if (take is None) == (values is None) or take not in (None, "ours", "theirs"):
        raise GitmemError("resolve needs exactly one of: ours, theirs, or edited values")
    from .store import Built

    author = author or default_author(store.repo)

    def build(snap: Snapshot) -> Built:
        pending = {c.id: c for c in list_conflicts(store, snap.commit)}
        found = [pending[i] for i in model.matching_ids(memory_id, pending)]
        if len(found) != 1:
            raise GitmemError(f"no unresolved conflict for {memory_id!r}" if not found
                              else f"{memory_id!r} matches {len(found)} conflicts")
        c = found[0]
        if seen is not None and c.version() != seen:
            raise Changed(f"the conflict on {c.id} changed since you opened it: read it again, then choose")
        path, current = snap.find(c.id)
        left_out = [f for f in c.fields if values is not None and f not in values]
        if left_out:  # an emptied editor is no choice: the merged value would stand for it, the other side's gone
            raise GitmemError(f"no value given for {', '.join(left_out)}, which clashed: nothing resolved "
                              "(give each, or take ours or theirs)")
        bad = set(values or ()) - set(CONFLICT_FIELDS)
        if bad:
            raise InvalidMemory(", ".join(sorted(map(str, bad)))[:80], "not a field a resolution can set",
                                CONFLICT_FIELDS)
        redacted = 0
        if values is not None:
            model.check_types(values)
            texts, redacted = redact_fields(**{k: v for k, v in values.items() if isinstance(v, str)})
            chosen = {**values, **texts}
        else:
            side = c.ours if take == "ours" else c.theirs
            chosen = {f: getattr(side, f) for f in c.fields}
        new = current.evolve(**{**chosen, "updated": model.utc_now()})  # `updated` may be a clashed field: a resolve is now
        model.validate(new)
        updates: Dict[str, Optional[bytes]] = {path: None, conflict_path(c.id): None}
        updates[model.memory_path(new)] = model.dump_yaml(new)  # a resolved type moves the memory
        return Built(updates, new, redacted)

    return store.commit(build, op="resolve", author=author, source=source)


def rivals_after(store: Store, c: Conflict, at: str) -> List[Tuple[Memory, Memory]]:
    """Once conflict ``c`` is resolved in commit ``at``: the replacement a side of it named as the memory's
    successor that still says it supersedes the memory, which now names another (:func:`~gitmem.records.rivals`)."""
    return rivals_among(store, c.claimed(), at)


def rivals_among(store: Store, ids: Iterable[str], at: str) -> List[Tuple[Memory, Memory]]:
    """:func:`~gitmem.records.rivals` among the memories ``ids`` name at commit ``at``, reading those few only."""
    snap = store.snapshot(at)
    found: Dict[str, Memory] = {}
    for memory_id in dict.fromkeys(ids):
        try:
            found[memory_id] = snap.find(memory_id)[1]
        except GitmemError:
            continue  # not a valid memory here (doctor names it): nothing claims a memory through it
    return rivals(found)
