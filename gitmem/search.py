"""Relevance: the one ranking behind `search`, MCP `recall`, `check_proposal` and the context tail.

Pure functions over plain data (the two helpers at the end read the
repository through a :class:`~gitmem.store.Store`, without importing pygit2):

- lexical relevance is BM25 over title (counted twice), text, reason, tags and
  paths, on lightly stemmed words with common abbreviations expanded, so
  "queues"/"queue" and "db"/"database" meet;
- memories about the files in play (the query's paths, or the current diff)
  are boosted, and a memory that only shares a path still shows up, below the
  lexical matches;
- ``types_first`` boosts types (rejections and decisions for proposals);
- newer memories get a small boost, so between two equal matches the newer wins;
- superseded and retracted memories are left out unless asked for;
- a ``file`` memory whose file's current blob differs from the blob it was
  written against is flagged ``stale`` (and ranked a little lower).

The index over a pool of memories is built once and reused while the pool is
unchanged (same memories, same order), so repeated queries over 10,000
memories cost only the postings they touch.
"""

from __future__ import annotations

import calendar
import heapq
import math
import re
from collections import Counter, OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from datetime import datetime, timezone
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from .model import Memory
from .repo import current_blob

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an and are as at be by can could do does for from has have how i if in into is it its let lets "
    "like me maybe of on or our should so that the then there these this those to us want was we what "
    "when where which why will with would you".split()
)
# Abbreviations and spellings that name the same thing in code and prose.
_ALIASES = {
    "db": "database", "dbs": "database", "repo": "repository", "repos": "repository",
    "config": "configuration", "cfg": "configuration", "conf": "configuration",
    "auth": "authentication", "authn": "authentication", "k8s": "kubernetes",
    "pg": "postgres", "postgresql": "postgres", "psql": "postgres", "deps": "dependency",
    "dep": "dependency", "env": "environment", "envs": "environment", "js": "javascript",
    "ts": "typescript", "perf": "performance", "msg": "message", "msgs": "message",
    "impl": "implementation", "docs": "documentation", "doc": "documentation", "creds": "credential",
    "pw": "password", "pwd": "password", "ui": "frontend", "async": "asynchronous",
    "tz": "timezone", "ttl": "expiry", "expiration": "expiry", "mq": "queue",
}
_SUFFIXES = (("ies", "y"), ("ied", "y"), ("ying", "y"), ("ing", ""), ("ation", ""), ("ate", ""), ("ion", ""), ("ed", ""))


@lru_cache(maxsize=65536)  # a store's vocabulary is small; indexing 10,000 memories stems ~200,000 words
def stem(word: str) -> str:
    """A deliberately small stemmer: plural, -ing/-ed/-ion and a final -e go."""
    word = _ALIASES.get(word, word)
    if len(word) <= 3 or word.isdigit():
        return word
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix, repl in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + repl
            break
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


def tokenize(text: str) -> List[str]:
    return [stem(w) for w in _WORD.findall(text.lower()) if w not in _STOP]


def memory_terms(m: Memory) -> List[str]:
    title = m.title or ""
    parts = [title, title, m.text, m.reason or "", " ".join(m.tags), " ".join(m.paths)]
    return tokenize(" ".join(parts))


@dataclass(frozen=True)
class Hit:
    """A ranked memory. ``match`` (0-1) is how much of the query's and the memory's
    distinctive words they share; ``stale`` says a file memory no longer
    describes the file as it is now."""

    memory: Memory
    score: float
    match: float = 0.0
    stale: bool = False

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"score": round(self.score, 4), "match": round(self.match, 3)}
        if self.stale:
            out["stale"] = True
        out["memory"] = self.memory.to_dict()
        return out


class _Index:
    """Term counts, lengths and postings for one pool of memories."""

    def __init__(self, memories: Sequence[Memory]):
        self.docs = list(memories)
        self.counts = [_terms(m) for m in self.docs]
        self.lengths = [sum(c.values()) for c in self.counts]
        self.avg = (sum(self.lengths) / len(self.docs)) if self.docs else 1.0
        self.postings: Dict[str, List[int]] = {}
        for i, counts in enumerate(self.counts):
            for t in counts:
                self.postings.setdefault(t, []).append(i)
        self._core: Dict[int, float] = {}

    def idf(self, term: str) -> float:
        n, df = len(self.docs), len(self.postings.get(term, ()))
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def core_mass(self, i: int) -> float:
        """Weight of the words saying *what* a memory is about (title and text)."""
        if i not in self._core:
            m = self.docs[i]
            self._core[i] = sum(self.idf(t) for t in set(tokenize(f"{m.title or ''} {m.text}")))
        return self._core[i]


