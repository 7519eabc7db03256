"""The memory model: plain records (named tuples), validation in one place, YAML in and out.

Pure: no git, no I/O. Everything that becomes a stored memory passes through
:func:`validate`, so the store, the merge, the MCP server and the web UI all
agree on what a valid memory is.
"""

from __future__ import annotations

import itertools
import os
import posixpath
import re
import threading
import time
from functools import lru_cache
from datetime import datetime, timezone
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Tuple

from .errors import GitmemError, InvalidMemory
from .text import plural

SCHEMA_VERSION = 1

TYPES = ("decision", "rejection", "convention", "fact", "action", "file", "checkpoint", "note")
STATUSES = ("active", "superseded", "retracted")
#: The types that record a choice: what was decided, and what was turned down.
CHOICE_TYPES = ("decision", "rejection")
AUTHOR_KINDS = ("agent", "human")

#: Memories are notes for a prompt, not documents: 16 KiB keeps one memory
#: well inside any context budget and keeps blobs small for fast loads.
MAX_TEXT_BYTES = 16 * 1024
MAX_TITLE_CHARS = 200
MAX_BLOB_BYTES = 64 * 1024
MAX_PATH_CHARS = 1024
MAX_ITEMS = 64

# Crockford base32, lowercase: sorts like the time it encodes, no ambiguous letters.
_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
ID_LENGTH = 16
ID_RE = re.compile(r"^[0-9a-hjkmnp-tv-z]{16}$")
ID_PART_RE = re.compile(r"^[0-9a-hjkmnp-tv-z]{1,16}$")
#: A short id is at least this long: 32**4 (about a million) tails make clashes rare below
#: a few thousand memories, and a shorter string is more likely a typo than an id.
SHORT_ID_MIN = 4
_CROCKFORD_READ = str.maketrans({"i": "1", "l": "1", "o": "0", "-": None})
_TAG_RE = re.compile(r"^[^\W_][\w.:/+-]{0,63}$")  # letters and digits of any script
_SOURCE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@/:+ -]{0,79}$")
_SOURCE_RULE = "one short word such as cli, hook, ci, mcp:cursor"
_EMAIL_RE = re.compile(r"^[^<>@\s]+@[^<>@\s]+$")
#: What git trims from both ends of a name (control characters, spaces, , : ; < > " \ '): a name of only these is none.
_NAME_TRIM = "".join(map(chr, range(33))) + ",:;<>\"\\'"
_OID_RE = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_ISO_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z$")
_DRIVE_RE = re.compile(r"^[A-Za-z]:")


