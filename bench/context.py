"""Context-build benchmark: build time at 100 vs 10,000 memories, and vs `git cat-file --batch`.

Run: python bench/context.py [--sizes 100,10000] [--json]
Measured side by side on the same machine: the ratio 10,000 / 100 shows how the build grows with
memory; the ratio to `git cat-file --batch` (printing the same blobs) shows what the build costs
on top of reading them. "cached" is a new process's view (the on-disk parsed-blob cache present,
nothing in memory); "warm" is a second build in the same process.
"""

from __future__ import annotations

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import cat_file_batch, median_time, seeded_store, sizes_main  # noqa: E402

from gitmem import store as store_module  # noqa: E402
from gitmem import warm as warm_module  # noqa: E402
from gitmem import context as context_module  # noqa: E402
from gitmem.context_inputs import build  # noqa: E402
from gitmem.demo import sample_guide  # noqa: E402

QUERY = "which queue does service 42 use for retries?"


def measure(n: int) -> dict:
    s = seeded_store(n, "context")
    root = s.repo.workdir
    with open(os.path.join(root, "AGENTS.md"), "w", encoding="utf-8") as f:
        f.write(sample_guide())
    subprocess.run(["git", "-C", root, "repack", "-adq"], check=True)
    blob_ids = [b for _, b in s.snapshot().entries()]
    cat = min(cat_file_batch(root, blob_ids) for _ in range(5))
    s.memories()  # write the on-disk cache once, as any earlier gitmem command would have

    def cached(budget):
        def go():
            warm_module.forget_warm()
            context_module._RENDERED.clear()  # nothing rendered or counted yet, as in a new process
            ctx = build(store_module.Store.open(root), query=QUERY, budget=budget)
            assert ctx.memory_commit
        return go

    warm_store = store_module.Store.open(root)
    build(warm_store, query=QUERY)
    repeat = 3 if n > 1000 else 10
    return {
        "memories": n,
        "cat_file_batch_ms": cat * 1e3,
        "build_cached_ms": median_time(cached(None), repeat) * 1e3,
        "build_cached_budget_ms": median_time(cached(50_000), repeat) * 1e3,
        "build_warm_ms": median_time(lambda: build(warm_store, query=QUERY, budget=None), repeat) * 1e3,
        "body_tokens": build(warm_store, query=QUERY, budget=None).total_tokens,
    }


def run(sizes=(100, 10_000)) -> dict:
    small, large = (measure(n) for n in sizes)
    return {
        "small": small, "large": large,
        "growth_ratio_cached": large["build_cached_ms"] / small["build_cached_ms"],
        "growth_ratio_warm": large["build_warm_ms"] / small["build_warm_ms"],
        "ratio_to_cat_file_cached": large["build_cached_ms"] / large["cat_file_batch_ms"],
        "ratio_to_cat_file_warm": large["build_warm_ms"] / large["cat_file_batch_ms"],
    }


def show(sizes: tuple, result: dict) -> None:
    for key in ("small", "large"):
        r = result[key]
        print(f"{r['memories']:>6} memories: build {r['build_cached_ms']:8.1f} ms new process "
              f"({r['build_cached_budget_ms']:.1f} ms with the 50,000-token budget), {r['build_warm_ms']:8.1f} ms warm; "
              f"cat-file --batch {r['cat_file_batch_ms']:6.1f} ms; body {r['body_tokens']} tokens")
    print(f"{result['large']['memories']:,} / {result['small']['memories']:,}: "
          f"{result['growth_ratio_cached']:.1f}x (new process), {result['growth_ratio_warm']:.1f}x (warm)")
    print(f"build / cat-file --batch at {result['large']['memories']}: {result['ratio_to_cat_file_cached']:.2f} (new process), "
          f"{result['ratio_to_cat_file_warm']:.2f} (warm)")


if __name__ == "__main__":
    sizes_main(__doc__, run, show)
