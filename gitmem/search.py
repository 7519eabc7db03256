"""Ranking memories against a query: pure functions over plain data.

BM25 over title, text, reason, tags and paths. Every interface that ranks
(`search`, MCP `recall`, the context tail) goes through :func:`rank`.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Dict, Iterable, List, Sequence

from .model import Memory

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an and are as at be by do for from has have in is it its of on or that the this to was we with".split()
)


def tokenize(text: str) -> List[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


def memory_terms(m: Memory) -> List[str]:
    parts = [m.title or "", m.text, m.reason or "", " ".join(m.tags), " ".join(m.paths)]
    return tokenize(" ".join(parts))


@dataclass(frozen=True)
class Hit:
    memory: Memory
    score: float


def rank(memories: Iterable[Memory], query: str, limit: int = 10, k1: float = 1.2, b: float = 0.75) -> List[Hit]:
    """The best ``limit`` memories for ``query`` by BM25, best first; ties by newest."""
    docs = [(m, Counter(memory_terms(m))) for m in memories]
    terms = set(tokenize(query))
    if not docs or not terms:
        return []
    avg = sum(sum(c.values()) for _, c in docs) / len(docs) or 1.0
    df: Dict[str, int] = {t: sum(1 for _, c in docs if t in c) for t in terms}
    n = len(docs)
    hits: List[Hit] = []
    for m, counts in docs:
        length = sum(counts.values())
        score = 0.0
        for t in terms:
            tf = counts.get(t, 0)
            if not tf:
                continue
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avg))
        if score > 0:
            hits.append(Hit(m, score))
    hits.sort(key=lambda h: (-h.score, _neg(h.memory.id)))
    return hits[:limit]


def _neg(memory_id: str) -> Sequence[int]:
    return [-ord(c) for c in memory_id]