def undecodable(text: str) -> Optional[str]:
    """``text`` quoted with what is not UTF-8 in it escaped (``'b\\xff'``), or None when it is valid UTF-8.

    argv and libgit2 hand Python bytes that are not UTF-8 as lone surrogates, which libgit2, SQLite and
    YAML all refuse to encode: a name must be checked where it comes in, and shown as the bytes it was."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        try:
            shown = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a surrogate no byte decodes to (from JSON's \ud800, say)
            shown = text.encode("utf-8", "backslashreplace").decode("ascii")
        return f"'{shown}'"
    return None


_last_id = (0, 0, 0)  # (pid, ms, random) of the last id this process made
_LAST_ID_LOCK = threading.Lock()


def new_id(now_ms: Optional[int] = None, tail: Optional[int] = None) -> str:
    """A 16-char id: 10 chars of millisecond time, then 6 random chars (30 bits; ``tail`` fixes
    them, for sample data that must read the same on every run).

    Sorting ids sorts memories by creation time; the random tail keeps ids
    written in the same millisecond on different clones apart. Within one
    process ids are strictly increasing (as ULIDs do): a second id in the same
    millisecond takes the previous random part plus one, so order survives
    fast writers.
    """
    global _last_id
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    rnd = int.from_bytes(os.urandom(4), "big") & (2**30 - 1) if tail is None else tail & (2**30 - 1)
    if now_ms is None:
        with _LAST_ID_LOCK:  # two threads that read one last id would make one id twice
            pid, last_ms, last_rnd = _last_id
            if pid == os.getpid() and ms <= last_ms:  # a forked child starts afresh, never from its parent's id
                ms, rnd = last_ms, last_rnd + 1
                if rnd >= 2**30:
                    ms, rnd = ms + 1, rnd & (2**29 - 1)
            _last_id = (os.getpid(), ms, rnd)
    head = "".join(_ALPHABET[(ms >> (5 * i)) & 31] for i in reversed(range(10)))
    return head + "".join(_ALPHABET[(rnd >> (5 * i)) & 31] for i in reversed(range(6)))


def normalize_id(text: str) -> str:
    """Crockford base32 as its spec reads it: case-insensitive, ``i``/``l`` read as 1, ``o`` as 0,
    hyphens ignored. ``normalize_id("0M-J3K")`` is ``"0mj3k"``."""
    return text.strip().lower().translate(_CROCKFORD_READ)


def short_ids(ids: Iterable[str], min_length: int = SHORT_ID_MIN) -> Dict[str, str]:
    """Each id's short form among ``ids``: its shortest tail, at least ``min_length`` chars,
    that no other id ends with.

    Tails, not prefixes: an id starts with 10 chars of millisecond time, so ids written
    within minutes share their first 7 or 8 chars, while the last 6 are random (and, within
    one process and millisecond, consecutive). :func:`matching_ids` resolves a tail first,
    so a short form printed here always names its id again. Sorting the reversed ids puts
    the ids sharing the longest tail next to each other: O(n log n)."""
    unique = sorted({i[::-1] for i in ids})
    shared = [0] * len(unique)  # the longest tail each shares with a neighbour
    for n in range(1, len(unique)):
        k = 0
        for a, b in zip(unique[n - 1], unique[n]):
            if a != b:
                break
            k += 1
        shared[n - 1] = max(shared[n - 1], k)
        shared[n] = k
    return {rev[::-1]: rev[:min(max(k + 1, min_length), len(rev))][::-1] for rev, k in zip(unique, shared)}


def matching_ids(abbrev: str, ids: Iterable[str]) -> List[str]:
    """The ids ``abbrev`` can name, after :func:`normalize_id`: the ones it ends (the short form
    gitmem prints), or failing that the ones it starts (a prefix, as git abbreviates)."""
    a = normalize_id(abbrev)
    pool = list(ids)
    return sorted(i for i in pool if i.endswith(a)) or sorted(i for i in pool if i.startswith(a))


_SINCE_RE = re.compile(r"^(\d+)\s*(m|min|mins|minutes?|h|hours?|d|days?|w|weeks?)(\s+ago)?$")
_UNIT_SECONDS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_since(text: str, now: float) -> int:
    """A point in time as ``log --since`` takes it, in epoch seconds: an ISO date or time
    (UTC: ``2026-12-01``, ``2026-12-01T10:00``, ``...Z``), or an age (``3d``, ``2 hours ago``,
    ``1w``; units m, h, d, w). ``now`` is passed in, so this stays pure. Raises ValueError."""
    value = text.strip().lower()
    m = _SINCE_RE.match(value)
    if m:
        unit = m.group(2)
        seconds = _UNIT_SECONDS["m" if unit.startswith("mi") or unit == "m" else unit[0]]
        return int(now - int(m.group(1)) * seconds)
    for fmt in ("%Y-%m-%d", "%Y-%m-%dt%H:%M", "%Y-%m-%dt%H:%M:%S", "%Y-%m-%dt%H:%M:%Sz", "%Y-%m-%dt%H:%Mz"):
        try:
            return int(datetime.strptime(value, fmt).replace(tzinfo=timezone.utc).timestamp())
        except ValueError:
            continue
    raise ValueError(f"{text!r} is not a date (2026-12-01, 2026-12-01T10:00) or an age (3d, 2 hours ago)")


def quoted(text: str) -> str:
    """``text`` as XML text or an attribute value (``html.escape`` with quotes, without importing :mod:`html`):
    whatever a memory says reaches a model as quoted data, never as markup that closes the element around it."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;") \
        .replace("'", "&#x27;")


def next_step(text: str, marked: bool = False) -> Optional[str]:
    """The next step a checkpoint's text gives after " / " ("parser done / next: wire it in"), else None;
    ``marked``: only after " / next:", so a text that only uses " / " ("split the read / write paths") has none."""
    if " / " not in text:
        return None
    tail = text.split(" / ", 1)[1].strip()
    step = re.sub(r"^next\s*:\s*", "", tail, flags=re.I)
    return None if marked and step == tail else step or None


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Author(NamedTuple):
    name: str
    email: str = ""
    kind: str = "human"

    def to_dict(self) -> Dict[str, str]:
        return {"name": self.name, "email": self.email, "kind": self.kind}