_TERMS: Dict[Memory, Counter] = {}
_INDEXES: "OrderedDict[Tuple[int, ...], _Index]" = OrderedDict()


def _terms(m: Memory) -> Counter:
    counts = _TERMS.get(m)
    if counts is None:
        if len(_TERMS) > 200_000:
            _TERMS.clear()
        counts = _TERMS[m] = Counter(memory_terms(m))
    return counts


def _index(memories: Sequence[Memory]) -> _Index:
    # Keyed by object identity: the cached index holds its memories, so while an entry
    # exists none of its ids can be reused, and identity is far cheaper than hashing
    # every field of 10,000 memories per query.
    key = tuple(map(id, memories))
    index = _INDEXES.get(key)
    if index is None:
        index = _INDEXES[key] = _Index(memories)
        while len(_INDEXES) > 4:
            _INDEXES.popitem(last=False)
    else:
        _INDEXES.move_to_end(key)
    return index


TYPE_BOOST = {"rejection": 1.6, "decision": 1.3}
PROPOSAL_TYPES = ("rejection", "decision")
STALE_FACTOR = 0.8
#: A proposal must share this much (see :attr:`Hit.match`) with a rejection to count as "already rejected".
PROPOSAL_MATCH_FLOOR = 0.35


def rank(memories: Iterable[Memory], query: str = "", limit: int = 10, *, paths: Sequence[str] = (),
         types_first: Sequence[str] = (), include_inactive: bool = False,
         blobs: Optional[Mapping[str, Optional[str]]] = None, now: Optional[datetime] = None,
         k1: float = 1.2, b: float = 0.75) -> List[Hit]:
    """The best ``limit`` memories for ``query`` and/or ``paths``, best first; ties by newest.

    ``blobs`` maps a path to its current blob id (None: the file is gone) and
    is used to flag stale ``file`` memories; ``now`` fixes the recency clock.
    """
    pool = [m for m in memories if include_inactive or m.status == "active"]
    index = _index(pool)
    terms = list(dict.fromkeys(tokenize(query)))
    wanted = [p.strip("/") for p in paths if p and p.strip("/")]
    if not index.docs or not (terms or wanted):
        return []
    now = now or datetime.now(timezone.utc)
    scores: Dict[int, float] = {}
    matched: Dict[int, float] = {}
    for t in terms:
        idf = index.idf(t)
        for i in index.postings.get(t, ()):
            tf = index.counts[i][t]
            norm = k1 * (1 - b + b * index.lengths[i] / index.avg)
            scores[i] = scores.get(i, 0.0) + idf * tf * (k1 + 1) / (tf + norm)
            matched[i] = matched.get(i, 0.0) + idf
    # Words no memory uses say nothing about which memory matches (and would make every
    # match look weak in a small store), so only known words count towards the query's weight.
    query_mass = sum(index.idf(t) for t in terms if t in index.postings)
    if wanted:
        # A memory that only shares a path scores at most half the weakest lexical match.
        floor = min(scores.values()) if scores else 1.0
        for i, m in enumerate(index.docs):
            overlap = path_overlap(m.paths, wanted)
            if overlap:
                scores[i] = scores[i] * (1 + 0.6 * overlap) if i in scores else 0.5 * overlap * floor
    boosts = {t: TYPE_BOOST.get(t, 1.2) for t in types_first}
    hits: List[Hit] = []
    for i, score in scores.items():
        m = index.docs[i]
        stale = is_stale(m, blobs)
        score *= boosts.get(m.type, 1.0) * _recency(m, now) * (STALE_FACTOR if stale else 1.0)
        mass = matched.get(i, 0.0)
        match = 2 * mass / (query_mass + index.core_mass(i)) if mass else 0.0
        hits.append(Hit(m, score, min(match, 1.0), stale))
    return heapq.nsmallest(limit, hits, key=lambda h: (-h.score, _neg(h.memory.id)))


