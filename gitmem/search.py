"""Relevance: the one ranking behind `search`, MCP `recall`, `check_proposal` and the context tail.

Pure functions over plain data (the two helpers at the end read the
repository through a :class:`~gitmem.store.Store`, without importing pygit2):

- lexical relevance is BM25 over title (counted twice), text, reason, tags and
  paths, on lightly stemmed words with common abbreviations expanded and accents (and Hebrew and Arabic
  points) folded, identifiers split into their words, so "queues"/"queue", "db"/"database", "café"/"cafe"
  and "retryPolicy"/"retry policy" meet;
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

import heapq
import math
import re
from collections import Counter, OrderedDict
from datetime import date, datetime, timezone
from functools import lru_cache
from typing import (AbstractSet, Any, Callable, Dict, Hashable, Iterable, List, Mapping, NamedTuple, Optional,
                    Sequence, Tuple, TypeVar)

from .model import Memory, filter_path

K = TypeVar("K", bound=Hashable)

# Words by Unicode rules: runs of letters and digits in any script; "-" or "_" inside a word also
# joins its parts into one compound term ("end-to-end" is "end", "to", "end" and "endtoend").
_WORD = re.compile(r"[^\W_]+(?:[-_][^\W_]+)*")
# The same for text that is not ASCII, with the combining marks (Unicode Mn, Mc, Me) that follow a letter: the vowel
# signs and viramas of Indic scripts, Thai's vowels and tones, Hebrew points, Arabic harakat, accents NFC has no
# letter for ("n" + U+0308). Without them "हिन्दी" is three words, "ह", "न" and "द". A pattern compiled on first use
# (~0.7 ms), apart from _WORD: ASCII text has no marks, and the class slows matching it by half.
# _MARKS was generated with Python 3.11's unicodedata (Unicode 14.0.0); a range runs on over the letters, digits and
# unassigned code points between marks (a word takes those anyway), so it is 128 ranges, not 299:
#     out, start, last = [], None, None
#     for c in range(0x110000):
#         cat = unicodedata.category(chr(c))
#         if cat in ("Mn", "Mc", "Me"):
#             start, last = c if start is None else start, c
#         elif start is not None and cat[0] not in "LN" and cat != "Cn":
#             out.append((start, last)); start = None
#     esc = lambda c: f"\\u{c:04x}" if c < 0x10000 else f"\\U{c:08x}"
#     print("".join(esc(a) + (f"-{esc(b)}" if b > a else "") for a, b in out))
_MARKS = (r"\u0300-\u036f\u0483-\u0489\u0591-\u05bd\u05bf\u05c1-\u05c2\u05c4-\u05c5\u05c7\u0610-\u061a\u064b-\u065f\u0670"
          r"\u06d6-\u06dc\u06df-\u06e8\u06ea-\u06ed\u0711-\u07f3\u07fd\u0816-\u082d\u0859-\u085b\u0898-\u08e1\u08e3-\u0963"
          r"\u0981-\u09e3\u09fe-\u0a75\u0a81-\u0ae3\u0afa-\u0b63\u0b82-\u0bd7\u0c00-\u0c63\u0c81-\u0c83\u0cbc-\u0d4d"
          r"\u0d57-\u0d63\u0d81-\u0df3\u0e31-\u0e3a\u0e47-\u0e4e\u0eb1-\u0ecd\u0f18-\u0f19\u0f35\u0f37\u0f39\u0f3e-\u0f84"
          r"\u0f86-\u0fbc\u0fc6\u102b-\u103e\u1056-\u109d\u135d-\u135f\u1712-\u1734\u1752-\u17d3\u17dd\u180b-\u180d"
          r"\u180f-\u193b\u1a17-\u1a1b\u1a55-\u1a7f\u1ab0-\u1b44\u1b6b-\u1b73\u1b80-\u1bf3\u1c24-\u1c37\u1cd0-\u1cd2"
          r"\u1cd4-\u1dff\u20d0-\u20f0\u2cef-\u2cf1\u2d7f-\u2dff\u302a-\u302f\u3099-\u309a\ua66f-\ua672\ua674-\ua67d"
          r"\ua69e-\ua6f1\ua802-\ua827\ua82c\ua880-\ua8c5\ua8e0-\ua8f1\ua8ff-\ua92d\ua947-\ua953\ua980-\ua9c0\ua9e5-\uaa4d"
          r"\uaa7b-\uaac1\uaaeb-\uaaef\uaaf5-\uaaf6\uabe3-\uabea\uabec-\uabed\ufb1e\ufe00-\ufe0f\ufe20-\ufe2f"
          r"\U000101fd-\U0001037a\U00010a01-\U00010a3f\U00010ae5-\U00010ae6\U00010d24-\U00010eac\U00010f46-\U00010f50"
          r"\U00010f82-\U00010f85\U00011000-\U00011046\U00011070-\U000110ba\U000110c2\U00011100-\U00011134"
          r"\U00011145-\U00011173\U00011180-\U000111c0\U000111c9-\U000111cc\U000111ce-\U000111cf\U0001122c-\U00011237"
          r"\U0001123e\U000112df-\U00011446\U0001145e-\U000114c3\U000115af-\U000115c0\U000115dc-\U00011640"
          r"\U000116ab-\U000116b7\U0001171d-\U0001172b\U0001182c-\U0001183a\U00011930-\U00011943\U000119d1-\U000119e0"
          r"\U000119e4-\U00011a3e\U00011a47-\U00011a99\U00011c2f-\U00011c3f\U00011c92-\U00011ef6\U00016af0-\U00016af4"
          r"\U00016b30-\U00016b36\U00016f4f-\U00016f92\U00016fe4-\U00016ff1\U0001bc9d-\U0001bc9e\U0001cf00-\U0001cf46"
          r"\U0001d165-\U0001d169\U0001d16d-\U0001d172\U0001d17b-\U0001d182\U0001d185-\U0001d18b\U0001d1aa-\U0001d1ad"
          r"\U0001d242-\U0001d244\U0001da00-\U0001da36\U0001da3b-\U0001da6c\U0001da75\U0001da84\U0001da9b-\U0001e136"
          r"\U0001e2ae-\U0001e2ef\U0001e8d0-\U0001e94a\U000e0100-\U000e01ef")
_MARKED_WORD = rf"[^\W_]+(?:[{_MARKS}]+[^\W_]*|[-_][^\W_]+)*"
_JOINER = re.compile(r"[-_]")
# Where an identifier's parts meet: a joiner, a capital after a small letter or a digit ("retry|Policy",
# "s3|Bucket"), the last capital of a run before a small letter ("HTTP|Server"), but for a plural's final "s"
# ("JWTs", "APIs" are one word). Digits stay with the letters before them: "utf8" and "k8s" are one word.
# The joiner is kept by the split (None where the parts meet at a hump).
_PARTS = re.compile(r"([-_])|(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])(?![A-Z]s$)")
# Marks a word is the same word without, as search engines fold them: accents on Latin letters, once decomposed
# ("é" is "e" and U+0301); the points of Hebrew and the harakat of Arabic (vowels, gemination, cantillation and
# Quranic signs, which most text leaves out: "הַתּוֹר" is "התור", "مُخَزَّنَة" is "مخزنة"; not the hamza and madda NFC
# puts into a letter), and Arabic's tatweel, which only stretches a line; variation selectors, which choose a
# glyph. Other scripts' marks are part of their spelling and stay (Indic and Thai vowel signs, Cyrillic "й").
# Latin letters Unicode does not decompose are spelt as search engines fold them. A pattern compiled on first use,
# as only words that are not ASCII are folded.
_FOLDED = (r"(?<=[A-Za-z])[\u0300-\u036f]+|[\u0591-\u05c7\u0610-\u061a\u0640\u064b-\u0652\u0656-\u065f\u0670"
           r"\u06d6-\u06ed\ufe00-\ufe0f\U000e0100-\U000e01ef]+")
_LATIN = str.maketrans({"ß": "ss", "ẞ": "SS", "æ": "ae", "Æ": "Ae", "œ": "oe", "Œ": "Oe", "ø": "o", "Ø": "O",
                        "đ": "d", "Đ": "D", "ð": "d", "Ð": "D", "ł": "l", "Ł": "L", "þ": "th", "Þ": "Th",
                        "ħ": "h", "Ħ": "H", "ı": "i"})
# Characters that only guide how a word is drawn or broken at a line's end: the zero-width non-joiner and joiner
# (Persian "می‌خواهم" is one word, typed with or without its ZWNJ; Indic conjuncts), the word joiner, a byte order
# mark, the soft hyphen. Unicode's case folding for identifiers and search (NFKC_Casefold) leaves them out.
_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200c\u200d\u2060\ufeff"))
# Scripts written without spaces between words: indexed as overlapping character pairs, as
# search engines do for Chinese, Japanese and Korean, so any two-character word can be found; Thai, Lao,
# Khmer and Myanmar too (a character there is a letter with its marks). Kept as a pattern: its ranges take
# ~1.6 ms to compile, and ASCII text never needs them (re compiles it on first use).
_UNSPACED = (r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u0e00-\u0e7f\u0e80-\u0eff"
             r"\u1000-\u109f\u1780-\u17ff]+")
STOP_WORDS = frozenset(
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
_SUFFIXES = (("ied", "y"), ("ying", "y"), ("ing", ""), ("ation", ""), ("ate", ""), ("ion", ""), ("ed", ""))
_VOWELS = frozenset("aeiouy")


def stem(word: str) -> str:
    """A deliberately small stemmer: plural, -ing/-ed/-ion and a final -e go, a final -y after a consonant is
    -i (as Porter's: "retry", "retries" and "retried" meet, and so do "cookie" and "cookies"); a number stays
    as it is."""
    return word if word.isdigit() else _stem(word)  # numbers kept out of the cache: a server's would fill it


@lru_cache(maxsize=65536)  # a store's vocabulary is small; indexing 10,000 memories stems ~200,000 words
def _stem(word: str) -> str:
    return _suffixes(_ALIASES.get(word, word))


def _suffixes(word: str) -> str:
    """:func:`stem` without expanding an abbreviation."""
    if len(word) <= 3:
        return word
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix, repl in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + repl
            break
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    elif word.endswith("y") and len(word) > 3 and word[-2] not in _VOWELS:
        word = word[:-1] + "i"  # the plural's "ies" lost its "s" and its "e" above: "retries" is "retri"
    return word


def tokenize(text: str) -> List[str]:
    """Search terms of ``text``: stemmed English words, words of any other script as they are,
    character pairs of unspaced scripts, and identifiers and compounds (``retryPolicy``, ``retry_policy``,
    ``end-to-end``) as their parts, the word the parts spell and the identifier as written (:func:`_identifier`).

    Composed first (NFC), and Latin letters lose their accents (:func:`_fold`): "Café" finds "cafe", and
    "café" typed as e + a combining accent (macOS file names, some keyboards) is the same word. A word holds the
    combining marks after its letters (Indic vowel signs, Hebrew points), and Hebrew and Arabic words lose their
    optional points as Latin ones their accents. Zero-width joiners and soft hyphens inside a word are left out.
    """
    out: List[str] = []
    ascii_text = text.isascii()
    if not ascii_text:
        import unicodedata  # here: a 1 MB extension that ASCII text, most of it, never needs

        text = unicodedata.normalize("NFC", text).translate(_INVISIBLE)
    for word in _WORD.findall(text) if ascii_text else re.findall(_MARKED_WORD, text):
        if not (ascii_text or word.isascii()):
            word = _fold(word)
            if not word:  # a run of tatweel, drawn as a line
                continue
            if not word.isascii():
                out.extend(_script_terms(word.lower()))
                continue
        if (not word.islower() or "-" in word or "_" in word) and not word.isdigit():  # not the common case
            out.extend(_identifier(word))
            continue
        if word not in STOP_WORDS:
            out.append(stem(word))
    return out


@lru_cache(maxsize=65536)  # by word, as the stemmer: a store's vocabulary is small
def _fold(word: str) -> str:
    """``word`` (composed) without its Latin letters' accents ("Café" is "Cafe", "Ørsted" "Orsted", "Straße"
    "Strasse") nor the other marks in :data:`_FOLDED` (Hebrew points, Arabic harakat); other scripts' letters as
    they are (Cyrillic "й", Japanese "が" and Hindi "हिन्दी" stay themselves)."""
    import unicodedata

    return unicodedata.normalize("NFC", re.sub(_FOLDED, "", unicodedata.normalize("NFD", word).translate(_LATIN)))


def _script_terms(word: str) -> List[str]:
    """Terms of a lower-case word not all in Latin letters: its parts (in character pairs where its script is
    written without spaces), and the word they spell when it is a compound."""
    out: List[str] = []
    parts = _JOINER.split(word)
    for part in parts:
        if re.search(_UNSPACED, part):
            out.extend(_pairs(part))
        elif part not in STOP_WORDS:
            out.append(stem(part) if part.isascii() else part)
    if len(parts) > 1:
        out.append("".join(parts))
    return out


@lru_cache(maxsize=65536)  # a capitalised word or an identifier recurs as often as a word: a regex each time is slow
def _identifier(word: str) -> Tuple[str, ...]:
    """Terms of an ASCII word with a capital or a joiner in it. An identifier or compound is its parts
    (stemmed), the word they spell (stemmed, so ``retryPolicy``, ``RetryPolicy``, ``retry_policy`` and
    ``retry-policy`` meet, and "retry policy" finds each), and the identifier as written, so a query naming
    it exactly ranks the memory that holds it first. Case is part of an identifier, but not a capital that
    only starts it ("End-to-end" is "end-to-end"); any other word is the word lower-cased ("Redis", "JWT").

    A part of one letter is no word ("g" of "gRPC", "i" of "iOS", "e" of "e-mail"): the word they spell and
    the identifier as written carry the name. A part it meets at a hump is a fragment of that name, not an
    abbreviation to expand: "OAuth" and "AuthZ" are not about authentication as "authToken" is."""
    pieces = _PARTS.split(word)
    if len(pieces) == 1:
        low = word.lower()
        return () if low in STOP_WORDS else (stem(low),)
    parts = [p.lower() for p in pieces[::2]]
    at_hump = [joiner is None for joiner in pieces[1::2]]
    letters = {i for i, p in enumerate(parts) if len(p) == 1 and p.isalpha()}
    terms = []
    for i, part in enumerate(parts):
        if i in letters or part in STOP_WORDS:
            continue
        named = (i - 1 in letters and at_hump[i - 1]) or (i + 1 in letters and at_hump[i])
        terms.append(_suffixes(part) if named else stem(part))
    return (*terms, stem("".join(parts)), word.lower() if word[1:].islower() else word)


def _pairs(word: str) -> List[str]:
    """Overlapping character pairs of each unspaced run, a character being a letter with the marks after it (Thai
    "กิน" is the pair of "กิ" and "น": a vowel or tone sign on its own would pair with the letters of many words);
    other letters in the word stay words."""
    out: List[str] = []
    for piece in re.split(f"({_UNSPACED})", word):
        if not piece:
            continue
        if re.fullmatch(_UNSPACED, piece):
            chars = piece if piece.isalnum() else re.findall(r"\w\W*", piece)  # in a word, \W is a mark
            out.extend([piece] if len(chars) == 1 else [chars[i] + chars[i + 1] for i in range(len(chars) - 1)])
        elif piece not in STOP_WORDS:
            out.append(stem(piece) if piece.isascii() else piece)
    return out


def memory_terms(m: Memory) -> List[str]:
    title = m.title or ""
    parts = [title, title, m.text, m.reason or "", " ".join(m.tags), " ".join(m.paths)]
    return tokenize(" ".join(parts))


class Hit(NamedTuple):
    """A ranked memory. ``match`` (0-1) is how much of the query's and the memory's
    distinctive words they share; ``similarity`` is the dense encoder's cosine (None
    when recall is lexical); ``stale`` says a file memory no longer describes the
    file as it is now; ``tier`` is set by the proposal check ("repeat" or "related")."""

    memory: Memory
    score: float
    match: float = 0.0
    stale: bool = False
    similarity: Optional[float] = None
    tier: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"score": round(self.score, 4), "match": round(self.match, 3)}
        if self.similarity is not None:
            out["similarity"] = round(self.similarity, 3)
        if self.tier:
            out["tier"] = self.tier
        if self.stale:
            out["stale"] = True
        out["memory"] = self.memory.to_dict()
        return out


class WordIndex:
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
        return idf(len(self.docs), len(self.postings.get(term, ())))

    def core_mass(self, i: int) -> float:
        if i not in self._core:
            self._core[i] = sum(self.idf(t) for t in core_terms(self.docs[i]))
        return self._core[i]


def idf(n: int, df: int) -> float:
    """BM25's word weight among ``n`` memories, ``df`` of which use the word."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def term_score(idf: float, tf: int, length: int, avg: float, k1: float, b: float) -> float:
    """BM25's share of one word in one memory (written once: the index's ranking must agree to the bit)."""
    return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avg))


