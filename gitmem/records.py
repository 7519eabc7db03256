"""The record merge: a pure three-way merge of memories by id, and the conflicts it keeps.

It works on whole memories, field by field, against the memory merge base:
memories added on either side are kept; a change on one side wins over no
change on the other (so a retraction or supersession wins over an untouched
copy); lists (tags, paths, commits) merge as sets; ``status`` keeps the furthest
state (active < retracted < superseded) and ``updated`` the latest; a
bookkeeping field the hooks move (a checkpoint's ``commit``) takes the newer
side's value. When both sides set the same field to different values nothing is
dropped: the memory takes the newer side's value for now and a :class:`Conflict`
holding base, ours and theirs is kept, which :mod:`gitmem.merge` stores at
``conflicts/<id>.yaml`` in the memory tree until ``gitmem resolve`` removes it.

Plain memories in, plain memories out: no repository, no clock, no files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

from . import model
from .errors import InvalidMemory
from .model import CONFLICTS_DIR, Memory

#: What a conflict file may name as clashing: real memory fields, never the id, the schema or anything else.
CONFLICT_FIELDS = tuple(f for f in model.Memory._fields if f not in ("id", "schema"))
_LIST_FIELDS = ("tags", "paths", "commits")
#: Fields only gitmem's hooks move, never a person (the post-commit hook advances a checkpoint's
#: ``commit`` on every branch that commits): the newer side's value wins, never a conflict.
_BOOKKEEPING_FIELDS = ("commit",)
_STATUS_RANK = {"active": 0, "retracted": 1, "superseded": 2}
#: Fields the merge settles by rule, never a person: a conflict names them only when a side came from the future.
_RULED_FIELDS = (*_LIST_FIELDS, "status", "updated", *_BOOKKEEPING_FIELDS)
_FIELDS = tuple(f for f in Memory._fields if f != "id")
_NO_BASE = object()  # equal to no value: a field whose base value was only a conflict's stand-in


def check_conflict(data: Any) -> None:
    """Raise :class:`InvalidMemory` unless ``data`` (a parsed conflict file) is a real conflict:
    an id, ``fields`` naming only :data:`CONFLICT_FIELDS` (never ``id``, never ``__class__``),
    and versions that are valid memories of that id."""
    if not isinstance(data, dict) or not all(k in data for k in ("id", "fields", "ours", "theirs")):
        raise InvalidMemory("conflict", "expected id, fields, base, ours, theirs")
    memory_id, names = data["id"], data["fields"]
    if not isinstance(memory_id, str) or not model.ID_RE.match(memory_id):
        raise InvalidMemory("conflict", "its id is not a gitmem id")
    if not isinstance(names, list) or not all(isinstance(f, str) for f in names):
        raise InvalidMemory("conflict", "fields must be a list of memory field names")
    bad = [f for f in names if f not in CONFLICT_FIELDS]
    if bad or not names:
        raise InvalidMemory("conflict", "fields must name memory fields; not "
                            + (", ".join(repr(f[:40]) for f in bad[:5]) or "an empty list"), CONFLICT_FIELDS)
    for side in ("base", "ours", "theirs"):
        if side == "base" and not data.get("base"):
            continue
        if model.Memory.from_dict(data[side]).id != memory_id:
            raise InvalidMemory("conflict", f"its {side} version has another id than the conflict")


def _shown(value: Any) -> str:
    if value is None or value == "" or value == ():
        return "(none)"
    return ", ".join(map(str, value)) if isinstance(value, tuple) else str(value)


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

    def claimed(self) -> Tuple[str, ...]:
        """The memory and the successors its two sides name: where a resolve may leave a rival (:func:`rivals`)."""
        return tuple(i for i in (self.id, self.ours.superseded_by, self.theirs.superseded_by) if i)

    def sides(self) -> FrozenSet[str]:
        """Its two versions (:func:`gitmem.model.version` of each), order-free: merges either way round find the
        same conflict with ours and theirs swapped, a different file holding one conflict."""
        return frozenset((model.version(self.ours), model.version(self.theirs)))

    def changed_in(self, m: Memory) -> Tuple[str, ...]:
        """The fields a person must choose whose value in ``m`` is neither version's: a side changed them since
        the conflict was found, a third version the conflict file cannot show."""
        return tuple(f for f in self.fields if f not in _RULED_FIELDS
                     and getattr(m, f) not in (getattr(self.ours, f), getattr(self.theirs, f)))

    def clash(self) -> str:
        """Both versions of each clashing field, as a notice spells them out for a reader who cannot run
        ``gitmem conflicts``: ``text: 'a' against 'b'``."""
        return "; ".join(f"{f}: {_shown(getattr(self.ours, f))!r} against {_shown(getattr(self.theirs, f))!r}"
                         for f in self.fields)

    def version(self) -> str:
        """A fingerprint of the two versions a person is shown (:func:`gitmem.model.version` of each): a form
        carries it, so a choice made on them never settles another conflict on the same memory."""
        return model.version(self.ours)[:8] + model.version(self.theirs)[:8]

    def to_dict(self) -> Dict[str, Any]:
        return {"id": self.id, "type": self.ours.type, "fields": list(self.fields),
                "base": self.base.to_dict() if self.base else None,
                "ours": self.ours.to_dict(), "theirs": self.theirs.to_dict()}

    @classmethod
    def from_dict(cls, data: Any) -> "Conflict":
        """Build and check a conflict (:func:`check_conflict`): ``fields`` must name
        real memory fields (never ``id``), and every version must be a valid memory with the
        conflict's id, so a planted file is refused."""
        check_conflict(data)
        base = Memory.from_dict(data["base"]) if data.get("base") else None
        return cls(data["id"], tuple(dict.fromkeys(data["fields"])), base,
                   Memory.from_dict(data["ours"]), Memory.from_dict(data["theirs"]))


