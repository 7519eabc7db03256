"""Merging memory: a pure record-level three-way merge, and the git edge that
turns it into fast-forwards and real merge commits on ``refs/memory/<branch>``.

The record merge works on whole memories by id, field by field, against the
memory merge base: memories added on either side are kept; a change on one side
wins over no change on the other (so a retraction or supersession wins over an
untouched copy); lists (tags, paths, commits) merge as sets; ``status`` keeps
the furthest state (active < retracted < superseded) and ``updated`` the latest;
a bookkeeping field the hooks move (a checkpoint's ``commit``) takes the newer side's value.
When both sides set the same field to different values nothing is dropped:
the memory takes the newer side's value for now and a :class:`Conflict` holding
base, ours and theirs is stored at ``conflicts/<id>.yaml`` in the memory tree,
so it travels with pushes until ``gitmem resolve`` removes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import pygit2
import yaml

from . import model
from .errors import GitmemError, InvalidMemory, NotFound, Untrusted
from .model import Author, Memory
from .trust import CONFLICT_FIELDS, check_conflict, history_problem, load_conflict_data

CONFLICTS_DIR = "conflicts"
_LIST_FIELDS = ("tags", "paths", "commits")
#: Fields only gitmem's hooks move, never a person (the post-commit hook advances a checkpoint's
#: ``commit`` on every branch that commits): the newer side's value wins, never a conflict.
_BOOKKEEPING_FIELDS = ("commit",)
_STATUS_RANK = {"active": 0, "retracted": 1, "superseded": 2}
_FIELDS = tuple(f.name for f in fields(Memory) if f.name != "id")
#: A teammate's clock may run a little ahead; a timestamp further ahead than this is not believed.
CLOCK_SKEW_SECONDS = 600


@dataclass(frozen=True)
class Conflict:
    """One memory both sides changed incompatibly: ``fields`` names what clashed."""

    id: str
    fields: Tuple[str, ...]
    base: Optional[Memory]
    ours: Memory
    theirs: Memory

    def swapped(self) -> "Conflict":
        return Conflict(self.id, self.fields, self.base, self.theirs, self.ours)

    def to_dict(self) -> Dict[str, Any]:
        return {"id": self.id, "type": self.ours.type, "fields": list(self.fields),
                "base": self.base.to_dict() if self.base else None,
                "ours": self.ours.to_dict(), "theirs": self.theirs.to_dict()}

    @classmethod
    def from_dict(cls, data: Any) -> "Conflict":
        """Build and check a conflict (:func:`gitmem.trust.check_conflict`): ``fields`` must name
        real memory fields (never ``id``), and every version must be a valid memory with the
        conflict's id, so a planted file is refused."""
        check_conflict(data)
        base = Memory.from_dict(data["base"]) if data.get("base") else None
        return cls(data["id"], tuple(dict.fromkeys(data["fields"])), base,
                   Memory.from_dict(data["ours"]), Memory.from_dict(data["theirs"]))


@dataclass(frozen=True)
class RecordMerge:
    merged: Dict[str, Memory]
    conflicts: List[Conflict] = field(default_factory=list)


def merge_records(base: Mapping[str, Memory], ours: Mapping[str, Memory],
                  theirs: Mapping[str, Memory], *, not_after: Optional[str] = None) -> RecordMerge:
    """Three-way merge of memories by id. Never drops a memory either side has;
    symmetric up to swapping ours and theirs; ``merge(b, x, x) == x``.

    ``not_after`` (an ISO time: now plus a little clock skew) is the latest time
    believed: a version stamped later never wins by its timestamp, and an
    incoming change of a known memory stamped later does not replace ours: ours
    stays and the change is kept as a conflict for a person."""
    merged: Dict[str, Memory] = {}
    conflicts: List[Conflict] = []
    for memory_id in sorted(set(ours) | set(theirs)):
        o, t, b = ours.get(memory_id), theirs.get(memory_id), base.get(memory_id)
        if o is None or t is None:  # added on one side, or deleted on one: keep what exists
            merged[memory_id] = o if o is not None else t  # type: ignore[assignment]
            continue
        if o == t or t == b:
            merged[memory_id] = o
            continue
        if _from_future(t, not_after):
            merged[memory_id] = o
            conflicts.append(Conflict(memory_id, _differing(o, t), b, o, t))
            continue
        if o == b:
            merged[memory_id] = t
            continue
        memory, clashed = _merge_fields(b, o, t, not_after)
        merged[memory_id] = memory
        if clashed:
            conflicts.append(Conflict(memory_id, clashed, b, o, t))
    return RecordMerge(merged, conflicts)