class Memory(NamedTuple):
    """One memory, exactly as stored (one YAML blob).

    ``reason`` is why a rejection was turned down (required for rejections) or
    why a decision was taken. ``blob`` ties a ``file`` memory to the blob id of
    the file it summarises; ``commit`` and ``next`` are where a checkpoint
    stands and what comes next; ``commits`` are code commits linked by hooks.

    A named tuple, like :class:`Author`: every command defines both at import, where a frozen dataclass
    costs about a millisecond (its methods are compiled as it is defined), and the index's row of a
    memory is its fields in order.
    """

    id: str
    type: str
    text: str
    author: Author
    source: str
    created: str
    title: Optional[str] = None
    reason: Optional[str] = None
    tags: Tuple[str, ...] = ()
    paths: Tuple[str, ...] = ()
    status: str = "active"
    supersedes: Optional[str] = None
    superseded_by: Optional[str] = None
    blob: Optional[str] = None
    commit: Optional[str] = None
    next: Optional[str] = None
    commits: Tuple[str, ...] = ()
    updated: Optional[str] = None
    schema: int = SCHEMA_VERSION

    @property
    def summary(self) -> str:
        """A one-line label for logs and lists: the first line, cut at a newline only (``splitlines`` also cut at
        a lone CR, U+2028 and the other separators, so a list showed a memory up to one with no sign of the rest)."""
        line = (self.title or self.text).strip().split("\n", 1)[0].rstrip("\r")
        return line if len(line) <= 72 else line[:69] + "..."

    def evolve(self, **changes: Any) -> "Memory":
        return self._replace(**changes)

    def to_dict(self) -> Dict[str, Any]:
        """Stable key order; empty optional fields are left out."""
        out: Dict[str, Any] = {}
        for name in _KEY_ORDER:
            value = getattr(self, name)
            if name == "author":
                out[name] = value.to_dict()
            elif isinstance(value, tuple):
                if value:
                    out[name] = list(value)
            elif value is not None:
                out[name] = value
        return out

    @classmethod
    def from_dict(cls, data: Any) -> "Memory":
        """Build and validate a memory from parsed YAML or JSON."""
        if not isinstance(data, dict):
            raise InvalidMemory("document", f"expected a mapping, got {type(data).__name__}")
        if not _KEY_SET.issuperset(data):
            unknown = set(data) - _KEY_SET
            raise InvalidMemory("document", f"unknown field(s): {', '.join(sorted(map(str, unknown)))}", _KEY_ORDER)
        author = data.get("author")
        if not isinstance(author, dict):
            raise InvalidMemory("author", "expected a mapping with name, email, kind")
        kwargs: Dict[str, Any] = {}
        for name in _KEY_ORDER:  # every field of Memory, in this order so the first problem named is always the same
            if name not in data:
                continue
            value = data[name]
            if name in _TEXT_FIELDS:
                if value is not None and not isinstance(value, str):
                    _expect_str(name, value)
            elif name in _TUPLE_FIELDS:
                if not isinstance(value, list):
                    raise InvalidMemory(name, "expected a list of strings")
                for item in value:
                    if not isinstance(item, str):
                        _expect_str(name, item)
                value = tuple(value)
            elif name == "author":
                value = author_of(author.get("name"), author.get("email", ""), author.get("kind", "human"))
            elif not isinstance(value, int) or isinstance(value, bool):  # schema
                raise InvalidMemory("schema", "expected an integer")
            kwargs[name] = value
        for required in ("id", "type", "text", "source", "created"):
            if kwargs.get(required) is None:  # `text: null` in a hand edit is as missing as no key
                raise InvalidMemory(required, "missing")
        memory = cls(**kwargs)
        validate(memory)
        return memory


_KEY_ORDER = (
    "schema", "id", "type", "status", "title", "text", "reason", "tags", "paths",
    "supersedes", "superseded_by", "blob", "commit", "next", "commits",
    "author", "source", "created", "updated",
)
_KEY_SET = frozenset(_KEY_ORDER)
_TUPLE_FIELDS = frozenset(("tags", "paths", "commits"))
_TEXT_FIELDS = _KEY_SET - _TUPLE_FIELDS - {"author", "schema"}
_REQUIRED = ("id", "type", "status", "text", "source", "created")


_AUTHORS: Dict[Tuple[Any, ...], Author] = {}
_CHECKED: Dict[Author, None] = {}  # authors that passed validate's checks


def author_of(name: Any, email: Any, kind: Any) -> Author:
    """The :class:`Author` of these fields, one object per distinct author: a store's memories share a
    few, and a cold start reads 100,000 (validate then checks each author once, not once a memory)."""
    try:
        found = _AUTHORS.get((name, email, kind))
    except TypeError:  # not hashable, so not text: named below
        found = None
    if found is None:
        found = Author(name=_expect_str("author.name", name), email=_expect_str("author.email", email),
                       kind=_expect_str("author.kind", kind))
        if len(_AUTHORS) >= 4096:
            _AUTHORS.clear()
        _AUTHORS[(name, email, kind)] = found
    return found