def core_terms(m: Memory) -> List[str]:
    """The words saying *what* a memory is about (title and text), in a fixed order so their
    weights add up to the same float in every process. An identifier is one word here, the word its parts
    spell (not its parts nor its spelling as written besides), so a memory full of them is not diluted."""
    return sorted({t for t in tokenize(f"{m.title or ''} {m.text}".lower()) if "-" not in t and "_" not in t})


def match_of(mass: float, query_mass: float, core_mass: float) -> float:
    """How much of the query's and the memory's distinctive word weight they share (Dice, 0-1)."""
    return min(2 * mass / (query_mass + core_mass), 1.0)


def factor(m: Memory, boosts: Mapping[str, float], now: datetime, stale: bool) -> float:
    """What multiplies a memory's word score: its type's boost, its recency, its staleness."""
    return weight(m.type, epoch(m.updated or m.created), boosts, now, stale)


def weight(kind: str, when: Optional[float], boosts: Mapping[str, float], now: datetime, stale: bool) -> float:
    """:func:`factor` of a memory of type ``kind`` last written at ``when`` (seconds since the epoch):
    the derived index keeps both, so a memory can be ranked from its row, unread."""
    return boosts.get(kind, 1.0) * recency(when, now) * (STALE_FACTOR if stale else 1.0)