def conflict_path(memory_id: str) -> str:
    return f"{CONFLICTS_DIR}/{memory_id}.yaml"


def dump_conflict(c: Conflict) -> bytes:
    """The conflict file's bytes, each version redacted as :func:`gitmem.model.dump_yaml` redacts a memory
    (a side may have arrived from a remote with a secret): the only way a conflict becomes a blob."""
    import yaml

    def clean(m: Memory) -> Memory:
        return model.redact_memory(m)[0]

    clean_c = Conflict(c.id, c.fields, c.base and clean(c.base), clean(c.ours), clean(c.theirs))
    return yaml.safe_dump(clean_c.to_dict(), sort_keys=False, allow_unicode=True, width=100).encode("utf-8")


@dataclass(frozen=True)
class RecordMerge:
    merged: Dict[str, Memory]
    conflicts: List[Conflict] = field(default_factory=list)


def merge_records(base: Mapping[str, Memory], ours: Mapping[str, Memory],
                  theirs: Mapping[str, Memory], *, not_after: Optional[str] = None,
                  unsettled: Optional[Mapping[str, Sequence[str]]] = None) -> RecordMerge:
    """Three-way merge of memories by id. Never drops a memory either side has;
    symmetric up to swapping ours and theirs; ``merge(b, x, x) == x``.

    ``not_after`` (an ISO time: now plus a little clock skew) is the latest time
    believed: a version stamped later never wins by its timestamp, and an
    incoming change of a known memory stamped later does not replace ours: ours
    stays and the change is kept as a conflict for a person.

    ``unsettled``: id -> the fields a conflict pending at the base names, where both sides resolved it. The
    base holds only the stand-in value the conflict showed there, so each side's value is a choice, even one
    that kept the stand-in: two different choices clash again instead of one passing for no change."""
    merged: Dict[str, Memory] = {}
    conflicts: List[Conflict] = []
    for memory_id in sorted(set(ours) | set(theirs)):
        o, t, b = ours.get(memory_id), theirs.get(memory_id), base.get(memory_id)
        chosen = (unsettled or {}).get(memory_id, ())
        if o is None or t is None:  # added on one side, or deleted on one: keep what exists
            merged[memory_id] = o if o is not None else t  # type: ignore[assignment]
            continue
        if o == t or (t == b and not chosen):
            merged[memory_id] = o
            continue
        if from_future(t, not_after):
            merged[memory_id] = o
            conflicts.append(Conflict(memory_id, _differing(o, t), b, o, t))
            continue
        if o == b and not chosen:
            merged[memory_id] = t
            continue
        memory, clashed = _merge_fields(b, o, t, not_after, chosen)
        merged[memory_id] = memory
        if clashed:
            conflicts.append(Conflict(memory_id, clashed, b, o, t))
    return RecordMerge(merged, conflicts)


def from_future(m: Memory, not_after: Optional[str]) -> bool:
    """Whether ``m`` is stamped (created or updated) after ``not_after``, the latest time believed."""
    return not_after is not None and max(m.created, m.updated or "") > not_after


def _differing(o: Memory, t: Memory) -> Tuple[str, ...]:
    return tuple(name for name in CONFLICT_FIELDS if getattr(o, name) != getattr(t, name)) or ("updated",)


def _newer(o: Memory, t: Memory, not_after: Optional[str] = None) -> Memory:
    """The side whose values stand in for a conflict until it is resolved (order-free);
    a side stamped after ``not_after`` is never the newer one."""
    key = lambda m: (not from_future(m, not_after), m.updated or m.created, model.dump_yaml(m))  # noqa: E731
    return o if key(o) >= key(t) else t


def _merge_fields(b: Optional[Memory], o: Memory, t: Memory, not_after: Optional[str] = None,
                  chosen: Sequence[str] = ()) -> Tuple[Memory, Tuple[str, ...]]:
    """The field-by-field merge; a field in ``chosen`` has no base value either side can have left unchanged."""
    newer = _newer(o, t, not_after)
    values: Dict[str, Any] = {}
    clashed: List[str] = []
    for name in _FIELDS:
        ov, tv = getattr(o, name), getattr(t, name)
        bv: Any = _NO_BASE if name in chosen else getattr(b, name) if b is not None else None
        if ov == tv or tv == bv:
            values[name] = ov
        elif ov == bv:
            values[name] = tv
        elif name in _LIST_FIELDS:
            values[name] = _merge_sets(() if bv is _NO_BASE else bv or (), ov, tv)
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


def rivals(memories: Mapping[str, Memory]) -> List[Tuple[Memory, Memory]]:
    """(replacement, memory) for each active memory among ``memories`` that says it supersedes one whose
    ``superseded_by`` names another. Two supersedes of one memory, merged, clash on its ``superseded_by``
    (a conflict naming both replacements); the side a resolve takes is its successor, and the other
    replacement is still active, a second answer nobody chose, until a person retracts it."""
    out = []
    for r in memories.values():
        old = memories.get(r.supersedes) if r.supersedes else None
        if r.status == "active" and old is not None and old.superseded_by not in (None, r.id):
            out.append((r, old))
    return out


def rival_note(replacement: Memory, old: Memory) -> str:
    """What a person is told about a :func:`rivals` pair, one line naming the commands that settle it."""
    r, x, s = replacement.id, old.id, old.superseded_by
    return (f"{r} still supersedes {x}, whose successor is {s}: fold what it adds into {s} "
            f"(`gitmem edit {s} --text ...`), then `gitmem retract {r} --because \"{s} supersedes {x}\"`")