def _from_future(m: Memory, not_after: Optional[str]) -> bool:
    return not_after is not None and max(m.created, m.updated or "") > not_after


def _differing(o: Memory, t: Memory) -> Tuple[str, ...]:
    return tuple(name for name in CONFLICT_FIELDS if getattr(o, name) != getattr(t, name)) or ("updated",)


def _newer(o: Memory, t: Memory, not_after: Optional[str] = None) -> Memory:
    """The side whose values stand in for a conflict until it is resolved (order-free);
    a side stamped after ``not_after`` is never the newer one."""
    key = lambda m: (not _from_future(m, not_after), m.updated or m.created, model.dump_yaml(m))  # noqa: E731
    return o if key(o) >= key(t) else t


def _merge_fields(b: Optional[Memory], o: Memory, t: Memory,
                  not_after: Optional[str] = None) -> Tuple[Memory, Tuple[str, ...]]:
    newer = _newer(o, t, not_after)
    values: Dict[str, Any] = {}
    clashed: List[str] = []
    for name in _FIELDS:
        ov, tv = getattr(o, name), getattr(t, name)
        bv = getattr(b, name) if b is not None else None
        if ov == tv or tv == bv:
            values[name] = ov
        elif ov == bv:
            values[name] = tv
        elif name in _LIST_FIELDS:
            values[name] = _merge_sets(bv or (), ov, tv)
        elif name == "status":
            values[name] = max(ov, tv, key=lambda s: (_STATUS_RANK.get(s, 0), s))
        elif name == "updated":
            believed = [v for v in (ov, tv) if v and (not_after is None or v <= not_after)]
            values[name] = max(believed) if believed else getattr(newer, name)
        elif name in _BOOKKEEPING_FIELDS:
            values[name] = getattr(newer, name)
        else:
            values[name] = getattr(newer, name)
            clashed.append(name)
    return Memory(id=o.id, **values), tuple(clashed)


def _merge_sets(base: Sequence[str], ours: Sequence[str], theirs: Sequence[str]) -> Tuple[str, ...]:
    """Keep what both kept, add what either added: base order, then additions sorted."""
    kept = [x for x in base if x in ours and x in theirs]
    added = sorted((set(ours) | set(theirs)) - set(base))
    return tuple(kept + added)


# --- the git edge ------------------------------------------------------------


@dataclass(frozen=True)
class MergeResult:
    """``kind`` is "up-to-date", "fast-forward" or "merge"; ``commit`` the new tip; ``kept`` the
    memories the incoming history deleted, which the merge kept (gitmem never deletes memory)."""

    kind: str
    commit: Optional[str]
    added: List[str] = field(default_factory=list)
    changed: List[str] = field(default_factory=list)
    conflicts: List[Conflict] = field(default_factory=list)
    kept: List[str] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "commit": self.commit, "added": list(self.added),
                "changed": list(self.changed), "conflicts": [c.to_dict() for c in self.conflicts],
                "kept": list(self.kept)}


def conflict_path(memory_id: str) -> str:
    return f"{CONFLICTS_DIR}/{memory_id}.yaml"


def dump_conflict(c: Conflict) -> bytes:
    return yaml.safe_dump(c.to_dict(), sort_keys=False, allow_unicode=True, width=100).encode("utf-8")


def _entries(store, commit: Optional[str]) -> Dict[str, Tuple[str, str]]:
    """id -> (path, blob id) for every memory blob at ``commit``."""
    if not commit:
        return {}
    return {p.rsplit("/", 1)[1][:-5]: (p, b) for p, b in store.snapshot(commit).entries()}


def _fast_forward_changes(repo: pygit2.Repository, ours: str,
                          theirs: str) -> Tuple[List[str], List[str], List[str]]:
    """(added, changed, removed) memory ids from ours to theirs, by a tree diff: shared subtrees
    are skipped, so a fast-forward by one memory costs a few trees, not 3 full listings."""
    diff = repo.diff(repo[ours].peel(pygit2.Tree), repo[theirs].peel(pygit2.Tree))  # type: ignore[call-overload]  # pygit2 stub
    added: set = set()
    removed: set = set()
    changed: set = set()
    for delta in diff.deltas:
        path = delta.new_file.path if delta.status_char() != "D" else delta.old_file.path
        if path.split("/", 1)[0] not in model.TYPES or not path.endswith(".yaml"):
            continue
        memory_id = path.rsplit("/", 1)[1][:-5]
        {"A": added, "D": removed}.get(delta.status_char(), changed).add(memory_id)
    changed |= added & removed  # a memory that moved (its type changed) is a change
    return sorted(added - removed), sorted(changed), sorted(removed - added)