def path_only_score(overlap: float, floor: float) -> float:
    """A memory that only shares a path scores at most half the weakest word match (``floor``)."""
    return 0.5 * overlap * floor


_TERMS: Dict[Memory, Counter] = {}
_INDEXES: "OrderedDict[Tuple[int, ...], WordIndex]" = OrderedDict()


def _terms(m: Memory) -> Counter:
    counts = _TERMS.get(m)
    if counts is None:
        if len(_TERMS) > 200_000:
            _TERMS.clear()
        counts = _TERMS[m] = Counter(memory_terms(m))
    return counts


def word_index(memories: Sequence[Memory]) -> WordIndex:
    # Keyed by object identity: the cached index holds its memories, so while an entry
    # exists none of its ids can be reused, and identity is far cheaper than hashing
    # every field of 10,000 memories per query.
    key = tuple(map(id, memories))
    index = _INDEXES.get(key)
    if index is None:
        index = _INDEXES[key] = WordIndex(memories)
        while len(_INDEXES) > 4:
            _INDEXES.popitem(last=False)
    else:
        _INDEXES.move_to_end(key)
    return index


TYPE_BOOST = {"rejection": 1.6, "decision": 1.3}
STALE_FACTOR = 0.8
#: Reciprocal rank fusion: 1 / (RRF_K + rank) from each ranking, the dense one weighing DENSE_WEIGHT
#: times the lexical one. Measured on the ADR benchmark's tune half (bench/recall.py, docs/relevance.md):
#: the dense ranking finds more of the questions that share few words, and a small K lets a first
#: place count.
RRF_K = 10
DENSE_WEIGHT = 2.0
#: Dense neighbours less than this many standard deviations above the query's mean cosine are not
#: fused in: every text is a little similar to every other.
DENSE_FLOOR_Z = 1.5
#: How far down each ranking the fusion reads (see :func:`depth`).
DENSE_DEPTH = 100