def _expect_str(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidMemory(name, f"expected text, got {type(value).__name__}")
    return value


def check_types(changes: Mapping[str, Any]) -> None:
    """Each new value of ``changes`` (field -> value) of its field's type, else :class:`InvalidMemory` naming it:
    what a person saved in $EDITOR is YAML, and ``text: [1, 2]`` or ``tags: 5`` must be one line, not a
    traceback where the value is first used as text (a mapping of paths is not taken as its keys either)."""
    for name, value in changes.items():
        if name in _TUPLE_FIELDS:
            if value is not None and not isinstance(value, (list, tuple)):
                raise InvalidMemory(name, "expected a list of strings")
            for item in value or ():
                _expect_str(name, item)
        elif name == "author":
            if not isinstance(value, Author):
                raise InvalidMemory(name, "expected a mapping with name, email, kind")
        elif name in _TEXT_FIELDS and (value is not None or name in _REQUIRED):
            _expect_str(name, value)


def check_text(name: str, value: str, limit: int = MAX_TEXT_BYTES) -> None:
    """Text must be valid UTF-8 (no lone surrogates), not blank, and under the cap."""
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidMemory(name, "not valid UTF-8") from None
    if "\x00" in value:
        raise InvalidMemory(name, "contains a NUL byte")
    if not value.strip():
        raise InvalidMemory(name, "must not be empty")
    if size > limit:
        raise InvalidMemory(name, f"{size} bytes is over the {limit}-byte limit")


def check_path(path: str) -> str:
    """Paths are repository-relative, POSIX, normalised, and never climb out."""
    if not path or len(path) > MAX_PATH_CHARS or "\x00" in path or "\n" in path:
        raise InvalidMemory("paths", f"{path[:80]!r} is not a usable path")
    p = path.replace("\\", "/")
    if p.startswith("/") or _DRIVE_RE.match(p):
        raise InvalidMemory("paths", f"{path!r} must be relative to the repository root")
    parts = [x for x in p.split("/") if x not in ("", ".")]
    if not parts or ".." in parts:
        raise InvalidMemory("paths", f"{path!r} must stay inside the repository")
    return "/".join(parts)


def inside_repository(path: str, typed: Optional[str] = None) -> str:
    """``path``, relative to the repository root, normalised (``src/../docs`` is ``docs``), as every interface reads a
    path filter; ``typed``: how it was given, for the message. Raises :class:`GitmemError` when it is absolute or
    climbs out: such a filter can match nothing, and saying so beats answering "0 memories"."""
    p = posixpath.normpath(path)
    if p == ".." or p.startswith(("../", "/")):
        raise GitmemError(f"invalid path {typed or path!r}: must stay inside the repository")
    return p


def check_new_path(path: str) -> str:
    """:func:`check_path` for a path a write gives a memory, which names a file of the work tree: never one in
    ``.git`` (git tracks no path with a ``.git`` part, in any case). Stored memories are not held to it
    (:func:`validate`), so one written before still loads."""
    p = check_path(path)
    if any(part.casefold() == ".git" for part in p.split("/")):
        raise InvalidMemory("paths", f"{path!r} is inside .git: a memory's paths name files of the work tree")
    return p


def filter_path(path: str) -> Optional[str]:
    """``path`` as a filter or a file in play names stored paths, in :func:`check_path`'s form (``./src//x.py``
    is ``src/x.py``), so every interface reads one the same way; None for a path no memory can have (empty,
    absolute, outside the repository), which matches nothing."""
    try:
        return check_path(path)
    except InvalidMemory:
        return None


def validate(m: Memory) -> None:
    """Raise :class:`InvalidMemory` naming the first problem found."""
    if m.schema != SCHEMA_VERSION:
        raise InvalidMemory("schema", f"version {m.schema} is not supported by this gitmem", [str(SCHEMA_VERSION)])
    if not isinstance(m.id, str) or not ID_RE.match(m.id):
        raise InvalidMemory("id", f"{str(m.id)[:40]!r} is not a gitmem id (16 chars of 0-9 a-z without i l o u)")
    if m.type not in TYPES:
        raise InvalidMemory("type", f"unknown type {m.type!r}", TYPES)
    if m.status not in STATUSES:
        raise InvalidMemory("status", f"unknown status {m.status!r}", STATUSES)
    check_text("text", m.text)
    if m.title is not None:
        check_text("title", m.title, MAX_TITLE_CHARS * 4)
        if "\n" in m.title or len(m.title) > MAX_TITLE_CHARS:
            raise InvalidMemory("title", f"must be one line of at most {MAX_TITLE_CHARS} characters")
    if m.reason is not None:
        check_text("reason", m.reason)
    if m.type == "rejection" and not (m.reason and m.reason.strip()):
        raise InvalidMemory("reason", "a rejection needs the reason it was turned down", option="--because")
    if len(m.tags) > MAX_ITEMS or len(m.paths) > MAX_ITEMS or len(m.commits) > MAX_ITEMS * 16:
        name = "tags" if len(m.tags) > MAX_ITEMS else "paths" if len(m.paths) > MAX_ITEMS else "commits"
        raise InvalidMemory(name, f"at most {MAX_ITEMS} items")
    for tag in m.tags:
        if not _TAG_RE.match(tag):
            raise InvalidMemory("tags", f"{tag[:40]!r}: a tag starts with a letter or digit (any script) and has only "
                                          "letters, digits and _ . : / + - (at most 64)")
    for path in m.paths:
        if check_path(path) != path:
            raise InvalidMemory("paths", f"{path!r} is not normalised")
    if m.type == "file" and not m.paths:
        raise InvalidMemory("paths", "a file memory needs the path it summarises")
    if m.supersedes is not None or m.superseded_by is not None:
        for name in ("supersedes", "superseded_by"):
            value = getattr(m, name)
            if value is not None and not ID_RE.match(value):
                raise InvalidMemory(name, f"{value[:40]!r} is not a gitmem id")
    if m.blob is not None or m.commit is not None:
        for name in ("blob", "commit"):
            value = getattr(m, name)
            if value is not None and not _OID_RE.match(value):
                raise InvalidMemory(name, f"{value[:80]!r} is not a git object id")
    for c in m.commits:
        if not _OID_RE.match(c):
            raise InvalidMemory("commits", f"{c[:80]!r} is not a git commit id")
    if m.next is not None:
        check_text("next", m.next)
    if not isinstance(m.author, Author):
        raise InvalidMemory("author", "expected an Author")
    if m.author not in _CHECKED:
        _check_author(m.author)
        if len(_CHECKED) >= 4096:
            _CHECKED.clear()
        _CHECKED[m.author] = None
    for path in m.paths:
        _check_utf8("paths", path)
    if not _SOURCE_RE.match(m.source or ""):
        raise InvalidMemory("source", f"{(m.source or '')[:40]!r}: {_SOURCE_RULE}")
    for name, value in (("created", m.created), ("updated", m.updated)):
        if value is not None and not _ISO_RE.match(value):
            raise InvalidMemory(name, f"{value[:40]!r} is not a UTC ISO 8601 time like 2026-01-31T12:00:00Z")


def check_source(source: str, where: str) -> None:
    """Refuse a writer's ``source`` as a write would, naming ``where`` it came from (``--source``,
    ``$GITMEM_SOURCE``). Judged, like the write, once redacted: a secret in it is neither refused nor shown."""
    from .redact import redact_bare

    shown = redact_bare(source)[0]
    if not _SOURCE_RE.match(shown):
        raise InvalidMemory(where, f"{shown[:40]!r}: {_SOURCE_RULE}")


def check_email(email: str, where: str) -> None:
    """Refuse a writer's email unless it is ``name@host``, naming ``where`` it came from (``--author``,
    ``$GITMEM_AUTHOR_EMAIL``): the option and the variable follow one rule."""
    if not _EMAIL_RE.match(email):
        from .redact import redact

        raise InvalidMemory(where, f"{redact(email)[0][:60]!r} is not an email address (like you@example.com)")


def check_name(name: str, where: str) -> None:
    """Refuse a writer's name git would read as empty (the commit would fail on it), naming ``where``
    it came from (``--author``, ``$GITMEM_AUTHOR_NAME``)."""
    if not name.strip(_NAME_TRIM):
        raise InvalidMemory(where, f"{name[:40]!r} is no name: git trims control characters, spaces and "
                                   "punctuation from its ends, leaving nothing; give a name such as Ada Lovelace")


def check_kind(kind: str, where: str) -> None:
    if kind not in AUTHOR_KINDS:
        raise InvalidMemory(where, f"unknown kind {kind!r}", AUTHOR_KINDS)


def _check_author(a: Author) -> None:
    check_kind(a.kind, "author.kind")
    check_text("author.name", a.name, 256)
    if not isinstance(a.email, str) or len(a.email) > 256:
        raise InvalidMemory("author.email", "expected text of at most 256 characters")
    _check_utf8("author.email", a.email)
    who = a.name + a.email
    if "<" in who or ">" in who or "\n" in who:
        raise InvalidMemory("author", "name and email must not contain <, > or newlines")


def _check_utf8(name: str, value: str) -> None:
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidMemory(name, "not valid UTF-8") from None


# --- redaction -------------------------------------------------------------

_FREE_TEXT = ("text", "title", "reason", "next")


def redact_memory(m: Memory) -> Tuple[Memory, int]:
    """``m`` with a placeholder in place of every secret in any of its string fields, and how many.

    Every field a person, an agent or a tool can fill goes through here: text, title, reason, next,
    tags, paths, the author's name and email, and the source. Tags and sources get the bare
    placeholder (``REDACTED:<rule>``) their syntax allows. The store calls this before validating a
    write, and :func:`dump_yaml` calls it again, so no blob can hold a raw secret whatever path
    built it. Idempotent: an already redacted memory comes back unchanged, with 0.
    """
    from .redact import redact, redact_bare  # imported by the first write: a read needs no secret rules

    changes: Dict[str, Any] = {}
    count = 0
    for name in _FREE_TEXT:
        value = getattr(m, name)
        if isinstance(value, str):
            out, found = redact(value)
            if found:
                changes[name], count = out, count + len(found)
    for name, fn in (("tags", redact_bare), ("paths", redact)):
        values = getattr(m, name)
        new = []
        for value in values:
            out, found = fn(value) if isinstance(value, str) else (value, [])
            count += len(found)
            new.append(out)
        if tuple(new) != values:
            changes[name] = tuple(dict.fromkeys(new))
    if isinstance(m.author, Author):
        name, found_name = redact(m.author.name) if isinstance(m.author.name, str) else (m.author.name, [])
        email, found_email = redact(m.author.email) if isinstance(m.author.email, str) else (m.author.email, [])
        if found_name or found_email:
            changes["author"] = Author(name, email, m.author.kind)
            count += len(found_name) + len(found_email)
    if isinstance(m.source, str):
        source, found = redact_bare(m.source)
        if found:
            changes["source"], count = source, count + len(found)
    return (m._replace(**changes) if changes else m), count


def redacted_valid(m: Memory) -> Tuple[Memory, int]:
    """``m`` redacted (:func:`redact_memory`) and validated, and how many secrets were redacted. A placeholder
    can be longer than the secret it replaces, so a limit only the redacted text breaks says so."""
    out, count = redact_memory(m)
    try:
        validate(out)
        for name in ("text", "title", "reason"):
            value = getattr(out, name)
            if value and not value.isascii() and not _visible(value):
                raise InvalidMemory(name, "must not be empty (it holds only invisible characters)")
    except InvalidMemory as e:
        if not count:
            raise
        raise InvalidMemory(e.field, f"{e.problem}, once {plural(count, 'secret')} in it had been redacted", e.choices,
                            option=e.option) from None
    return out, count


def _visible(text: str) -> bool:
    """Whether ``text`` has a character one can see: a zero-width space or a byte-order mark alone is blank, yet
    ``str.strip`` keeps it. Asked of new writes only: a stored memory reads the same as it always has."""
    import unicodedata  # here: ASCII text, most of it, never needs it

    return any(not c.isspace() and unicodedata.category(c) not in ("Cf", "Cc", "Zs") for c in text)


# --- YAML ------------------------------------------------------------------

@lru_cache(maxsize=1)
def _dumper() -> Any:
    """The safe dumper (the C one where PyYAML has it), writing multi-line text as literal blocks.
    Built on first use: reading memories that the index already knows needs no YAML at all."""
    import yaml

    class Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
        pass

    def literal_blocks(dumper: Any, value: str) -> Any:
        style = "|" if "\n" in value and not any(c in value for c in "\r\t") and value == value.rstrip(" ") else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, literal_blocks)
    return Dumper


