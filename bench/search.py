"""Search and recall at 10,000 memories: relevance holds and queries stay fast.

The labelled corpus and queries of tests/fixtures/relevance (about 200
memories) are hidden among distractors written from the same vocabulary, up
to 10,000 memories. Measured side by side in one run:

- precision@5 of the labelled recall queries and check_proposal recall, alone vs at 10,000;
- one ranked query at 10,000 (index warm, as in the MCP server) vs loading the 10,000 memories;
- `gitmem search` in a new process vs `git cat-file --batch` of the same blobs.

Run: python bench/search.py [--size 10000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

import yaml  # noqa: E402
from common import AUTHOR, cat_file_batch, median_time, sample_repo  # noqa: E402
from test_search import FIXTURES, NOW, load_corpus  # noqa: E402  (the labelled relevance corpus)

from gitmem import Store  # noqa: E402
from gitmem import warm as warm_module  # noqa: E402
from gitmem.model import Memory, dump_yaml, memory_path, new_id  # noqa: E402
from gitmem.check import check_proposal  # noqa: E402
from gitmem.search import rank  # noqa: E402


def distractors(corpus, n: int, seed: int = 1):
    """``n`` notes of 10-25 words drawn from the corpus vocabulary: they share terms, not meaning."""
    rng = random.Random(seed)
    words = sorted({w for m in corpus for w in m.text.split() if w.isalpha() and len(w) > 2})
    base_ms = 1_700_000_000_000
    return [Memory(id=new_id(base_ms + i), type=rng.choice(("note", "fact", "action")), author=AUTHOR,
                   source="bench", created="2025-01-01T00:00:00Z",
                   text=" ".join(rng.choice(words) for _ in range(rng.randint(10, 25))).capitalize() + ".")
            for i in range(n)]


def relevance(pool, corpus_by_id) -> dict:
    queries = yaml.safe_load((FIXTURES / "queries.yaml").read_text())
    precisions, found = [], 0
    for q in queries["recall"]:
        top = [corpus_by_id.get(h.memory.id) for h in rank(pool, q["query"], 5, paths=q.get("paths", ()), now=NOW)]
        relevant = set(q["relevant"])
        precisions.append(len(relevant & set(top)) / min(5, len(relevant)))
    for q in queries["proposal"]:
        got = [corpus_by_id.get(h.memory.id) for h in check_proposal(pool, q["query"], paths=q.get("paths", ()),
                                                                     now=NOW)]
        found += q["relevant"][0] in got
    return {"precision_at_5": sum(precisions) / len(precisions), "proposal_recall": found / len(queries["proposal"]),
            "queries": len(precisions) + len(queries["proposal"])}


def seeded(pool) -> Store:
    store = Store.open(sample_repo("search"))
    commit = store.commit_tree({memory_path(m): dump_yaml(m) for m in pool}, "seed", AUTHOR, base=None)
    store.move_ref(None, commit, "bench seed")
    subprocess.run(["git", "-C", store.repo.workdir, "repack", "-adq"], check=True)
    return store


def run(size: int = 10_000) -> dict:
    corpus = load_corpus()
    corpus_by_id = {m.id: k for k, m in corpus.items()}
    alone = list(corpus.values())
    pool = alone + distractors(alone, size - len(alone))
    small, large = relevance(alone, corpus_by_id), relevance(pool, corpus_by_id)

    store = seeded(pool)
    query = "why did we reject redis for the job queue"
    warm_module.forget_warm()
    load = median_time(lambda: Store.open(store.repo.workdir).memories(), 5)
    memories = sorted(Store.open(store.repo.workdir).memories().values(), key=lambda m: m.id)
    rank(memories, query)  # build the index once, as a long-lived server does
    warm = median_time(lambda: rank(memories, query), 20)
    env = {**os.environ, "PYTHONPATH": os.path.join(HERE, "..")}
    argv = [sys.executable, "-m", "gitmem", "-C", store.repo.workdir, "search", query]

    def cli():
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)

    cli()  # the on-disk blob cache is a derived index: built once, as by any first read
    cli_t = median_time(cli, 5)
    blobs = [b for _, b in store.snapshot().entries()]
    cat = min(cat_file_batch(store.repo.workdir, blobs) for _ in range(5))
    return {
        "memories": len(pool),
        "alone": small, "at_size": large,
        "precision_ratio": large["precision_at_5"] / small["precision_at_5"],
        "query_ms_warm": warm * 1e3, "load_ms": load * 1e3, "query_ratio_to_load": warm / load,
        "cli_search_ms": cli_t * 1e3, "cat_file_batch_ms": cat * 1e3, "cli_ratio_to_cat_file": cli_t / cat,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    t0 = time.perf_counter()
    r = run(args.size)
    if args.json:
        print(json.dumps(r, indent=2))
        return
    a, b = r["alone"], r["at_size"]
    print(f"precision@5 {a['precision_at_5']:.3f} alone -> {b['precision_at_5']:.3f} at {r['memories']:,} "
          f"(x{r['precision_ratio']:.2f}); proposal recall {a['proposal_recall']:.3f} -> {b['proposal_recall']:.3f}")
    print(f"one query at {r['memories']:,}: {r['query_ms_warm']:.1f} ms warm vs load {r['load_ms']:.1f} ms "
          f"(x{r['query_ratio_to_load']:.2f}); `gitmem search` {r['cli_search_ms']:.0f} ms vs cat-file --batch "
          f"{r['cat_file_batch_ms']:.0f} ms (x{r['cli_ratio_to_cat_file']:.2f})  [{time.perf_counter() - t0:.0f}s]")


if __name__ == "__main__":
    main()