def rank(memories: Iterable[Memory], query: str = "", limit: int = 10, *, paths: Sequence[str] = (),
         types_first: Sequence[str] = (), include_inactive: bool = False,
         blobs: Optional[Mapping[str, Optional[str]]] = None, now: Optional[datetime] = None,
         similarity: Optional[Mapping[str, float]] = None, only_types: Optional[Sequence[str]] = None,
         only_ids: Optional[AbstractSet[str]] = None, k1: float = 1.2, b: float = 0.75) -> List[Hit]:
    """The best ``limit`` memories for ``query`` and/or ``paths``, best first; ties by newest.

    Lexical (BM25 with path, type, recency and staleness factors) alone, or fused
    with a dense ranking by reciprocal rank fusion when ``similarity`` maps memory
    ids to the query's cosine. Word weights (idf) come from every memory given,
    also when ``only_types`` or ``only_ids`` keep the hits to some. ``blobs`` maps a path to
    its current blob id (None: the file is gone) and flags stale ``file`` memories;
    ``now`` fixes the recency clock.
    """
    terms = list(dict.fromkeys(tokenize(query)))
    wanted = [q for q in map(filter_path, paths) if q]
    if not (terms or wanted):
        return []
    index = word_index([m for m in memories if include_inactive or m.status == "active"])
    if not index.docs:
        return []
    keep = _keeper(only_types, only_ids)
    now = now or datetime.now(timezone.utc)
    scores: Dict[int, float] = {}
    matched: Dict[int, float] = {}
    for t in terms:
        weight = index.idf(t)
        for i in index.postings.get(t, ()):
            if keep is not None and not keep(index.docs[i]):
                continue
            scores[i] = scores.get(i, 0.0) + term_score(weight, index.counts[i][t], index.lengths[i], index.avg, k1, b)
            matched[i] = matched.get(i, 0.0) + weight
    # Words no memory uses say nothing about which memory matches (and would make every
    # match look weak in a small store), so only known words count towards the query's weight.
    query_mass = sum(index.idf(t) for t in terms if t in index.postings)
    if wanted:
        # A memory that only shares a path scores at most half the weakest lexical match.
        floor = min(scores.values()) if scores else 1.0
        for i, m in enumerate(index.docs):
            if keep is not None and not keep(m):
                continue
            overlap = path_overlap(m.paths, wanted)
            if overlap:
                scores[i] = scores[i] * path_factor(overlap) if i in scores else path_only_score(overlap, floor)
    boosts = type_boosts(types_first)
    stale_of = {i: is_stale(index.docs[i], blobs) for i in scores}
    lexical = {i: score * factor(index.docs[i], boosts, now, stale_of[i]) for i, score in scores.items()}
    fused = lexical
    if similarity is not None and terms:
        z = standardised(similarity)
        floor = dense_floor(len(similarity))
        dense = [(cos, i) for i, m in enumerate(index.docs)
                 if z.get(m.id, -1.0) >= floor and (keep is None or keep(m))
                 and (cos := similarity.get(m.id, 0.0))]
        nearest = [i for _, i in heapq.nlargest(DENSE_DEPTH, dense)]
        for i in nearest:
            stale_of.setdefault(i, is_stale(index.docs[i], blobs))
        fused = fuse(_ordered(lexical, index.docs, lexical)[:depth(limit)], nearest,
                     lambda i: factor(index.docs[i], boosts, now, stale_of[i]))
    hits: List[Hit] = []
    for i in _best(fused, index.docs, limit):
        m = index.docs[i]
        mass = matched.get(i, 0.0)
        match = match_of(mass, query_mass, index.core_mass(i)) if mass else 0.0
        cosine = similarity.get(m.id) if similarity is not None else None
        hits.append(Hit(m, fused[i], match, stale_of[i], cosine))
    return hits


