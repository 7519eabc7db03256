"""Hybrid recall at scale: what a search costs with the default encoders once every memory has its vectors.

A store is seeded in one commit (bench/common.seeded_store) and each memory's vector for each installed
encoder (e5, and MiniLM where it is installed) is written into the derived index as a random unit row,
under the key recall looks it up by (the hash of the encoder's name and the text embedded). So the backlog
costs nothing here and the figures are the ranking's and the index's, not the encoders' quality; the
question is still embedded by the real encoders, as a search embeds it. Side by side in one run:

- whole processes: `gitmem search` with the encoders against the same search by words alone
  (`GITMEM_ENCODER=none`) and against `gitmem --version`;
- in one process, warm (what an MCP server does per call): `gitmem.recall.recall` with the encoders against
  by words alone, interleaved question by question, and the part of the first that embeds the questions.

Run: python bench/hybrid.py [--sizes 10000,100000] [--runs 5] [--json]
No Messages API model is involved.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from common import median_time, seeded_store  # noqa: E402

from gitmem.embedding import default_encoder, document_text, english_encoder, mostly_latin  # noqa: E402
from gitmem.recall import vector_key  # noqa: E402

QUESTIONS = ("how do retries work for service 42", "which queue does module 7 use", "retry policy for queues",
             "what about service 13")
HYBRID = {**os.environ, "GITMEM_ENCODER": "auto", "PYTHONPATH": os.path.join(HERE, "..")}
WORDS = {**HYBRID, "GITMEM_ENCODER": "none"}


def _vectors(store) -> List[str]:
    """Write a random unit vector for every memory under each installed encoder; the encoders' names."""
    import numpy as np

    os.environ["GITMEM_ENCODER"] = "auto"
    encoders = [e for e in (default_encoder(), english_encoder()) if e is not None]
    if not encoders:
        raise SystemExit("no sentence encoder is installed: hybrid recall cannot be measured here")
    rng = np.random.default_rng(0)
    memories = list(store.memories().values())
    for enc in encoders:
        rows = {}
        for m in memories:
            text = document_text(m)
            if enc is not encoders[0] and not mostly_latin(text):
                continue
            v = rng.standard_normal(enc.dim).astype(np.float32)
            rows[vector_key(enc, text)] = (v / np.linalg.norm(v)).tobytes()
        store.warm.index.put_vectors(enc.name, rows)
    return [e.name for e in encoders]


def _process(argv: List[str], cwd: str, env: Dict[str, str], runs: int) -> float:
    return median_time(lambda: subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL, check=True), runs)


def measure(n: int, runs: int) -> Dict[str, object]:
    from gitmem import recall as recall_module
    from gitmem.recall import recall

    store = seeded_store(n, "hybrid")
    root = store.repo.workdir
    encoders = _vectors(store)
    search = [sys.executable, "-m", "gitmem", "search", QUESTIONS[0]]
    for env in (HYBRID, WORDS):  # warm: the index is built, every vector key filed
        subprocess.run(search, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    cli = _process(search, root, HYBRID, runs)
    cli_words = _process(search, root, WORDS, runs)
    version = _process([sys.executable, "-m", "gitmem", "--version"], root, HYBRID, runs)
    warm: Dict[str, List[float]] = {"auto": [], "none": []}
    for q in QUESTIONS:  # first calls: the process's matrices and models
        recall(store, q, paths=[])
    embed = []
    for r in range(runs):
        for q in QUESTIONS:
            question = f"{q} {r}"  # a new question each time: nothing is embedded twice
            for mode in ("auto", "none"):
                os.environ["GITMEM_ENCODER"] = mode
                t0 = time.perf_counter()
                recall(store, question, paths=[])
                warm[mode].append(time.perf_counter() - t0)
            os.environ["GITMEM_ENCODER"] = "auto"
            recall_module._QUERY.clear()
            t0 = time.perf_counter()
            for enc in (default_encoder(), english_encoder()):
                if enc is not None:
                    recall_module._query_vector(enc, question + " again")
            embed.append(time.perf_counter() - t0)
    hybrid_ms, words_ms = statistics.median(warm["auto"]) * 1e3, statistics.median(warm["none"]) * 1e3
    return {"memories": n, "encoders": encoders, "cli_search_s": cli, "cli_search_words_s": cli_words,
            "version_s": version, "cli_ratio_words": cli / cli_words, "cli_ratio_version": cli / version,
            "warm_recall_ms": hybrid_ms, "warm_recall_words_ms": words_ms, "warm_ratio_words": hybrid_ms / words_ms,
            "embed_questions_ms": statistics.median(embed) * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [measure(int(n), args.runs) for n in args.sizes.split(",")]
    if args.json:
        print(json.dumps({"sizes": rows, "backend": "none (no model involved)"}, indent=2))
        return
    print("medians; random unit vectors, questions embedded by the real encoders; no Messages API model")
    print(f"{'memories':>9}  {'CLI hybrid':>10}  {'by words':>8}  {'ratio':>5}  {'/--version':>10}  "
          f"{'warm hybrid':>11}  {'by words':>8}  {'ratio':>5}  {'embedding':>9}")
    for r in rows:
        print(f"{r['memories']:>9,}  {r['cli_search_s']:>9.2f}s  {r['cli_search_words_s']:>7.3f}s  "
              f"{r['cli_ratio_words']:>5.1f}  {r['cli_ratio_version']:>10.1f}  {r['warm_recall_ms']:>9.1f}ms  "
              f"{r['warm_recall_words_ms']:>6.1f}ms  {r['warm_ratio_words']:>5.1f}  {r['embed_questions_ms']:>7.1f}ms")


if __name__ == "__main__":
    main()