def dump_yaml(m: Memory) -> bytes:
    """The stored form of ``m``: the only way a memory becomes a blob, so it redacts (again)."""
    import yaml

    m = redact_memory(m)[0]
    return yaml.dump(
        m.to_dict(), Dumper=_dumper(), sort_keys=False, default_flow_style=False,
        allow_unicode=True, width=100,
    ).encode("utf-8")


def version(m: Memory) -> str:
    """A short fingerprint of ``m`` as stored: a form carries the one it showed, so a write can tell
    whether the memory changed since (:class:`~gitmem.errors.Changed`)."""
    import hashlib

    return hashlib.sha1(dump_yaml(m)).hexdigest()[:16]


@lru_cache(maxsize=1)
def safe_loader() -> Any:
    """PyYAML's safe loader class (its C one where PyYAML was built with libyaml, imported on first use),
    refusing a mapping that names a key twice: PyYAML keeps the last, so a planted blob could show a
    reviewer one ``text:`` near its top and have gitmem read another further down."""
    import yaml

    class Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]  # chosen at run time
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen = set()
            for key, _ in node.value:
                if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                    if (key.tag, key.value) in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"found duplicate key {key.value[:40]!r}", key.start_mark)
                    seen.add((key.tag, key.value))
            return super().construct_mapping(node, deep=deep)

    return Loader