def _keeper(only_types: Optional[Sequence[str]], only_ids: Optional[AbstractSet[str]]
            ) -> Optional[Callable[[Memory], bool]]:
    """Whether a memory may be a hit, under ``only_types`` and ``only_ids``; None when every memory may."""
    if only_types is None and only_ids is None:
        return None
    types = set(only_types) if only_types is not None else None
    return lambda m: (types is None or m.type in types) and (only_ids is None or m.id in only_ids)


def depth(limit: int) -> int:
    """How far down each ranking reciprocal rank fusion reads: DENSE_DEPTH, or ``limit`` when more are
    asked for. Past it a memory adds nothing from that ranking, so the index can fuse the first few of
    each (:mod:`gitmem.postings`) without ranking every memory that shares a word with the question."""
    return max(DENSE_DEPTH, limit)


def dense_floor(n: int) -> float:
    """How many deviations above the mean cosine a dense neighbour of ``n`` memories must stand: in a
    small store no cosine can stand that far out (at most sqrt(n - 1) deviations)."""
    return min(DENSE_FLOOR_Z, 0.7 * math.sqrt(max(n - 1, 0)))


def fuse(lexical: Sequence[K], dense: Sequence[K], dense_factor: Callable[[K], float]) -> Dict[K, float]:
    """Reciprocal rank fusion of the lexical order and the dense neighbours, each cut at its depth: 1 /
    (RRF_K + rank) from the first, DENSE_WEIGHT times a memory's :func:`factor` over (RRF_K + rank) from
    the second."""
    fused = {k: 1.0 / (RRF_K + r + 1) for r, k in enumerate(lexical)}
    for r, k in enumerate(dense):
        fused[k] = fused.get(k, 0.0) + DENSE_WEIGHT * dense_factor(k) / (RRF_K + r + 1)
    return fused