def check_proposal(memories: Iterable[Memory], proposal: str, *, paths: Sequence[str] = (), limit: int = 5,
                   now: Optional[datetime] = None) -> List[Hit]:
    """Earlier rejections that match ``proposal``, best first; empty when none is close enough."""
    rejections = [m for m in memories if m.type == "rejection"]
    hits = rank(rejections, proposal, limit=limit, paths=paths, now=now)
    return [h for h in hits if h.match >= PROPOSAL_MATCH_FLOOR]


def rejection_summary(h: Hit) -> Dict[str, Any]:
    """What an agent needs to know about a matching rejection (the MCP and CLI shape)."""
    m = h.memory
    return {"id": m.id, "proposal": m.text, "reason": m.reason, "author": m.author.name,
            "kind": m.author.kind, "source": m.source, "when": m.created, "match": round(h.match, 2)}


def path_overlap(mine: Sequence[str], wanted: Sequence[str]) -> float:
    """1.0 for the same file, 0.5 when one contains the other, 0.25 for the same directory."""
    best = 0.0
    for p in mine:
        for q in wanted:
            if p == q:
                return 1.0
            if p.startswith(q + "/") or q.startswith(p + "/"):
                best = max(best, 0.5)
            elif "/" in p and p.rsplit("/", 1)[0] == q.rsplit("/", 1)[0]:
                best = max(best, 0.25)
    return best


def is_stale(m: Memory, blobs: Optional[Mapping[str, Optional[str]]]) -> bool:
    """A file memory is stale when its file's current blob is not the one it was written against."""
    if m.type != "file" or not m.blob or not m.paths or blobs is None or m.paths[0] not in blobs:
        return False
    return blobs[m.paths[0]] != m.blob


def _recency(m: Memory, now: datetime) -> float:
    """Up to +15%, halving every 180 days."""
    when = _epoch(m.updated or m.created)
    if when is None:
        return 1.0
    age_days = max((now.timestamp() - when) / 86400.0, 0.0)
    return 1.0 + 0.15 * 0.5 ** (age_days / 180.0)


@lru_cache(maxsize=65536)
def _epoch(stamp: Optional[str]) -> Optional[float]:
    """Seconds since the epoch of a stored ``YYYY-MM-DDTHH:MM:SSZ`` time (memoised: strptime is slow)."""
    try:
        return calendar.timegm((int(stamp[0:4]), int(stamp[5:7]), int(stamp[8:10]),  # type: ignore[index]
                                int(stamp[11:13]), int(stamp[14:16]), int(stamp[17:19]), 0, 0, 0))
    except (TypeError, ValueError):
        return None


def _neg(memory_id: str) -> Sequence[int]:
    return [-ord(c) for c in memory_id]


# --- inputs read from the repository -------------------------------------------


def changed_paths(store: Any) -> List[str]:
    """Paths changed in the working tree or index (the "current diff"), sorted."""
    repo = store.repo
    if repo.is_bare:
        return []
    try:
        status = repo.status(untracked_files="normal")
    except Exception:  # noqa: BLE001 - a broken index must not stop a recall
        return []
    ignored = 1 << 14  # GIT_STATUS_IGNORED
    return sorted(p for p, flags in status.items() if not flags & ignored)


def current_blobs(store: Any, memories: Iterable[Memory]) -> Dict[str, Optional[str]]:
    """Current blob id of every path a file memory is tied to (working file, else HEAD)."""
    out: Dict[str, Optional[str]] = {}
    for m in memories:
        if m.type == "file" and m.blob and m.paths and m.paths[0] not in out:
            out[m.paths[0]] = current_blob(store.repo, m.paths[0])
    return out


def recall(store: Any, query: str = "", *, type: Optional[str] = None, paths: Optional[Sequence[str]] = None,
           limit: int = 10, include_inactive: bool = False, types_first: Sequence[str] = ()) -> List[Hit]:
    """Rank the store's memories; ``paths=None`` means the paths of the current diff."""
    pool = [m for _, m in sorted(store.memories().items()) if type is None or m.type == type]
    if paths is None:
        paths = changed_paths(store)
    return rank(pool, query, limit, paths=paths, types_first=types_first,
                include_inactive=include_inactive, blobs=current_blobs(store, pool))