def safe_load(text: str) -> Any:
    """``text`` read by the safe loader: the reference :func:`load_own_yaml` agrees with."""
    import yaml

    return yaml.load(text, Loader=safe_loader())


def load_yaml(data: bytes) -> Memory:
    """Parse one stored blob, safely: size-capped, UTF-8 checked, safe loader."""
    if len(data) > MAX_BLOB_BYTES:
        raise InvalidMemory("document", f"{len(data)} bytes is over the {MAX_BLOB_BYTES}-byte limit")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidMemory("document", f"not valid UTF-8 at byte {e.start}") from None
    parsed = load_own_yaml(text)
    if parsed is None:
        import yaml

        try:
            parsed = safe_load(text)
        except yaml.YAMLError as e:
            raise InvalidMemory("document", f"not valid YAML: {str(e).splitlines()[0]}") from None
    return Memory.from_dict(parsed)


# --- the blobs gitmem writes, read without the YAML machinery --------------------------
#
# A first command after a clone parses every blob, and the safe loader builds each one through
# Python-level constructors (about 3/4 of a cold start). dump_yaml writes a small, regular subset
# of YAML; load_own_yaml reads exactly that subset and answers None for anything else, which the
# safe loader then reads. Whatever it accepts, it reads as the safe loader does (a property test
# compares the two on generated and on mutated blobs).