def believed_until(now: Optional[float] = None) -> str:
    """The latest timestamp a merge believes: now plus :data:`CLOCK_SKEW_SECONDS`."""
    import time
    from datetime import datetime, timezone

    moment = (time.time() if now is None else now) + CLOCK_SKEW_SECONDS
    return datetime.fromtimestamp(moment, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _future_changes(store, theirs: str, changed: Sequence[str], not_after: str) -> List[str]:
    """Ids among ``changed`` whose incoming version is stamped after ``not_after``."""
    snap = store.snapshot(theirs)
    out = []
    for memory_id in changed:
        try:
            if _from_future(snap.find(memory_id)[1], not_after):
                out.append(memory_id)
        except GitmemError:
            continue
    return out


def _conflict_blobs(store, commit: Optional[str]) -> Dict[str, str]:
    """conflicts/<id>.yaml path -> blob id at ``commit``."""
    tree = store.snapshot(commit).tree if commit else None
    if tree is None or CONFLICTS_DIR not in tree:
        return {}
    folder = tree[CONFLICTS_DIR]
    if folder.type_str != "tree":
        return {}
    return {f"{CONFLICTS_DIR}/{e.name}": str(e.id) for e in folder.peel(pygit2.Tree)
            if e.name.endswith(".yaml") and e.type_str == "blob"}


def _load(store, entries: Dict[str, Tuple[str, str]], ids: Sequence[str]) -> Dict[str, Memory]:
    out: Dict[str, Memory] = {}
    for i in ids:
        if i in entries:
            path, blob = entries[i]
            try:
                out[i] = store.parse_blob(blob, path)
            except InvalidMemory:
                continue  # an invalid blob on one side: the other side's version stands
    return out


def merge_into(store, theirs: str, *, author: Optional[Author] = None, source: str = "merge",
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
    from .repo import REF_PREFIX, default_author

    repo = store.repo
    try:
        theirs = str(repo.revparse_single(theirs).peel(pygit2.Commit).id)
    except (KeyError, ValueError, pygit2.GitError):
        raise NotFound(theirs, store.ref) from None
    if not gated:
        local = [str(r.target) for r in repo.references.iterator() if r.name.startswith(REF_PREFIX)
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
            store.move_ref(None, theirs, f"gitmem merge: fast-forward to {theirs[:12]}")
            return MergeResult("fast-forward", theirs, added=sorted(_entries(store, theirs)))
        base_oid = repo.merge_base(ours, theirs)
        base = str(base_oid) if base_oid else None
        if base == theirs:
            return MergeResult("up-to-date", ours)
        if base == ours:
            added, changed, removed = _fast_forward_changes(repo, ours, theirs)
            if not removed and not _future_changes(store, theirs, changed, not_after):
                store.move_ref(expected, theirs, f"gitmem merge: fast-forward to {theirs[:12]}")
                return MergeResult("fast-forward", theirs, added, changed)
            # A descendant that deletes memory is never taken as it is: gitmem itself never
            # deletes (retract keeps), so the deletion is someone's hand edit. Nor one that
            # changes a known memory with a timestamp from the future. Merge it instead: the
            # record merge keeps every memory either side has, and ours over a future stamp.
        e_base, e_ours, e_theirs = _entries(store, base), _entries(store, ours), _entries(store, theirs)
        kept = sorted(i for i in e_ours if i not in e_theirs and i in e_base)
        touched = sorted(i for i in set(e_ours) | set(e_theirs)
                         if not (e_ours.get(i) == e_theirs.get(i) or e_theirs.get(i) == e_base.get(i)))
        result = merge_records(_load(store, e_base, touched), _load(store, e_ours, touched),
                               _load(store, e_theirs, touched), not_after=not_after)
        updates: Dict[str, Optional[bytes]] = {}
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
        updates.update(_merge_conflict_files(store, base, ours, theirs, result.conflicts))
        text = _merge_message(message, store.branch, theirs, added, changed, result.conflicts, author, source, kept)
        commit = store.commit_tree(updates, text, author, base=ours, extra_parents=[theirs])
        store.move_ref(expected, commit, f"gitmem merge: {theirs[:12]}")
        return MergeResult("merge", commit, added, changed, list(result.conflicts), kept)

    return store.retrying(attempt)


def _merge_conflict_files(store, base, ours, theirs, new: Sequence[Conflict]) -> Dict[str, Optional[bytes]]:
    """Three-way merge of conflicts/ by blob: a resolution (deletion) on one side
    wins over no change on the other; a conflict this merge found wins over both."""
    b, o, t = (_conflict_blobs(store, c) for c in (base, ours, theirs))
    updates: Dict[str, Optional[bytes]] = {}
    for path in set(o) | set(t):
        ov, tv, bv = o.get(path), t.get(path), b.get(path)
        if ov == tv or tv == bv:
            continue
        if ov == bv or ov is None:
            chosen = tv
        elif tv is None:
            continue
        else:
            chosen = max(ov, tv)
        updates[path] = store.repo[chosen].data if chosen else None
    for c in new:
        updates[conflict_path(c.id)] = dump_conflict(c)
    return updates


def _merge_message(message, branch, theirs, added, changed, conflicts, author, source, kept=()) -> str:
    subject = message or f"merge {theirs[:12]} into {branch}"
    summary = f"{len(added)} added, {len(changed)} changed, {len(conflicts)} conflict(s)"
    if kept:
        summary += f"; kept {len(kept)} memories the merged history deleted"
    trailers = [f"Memory-Id: {i}" for i in (list(added) + list(changed))[:200]]
    trailers += ["Memory-Op: merge", f"Memory-Source: {source}", f"Author-Kind: {author.kind}",
                 f"Merged-From: {theirs}"]
    trailers += [f"Conflict: {c.id}" for c in conflicts]
    return f"{subject}\n\n{summary}\n\n" + "\n".join(trailers) + "\n"


# --- conflicts ---------------------------------------------------------------


def list_conflicts(store, at: Optional[str] = None) -> List[Conflict]:
    """Unresolved conflicts stored in the memory tree, oldest id first."""
    return [c for c in conflicts_and_problems(store, at)[0]]


def conflicts_and_problems(store, at: Optional[str] = None) -> Tuple[List[Conflict], List[Tuple[str, str]]]:
    """The valid conflicts, and (path, why) for each conflict file refused: too large, YAML
    aliases or deep nesting (read with :func:`gitmem.trust.load_yaml`), or not a real conflict."""
    out, refused = [], []
    for path, blob in sorted(_conflict_blobs(store, at or store.tip()).items()):
        try:
            out.append(Conflict.from_dict(load_conflict_data(store.repo[blob].data)))
        except GitmemError as e:
            refused.append((path, str(e)))
        except (KeyError, ValueError, pygit2.GitError) as e:
            refused.append((path, f"unreadable ({e})"))
    return out, refused


def resolve(store, memory_id: str, *, take: Optional[str] = None, values: Optional[Dict[str, Any]] = None,
            author: Optional[Author] = None, source: str = "cli"):
    """Settle a conflict in one commit: ``take`` "ours" or "theirs" for the clashing
    fields, or give ``values`` (field -> value, e.g. edited text). Other fields keep
    their merged values. Returns the store's :class:`Write`."""
    from .redact import redact_fields
    from .repo import default_author

    if (take is None) == (values is None) or take not in (None, "ours", "theirs"):
        raise GitmemError("resolve needs exactly one of: ours, theirs, or edited values")
    author = author or default_author(store.repo)
    counted = {"redacted": 0}

    def build(snap):
        pending = {c.id: c for c in list_conflicts(store, snap.commit)}
        found = [pending[i] for i in model.matching_ids(memory_id, pending)]
        if len(found) != 1:
            raise GitmemError(f"no unresolved conflict for {memory_id!r}" if not found
                              else f"{memory_id!r} matches {len(found)} conflicts")
        c = found[0]
        path, current = snap.find(c.id)
        bad = set(values or ()) - set(CONFLICT_FIELDS)
        if bad:
            raise InvalidMemory(", ".join(sorted(map(str, bad)))[:80], "not a field a resolution can set",
                                CONFLICT_FIELDS)
        if values is not None:
            texts, counted["redacted"] = redact_fields(**{k: v for k, v in values.items() if isinstance(v, str)})
            chosen = {**values, **texts}
        else:
            side = c.ours if take == "ours" else c.theirs
            chosen = {f: getattr(side, f) for f in c.fields}
        new = current.evolve(**chosen, updated=model.utc_now())
        model.validate(new)
        updates: Dict[str, Optional[bytes]] = {path: None, conflict_path(c.id): None}
        updates[model.memory_path(new)] = model.dump_yaml(new)  # a resolved type moves the memory
        return updates, new

    from .store import Write

    commit, memory = store.commit(build, op="resolve", author=author, source=source)
    return Write(memory, commit, counted["redacted"])