def type_boosts(types_first: Sequence[str]) -> Dict[str, float]:
    return {t: TYPE_BOOST.get(t, 1.2) for t in types_first}


def path_factor(overlap: float) -> float:
    """A word match on a memory about the files in play counts up to 1.6 times."""
    return 1 + 0.6 * overlap


def _best(scores: Mapping[int, float], docs: Sequence[Memory], limit: int) -> List[int]:
    """The ``limit`` best-scored docs, ties by newest, ordering only those that can make the cut
    (a query can match every memory in the store)."""
    pool: Iterable[int] = scores
    if len(scores) > limit > 0:
        cut = heapq.nlargest(limit, scores.values())[-1]
        pool = [i for i, score in scores.items() if score >= cut]
    return _ordered(pool, docs, scores)[:max(limit, 0)]


def _ordered(pool: Iterable[int], docs: Sequence[Memory], scores: Mapping[int, float]) -> List[int]:
    """``pool`` best-scored first, ties by newest: by id, newest first, then stably by score (two sorts
    on plain keys; one on a key that spells each id backwards cost 20 ms over 10,000 matches)."""
    return sorted(sorted(pool, key=lambda i: docs[i].id, reverse=True), key=scores.__getitem__, reverse=True)


def standardised(similarity: Optional[Mapping[str, float]]) -> Dict[str, float]:
    """Each cosine in standard deviations above the mean of all of them (empty when lexical)."""
    if not similarity or len(similarity) < 2:
        return {}
    mean, spread = deviation(list(similarity.values()))
    return {k: (v - mean) / spread for k, v in similarity.items()}