_OWN_KEY = re.compile(r"[a-z_]+")
_OWN_ID = re.compile(r"[0-9a-z]+")
_YAML_WORDS = frozenset("yes Yes YES no No NO true True TRUE false False FALSE on On ON off Off OFF "
                        "null Null NULL".split())


_SCALARS: Dict[str, Optional[str]] = {}  # short ones, read before: types, statuses, authors, sources, tags, paths
_UNREAD: Any = object()


def _own_scalar(value: str) -> Optional[str]:
    """A one-line scalar as the safe loader reads it, or None when it may mean more than a string:
    a single-quoted string, or a plain one that starts with a letter and holds nothing YAML reads."""
    found = _SCALARS.get(value, _UNREAD)
    if found is _UNREAD:
        found = _read_scalar(value)
        if len(value) <= 80:  # most of a blob's scalars repeat across a store; its text does not
            if len(_SCALARS) >= 8192:
                _SCALARS.clear()
            _SCALARS[value] = found
    return found


def _read_scalar(value: str) -> Optional[str]:
    first = value[:1]
    if first == "'":
        if len(value) < 2 or value[-1] != "'":
            return None
        inner = value[1:-1]
        if "'" in inner:
            if "'" in inner.replace("''", ""):
                return None
            inner = inner.replace("''", "'")
        return inner if inner.isprintable() else None
    if first.isdigit():  # an id: digits and lowercase letters, never a number (no 0x or 0b prefix)
        ok = _OWN_ID.fullmatch(value) is not None and not value.isdigit() and not value.startswith(("0x", "0b"))
        return value if ok else None
    if not first.isalpha() or not value.isprintable() or value in _YAML_WORDS:
        return None
    if ": " in value or " #" in value or value[-1] in ": ":
        return None
    return value


_AUTHOR_KEYS = frozenset(("name", "email", "kind"))


def _own_key(key: str) -> bool:
    """A mapping key as dump_yaml writes one: lowercase letters and underscores."""
    return key in _KEY_SET or key in _AUTHOR_KEYS or _OWN_KEY.fullmatch(key) is not None


def _own_block(lines: List[str], start: int, header: str) -> Optional[Tuple[str, int]]:
    """A ``|``/``|-``/``|+`` literal block (indented two spaces) from ``lines[start:]``: its text and
    the index of the first line after it; None for any other shape."""
    if header not in ("|", "|-", "|+"):
        return None
    body: List[str] = []
    end = start
    while end < len(lines) and (lines[end].startswith("  ") or lines[end] == ""):
        body.append(lines[end][2:])
        end += 1
    first = next((b for b in body if b), None)
    if first is None or first[0] == " " or any(not b.isprintable() for b in body):
        return None
    trailing = len(body) - len(list(itertools.dropwhile(lambda b: b == "", reversed(body))))
    text = "\n".join(body[:len(body) - trailing])
    if header == "|":
        text += "\n"
    elif header == "|+":
        text += "\n" * (trailing + 1)
    return text, end


def load_own_yaml(text: str) -> Optional[Dict[str, Any]]:
    """The document as :func:`yaml.safe_load` reads it, if it is written the way :func:`dump_yaml`
    writes; else None (the caller uses the safe loader). A line is split at its first ": " (a key
    holds none), not matched by a pattern: this runs once per blob on a cold start."""
    if not text.endswith("\n"):
        return None
    lines = text[:-1].split("\n")
    n = len(lines)
    out: Dict[str, Any] = {}
    i = 0
    while i < n:
        key, sep, value = lines[i].partition(": ")
        i += 1
        if not sep:  # "key:" alone: a list of scalars, or the author's mapping
            if key[-1:] != ":":
                return None
            key = key[:-1]
        if key in out or (key not in _KEY_SET and not _own_key(key)):  # the usual keys without a call
            return None
        if not sep:
            if key == "author":
                author: Dict[str, Any] = {}
                while i < n and lines[i][:2] == "  ":
                    name, sep, inner = lines[i][2:].partition(": ")
                    scalar = _own_scalar(inner) if sep and name not in author and _own_key(name) else None
                    if scalar is None:
                        return None
                    author[name] = scalar
                    i += 1
                if not author:
                    return None
                out[key] = author
                continue
            items: List[Any] = []
            while i < n and lines[i][:2] == "- ":
                scalar = _own_scalar(lines[i][2:])
                if scalar is None:
                    return None
                items.append(scalar)
                i += 1
            if not items:
                return None
            out[key] = items
        elif value[:1] == "|":
            block = _own_block(lines, i, value)
            if block is None:
                return None
            out[key], i = block
        elif key == "schema" and value.isdigit() and value.isascii() and value[0] != "0" and len(value) < 10:
            out[key] = int(value)
        else:
            if i < n and lines[i][:2] == "  ":  # a long scalar, wrapped at the dumper's width
                value, i = _own_wrapped(lines, i, value)
            scalar = _own_scalar(value)
            if scalar is None:
                return None
            out[key] = scalar
    return out


def _own_wrapped(lines: List[str], start: int, first: str) -> Tuple[str, int]:
    """A scalar the dumper wrapped (``first``, continued on ``lines[start:]``, each indented two spaces)
    as one line, and the index of the line after it. The dumper breaks a line only at a single space,
    which YAML folds back into one; this reads only that shape: no empty line, no space before a break
    or after an indent (YAML drops those), and, unquoted, every continuation starting with a letter or
    digit. Anything else gives a value :func:`_own_scalar` refuses. Most decisions and rejections are
    longer than a line: without this each one went to the safe loader, 8 times slower."""
    parts = [first]
    end = start
    while end < len(lines) and lines[end][:2] == "  ":
        part = lines[end][2:]
        if not part or part[0] in " \t" or parts[-1][-1:] in (" ", "\t") or (first[:1] != "'" and not part[0].isalnum()):
            return "", end
        parts.append(part)
        end += 1
    return " ".join(parts), end


#: The folder beside the type folders where a merge keeps the conflicts it could not settle
#: (``conflicts/<id>.yaml``, see :mod:`gitmem.records`).
CONFLICTS_DIR = "conflicts"


def memory_path(m_or_type: Any, memory_id: Optional[str] = None) -> str:
    """Where a memory lives in the tree: ``<type>/<id[-2]>/<id[-1]>/<id>.yaml``.

    The fan-out uses the random tail (not the time-ordered head), so memories
    written close together spread over 32 x 32 buckets; one write then rewrites
    a bucket, two 32-entry trees and the root, even at 100,000 memories.
    """
    if memory_id is None:
        m_or_type, memory_id = m_or_type.type, m_or_type.id
    return f"{m_or_type}/{memory_id[-2]}/{memory_id[-1]}/{memory_id}.yaml"


def source_matches(source: str, wanted: Optional[str]) -> bool:
    """One ``--source`` rule for every command: a source matches itself and its
    ``<source>:...`` family (``mcp`` matches ``mcp:cursor``)."""
    return wanted is None or source == wanted or source.startswith(wanted + ":")


def origin_matches(kind: str, source: str, author_kind: Optional[str], wanted: Optional[str]) -> bool:
    """The list filters on who wrote a memory: its author's ``kind`` is ``author_kind`` (None: any) and its
    ``source`` matches ``wanted`` (:func:`source_matches`). The derived index answers them from these two
    fields alone (:meth:`gitmem.postings.IndexedMemories.origins`)."""
    return (author_kind is None or kind == author_kind) and source_matches(source, wanted)


def matches(m: Memory, *, type: Optional[str] = None, tag: Optional[str] = None,
            path: Optional[str] = None, author_kind: Optional[str] = None,
            source: Optional[str] = None, status: Optional[str] = "active") -> bool:
    """The list filters, shared by every interface. ``path`` matches a memory's
    path exactly or as a directory prefix in either direction."""
    if type is not None and m.type != type:
        return False
    if status is not None and m.status != status:
        return False
    if tag is not None and tag not in m.tags:
        return False
    if not origin_matches(m.author.kind, m.source, author_kind, source):
        return False
    if path is not None:
        p = filter_path(path)
        if p is None or not any(q == p or q.startswith(p + "/") or p.startswith(q + "/") for q in m.paths):
            return False
    return True


def check_choice(name: str, value: Optional[str], choices: Iterable[str]) -> None:
    choices = tuple(choices)
    if value is not None and value not in choices:
        raise InvalidMemory(name, f"unknown {name} {value!r}", choices)


class Problem(NamedTuple):
    """Something `doctor` found; ``level`` is "error" or "warning"."""

    level: str
    where: str
    message: str

    def to_dict(self) -> Dict[str, str]:
        return {"level": self.level, "where": self.where, "message": self.message}


def parse_memory(data: bytes, path: str) -> Memory:
    """Parse and validate one memory blob, refusing one stored under the wrong path."""
    memory = parse_content(data, path)
    if memory_path(memory) != path:
        raise misplaced(memory, path)
    return memory


def parse_content(data: bytes, path: str) -> Memory:
    """Parse and validate one memory blob's content (``path`` only names it in errors): what holds of the
    blob wherever it sits. Where it sits is :func:`misplaced`'s to judge: the same blob may be a memory at
    its own path and a stray copy at another's."""
    try:
        return load_yaml(data)
    except InvalidMemory as e:
        raise InvalidMemory(f"{path}: {e.field}", e.problem, e.choices, option=e.option) from None


def misplaced(memory: Memory, path: str) -> InvalidMemory:
    return InvalidMemory(path, f"stored under the wrong path (expected {memory_path(memory)})")