def deviation(values: Sequence[float]) -> Tuple[float, float]:
    """The mean of ``values`` and their standard deviation (1 where they are all equal), summed in
    order, so the index's ranking (:mod:`gitmem.recall`) standardises to the same bits."""
    mean = sum(values) / len(values)
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) or 1.0


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


def recency(when: Optional[float], now: datetime) -> float:
    """Up to +15% for a memory last written at ``when`` (seconds since the epoch), halving every 180
    days (:mod:`gitmem.postings` computes the same in SQL)."""
    if when is None:
        return 1.0
    age_days = max((now.timestamp() - when) / 86400.0, 0.0)
    return 1.0 + 0.15 * 0.5 ** (age_days / 180.0)


_EPOCH_DAY = date(1970, 1, 1).toordinal()


@lru_cache(maxsize=65536)
def epoch(stamp: Optional[str]) -> Optional[float]:
    """Seconds since the epoch of a stored ``YYYY-MM-DDTHH:MM:SSZ`` time (memoised: strptime is slow)."""
    if stamp is None:
        return None
    try:
        day = date(int(stamp[0:4]), int(stamp[5:7]), 1).toordinal() - _EPOCH_DAY + int(stamp[8:10]) - 1
        return ((day * 24 + int(stamp[11:13])) * 60 + int(stamp[14:16])) * 60 + int(stamp[17:19])  # calendar.timegm's sum
    except (TypeError, ValueError):
        return None
